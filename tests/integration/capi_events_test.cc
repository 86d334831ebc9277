// Event routing through the C ABI (since 0.2): request_finished on each
// request's last event, pvllm_poll_request, pvllm_wait, pvllm_detach and
// PVLLM_DELIVERY_PER_REQUEST, on a tiny random-weight model, from several
// threads at once. The threaded tests are the cases a binding's own router
// used to get wrong: consumers of different requests at once, a consumer
// that never reads, an engine-wide poller beside per-request consumers,
// completion seen exactly once, an aborted request that must still finish.
#include <gtest/gtest.h>
#include <pvllm/pvllm.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/capi_helpers.h"
#include "tests/util/tiny_model.h"

extern "C" int pvllm_c_contract_checks(const char* model_path, char* failure, size_t failure_len);

namespace {

using pvllm::testing::make_temp_dir;
using pvllm::testing::TinyModelSpec;
using pvllm::testing::write_tiny_hf_model;
using Clock = std::chrono::steady_clock;

using pvllm::testing::BatchPtr;
using pvllm::testing::EnginePtr;
using pvllm::testing::take_message;

// An event copied out of its batch.
struct Event {
  uint64_t request_id = 0;
  int32_t sample_index = 0;
  std::vector<int32_t> token_ids;
  int32_t finish_reason = PVLLM_FINISH_NONE;
  bool request_finished = false;
};

std::vector<Event> copy_events(const pvllm_output_batch* batch) {
  std::vector<Event> events;
  for (size_t i = 0; i < pvllm_output_batch_size(batch); ++i) {
    const pvllm_output* o = pvllm_output_batch_get(batch, i);
    Event e;
    e.request_id = o->request_id;
    e.sample_index = o->sample_index;
    e.token_ids.assign(o->token_ids, o->token_ids + o->num_token_ids);
    e.finish_reason = o->finish_reason;
    e.request_finished = PVLLM_STRUCT_HAS(o, pvllm_output, request_finished) && o->request_finished;
    events.push_back(std::move(e));
  }
  return events;
}

// What one request's events add up to, and whether they respect the
// contract: one final event per sample, request_finished once and last.
struct RequestLog {
  std::map<int32_t, std::vector<int32_t>> tokens;  // per sample
  std::map<int32_t, int> finishes;                 // final events per sample
  std::map<int32_t, int32_t> reasons;              // per sample
  int num_request_finished = 0;
  int num_events_after_request_finished = 0;
  int num_events = 0;

  void add(const Event& e) {
    ++num_events;
    if (num_request_finished > 0) ++num_events_after_request_finished;
    auto& t = tokens[e.sample_index];
    t.insert(t.end(), e.token_ids.begin(), e.token_ids.end());
    if (e.finish_reason != PVLLM_FINISH_NONE) {
      ++finishes[e.sample_index];
      reasons[e.sample_index] = e.finish_reason;
    }
    if (e.request_finished) ++num_request_finished;
  }

