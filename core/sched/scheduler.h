// Scheduler: decides, every step, which sequences run and how many tokens
// each feeds. Continuous batching under max_num_seqs and
// max_num_batched_tokens; chunked prefill; prefix-cache hits skip prefill;
// preemption when the block pool runs dry, by recompute or by swapping K/V
// to the host pool (PreemptionMode).
//
// The scheduler sees block ids and counts through KvCacheManager, never its
// free list, and does not know which allocation policy is in force. It does not own sequences: the
// engine does, and keeps each alive until it has been removed from here (finish / abort).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <utility>
#include <vector>

#include "core/kv/kv_cache_manager.h"
#include "core/kv/swap_pool.h"
#include "core/sched/sequence.h"

namespace pvllm {

// How a running sequence that must make room is preempted: its blocks freed
// and its tokens recomputed later, or its K/V copied to the host swap pool
// and back (no recompute), or whichever costs less by the backend's
// estimates (auto).
enum class PreemptionMode : int32_t { kRecompute = 0, kSwap = 1, kAuto = 2 };

struct SchedulerConfig {
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 2048;
  // Longest prefill chunk one sequence may take in a step (<= the above).
  // 0 means max_num_batched_tokens.
  int32_t max_prefill_chunk = 0;
  // Paged admission keeps this many free blocks per running sequence (per
  // seat) after the newcomer's blocks, so the running set can grow for
  // about block_size * this many steps before anyone is preempted. Without
  // it a newcomer takes the last free blocks and is preempted again a few
  // steps later, its prefill recomputed each time. 0 turns it off.
  int32_t admission_headroom_blocks = 1;
  // Preemption (needs a SwapPool for kSwap and kAuto). A sequence is
  // swapped when the pool has room and, under kAuto, when moving its blocks
  // (out and back: swap_seconds_per_block each) costs less than computing
  // its tokens again (recompute_seconds_per_token each). Sequences whose
  // sliding window released blocks are always recomputed.
  PreemptionMode preemption_mode = PreemptionMode::kRecompute;
  double recompute_seconds_per_token = 0.0;
  double swap_seconds_per_block = 0.0;
};

struct ScheduledSeq {
  Sequence* seq = nullptr;
  int32_t num_new_tokens = 0;  // feeds positions [num_computed, num_computed + num_new)
  // This chunk reaches the end of the sequence's tokens, so its last row's
  // logits are computed and the sequence's next token is sampled.
  bool samples_next_token = false;
};

struct ScheduledBatch {
  std::vector<ScheduledSeq> seqs;  // decodes first, then prefills, each in service order
  // Block traffic, run before the forward in this order: the copies of the
  // forks made since the last batch (Scheduler::fork; first, since the
  // blocks they read may be given to others in this batch), the swaps
  // (out, device block -> swap block, then in, swap block -> device
  // block), then the copy-on-write copies of this batch's writes.
  std::vector<BlockCopy> fork_copies;
  std::vector<uint64_t> forked;  // seq_id of each sequence whose K/V fork_copies fills
  std::vector<BlockCopy> swap_out;
  std::vector<BlockCopy> swap_in;
  std::vector<BlockCopy> copies;
  std::vector<Sequence*> preempted;  // sequences sent back to waiting or swapped this step
  int32_t num_batched_tokens = 0;
  bool empty() const { return seqs.empty(); }
};

// What the running sequences keep in the KV pool, counting each physical
// block once however many tables share it.
struct KvOccupancy {
  int64_t num_tokens_stored = 0;   // slots holding computed K/V
  int64_t num_slots_reserved = 0;  // slots of the blocks they hold
};

class Scheduler {
 public:
  // `swap` (may be null: recompute only) holds the ids of the host blocks.
  Scheduler(const SchedulerConfig& config, KvCacheManager* kv_cache, SwapPool* swap = nullptr);

  // Speculative decoding: asked for each sequence about to decode, fills
  // seq->proposed with at most `max` tokens to feed after its last one
  // (verified by the step's draws). Scheduled only when the token budget
  // and the KV pool have room for them: proposals never preempt anyone.
  using ProposeFn = std::function<void(Sequence* seq, int32_t max)>;
  void set_proposer(ProposeFn propose) { propose_ = std::move(propose); }

  // Queues a new sequence (status kWaiting, nothing computed).
  void add(Sequence* seq);
  // Forks `child` (its tokens and num_computed_tokens those of `parent`, a
  // running sequence whose K/V is computed) into the running set: it shares
  // the parent's blocks copy-on-write (paged) or gets a run of its own whose
  // copies go into the next batch's fork_copies (contiguous). Without room
  // it waits and is recomputed from its tokens, like a preempted sequence.
  void fork(const Sequence& parent, Sequence* child);

  // One scheduling decision: schedule_running, then, if nothing was
  // preempted, admit_waiting (see each below). Every sequence in the batch
  // has the blocks its new tokens need.
  ScheduledBatch schedule();

