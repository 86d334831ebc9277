// pvllm.hpp, the C++ header over the C ABI, built as C++17 (the standard it
// promises): every handle its types take is freed exactly once, errors
// carry the status and message of the call that failed, moves hand
// ownership over, and generation, tokenizing and inspection through it give
// what the raw C calls give. One file of the suite is built without
// exceptions (cpp_header_noexcept.cc).
//
// Freed exactly once: this executable defines every C ABI function that
// hands out a handle or an error and every destructor. Its definitions win
// over libpvllm.so's for the calls made from here (the header's inline code
// included), record each pointer in a ledger, and forward to the library's
// function (dlsym RTLD_NEXT). Every test ends with an empty ledger.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <pvllm/pvllm.hpp>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tests/integration/cpp_header_noexcept.h"
#include "tests/util/tiny_model.h"

static_assert(__cplusplus < 202002L, "this suite checks that pvllm.hpp builds as C++17");

namespace {

namespace px = pvllm::cxx;

// Handles and errors the library handed to this executable and not yet
// freed, with any free of a pointer that was not live.
class Ledger {
 public:
  void made(const void* handle) {
    if (handle == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (live_[handle]++ != 0) problems_.push_back("handed out twice without a free");
    ++num_made_;
  }
  void freed(const void* handle) {
    if (handle == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(handle);
    if (it == live_.end() || it->second == 0) {
      problems_.push_back("freed a handle that was not live (double free?)");
      return;
    }
    if (--it->second == 0) live_.erase(it);
  }
  bool is_live(const void* handle) {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.count(handle) != 0;
  }
  size_t num_live() {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.size();
  }
  // How many are live; forgets them, so one test's leak fails that test only.
  size_t take_live() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(live_, {}).size();
  }
  size_t num_made() {
    std::lock_guard<std::mutex> lock(mu_);
    return num_made_;
  }
  std::vector<std::string> take_problems() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(problems_, {});
  }

 private:
  std::mutex mu_;
  std::map<const void*, int> live_;
  std::vector<std::string> problems_;
  size_t num_made_ = 0;
};

Ledger& ledger() {
  static Ledger* ledger = new Ledger;  // outlives every static destructor
  return *ledger;
}

// The library's definition of `name`, past this executable's.
template <typename Fn>
Fn library_function(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (f == nullptr) {
    std::fprintf(stderr, "cpp_header_test: dlsym(RTLD_NEXT, %s) failed\n", name);
    std::abort();
  }
  return reinterpret_cast<Fn>(f);
}
#define LIBRARY(name) library_function<decltype(&::name)>(#name)

// Records the error a call handed out, if any; returns its status.
pvllm_status note(pvllm_status status, pvllm_error** error) {
  if (error != nullptr) ledger().made(*error);
  return status;
}

}  // namespace

