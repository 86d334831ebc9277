// SamplingPlan, the host half of device sampling, without a device: what it
// packs for each row (read back through bind() pointed at the host copy),
// the penalty tokens against an independent count, the logprob layout, and
// the results it reads from a device output written here by hand.
#include "kernels/cuda/sampling_plan.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <vector>

namespace pvllm {
namespace {

class SamplingPlanTest : public ::testing::Test {
 protected:
  SampleRow& add(int32_t logits_index, SamplingParams p, std::vector<int32_t> prompt = {1, 2},
                 std::vector<int32_t> output = {}) {
    params_.push_back(p);
    tokens_.push_back(std::move(prompt));
    const std::vector<int32_t>& pr = tokens_.back();
    tokens_.push_back(std::move(output));
    SampleRow r;
    r.logits_index = logits_index;
    r.params = &params_.back();
    r.seed = 1000 + rows_.size();
    r.sample_index = static_cast<int32_t>(rows_.size()) % 3;
    r.step = static_cast<int32_t>(rows_.size()) * 7;
    r.prompt_ids = pr;
    r.output_ids = tokens_.back();
    rows_.push_back(r);
    return rows_.back();
  }

  // Builds the plan and binds it to its own host copy, so the packed arrays
  // can be read through the pointers a kernel would get.
  DeviceSamplingParams build(std::vector<int32_t> device_rows, int32_t vocab) {
    plan_.build(rows_, device_rows, vocab);
    DeviceSamplingParams p;
    outputs_.assign(plan_.output_bytes(), 0);
    plan_.bind(plan_.inputs().data(), outputs_.data(), nullptr, nullptr, 0, &p);
    return p;
  }

  // Token -> count in the output, over the tokens the penalties of row r
  // act on, as read from the packed entries.
  std::map<int32_t, int32_t> entries(const DeviceSamplingParams& p, int32_t r) {
    std::map<int32_t, int32_t> m;
    for (int32_t e = p.penalty_offsets[r]; e < p.penalty_offsets[r + 1]; ++e) {
      EXPECT_EQ(m.count(p.penalty_token_ids[e]), 0u) << "token listed twice";
      m[p.penalty_token_ids[e]] = p.penalty_output_counts[e];
    }
    return m;
  }