  // After the backend ran `batch`: advances num_computed_tokens, registers
  // newly full blocks with the prefix cache and, with a sliding window,
  // releases the blocks no later query reads
  // (KvCacheManager::release_outside_window).
  void on_batch_computed(const ScheduledBatch& batch);

  // Removes a running or waiting sequence for good and frees its blocks.
  // Sets status kFinished. Safe to call for a sequence in either queue.
  void finish(Sequence* seq);

  // Waiting to be admitted, the swapped included.
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size() + swapped_.size()); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_swapped() const { return static_cast<int32_t>(swapped_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  int64_t num_preemptions_by_swap() const { return num_preemptions_by_swap_; }
  int64_t num_blocks_swapped_out() const { return num_blocks_swapped_out_; }
  int64_t num_blocks_swapped_in() const { return num_blocks_swapped_in_; }
  // Slots in running sequences' blocks that hold no token yet.
  int64_t num_reserved_unused_slots() const;
  // Sequences that waited at least once behind a head of line that
  // admission refused for lack of KV blocks (the head included).
  int64_t num_queued_for_memory() const { return num_queued_for_memory_; }
  // Tokens stored vs slots reserved, over distinct blocks of running
  // sequences. O(blocks held) per call.
  KvOccupancy kv_occupancy() const;
  const SchedulerConfig& config() const { return config_; }

 private:
  class Step;

  // Running sequences in service order each get their next chunk (decode:
  // 1 token; an unfinished prefill: up to the remaining token budget and
  // max_prefill_chunk, keeping a token for every decode still to come).
  // When one cannot get its blocks, the running sequence served last
  // (lowest priority, then latest arrival) is preempted, possibly itself,
  // until it fits.
  void schedule_running(Step* step);
  // Waiting sequences in service order are admitted while seats
  // (max_num_seqs, counting num_seats) and token budget remain and their
  // blocks can be allocated (keeping admission_headroom_blocks per seat);
  // prefix-cache hits skip their prefill. A waiting sequence of strictly
  // better priority than the worst running one may preempt running
  // sequences of worse priority to get in. The head of the queue that does
  // not fit stops admission: later ones never overtake it.
  void admit_waiting(Step* step);
  // With a sliding window, a prefill chunk of num_new tokens that cannot get
  // its blocks (fits(num_new) false) is cut to the longest that can, at
  // least 1 token: the blocks before the window are released after each
  // step, so a prompt longer than the pool advances through it chunk by
  // chunk instead of preempting others. Without a window, num_new as is.
  template <typename Fits>
  int32_t fit_prefill_chunk(int32_t num_new, Fits fits) const;
  // Takes a running sequence out of `step` and the running set to make
  // room: swapped out (swap_out) when the preemption mode says so and the
  // swap pool has room, else sent back to waiting with its blocks freed (and
  // any copy into them dropped), to be recomputed from its tokens.
  void preempt(Sequence* victim, Step* step);
  bool should_swap(const Sequence& victim) const;
  void swap_out(Sequence* victim, Step* step);
  // Swapped sequences in service order come back while seats, token budget
  // and blocks allow (their groups whole), before any waiting one.
  void swap_in_swapped(Step* step);
  // `seq` and the running members of its group (Sequence::group), in
  // running order; just `seq` when it has none.
  std::vector<Sequence*> group_of(Sequence* seq) const;
  // Whether admitting `head` keeps its group whole (group_fits in the .cc).
  bool group_fits(const Sequence& head, int32_t num_seats_used) const;
  // The longest chunk `seq` may take: max_prefill_chunk, or less when the
  // sequence caps its own (Sequence::max_chunk_tokens).
  int32_t chunk_cap(const Sequence& seq) const;
  void insert_waiting(Sequence* seq);  // keeps waiting_ in service order
  int32_t num_seats_used() const;

  SchedulerConfig config_;
  ProposeFn propose_;
  KvCacheManager* kv_cache_;
  SwapPool* swap_;
  std::deque<Sequence*> waiting_;  // service order
  std::deque<Sequence*> swapped_;  // service order
  std::vector<Sequence*> running_;
  int64_t num_preemptions_ = 0;
  int64_t num_preemptions_by_swap_ = 0;
  int64_t num_blocks_swapped_out_ = 0;
  int64_t num_blocks_swapped_in_ = 0;
  // Forks made since the last batch: their copies and children (seq ids).
  std::vector<BlockCopy> pending_fork_copies_;
  std::vector<uint64_t> pending_forked_;
  // Swap blocks the last batch's swap-ins read; free once it has run.
  std::vector<BlockId> swap_blocks_in_flight_;
  int64_t num_queued_for_memory_ = 0;
  // kv_occupancy's per-block fill, [num_blocks]: an entry counts only when its
  // stamp equals occupancy_pass_, so a pass costs the blocks it visits, not
  // the pool.
  struct FilledSlot {
    uint32_t stamp = 0;
    int32_t filled = 0;
  };
  mutable std::vector<FilledSlot> filled_scratch_;
  mutable uint32_t occupancy_pass_ = 0;
};

}  // namespace pvllm