extern "C" {

void pvllm_engine_destroy(pvllm_engine* engine) {
  static const auto fn = LIBRARY(pvllm_engine_destroy);
  ledger().freed(engine);
  fn(engine);
}
void pvllm_error_free(pvllm_error* error) {
  static const auto fn = LIBRARY(pvllm_error_free);
  ledger().freed(error);
  fn(error);
}
void pvllm_output_batch_free(pvllm_output_batch* batch) {
  static const auto fn = LIBRARY(pvllm_output_batch_free);
  ledger().freed(batch);
  fn(batch);
}
void pvllm_model_info_free(pvllm_model_info* info) {
  static const auto fn = LIBRARY(pvllm_model_info_free);
  ledger().freed(info);
  fn(info);
}

pvllm_status pvllm_engine_create(const pvllm_engine_params* params, pvllm_engine** out_engine,
                                 pvllm_error** error) {
  static const auto fn = LIBRARY(pvllm_engine_create);
  const pvllm_status status = fn(params, out_engine, error);
  if (out_engine != nullptr) ledger().made(*out_engine);
  return note(status, error);
}
pvllm_status pvllm_poll(pvllm_engine* engine, size_t max_events, pvllm_output_batch** out_batch,
                        pvllm_error** error) {
  static const auto fn = LIBRARY(pvllm_poll);
  const pvllm_status status = fn(engine, max_events, out_batch, error);
  if (out_batch != nullptr) ledger().made(*out_batch);
  return note(status, error);
}
pvllm_status pvllm_poll_request(pvllm_engine* engine, uint64_t request_id, size_t max_events,
                                pvllm_output_batch** out_batch, pvllm_error** error) {
  static const auto fn = LIBRARY(pvllm_poll_request);
  const pvllm_status status = fn(engine, request_id, max_events, out_batch, error);
  if (out_batch != nullptr) ledger().made(*out_batch);
  return note(status, error);
}
pvllm_status pvllm_model_inspect(const char* model_path, pvllm_model_info** out_info,
                                 pvllm_error** error) {
  static const auto fn = LIBRARY(pvllm_model_inspect);
  const pvllm_status status = fn(model_path, out_info, error);
  if (out_info != nullptr) ledger().made(*out_info);
  return note(status, error);
}
pvllm_status pvllm_model_inspect_random(const char* shape, pvllm_model_info** out_info,
                                        pvllm_error** error) {
  static const auto fn = LIBRARY(pvllm_model_inspect_random);
  const pvllm_status status = fn(shape, out_info, error);
  if (out_info != nullptr) ledger().made(*out_info);
  return note(status, error);
}

// The calls that hand out only an error.
pvllm_status pvllm_submit(pvllm_engine* engine, const pvllm_request* request,
                          uint64_t* out_request_id, pvllm_error** error) {
  static const auto fn = LIBRARY(pvllm_submit);
  return note(fn(engine, request, out_request_id, error), error);
}
pvllm_status pvllm_abort(pvllm_engine* engine, uint64_t request_id, pvllm_error** error) {
  static const auto fn = LIBRARY(pvllm_abort);
  return note(fn(engine, request_id, error), error);
}
pvllm_status pvllm_detach(pvllm_engine* engine, uint64_t request_id, pvllm_error** error) {
  static const auto fn = LIBRARY(pvllm_detach);
  return note(fn(engine, request_id, error), error);
}
pvllm_status pvllm_wait(pvllm_engine* engine, uint64_t request_id, int32_t timeout_ms,
                        pvllm_error** error) {
  static const auto fn = LIBRARY(pvllm_wait);
  return note(fn(engine, request_id, timeout_ms, error), error);
}
pvllm_status pvllm_step(pvllm_engine* engine, int32_t* out_num_unfinished, pvllm_error** error) {
  static const auto fn = LIBRARY(pvllm_step);
  return note(fn(engine, out_num_unfinished, error), error);
}
pvllm_status pvllm_get_stats(pvllm_engine* engine, pvllm_stats* out_stats, pvllm_error** error) {
  static const auto fn = LIBRARY(pvllm_get_stats);
  return note(fn(engine, out_stats, error), error);
}
pvllm_status pvllm_tokenize(pvllm_engine* engine, const char* text, uint8_t add_bos, int32_t* ids,
                            size_t capacity, size_t* out_num_ids, pvllm_error** error) {
  static const auto fn = LIBRARY(pvllm_tokenize);
  return note(fn(engine, text, add_bos, ids, capacity, out_num_ids, error), error);
}
pvllm_status pvllm_detokenize(pvllm_engine* engine, const int32_t* ids, size_t num_ids, char* text,
                              size_t capacity, size_t* out_len, pvllm_error** error) {
  static const auto fn = LIBRARY(pvllm_detokenize);
  return note(fn(engine, ids, num_ids, text, capacity, out_len, error), error);
}
pvllm_status pvllm_model_info_config(const pvllm_model_info* info, pvllm_model_config* out_config,
                                     pvllm_error** error) {
  static const auto fn = LIBRARY(pvllm_model_info_config);
  return note(fn(info, out_config, error), error);
}
pvllm_status pvllm_model_info_tensor(const pvllm_model_info* info, size_t index,
                                     pvllm_tensor_info* out_tensor, pvllm_error** error) {
  static const auto fn = LIBRARY(pvllm_model_info_tensor);
  return note(fn(info, index, out_tensor, error), error);
}
pvllm_status pvllm_estimate_memory(const pvllm_engine_params* params,
                                   pvllm_memory_estimate* out_estimate, pvllm_error** error) {
  static const auto fn = LIBRARY(pvllm_estimate_memory);
  return note(fn(params, out_estimate, error), error);
}

}  // extern "C"