  // "" when the log is one complete request of n samples.
  std::string check_complete(int32_t n) const {
    if (num_request_finished != 1) {
      return "request_finished seen " + std::to_string(num_request_finished) + " times";
    }
    if (num_events_after_request_finished != 0) return "events after request_finished";
    for (int32_t k = 0; k < n; ++k) {
      const auto it = finishes.find(k);
      if (it == finishes.end() || it->second != 1) {
        return "sample " + std::to_string(k) + " finished " +
               std::to_string(it == finishes.end() ? 0 : it->second) + " times";
      }
    }
    if (static_cast<int32_t>(finishes.size()) != n) return "events for samples beyond n";
    return "";
  }
};

class CapiEventsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_dir_ = write_tiny_hf_model(make_temp_dir("pvllm_capi_events"), TinyModelSpec{});
  }

  static EnginePtr make_engine(int32_t max_num_seqs = 16) {
    pvllm_engine_params params;
    pvllm_engine_params_init(&params, sizeof params);
    params.model_path = model_dir_.c_str();
    params.num_kv_blocks = 256;
    params.max_num_seqs = max_num_seqs;
    params.num_threads = 1;
    pvllm_engine* engine = nullptr;
    pvllm_error* error = nullptr;
    EXPECT_EQ(pvllm_engine_create(&params, &engine, &error), PVLLM_STATUS_OK)
        << take_message(error);
    return EnginePtr(engine);
  }

  static pvllm_sampling_params greedy(int32_t max_tokens, int32_t n = 1) {
    pvllm_sampling_params s;
    pvllm_sampling_params_init(&s, sizeof s);
    s.temperature = n > 1 ? 0.8f : 0.0f;
    s.has_seed = 1;
    s.seed = 7;
    s.max_tokens = max_tokens;
    s.ignore_eos = 1;
    s.n = n;
    return s;
  }

  static uint64_t submit(pvllm_engine* engine, const char* prompt,
                         const pvllm_sampling_params& sampling,
                         int32_t delivery = PVLLM_DELIVERY_SHARED) {
    pvllm_request request;
    pvllm_request_init(&request, sizeof request);
    request.prompt_text = prompt;
    request.sampling = &sampling;
    request.delivery = delivery;
    uint64_t id = 0;
    pvllm_error* error = nullptr;
    EXPECT_EQ(pvllm_submit(engine, &request, &id, &error), PVLLM_STATUS_OK) << take_message(error);
    return id;
  }

  static int32_t step(pvllm_engine* engine) {
    int32_t unfinished = -1;
    pvllm_error* error = nullptr;
    EXPECT_EQ(pvllm_step(engine, &unfinished, &error), PVLLM_STATUS_OK) << take_message(error);
    return unfinished;
  }

  static std::vector<Event> poll(pvllm_engine* engine, size_t max_events = 0) {
    pvllm_output_batch* raw = nullptr;
    pvllm_error* error = nullptr;
    EXPECT_EQ(pvllm_poll(engine, max_events, &raw, &error), PVLLM_STATUS_OK) << take_message(error);
    BatchPtr batch(raw);
    return copy_events(batch.get());
  }

  // The status of pvllm_poll_request; its events appended to *events.
  static pvllm_status poll_request(pvllm_engine* engine, uint64_t id, std::vector<Event>* events,
                                   size_t max_events = 0) {
    pvllm_output_batch* raw = reinterpret_cast<pvllm_output_batch*>(&raw);  // must be overwritten
    const pvllm_status status = pvllm_poll_request(engine, id, max_events, &raw, nullptr);
    if (status != PVLLM_STATUS_OK) {
      EXPECT_EQ(raw, nullptr) << "*out_batch after a failed pvllm_poll_request";
      return status;
    }
    BatchPtr batch(raw);
    const std::vector<Event> got = copy_events(batch.get());
    events->insert(events->end(), got.begin(), got.end());
    return status;
  }

  // Waits for and takes request `id`'s events until its last one, on this
  // thread; another thread steps. Gives up (and fails) after `limit`.
  static RequestLog consume(pvllm_engine* engine, uint64_t id,
                            std::chrono::seconds limit = std::chrono::seconds(60)) {
    RequestLog log;
    const auto deadline = Clock::now() + limit;
    while (log.num_request_finished == 0 && Clock::now() < deadline) {
      const pvllm_status waited = pvllm_wait(engine, id, 200, nullptr);
      if (waited == PVLLM_STATUS_TIMEOUT) continue;
      EXPECT_EQ(waited, PVLLM_STATUS_OK) << "request " << id;
      if (waited != PVLLM_STATUS_OK) break;
      std::vector<Event> events;
      EXPECT_EQ(poll_request(engine, id, &events), PVLLM_STATUS_OK) << "request " << id;
      for (const Event& e : events) {
        EXPECT_EQ(e.request_id, id);
        log.add(e);
      }
    }
    EXPECT_EQ(log.num_request_finished, 1) << "request " << id << " never finished";
    return log;
  }

  // Steps on its own thread until stop() (and then until nothing is left).
  class Stepper {
   public:
    explicit Stepper(pvllm_engine* engine)
        : thread_([this, engine] {
            for (;;) {
              const bool stopping = stop_.load();
              int32_t unfinished = 0;
              if (pvllm_step(engine, &unfinished, nullptr) != PVLLM_STATUS_OK) ++failures_;
              if (stopping && unfinished == 0) return;
              if (unfinished == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
            }
          }) {}
    ~Stepper() { stop(); }
    void stop() {
      stop_ = true;
      if (thread_.joinable()) thread_.join();
    }
    int failures() const { return failures_.load(); }

   private:
    std::atomic<bool> stop_{false};
    std::atomic<int> failures_{0};
    std::thread thread_;
  };

  static std::string model_dir_;
};

