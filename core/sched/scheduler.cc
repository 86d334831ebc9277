// Scheduler: running sequences first (decode or next prefill chunk), then
// admission from the waiting queue. Preemption is by recompute: a preempted
// sequence loses its blocks and is prefilled again later (prefix caching
// usually makes that cheap).
#include "core/sched/scheduler.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "core/base/check.h"

namespace pvllm {
namespace {

bool by_service_order(const Sequence* a, const Sequence* b) { return served_before(*a, *b); }

// Removes `seq` from `batch_part` if it is there; returns its token count.
int32_t unschedule(std::vector<ScheduledSeq>* batch_part, const Sequence* seq) {
  auto it = std::find_if(batch_part->begin(), batch_part->end(),
                         [seq](const ScheduledSeq& s) { return s.seq == seq; });
  if (it == batch_part->end()) return 0;
  const int32_t num_new = it->num_new_tokens;
  batch_part->erase(it);
  return num_new;
}

}  // namespace

Scheduler::Scheduler(const SchedulerConfig& config, BlockManager* block_manager)
    : config_(config), block_manager_(block_manager) {
  PVLLM_CHECK(config_.max_num_seqs >= 1, "max_num_seqs must be >= 1");
  PVLLM_CHECK(config_.max_num_batched_tokens >= 1, "max_num_batched_tokens must be >= 1");
  PVLLM_CHECK(config_.max_prefill_chunk >= 0, "max_prefill_chunk must be >= 0");
  PVLLM_CHECK(config_.admission_headroom_blocks >= 0, "admission_headroom_blocks must be >= 0");
  if (config_.max_prefill_chunk == 0 ||
      config_.max_prefill_chunk > config_.max_num_batched_tokens) {
    config_.max_prefill_chunk = config_.max_num_batched_tokens;
  }
}

void Scheduler::add(Sequence* seq) {
  PVLLM_CHECK(seq->num_tokens() >= 1, "a sequence needs at least one token");
  PVLLM_CHECK(seq->block_table.blocks.empty(), "a new sequence must hold no blocks");
  seq->status = SequenceStatus::kWaiting;
  seq->num_computed_tokens = 0;
  seq->num_cached_tokens = 0;
  insert_waiting(seq);
}

void Scheduler::add_running(Sequence* seq) {
  seq->status = SequenceStatus::kRunning;
  running_.push_back(seq);
}

ScheduledBatch Scheduler::schedule() {
  ScheduledBatch batch;
  std::vector<ScheduledSeq> decodes;
  std::vector<ScheduledSeq> prefills;
  std::vector<const Sequence*> preempted_now;
  int32_t budget = config_.max_num_batched_tokens;
  auto preempt_now = [&](Sequence* victim) {
    budget += unschedule(&decodes, victim) + unschedule(&prefills, victim);
    // Drop copy-on-write work for blocks the victim is about to give back.
    const auto& owned = victim->block_table.blocks;
    std::erase_if(batch.copies, [&owned](const BlockCopy& c) {
      return std::find(owned.begin(), owned.end(), c.dst) != owned.end();
    });
    preempt(victim);
    batch.preempted.push_back(victim);
    preempted_now.push_back(victim);
  };

  // 1. Running sequences, in service order. Decodes later in the order keep
  // one token of budget each, so a long prefill cannot starve them.
  std::sort(running_.begin(), running_.end(), by_service_order);
  int32_t num_pending_decodes =
      static_cast<int32_t>(std::count_if(running_.begin(), running_.end(), [](const Sequence* s) {
        return s->num_uncomputed_tokens() == 1;
      }));
  for (size_t i = 0; i < running_.size();) {
    Sequence* seq = running_[i];
    const int32_t num_uncomputed = seq->num_uncomputed_tokens();
    const bool is_decode = num_uncomputed == 1;
    if (is_decode) --num_pending_decodes;
    int32_t num_new = std::min({num_uncomputed, config_.max_prefill_chunk,
                                budget - (is_decode ? 0 : num_pending_decodes)});
    if (num_new <= 0) {  // waiting for its next token, or no budget left this step
      ++i;
      continue;
    }
    bool self_preempted = false;
    while (!block_manager_->can_append(seq->block_table, seq->num_computed_tokens, num_new)) {
      Sequence* victim = running_.back();  // served last
      if (victim != seq && victim->num_uncomputed_tokens() == 1) --num_pending_decodes;
      self_preempted = victim == seq;
      preempt_now(victim);
      if (self_preempted) break;
    }
    if (self_preempted) break;  // it was last in service order: nothing follows
    const bool ok =
        block_manager_->append(&seq->block_table, seq->num_computed_tokens, num_new, &batch.copies);
    PVLLM_CHECK(ok, "append failed after can_append");
    const bool samples = seq->num_computed_tokens + num_new == seq->num_tokens();
    (is_decode ? decodes : prefills).push_back(ScheduledSeq{seq, num_new, samples});
    budget -= num_new;
    ++i;
  }

  // 2. Admission, only when the running set fit as it was.
  if (preempted_now.empty()) {
    int32_t num_seats_used = 0;
    for (const Sequence* s : running_) num_seats_used += s->num_seats;
    auto worst_running = [this]() -> Sequence* {
      if (running_.empty()) return nullptr;
      return *std::max_element(running_.begin(), running_.end(), by_service_order);
    };
    while (!waiting_.empty() && budget > 0) {
      Sequence* seq = waiting_.front();
      // Everything behind a sequence sent back this step is served after it.
      if (std::find(preempted_now.begin(), preempted_now.end(), seq) != preempted_now.end()) break;
      const std::span<const int32_t> tokens(seq->token_ids);
      const int32_t num_cached = block_manager_->num_cached_prefix_tokens(tokens);
      const int32_t num_new =
          std::min({seq->num_tokens() - num_cached, config_.max_prefill_chunk, budget});
      PVLLM_CHECK(num_new > 0, "a waiting sequence with nothing to compute");
      auto fits = [&]() {
        const int32_t keep = num_seats_used * config_.admission_headroom_blocks;
        return num_seats_used + seq->num_seats <= config_.max_num_seqs &&
               block_manager_->can_allocate(tokens, num_cached + num_new, keep);
      };
      // A strictly better priority may push out running sequences of worse
      // priority, worst first.
      while (!fits()) {
        Sequence* victim = worst_running();
        if (victim == nullptr || victim->priority <= seq->priority) break;
        num_seats_used -= victim->num_seats;
        preempt_now(victim);
      }
      if (!fits()) {
        // Head of line waits; later ones must not overtake it.
        // When blocks, not seats, stopped it, everything queued behind it
        // waits for memory too.
        if (num_seats_used + seq->num_seats <= config_.max_num_seqs) {
          for (Sequence* w : waiting_) {
            if (w->queued_for_memory) continue;
            w->queued_for_memory = true;
            ++num_queued_for_memory_;
          }
        }
        break;
      }
      waiting_.pop_front();
      const int32_t num_from_cache =
          block_manager_->allocate(tokens, num_cached + num_new, &seq->block_table);
      PVLLM_CHECK(num_from_cache == num_cached, "allocate disagreed with the prefix cache");
      seq->status = SequenceStatus::kRunning;
      seq->num_computed_tokens = num_from_cache;
      seq->num_cached_tokens = num_from_cache;
      running_.push_back(seq);
      num_seats_used += seq->num_seats;
      const bool samples = num_from_cache + num_new == seq->num_tokens();
      prefills.push_back(ScheduledSeq{seq, num_new, samples});
      budget -= num_new;
    }
  }

  batch.seqs = std::move(decodes);
  batch.seqs.insert(batch.seqs.end(), prefills.begin(), prefills.end());
  for (const ScheduledSeq& s : batch.seqs) batch.num_batched_tokens += s.num_new_tokens;
  return batch;
}

void Scheduler::on_batch_computed(const ScheduledBatch& batch) {
  for (const ScheduledSeq& s : batch.seqs) {
    Sequence* seq = s.seq;
    // Finished or aborted between schedule() and now: nothing to record.
    if (seq->status != SequenceStatus::kRunning) continue;
    seq->num_computed_tokens += s.num_new_tokens;
    PVLLM_CHECK(seq->num_computed_tokens <= seq->num_tokens(),
                "computed past the end of the sequence");
    block_manager_->cache_full_blocks(&seq->block_table, std::span<const int32_t>(seq->token_ids),
                                      seq->num_computed_tokens);
  }
}

void Scheduler::finish(Sequence* seq) {
  if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end()) {
    running_.erase(it);
  } else if (auto wt = std::find(waiting_.begin(), waiting_.end(), seq); wt != waiting_.end()) {
    waiting_.erase(wt);
  }
  block_manager_->free(&seq->block_table);
  seq->status = SequenceStatus::kFinished;
}

