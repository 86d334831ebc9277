// pvllm_estimate_memory and pvllm_engine_create share one memory plan
// (since 0.4): over random engine parameters, the estimate says OK exactly
// when create succeeds, and fails with create's status when it does not.
// Before, the estimate said OK for budgets create then refused (a pool
// smaller than one sequence: INVALID_ARGUMENT; more than the machine's
// memory: OUT_OF_MEMORY), and reported a negative token count for
// num_kv_blocks = INT32_MAX.
#include <gtest/gtest.h>
#include <pvllm/pvllm.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <random>
#include <string>

#include "tests/util/tiny_model.h"

namespace {

using pvllm::testing::make_temp_dir;
using pvllm::testing::TinyModelSpec;
using pvllm::testing::write_tiny_hf_model;

std::string take_message(pvllm_error* error) {
  std::string message = pvllm_error_message(error);
  pvllm_error_free(error);
  return message;
}

int64_t physical_memory() {
  return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
}

class CapiMemoryPlanTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    spec_.max_position_embeddings = 512;
    model_dir_ = write_tiny_hf_model(make_temp_dir("pvllm_capi_memplan"), spec_);
  }

  pvllm_engine_params params() const {
    pvllm_engine_params p;
    pvllm_engine_params_init(&p, sizeof p);
    p.model_path = model_dir_.c_str();
    p.device = "cpu";
    p.num_threads = 1;
    return p;
  }

  // The estimate's and create's statuses for the same parameters.
  static void expect_agreement(const pvllm_engine_params& p, const std::string& what) {
    pvllm_memory_estimate e;
    pvllm_memory_estimate_init(&e, sizeof e);
    pvllm_error* estimate_error = nullptr;
    const pvllm_status estimated = pvllm_estimate_memory(&p, &e, &estimate_error);
    const std::string estimate_message = take_message(estimate_error);
    pvllm_engine* engine = nullptr;
    pvllm_error* create_error = nullptr;
    const pvllm_status created = pvllm_engine_create(&p, &engine, &create_error);
    const std::string create_message = take_message(create_error);
    EXPECT_EQ(estimated, created) << what << "\n  estimate: " << estimate_message
                                  << "\n  create: " << create_message;
    if (estimated == PVLLM_STATUS_OK) {
      EXPECT_GE(e.max_tokens_in_cache, 0) << what;
      EXPECT_EQ(e.max_tokens_in_cache, int64_t{e.num_blocks} * p.block_size) << what;
      if (created == PVLLM_STATUS_OK) {
        pvllm_stats stats;
        pvllm_stats_init(&stats, sizeof stats);
        ASSERT_EQ(pvllm_get_stats(engine, &stats, nullptr), PVLLM_STATUS_OK);
        EXPECT_EQ(stats.num_blocks_total, e.num_blocks) << what << ": the pool create made";
      }
    }
    pvllm_engine_destroy(engine);
  }

  static TinyModelSpec spec_;
  static std::string model_dir_;
};

TinyModelSpec CapiMemoryPlanTest::spec_;
std::string CapiMemoryPlanTest::model_dir_;

TEST_F(CapiMemoryPlanTest, TheCampaignsBudgetsGetTheSameAnswerFromBoth) {
  for (const int64_t budget :
       {int64_t{16} << 10, int64_t{256} << 10, int64_t{64} << 20, 4 * physical_memory()}) {
    pvllm_engine_params p = params();
    p.kv_cache_bytes = budget;
    expect_agreement(p, "kv_cache_bytes " + std::to_string(budget));
  }
  pvllm_engine_params p = params();
  p.num_kv_blocks = INT32_MAX;
  pvllm_memory_estimate e;
  pvllm_memory_estimate_init(&e, sizeof e);
  pvllm_error* error = nullptr;
  EXPECT_EQ(pvllm_estimate_memory(&p, &e, &error), PVLLM_STATUS_OUT_OF_MEMORY)
      << "INT32_MAX blocks of K/V exceed any machine's memory";
  EXPECT_NE(take_message(error).find("KV pool"), std::string::npos);
  expect_agreement(p, "num_kv_blocks INT32_MAX");
}

