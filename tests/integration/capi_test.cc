// The C ABI end to end on a tiny random-weight model: generation, the
// tokenizer's buffer protocol, statistics, abort, logprobs, parallel
// samples, per-call error messages under threads, model inspection, and
// the library's exported symbol set.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <latch>
#include <map>
#include <memory>
#include <pvllm/pvllm.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/util/loaded_library.h"
#include "tests/util/tiny_model.h"

extern "C" int pvllm_c_misuse_checks(const char* model_path, char* failure, size_t failure_len);

namespace {

using pvllm::testing::make_temp_dir;
using pvllm::testing::tiny_tokenizer_vocab_size;
using pvllm::testing::TinyModelSpec;
using pvllm::testing::write_tiny_hf_model;
using pvllm::testing::write_tiny_llama2c_model;

// Owns the error of one call; out() hands the slot to the next call.
class Error {
 public:
  ~Error() { pvllm_error_free(error_); }
  pvllm_error** out() {
    pvllm_error_free(error_);
    error_ = nullptr;
    return &error_;
  }
  std::string message() const { return pvllm_error_message(error_); }
  pvllm_error* get() const { return error_; }

 private:
  pvllm_error* error_ = nullptr;
};

using EnginePtr = pvllm::cxx::EnginePtr;

// An event copied out of its batch, so it outlives pvllm_output_batch_free.
struct Event {
  uint64_t request_id = 0;
  int32_t sample_index = 0;
  std::vector<int32_t> token_ids;
  std::string text;
  int32_t finish_reason = PVLLM_FINISH_NONE;
  std::string error_message;
  bool has_logprobs = false;
  std::vector<pvllm_token_logprobs> logprobs;   // top pointers cleared
  std::vector<std::vector<pvllm_logprob>> top;  // per token
};

// The tokens, text and finish events of one sample, assembled from events.
struct SampleResult {
  std::vector<int32_t> token_ids;
  std::string text;
  int32_t finish_reason = PVLLM_FINISH_NONE;
  int num_finish_events = 0;
  int num_events_after_finish = 0;
};

bool is_valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80           ? 1
                       : (c >> 5) == 0x6  ? 2
                       : (c >> 4) == 0xE  ? 3
                       : (c >> 3) == 0x1E ? 4
                                          : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

class CapiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    spec_ = TinyModelSpec{};
    model_dir_ = write_tiny_hf_model(make_temp_dir("pvllm_capi_test"), spec_);
  }

  // A small engine: 1 thread, a fixed 128-block pool.
  EnginePtr make_engine(int32_t max_num_seqs = 16) {
    pvllm_engine_params params;
    pvllm_engine_params_init(&params, sizeof params);
    params.model_path = model_dir_.c_str();
    params.num_kv_blocks = 128;
    params.max_num_seqs = max_num_seqs;
    params.num_threads = 1;
    pvllm_engine* engine = nullptr;
    Error error;
    EXPECT_EQ(pvllm_engine_create(&params, &engine, error.out()), PVLLM_STATUS_OK)
        << error.message();
    EXPECT_EQ(error.get(), nullptr);
    return EnginePtr(engine);
  }

  static pvllm_sampling_params greedy(int32_t max_tokens) {
    pvllm_sampling_params s;
    pvllm_sampling_params_init(&s, sizeof s);
    s.temperature = 0.0f;
    s.max_tokens = max_tokens;
    s.ignore_eos = 1;
    return s;
  }

  static uint64_t submit(pvllm_engine* engine, const char* prompt,
                         const pvllm_sampling_params& sampling) {
    pvllm_request request;
    pvllm_request_init(&request, sizeof request);
    request.prompt_text = prompt;
    request.sampling = &sampling;
    uint64_t id = 0;
    Error error;
    EXPECT_EQ(pvllm_submit(engine, &request, &id, error.out()), PVLLM_STATUS_OK) << error.message();
    EXPECT_NE(id, 0u);
    return id;
  }

  static void poll_into(pvllm_engine* engine, std::vector<Event>* events) {
    pvllm_output_batch* raw = nullptr;
    Error error;
    ASSERT_EQ(pvllm_poll(engine, 0, &raw, error.out()), PVLLM_STATUS_OK) << error.message();
    pvllm::cxx::OutputBatchPtr batch(raw);
    for (size_t i = 0; i < pvllm_output_batch_size(batch.get()); ++i) {
      const pvllm_output* o = pvllm_output_batch_get(batch.get(), i);
      ASSERT_NE(o, nullptr);
      EXPECT_EQ(o->struct_size, sizeof(pvllm_output));
      Event e;
      e.request_id = o->request_id;
      e.sample_index = o->sample_index;
      e.token_ids.assign(o->token_ids, o->token_ids + o->num_token_ids);
      e.text.assign(o->text, o->text_len);
      EXPECT_EQ(std::strlen(o->text), o->text_len);
      e.finish_reason = o->finish_reason;
      e.error_message = o->error_message;
      e.has_logprobs = o->logprobs != nullptr;
      for (size_t t = 0; e.has_logprobs && t < o->num_token_ids; ++t) {
        pvllm_token_logprobs lp = o->logprobs[t];
        e.top.emplace_back(lp.top, lp.top + lp.num_top);
        lp.top = nullptr;
        e.logprobs.push_back(lp);
      }
      events->push_back(std::move(e));
    }
    EXPECT_EQ(pvllm_output_batch_get(batch.get(), pvllm_output_batch_size(batch.get())), nullptr);
  }

  // Steps until no request is unfinished, collecting every event.
  static std::vector<Event> run_to_completion(pvllm_engine* engine, int max_steps = 2000) {
    std::vector<Event> events;
    int32_t num_unfinished = 1;
    for (int step = 0; step < max_steps && num_unfinished > 0; ++step) {
      Error error;
      EXPECT_EQ(pvllm_step(engine, &num_unfinished, error.out()), PVLLM_STATUS_OK)
          << error.message();
      poll_into(engine, &events);
    }
    EXPECT_EQ(num_unfinished, 0) << "requests still unfinished after " << max_steps << " steps";
    return events;
  }

  static std::map<std::pair<uint64_t, int32_t>, SampleResult> assemble(
      const std::vector<Event>& events) {
    std::map<std::pair<uint64_t, int32_t>, SampleResult> samples;
    for (const Event& e : events) {
      SampleResult& s = samples[{e.request_id, e.sample_index}];
      if (s.num_finish_events > 0) ++s.num_events_after_finish;
      s.token_ids.insert(s.token_ids.end(), e.token_ids.begin(), e.token_ids.end());
      s.text += e.text;
      if (e.finish_reason != PVLLM_FINISH_NONE) {
        s.finish_reason = e.finish_reason;
        ++s.num_finish_events;
      }
    }
    return samples;
  }

  static pvllm_stats get_stats(pvllm_engine* engine) {
    pvllm_stats stats;
    pvllm_stats_init(&stats, sizeof stats);
    Error error;
    EXPECT_EQ(pvllm_get_stats(engine, &stats, error.out()), PVLLM_STATUS_OK) << error.message();
    return stats;
  }

  static TinyModelSpec spec_;
  static std::string model_dir_;
};

