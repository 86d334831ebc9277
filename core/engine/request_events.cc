#include "core/engine/request_events.h"

#include <chrono>
#include <string>
#include <utility>

#include "core/base/check.h"

namespace pvllm {

void RequestEventQueues::open(uint64_t id, OutputDelivery delivery) {
  auto record = std::make_shared<Record>();
  record->delivery = delivery.mode;
  record->handler = std::move(delivery.handler);
  std::lock_guard<std::mutex> lock(mu_);
  records_[id] = std::move(record);
}

void RequestEventQueues::publish(std::vector<Output>* events) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Output& event : *events) {
    const uint64_t id = event.request_id;
    const auto it = records_.find(id);
    if (it == records_.end()) continue;
    Record* record = it->second.get();
    event.sequence = record->next_sequence++;
    if (record->detached) {
      if (event.request_finished) end_locked(id, record);
      continue;
    }
    const uint64_t seq = next_seq_++;
    if (record->delivery == Delivery::kShared) shared_.emplace(seq, id);
    if (record->delivery == Delivery::kHandler && record->events.empty()) {
      to_deliver_.push_back(id);
    }
    record->events.push_back(Queued{seq, std::move(event)});
    record->changed.notify_all();
  }
  events->clear();
}

void RequestEventQueues::deliver_to_handlers() {
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ids.swap(to_deliver_);
  }
  for (uint64_t id : ids) deliver(id);
}

void RequestEventQueues::deliver(uint64_t id) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto it = records_.find(id);
  if (it == records_.end()) return;
  const RecordPtr record = it->second;
  if (record->delivery != Delivery::kHandler || record->delivering) return;
  record->delivering = true;
  bool last = false;
  while (!record->events.empty()) {
    std::deque<Queued> batch;
    batch.swap(record->events);
    lock.unlock();
    for (Queued& q : batch) {
      last = last || q.event.request_finished;
      record->handler(std::move(q.event));
    }
    lock.lock();
  }
  record->delivering = false;
  if (last) end_locked(id, record.get());
}

void RequestEventQueues::take_shared(size_t max_events, std::vector<Output>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  while (max_events > 0 && !shared_.empty()) {
    const auto [seq, id] = *shared_.begin();
    Record* record = records_.at(id).get();
    PVLLM_CHECK(!record->events.empty() && record->events.front().seq == seq,
                "the oldest shared event is the front of its request's queue");
    out->push_back(take_front_locked(id, record));
    --max_events;
  }
}

Status RequestEventQueues::take_request(uint64_t id, size_t max_events, std::vector<Output>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  const RecordPtr record = find_open_locked(id);
  if (!record) return not_found(id);
  if (record->delivery == Delivery::kHandler) return not_for_takers(id);
  while (max_events > 0 && !record->events.empty()) {
    out->push_back(take_front_locked(id, record.get()));
    --max_events;
  }
  return Status::Ok();
}

Status RequestEventQueues::wait(uint64_t id, int32_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  const RecordPtr record = find_open_locked(id);
  if (!record) return not_found(id);
  if (record->delivery == Delivery::kHandler) return not_for_takers(id);
  // The record outlives its erasure from records_ while this holds it, so
  // the wait can see it end.
  const auto ready = [&] { return !record->events.empty() || record->over || record->detached; };
  if (timeout_ms < 0) {
    record->changed.wait(lock, ready);
  } else if (!record->changed.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready)) {
    return Status(StatusCode::kTimeout, "request " + std::to_string(id) + " made no event in " +
                                            std::to_string(timeout_ms) + " ms");
  }
  if (!record->events.empty()) return Status::Ok();
  if (record->detached) return not_found(id);
  return Status::Ok();  // over: its last event was taken while this waited
}

Status RequestEventQueues::detach(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  const RecordPtr record = find_open_locked(id);
  if (!record) return not_found(id);
  if (record->delivery == Delivery::kHandler) return not_for_takers(id);
  record->detached = true;
  bool has_last = false;
  for (const Queued& q : record->events) {
    shared_.erase(q.seq);
    has_last = has_last || q.event.request_finished;
  }
  record->events.clear();
  if (has_last) end_locked(id, record.get());
  record->changed.notify_all();
  return Status::Ok();
}

RequestEventQueues::RecordPtr RequestEventQueues::find_open_locked(uint64_t id) const {
  const auto it = records_.find(id);
  if (it == records_.end() || it->second->over || it->second->detached) return nullptr;
  return it->second;
}

Status RequestEventQueues::not_for_takers(uint64_t id) {
  return InvalidArgument("request " + std::to_string(id) +
                         " delivers its events to its on_output handler");
}

Output RequestEventQueues::take_front_locked(uint64_t id, Record* record) {
  Queued front = std::move(record->events.front());
  record->events.pop_front();
  if (record->delivery == Delivery::kShared) shared_.erase(front.seq);
  if (front.event.request_finished) end_locked(id, record);
  return std::move(front.event);
}

void RequestEventQueues::end_locked(uint64_t id, Record* record) {
  record->over = true;
  record->changed.notify_all();
  records_.erase(id);
}

Status RequestEventQueues::not_found(uint64_t id) {
  return NotFound("request " + std::to_string(id) +
                  " is unknown, detached, or over with every event delivered");
}

}  // namespace pvllm
