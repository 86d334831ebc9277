// EventRouter over a real engine on a tiny model, driven directly so that
// the interleavings the C ABI makes rare happen on purpose: events made
// before pvllm_submit registered their request, a last event taken while
// another thread waits, a detach before the end.
#include "capi/event_router.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/util/tiny_model.h"

namespace pvllm {
namespace {

using testing::make_temp_dir;
using testing::TinyModelSpec;
using testing::write_tiny_hf_model;

class EventRouterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_dir_ = new std::string(write_tiny_hf_model(make_temp_dir("event_router_test"), {}));
  }
  static void TearDownTestSuite() { delete model_dir_; }

  void SetUp() override {
    EngineConfig c;
    c.model_path = *model_dir_;
    c.device = "cpu";
    c.num_threads = 1;
    c.num_kv_blocks = 64;
    ASSERT_TRUE(Engine::create(c, &engine_).ok());
    router_ = std::make_unique<EventRouter>(engine_.get());
  }

  // Queues a greedy request in the engine only, as pvllm_submit does
  // before it calls add_request.
  uint64_t submit_to_engine(int32_t max_tokens, int32_t n = 1) {
    SamplingParams p;
    p.temperature = n > 1 ? 0.8f : 0.0f;
    p.has_seed = true;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    p.n = n;
    uint64_t id = 0;
    EXPECT_TRUE(engine_->submit_text("Once upon a time", p, 0, &id).ok());
    return id;
  }

  // Steps the engine to the end without publishing.
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
  std::unique_ptr<EventRouter> router_;
};

std::string* EventRouterTest::model_dir_ = nullptr;

TEST_F(EventRouterTest, EventsMadeBeforeAPerRequestSubmitReturnsNeverReachTheSharedPoll) {
  const uint64_t id = submit_to_engine(5);
  run_engine();
  router_->publish();  // the events arrive before add_request
  std::vector<Output> shared;
  router_->take_shared(SIZE_MAX, &shared);
  EXPECT_TRUE(shared.empty()) << "the delivery of an unregistered request is not known yet";
  router_->add_request(id, Delivery::kPerRequest);
  router_->take_shared(SIZE_MAX, &shared);
  EXPECT_TRUE(shared.empty());
  std::vector<Output> mine;
  ASSERT_TRUE(router_->take_request(id, SIZE_MAX, &mine).ok());
  EXPECT_EQ(count_tokens(mine), 5u);
  ASSERT_FALSE(mine.empty());
  EXPECT_TRUE(mine.back().request_finished);
  EXPECT_EQ(router_->take_request(id, SIZE_MAX, &mine).code(), StatusCode::kNotFound);
}

TEST_F(EventRouterTest, EventsMadeBeforeASharedSubmitReturnsJoinTheSharedPollInOrder) {
  const uint64_t early = submit_to_engine(4);
  run_engine();
  router_->publish();
  const uint64_t late = submit_to_engine(3);
  router_->add_request(late, Delivery::kShared);
  run_engine();
  router_->publish();
  // `early` registers after `late` but its events were made first.
  router_->add_request(early, Delivery::kShared);
  std::vector<Output> shared;
  router_->take_shared(SIZE_MAX, &shared);
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

TEST_F(EventRouterTest, ALastEventTakenBeforeAddRequestLeavesNothingBehind) {
  const uint64_t id = submit_to_engine(2);
  run_engine();
  std::vector<Output> taken;
  ASSERT_TRUE(router_->take_request(id, SIZE_MAX, &taken).ok());  // a poller guessed the id
  ASSERT_FALSE(taken.empty());
  EXPECT_TRUE(taken.back().request_finished);
  router_->add_request(id, Delivery::kShared);
  EXPECT_EQ(router_->wait(id, 0).code(), StatusCode::kNotFound);
  EXPECT_EQ(router_->detach(id).code(), StatusCode::kNotFound);
}

TEST_F(EventRouterTest, AWaiterSeesTheLastEventTakenByAnotherThread) {
  const uint64_t id = submit_to_engine(3);
  router_->add_request(id, Delivery::kPerRequest);
  std::atomic<int> waited{-1};
  std::thread waiter([&] { waited = static_cast<int>(router_->wait(id, -1).code()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(waited.load(), -1) << "the wait returned with nothing published";
  run_engine();  // made, not published: the waiter sleeps on
  std::vector<Output> taken;
  ASSERT_TRUE(router_->take_request(id, SIZE_MAX, &taken).ok());  // publishes and takes it all
  waiter.join();
  EXPECT_EQ(waited.load(), static_cast<int>(StatusCode::kOk)) << "over while waiting is OK";
  EXPECT_EQ(count_tokens(taken), 3u);
  EXPECT_EQ(router_->wait(id, 0).code(), StatusCode::kNotFound) << "and gone afterwards";
}

TEST_F(EventRouterTest, DetachDropsWhatIsQueuedAndWhatComesLater) {
  const uint64_t id = submit_to_engine(30, 2);
  router_->add_request(id, Delivery::kShared);
  ASSERT_TRUE(engine_->step().ok());
  router_->publish();
  ASSERT_TRUE(router_->detach(id).ok());
  run_engine();
  router_->publish();
  std::vector<Output> events;
  router_->take_shared(SIZE_MAX, &events);
  EXPECT_TRUE(events.empty());
  EXPECT_EQ(router_->take_request(id, SIZE_MAX, &events).code(), StatusCode::kNotFound);
  // Its record is gone once the request ended: a fresh request is unaffected.
  const uint64_t next = submit_to_engine(2);
  router_->add_request(next, Delivery::kShared);
  run_engine();
  router_->take_shared(SIZE_MAX, &events);
  EXPECT_EQ(count_tokens(events), 2u);
}

TEST_F(EventRouterTest, TakeRequestHonoursMaxEventsAndOrder) {
  const uint64_t id = submit_to_engine(6);
  router_->add_request(id, Delivery::kShared);
  run_engine();
  std::vector<Output> events;
  while (router_->take_request(id, 1, &events).ok()) {
  }
  ASSERT_EQ(count_tokens(events), 6u);
  for (size_t i = 0; i + 1 < events.size(); ++i) EXPECT_FALSE(events[i].request_finished);
  EXPECT_TRUE(events.back().request_finished);
  std::vector<Output> shared;
  router_->take_shared(SIZE_MAX, &shared);
  EXPECT_TRUE(shared.empty()) << "taken per request, not twice";
}

}  // namespace
}  // namespace pvllm