std::string CapiEventsTest::model_dir_;

TEST_F(CapiEventsTest, RequestFinishedMarksOnlyEachRequestsLastEvent) {
  EnginePtr engine = make_engine();
  const uint64_t one = submit(engine.get(), "Once upon a time", greedy(5));
  const uint64_t three = submit(engine.get(), "The cat", greedy(4, 3));
  std::vector<Event> events;
  while (step(engine.get()) > 0) {
    const std::vector<Event> got = poll(engine.get());
    events.insert(events.end(), got.begin(), got.end());
  }
  const std::vector<Event> rest = poll(engine.get());
  events.insert(events.end(), rest.begin(), rest.end());

  std::map<uint64_t, RequestLog> logs;
  for (const Event& e : events) logs[e.request_id].add(e);
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_EQ(logs[one].check_complete(1), "");
  EXPECT_EQ(logs[three].check_complete(3), "");
  for (int32_t k = 0; k < 3; ++k) EXPECT_EQ(logs[three].tokens[k].size(), 4u);
  // The flag sits on a final event: the request's last sample to finish.
  for (const Event& e : events) {
    if (e.request_finished) {
      EXPECT_NE(e.finish_reason, PVLLM_FINISH_NONE);
    }
  }
}

TEST_F(CapiEventsTest, AbortedRequestsFinishOnceWhateverTheirState) {
  EnginePtr engine = make_engine();
  // One running and forked (n = 2), one queued and never forked (n = 3,
  // aborted before any step: every sample still ends once).
  const uint64_t running = submit(engine.get(), "Once upon a time", greedy(200, 2));
  step(engine.get());
  step(engine.get());
  const uint64_t queued = submit(engine.get(), "The cat", greedy(200, 3));
  ASSERT_EQ(pvllm_abort(engine.get(), running, nullptr), PVLLM_STATUS_OK);
  ASSERT_EQ(pvllm_abort(engine.get(), queued, nullptr), PVLLM_STATUS_OK);
  EXPECT_EQ(step(engine.get()), 0);

  std::map<uint64_t, RequestLog> logs;
  for (const Event& e : poll(engine.get())) logs[e.request_id].add(e);
  EXPECT_EQ(logs[running].check_complete(2), "");
  EXPECT_EQ(logs[queued].check_complete(3), "");
  for (int32_t k = 0; k < 3; ++k) EXPECT_EQ(logs[queued].reasons[k], PVLLM_FINISH_ABORT);
  EXPECT_EQ(logs[running].reasons[0], PVLLM_FINISH_ABORT);
}

