// Misuse the C ABI cannot see from a NULL check alone (since 0.4): handles
// used after they were destroyed or freed, handles of the wrong kind, a
// second destroy, a request id of another engine. Also what 0.4 promises of
// events and text: per-request sequence numbers that put events taken by
// several threads back in order, and text without NUL bytes.
//
// Before 0.4 each misuse below was undefined behaviour (a use after free, a
// double free that glibc aborts on), so these tests crashed or misbehaved.
#include <gtest/gtest.h>
#include <pvllm/pvllm.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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

class CapiHandlesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_dir_ = write_tiny_hf_model(make_temp_dir("pvllm_capi_handles"), TinyModelSpec{});
  }

  static pvllm_engine* create() {
    pvllm_engine_params params;
    pvllm_engine_params_init(&params, sizeof params);
    params.model_path = model_dir_.c_str();
    params.device = "cpu";
    params.num_kv_blocks = 128;
    params.num_threads = 1;
    pvllm_engine* engine = nullptr;
    pvllm_error* error = nullptr;
    EXPECT_EQ(pvllm_engine_create(&params, &engine, &error), PVLLM_STATUS_OK)
        << take_message(error);
    return engine;
  }

  static pvllm_sampling_params sampling(int32_t max_tokens, int32_t n = 1) {
    pvllm_sampling_params s;
    pvllm_sampling_params_init(&s, sizeof s);
    s.temperature = n > 1 ? 0.8f : 0.0f;
    s.has_seed = 1;
    s.seed = 11;
    s.max_tokens = max_tokens;
    s.ignore_eos = 1;
    s.n = n;
    return s;
  }

  static uint64_t submit(pvllm_engine* engine, const pvllm_sampling_params& s,
                         int32_t delivery = PVLLM_DELIVERY_SHARED) {
    pvllm_request request;
    pvllm_request_init(&request, sizeof request);
    request.prompt_text = "Once upon a time";
    request.sampling = &s;
    request.delivery = delivery;
    uint64_t id = 0;
    pvllm_error* error = nullptr;
    EXPECT_EQ(pvllm_submit(engine, &request, &id, &error), PVLLM_STATUS_OK) << take_message(error);
    return id;
  }

  static void run_to_end(pvllm_engine* engine) {
    int32_t unfinished = 1;
    while (unfinished > 0) {
      ASSERT_EQ(pvllm_step(engine, &unfinished, nullptr), PVLLM_STATUS_OK);
    }
  }

  static std::string model_dir_;
};

std::string CapiHandlesTest::model_dir_;

// The status a call returned, checked to come with an error object that
// carries it and a message naming `needle`.
// (Takes the error by address: the call in the first argument sets it.)
void expect_invalid(pvllm_status got, pvllm_error** error_slot, const char* needle) {
  pvllm_error* error = *error_slot;
  EXPECT_EQ(got, PVLLM_STATUS_INVALID_ARGUMENT);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(pvllm_error_status(error), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pvllm_error_message(error)).find(needle), std::string::npos)
      << pvllm_error_message(error);
  pvllm_error_free(error);
}

TEST_F(CapiHandlesTest, ADestroyedEngineIsRefusedAndASecondDestroyDoesNothing) {
  pvllm_engine* engine = create();
  ASSERT_NE(engine, nullptr);
  pvllm_engine_destroy(engine);

  pvllm_error* error = nullptr;
  int32_t unfinished = -1;
  expect_invalid(pvllm_step(engine, &unfinished, &error), &error, "not a live pvllm_engine");
  EXPECT_EQ(unfinished, 0);
  pvllm_output_batch* batch = nullptr;
  error = nullptr;
  expect_invalid(pvllm_poll(engine, 0, &batch, &error), &error, "not a live pvllm_engine");
  EXPECT_EQ(batch, nullptr);
  const pvllm_sampling_params s = sampling(4);
  pvllm_request request;
  pvllm_request_init(&request, sizeof request);
  request.prompt_text = "x";
  request.sampling = &s;
  uint64_t id = 7;
  error = nullptr;
  expect_invalid(pvllm_submit(engine, &request, &id, &error), &error, "not a live pvllm_engine");
  EXPECT_EQ(id, 0u);
  error = nullptr;
  expect_invalid(pvllm_abort(engine, 1, &error), &error, "not a live pvllm_engine");
  pvllm_stats stats;
  pvllm_stats_init(&stats, sizeof stats);
  error = nullptr;
  expect_invalid(pvllm_get_stats(engine, &stats, &error), &error, "not a live pvllm_engine");

  pvllm_engine_destroy(engine);  // the second destroy: a no-op, not a double free
  // The library still works after both.
  pvllm_engine* fresh = create();
  ASSERT_NE(fresh, nullptr);
  pvllm_engine_destroy(fresh);
}