namespace {

using pvllm::testing::make_temp_dir;
using pvllm::testing::TinyModelSpec;
using pvllm::testing::write_tiny_hf_model;

// One sample's result, however it was collected.
struct Sample {
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<float> logprobs;  // the chosen tokens'
  int32_t finish_reason = PVLLM_FINISH_NONE;
  int num_finish_events = 0;

  bool operator==(const Sample& o) const {
    return std::tie(token_ids, text, logprobs, finish_reason, num_finish_events) ==
           std::tie(o.token_ids, o.text, o.logprobs, o.finish_reason, o.num_finish_events);
  }
};
using Samples = std::map<std::pair<size_t, int32_t>, Sample>;  // (prompt index, sample index)

void add_event(const pvllm_output& out, size_t prompt_index, Samples* samples) {
  Sample& s = (*samples)[{prompt_index, out.sample_index}];
  s.token_ids.insert(s.token_ids.end(), out.token_ids, out.token_ids + out.num_token_ids);
  s.text.append(out.text, out.text_len);
  for (size_t t = 0; out.logprobs != nullptr && t < out.num_token_ids; ++t) {
    s.logprobs.push_back(out.logprobs[t].logprob);
  }
  if (out.finish_reason != PVLLM_FINISH_NONE) {
    s.finish_reason = out.finish_reason;
    ++s.num_finish_events;
  }
}

class CppHeaderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_dir_ = new std::string(write_tiny_hf_model(make_temp_dir("pvllm_cpp_header"), {}));
  }
  static void TearDownTestSuite() {
    delete model_dir_;
    model_dir_ = nullptr;
  }

  void SetUp() override { ledger().take_problems(); }
  // Whatever a test did, nothing it was handed is still live or was freed
  // twice.
  void TearDown() override {
    EXPECT_EQ(ledger().take_live(), 0u) << "handles or errors leaked";
    for (const std::string& p : ledger().take_problems()) ADD_FAILURE() << p;
  }

  static pvllm_engine_params params() {
    pvllm_engine_params p = px::defaults<pvllm_engine_params>();
    p.model_path = model_dir_->c_str();
    p.num_kv_blocks = 64;
    p.num_threads = 1;
    return p;
  }

  static pvllm_sampling_params sampling(int32_t max_tokens) {
    pvllm_sampling_params s = px::defaults<pvllm_sampling_params>();
    s.temperature = 0.8f;
    s.has_seed = 1;
    s.seed = 42;
    s.max_tokens = max_tokens;
    s.ignore_eos = 1;
    s.n = 2;
    s.logprobs = 1;
    return s;
  }

  static std::string* model_dir_;
};

std::string* CppHeaderTest::model_dir_ = nullptr;

const char* const kPrompt = "Once upon a time";
const std::vector<int32_t> kPromptIds = {1, 7, 12, 30, 4};

TEST_F(CppHeaderTest, DefaultsAreWhatInitWrites) {
  auto same = [](const auto& made, auto init) {
    std::decay_t<decltype(made)> expected;
    std::memset(&expected, 0, sizeof expected);
    init(&expected, sizeof expected);
    return made.struct_size == sizeof expected &&
           std::memcmp(&made, &expected, sizeof expected) == 0;
  };
  EXPECT_TRUE(same(px::defaults<pvllm_engine_params>(), pvllm_engine_params_init));
  EXPECT_TRUE(same(px::defaults<pvllm_sampling_params>(), pvllm_sampling_params_init));
  EXPECT_TRUE(same(px::defaults<pvllm_request>(), pvllm_request_init));
  EXPECT_TRUE(same(px::defaults<pvllm_stats>(), pvllm_stats_init));
  EXPECT_TRUE(same(px::defaults<pvllm_model_config>(), pvllm_model_config_init));
  EXPECT_TRUE(same(px::defaults<pvllm_memory_estimate>(), pvllm_memory_estimate_init));
  EXPECT_EQ(px::defaults<pvllm_sampling_params>().max_tokens, 16);
}