int64_t Scheduler::num_reserved_unused_slots() const {
  int64_t num_unused = 0;
  for (const Sequence* s : running_) {
    const int64_t num_slots =
        static_cast<int64_t>(s->block_table.blocks.size()) * block_manager_->block_size();
    num_unused += std::max<int64_t>(0, num_slots - s->num_tokens());
  }
  return num_unused;
}

KvOccupancy Scheduler::kv_occupancy() const {
  const int32_t block_size = block_manager_->block_size();
  filled_scratch_.assign(static_cast<size_t>(block_manager_->num_blocks()), -1);
  KvOccupancy occ;
  for (const Sequence* s : running_) {
    const auto& blocks = s->block_table.blocks;
    for (size_t i = 0; i < blocks.size(); ++i) {
      const int64_t first = static_cast<int64_t>(i) * block_size;
      const int32_t filled =
          static_cast<int32_t>(std::clamp<int64_t>(s->num_computed_tokens - first, 0, block_size));
      int32_t& slot = filled_scratch_[static_cast<size_t>(blocks[i])];
      if (slot < 0) {
        occ.num_slots_reserved += block_size;
        slot = 0;
      }
      // A shared block holds what its fullest owner computed.
      if (filled > slot) {
        occ.num_tokens_stored += filled - slot;
        slot = filled;
      }
    }
  }
  return occ;
}

void Scheduler::preempt(Sequence* seq) {
  auto it = std::find(running_.begin(), running_.end(), seq);
  PVLLM_CHECK(it != running_.end(), "preempting a sequence that is not running");
  running_.erase(it);
  block_manager_->free(&seq->block_table);
  seq->status = SequenceStatus::kWaiting;
  seq->num_computed_tokens = 0;
  seq->num_cached_tokens = 0;
  ++seq->num_preemptions;
  ++num_preemptions_;
  insert_waiting(seq);
}

void Scheduler::insert_waiting(Sequence* seq) {
  auto pos = std::upper_bound(waiting_.begin(), waiting_.end(), seq, by_service_order);
  waiting_.insert(pos, seq);
}

}  // namespace pvllm