TEST_F(CapiHandlesTest, AHandleOfAnotherKindIsNotAnEngine) {
  pvllm_engine* engine = create();
  ASSERT_NE(engine, nullptr);
  pvllm_output_batch* batch = nullptr;
  ASSERT_EQ(pvllm_poll(engine, 0, &batch, nullptr), PVLLM_STATUS_OK);
  ASSERT_NE(batch, nullptr);

  auto* not_an_engine = reinterpret_cast<pvllm_engine*>(batch);
  pvllm_error* error = nullptr;
  expect_invalid(pvllm_step(not_an_engine, nullptr, &error), &error, "not a live pvllm_engine");
  pvllm_engine_destroy(not_an_engine);  // ignored: the batch stays valid
  EXPECT_EQ(pvllm_output_batch_size(batch), 0u);

  int on_the_stack = 0;
  error = nullptr;
  expect_invalid(pvllm_step(reinterpret_cast<pvllm_engine*>(&on_the_stack), nullptr, &error),
                 &error, "not a live pvllm_engine");

  auto* not_a_batch = reinterpret_cast<pvllm_output_batch*>(engine);
  EXPECT_EQ(pvllm_output_batch_size(not_a_batch), 0u);
  EXPECT_EQ(pvllm_output_batch_get(not_a_batch, 0), nullptr);
  pvllm_output_batch_free(not_a_batch);  // ignored: the engine stays valid
  EXPECT_EQ(pvllm_step(engine, nullptr, nullptr), PVLLM_STATUS_OK);

  pvllm_output_batch_free(batch);
  pvllm_engine_destroy(engine);
}

TEST_F(CapiHandlesTest, FreedBatchesErrorsAndModelInfosAreDetected) {
  pvllm_engine* engine = create();
  ASSERT_NE(engine, nullptr);
  const pvllm_sampling_params s = sampling(3);
  submit(engine, s);
  run_to_end(engine);
  pvllm_output_batch* batch = nullptr;
  ASSERT_EQ(pvllm_poll(engine, 0, &batch, nullptr), PVLLM_STATUS_OK);
  ASSERT_GT(pvllm_output_batch_size(batch), 0u);
  pvllm_output_batch_free(batch);
  EXPECT_EQ(pvllm_output_batch_size(batch), 0u);
  EXPECT_EQ(pvllm_output_batch_get(batch, 0), nullptr);
  pvllm_output_batch_free(batch);

  pvllm_error* error = nullptr;
  ASSERT_EQ(pvllm_abort(engine, 0, &error), PVLLM_STATUS_NOT_FOUND);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(pvllm_error_status(error), PVLLM_STATUS_NOT_FOUND);
  pvllm_error_free(error);
  EXPECT_EQ(pvllm_error_status(error), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pvllm_error_message(error)).find("not a live pvllm_error"),
            std::string::npos);
  pvllm_error_free(error);

  pvllm_model_info* info = nullptr;
  ASSERT_EQ(pvllm_model_inspect(model_dir_.c_str(), &info, nullptr), PVLLM_STATUS_OK);
  ASSERT_GT(pvllm_model_info_num_tensors(info), 0u);
  pvllm_model_info_free(info);
  EXPECT_EQ(pvllm_model_info_num_tensors(info), 0u);
  pvllm_model_config config;
  pvllm_model_config_init(&config, sizeof config);
  error = nullptr;
  expect_invalid(pvllm_model_info_config(info, &config, &error), &error,
                 "not a live pvllm_model_info");
  pvllm_model_info_free(info);
  pvllm_engine_destroy(engine);
}