TEST_F(CppHeaderTest, GenerationEqualsTheRawCalls) {
  const pvllm_sampling_params s = sampling(10);

  Samples through_header;
  pvllm_stats header_stats;
  {
    px::Engine engine(params());
    std::map<uint64_t, size_t> prompt_of;
    prompt_of[engine.submit(kPrompt, s)] = 0;
    prompt_of[engine.submit(kPromptIds, s)] = 1;
    for (int32_t unfinished = 1; unfinished > 0;) {
      unfinished = engine.step();
      for (const pvllm_output& out : engine.poll()) {
        add_event(out, prompt_of.at(out.request_id), &through_header);
      }
    }
    header_stats = engine.stats();
  }

  Samples through_c;
  pvllm_stats c_stats;
  pvllm_stats_init(&c_stats, sizeof c_stats);
  {
    const pvllm_engine_params p = params();
    pvllm_engine* engine = nullptr;
    ASSERT_EQ(pvllm_engine_create(&p, &engine, nullptr), PVLLM_STATUS_OK);
    std::map<uint64_t, size_t> prompt_of;
    pvllm_request request;
    pvllm_request_init(&request, sizeof request);
    request.prompt_text = kPrompt;
    request.sampling = &s;
    uint64_t id = 0;
    ASSERT_EQ(pvllm_submit(engine, &request, &id, nullptr), PVLLM_STATUS_OK);
    prompt_of[id] = 0;
    request.prompt_text = nullptr;
    request.prompt_token_ids = kPromptIds.data();
    request.num_prompt_token_ids = kPromptIds.size();
    ASSERT_EQ(pvllm_submit(engine, &request, &id, nullptr), PVLLM_STATUS_OK);
    prompt_of[id] = 1;
    for (int32_t unfinished = 1; unfinished > 0;) {
      ASSERT_EQ(pvllm_step(engine, &unfinished, nullptr), PVLLM_STATUS_OK);
      pvllm_output_batch* batch = nullptr;
      ASSERT_EQ(pvllm_poll(engine, 0, &batch, nullptr), PVLLM_STATUS_OK);
      for (size_t i = 0; i < pvllm_output_batch_size(batch); ++i) {
        const pvllm_output* out = pvllm_output_batch_get(batch, i);
        add_event(*out, prompt_of.at(out->request_id), &through_c);
      }
      pvllm_output_batch_free(batch);
    }
    ASSERT_EQ(pvllm_get_stats(engine, &c_stats, nullptr), PVLLM_STATUS_OK);
    pvllm_engine_destroy(engine);
  }

  ASSERT_EQ(through_c.size(), 4u);  // 2 prompts x n = 2
  for (const auto& [key, sample] : through_c) {
    EXPECT_EQ(sample.token_ids.size(), 10u);
    EXPECT_EQ(sample.logprobs.size(), 10u);
    EXPECT_EQ(sample.num_finish_events, 1);
    EXPECT_TRUE(through_header.at(key) == sample)
        << "prompt " << key.first << " sample " << key.second << ": \""
        << through_header.at(key).text << "\" vs \"" << sample.text << "\"";
  }
  EXPECT_EQ(through_header.size(), through_c.size());
  EXPECT_EQ(header_stats.num_generation_tokens, c_stats.num_generation_tokens);
  EXPECT_EQ(header_stats.num_prompt_tokens_processed, c_stats.num_prompt_tokens_processed);
  EXPECT_EQ(header_stats.num_requests_finished, 2);
}