TinyModelSpec CapiTest::spec_;
std::string CapiTest::model_dir_;

TEST_F(CapiTest, MisuseFromCReturnsDocumentedStatuses) {
  char failure[512];
  EXPECT_EQ(pvllm_c_misuse_checks(model_dir_.c_str(), failure, sizeof(failure)), 0) << failure;
}

TEST_F(CapiTest, GreedyGenerationIsDeterministicAcrossRunsAndEngines) {
  const pvllm_sampling_params sampling = greedy(12);
  std::vector<std::vector<int32_t>> runs;
  for (int engine_index = 0; engine_index < 2; ++engine_index) {
    EnginePtr engine = make_engine();
    ASSERT_NE(engine, nullptr);
    for (int run = 0; run < 2; ++run) {
      const uint64_t id = submit(engine.get(), "Once upon a time", sampling);
      auto samples = assemble(run_to_completion(engine.get()));
      ASSERT_EQ(samples.size(), 1u);
      const SampleResult& s = samples.at({id, 0});
      EXPECT_EQ(s.num_finish_events, 1);
      EXPECT_EQ(s.num_events_after_finish, 0);
      EXPECT_EQ(s.finish_reason, PVLLM_FINISH_LENGTH);
      EXPECT_EQ(s.token_ids.size(), 12u);
      EXPECT_TRUE(is_valid_utf8(s.text));
      runs.push_back(s.token_ids);
    }
  }
  for (size_t i = 1; i < runs.size(); ++i) EXPECT_EQ(runs[i], runs[0]) << "run " << i;
}