TEST_F(CapiMemoryPlanTest, RandomParametersGetTheSameAnswerFromBoth) {
  std::mt19937 rng(20261124);
  auto pick = [&rng](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int32_t block_sizes[] = {8, 16, 32, 64, 128, 256};
  int ok = 0;
  int refused = 0;
  for (int i = 0; i < 120; ++i) {
    pvllm_engine_params p = params();
    p.block_size = block_sizes[pick(0, 5)];
    switch (pick(0, 3)) {
      case 0:
        p.kv_cache_bytes = pick(1, 4 << 20);
        break;
      case 1:
        p.num_kv_blocks = static_cast<int32_t>(pick(1, 256));
        break;
      case 2:
        p.num_kv_blocks = static_cast<int32_t>(pick(INT32_MAX / 4, INT32_MAX));
        break;
      default:
        p.kv_cache_bytes = pick(physical_memory(), 8 * physical_memory());
        break;
    }
    p.max_model_len = static_cast<int32_t>(pick(0, 2) == 0 ? 0 : pick(1, 2 * 512));
    p.max_num_seqs = static_cast<int32_t>(pick(1, 512));
    p.max_num_batched_tokens = static_cast<int32_t>(pick(1, 1 << 16));
    const std::string what =
        "case " + std::to_string(i) + ": block_size " + std::to_string(p.block_size) +
        ", num_kv_blocks " + std::to_string(p.num_kv_blocks) + ", kv_cache_bytes " +
        std::to_string(p.kv_cache_bytes) + ", max_model_len " + std::to_string(p.max_model_len) +
        ", max_num_seqs " + std::to_string(p.max_num_seqs) + ", max_num_batched_tokens " +
        std::to_string(p.max_num_batched_tokens);
    pvllm_memory_estimate e;
    pvllm_memory_estimate_init(&e, sizeof e);
    (pvllm_estimate_memory(&p, &e, nullptr) == PVLLM_STATUS_OK ? ok : refused) += 1;
    expect_agreement(p, what);
  }
  // The draw must exercise both sides of the boundary.
  EXPECT_GT(ok, 10);
  EXPECT_GT(refused, 10);
}

// max_position_embeddings = INT32_MAX: the context arithmetic stays in
// 64 bits, create refuses a pool that cannot hold one such sequence, and a
// generation asked for more tokens than the pool holds ends with LENGTH in
// a bounded number of steps (it used to stall, stepping without progress).
TEST_F(CapiMemoryPlanTest, AnInt32MaxContextNeitherOverflowsNorStalls) {
  const std::string dir = make_temp_dir("pvllm_capi_int32max");
  write_tiny_hf_model(dir, spec_);
  pvllm::testing::edit_hf_config(dir, {{"max_position_embeddings", INT32_MAX}});
  pvllm_engine_params p = params();
  p.model_path = dir.c_str();
  p.num_kv_blocks = 16;
  p.block_size = 16;
  pvllm_engine* engine = nullptr;
  pvllm_error* error = nullptr;
  ASSERT_EQ(pvllm_engine_create(&p, &engine, &error), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(take_message(error).find("max_model_len 2147483647"), std::string::npos);

  p.max_model_len = 16 * 16;  // what the pool holds
  ASSERT_EQ(pvllm_engine_create(&p, &engine, &error), PVLLM_STATUS_OK) << take_message(error);
  pvllm_sampling_params s;
  pvllm_sampling_params_init(&s, sizeof s);
  s.temperature = 0.0f;
  s.max_tokens = 100000;
  s.ignore_eos = 1;
  pvllm_request request;
  pvllm_request_init(&request, sizeof request);
  request.prompt_text = "Once upon a time";
  request.sampling = &s;
  uint64_t id = 0;
  ASSERT_EQ(pvllm_submit(engine, &request, &id, nullptr), PVLLM_STATUS_OK);
  int steps = 0;
  for (int32_t unfinished = 1; unfinished > 0 && steps < 1000; ++steps) {
    ASSERT_EQ(pvllm_step(engine, &unfinished, nullptr), PVLLM_STATUS_OK);
  }
  EXPECT_LT(steps, 1000) << "the request never ended";
  pvllm_output_batch* batch = nullptr;
  ASSERT_EQ(pvllm_poll(engine, 0, &batch, nullptr), PVLLM_STATUS_OK);
  size_t tokens = 0;
  int32_t reason = PVLLM_FINISH_NONE;
  for (size_t i = 0; i < pvllm_output_batch_size(batch); ++i) {
    tokens += pvllm_output_batch_get(batch, i)->num_token_ids;
    reason = pvllm_output_batch_get(batch, i)->finish_reason;
  }
  pvllm_output_batch_free(batch);
  EXPECT_EQ(reason, PVLLM_FINISH_LENGTH);
  EXPECT_GT(tokens, 200u);
  EXPECT_LE(tokens, 256u);
  pvllm_engine_destroy(engine);
}

// A prompt text longer than the context could hold in any tokenization is
// refused before it is tokenized (8 MiB of text took seconds and gigabytes
// to tokenize only to be refused for its token count).
TEST_F(CapiMemoryPlanTest, APromptTextTooLongForTheContextIsRefusedBeforeTokenizing) {
  pvllm_engine_params p = params();
  p.max_model_len = 64;
  pvllm_engine* engine = nullptr;
  ASSERT_EQ(pvllm_engine_create(&p, &engine, nullptr), PVLLM_STATUS_OK);
  const std::string text(size_t{8} << 20, 'a');
  pvllm_sampling_params s;
  pvllm_sampling_params_init(&s, sizeof s);
  pvllm_request request;
  pvllm_request_init(&request, sizeof request);
  request.prompt_text = text.c_str();
  request.sampling = &s;
  uint64_t id = 0;
  pvllm_error* error = nullptr;
  EXPECT_EQ(pvllm_submit(engine, &request, &id, &error), PVLLM_STATUS_INVALID_ARGUMENT);
  const std::string m = take_message(error);
  EXPECT_NE(m.find("bytes of text"), std::string::npos) << m;
  // A prompt within the bound is tokenized and judged by its token count.
  const std::string shorter(200, 'a');
  request.prompt_text = shorter.c_str();
  error = nullptr;
  const pvllm_status st = pvllm_submit(engine, &request, &id, &error);
  const std::string m2 = take_message(error);
  if (st != PVLLM_STATUS_OK) {
    EXPECT_EQ(m2.find("bytes of text"), std::string::npos) << m2;
  }
  pvllm_engine_destroy(engine);
}

}  // namespace
