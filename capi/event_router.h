// EventRouter: delivers the engine's output events per request, so that
// every binding reads its own request's events from the library instead of
// rebuilding a router of its own (pvllm_poll_request, pvllm_wait,
// pvllm_detach; pvllm_poll keeps taking every shared request's events).
//
// Invariants:
//  - Every event the engine publishes is delivered at most once: it sits in
//    its request's queue until a take_* call moves it out, or detach drops
//    it. Within a request, events leave in the order the engine made them.
//  - shared_ holds exactly the queued events of added, shared requests, by
//    publication number; take_shared() takes the smallest, which is always
//    the front of its request's queue.
//  - A record exists from its first event or add_request (whichever comes
//    first) until its last event (Output::request_finished) has been taken
//    or dropped and add_request has run. A missing record therefore means:
//    unknown id, or over and fully delivered.
//
// Threading: every member takes mu_. publish() is the only place events
// enter (under mu_, so two drains cannot reorder them); the owner calls it
// after each step so that waiters wake, and every take_* calls it first.
// Lock order: mu_, then the engine's own lock (inside Engine::poll).
//
// Handlers (Delivery::kHandler): a request's events go to its handler
// instead of a queue. publish() and add_request() hand them over outside
// mu_ (the handler may call into the library); one thread at a time
// delivers a request's events (Record::delivering), in order, so events
// that arrive meanwhile are delivered by that thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/base/status.h"
#include "core/engine/engine.h"

namespace pvllm {

// Who may take a request's events; equal to pvllm_delivery.
enum class Delivery : int32_t {
  kShared = 0,      // take_shared() and take_request()
  kPerRequest = 1,  // take_request() only
  kHandler = 2,     // its handler (add_request's `handler`), nothing else
};

// A request's handler: called with each of its events.
using OutputHandler = std::function<void(Output&&)>;

class EventRouter {
 public:
  explicit EventRouter(Engine* engine) : engine_(engine) {}

  // Records how request `id` (just returned by Engine::submit_*) is
  // delivered. Until this runs, the request's events are kept from
  // take_shared(), so none escapes to a shared poller by racing the submit.
  // With kHandler, `handler` receives every event, those made before this
  // call included (delivered before it returns).
  void add_request(uint64_t id, Delivery delivery, OutputHandler handler = {});

  // Moves the engine's new events into their requests' queues, wakes the
  // waiters of those requests and hands handlers their events.
  void publish();

  // Up to max_events of the oldest queued events of shared requests.
  void take_shared(size_t max_events, std::vector<Output>* out);

  // Up to max_events of request `id`'s queued events, oldest first; NotFound
  // for an unknown, detached or over-and-delivered request.
  Status take_request(uint64_t id, size_t max_events, std::vector<Output>* out);

  // Blocks until request `id` has a queued event or its last event is taken
  // (Ok), until timeout_ms passes (kTimeout; 0 = no blocking, < 0 = no
  // limit), or returns NotFound as take_request, also when the request is
  // detached while waiting.
  Status wait(uint64_t id, int32_t timeout_ms);

  // Drops request `id`'s queued events and those it makes later.
  Status detach(uint64_t id);

 private:
  struct Queued {
    uint64_t seq = 0;  // publication number
    Output event;
  };
  struct Record {
    bool added = false;  // add_request ran: `delivery` is known
    Delivery delivery = Delivery::kShared;
    OutputHandler handler;    // with kHandler
    bool delivering = false;  // a thread is handing its events to the handler
    bool detached = false;
    bool over = false;  // its last event was taken or dropped
    std::deque<Queued> events;
    std::condition_variable changed;  // an event arrived, or it is over or detached
  };
  using RecordPtr = std::shared_ptr<Record>;

  void drain_locked();
  void deliver(uint64_t id);                      // hands request id's queued events to its handler
  RecordPtr find_open_locked(uint64_t id) const;  // null when missing, over or detached
  Output take_front_locked(uint64_t id, Record* record);
  void end_locked(uint64_t id, Record* record);  // the last event is gone
  static Status not_found(uint64_t id);
  static Status not_for_takers(uint64_t id);

  Engine* const engine_;
  std::mutex mu_;
  std::unordered_map<uint64_t, RecordPtr> records_;
  std::map<uint64_t, uint64_t> shared_;  // seq -> request id
  std::vector<uint64_t> to_deliver_;     // handler requests with queued events
  uint64_t next_seq_ = 0;
  std::vector<Output> drained_;  // drain_locked's buffer, kept for its capacity
};

}  // namespace pvllm
