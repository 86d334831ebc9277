// The engine's per-request event queues (core/engine/request_events.h)
// over a real engine on a tiny model, driven directly so that the
// interleavings the C ABI makes rare happen on purpose: a last event taken
// while another thread waits, a detach before the end, handlers that call
// back into the engine, many threads each reading their own request.
#include "core/engine/request_events.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/engine/engine.h"
#include "tests/util/tiny_model.h"

namespace pvllm {
namespace {

using testing::make_temp_dir;
using testing::TinyModelSpec;
using testing::write_tiny_hf_model;

class RequestEventsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_dir_ = new std::string(write_tiny_hf_model(make_temp_dir("request_events_test"), {}));
  }
  static void TearDownTestSuite() { delete model_dir_; }

  void SetUp() override {
    EngineConfig c;
    c.model_path = *model_dir_;
    c.device = "cpu";
    c.num_threads = 1;
    c.num_kv_blocks = 64;
    ASSERT_TRUE(Engine::create(c, &engine_).ok());
  }

  // Queues a request (greedy, or sampled when n > 1) with `delivery`.
  uint64_t submit(int32_t max_tokens, Delivery mode, int32_t n = 1, OutputHandler handler = {}) {
    SamplingParams p;
    p.temperature = n > 1 ? 0.8f : 0.0f;
    p.has_seed = true;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    p.n = n;
    uint64_t id = 0;
    EXPECT_TRUE(engine_
                    ->submit_text("Once upon a time", p, 0, &id, true,
                                  OutputDelivery{mode, std::move(handler)})
                    .ok());
    return id;
  }

  // Steps the engine until every request has finished.
  void run_engine() {
    while (engine_->has_unfinished()) ASSERT_TRUE(engine_->step().ok());
  }

  static size_t count_tokens(const std::vector<Output>& events) {
    size_t n = 0;
    for (const Output& e : events) n += e.token_ids.size();
    return n;
  }

  static std::string* model_dir_;
  std::unique_ptr<Engine> engine_;
};

std::string* RequestEventsTest::model_dir_ = nullptr;

TEST_F(RequestEventsTest, PerRequestEventsNeverReachTheSharedPoll) {
  const uint64_t id = submit(5, Delivery::kPerRequest);
  const uint64_t other = submit(3, Delivery::kShared);
  run_engine();
  std::vector<Output> shared;
  engine_->poll(&shared);
  EXPECT_EQ(count_tokens(shared), 3u);
  for (const Output& e : shared) EXPECT_EQ(e.request_id, other);
  std::vector<Output> mine;
  ASSERT_TRUE(engine_->poll_request(id, SIZE_MAX, &mine).ok());
  EXPECT_EQ(count_tokens(mine), 5u);
  ASSERT_FALSE(mine.empty());
  EXPECT_TRUE(mine.back().request_finished);
  for (size_t i = 0; i < mine.size(); ++i) EXPECT_EQ(mine[i].sequence, i);
  EXPECT_EQ(engine_->poll_request(id, SIZE_MAX, &mine).code(), StatusCode::kNotFound);
}

TEST_F(RequestEventsTest, SharedRequestsKeepPublicationOrder) {
  const uint64_t early = submit(4, Delivery::kShared);
  run_engine();
  const uint64_t late = submit(3, Delivery::kShared);
  run_engine();
  std::vector<Output> shared;
  engine_->poll(&shared);
  ASSERT_EQ(count_tokens(shared), 7u);
  std::vector<uint64_t> order;
  for (const Output& e : shared) order.push_back(e.request_id);
  const auto first_late = std::find(order.begin(), order.end(), late);
  ASSERT_NE(first_late, order.begin());
  EXPECT_TRUE(std::all_of(order.begin(), first_late, [&](uint64_t r) { return r == early; }));
  EXPECT_TRUE(std::all_of(first_late, order.end(), [&](uint64_t r) { return r == late; }))
      << "publication order is kept";
  EXPECT_TRUE(shared[first_late - order.begin() - 1].request_finished);
  EXPECT_TRUE(shared.back().request_finished);
}

TEST_F(RequestEventsTest, ALastEventTakenLeavesNothingBehind) {
  const uint64_t id = submit(2, Delivery::kShared);
  run_engine();
  std::vector<Output> taken;
  ASSERT_TRUE(engine_->poll_request(id, SIZE_MAX, &taken).ok());
  ASSERT_FALSE(taken.empty());
  EXPECT_TRUE(taken.back().request_finished);
  std::vector<Output> shared;
  engine_->poll(&shared);
  EXPECT_TRUE(shared.empty()) << "taken per request, not twice";
  EXPECT_EQ(engine_->wait(id, 0).code(), StatusCode::kNotFound);
  EXPECT_EQ(engine_->detach(id).code(), StatusCode::kNotFound);
}