TEST_F(CapiTest, TokenizeAndDetokenizeRoundTripWithBufferTooSmallProtocol) {
  EnginePtr engine = make_engine();
  ASSERT_NE(engine, nullptr);
  const std::string text = "Hello world, the cat sat on the mat.";
  Error error;

  size_t num_ids = 0;
  ASSERT_EQ(pvllm_tokenize(engine.get(), text.c_str(), 1, nullptr, 0, &num_ids, error.out()),
            PVLLM_STATUS_BUFFER_TOO_SMALL);
  EXPECT_EQ(pvllm_error_status(error.get()), PVLLM_STATUS_BUFFER_TOO_SMALL);
  ASSERT_GT(num_ids, 1u);

  std::vector<int32_t> ids(num_ids);
  size_t needed = 0;
  EXPECT_EQ(
      pvllm_tokenize(engine.get(), text.c_str(), 1, ids.data(), num_ids - 1, &needed, error.out()),
      PVLLM_STATUS_BUFFER_TOO_SMALL);
  EXPECT_EQ(needed, num_ids);
  ASSERT_EQ(
      pvllm_tokenize(engine.get(), text.c_str(), 1, ids.data(), ids.size(), &needed, error.out()),
      PVLLM_STATUS_OK)
      << error.message();
  EXPECT_EQ(needed, num_ids);

  // Without BOS the text needs exactly one id fewer, and the same ids after it.
  std::vector<int32_t> ids_no_bos(num_ids);
  ASSERT_EQ(pvllm_tokenize(engine.get(), text.c_str(), 0, ids_no_bos.data(), ids_no_bos.size(),
                           &needed, error.out()),
            PVLLM_STATUS_OK);
  ASSERT_EQ(needed, num_ids - 1);
  EXPECT_TRUE(std::equal(ids.begin() + 1, ids.end(), ids_no_bos.begin()));

  size_t len = 0;
  EXPECT_EQ(pvllm_detokenize(engine.get(), ids.data(), ids.size(), nullptr, 0, &len, error.out()),
            PVLLM_STATUS_BUFFER_TOO_SMALL);
  EXPECT_EQ(len, text.size());
  std::string out(text.size(), 'x');  // room for the text but not its NUL
  EXPECT_EQ(pvllm_detokenize(engine.get(), ids.data(), ids.size(), out.data(), out.size(), &len,
                             error.out()),
            PVLLM_STATUS_BUFFER_TOO_SMALL);
  std::vector<char> buffer(len + 1, 'x');
  ASSERT_EQ(pvllm_detokenize(engine.get(), ids.data(), ids.size(), buffer.data(), buffer.size(),
                             &len, error.out()),
            PVLLM_STATUS_OK)
      << error.message();
  EXPECT_EQ(buffer[len], '\0');
  EXPECT_EQ(std::string(buffer.data(), len), text);
}

TEST_F(CapiTest, StatsStayConsistentWhileGenerating) {
  EnginePtr engine = make_engine();
  ASSERT_NE(engine, nullptr);
  const pvllm_stats before = get_stats(engine.get());
  EXPECT_EQ(before.num_blocks_total, 128);
  EXPECT_EQ(before.num_blocks_used, 0);

  const pvllm_sampling_params sampling = greedy(10);
  submit(engine.get(), "Once upon a time there was a cat", sampling);
  submit(engine.get(), "The dog ran to the park", sampling);
  EXPECT_EQ(get_stats(engine.get()).num_waiting, 2);

  int32_t num_unfinished = 1;
  std::vector<Event> events;
  bool saw_blocks_in_use = false;
  for (int step = 0; step < 200 && num_unfinished > 0; ++step) {
    Error error;
    ASSERT_EQ(pvllm_step(engine.get(), &num_unfinished, error.out()), PVLLM_STATUS_OK)
        << error.message();
    poll_into(engine.get(), &events);
    const pvllm_stats s = get_stats(engine.get());
    EXPECT_EQ(s.num_blocks_total, 128);
    EXPECT_EQ(s.num_blocks_used + s.num_blocks_free + s.num_blocks_cached, s.num_blocks_total)
        << "after step " << step;
    EXPECT_NEAR(s.kv_utilization, static_cast<float>(s.num_blocks_used) / s.num_blocks_total,
                1e-5f);
    saw_blocks_in_use = saw_blocks_in_use || s.num_blocks_used > 0;
    EXPECT_EQ(s.num_steps, step + 1);
  }
  EXPECT_EQ(num_unfinished, 0);
  EXPECT_TRUE(saw_blocks_in_use);

  const pvllm_stats after = get_stats(engine.get());
  EXPECT_GT(after.num_prompt_tokens_processed, 0);
  EXPECT_EQ(after.num_generation_tokens, 20);
  EXPECT_EQ(after.num_requests_finished, 2);
  EXPECT_EQ(after.num_running, 0);
  EXPECT_EQ(after.num_waiting, 0);
  EXPECT_EQ(after.num_blocks_used, 0);
}

