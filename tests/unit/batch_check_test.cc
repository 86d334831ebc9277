// check_batch (core/backend/batch_check.h) without a backend: a batch that
// follows its block tables passes; each single inconsistency is refused.
#include "core/backend/batch_check.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace pvllm {
namespace {

// One sequence of 5 tokens (prefill) with blocks 2 and 0 of a 4-block pool
// of 4-token blocks, and a second decoding at position 6 with blocks 1, 3.
BatchMetadata good_batch() {
  BatchMetadata md;
  md.num_tokens = 6;
  md.num_seqs = 2;
  md.input_ids = {1, 2, 3, 4, 5, 9};
  md.positions = {0, 1, 2, 3, 4, 6};
  md.slot_mapping = {8, 9, 10, 11, 0, 3 * 4 + 2};
  md.query_start = {0, 5, 6};
  md.context_lens = {5, 7};
  md.max_blocks_per_seq = 2;
  md.block_tables = {2, 0, 1, 3};
  md.logits_rows = {4, 5};
  return md;
}

constexpr BatchLimits kLimits{/*num_blocks=*/4, /*block_size=*/4, /*vocab_size=*/64,
                              /*sliding_window=*/0};

TEST(BatchCheckTest, ABatchThatFollowsItsBlockTablesPasses) {
  const Status st = check_batch(good_batch(), kLimits);
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST(BatchCheckTest, EachInconsistencyIsInvalidArgument) {
  const std::pair<const char*, std::function<void(BatchMetadata*)>> cases[] = {
      {"token id past vocab", [](BatchMetadata* m) { m->input_ids[1] = 64; }},
      {"negative token id", [](BatchMetadata* m) { m->input_ids[1] = -1; }},
      {"slot outside the pool", [](BatchMetadata* m) { m->slot_mapping[0] = 16; }},
      {"slot not from the table", [](BatchMetadata* m) { m->slot_mapping[0] = 3; }},
      {"positions too short", [](BatchMetadata* m) { m->positions.pop_back(); }},
      {"position off its context", [](BatchMetadata* m) { m->positions[2] = 7; }},
      {"block id outside the pool", [](BatchMetadata* m) { m->block_tables[1] = 4; }},
      {"context past its table", [](BatchMetadata* m) { m->context_lens[0] = 9; }},
      {"context shorter than rows", [](BatchMetadata* m) { m->context_lens[0] = 4; }},
      {"query_start not to n", [](BatchMetadata* m) { m->query_start.back() = 5; }},
      {"query_start decreasing", [](BatchMetadata* m) { m->query_start[1] = 7; }},
      {"logits row past n", [](BatchMetadata* m) { m->logits_rows.push_back(6); }},
      {"block tables too short", [](BatchMetadata* m) { m->block_tables.pop_back(); }},
      {"negative num_tokens", [](BatchMetadata* m) { m->num_tokens = -1; }},
  };
  for (const auto& [what, mutate] : cases) {
    BatchMetadata md = good_batch();
    mutate(&md);
    EXPECT_EQ(check_batch(md, kLimits).code(), StatusCode::kInvalidArgument) << what;
  }
}

// With a sliding window, blocks wholly before the window may be released
// (-1) and are never read: the batch passes; without one it does not.
TEST(BatchCheckTest, ReleasedBlocksBeforeTheWindowAreAllowed) {
  BatchMetadata md = good_batch();
  md.block_tables[2] = -1;  // the decoding sequence's first block (positions 0-3)
  EXPECT_EQ(check_batch(md, kLimits).code(), StatusCode::kInvalidArgument);
  BatchLimits windowed = kLimits;
  windowed.sliding_window = 2;  // position 6 attends positions 5 and 6 only
  const Status st = check_batch(md, windowed);
  EXPECT_TRUE(st.ok()) << st.message();
}

}  // namespace
}  // namespace pvllm
