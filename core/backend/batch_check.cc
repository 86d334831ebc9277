// check_batch (batch_check.h).
#include "core/backend/batch_check.h"

#include <algorithm>
#include <string>

namespace pvllm {

Status check_batch(const BatchMetadata& md, const BatchLimits& limits) {
  const int32_t n = md.num_tokens;
  if (n < 0 || md.num_seqs < 0 || md.max_blocks_per_seq < 0) {
    return InvalidArgument("forward: negative num_tokens, num_seqs or max_blocks_per_seq");
  }
  if (md.input_ids.size() != static_cast<size_t>(n) ||
      md.positions.size() != static_cast<size_t>(n) ||
      md.slot_mapping.size() != static_cast<size_t>(n)) {
    return InvalidArgument("forward: input_ids, positions and slot_mapping must have num_tokens (" +
                           std::to_string(n) + ") entries");
  }
  if (md.query_start.size() != static_cast<size_t>(md.num_seqs) + 1 ||
      md.context_lens.size() != static_cast<size_t>(md.num_seqs) ||
      md.block_tables.size() !=
          static_cast<size_t>(md.num_seqs) * static_cast<size_t>(md.max_blocks_per_seq)) {
    return InvalidArgument(
        "forward: query_start needs num_seqs + 1 entries, context_lens num_seqs, block_tables "
        "num_seqs * max_blocks_per_seq");
  }
  if (md.query_start[0] != 0 || md.query_start[md.num_seqs] != n) {
    return InvalidArgument("forward: query_start must run from 0 to num_tokens");
  }
  const int64_t num_slots = static_cast<int64_t>(limits.num_blocks) * limits.block_size;
  for (int32_t s = 0; s < md.num_seqs; ++s) {
    const int32_t begin = md.query_start[s];
    const int32_t q_len = md.query_start[s + 1] - begin;
    const int32_t ctx = md.context_lens[s];
    const std::string seq = "forward: sequence " + std::to_string(s) + ": ";
    if (q_len < 0) return InvalidArgument(seq + "query_start decreases");
    if (ctx < q_len) return InvalidArgument(seq + "context_len is shorter than its query rows");
    if (static_cast<int64_t>(ctx) >
        static_cast<int64_t>(md.max_blocks_per_seq) * limits.block_size) {
      return InvalidArgument(seq + "context_len exceeds its block table");
    }
    const int32_t* table = md.block_tables.data() + static_cast<int64_t>(s) * md.max_blocks_per_seq;
    // With a sliding window, blocks wholly before the earliest position this
    // step attends may have been freed (-1): they are never read.
    const int32_t window = limits.sliding_window;
    const int32_t first_pos = window > 0 ? std::max(0, ctx - q_len - window + 1) : 0;
    for (int32_t b = first_pos / limits.block_size;
         b < (ctx + limits.block_size - 1) / limits.block_size; ++b) {
      if (table[b] < 0 || table[b] >= limits.num_blocks) {
        return InvalidArgument(seq + "block table entry " + std::to_string(b) + " (" +
                               std::to_string(table[b]) + ") is not a block id");
      }
    }
    for (int32_t j = 0; j < q_len; ++j) {
      const int32_t row = begin + j;
      const int32_t pos = ctx - q_len + j;
      if (md.positions[row] != pos) {
        return InvalidArgument(seq + "row " + std::to_string(row) + " has position " +
                               std::to_string(md.positions[row]) + ", its context implies " +
                               std::to_string(pos));
      }
      const int64_t slot = md.slot_mapping[row];
      if (slot < 0 || slot >= num_slots ||
          slot != static_cast<int64_t>(table[pos / limits.block_size]) * limits.block_size +
                      pos % limits.block_size) {
        return InvalidArgument(seq + "row " + std::to_string(row) + " has slot " +
                               std::to_string(slot) +
                               ", not the one its block table gives for its position");
      }
      if (md.input_ids[row] < 0 || md.input_ids[row] >= limits.vocab_size) {
        return InvalidArgument(seq + "token id " + std::to_string(md.input_ids[row]) +
                               " is outside the vocabulary");
      }
    }
  }
  for (int32_t row : md.logits_rows) {
    if (row < 0 || row >= n) {
      return InvalidArgument("forward: logits row " + std::to_string(row) + " is not a token row");
    }
  }
  return Status::Ok();
}

}  // namespace pvllm
