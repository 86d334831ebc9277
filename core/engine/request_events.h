// RequestEventQueues: one queue of output events per request, opened at
// submit with the request's delivery mode, so that every caller reads its
// own request's events (the C ABI's pvllm_poll, pvllm_poll_request,
// pvllm_wait, pvllm_detach and on_output handlers are views of it).
//
// Invariants:
//  - A request's queue exists from open() (at submit, before the engine can
//    make any of its events) until its last event (Output::request_finished)
//    has been taken, handed to its handler, or dropped by detach. A missing
//    queue therefore means: unknown id, or over and fully delivered.
//  - Every published event is delivered at most once, and a request's events
//    leave in the order the engine made them, numbered 0, 1, 2, ...
//    (Output::sequence).
//  - shared_ holds exactly the queued events of shared requests, by
//    publication number; take_shared() takes the smallest, which is always
//    the front of its request's queue.
//
// Threading: every member takes mu_. publish() is the only place events
// enter; the engine calls it inside its step lock, so two steps cannot
// reorder them. Handlers (Delivery::kHandler) are called outside mu_ by
// deliver_to_handlers(), which the engine calls after its step lock is
// released (a handler may call into the engine); one thread at a time
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
#include "core/engine/output.h"

namespace pvllm {

// Who may take a request's events; equal to pvllm_delivery.
enum class Delivery : int32_t {
  kShared = 0,      // take_shared() and take_request()
  kPerRequest = 1,  // take_request() only
  kHandler = 2,     // its handler, nothing else
};

// A request's handler: called with each of its events.
using OutputHandler = std::function<void(Output&&)>;

// How a request's events leave the engine, given at submit.
struct OutputDelivery {
  Delivery mode = Delivery::kShared;
  OutputHandler handler;  // with kHandler
};

class RequestEventQueues {
 public:
  // Opens request `id`'s queue; called once, before any of its events.
  void open(uint64_t id, OutputDelivery delivery);

  // Appends events (in the order the engine made them) to their requests'
  // queues, numbers them, and wakes the waiters of those requests. Events of
  // a request without a queue, or a detached one, are dropped.
  void publish(std::vector<Output>* events);

  // Hands the queued events of handler requests to their handlers.
  void deliver_to_handlers();

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
    Delivery delivery = Delivery::kShared;
    OutputHandler handler;    // with kHandler
    bool delivering = false;  // a thread is handing its events to the handler
    bool detached = false;
    bool over = false;           // its last event was taken, delivered or dropped
    uint64_t next_sequence = 0;  // Output::sequence of its next event
    std::deque<Queued> events;
    std::condition_variable changed;  // an event arrived, or it is over or detached
  };
  using RecordPtr = std::shared_ptr<Record>;

  void deliver(uint64_t id);                      // hands request id's queued events to its handler
  RecordPtr find_open_locked(uint64_t id) const;  // null when missing, over or detached
  Output take_front_locked(uint64_t id, Record* record);
  void end_locked(uint64_t id, Record* record);  // the last event is gone
  static Status not_found(uint64_t id);
  static Status not_for_takers(uint64_t id);

  std::mutex mu_;
  std::unordered_map<uint64_t, RecordPtr> records_;
  std::map<uint64_t, uint64_t> shared_;  // seq -> request id
  std::vector<uint64_t> to_deliver_;     // handler requests with queued events
  uint64_t next_seq_ = 0;
};

}  // namespace pvllm