TEST_F(CppHeaderTest, TokenizeAndDetokenizeEqualTheRawCalls) {
  px::Engine engine(params());
  const std::string text = "Hello world, the cat sat on the mat.";
  const std::vector<int32_t> ids = engine.tokenize(text);

  std::vector<int32_t> raw(256);
  size_t num_ids = 0;
  ASSERT_EQ(
      pvllm_tokenize(engine.get(), text.c_str(), 1, raw.data(), raw.size(), &num_ids, nullptr),
      PVLLM_STATUS_OK);
  raw.resize(num_ids);
  EXPECT_EQ(ids, raw);
  const std::vector<int32_t> without_bos = engine.tokenize(text, false);
  ASSERT_EQ(without_bos.size() + 1, ids.size());
  EXPECT_TRUE(std::equal(without_bos.begin(), without_bos.end(), ids.begin() + 1));
  EXPECT_EQ(engine.detokenize(ids), text);
  EXPECT_EQ(engine.detokenize(nullptr, 0), "");

  // A text longer than the first buffer guess (4 bytes a token): the
  // longest piece of the vocabulary, many times over, takes the
  // BUFFER_TOO_SMALL path.
  const int32_t vocab_size = pvllm::testing::tiny_tokenizer_vocab_size();
  std::vector<int32_t> longest;
  size_t longest_len = 0;
  for (int32_t id = 0; id < vocab_size; ++id) {
    const std::vector<int32_t> repeated(4, id);
    size_t len = 0;
    pvllm_detokenize(engine.get(), repeated.data(), repeated.size(), nullptr, 0, &len, nullptr);
    if (len > longest_len) {
      longest_len = len;
      longest = std::vector<int32_t>(50, id);
    }
  }
  ASSERT_GT(longest_len, 4u * 4u) << "no piece longer than 4 bytes in the tiny vocabulary";
  size_t len = 0;
  ASSERT_EQ(
      pvllm_detokenize(engine.get(), longest.data(), longest.size(), nullptr, 0, &len, nullptr),
      PVLLM_STATUS_BUFFER_TOO_SMALL);
  std::string expected(len + 1, '\0');
  ASSERT_EQ(pvllm_detokenize(engine.get(), longest.data(), longest.size(), expected.data(),
                             expected.size(), &len, nullptr),
            PVLLM_STATUS_OK);
  expected.resize(len);
  EXPECT_GT(expected.size(), longest.size() * 4);
  EXPECT_EQ(engine.detokenize(longest), expected);
  // And that text back into ids: a long tokenize for good measure.
  const std::vector<int32_t> back = engine.tokenize(expected, false);
  EXPECT_EQ(engine.detokenize(back), expected);
}

