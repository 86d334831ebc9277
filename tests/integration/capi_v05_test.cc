// What 0.5 appends to the C ABI, through the C ABI: per-request timing on
// the last event and step times in the stats; prompt logprobs; beam
// search; preemption by swap; on_output handlers; and the structs' older
// sizes still accepted, with the new fields at their defaults.
#include <gtest/gtest.h>
#include <pvllm/pvllm.h>

#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/capi_helpers.h"
#include "tests/util/tiny_model.h"

namespace {

using pvllm::testing::make_temp_dir;
using pvllm::testing::TinyModelSpec;
using pvllm::testing::write_tiny_hf_model;

using pvllm::testing::EnginePtr;
using pvllm::testing::take_message;

class CapiV05Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TinyModelSpec spec;
    spec.max_position_embeddings = 128;
    model_dir_ = new std::string(write_tiny_hf_model(make_temp_dir("capi_v05"), spec));
  }
  static void TearDownTestSuite() { delete model_dir_; }

  static pvllm_engine_params params() {
    pvllm_engine_params p;
    pvllm_engine_params_init(&p, sizeof p);
    p.model_path = model_dir_->c_str();
    p.device = "cpu";
    p.num_threads = 1;
    p.block_size = 8;
    p.kv_cache_bytes = 8 << 20;
    return p;
  }

  static EnginePtr create(const pvllm_engine_params& p) {
    pvllm_engine* engine = nullptr;
    pvllm_error* error = nullptr;
    EXPECT_EQ(pvllm_engine_create(&p, &engine, &error), PVLLM_STATUS_OK) << take_message(error);
    return EnginePtr(engine);
  }

  static pvllm_sampling_params greedy(int32_t max_tokens) {
    pvllm_sampling_params s;
    pvllm_sampling_params_init(&s, sizeof s);
    s.temperature = 0;
    s.max_tokens = max_tokens;
    s.ignore_eos = 1;
    return s;
  }

  static std::vector<int32_t> prompt(int32_t length) {
    std::vector<int32_t> p{1};
    for (int32_t i = 1; i < length; ++i) p.push_back(3 + (i * 7) % 200);
    return p;
  }

  static uint64_t submit(pvllm_engine* engine, const std::vector<int32_t>& ids,
                         const pvllm_sampling_params& s, pvllm_output_callback on_output = nullptr,
                         void* user = nullptr, pvllm_status want = PVLLM_STATUS_OK) {
    pvllm_request r;
    pvllm_request_init(&r, sizeof r);
    r.prompt_token_ids = ids.data();
    r.num_prompt_token_ids = ids.size();
    r.sampling = &s;
    r.on_output = on_output;
    r.on_output_user_data = user;
    uint64_t id = 0;
    pvllm_error* error = nullptr;
    EXPECT_EQ(pvllm_submit(engine, &r, &id, &error), want) << take_message(error);
    return id;
  }

  // Steps to the end; the polled events as copies of their structs (the
  // pointers inside are not kept).
  struct Polled {
    pvllm_output out;
    std::vector<pvllm_token_logprobs> prompt_logprobs;
  };
  static std::vector<Polled> run(pvllm_engine* engine) {
    std::vector<Polled> events;
    int32_t unfinished = 1;
    for (int i = 0; i < 10000 && unfinished > 0; ++i) {
      EXPECT_EQ(pvllm_step(engine, &unfinished, nullptr), PVLLM_STATUS_OK);
      pvllm_output_batch* batch = nullptr;
      EXPECT_EQ(pvllm_poll(engine, 0, &batch, nullptr), PVLLM_STATUS_OK);
      for (size_t k = 0; k < pvllm_output_batch_size(batch); ++k) {
        const pvllm_output* o = pvllm_output_batch_get(batch, k);
        Polled p{*o, {}};
        if (o->prompt_logprobs != nullptr) {
          p.prompt_logprobs.assign(o->prompt_logprobs, o->prompt_logprobs + o->num_prompt_logprobs);
        }
        events.push_back(p);
      }
      pvllm_output_batch_free(batch);
    }
    return events;
  }

  static std::string* model_dir_;
};

