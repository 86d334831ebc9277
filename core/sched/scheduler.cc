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
#include "core/base/fault_injection.h"

namespace pvllm {
namespace {

bool by_service_order(const Sequence* a, const Sequence* b) { return served_before(*a, *b); }

// The largest n in [0, max_n] with fits(n), for fits true at 0 and
// monotone (true up to some n, false after).
template <typename Fits>
int32_t longest_fitting(int32_t max_n, Fits fits) {
  int32_t lo = 0;
  int32_t hi = max_n;
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace

// One step's batch while it is built: the chunks scheduled so far (decodes
// and prefills apart, so the batch can put decodes first), the token budget
// left, copy-on-write work, and the sequences sent back to waiting.
class Scheduler::Step {
 public:
  explicit Step(int32_t budget) : budget_(budget) {}

  int32_t budget() const { return budget_; }
  bool preempted_any() const { return !batch_.preempted.empty(); }
  bool was_preempted(const Sequence* seq) const {
    return std::find(batch_.preempted.begin(), batch_.preempted.end(), seq) !=
           batch_.preempted.end();
  }
  std::vector<BlockCopy>* copies() { return &batch_.copies; }
  std::vector<BlockCopy>* swap_out() { return &batch_.swap_out; }
  std::vector<BlockCopy>* swap_in() { return &batch_.swap_in; }

  void add(Sequence* seq, int32_t num_new, bool is_decode) {
    // Proposals are fed after the sequence's tokens: its chunk then ends
    // past them.
    const bool samples_next_token = seq->num_computed_tokens + num_new ==
                                    seq->num_tokens() + static_cast<int32_t>(seq->proposed.size());
    (is_decode ? decodes_ : prefills_).push_back(ScheduledSeq{seq, num_new, samples_next_token});
    budget_ -= num_new;
  }
  // Takes `victim` out of the batch (its tokens back to the budget, copies
  // into its blocks dropped) and records it as preempted.
  void remove_preempted(Sequence* victim) {
    budget_ += remove(&decodes_, victim) + remove(&prefills_, victim);
    victim->proposed.clear();
    const auto& owned = victim->block_table.blocks;
    std::erase_if(batch_.copies, [&owned](const BlockCopy& c) {
      return std::find(owned.begin(), owned.end(), c.dst) != owned.end();
    });
    batch_.preempted.push_back(victim);
  }
  ScheduledBatch take_batch() {
    batch_.seqs = std::move(decodes_);
    batch_.seqs.insert(batch_.seqs.end(), prefills_.begin(), prefills_.end());
    for (const ScheduledSeq& s : batch_.seqs) batch_.num_batched_tokens += s.num_new_tokens;
    return std::move(batch_);
  }

 private:
  // Removes `seq` from `part` if it is there; returns its token count.
  static int32_t remove(std::vector<ScheduledSeq>* part, const Sequence* seq) {
    auto it = std::find_if(part->begin(), part->end(),
                           [seq](const ScheduledSeq& s) { return s.seq == seq; });
    if (it == part->end()) return 0;
    const int32_t num_new = it->num_new_tokens;
    part->erase(it);
    return num_new;
  }

  int32_t budget_;
  std::vector<ScheduledSeq> decodes_;
  std::vector<ScheduledSeq> prefills_;
  ScheduledBatch batch_;
};

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager* kv_cache, SwapPool* swap)
    : config_(config), kv_cache_(kv_cache), swap_(swap) {
  PVLLM_CHECK(config_.max_num_seqs >= 1, "max_num_seqs must be >= 1");
  PVLLM_CHECK(config_.max_num_batched_tokens >= 1, "max_num_batched_tokens must be >= 1");
  PVLLM_CHECK(config_.max_prefill_chunk >= 0, "max_prefill_chunk must be >= 0");
  PVLLM_CHECK(config_.admission_headroom_blocks >= 0, "admission_headroom_blocks must be >= 0");
  if (config_.max_prefill_chunk == 0 ||
      config_.max_prefill_chunk > config_.max_num_batched_tokens) {
    config_.max_prefill_chunk = config_.max_num_batched_tokens;
  }
}

int32_t Scheduler::chunk_cap(const Sequence& seq) const {
  return seq.max_chunk_tokens > 0 ? std::min(seq.max_chunk_tokens, config_.max_prefill_chunk)
                                  : config_.max_prefill_chunk;
}

void Scheduler::add(Sequence* seq) {
  PVLLM_CHECK(seq->num_tokens() >= 1, "a sequence needs at least one token");
  PVLLM_CHECK(seq->block_table.blocks.empty(), "a new sequence must hold no blocks");
  seq->status = SequenceStatus::kWaiting;
  seq->num_computed_tokens = 0;
  seq->num_cached_tokens = 0;
  insert_waiting(seq);
}

void Scheduler::fork(const Sequence& parent, Sequence* child) {
  std::vector<BlockCopy> copies;
  if (!kv_cache_->fork(parent.block_table, parent.num_computed_tokens, &child->block_table,
                       &copies)) {
    add(child);
    return;
  }
  if (!copies.empty()) {
    pending_fork_copies_.insert(pending_fork_copies_.end(), copies.begin(), copies.end());
    pending_forked_.push_back(child->seq_id);
  }
  child->status = SequenceStatus::kRunning;
  running_.push_back(child);
}

ScheduledBatch Scheduler::schedule() {
  // The previous batch has run: the swap blocks it read are free again.
  if (swap_ != nullptr) swap_->free(swap_blocks_in_flight_);
  swap_blocks_in_flight_.clear();
  Step step(config_.max_num_batched_tokens);
  schedule_running(&step);
  if (!step.preempted_any()) {
    swap_in_swapped(&step);
    if (swapped_.empty()) admit_waiting(&step);
  }
  ScheduledBatch batch = step.take_batch();
  batch.fork_copies.swap(pending_fork_copies_);
  batch.forked.swap(pending_forked_);
  pending_fork_copies_.clear();
  pending_forked_.clear();
  return batch;
}

template <typename Fits>
int32_t Scheduler::fit_prefill_chunk(int32_t num_new, Fits fits) const {
  if (kv_cache_->sliding_window() == 0 || fits(num_new)) return num_new;
  return std::max(1, longest_fitting(num_new - 1, fits));
}

void Scheduler::schedule_running(Step* step) {
  std::sort(running_.begin(), running_.end(), by_service_order);
  // Decodes later in the order keep one token of budget each, so a long
  // prefill cannot starve them.
  int32_t num_pending_decodes =
      static_cast<int32_t>(std::count_if(running_.begin(), running_.end(), [](const Sequence* s) {
        return s->num_uncomputed_tokens() == 1;
      }));
  for (size_t i = 0; i < running_.size();) {
    Sequence* seq = running_[i];
    const int32_t num_uncomputed = seq->num_uncomputed_tokens();
    const bool is_decode = num_uncomputed == 1;
    if (is_decode) --num_pending_decodes;
    int32_t num_new = std::min(
        {num_uncomputed, chunk_cap(*seq), step->budget() - (is_decode ? 0 : num_pending_decodes)});
    if (num_new <= 0) {  // waiting for its next token, or no budget left this step
      ++i;
      continue;
    }
    auto fits = [&](int32_t n) {
      // Injected fault (tests): the pool reports no room.
      if (fault::should_fail(fault::Site::kKvBlocks)) return false;
      return kv_cache_->can_append(seq->block_table, seq->num_computed_tokens, n);
    };
    if (!is_decode) num_new = fit_prefill_chunk(num_new, fits);
    seq->proposed.clear();
    if (is_decode && propose_) {
      // Proposals take what budget the later decodes leave, and blocks only
      // where they are free: dropped rather than preempting anyone.
      const int32_t room = step->budget() - 1 - num_pending_decodes;
      if (room > 0) propose_(seq, room);
      const auto num_proposed = static_cast<int32_t>(seq->proposed.size());
      if (num_proposed > room || (num_proposed > 0 && !fits(1 + num_proposed))) {
        seq->proposed.clear();
      }
      num_new = 1 + static_cast<int32_t>(seq->proposed.size());
    }
    bool self_preempted = false;
    while (!fits(num_new)) {
      // The sequence served last, with its group (adjacent to it in service
      // order, so at the back too; it holds `seq` only when seq is in it).
      for (Sequence* victim : group_of(running_.back())) {
        if (victim != seq && victim->num_uncomputed_tokens() == 1) --num_pending_decodes;
        self_preempted = self_preempted || victim == seq;
        preempt(victim, step);
      }
      if (self_preempted) break;
    }
    if (self_preempted) break;  // it was last in service order: nothing follows
    const bool ok =
        kv_cache_->append(&seq->block_table, seq->num_computed_tokens, num_new, step->copies());
    PVLLM_CHECK(ok, "append failed after can_append");
    step->add(seq, num_new, is_decode);
    ++i;
  }
}

int32_t Scheduler::num_seats_used() const {
  int32_t n = 0;
  for (const Sequence* s : running_) n += s->num_seats;
  return n;
}

void Scheduler::swap_in_swapped(Step* step) {
  int32_t seats = num_seats_used();
  while (!swapped_.empty() && step->budget() > 0) {
    Sequence* seq = swapped_.front();
    const int32_t num_new =
        std::min({seq->num_uncomputed_tokens(), chunk_cap(*seq), step->budget()});
    const int32_t total = seq->num_computed_tokens + num_new;
    const int32_t keep = seats * config_.admission_headroom_blocks;
    if (seats + seq->num_seats > config_.max_num_seqs ||
        !kv_cache_->can_allocate(no_prefix_match(total), total, keep) || !group_fits(*seq, seats)) {
      break;
    }
    swapped_.pop_front();
    const int32_t got = kv_cache_->allocate(no_prefix_match(total), total, &seq->block_table);
    PVLLM_CHECK(got == 0, "a swap-in took blocks from the prefix cache");
    for (size_t i = 0; i < seq->swapped_blocks.size(); ++i) {
      step->swap_in()->push_back({seq->swapped_blocks[i], seq->block_table.blocks[i]});
    }
    num_blocks_swapped_in_ += static_cast<int64_t>(seq->swapped_blocks.size());
    // Freed once this batch has run (schedule), not before: a swap-out in
    // this step must not write them while the swap-in still reads them.
    swap_blocks_in_flight_.insert(swap_blocks_in_flight_.end(), seq->swapped_blocks.begin(),
                                  seq->swapped_blocks.end());
    seq->swapped_blocks.clear();
    seq->status = SequenceStatus::kRunning;
    running_.push_back(seq);
    seats += seq->num_seats;
    // A beam that had drawn before it was swapped has nothing to compute.
    if (num_new > 0) step->add(seq, num_new, /*is_decode=*/seq->num_uncomputed_tokens() == 1);
  }
}

void Scheduler::admit_waiting(Step* step) {
  int32_t num_seats_used = this->num_seats_used();
  auto worst_running = [this]() -> Sequence* {
    if (running_.empty()) return nullptr;
    return *std::max_element(running_.begin(), running_.end(), by_service_order);
  };
  while (!waiting_.empty() && step->budget() > 0) {
    Sequence* seq = waiting_.front();
    // Everything behind a sequence sent back this step is served after it.
    if (step->was_preempted(seq)) break;
    const PrefixMatch match = seq->skip_prefix_cache ? no_prefix_match(seq->num_tokens())
                                                     : kv_cache_->match_prefix(seq->token_ids);
    const int32_t max_new =
        std::min({seq->num_tokens() - match.num_cached_tokens, chunk_cap(*seq), step->budget()});
    PVLLM_CHECK(max_new > 0, "a waiting sequence with nothing to compute");
    auto blocks_fit = [&](int32_t n) {
      if (fault::should_fail(fault::Site::kKvBlocks)) return false;  // injected (tests)
      const int32_t keep = num_seats_used * config_.admission_headroom_blocks;
      return kv_cache_->can_allocate(match, match.num_cached_tokens + n, keep);
    };
    // The first chunk, cut to the blocks available with a sliding window.
    auto chunk = [&]() { return fit_prefill_chunk(max_new, blocks_fit); };
    auto fits = [&]() {
      return num_seats_used + seq->num_seats <= config_.max_num_seqs && blocks_fit(chunk()) &&
             group_fits(*seq, num_seats_used);
    };
    // A strictly better priority may push out running sequences of worse
    // priority, worst first (with their groups).
    while (!fits()) {
      Sequence* worst = worst_running();
      if (worst == nullptr || worst->priority <= seq->priority) break;
      for (Sequence* victim : group_of(worst)) {
        num_seats_used -= victim->num_seats;
        preempt(victim, step);
      }
    }
    if (!fits()) {
      // When blocks, not seats, stopped the head of the line, everything
      // queued behind it waits for memory too.
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
    const int32_t num_new = chunk();
    const int32_t num_from_cache =
        kv_cache_->allocate(match, match.num_cached_tokens + num_new, &seq->block_table);
    PVLLM_CHECK(num_from_cache == match.num_cached_tokens,
                "allocate disagreed with the prefix cache");
    seq->status = SequenceStatus::kRunning;
    seq->num_computed_tokens = num_from_cache;
    seq->num_cached_tokens = num_from_cache;
    running_.push_back(seq);
    num_seats_used += seq->num_seats;
    step->add(seq, num_new, /*is_decode=*/false);
  }
}

void Scheduler::on_batch_computed(const ScheduledBatch& batch) {
  for (const ScheduledSeq& s : batch.seqs) {
    Sequence* seq = s.seq;
    // Finished or aborted between schedule() and now: nothing to record.
    if (seq->status != SequenceStatus::kRunning) continue;
    seq->num_computed_tokens += s.num_new_tokens;
    PVLLM_CHECK(seq->num_computed_tokens <= seq->num_tokens(),
                "computed past the end of the sequence");
    kv_cache_->cache_full_blocks(&seq->block_table, std::span<const int32_t>(seq->token_ids),
                                 seq->num_computed_tokens);
    // After the hashes: a released block is registered first, so a later
    // prompt may still find it in the cache.
    kv_cache_->release_outside_window(&seq->block_table, seq->num_computed_tokens);
  }
}

void Scheduler::finish(Sequence* seq) {
  if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end()) {
    running_.erase(it);
  } else if (auto wt = std::find(waiting_.begin(), waiting_.end(), seq); wt != waiting_.end()) {
    waiting_.erase(wt);
  } else if (auto st = std::find(swapped_.begin(), swapped_.end(), seq); st != swapped_.end()) {
    swapped_.erase(st);
    swap_->free(seq->swapped_blocks);
    seq->swapped_blocks.clear();
  }
  kv_cache_->free(&seq->block_table);
  seq->status = SequenceStatus::kFinished;
}

int64_t Scheduler::num_reserved_unused_slots() const {
  int64_t num_unused = 0;
  for (const Sequence* s : running_) {
    const int64_t num_slots =
        static_cast<int64_t>(s->block_table.blocks.size()) * kv_cache_->block_size();
    num_unused += std::max<int64_t>(0, num_slots - s->num_tokens());
  }
  return num_unused;
}

KvOccupancy Scheduler::kv_occupancy() const {
  const int32_t block_size = kv_cache_->block_size();
  if (filled_scratch_.size() != static_cast<size_t>(kv_cache_->num_blocks()) ||
      ++occupancy_pass_ == 0) {
    filled_scratch_.assign(static_cast<size_t>(kv_cache_->num_blocks()), FilledSlot{});
    occupancy_pass_ = 1;
  }
  KvOccupancy occ;
  for (const Sequence* s : running_) {
    const auto& blocks = s->block_table.blocks;
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (blocks[i] == kReleasedBlock) continue;
      const int64_t first = static_cast<int64_t>(i) * block_size;
      const int32_t filled =
          static_cast<int32_t>(std::clamp<int64_t>(s->num_computed_tokens - first, 0, block_size));
      FilledSlot& entry = filled_scratch_[static_cast<size_t>(blocks[i])];
      if (entry.stamp != occupancy_pass_) {  // first owner seen in this pass
        occ.num_slots_reserved += block_size;
        entry = {occupancy_pass_, 0};
      }
      int32_t& slot = entry.filled;
      // A shared block holds what its fullest owner computed.
      if (filled > slot) {
        occ.num_tokens_stored += filled - slot;
        slot = filled;
      }
    }
  }
  return occ;
}

std::vector<Sequence*> Scheduler::group_of(Sequence* seq) const {
  if (seq->group == 0) return {seq};
  std::vector<Sequence*> members;
  for (Sequence* s : running_) {
    if (s->group == seq->group) members.push_back(s);
  }
  return members;
}

// A group's first waiting member gets in only when every waiting member of
// its group could, all their tokens counted without prefix-cache hits (so
// the check errs on the safe side). Later members of the group then fit.
bool Scheduler::group_fits(const Sequence& head, int32_t num_seats_used) const {
  if (head.group == 0) return true;
  const bool head_of_group = std::none_of(
      running_.begin(), running_.end(), [&](const Sequence* s) { return s->group == head.group; });
  if (!head_of_group) return true;  // its siblings are in: it follows them
  int32_t num_members = 0;
  int64_t num_slots = 0;
  for (const std::deque<Sequence*>* queue : {&waiting_, &swapped_}) {
    for (const Sequence* s : *queue) {
      if (s->group != head.group) continue;
      ++num_members;
      num_slots += (s->num_tokens() + kv_cache_->block_size() - 1) / kv_cache_->block_size() *
                   static_cast<int64_t>(kv_cache_->block_size());
    }
  }
  if (num_slots > INT32_MAX) return false;
  const int32_t keep = (num_seats_used + num_members) * config_.admission_headroom_blocks;
  const int32_t total = static_cast<int32_t>(num_slots);
  return kv_cache_->can_allocate(no_prefix_match(total), total, keep);
}

void Scheduler::preempt(Sequence* victim, Step* step) {
  auto it = std::find(running_.begin(), running_.end(), victim);
  PVLLM_CHECK(it != running_.end(), "preempting a sequence that is not running");
  const bool swap = should_swap(*victim);
  if (swap) swap_out(victim, step);  // before remove_preempted drops its pending copies
  step->remove_preempted(victim);
  running_.erase(it);
  kv_cache_->free(&victim->block_table);
  ++victim->num_preemptions;
  ++num_preemptions_;
  victim->num_cached_tokens = 0;
  if (swap) {
    victim->status = SequenceStatus::kSwapped;
    auto pos = std::upper_bound(swapped_.begin(), swapped_.end(), victim, by_service_order);
    swapped_.insert(pos, victim);
    return;
  }
  victim->status = SequenceStatus::kWaiting;
  victim->num_computed_tokens = 0;
  insert_waiting(victim);
}

bool Scheduler::should_swap(const Sequence& victim) const {
  if (swap_ == nullptr || config_.preemption_mode == PreemptionMode::kRecompute) return false;
  if (victim.num_computed_tokens == 0) return false;  // nothing to save
  const auto& blocks = victim.block_table.blocks;
  if (std::find(blocks.begin(), blocks.end(), kReleasedBlock) != blocks.end()) return false;
  const int32_t num_blocks = kv_cache_->blocks_for(victim.num_computed_tokens);
  if (!swap_->can_allocate(num_blocks)) return false;
  if (config_.preemption_mode == PreemptionMode::kSwap) return true;
  return num_blocks * config_.swap_seconds_per_block <
         victim.num_computed_tokens * config_.recompute_seconds_per_token;
}

// Copies the victim's computed blocks to the swap pool. A block this step
// copies into (copy-on-write, not run yet) is saved from the copy's source,
// which still holds what the victim computed.
void Scheduler::swap_out(Sequence* victim, Step* step) {
  const int32_t num_blocks = kv_cache_->blocks_for(victim->num_computed_tokens);
  victim->swapped_blocks = swap_->allocate(num_blocks);
  for (int32_t i = 0; i < num_blocks; ++i) {
    BlockId src = victim->block_table.blocks[static_cast<size_t>(i)];
    for (const BlockCopy& c : *step->copies()) {
      if (c.dst == src) src = c.src;
    }
    step->swap_out()->push_back({src, victim->swapped_blocks[static_cast<size_t>(i)]});
  }
  num_blocks_swapped_out_ += num_blocks;
  ++num_preemptions_by_swap_;
}

void Scheduler::insert_waiting(Sequence* seq) {
  auto pos = std::upper_bound(waiting_.begin(), waiting_.end(), seq, by_service_order);
  waiting_.insert(pos, seq);
}

}  // namespace pvllm
