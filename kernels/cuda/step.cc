// One step through the Backend interface: forward and forward_sample check
// the batch, enqueue the model (enqueue_forward: a pure-decode batch
// replays its bucket's graph, anything else runs eagerly), then either
// copy the wanted logits rows out or sample on the device (the plan's
// inputs over in one copy, the tokens and logprobs back in one), and leave
// the stream clean after a failure.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "core/base/log.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/sampling.h"

namespace pvllm::cuda {

Status CudaBackend::forward(const BatchMetadata& md, float* logits) {
  // The current device is per host thread; step() may run on any thread.
  PVLLM_CUDA_TRY(cudaSetDevice(opt_.device_index), "cudaSetDevice");
  if (logits == nullptr && !md.logits_rows.empty()) {
    return InvalidArgument("forward: logits is NULL but logits_rows is not empty");
  }
  Status st = enqueue_forward(md);
  if (st.ok()) st = copy_logits(md, logits);
  return finish_step(st);
}

Status CudaBackend::forward_sample(const BatchMetadata& md, std::span<const SampleRow> rows,
                                   std::vector<SampleResult>* out) {
  PVLLM_CUDA_TRY(cudaSetDevice(opt_.device_index), "cudaSetDevice");
  PVLLM_RETURN_IF_ERROR(validate_sample_rows(rows, static_cast<int32_t>(md.logits_rows.size())));
  Status st = enqueue_forward(md);
  if (st.ok()) st = sample(rows, out);
  return finish_step(st);
}

// After a failed step, leaves the stream idle and clears a non-sticky error
// so that the next batch starts clean.
Status CudaBackend::finish_step(Status st) {
  if (!st.ok()) {
    cudaStreamSynchronize(stream_);
    cudaGetLastError();
  }
  return st;
}

// Enqueues the model over `md` on stream_ without waiting: a pure-decode
// batch replays its bucket's graph, anything else (and a bucket whose
// capture failed) runs eagerly. Sets logits_row_of_.
Status CudaBackend::enqueue_forward(const BatchMetadata& md) {
  PVLLM_RETURN_IF_ERROR(check_batch_fits(md));
  const int32_t t = md.num_tokens, s = md.num_seqs;
  // Leading single-row sequences take the decode kernel.
  int32_t num_decode = 0;
  while (num_decode < s && md.query_start[num_decode + 1] - md.query_start[num_decode] == 1) {
    ++num_decode;
  }
  if (num_decode == s && t == s && s <= graph_max_batch_) {
    const int32_t batch = graph_bucket(s);
    DecodeGraph& g = graphs_[batch];
    if (!g.failed) {
      PVLLM_RETURN_IF_ERROR(stage_graph_inputs(md, batch));
      if (g.exec == nullptr) {
        const Status cs = capture(batch, &g);
        if (!cs.ok()) {
          // Degrade, never fail: this size runs eagerly from now on.
          g.failed = true;
          cudaGetLastError();
          log_warning("CUDA graph capture for decode batches of " + std::to_string(batch) +
                      " failed (" + cs.message() + "); they run without a graph from now on");
        }
      }
      if (g.exec != nullptr) {
        PVLLM_CUDA_TRY(cudaGraphLaunch(g.exec, stream_), "launching the decode graph");
        logits_row_of_.assign(md.logits_rows.begin(), md.logits_rows.end());
        return Status::Ok();
      }
    }
  }
  PVLLM_RETURN_IF_ERROR(enqueue_eager(md, num_decode));
  logits_row_of_.resize(md.logits_rows.size());
  std::iota(logits_row_of_.begin(), logits_row_of_.end(), 0);
  return Status::Ok();
}

// Copies the logits of md.logits_rows from where this step left them to
// host memory and waits for the step.
Status CudaBackend::copy_logits(const BatchMetadata& md, float* logits) {
  const size_t row_bytes = static_cast<size_t>(cfg_.vocab_size) * sizeof(float);
  const auto* dev_logits = logits_.as<unsigned char>();
  for (size_t i = 0; i < logits_row_of_.size(); ++i) {
    // Runs of consecutive rows go in one copy (usually all of them).
    size_t j = i + 1;
    while (j < logits_row_of_.size() && logits_row_of_[j] == logits_row_of_[j - 1] + 1) ++j;
    PVLLM_CUDA_TRY(cudaMemcpyAsync(reinterpret_cast<unsigned char*>(logits) + i * row_bytes,
                                   dev_logits + static_cast<size_t>(logits_row_of_[i]) * row_bytes,
                                   (j - i) * row_bytes, cudaMemcpyDeviceToHost, stream_),
                   "copying logits");
    i = j - 1;
  }
  PVLLM_CUDA_TRY(cudaStreamSynchronize(stream_), "forward");
  return Status::Ok();
}

// Draws `rows` from this step's logits on the device: the plan's inputs go
// over in one copy, the tokens and asked-for logprobs come back in one, and
// nothing else crosses. Waits for the step.
Status CudaBackend::sample(std::span<const SampleRow> rows, std::vector<SampleResult>* out) {
  if (rows.empty()) {
    out->clear();
    PVLLM_CUDA_TRY(cudaStreamSynchronize(stream_), "forward");
    return Status::Ok();
  }
  const int32_t vocab = cfg_.vocab_size;
  plan_.build(rows, logits_row_of_, vocab);
  const std::vector<unsigned char>& in = plan_.inputs();
  const size_t out_bytes = plan_.output_bytes();
  const size_t ws_bytes = pvllm_cuda_sampling_workspace_bytes(plan_.num_penalty_slots(), vocab);
  PVLLM_RETURN_IF_ERROR(sample_in_host_.reserve(in.size(), "sampling inputs"));
  PVLLM_RETURN_IF_ERROR(sample_in_dev_.reserve(in.size(), "sampling inputs"));
  PVLLM_RETURN_IF_ERROR(sample_out_dev_.reserve(out_bytes, "sampled tokens"));
  PVLLM_RETURN_IF_ERROR(sample_out_host_.reserve(out_bytes, "sampled tokens"));
  if (ws_bytes > 0) PVLLM_RETURN_IF_ERROR(sample_ws_.reserve(ws_bytes, "penalized logits"));

  std::memcpy(sample_in_host_.get(), in.data(), in.size());
  PVLLM_CUDA_TRY(cudaMemcpyAsync(sample_in_dev_.get(), sample_in_host_.get(), in.size(),
                                 cudaMemcpyHostToDevice, stream_),
                 "copying sampling inputs");
  DeviceSamplingParams p;
  plan_.bind(sample_in_dev_.get(), sample_out_dev_.get(), logits_.as<float>(), sample_ws_.get(),
             sample_ws_.bytes(), &p);
  PVLLM_KERNEL_TRY(pvllm_cuda_sample(p, stream_), "sampling");
  PVLLM_CUDA_TRY(cudaMemcpyAsync(sample_out_host_.get(), sample_out_dev_.get(), out_bytes,
                                 cudaMemcpyDeviceToHost, stream_),
                 "copying sampled tokens");
  PVLLM_CUDA_TRY(cudaStreamSynchronize(stream_), "forward and sampling");
  plan_.read_results(rows, sample_out_host_.get(), out);
  return Status::Ok();
}

}  // namespace pvllm::cuda