TEST_F(CapiHandlesTest, ARequestIdOfAnotherEngineIsInvalidNotUnknown) {
  pvllm_engine* a = create();
  pvllm_engine* b = create();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const pvllm_sampling_params s = sampling(4);
  const uint64_t id_a = submit(a, s, PVLLM_DELIVERY_PER_REQUEST);
  const uint64_t id_b = submit(b, s, PVLLM_DELIVERY_PER_REQUEST);
  EXPECT_NE(id_a, id_b);

  pvllm_error* error = nullptr;
  expect_invalid(pvllm_abort(b, id_a, &error), &error, "another engine");
  error = nullptr;
  expect_invalid(pvllm_wait(b, id_a, 0, &error), &error, "another engine");
  error = nullptr;
  pvllm_output_batch* batch = nullptr;
  expect_invalid(pvllm_poll_request(b, id_a, 0, &batch, &error), &error, "another engine");
  error = nullptr;
  expect_invalid(pvllm_detach(b, id_a, &error), &error, "another engine");
  // An id this engine could have made but did not: unknown, not invalid.
  EXPECT_EQ(pvllm_abort(b, id_b + 1000, nullptr), PVLLM_STATUS_NOT_FOUND);
  // Request a was left alone by the calls on b.
  run_to_end(a);
  ASSERT_EQ(pvllm_poll_request(a, id_a, 0, &batch, nullptr), PVLLM_STATUS_OK);
  ASSERT_GT(pvllm_output_batch_size(batch), 0u);
  EXPECT_EQ(pvllm_output_batch_get(batch, pvllm_output_batch_size(batch) - 1)->finish_reason,
            PVLLM_FINISH_LENGTH);
  pvllm_output_batch_free(batch);
  pvllm_engine_destroy(b);
  pvllm_engine_destroy(a);
}

TEST_F(CapiHandlesTest, AbortAfterTheFinalEventIsNotFound) {
  pvllm_engine* engine = create();
  const pvllm_sampling_params s = sampling(2);
  const uint64_t id = submit(engine, s);
  run_to_end(engine);
  // Its events are still queued, untaken; the request is over all the same.
  pvllm_error* error = nullptr;
  EXPECT_EQ(pvllm_abort(engine, id, &error), PVLLM_STATUS_NOT_FOUND) << pvllm_error_message(error);
  pvllm_error_free(error);
  pvllm_engine_destroy(engine);
}

struct TakenEvent {
  uint64_t sequence = 0;
  int32_t sample_index = 0;
  std::vector<int32_t> token_ids;
  int32_t finish_reason = PVLLM_FINISH_NONE;
  bool request_finished = false;
};

void take_all(const pvllm_output_batch* batch, std::vector<TakenEvent>* out) {
  for (size_t i = 0; i < pvllm_output_batch_size(batch); ++i) {
    const pvllm_output* o = pvllm_output_batch_get(batch, i);
    ASSERT_TRUE(PVLLM_STRUCT_HAS(o, pvllm_output, sequence));
    TakenEvent e;
    e.sequence = o->sequence;
    e.sample_index = o->sample_index;
    e.token_ids.assign(o->token_ids, o->token_ids + o->num_token_ids);
    e.finish_reason = o->finish_reason;
    e.request_finished = o->request_finished != 0;
    out->push_back(std::move(e));
  }
}

// What a request's events add up to when replayed in `sequence` order:
// tokens per sample, and the order of finishes.
std::map<int32_t, std::vector<int32_t>> replay(std::vector<TakenEvent> events) {
  std::sort(events.begin(), events.end(),
            [](const TakenEvent& x, const TakenEvent& y) { return x.sequence < y.sequence; });
  std::map<int32_t, std::vector<int32_t>> tokens;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].sequence, i) << "sequence numbers are 0, 1, 2, ... without gaps";
    auto& t = tokens[events[i].sample_index];
    t.insert(t.end(), events[i].token_ids.begin(), events[i].token_ids.end());
    EXPECT_EQ(events[i].request_finished, i + 1 == events.size())
        << "request_finished is on the event with the last sequence number";
  }
  return tokens;
}

