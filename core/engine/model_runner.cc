#include "core/engine/model_runner.h"

#include <algorithm>

namespace pvllm {

void prepare_batch(const ScheduledBatch& batch, const KvCacheManager& kv_cache, BatchMetadata* md) {
  const int32_t num_seqs = static_cast<int32_t>(batch.seqs.size());
  md->num_seqs = num_seqs;
  md->num_tokens = batch.num_batched_tokens;
  md->input_ids.clear();
  md->positions.clear();
  md->slot_mapping.clear();
  md->query_start.assign(1, 0);
  md->context_lens.clear();
  md->logits_rows.clear();

  int32_t max_blocks = 0;
  for (const ScheduledSeq& s : batch.seqs) {
    max_blocks = std::max(max_blocks, static_cast<int32_t>(s.seq->block_table.blocks.size()));
  }
  md->max_blocks_per_seq = max_blocks;
  md->block_tables.assign(static_cast<size_t>(num_seqs) * max_blocks, -1);

  for (int32_t i = 0; i < num_seqs; ++i) {
    const ScheduledSeq& s = batch.seqs[i];
    const Sequence& seq = *s.seq;
    const int32_t first = seq.num_computed_tokens;
    const int32_t end = first + s.num_new_tokens;
    for (int32_t pos = first; pos < end; ++pos) {
      md->input_ids.push_back(seq.token_ids[pos]);
      md->positions.push_back(pos);
      md->slot_mapping.push_back(kv_cache.slot(seq.block_table, pos));
    }
    md->query_start.push_back(static_cast<int32_t>(md->input_ids.size()));
    md->context_lens.push_back(end);
    std::copy(seq.block_table.blocks.begin(), seq.block_table.blocks.end(),
              md->block_tables.begin() + static_cast<size_t>(i) * max_blocks);
    if (s.samples_next_token) md->logits_rows.push_back(md->query_start.back() - 1);
  }
  md->num_tokens = static_cast<int32_t>(md->input_ids.size());
}

}  // namespace pvllm