TEST_F(CapiEventsTest, PollRequestTakesOnlyItsOwnEventsInOrder) {
  EnginePtr engine = make_engine();
  const uint64_t a = submit(engine.get(), "Once upon a time", greedy(6));
  const uint64_t b = submit(engine.get(), "The cat", greedy(6));
  for (int i = 0; i < 3; ++i) step(engine.get());

  std::vector<Event> first;
  ASSERT_EQ(poll_request(engine.get(), a, &first, 1), PVLLM_STATUS_OK);
  ASSERT_EQ(first.size(), 1u) << "max_events is honoured";
  std::vector<Event> mine;
  ASSERT_EQ(poll_request(engine.get(), a, &mine), PVLLM_STATUS_OK);
  EXPECT_FALSE(mine.empty());
  for (const Event& e : mine) EXPECT_EQ(e.request_id, a);
  // The engine-wide poll now sees only b's events: a's were taken.
  const std::vector<Event> shared = poll(engine.get());
  EXPECT_FALSE(shared.empty());
  for (const Event& e : shared) EXPECT_EQ(e.request_id, b);

  while (step(engine.get()) > 0) {
  }
  ASSERT_EQ(poll_request(engine.get(), a, &mine), PVLLM_STATUS_OK);
  RequestLog log;
  log.add(first[0]);
  for (const Event& e : mine) log.add(e);
  EXPECT_EQ(log.check_complete(1), "");
  EXPECT_EQ(log.tokens[0].size(), 6u);

  // Over and delivered: the id is gone for per-request calls.
  std::vector<Event> none;
  EXPECT_EQ(poll_request(engine.get(), a, &none), PVLLM_STATUS_NOT_FOUND);
  EXPECT_EQ(pvllm_wait(engine.get(), a, 0, nullptr), PVLLM_STATUS_NOT_FOUND);
  EXPECT_EQ(pvllm_detach(engine.get(), a, nullptr), PVLLM_STATUS_NOT_FOUND);
  EXPECT_EQ(poll_request(engine.get(), 999999, &none), PVLLM_STATUS_NOT_FOUND);
}

TEST_F(CapiEventsTest, PerRequestDeliveryIsInvisibleToTheEngineWidePoll) {
  EnginePtr engine = make_engine();
  const uint64_t mine =
      submit(engine.get(), "Once upon a time", greedy(5, 2), PVLLM_DELIVERY_PER_REQUEST);
  const uint64_t shared = submit(engine.get(), "The cat", greedy(5));
  std::vector<Event> polled;
  for (int32_t unfinished = 1; unfinished > 0;) {
    unfinished = step(engine.get());
    const std::vector<Event> got = poll(engine.get());
    polled.insert(polled.end(), got.begin(), got.end());
  }
  RequestLog shared_log;
  for (const Event& e : polled) {
    ASSERT_EQ(e.request_id, shared) << "pvllm_poll returned an event of a PER_REQUEST request";
    shared_log.add(e);
  }
  EXPECT_EQ(shared_log.check_complete(1), "");

  std::vector<Event> events;
  ASSERT_EQ(poll_request(engine.get(), mine, &events), PVLLM_STATUS_OK);
  RequestLog log;
  for (const Event& e : events) log.add(e);
  EXPECT_EQ(log.check_complete(2), "");
  EXPECT_EQ(log.tokens[0].size() + log.tokens[1].size(), 10u);
}

TEST_F(CapiEventsTest, WaitTimesOutWhenNothingSteps) {
  EnginePtr engine = make_engine();
  const uint64_t id = submit(engine.get(), "Once upon a time", greedy(3));
  EXPECT_EQ(pvllm_wait(engine.get(), id, 0, nullptr), PVLLM_STATUS_TIMEOUT);
  pvllm_error* error = nullptr;
  const auto start = Clock::now();
  EXPECT_EQ(pvllm_wait(engine.get(), id, 60, &error), PVLLM_STATUS_TIMEOUT);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(55));
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(pvllm_error_status(error), PVLLM_STATUS_TIMEOUT);
  EXPECT_NE(take_message(error), "");
  step(engine.get());
  EXPECT_EQ(pvllm_wait(engine.get(), id, 0, nullptr), PVLLM_STATUS_OK) << "an event is waiting";
}