  std::deque<SamplingParams> params_;
  std::deque<std::vector<int32_t>> tokens_;
  std::vector<SampleRow> rows_;
  SamplingPlan plan_;
  std::vector<unsigned char> outputs_;
};

TEST_F(SamplingPlanTest, PacksEveryRowsParametersAndItsDeviceLogitsRow) {
  SamplingParams a;
  a.temperature = 0.7f;
  a.top_k = 40;
  a.top_p = 0.9f;
  a.min_p = 0.05f;
  SamplingParams b;
  b.temperature = 0.0f;
  add(1, a);
  add(0, b);
  add(1, b);  // two rows may read one logits row
  const DeviceSamplingParams p = build({7, 3}, 100);
  ASSERT_EQ(p.num_rows, 3);
  EXPECT_EQ(p.vocab, 100);
  const std::vector<int32_t> want_rows = {3, 7, 3};
  for (int32_t r = 0; r < 3; ++r) {
    const SamplingParams& s = *rows_[r].params;
    EXPECT_EQ(p.logits_row[r], want_rows[r]) << r;
    EXPECT_EQ(p.temperature[r], s.temperature) << r;
    EXPECT_EQ(p.top_k[r], s.top_k) << r;
    EXPECT_EQ(p.top_p[r], s.top_p) << r;
    EXPECT_EQ(p.min_p[r], s.min_p) << r;
    EXPECT_EQ(p.seed[r], rows_[r].seed) << r;
    EXPECT_EQ(p.sample_index[r], rows_[r].sample_index) << r;
    EXPECT_EQ(p.step[r], rows_[r].step) << r;
  }
  // Nothing asked for penalties or logprobs: those arrays are not sent.
  EXPECT_EQ(p.penalty_offsets, nullptr);
  EXPECT_EQ(p.num_logprobs, nullptr);
  EXPECT_EQ(p.num_penalty_slots, 0);
  EXPECT_EQ(plan_.output_bytes(), 16u) << "3 token ids, 16-byte aligned";
}

TEST_F(SamplingPlanTest, PenaltyTokensAreTheDistinctTokensWithOutputCounts) {
  SamplingParams rep;
  rep.repetition_penalty = 1.2f;
  SamplingParams additive;
  additive.presence_penalty = 0.5f;
  SamplingParams none;
  SamplingParams idle;  // presence on, but nothing generated yet
  idle.frequency_penalty = 0.3f;
  add(0, rep, {5, 9, 5, 200, -1}, {9, 9, 4});
  add(0, additive, {5, 6}, {6, 8, 6, 6, 100});
  add(0, none, {5}, {5});
  add(0, idle, {1, 2, 3}, {});
  add(0, rep, {}, {});  // no tokens at all
  const DeviceSamplingParams p = build({0}, 100);
  ASSERT_NE(p.penalty_offsets, nullptr);
  // Repetition acts on the prompt and the output; invalid ids are dropped.
  EXPECT_EQ(entries(p, 0), (std::map<int32_t, int32_t>{{4, 1}, {5, 0}, {9, 2}}));
  // Presence and frequency act on the output only.
  EXPECT_EQ(entries(p, 1), (std::map<int32_t, int32_t>{{6, 3}, {8, 1}}));
  EXPECT_TRUE(entries(p, 2).empty());
  EXPECT_TRUE(entries(p, 3).empty());
  EXPECT_TRUE(entries(p, 4).empty());
  // Only rows whose penalties change a logit get a workspace row.
  EXPECT_EQ(p.penalty_slot[0], 0);
  EXPECT_EQ(p.penalty_slot[1], 1);
  EXPECT_EQ(p.penalty_slot[2], -1);
  EXPECT_EQ(p.penalty_slot[3], -1);
  EXPECT_EQ(p.penalty_slot[4], -1);
  EXPECT_EQ(p.num_penalty_slots, 2);
  EXPECT_EQ(plan_.num_penalty_entries(), 5);
  EXPECT_EQ(p.repetition_penalty[0], 1.2f);
  EXPECT_EQ(p.presence_penalty[1], 0.5f);
  EXPECT_EQ(p.frequency_penalty[3], 0.3f);

  // A second build reuses the scratch: counts must not leak between steps.
  rows_.resize(1);
  const DeviceSamplingParams again = build({0}, 100);
  EXPECT_EQ(entries(again, 0), (std::map<int32_t, int32_t>{{4, 1}, {5, 0}, {9, 2}}));
}

TEST_F(SamplingPlanTest, LogprobsAreLaidOutPerAskingRowAndReadBack) {
  SamplingParams none;
  SamplingParams chosen;
  chosen.logprobs = 0;
  SamplingParams top3;
  top3.logprobs = 3;
  SamplingParams top20;
  top20.logprobs = 20;
  add(0, none);
  add(0, top3);
  add(0, chosen);
  add(0, top20);  // vocab 8: only 8 exist
  const DeviceSamplingParams p = build({0}, 8);
  ASSERT_NE(p.num_logprobs, nullptr);
  EXPECT_EQ(p.num_logprobs[0], -1);
  EXPECT_EQ(p.num_logprobs[1], 3);
  EXPECT_EQ(p.num_logprobs[2], 0);
  EXPECT_EQ(p.num_logprobs[3], 20);
  EXPECT_EQ(p.logprob_offsets[1], 0);
  EXPECT_EQ(p.logprob_offsets[2], 4);
  EXPECT_EQ(p.logprob_offsets[3], 5);
  EXPECT_EQ(plan_.num_logprob_entries(), 4 + 1 + 21);

  // What a device would write: token ids, then each asking row's pairs.
  for (int32_t r = 0; r < 4; ++r) p.token_ids[r] = 10 * r + 1;
  auto pair = [&](int32_t i, int32_t id, float lp) { p.logprobs_out[i] = {id, lp}; };
  pair(0, 11, -0.5f);
  pair(1, 2, -0.1f);
  pair(2, 11, -0.5f);
  pair(3, 7, -2.0f);
  pair(4, 21, -1.5f);
  for (int32_t j = 0; j < 9; ++j) pair(5 + j, j == 0 ? 31 : 8 - j, -0.25f * j);
  std::vector<SampleResult> out;
  plan_.read_results(rows_, outputs_.data(), &out);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].token_id, 1);
  EXPECT_TRUE(out[0].top_logprobs.empty());
  EXPECT_EQ(out[1].token_id, 11);
  EXPECT_FLOAT_EQ(out[1].logprob, -0.5f);
  ASSERT_EQ(out[1].top_logprobs.size(), 3u);
  EXPECT_EQ(out[1].top_logprobs[0].token_id, 2);
  EXPECT_EQ(out[1].top_logprobs[2].token_id, 7);
  EXPECT_FLOAT_EQ(out[1].top_logprobs[2].logprob, -2.0f);
  EXPECT_EQ(out[2].token_id, 21);
  EXPECT_FLOAT_EQ(out[2].logprob, -1.5f);
  EXPECT_TRUE(out[2].top_logprobs.empty());
  EXPECT_EQ(out[3].token_id, 31);
  ASSERT_EQ(out[3].top_logprobs.size(), 8u) << "no more than the vocabulary";
  EXPECT_EQ(out[3].top_logprobs[0].token_id, 7);
  EXPECT_EQ(out[3].top_logprobs[7].token_id, 0);
}