std::string* CapiV05Test::model_dir_ = nullptr;

TEST_F(CapiV05Test, TheLastEventCarriesTimingAndTheStatsStepTimes) {
  EnginePtr engine = create(params());
  pvllm_sampling_params s = greedy(6);
  s.n = 2;
  s.temperature = 0.5f;
  const uint64_t id = submit(engine.get(), prompt(12), s);
  const std::vector<Polled> events = run(engine.get());
  ASSERT_FALSE(events.empty());
  const pvllm_output& last = events.back().out;
  ASSERT_EQ(last.request_id, id);
  ASSERT_TRUE(PVLLM_STRUCT_HAS(&last, pvllm_output, score));
  EXPECT_EQ(last.request_finished, 1);
  EXPECT_EQ(last.num_prompt_tokens, 12);
  EXPECT_EQ(last.num_prefill_tokens, 12);
  EXPECT_EQ(last.num_generated_tokens, 12);  // 2 samples x 6
  EXPECT_GT(last.time_to_first_token, 0.0);
  EXPECT_GE(last.e2e_latency, last.time_to_first_token);
  EXPECT_GT(last.time_per_output_token, 0.0);
  for (size_t i = 0; i + 1 < events.size(); ++i) EXPECT_EQ(events[i].out.e2e_latency, 0.0);
  pvllm_stats st;
  pvllm_stats_init(&st, sizeof st);
  ASSERT_EQ(pvllm_get_stats(engine.get(), &st, nullptr), PVLLM_STATUS_OK);
  EXPECT_GT(st.step_time_p50_ms, 0.0f);
  EXPECT_GE(st.step_time_max_ms, st.step_time_p99_ms);
  EXPECT_EQ(st.num_preemptions_by_swap, 0);
}

TEST_F(CapiV05Test, PromptLogprobsComeWithTheFirstEvent) {
  EnginePtr engine = create(params());
  pvllm_sampling_params s = greedy(3);
  s.prompt_logprobs = 2;
  submit(engine.get(), prompt(10), s);
  const std::vector<Polled> events = run(engine.get());
  ASSERT_FALSE(events.empty());
  ASSERT_EQ(events[0].out.num_prompt_logprobs, 9u);
  const std::vector<int32_t> p = prompt(10);
  for (size_t i = 0; i < 9; ++i) {
    const pvllm_token_logprobs& lp = events[0].prompt_logprobs[i];
    EXPECT_EQ(lp.token_id, p[i + 1]);
    EXPECT_LE(lp.logprob, 0.0f);
    EXPECT_EQ(lp.num_top, 2u);
  }
  for (size_t i = 1; i < events.size(); ++i) EXPECT_EQ(events[i].out.num_prompt_logprobs, 0u);
  s.prompt_logprobs = 21;
  submit(engine.get(), prompt(10), s, nullptr, nullptr, PVLLM_STATUS_INVALID_ARGUMENT);
}

TEST_F(CapiV05Test, BeamSearchReturnsTheBestHypothesesWithScores) {
  EnginePtr engine = create(params());
  pvllm_sampling_params s = greedy(8);
  s.ignore_eos = 0;
  s.beam_width = 3;
  s.n = 2;
  s.early_stopping = PVLLM_EARLY_STOPPING_NEVER;
  const uint64_t id = submit(engine.get(), prompt(6), s);
  const std::vector<Polled> events = run(engine.get());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].out.request_id, id);
  EXPECT_EQ(events[0].out.sample_index, 0);
  EXPECT_EQ(events[1].out.sample_index, 1);
  EXPECT_GE(events[0].out.score, events[1].out.score) << "best first";
  EXPECT_LT(events[0].out.score, 0.0);
  EXPECT_EQ(events[1].out.request_finished, 1);
  s.temperature = 1.0f;  // beam search is deterministic
  submit(engine.get(), prompt(6), s, nullptr, nullptr, PVLLM_STATUS_INVALID_ARGUMENT);
}