TEST_F(CppHeaderTest, ErrorsCarryStatusAndMessage) {
  pvllm_engine_params missing = params();
  missing.model_path = "/nonexistent/pvllm-model";
  try {
    px::Engine engine(missing);
    ADD_FAILURE() << "a missing model did not throw";
  } catch (const px::Error& e) {
    EXPECT_EQ(e.status(), PVLLM_STATUS_NOT_FOUND);
    EXPECT_STREQ(e.status_name(), "PVLLM_STATUS_NOT_FOUND");
    EXPECT_NE(std::string(e.what()).find("/nonexistent/pvllm-model"), std::string::npos)
        << e.what();
  }

  px::Engine engine(params());
  pvllm_sampling_params bad = sampling(4);
  bad.top_p = 0.0f;
  try {
    engine.submit(kPrompt, bad);
    ADD_FAILURE() << "top_p = 0 did not throw";
  } catch (const px::Error& e) {
    EXPECT_EQ(e.status(), PVLLM_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("top_p"), std::string::npos) << e.what();
  }
  EXPECT_EQ(engine.stats().num_waiting, 0) << "a failed submit changes nothing";

  auto status_of = [](auto&& call) {
    try {
      call();
    } catch (const px::Error& e) {
      EXPECT_STRNE(e.what(), "") << e.status_name();
      return e.status();
    }
    return PVLLM_STATUS_OK;
  };
  EXPECT_EQ(status_of([&] {
              engine.detokenize(std::vector<int32_t>{1, 1 << 30});
            }),
            PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(status_of([] { px::Engine().step(); }), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(status_of([] { px::Engine().poll(); }), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(status_of([] { px::ModelInfo::inspect("/nonexistent/pvllm-model"); }),
            PVLLM_STATUS_NOT_FOUND);
  EXPECT_EQ(status_of([] { px::ModelInfo::inspect_random("no-such-shape"); }),
            PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(status_of([] { px::ModelInfo::inspect_random("tiny").tensor(1u << 20); }),
            PVLLM_STATUS_INVALID_ARGUMENT);
  pvllm_engine_params odd_block = params();
  odd_block.block_size = 12;
  EXPECT_EQ(status_of([&] { px::estimate_memory(odd_block); }), PVLLM_STATUS_INVALID_ARGUMENT);

  pvllm_engine_params random = px::defaults<pvllm_engine_params>();
  random.random_weights = "tiny";
  random.num_kv_blocks = 64;
  random.max_model_len = 256;
  random.num_threads = 1;
  px::Engine no_tokenizer(random);
  EXPECT_EQ(status_of([&] { no_tokenizer.tokenize("hello"); }), PVLLM_STATUS_TOKENIZER_ERROR);

  // An error built by hand reads the same way.
  const px::Error made(PVLLM_STATUS_IO_ERROR, "");
  EXPECT_STREQ(made.what(), "PVLLM_STATUS_IO_ERROR");
}

TEST_F(CppHeaderTest, AbortReportsWhetherTheRequestWasStillThere) {
  px::Engine engine(params());
  const uint64_t id = engine.submit(kPrompt, sampling(50));
  EXPECT_TRUE(engine.abort(id));
  bool saw_abort = false;
  for (int32_t unfinished = 1; unfinished > 0;) {
    unfinished = engine.step();
    for (const pvllm_output& out : engine.poll()) {
      saw_abort = saw_abort || out.finish_reason == PVLLM_FINISH_ABORT;
    }
  }
  EXPECT_TRUE(saw_abort);
  EXPECT_FALSE(engine.abort(id)) << "finished";
  EXPECT_FALSE(engine.abort(987654321)) << "never submitted";
}

// A request of its own delivery read through wait and poll_request gives
// the tokens the shared poll gives, ends on request_finished, and then the
// request is gone (NOT_FOUND); a wait on nothing times out.
TEST_F(CppHeaderTest, PerRequestWaitAndPollEqualTheSharedPoll) {
  Samples shared;
  {
    px::Engine engine(params());
    const pvllm_sampling_params s = sampling(6);
    engine.submit(kPromptIds, s);
    for (int32_t unfinished = 1; unfinished > 0;) {
      unfinished = engine.step();
      for (const pvllm_output& out : engine.poll()) add_event(out, 0, &shared);
    }
  }
  px::Engine engine(params());
  const pvllm_sampling_params s = sampling(6);
  pvllm_request request = px::defaults<pvllm_request>();
  request.prompt_token_ids = kPromptIds.data();
  request.num_prompt_token_ids = kPromptIds.size();
  request.sampling = &s;
  request.delivery = PVLLM_DELIVERY_PER_REQUEST;
  const uint64_t id = engine.submit(request);
  EXPECT_FALSE(engine.wait(id, 0)) << "nothing to take before a step";
  Samples own;
  bool finished = false;
  while (!finished) {
    engine.step();
    EXPECT_TRUE(engine.poll().empty()) << "the shared poll must not see it";
    ASSERT_TRUE(engine.wait(id, 1000));
    for (const pvllm_output& out : engine.poll_request(id)) {
      add_event(out, 0, &own);
      finished = finished || out.request_finished != 0;
    }
  }
  EXPECT_EQ(own.size(), shared.size());
  for (const auto& [key, sample] : shared) {
    EXPECT_EQ(own[key].token_ids, sample.token_ids);
    EXPECT_EQ(own[key].num_finish_events, 1);
  }
  try {
    engine.poll_request(id);
    ADD_FAILURE() << "a finished request whose events were all taken is NOT_FOUND";
  } catch (const px::Error& e) {
    EXPECT_EQ(e.status(), PVLLM_STATUS_NOT_FOUND);
  }
  EXPECT_FALSE(engine.detach(id)) << "already over";
}

TEST_F(CppHeaderTest, EveryHandleIsFreedOnceItsOwnerGoes) {
  const size_t made_before = ledger().num_made();
  {
    px::Engine engine(params());
    const void* raw = engine.get();
    EXPECT_TRUE(ledger().is_live(raw));
    engine.submit(kPrompt, sampling(4));
    engine.step();
    px::OutputBatch batch = engine.poll();
    EXPECT_FALSE(batch.empty());
    EXPECT_TRUE(ledger().is_live(batch.get()));
    px::ModelInfo info = px::ModelInfo::inspect(*model_dir_);
    EXPECT_TRUE(ledger().is_live(info.get()));
    // Failed calls hand out errors: the wrappers free them as they throw,
    // and abort frees the NOT_FOUND one it turns into false.
    EXPECT_THROW(px::ModelInfo::inspect("/nonexistent"), px::Error);
    EXPECT_FALSE(engine.abort(12345));
    EXPECT_EQ(ledger().num_live(), 3u) << "the engine, the batch and the model info";
  }
  EXPECT_GE(ledger().num_made() - made_before, 5u) << "the ledger saw too little to mean much";
  EXPECT_EQ(ledger().num_live(), 0u);
}

TEST_F(CppHeaderTest, MovesHandOwnershipOver) {
  px::Engine a(params());
  const pvllm_engine* first = a.get();
  px::Engine b(std::move(a));
  EXPECT_FALSE(a);
  EXPECT_EQ(a.get(), nullptr);
  EXPECT_EQ(b.get(), first);
  EXPECT_TRUE(ledger().is_live(first));

  px::Engine c(params());
  const pvllm_engine* second = c.get();
  c = std::move(b);  // frees the second engine, keeps the first
  EXPECT_FALSE(ledger().is_live(second));
  EXPECT_TRUE(ledger().is_live(first));
  EXPECT_EQ(c.get(), first);
  c.submit(kPrompt, sampling(3));
  c.step();

  px::OutputBatch batch = c.poll();
  const size_t size = batch.size();
  ASSERT_GT(size, 0u);
  const pvllm_output_batch* raw_batch = batch.get();
  px::OutputBatch moved(std::move(batch));
  EXPECT_EQ(batch.size(), 0u);
  EXPECT_EQ(batch.begin(), batch.end());
  EXPECT_EQ(moved.size(), size);
  moved = c.poll();  // frees the first batch
  EXPECT_FALSE(ledger().is_live(raw_batch));

  px::ModelInfo info = px::ModelInfo::inspect_random("tiny");
  const pvllm_model_info* raw_info = info.get();
  px::ModelInfo other = std::move(info);
  EXPECT_FALSE(info);
  EXPECT_EQ(other.get(), raw_info);
  EXPECT_EQ(other.config().vocab_size, px::ModelInfo::inspect_random("tiny").config().vocab_size);

  // Adopting an owning pointer.
  px::EnginePtr ptr;
  const pvllm_engine_params p = params();
  ASSERT_EQ(pvllm_engine_create(&p, px::out_ptr(ptr), nullptr), PVLLM_STATUS_OK);
  const pvllm_engine* adopted = ptr.get();
  px::Engine owner(std::move(ptr));
  EXPECT_EQ(ptr, nullptr);
  EXPECT_EQ(owner.get(), adopted);
  EXPECT_EQ(owner.stats().num_blocks_total, 64);
}

TEST_F(CppHeaderTest, OutPtrFillsOwningPointers) {
  px::EnginePtr engine;
  px::ErrorPtr error;
  pvllm_engine_params missing = params();
  missing.model_path = "/nonexistent/pvllm-model";
  const pvllm_status failed =
      pvllm_engine_create(&missing, px::out_ptr(engine), px::out_ptr(error));
  EXPECT_EQ(failed, PVLLM_STATUS_NOT_FOUND);
  EXPECT_EQ(engine, nullptr);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(pvllm_error_status(error.get()), PVLLM_STATUS_NOT_FOUND);
  EXPECT_NE(std::string(pvllm_error_message(error.get())).find("pvllm-model"), std::string::npos);

  const pvllm_error* old_error = error.get();
  const pvllm_engine_params p = params();
  ASSERT_EQ(pvllm_engine_create(&p, px::out_ptr(engine), px::out_ptr(error)), PVLLM_STATUS_OK);
  EXPECT_NE(engine, nullptr);
  EXPECT_EQ(error, nullptr) << "success stores NULL";
  EXPECT_FALSE(ledger().is_live(old_error)) << "the previous error was freed";
}

TEST_F(CppHeaderTest, OutputBatchIteratesItsEvents) {
  const px::OutputBatch none;
  EXPECT_EQ(none.size(), 0u);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.begin(), none.end());

  px::Engine engine(params());
  engine.submit(kPrompt, sampling(3));
  engine.submit(kPromptIds, sampling(3));
  engine.step();
  engine.step();
  EXPECT_EQ(engine.poll(1).size(), 1u);
  const px::OutputBatch batch = engine.poll();
  ASSERT_GE(batch.size(), 2u);
  size_t i = 0;
  for (auto it = batch.begin(); it != batch.end(); it++, ++i) {
    EXPECT_EQ(&*it, pvllm_output_batch_get(batch.get(), i));
    EXPECT_EQ(&batch[i], &*it);
    EXPECT_EQ(it->request_id, batch[i].request_id);
  }
  EXPECT_EQ(i, batch.size());
  EXPECT_EQ(std::distance(batch.begin(), batch.end()), static_cast<std::ptrdiff_t>(batch.size()));
  EXPECT_TRUE(engine.poll().empty()) << "each event is delivered once";
}

TEST_F(CppHeaderTest, ModelInfoAndEstimateEqualTheRawCalls) {
  const px::ModelInfo info = px::ModelInfo::inspect(*model_dir_);
  pvllm_model_info* raw = nullptr;
  ASSERT_EQ(pvllm_model_inspect(model_dir_->c_str(), &raw, nullptr), PVLLM_STATUS_OK);
  pvllm_model_config expected;
  pvllm_model_config_init(&expected, sizeof expected);
  ASSERT_EQ(pvllm_model_info_config(raw, &expected, nullptr), PVLLM_STATUS_OK);
  const pvllm_model_config config = info.config();
  EXPECT_EQ(std::memcmp(&config, &expected, sizeof config), 0);
  EXPECT_STREQ(config.architecture, "llama");
  ASSERT_EQ(info.num_tensors(), pvllm_model_info_num_tensors(raw));
  ASSERT_GT(info.num_tensors(), 0u);
  for (size_t i = 0; i < info.num_tensors(); ++i) {
    const pvllm_tensor_info t = info.tensor(i);
    pvllm_tensor_info r;
    ASSERT_EQ(pvllm_model_info_tensor(raw, i, &r, nullptr), PVLLM_STATUS_OK);
    EXPECT_STREQ(t.name, r.name);
    EXPECT_STREQ(t.dtype, r.dtype);
    ASSERT_EQ(t.num_dims, r.num_dims);
    for (int32_t d = 0; d < t.num_dims; ++d) EXPECT_EQ(t.shape[d], r.shape[d]) << t.name;
  }
  pvllm_model_info_free(raw);

  pvllm_engine_params p = params();
  p.num_kv_blocks = 0;
  p.kv_cache_bytes = 1 << 20;
  const pvllm_memory_estimate e = px::estimate_memory(p);
  pvllm_memory_estimate r;
  pvllm_memory_estimate_init(&r, sizeof r);
  ASSERT_EQ(pvllm_estimate_memory(&p, &r, nullptr), PVLLM_STATUS_OK);
  EXPECT_EQ(std::memcmp(&e, &r, sizeof e), 0);
  EXPECT_GT(e.num_blocks, 0);
}

TEST_F(CppHeaderTest, TheNonThrowingHalfBuildsWithoutExceptionsAndGeneratesTheSame) {
  const NoexceptRun run = greedy_without_exceptions(model_dir_->c_str(), kPrompt, 12);
  ASSERT_EQ(run.status, PVLLM_STATUS_OK) << run.message;
  pvllm_sampling_params greedy = px::defaults<pvllm_sampling_params>();
  greedy.temperature = 0.0f;
  greedy.max_tokens = 12;
  greedy.ignore_eos = 1;
  px::Engine engine(params());
  engine.submit(kPrompt, greedy);
  std::vector<int32_t> tokens;
  for (int32_t unfinished = 1; unfinished > 0;) {
    unfinished = engine.step();
    for (const pvllm_output& out : engine.poll()) {
      tokens.insert(tokens.end(), out.token_ids, out.token_ids + out.num_token_ids);
    }
  }
  ASSERT_EQ(tokens.size(), 12u);
  EXPECT_EQ(std::vector<int32_t>(run.tokens, run.tokens + run.num_tokens), tokens);

  const NoexceptRun missing = greedy_without_exceptions("/nonexistent/pvllm-model", kPrompt, 4);
  EXPECT_EQ(missing.status, PVLLM_STATUS_NOT_FOUND);
  EXPECT_NE(std::string(missing.message).find("pvllm-model"), std::string::npos);
}

}  // namespace