TEST_F(SamplingPlanTest, MasksGoWithTheirRowsInPenaltySlotsAndUnallowedResultsAreRedone) {
  const int32_t vocab = 130;                           // three words per mask, the last one partial
  std::vector<uint64_t> a = {0, uint64_t{1} << 3, 0};  // allows token 67
  std::vector<uint64_t> b = {0b110, 0, 0};             // allows 1 and 2
  std::vector<uint64_t> none = {0, 0, 0};
  SamplingParams plain;
  add(0, plain).allowed = a;
  add(0, plain);  // unmasked, no penalties: no slot
  add(1, plain).allowed = b;
  add(1, plain).allowed = none;
  const DeviceSamplingParams p = build({4, 5}, vocab);
  ASSERT_NE(p.allowed, nullptr);
  ASSERT_NE(p.penalty_slot, nullptr) << "a masked row is built in a slot";
  EXPECT_EQ(plan_.num_penalty_slots(), 3);
  EXPECT_GE(p.penalty_slot[0], 0);
  EXPECT_EQ(p.penalty_slot[1], -1);
  EXPECT_EQ(p.allowed_offset[1], -1);
  for (int32_t r : {0, 2, 3}) {
    ASSERT_GE(p.allowed_offset[r], 0);
    for (size_t w = 0; w < 3; ++w) {
      EXPECT_EQ(p.allowed[p.allowed_offset[r] + w], rows_[r].allowed[w]) << r << " " << w;
    }
    EXPECT_EQ(p.penalty_offsets[r], p.penalty_offsets[r + 1]) << "no penalty entries";
  }
  // A device answer outside the mask (every allowed logit -inf) becomes the
  // first allowed token, or -1 when nothing is allowed, as on the host.
  p.token_ids[0] = 67;
  p.token_ids[1] = 9;
  p.token_ids[2] = 0;
  p.token_ids[3] = 0;
  std::vector<SampleResult> out;
  plan_.read_results(rows_, outputs_.data(), &out);
  EXPECT_EQ(out[0].token_id, 67);
  EXPECT_EQ(out[1].token_id, 9);
  EXPECT_EQ(out[2].token_id, 1);
  EXPECT_EQ(out[3].token_id, -1);
}

TEST_F(SamplingPlanTest, PlainDecodeStepSendsAFewBytesPerRow) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.95f;
  for (int32_t r = 0; r < 256; ++r) add(r, p, {1, 2, 3}, {4, 5});
  std::vector<int32_t> device_rows(256);
  for (int32_t r = 0; r < 256; ++r) device_rows[r] = r;
  build(device_rows, 128256);
  // 8 arrays of 4 or 8 bytes per row in, one token id per row out; never a
  // logits row.
  EXPECT_LE(plan_.inputs().size(), 256u * 40 + 8 * 16);
  EXPECT_EQ(plan_.output_bytes(), 256u * 4);
}

}  // namespace
}  // namespace pvllm
