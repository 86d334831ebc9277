// Decode CUDA graphs: one per batch-size bucket (kGraphBuckets), captured
// on first use after an eager warm-up run, over static inputs laid out for
// the largest bucket (graph_layout_) that stage_graph_inputs rewrites,
// padded to the bucket, before every replay. enqueue_forward (step.cc)
// picks graph or eager.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/cuda/cuda_backend.h"

namespace pvllm::cuda {

// The decode batch-size bucket of `num_seqs` sequences: the smallest that
// holds them.
int32_t graph_bucket(int32_t num_seqs) {
  for (int32_t b : kGraphBuckets) {
    if (b >= num_seqs) return b;
  }
  return 0;
}

Status CudaBackend::capture(int32_t batch, DecodeGraph* g) {
  const auto* dev = graph_dev_.as<unsigned char>();
  const MetaLayout& layout = graph_layout_;
  StepArgs a = step_inputs(dev, layout);
  bind_rope(dev, layout, &a);
  a.max_blocks_per_seq = max_blocks_;
  a.num_tokens = batch;
  a.num_seqs = batch;
  a.num_decode = batch;
  // The split plan is fixed at capture, so it is made for the longest context.
  a.decode_max_context = max_blocks_ * opt_.block_size;
  a.num_logits = batch;  // every row; sampling reads the wanted ones

  // One eager run first, on the same static inputs: it loads every kernel
  // module (lazy loading) and lets cuBLAS pick and initialise its kernels
  // outside the capture, where none of that is allowed. It repeats exactly
  // the K/V writes the graph launch then makes (same rows, same slots).
  PVLLM_RETURN_IF_ERROR(run_model(a));
  PVLLM_CUDA_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
                 "beginning graph capture");
  const Status st = run_model(a);
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  if (!st.ok()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    return st;
  }
  PVLLM_CUDA_TRY(end, "capturing the decode graph for batch " + std::to_string(batch));
  const cudaError_t inst = cudaGraphInstantiate(&g->exec, graph, 0);
  cudaGraphDestroy(graph);
  if (inst != cudaSuccess) g->exec = nullptr;
  PVLLM_CUDA_TRY(inst, "instantiating the decode graph for batch " + std::to_string(batch));
  return Status::Ok();
}

// Writes the graph's static inputs for `md`, padded to `batch` rows: padding
// rows write no K/V (slot -1) and attend to nothing (context 0). The block
// tables go over at the width of the longest scheduled table, not
// max_model_len's: one 2-D copy into rows of the graph's [batch, max_blocks_]
// table (entries past a row's width are never read: its context ends before).
Status CudaBackend::stage_graph_inputs(const BatchMetadata& md, int32_t batch) {
  const int32_t s = md.num_seqs;
  const MetaLayout& layout = graph_layout_;
  auto* h = graph_host_.as<unsigned char>();
  auto* ids = reinterpret_cast<int32_t*>(h + layout.input_ids);
  auto* pos = reinterpret_cast<int32_t*>(h + layout.positions);
  auto* slots = reinterpret_cast<int64_t*>(h + layout.slots);
  auto* ctx = reinterpret_cast<int32_t*>(h + layout.context_lens);
  for (int32_t i = 0; i < batch; ++i) {
    const bool real = i < s;
    ids[i] = real ? md.input_ids[i] : 0;
    pos[i] = real ? md.positions[i] : 0;
    slots[i] = real ? md.slot_mapping[i] : -1;
    ctx[i] = real ? md.context_lens[i] : 0;
  }
  if (dynamic_rope_) {
    fill_freq_tables(md, batch, reinterpret_cast<int32_t*>(h + layout.freq_rows),
                     reinterpret_cast<float*>(h + layout.freq_table));
  }
  const int32_t width = std::max(md.max_blocks_per_seq, 1);
  auto* tables = reinterpret_cast<int32_t*>(h + layout.block_tables);  // [s, width] packed
  for (int32_t i = 0; i < s; ++i) {
    for (int32_t j = 0; j < width; ++j) {
      const int32_t b = j < md.max_blocks_per_seq
                            ? md.block_tables[static_cast<size_t>(i) * md.max_blocks_per_seq + j]
                            : 0;
      tables[static_cast<size_t>(i) * width + j] = b < 0 ? 0 : b;
    }
  }
  PVLLM_CUDA_TRY(
      cudaMemcpyAsync(graph_dev_.get(), h, layout.block_tables, cudaMemcpyHostToDevice, stream_),
      "copying graph inputs");
  const size_t row_bytes = static_cast<size_t>(width) * sizeof(int32_t);
  PVLLM_CUDA_TRY(
      cudaMemcpy2DAsync(graph_dev_.as<unsigned char>() + layout.block_tables,
                        static_cast<size_t>(max_blocks_) * sizeof(int32_t), tables, row_bytes,
                        row_bytes, static_cast<size_t>(s), cudaMemcpyHostToDevice, stream_),
      "copying graph block tables");
  return Status::Ok();
}

}  // namespace pvllm::cuda