TEST_F(CapiTest, AbortOfRunningRequestYieldsExactlyOneAbortEvent) {
  EnginePtr engine = make_engine();
  ASSERT_NE(engine, nullptr);
  const uint64_t running = submit(engine.get(), "Once upon a time", greedy(200));
  const uint64_t other = submit(engine.get(), "The dog", greedy(6));

  // Step until the first request has produced tokens, so it is running.
  std::vector<Event> events;
  for (int step = 0; step < 50; ++step) {
    Error error;
    ASSERT_EQ(pvllm_step(engine.get(), nullptr, error.out()), PVLLM_STATUS_OK);
    poll_into(engine.get(), &events);
    if (assemble(events)[std::make_pair(running, 0)].token_ids.size() >= 2) break;
  }
  ASSERT_GE(assemble(events)[std::make_pair(running, 0)].token_ids.size(), 2u);

  Error error;
  ASSERT_EQ(pvllm_abort(engine.get(), running, error.out()), PVLLM_STATUS_OK) << error.message();
  const std::vector<Event> rest = run_to_completion(engine.get());
  events.insert(events.end(), rest.begin(), rest.end());
  auto samples = assemble(events);
  const SampleResult& aborted = samples[std::make_pair(running, 0)];
  EXPECT_EQ(aborted.num_finish_events, 1);
  EXPECT_EQ(aborted.finish_reason, PVLLM_FINISH_ABORT);
  EXPECT_EQ(aborted.num_events_after_finish, 0);
  EXPECT_LT(aborted.token_ids.size(), 200u);
  // The other request is untouched.
  const SampleResult& untouched = samples[std::make_pair(other, 0)];
  EXPECT_EQ(untouched.num_finish_events, 1);
  EXPECT_EQ(untouched.finish_reason, PVLLM_FINISH_LENGTH);
  EXPECT_EQ(untouched.token_ids.size(), 6u);
  // A finished request is gone.
  EXPECT_EQ(pvllm_abort(engine.get(), running, error.out()), PVLLM_STATUS_NOT_FOUND);
  EXPECT_NE(error.message(), "");
}

TEST_F(CapiTest, AbortOfWaitingRequestYieldsOneAbortEventAndNoTokens) {
  EnginePtr engine = make_engine();
  ASSERT_NE(engine, nullptr);
  const uint64_t id = submit(engine.get(), "Once upon a time", greedy(8));
  Error error;
  ASSERT_EQ(pvllm_abort(engine.get(), id, error.out()), PVLLM_STATUS_OK) << error.message();
  auto samples = assemble(run_to_completion(engine.get()));
  ASSERT_EQ(samples.size(), 1u);
  const SampleResult& s = samples[std::make_pair(id, 0)];
  EXPECT_EQ(s.num_finish_events, 1);
  EXPECT_EQ(s.finish_reason, PVLLM_FINISH_ABORT);
  EXPECT_TRUE(s.token_ids.empty());
}

TEST_F(CapiTest, LogprobsArePresentOnlyWhenAsked) {
  EnginePtr engine = make_engine();
  ASSERT_NE(engine, nullptr);
  pvllm_sampling_params with = greedy(6);
  with.logprobs = 3;
  const uint64_t asked = submit(engine.get(), "Once upon a time", with);
  const uint64_t not_asked = submit(engine.get(), "Once upon a time", greedy(6));
  const std::vector<Event> events = run_to_completion(engine.get());

  size_t num_tokens_checked = 0;
  for (const Event& e : events) {
    if (e.request_id == not_asked) {
      EXPECT_FALSE(e.has_logprobs);
      continue;
    }
    ASSERT_EQ(e.request_id, asked);
    if (e.token_ids.empty()) continue;
    ASSERT_TRUE(e.has_logprobs);
    ASSERT_EQ(e.logprobs.size(), e.token_ids.size());
    for (size_t t = 0; t < e.token_ids.size(); ++t) {
      const pvllm_token_logprobs& lp = e.logprobs[t];
      const std::vector<pvllm_logprob>& top = e.top[t];
      EXPECT_EQ(lp.token_id, e.token_ids[t]);
      EXPECT_LE(lp.logprob, 0.0f);
      ASSERT_EQ(top.size(), 3u);
      for (size_t k = 1; k < top.size(); ++k) EXPECT_GE(top[k - 1].logprob, top[k].logprob);
      // Greedy picks the most likely token of the raw distribution.
      EXPECT_EQ(top[0].token_id, lp.token_id);
      EXPECT_FLOAT_EQ(top[0].logprob, lp.logprob);
      ++num_tokens_checked;
    }
  }
  EXPECT_EQ(num_tokens_checked, 6u);
}

