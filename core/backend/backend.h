// Backend: the only part of pvllm that touches K/V memory and runs the
// model. Everything above it (scheduler, block manager, sampler, engine) is
// host C++ that never sees device memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/kv/block_copy.h"
#include "core/kv/kv_cache_dtype.h"
#include "core/sample/sampler.h"

namespace pvllm {

// What one forward pass needs, built on the host by the ModelRunner from a
// ScheduledBatch. Tokens of all sequences are flattened; sequence i owns
// rows [query_start[i], query_start[i + 1]).
struct BatchMetadata {
  int32_t num_tokens = 0;
  int32_t num_seqs = 0;
  std::vector<int32_t> input_ids;     // [num_tokens]
  std::vector<int32_t> positions;     // [num_tokens]
  std::vector<int64_t> slot_mapping;  // [num_tokens] KV slot each row writes
  std::vector<int32_t> query_start;   // [num_seqs + 1]
  std::vector<int32_t> context_lens;  // [num_seqs] tokens in context after this step
  int32_t max_blocks_per_seq = 0;
  // [num_seqs, max_blocks_per_seq], -1 padded. With a sliding window W the
  // KV manager releases the blocks wholly before a sequence's window, and
  // their entries are -1 too (kReleasedBlock): a backend never reads an
  // entry before block max(0, context_len - q_len - W + 1) / block_size, the
  // block of the first key the sequence's first row attends.
  std::vector<int32_t> block_tables;
  std::vector<int32_t> logits_rows;  // [num_logits] rows whose logits are returned
};

// Swap traffic between the KV pool and the backend's host swap space.
enum class SwapDirection { kOut, kIn };  // kOut: pool block -> swap block; kIn: back

// What preempting costs on this backend, for preemption_mode auto: an
// estimate, from its throughput figures, not a measurement.
struct PreemptionCosts {
  double recompute_seconds_per_token = 0.0;  // computing one token again
  double swap_seconds_per_block = 0.0;       // one block out and back in
  size_t block_bytes = 0;                    // what one block moves each way
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // One engine step: runs the model over `md` (writes K/V of every row at its
  // slot, attends over each sequence's block table) and draws a token for
  // every sample row, out[i] for rows[i] (out is resized to rows.size()),
  // with core/sample/sampler.h's rules, each row's `allowed` mask included
  // (structured output: every backend draws with it); logprobs only for rows
  // whose params ask.
  // Only the results reach the host: logits stay where they were computed.
  // On failure *out is unspecified; the K/V rows of `md` may be written in
  // part, and running the same batch again writes the same values.
  virtual Status forward_sample(const BatchMetadata& md, std::span<const SampleRow> rows,
                                std::vector<SampleResult>* out) = 0;
  // Runs the model over `md` as forward_sample does, and writes the raw
  // logits of the rows in md.logits_rows to `logits` ([num_logits,
  // vocab_size], fp32, host memory). For callers that need full rows
  // (prompt logprobs, tests): on a GPU it copies the whole vocabulary.
  virtual Status forward(const BatchMetadata& md, float* logits) = 0;
  // Copies whole blocks (every layer's K and V) for copy-on-write.
  virtual Status copy_blocks(const std::vector<BlockCopy>& copies) = 0;
  // Preemption by swap: host memory for the blocks `bytes` buys
  // (swap_pool_blocks; called once, at engine create; *num_blocks receives
  // the count), and whole-block copies between the pool and it (out: src a
  // pool block, dst a swap block; in: the reverse). The default:
  // UNSUPPORTED, for a backend without swap.
  virtual Status reserve_swap_space(int64_t bytes, int32_t* num_blocks) {
    return Unsupported(name() + " cannot swap K/V blocks to the host");
  }
  virtual Status swap_blocks(const std::vector<BlockCopy>& copies, SwapDirection direction) {
    return Unsupported(name() + " cannot swap K/V blocks to the host");
  }
  virtual PreemptionCosts preemption_costs() const { return {}; }
  virtual int32_t num_blocks() const = 0;
  virtual int32_t block_size() const = 0;
};

struct BackendOptions {
  int32_t num_blocks = 0;
  int32_t block_size = 16;
  int32_t num_threads = 0;  // 0 = all cores
  // What the KV pool stores; kAuto is the backend's default (fp32 on the
  // CPU). A backend refuses a dtype it does not serve as UNSUPPORTED.
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
};

// Bytes of K and V one block holds across all layers when stored as
// `dtype` (resolved: not kAuto), by kv_head_block_bytes' rule.
size_t kv_bytes_per_block(const struct ModelConfig& config, int32_t block_size, KvCacheDtype dtype);

// The dtype the CUDA backend runs in for its `dtype` option (1 bf16, 2 fp16,
// 3 fp32; 0 auto: bf16, or fp16 when the checkpoint's embedding is fp16).
// The backend at create and the estimate for device "cuda" both ask here.
DType cuda_activation_dtype(int32_t option, DType checkpoint);

// The one KV sizing rule, for every backend and the memory estimate:
// `num_blocks` > 0 asks for exactly that many blocks; otherwise the pool is
// the whole blocks of `bytes_per_block` that `budget_bytes` buys (a budget
// below one block, or negative, buys 0). Either is clamped to
// INT32_MAX / block_size, so that every slot id fits an int32.
int32_t kv_pool_blocks(int32_t num_blocks, double budget_bytes, size_t bytes_per_block,
                       int32_t block_size);

// The swap space's blocks: what `swap_space_bytes` buys, or as many as the
// KV pool has when it is 0. Clamped as kv_pool_blocks clamps.
int32_t swap_pool_blocks(int64_t swap_space_bytes, size_t bytes_per_block, int32_t pool_blocks,
                         int32_t block_size);

}  // namespace pvllm