TEST_F(CapiV05Test, PreemptionBySwapIsCountedAndBadModesRefused) {
  pvllm_engine_params p = params();
  p.num_kv_blocks = 14;
  p.max_model_len = 96;
  p.preemption_mode = PVLLM_PREEMPTION_SWAP;
  pvllm_memory_estimate e;
  pvllm_memory_estimate_init(&e, sizeof e);
  ASSERT_EQ(pvllm_estimate_memory(&p, &e, nullptr), PVLLM_STATUS_OK);
  EXPECT_EQ(e.swap_bytes, e.kv_bytes_per_block * 14);
  EnginePtr engine = create(p);
  for (int r = 0; r < 5; ++r) submit(engine.get(), prompt(10 + 3 * r), greedy(40));
  run(engine.get());
  pvllm_stats st;
  pvllm_stats_init(&st, sizeof st);
  ASSERT_EQ(pvllm_get_stats(engine.get(), &st, nullptr), PVLLM_STATUS_OK);
  EXPECT_GT(st.num_preemptions_by_swap, 0);
  EXPECT_EQ(st.num_blocks_swapped_in, st.num_blocks_swapped_out);
  EXPECT_EQ(st.num_swap_bytes,
            static_cast<int64_t>((st.num_blocks_swapped_out + st.num_blocks_swapped_in) *
                                 e.kv_bytes_per_block));
  p.preemption_mode = 7;
  pvllm_engine* bad = nullptr;
  pvllm_error* error = nullptr;
  EXPECT_EQ(pvllm_engine_create(&p, &bad, &error), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(take_message(error).find("preemption_mode"), std::string::npos);
}

// What a handler saw.
struct HandlerLog {
  std::mutex mu;
  std::map<uint64_t, std::vector<uint64_t>> sequences;  // per request, in call order
  std::map<uint64_t, int> finished;
  std::map<uint64_t, std::thread::id> threads;
  std::map<uint64_t, int32_t> tokens;
  pvllm_engine* engine = nullptr;
  int resubmit = 0;  // the handler submits this many more requests from inside
};

void log_event(const pvllm_output* o, void* user) {
  auto* log = static_cast<HandlerLog*>(user);
  bool submit_more = false;
  {
    std::lock_guard<std::mutex> lock(log->mu);
    log->sequences[o->request_id].push_back(o->sequence);
    log->tokens[o->request_id] += static_cast<int32_t>(o->num_token_ids);
    log->threads.emplace(o->request_id, std::this_thread::get_id());
    if (o->request_finished) {
      ++log->finished[o->request_id];
      if (log->resubmit > 0) {
        --log->resubmit;
        submit_more = true;
      }
    }
  }
  if (submit_more) {  // a handler may submit: here, another handled request
    pvllm_sampling_params s;
    pvllm_sampling_params_init(&s, sizeof s);
    s.max_tokens = 4;
    s.ignore_eos = 1;
    const int32_t ids[] = {1, 9, 17};
    pvllm_request r;
    pvllm_request_init(&r, sizeof r);
    r.prompt_token_ids = ids;
    r.num_prompt_token_ids = 3;
    r.sampling = &s;
    r.on_output = log_event;
    r.on_output_user_data = log;
    uint64_t id = 0;
    EXPECT_EQ(pvllm_submit(log->engine, &r, &id, nullptr), PVLLM_STATUS_OK);
  }
}

TEST_F(CapiV05Test, HandlersGetEveryEventInOrderOnTheSteppingThread) {
  EnginePtr engine = create(params());
  HandlerLog log;
  log.engine = engine.get();
  log.resubmit = 2;
  pvllm_sampling_params s = greedy(10);
  s.n = 3;
  s.temperature = 0.7f;
  const uint64_t handled = submit(engine.get(), prompt(8), s, log_event, &log);
  const uint64_t polled = submit(engine.get(), prompt(8), greedy(5));
  const std::vector<Polled> events = run(engine.get());
  for (const Polled& p : events)
    EXPECT_EQ(p.out.request_id, polled) << "a handled event was polled";
  std::lock_guard<std::mutex> lock(log.mu);
  ASSERT_EQ(log.finished.size(), 3u) << "the handled request and the two submitted from handlers";
  for (const auto& [id, seqs] : log.sequences) {
    EXPECT_EQ(log.finished[id], 1) << id;
    for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i], i) << "request " << id;
    EXPECT_EQ(log.threads[id], std::this_thread::get_id()) << "called on the stepping thread";
  }
  EXPECT_EQ(log.tokens[handled], 30);
  // The takers refuse a handled request.
  pvllm_output_batch* batch = nullptr;
  EXPECT_EQ(pvllm_wait(engine.get(), handled, 0, nullptr), PVLLM_STATUS_NOT_FOUND)
      << "over: its record is gone";
  const uint64_t live = submit(engine.get(), prompt(8), greedy(3), log_event, &log);
  pvllm_error* error = nullptr;
  EXPECT_EQ(pvllm_poll_request(engine.get(), live, 0, &batch, &error),
            PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(take_message(error).find("on_output"), std::string::npos);
  EXPECT_EQ(pvllm_wait(engine.get(), live, 0, nullptr), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(pvllm_detach(engine.get(), live, nullptr), PVLLM_STATUS_INVALID_ARGUMENT);
}

// Requests submitted from one thread while another steps: every event
// reaches its handler exactly once, in order, whichever thread delivers.
TEST_F(CapiV05Test, HandlersUnderConcurrentSubmitAndStep) {
  EnginePtr engine = create(params());
  HandlerLog log;
  std::atomic<bool> stop{false};
  std::thread stepper([&] {
    while (!stop.load()) pvllm_step(engine.get(), nullptr, nullptr);
  });
  std::vector<uint64_t> ids;
  for (int i = 0; i < 40; ++i)
    ids.push_back(submit(engine.get(), prompt(4 + i % 7), greedy(1 + i % 5), log_event, &log));
  for (int waited = 0; waited < 10000; ++waited) {
    {
      std::lock_guard<std::mutex> lock(log.mu);
      if (log.finished.size() == ids.size()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop = true;
  stepper.join();
  std::lock_guard<std::mutex> lock(log.mu);
  ASSERT_EQ(log.finished.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(log.finished[ids[i]], 1);
    EXPECT_EQ(log.tokens[ids[i]], 1 + static_cast<int32_t>(i) % 5);
    const std::vector<uint64_t>& seqs = log.sequences[ids[i]];
    for (size_t k = 0; k < seqs.size(); ++k) EXPECT_EQ(seqs[k], k);
  }
}

// A program built against 0.4 passes the old sizes: accepted, the new
// fields at their defaults. A size that ends inside a new field is not.
TEST_F(CapiV05Test, OlderStructSizesTakeTheNewDefaults) {
  EnginePtr engine = create(params());
  pvllm_sampling_params s = greedy(4);
  s.beam_width = 99;  // beyond a 0.4 caller's struct: never read
  s.struct_size = offsetof(pvllm_sampling_params, prompt_logprobs);
  submit(engine.get(), prompt(6), s);
  const std::vector<Polled> events = run(engine.get());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].out.num_prompt_logprobs, 0u);
  s.struct_size = offsetof(pvllm_sampling_params, beam_width) + 2;
  submit(engine.get(), prompt(6), s, nullptr, nullptr, PVLLM_STATUS_INVALID_ARGUMENT);
  pvllm_engine_params p = params();
  p.preemption_mode = 99;
  p.struct_size = offsetof(pvllm_engine_params, swap_space_bytes);
  EnginePtr old = create(p);
  EXPECT_NE(old, nullptr);
}

}  // namespace