TEST_F(RequestEventsTest, AWaiterSeesTheLastEventTakenByAnotherThread) {
  const uint64_t id = submit(3, Delivery::kPerRequest);
  std::atomic<int> waited{-1};
  std::thread waiter([&] { waited = static_cast<int>(engine_->wait(id, -1).code()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(waited.load(), -1) << "the wait returned with nothing published";
  run_engine();
  std::vector<Output> taken;
  ASSERT_TRUE(engine_->poll_request(id, SIZE_MAX, &taken).ok());
  waiter.join();
  EXPECT_EQ(waited.load(), static_cast<int>(StatusCode::kOk)) << "an event or the end is OK";
  EXPECT_EQ(count_tokens(taken), 3u);
  EXPECT_EQ(engine_->wait(id, 0).code(), StatusCode::kNotFound) << "and gone afterwards";
}

TEST_F(RequestEventsTest, AWaitTimesOutOnARequestThatMakesNothing) {
  const uint64_t id = submit(3, Delivery::kPerRequest);
  EXPECT_EQ(engine_->wait(id, 20).code(), StatusCode::kTimeout);
  run_engine();
  EXPECT_TRUE(engine_->wait(id, 0).ok());
}

TEST_F(RequestEventsTest, DetachDropsWhatIsQueuedAndWhatComesLater) {
  const uint64_t id = submit(30, Delivery::kShared, 2);
  ASSERT_TRUE(engine_->step().ok());
  ASSERT_TRUE(engine_->detach(id).ok());
  run_engine();
  std::vector<Output> events;
  engine_->poll(&events);
  EXPECT_TRUE(events.empty());
  EXPECT_EQ(engine_->poll_request(id, SIZE_MAX, &events).code(), StatusCode::kNotFound);
  // Its queue is gone once the request ended: a fresh request is unaffected.
  submit(2, Delivery::kShared);
  run_engine();
  engine_->poll(&events);
  EXPECT_EQ(count_tokens(events), 2u);
}

TEST_F(RequestEventsTest, TakeRequestHonoursMaxEventsAndOrder) {
  const uint64_t id = submit(6, Delivery::kShared);
  run_engine();
  std::vector<Output> events;
  while (engine_->poll_request(id, 1, &events).ok()) {
  }
  ASSERT_EQ(count_tokens(events), 6u);
  for (size_t i = 0; i + 1 < events.size(); ++i) EXPECT_FALSE(events[i].request_finished);
  EXPECT_TRUE(events.back().request_finished);
  std::vector<Output> shared;
  engine_->poll(&shared);
  EXPECT_TRUE(shared.empty()) << "taken per request, not twice";
}

TEST_F(RequestEventsTest, HandlersGetEveryEventInOrderAndMayCallTheEngine) {
  std::vector<Output> got;
  uint64_t submitted_from_handler = 0;
  const uint64_t id = submit(4, Delivery::kHandler, 1, [&](Output&& e) {
    // Called after the step lock is released: calling back in must not
    // deadlock.
    if (submitted_from_handler == 0) submitted_from_handler = submit(2, Delivery::kShared);
    (void)engine_->stats();
    got.push_back(std::move(e));
  });
  run_engine();
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(count_tokens(got), 4u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].request_id, id);
    EXPECT_EQ(got[i].sequence, i);
  }
  EXPECT_TRUE(got.back().request_finished);
  std::vector<Output> none;
  EXPECT_EQ(engine_->poll_request(id, SIZE_MAX, &none).code(), StatusCode::kNotFound);
  engine_->poll(&none);
  EXPECT_EQ(count_tokens(none), 2u) << "the request submitted by the handler ran";
}

TEST_F(RequestEventsTest, ManyReadersEachTakeTheirOwnRequestWhileAnotherThreadSteps) {
  constexpr int kRequests = 8;
  std::vector<uint64_t> ids;
  for (int i = 0; i < kRequests; ++i) ids.push_back(submit(6 + i, Delivery::kPerRequest));
  std::atomic<bool> stepping{true};
  std::thread stepper([&] {
    while (engine_->has_unfinished()) ASSERT_TRUE(engine_->step().ok());
    stepping = false;
  });
  std::vector<std::vector<Output>> got(kRequests);
  std::vector<std::thread> readers;
  for (int i = 0; i < kRequests; ++i) {
    readers.emplace_back([&, i] {
      for (;;) {
        const Status w = engine_->wait(ids[i], 1000);
        if (w.code() == StatusCode::kNotFound) return;
        if (!engine_->poll_request(ids[i], SIZE_MAX, &got[i]).ok()) return;
        if (!got[i].empty() && got[i].back().request_finished) return;
      }
    });
  }
  for (std::thread& t : readers) t.join();
  stepper.join();
  EXPECT_FALSE(stepping.load());
  for (int i = 0; i < kRequests; ++i) {
    EXPECT_EQ(count_tokens(got[i]), static_cast<size_t>(6 + i)) << "request " << i;
    for (size_t k = 0; k < got[i].size(); ++k) {
      EXPECT_EQ(got[i][k].request_id, ids[i]);
      EXPECT_EQ(got[i][k].sequence, k);
    }
    ASSERT_FALSE(got[i].empty());
    EXPECT_TRUE(got[i].back().request_finished);
  }
}

}  // namespace
}  // namespace pvllm