TEST_F(CapiTest, ParallelSamplingGivesNSamplesEachFinishingOnce) {
  EnginePtr engine = make_engine();
  ASSERT_NE(engine, nullptr);
  pvllm_sampling_params sampling;
  pvllm_sampling_params_init(&sampling, sizeof sampling);
  sampling.temperature = 1.0f;
  sampling.max_tokens = 8;
  sampling.ignore_eos = 1;
  sampling.n = 3;
  sampling.has_seed = 1;
  sampling.seed = 1234;
  const uint64_t id = submit(engine.get(), "Once upon a time", sampling);
  auto samples = assemble(run_to_completion(engine.get()));
  ASSERT_EQ(samples.size(), 3u);
  for (int32_t i = 0; i < 3; ++i) {
    const SampleResult& s = samples[{id, i}];
    EXPECT_EQ(s.num_finish_events, 1) << "sample " << i;
    EXPECT_EQ(s.num_events_after_finish, 0) << "sample " << i;
    EXPECT_EQ(s.finish_reason, PVLLM_FINISH_LENGTH) << "sample " << i;
    EXPECT_EQ(s.token_ids.size(), 8u) << "sample " << i;
  }
}

TEST_F(CapiTest, ErrorsFromManyThreadsCarryTheirOwnMessage) {
  EnginePtr engine = make_engine();
  ASSERT_NE(engine, nullptr);
  struct BadField {
    const char* name;
    void (*spoil)(pvllm_sampling_params*);
  };
  const std::vector<BadField> fields = {
      {"temperature", [](pvllm_sampling_params* s) { s->temperature = -1.0f; }},
      {"top_p", [](pvllm_sampling_params* s) { s->top_p = 0.0f; }},
      {"top_k", [](pvllm_sampling_params* s) { s->top_k = -1; }},
      {"min_p", [](pvllm_sampling_params* s) { s->min_p = 2.0f; }},
      {"repetition_penalty", [](pvllm_sampling_params* s) { s->repetition_penalty = 0.0f; }},
      {"max_tokens", [](pvllm_sampling_params* s) { s->max_tokens = 0; }},
      {"logprobs", [](pvllm_sampling_params* s) { s->logprobs = 50; }},
      {"frequency_penalty", [](pvllm_sampling_params* s) { s->frequency_penalty = NAN; }},
  };
  constexpr int kRounds = 200;
  std::latch start(static_cast<std::ptrdiff_t>(fields.size()));
  std::vector<std::string> failures(fields.size());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < fields.size(); ++t) {
    threads.emplace_back([&, t] {
      pvllm_sampling_params sampling;
      pvllm_sampling_params_init(&sampling, sizeof sampling);
      fields[t].spoil(&sampling);
      pvllm_request request;
      pvllm_request_init(&request, sizeof request);
      request.prompt_text = "Once upon a time";
      request.sampling = &sampling;
      start.arrive_and_wait();
      for (int round = 0; round < kRounds && failures[t].empty(); ++round) {
        uint64_t id = 0;
        pvllm_error* error = nullptr;
        const pvllm_status status = pvllm_submit(engine.get(), &request, &id, &error);
        const std::string message = pvllm_error_message(error);
        pvllm_error_free(error);
        if (status != PVLLM_STATUS_INVALID_ARGUMENT) {
          failures[t] = std::string("status ") + pvllm_status_to_string(status);
        } else if (message.find(fields[t].name) == std::string::npos) {
          failures[t] = "message \"" + message + "\" does not name " + fields[t].name;
        } else {
          for (size_t other = 0; other < fields.size(); ++other) {
            if (other != t && message.find(fields[other].name) != std::string::npos) {
              failures[t] = "message \"" + message + "\" names " + fields[other].name;
            }
          }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (size_t t = 0; t < fields.size(); ++t) EXPECT_EQ(failures[t], "") << fields[t].name;
  EXPECT_EQ(get_stats(engine.get()).num_waiting, 0);
}

TEST_F(CapiTest, ModelInspectReportsConfigAndTensorTable) {
  pvllm_model_info* raw = nullptr;
  Error error;
  ASSERT_EQ(pvllm_model_inspect(model_dir_.c_str(), &raw, error.out()), PVLLM_STATUS_OK)
      << error.message();
  pvllm::cxx::ModelInfoPtr info(raw);
  pvllm_model_config config;
  pvllm_model_config_init(&config, sizeof config);
  ASSERT_EQ(pvllm_model_info_config(info.get(), &config, error.out()), PVLLM_STATUS_OK);
  EXPECT_STREQ(config.format, "huggingface");
  EXPECT_STREQ(config.architecture, "llama");
  EXPECT_EQ(config.hidden_size, spec_.hidden_size);
  EXPECT_EQ(config.intermediate_size, spec_.intermediate_size);
  EXPECT_EQ(config.num_layers, spec_.num_layers);
  EXPECT_EQ(config.num_heads, spec_.num_heads);
  EXPECT_EQ(config.num_kv_heads, spec_.num_kv_heads);
  EXPECT_EQ(config.head_dim, spec_.hidden_size / spec_.num_heads);
  EXPECT_EQ(config.vocab_size, tiny_tokenizer_vocab_size());
  EXPECT_EQ(config.max_position_embeddings, spec_.max_position_embeddings);
  EXPECT_EQ(config.tie_word_embeddings, spec_.tie_word_embeddings ? 1 : 0);

  const size_t num_tensors = pvllm_model_info_num_tensors(info.get());
  // embed + final norm + 9 per layer (tied: no lm_head).
  EXPECT_EQ(num_tensors, 2u + 9u * spec_.num_layers);
  bool found_embed = false;
  for (size_t i = 0; i < num_tensors; ++i) {
    pvllm_tensor_info t;
    ASSERT_EQ(pvllm_model_info_tensor(info.get(), i, &t, error.out()), PVLLM_STATUS_OK);
    ASSERT_NE(t.name, nullptr);
    EXPECT_STREQ(t.dtype, "F32") << t.name;
    ASSERT_GE(t.num_dims, 1) << t.name;
    ASSERT_LE(t.num_dims, 4) << t.name;
    if (std::string(t.name) == "model.embed_tokens.weight") {
      found_embed = true;
      ASSERT_EQ(t.num_dims, 2);
      EXPECT_EQ(t.shape[0], tiny_tokenizer_vocab_size());
      EXPECT_EQ(t.shape[1], spec_.hidden_size);
    }
  }
  EXPECT_TRUE(found_embed);
}

TEST_F(CapiTest, ModelInspectReadsLlama2cCheckpoints) {
  const std::string bin = write_tiny_llama2c_model(make_temp_dir("pvllm_capi_l2c"), spec_);
  pvllm_model_info* raw = nullptr;
  Error error;
  ASSERT_EQ(pvllm_model_inspect(bin.c_str(), &raw, error.out()), PVLLM_STATUS_OK)
      << error.message();
  pvllm::cxx::ModelInfoPtr info(raw);
  pvllm_model_config config;
  pvllm_model_config_init(&config, sizeof config);
  ASSERT_EQ(pvllm_model_info_config(info.get(), &config, error.out()), PVLLM_STATUS_OK);
  EXPECT_STREQ(config.format, "llama2c");
  EXPECT_EQ(config.num_layers, spec_.num_layers);
  EXPECT_EQ(config.num_kv_heads, spec_.num_kv_heads);
  EXPECT_GT(pvllm_model_info_num_tensors(info.get()), 0u);
}

TEST_F(CapiTest, EstimateMemoryMatchesTensorTableAndBudget) {
  // Weight bytes are the tensor table's bytes (f32: 4 per element).
  pvllm_model_info* raw = nullptr;
  Error error;
  ASSERT_EQ(pvllm_model_inspect(model_dir_.c_str(), &raw, error.out()), PVLLM_STATUS_OK);
  pvllm::cxx::ModelInfoPtr info(raw);
  uint64_t tensor_bytes = 0;
  for (size_t i = 0; i < pvllm_model_info_num_tensors(info.get()); ++i) {
    pvllm_tensor_info t;
    ASSERT_EQ(pvllm_model_info_tensor(info.get(), i, &t, error.out()), PVLLM_STATUS_OK);
    uint64_t numel = 1;
    for (int32_t d = 0; d < t.num_dims; ++d) numel *= static_cast<uint64_t>(t.shape[d]);
    tensor_bytes += numel * 4;
  }

  pvllm_engine_params params;
  pvllm_engine_params_init(&params, sizeof params);
  params.model_path = model_dir_.c_str();
  params.block_size = 16;
  params.kv_cache_bytes = 1 << 20;
  params.max_model_len = 64;  // what 10 blocks of 16 hold, below
  pvllm_memory_estimate e;
  pvllm_memory_estimate_init(&e, sizeof e);
  ASSERT_EQ(pvllm_estimate_memory(&params, &e, error.out()), PVLLM_STATUS_OK) << error.message();
  EXPECT_EQ(e.weight_bytes, tensor_bytes);
  // K and V, every layer, block_size tokens, num_kv_heads * head_dim values each.
  const uint64_t values_per_block = 2ull * spec_.num_layers * params.block_size *
                                    spec_.num_kv_heads * (spec_.hidden_size / spec_.num_heads);
  ASSERT_GT(e.kv_bytes_per_block, 0u);
  EXPECT_EQ(e.kv_bytes_per_block % values_per_block, 0u);
  EXPECT_EQ(e.num_blocks, static_cast<int32_t>(params.kv_cache_bytes / e.kv_bytes_per_block));
  EXPECT_EQ(e.kv_bytes_total, e.kv_bytes_per_block * static_cast<uint64_t>(e.num_blocks));
  EXPECT_EQ(e.max_tokens_in_cache, static_cast<int64_t>(e.num_blocks) * params.block_size);

  // An exact block count wins over the byte budget.
  params.num_kv_blocks = 10;
  ASSERT_EQ(pvllm_estimate_memory(&params, &e, error.out()), PVLLM_STATUS_OK);
  EXPECT_EQ(e.num_blocks, 10);
  EXPECT_EQ(e.max_tokens_in_cache, 160);

  params.block_size = 12;
  EXPECT_EQ(pvllm_estimate_memory(&params, &e, error.out()), PVLLM_STATUS_INVALID_ARGUMENT);
}

// The library exports its ABI and nothing else (no C++ runtime, no
// sentencepiece, no core symbols that could clash with the host program).
// The struct_size protocol: *_init writes only the size the caller passes,
// and the library reads and writes only what a caller's struct_size covers,
// so callers built against older or newer headers keep working.
TEST_F(CapiTest, InitWritesOnlyTheCallersSize) {
  unsigned char buf[sizeof(pvllm_engine_params) + 16];
  std::memset(buf, 0xAB, sizeof buf);
  const size_t small = offsetof(pvllm_engine_params, block_size);
  pvllm_engine_params_init(reinterpret_cast<pvllm_engine_params*>(buf), small);
  for (size_t i = small; i < sizeof buf; ++i) ASSERT_EQ(buf[i], 0xAB) << "byte " << i;
  uint32_t stored = 0;
  std::memcpy(&stored, buf, sizeof stored);
  EXPECT_EQ(stored, small);
}

TEST_F(CapiTest, NewerCallersLargerStructsAreFilledAndAccepted) {
  struct NewerParams {
    pvllm_engine_params known;
    int64_t field_from_a_later_version;
  } newer;
  std::memset(&newer, 0xAB, sizeof newer);
  pvllm_engine_params_init(&newer.known, sizeof newer);
  EXPECT_EQ(newer.known.struct_size, sizeof newer);
  EXPECT_EQ(newer.known.block_size, 16);
  EXPECT_EQ(newer.known.kv_allocator, PVLLM_KV_ALLOCATOR_PAGED);
  EXPECT_EQ(newer.field_from_a_later_version, 0) << "bytes beyond the known fields are zeroed";
  newer.known.model_path = model_dir_.c_str();
  newer.known.num_kv_blocks = 128;
  newer.known.num_threads = 1;
  pvllm_engine* raw = nullptr;
  Error error;
  ASSERT_EQ(pvllm_engine_create(&newer.known, &raw, error.out()), PVLLM_STATUS_OK)
      << error.message();
  EnginePtr engine(raw);
  submit(engine.get(), "Once upon a time", greedy(4));
  ASSERT_EQ(pvllm_step(engine.get(), nullptr, error.out()), PVLLM_STATUS_OK);

  struct NewerStats {
    pvllm_stats known;
    int64_t field_from_a_later_version;
  } stats;
  pvllm_stats_init(&stats.known, sizeof stats);
  stats.field_from_a_later_version = -5;
  ASSERT_EQ(pvllm_get_stats(engine.get(), &stats.known, error.out()), PVLLM_STATUS_OK)
      << error.message();
  EXPECT_EQ(stats.known.struct_size, sizeof stats);
  EXPECT_EQ(stats.known.num_running, 1);
  EXPECT_GT(stats.known.num_kv_tokens_stored, 0);
  EXPECT_EQ(stats.field_from_a_later_version, -5) << "the library wrote past what it knows";
}

TEST_F(CapiTest, StructSizesBelowTheFirstVersionAreRejected) {
  pvllm_engine_params params;
  pvllm_engine_params_init(&params, sizeof params);
  params.model_path = model_dir_.c_str();
  pvllm_engine* engine = nullptr;
  Error error;
  // ABI version 1's struct ended before random_weights (appended later).
  const auto v1_size = static_cast<uint32_t>(offsetof(pvllm_engine_params, random_weights));
  for (uint32_t bad : {0u, 4u, v1_size - 1}) {
    params.struct_size = bad;
    EXPECT_EQ(pvllm_engine_create(&params, &engine, error.out()), PVLLM_STATUS_INVALID_ARGUMENT)
        << "struct_size " << bad;
    EXPECT_NE(error.message().find("struct_size"), std::string::npos) << error.message();
    EXPECT_EQ(engine, nullptr);
  }
  pvllm_stats stats;
  pvllm_stats_init(&stats, sizeof stats);
  stats.struct_size = offsetof(pvllm_stats, backend) - 8;  // below ABI 1's struct
  EnginePtr ok = make_engine();
  ASSERT_NE(ok, nullptr);
  EXPECT_EQ(pvllm_get_stats(ok.get(), &stats, error.out()), PVLLM_STATUS_INVALID_ARGUMENT);
}

TEST_F(CapiTest, ContiguousAllocatorGivesTheSameGreedyTokens) {
  auto generate = [&](int32_t allocator) {
    pvllm_engine_params params;
    pvllm_engine_params_init(&params, sizeof params);
    params.model_path = model_dir_.c_str();
    params.num_kv_blocks = 128;
    params.num_threads = 1;
    params.kv_allocator = allocator;
    pvllm_engine* raw = nullptr;
    Error error;
    EXPECT_EQ(pvllm_engine_create(&params, &raw, error.out()), PVLLM_STATUS_OK) << error.message();
    EnginePtr engine(raw);
    const uint64_t id = submit(engine.get(), "Once upon a time", greedy(10));
    auto samples = assemble(run_to_completion(engine.get()));
    const pvllm_stats stats = get_stats(engine.get());
    EXPECT_EQ(stats.prefix_cache_queries, 0);
    return samples.at({id, 0}).token_ids;
  };
  const auto paged = generate(PVLLM_KV_ALLOCATOR_PAGED);
  EXPECT_EQ(paged.size(), 10u);
  EXPECT_EQ(generate(PVLLM_KV_ALLOCATOR_CONTIGUOUS), paged);
}

// Every pvllm_dtype (FP32 since 0.8) is accepted; the CPU computes in fp32
// whatever it says. A value past the enum names the field and its range.
TEST_F(CapiTest, EveryDtypeIsAcceptedAndAnUnknownOneRefused) {
  for (int32_t dtype : std::initializer_list<int32_t>{PVLLM_DTYPE_AUTO, PVLLM_DTYPE_BF16,
                                                      PVLLM_DTYPE_FP16, PVLLM_DTYPE_FP32, 4, -1}) {
    pvllm_engine_params params;
    pvllm_engine_params_init(&params, sizeof params);
    params.model_path = model_dir_.c_str();
    params.device = "cpu";
    params.num_threads = 1;
    params.dtype = dtype;
    pvllm_engine* raw = nullptr;
    Error error;
    const pvllm_status st = pvllm_engine_create(&params, &raw, error.out());
    EnginePtr engine(raw);
    if (dtype >= PVLLM_DTYPE_AUTO && dtype <= PVLLM_DTYPE_FP32) {
      EXPECT_EQ(st, PVLLM_STATUS_OK) << dtype << ": " << error.message();
    } else {
      EXPECT_EQ(st, PVLLM_STATUS_INVALID_ARGUMENT) << dtype;
      EXPECT_NE(error.message().find("3 (fp32), got " + std::to_string(dtype)), std::string::npos)
          << error.message();
    }
  }
}

TEST(CapiSymbols, OnlyPvllmSymbolsAreExported) {
  // The libpvllm.so this process loaded (build tree or bundle).
  const std::string library =
      pvllm::testing::library_holding(reinterpret_cast<const void*>(&pvllm_version));
  ASSERT_NE(library.find("libpvllm"), std::string::npos)
      << "dladdr did not find libpvllm.so: \"" << library << "\"";
  const std::string command = "nm -D --defined-only '" + library + "'";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr) << command;
  char line[1024];
  std::vector<std::string> exported;
  std::vector<std::string> foreign;
  while (std::fgets(line, sizeof(line), pipe) != nullptr) {
    // "<address> <type> <name>"; absolute symbols (type A) are version nodes.
    char type = 0;
    char name[900] = {0};
    if (std::sscanf(line, "%*s %c %899s", &type, name) != 2) continue;
    if (type == 'A') continue;
    std::string symbol = name;
    symbol = symbol.substr(0, symbol.find('@'));  // drop the version, "@@PVLLM_1"
    if (symbol.rfind("pvllm_", 0) == 0) {
      exported.push_back(symbol);
    } else {
      foreign.push_back(std::string(1, type) + " " + symbol);
    }
  }
  const int rc = pclose(pipe);
  if (rc != 0 && exported.empty()) GTEST_SKIP() << "nm is not available: " << command;
  EXPECT_TRUE(foreign.empty()) << "first foreign symbol: " << foreign.front() << " ("
                               << foreign.size() << " in all)";
  for (const char* required : {"pvllm_engine_create", "pvllm_submit", "pvllm_step", "pvllm_poll",
                               "pvllm_abort", "pvllm_error_message", "pvllm_version"}) {
    EXPECT_NE(std::find(exported.begin(), exported.end(), required), exported.end()) << required;
  }
}

}  // namespace