TEST_F(CapiHandlesTest, SequenceNumbersPutEventsTakenByTwoThreadsBackInOrder) {
  const pvllm_sampling_params s = sampling(24, 3);

  // Calm: one thread steps and takes everything.
  pvllm_engine* calm = create();
  const uint64_t calm_id = submit(calm, s, PVLLM_DELIVERY_PER_REQUEST);
  std::vector<TakenEvent> calm_events;
  for (int32_t unfinished = 1; unfinished > 0;) {
    ASSERT_EQ(pvllm_step(calm, &unfinished, nullptr), PVLLM_STATUS_OK);
    pvllm_output_batch* batch = nullptr;
    ASSERT_EQ(pvllm_poll_request(calm, calm_id, 0, &batch, nullptr), PVLLM_STATUS_OK);
    take_all(batch, &calm_events);
    pvllm_output_batch_free(batch);
  }
  const auto expected = replay(calm_events);
  ASSERT_EQ(expected.size(), 3u);
  pvllm_engine_destroy(calm);

  // Two threads take one event at a time from the same request while the
  // main thread steps: neither sees the whole order, the numbers restore it.
  pvllm_engine* engine = create();
  const uint64_t id = submit(engine, s, PVLLM_DELIVERY_PER_REQUEST);
  std::mutex mu;
  std::vector<TakenEvent> taken;
  std::vector<size_t> per_thread(2, 0);
  auto consumer = [&](int index) {
    for (;;) {
      if (pvllm_wait(engine, id, 50, nullptr) == PVLLM_STATUS_NOT_FOUND) return;
      pvllm_output_batch* batch = nullptr;
      if (pvllm_poll_request(engine, id, 1, &batch, nullptr) != PVLLM_STATUS_OK) return;
      std::vector<TakenEvent> mine;
      take_all(batch, &mine);
      pvllm_output_batch_free(batch);
      std::lock_guard<std::mutex> lock(mu);
      per_thread[index] += mine.size();
      taken.insert(taken.end(), mine.begin(), mine.end());
    }
  };
  std::thread t0(consumer, 0);
  std::thread t1(consumer, 1);
  for (int32_t unfinished = 1; unfinished > 0;) {
    ASSERT_EQ(pvllm_step(engine, &unfinished, nullptr), PVLLM_STATUS_OK);
  }
  t0.join();
  t1.join();
  EXPECT_EQ(taken.size(), calm_events.size());
  EXPECT_EQ(replay(taken), expected);
  pvllm_engine_destroy(engine);
}

// The stats name the backend and, on the CPU, the kernels' instruction set
// (since 0.4), the one pvllm_cpu_isa reports.
TEST_F(CapiHandlesTest, StatsNameTheBackendAndTheCpuInstructionSet) {
  pvllm_engine* engine = create();
  ASSERT_NE(engine, nullptr);
  pvllm_stats stats;
  pvllm_stats_init(&stats, sizeof stats);
  ASSERT_EQ(pvllm_get_stats(engine, &stats, nullptr), PVLLM_STATUS_OK);
  ASSERT_TRUE(PVLLM_STRUCT_HAS(&stats, pvllm_stats, backend));
  EXPECT_EQ(std::string(stats.backend), std::string("cpu (") + pvllm_cpu_isa() + ")");
  const std::string isa = pvllm_cpu_isa();
  EXPECT_TRUE(isa == "x86-64-v2" || isa == "avx2" || isa == "avx512" || isa == "generic") << isa;
  pvllm_engine_destroy(engine);
}

TEST_F(CapiHandlesTest, NoDecodedTextHoldsANulByte) {
  pvllm_engine* engine = create();
  pvllm_model_info* info = nullptr;
  ASSERT_EQ(pvllm_model_inspect(model_dir_.c_str(), &info, nullptr), PVLLM_STATUS_OK);
  pvllm_model_config config;
  pvllm_model_config_init(&config, sizeof config);
  ASSERT_EQ(pvllm_model_info_config(info, &config, nullptr), PVLLM_STATUS_OK);
  pvllm_model_info_free(info);

  // The tiny tokenizer falls back to bytes, <0x00> among them. Every id,
  // alone and between two others, decodes to text whose strlen is its
  // reported length.
  int replaced = 0;
  for (int32_t id = 0; id < config.vocab_size; ++id) {
    for (const std::vector<int32_t>& ids :
         {std::vector<int32_t>{id}, std::vector<int32_t>{100, id, 101}}) {
      char text[256];
      size_t len = 0;
      ASSERT_EQ(pvllm_detokenize(engine, ids.data(), ids.size(), text, sizeof text, &len, nullptr),
                PVLLM_STATUS_OK);
      ASSERT_EQ(std::strlen(text), len) << "id " << id;
      if (ids.size() == 1 && std::string(text, len) == "\xEF\xBF\xBD") ++replaced;
    }
  }
  EXPECT_GE(replaced, 1) << "no id decoded to a lone U+FFFD: the vocabulary has no <0x00>?";
  pvllm_engine_destroy(engine);
}

}  // namespace