TEST_F(CapiEventsTest, WaitReturnsWhenAnotherThreadSteps) {
  EnginePtr engine = make_engine();
  const uint64_t id = submit(engine.get(), "Once upon a time", greedy(3));
  std::atomic<pvllm_status> waited{PVLLM_STATUS_INTERNAL};
  std::thread waiter([&] { waited = pvllm_wait(engine.get(), id, PVLLM_WAIT_INFINITE, nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(waited.load(), PVLLM_STATUS_INTERNAL) << "returned before any step";
  step(engine.get());
  waiter.join();
  EXPECT_EQ(waited.load(), PVLLM_STATUS_OK);
  std::vector<Event> events;
  EXPECT_EQ(poll_request(engine.get(), id, &events), PVLLM_STATUS_OK);
  EXPECT_FALSE(events.empty());
}

TEST_F(CapiEventsTest, DetachWakesItsWaiterAndDropsItsEvents) {
  EnginePtr engine = make_engine();
  const uint64_t id =
      submit(engine.get(), "Once upon a time", greedy(50), PVLLM_DELIVERY_PER_REQUEST);
  const uint64_t shared = submit(engine.get(), "The cat", greedy(50));
  std::atomic<pvllm_status> waited{PVLLM_STATUS_INTERNAL};
  std::thread waiter([&] { waited = pvllm_wait(engine.get(), id, PVLLM_WAIT_INFINITE, nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(pvllm_detach(engine.get(), id, nullptr), PVLLM_STATUS_OK);
  waiter.join();
  EXPECT_EQ(waited.load(), PVLLM_STATUS_NOT_FOUND);
  EXPECT_EQ(pvllm_detach(engine.get(), id, nullptr), PVLLM_STATUS_NOT_FOUND);

  // A shared request detached mid-way: pvllm_poll never sees the rest.
  step(engine.get());
  ASSERT_EQ(pvllm_detach(engine.get(), shared, nullptr), PVLLM_STATUS_OK);
  // Detached requests keep running until aborted.
  ASSERT_EQ(pvllm_abort(engine.get(), id, nullptr), PVLLM_STATUS_OK);
  while (step(engine.get()) > 0) {
  }
  EXPECT_TRUE(poll(engine.get()).empty());
  std::vector<Event> none;
  EXPECT_EQ(poll_request(engine.get(), id, &none), PVLLM_STATUS_NOT_FOUND);
  EXPECT_EQ(poll_request(engine.get(), shared, &none), PVLLM_STATUS_NOT_FOUND);
}

TEST_F(CapiEventsTest, WaitArgumentsAreChecked) {
  EnginePtr engine = make_engine();
  pvllm_error* error = nullptr;
  EXPECT_EQ(pvllm_wait(nullptr, 1, 0, &error), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(take_message(error).find("engine"), std::string::npos);
  EXPECT_EQ(pvllm_wait(engine.get(), 1, -2, &error), PVLLM_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(take_message(error).find("timeout_ms"), std::string::npos);
  EXPECT_EQ(pvllm_wait(engine.get(), 12345, PVLLM_WAIT_INFINITE, &error), PVLLM_STATUS_NOT_FOUND);
  EXPECT_NE(take_message(error).find("12345"), std::string::npos);
}

// Per-request consumers on their own threads, one stepping thread, and an
// engine-wide poller that must only ever see the shared requests. Every
// consumer gets exactly its requests' tokens and one completion, equal to
// the same requests run alone.
TEST_F(CapiEventsTest, ConcurrentConsumersEachGetExactlyTheirOwnEvents) {
  constexpr int kConsumers = 6;
  constexpr int kPerConsumer = 3;
  const char* prompts[] = {"Once upon a time", "The cat", "A dog ran", "She said"};
  auto params_for = [&](int c, int r) { return greedy(3 + (c + r) % 7, 1 + (c + r) % 3); };

  // The same requests alone, one by one, for reference tokens.
  std::map<std::pair<int, int>, RequestLog> reference;
  {
    EnginePtr alone = make_engine();
    for (int c = 0; c < kConsumers; ++c) {
      for (int r = 0; r < kPerConsumer; ++r) {
        const uint64_t id =
            submit(alone.get(), prompts[(c + r) % 4], params_for(c, r), PVLLM_DELIVERY_PER_REQUEST);
        while (step(alone.get()) > 0) {
        }
        std::vector<Event> events;
        ASSERT_EQ(poll_request(alone.get(), id, &events), PVLLM_STATUS_OK);
        for (const Event& e : events) reference[{c, r}].add(e);
      }
    }
  }

  EnginePtr engine = make_engine(/*max_num_seqs=*/8);
  Stepper stepper(engine.get());
  std::atomic<bool> consumers_done{false};
  std::set<uint64_t> per_request_ids;  // under mu
  std::mutex mu;
  std::vector<Event> shared_polled;  // the engine-wide poller's
  std::thread poller([&] {
    while (!consumers_done.load()) {
      const std::vector<Event> got = poll(engine.get());
      shared_polled.insert(shared_polled.end(), got.begin(), got.end());
      std::this_thread::yield();
    }
  });
  // Shared requests for the poller, so it has something to take.
  std::vector<uint64_t> shared_ids;
  for (int i = 0; i < 3; ++i) shared_ids.push_back(submit(engine.get(), prompts[i], greedy(4)));

  std::map<std::pair<int, int>, RequestLog> got;  // under mu
  std::vector<std::thread> consumers;
  for (int c = 0; c < kConsumers; ++c) {
    consumers.emplace_back([&, c] {
      for (int r = 0; r < kPerConsumer; ++r) {
        const uint64_t id = submit(engine.get(), prompts[(c + r) % 4], params_for(c, r),
                                   PVLLM_DELIVERY_PER_REQUEST);
        {
          std::lock_guard<std::mutex> lock(mu);
          per_request_ids.insert(id);
        }
        RequestLog log = consume(engine.get(), id);
        std::lock_guard<std::mutex> lock(mu);
        got[{c, r}] = std::move(log);
      }
    });
  }
  for (std::thread& t : consumers) t.join();
  consumers_done = true;
  poller.join();
  stepper.stop();
  EXPECT_EQ(stepper.failures(), 0);
  const std::vector<Event> rest = poll(engine.get());
  shared_polled.insert(shared_polled.end(), rest.begin(), rest.end());

  for (int c = 0; c < kConsumers; ++c) {
    for (int r = 0; r < kPerConsumer; ++r) {
      const RequestLog& log = got[{c, r}];
      const int32_t n = params_for(c, r).n;
      EXPECT_EQ(log.check_complete(n), "") << "consumer " << c << " request " << r;
      EXPECT_EQ(log.tokens, (reference[{c, r}].tokens)) << "consumer " << c << " request " << r;
    }
  }
  std::map<uint64_t, RequestLog> shared_logs;
  for (const Event& e : shared_polled) {
    EXPECT_EQ(per_request_ids.count(e.request_id), 0u)
        << "the engine-wide poll took an event of PER_REQUEST request " << e.request_id;
    shared_logs[e.request_id].add(e);
  }
  for (uint64_t id : shared_ids) EXPECT_EQ(shared_logs[id].check_complete(1), "") << id;
}

// A consumer that never reads holds back only its own request: the others
// run to the end, and its events are all still there afterwards.
TEST_F(CapiEventsTest, AConsumerThatNeverReadsStallsNobody) {
  EnginePtr engine = make_engine();
  const uint64_t idle =
      submit(engine.get(), "Once upon a time", greedy(40), PVLLM_DELIVERY_PER_REQUEST);
  Stepper stepper(engine.get());
  std::vector<std::thread> readers;
  std::vector<RequestLog> logs(3);
  for (int i = 0; i < 3; ++i) {
    readers.emplace_back([&, i] {
      const uint64_t id =
          submit(engine.get(), "The cat", greedy(30 + i), PVLLM_DELIVERY_PER_REQUEST);
      logs[i] = consume(engine.get(), id, std::chrono::seconds(30));
    });
  }
  for (std::thread& t : readers) t.join();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(logs[i].check_complete(1), "");
    EXPECT_EQ(logs[i].tokens[0].size(), static_cast<size_t>(30 + i));
  }
  stepper.stop();  // runs the idle request to its end too
  std::vector<Event> events;
  ASSERT_EQ(poll_request(engine.get(), idle, &events), PVLLM_STATUS_OK);
  RequestLog idle_log;
  for (const Event& e : events) idle_log.add(e);
  EXPECT_EQ(idle_log.check_complete(1), "");
  EXPECT_EQ(idle_log.tokens[0].size(), 40u) << "nothing of the unread request was lost";
}

// Many threads submit PER_REQUEST requests of one token while one thread
// steps and another polls engine-wide without pause: an event made in the
// instant between the engine accepting a request and pvllm_submit
// returning must still never reach the engine-wide poller.
TEST_F(CapiEventsTest, PerRequestEventsNeverEscapeDuringSubmit) {
  EnginePtr engine = make_engine(/*max_num_seqs=*/32);
  Stepper stepper(engine.get());
  std::atomic<bool> done{false};
  std::atomic<int> escaped{0};
  std::atomic<int> polled{0};
  std::thread poller([&] {
    while (!done.load()) {
      const std::vector<Event> got = poll(engine.get());
      escaped += static_cast<int>(got.size());  // every request below is PER_REQUEST
      ++polled;
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> submitters;
  std::atomic<int> complete{0};
  for (int t = 0; t < 4; ++t) {
    submitters.emplace_back([&] {
      std::vector<uint64_t> ids;
      for (int i = 0; i < 25; ++i) {
        ids.push_back(
            submit(engine.get(), "Once upon a time", greedy(1), PVLLM_DELIVERY_PER_REQUEST));
      }
      for (uint64_t id : ids) {
        if (consume(engine.get(), id).check_complete(1).empty()) ++complete;
      }
    });
  }
  for (std::thread& t : submitters) t.join();
  done = true;
  poller.join();
  stepper.stop();
  EXPECT_EQ(escaped.load(), 0);
  EXPECT_GT(polled.load(), 0);
  EXPECT_EQ(complete.load(), 100);
}

// Several threads poll one request's events; each event goes to exactly
// one of them, and the request still completes exactly once.
TEST_F(CapiEventsTest, SeveralPollersOfOneRequestShareItsEventsOnce) {
  EnginePtr engine = make_engine();
  const uint64_t id =
      submit(engine.get(), "Once upon a time", greedy(60, 2), PVLLM_DELIVERY_PER_REQUEST);
  Stepper stepper(engine.get());
  std::mutex mu;
  std::vector<Event> all;
  std::vector<std::thread> pollers;
  for (int p = 0; p < 3; ++p) {
    pollers.emplace_back([&] {
      for (;;) {
        std::vector<Event> got;
        const pvllm_status status = poll_request(engine.get(), id, &got, 2);
        if (status == PVLLM_STATUS_NOT_FOUND) return;  // over, last event taken
        EXPECT_EQ(status, PVLLM_STATUS_OK);
        if (got.empty()) std::this_thread::yield();
        std::lock_guard<std::mutex> lock(mu);
        all.insert(all.end(), got.begin(), got.end());
      }
    });
  }
  for (std::thread& t : pollers) t.join();
  stepper.stop();
  RequestLog log;
  size_t tokens = 0;
  for (const Event& e : all) {
    // Events were appended in lock order, not take order: count, don't order.
    tokens += e.token_ids.size();
    if (e.request_finished) ++log.num_request_finished;
    if (e.finish_reason != PVLLM_FINISH_NONE) ++log.finishes[e.sample_index];
  }
  EXPECT_EQ(tokens, 120u);
  EXPECT_EQ(log.num_request_finished, 1);
  EXPECT_EQ(log.finishes[0], 1);
  EXPECT_EQ(log.finishes[1], 1);
}

TEST_F(CapiEventsTest, ABatchOutlivesItsEngine) {
  EnginePtr engine = make_engine();
  submit(engine.get(), "Once upon a time", greedy(4));
  while (step(engine.get()) > 0) {
  }
  pvllm_output_batch* raw = nullptr;
  ASSERT_EQ(pvllm_poll(engine.get(), 0, &raw, nullptr), PVLLM_STATUS_OK);
  BatchPtr batch(raw);
  engine.reset();
  size_t tokens = 0;
  for (size_t i = 0; i < pvllm_output_batch_size(batch.get()); ++i) {
    const pvllm_output* o = pvllm_output_batch_get(batch.get(), i);
    tokens += o->num_token_ids;
    EXPECT_NE(o->text, nullptr);
    EXPECT_NE(o->error_message, nullptr);
  }
  EXPECT_EQ(tokens, 4u);
}

// The C99 side: names, sizes, out-parameters after failures (capi_contract.c).
TEST_F(CapiEventsTest, ContractChecksFromC) {
  char failure[512] = {0};
  EXPECT_EQ(pvllm_c_contract_checks(model_dir_.c_str(), failure, sizeof failure), 0) << failure;
}

}  // namespace
