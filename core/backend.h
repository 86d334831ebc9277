// Backend: the only part of pvllm that touches K/V memory and runs the
// model. Everything above it (scheduler, block manager, sampler, engine) is
// host C++ that never sees device memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/block_manager.h"
#include "core/status.h"

namespace pvllm {

struct Model;

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
  std::vector<int32_t> block_tables;  // [num_seqs, max_blocks_per_seq], -1 padded
  std::vector<int32_t> logits_rows;   // [num_logits] rows whose logits are returned
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Runs the model over `md`: writes K/V of every row at its slot, attends
  // over each sequence's block table, and writes logits for the rows in
  // md.logits_rows to `logits` ([num_logits, vocab_size], fp32).
  virtual Status forward(const BatchMetadata& md, float* logits) = 0;
  // Copies whole blocks (every layer's K and V) for copy-on-write.
  virtual Status copy_blocks(const std::vector<BlockCopy>& copies) = 0;
  virtual int32_t num_blocks() const = 0;
  virtual int32_t block_size() const = 0;
};

struct BackendOptions {
  int32_t num_blocks = 0;
  int32_t block_size = 16;
  int32_t num_threads = 0;  // 0 = all cores
};

// Bytes of K and V one block holds across all layers, with fp32 K/V
// (the CPU backend's cache dtype).
size_t kv_bytes_per_block_f32(const struct ModelConfig& config, int32_t block_size);

}  // namespace pvllm
