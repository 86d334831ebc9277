#include "core/kv/contiguous_allocator.h"

#include <algorithm>
#include <iterator>

#include "core/base/check.h"

namespace pvllm {

ContiguousAllocator::ContiguousAllocator(int32_t num_blocks, int32_t block_size,
                                         int32_t max_seq_len, int32_t sliding_window)
    : KvCacheManager(num_blocks, block_size, sliding_window),
      num_reserved_blocks_(blocks_for(max_seq_len)),
      refs_(static_cast<size_t>(num_blocks), 0) {
  PVLLM_CHECK(num_reserved_blocks_ >= 1 && num_reserved_blocks_ <= num_blocks,
              "a contiguous reservation must fit the pool");
  free_runs_.emplace(0, num_blocks);
  num_free_blocks_ = num_blocks;
}

PrefixMatch ContiguousAllocator::match_prefix(std::span<const int32_t> tokens) const {
  PrefixMatch match;
  match.num_tokens = static_cast<int32_t>(tokens.size());
  return match;
}

bool ContiguousAllocator::can_allocate(const PrefixMatch& match, int32_t num_tokens,
                                       int32_t num_blocks_to_keep) const {
  PVLLM_CHECK(num_tokens >= 0 && num_tokens <= match.num_tokens,
              "num_tokens out of range of the matched sequence");
  PVLLM_CHECK(num_blocks_to_keep >= 0, "num_blocks_to_keep must be >= 0");
  PVLLM_CHECK(blocks_for(match.num_tokens) <= num_reserved_blocks_,
              "a sequence longer than its contiguous reservation");
  return find_free_run(num_reserved_blocks_) >= 0;
}

int32_t ContiguousAllocator::allocate(const PrefixMatch& match, int32_t num_tokens,
                                      BlockTable* table) {
  PVLLM_CHECK(table->blocks.empty() && table->hashes.empty(),
              "allocate needs an empty block table");
  if (!can_allocate(match, num_tokens, 0)) return -1;
  take_run(find_free_run(num_reserved_blocks_), num_reserved_blocks_, table);
  return 0;
}

bool ContiguousAllocator::can_append(const BlockTable& table, int32_t num_computed,
                                     int32_t num_new) const {
  PVLLM_CHECK(num_computed >= 0 && num_new >= 0, "negative token count");
  return num_new == 0 ||
         blocks_for(num_computed + num_new) <= static_cast<int32_t>(table.blocks.size());
}

bool ContiguousAllocator::append(BlockTable* table, int32_t num_computed, int32_t num_new,
                                 std::vector<BlockCopy>* /*copies*/) {
  return can_append(*table, num_computed, num_new);
}

void ContiguousAllocator::cache_full_blocks(BlockTable* /*table*/,
                                            std::span<const int32_t> /*tokens*/,
                                            int32_t /*num_computed*/) {}

bool ContiguousAllocator::can_fork(const BlockTable& /*parent*/) const {
  return find_free_run(num_reserved_blocks_) >= 0;
}

bool ContiguousAllocator::fork(const BlockTable& parent, int32_t num_computed, BlockTable* child,
                               std::vector<BlockCopy>* copies) {
  PVLLM_CHECK(child->blocks.empty() && child->hashes.empty(), "fork needs an empty child");
  if (!can_fork(parent)) return false;
  take_run(find_free_run(num_reserved_blocks_), num_reserved_blocks_, child);
  const int32_t num_used =
      std::min(blocks_for(num_computed), static_cast<int32_t>(parent.blocks.size()));
  // The parent's released prefix is released in the child at once.
  int32_t num_released = 0;
  while (num_released < num_used && parent.blocks[num_released] == kReleasedBlock) ++num_released;
  release_blocks_before(child, num_released * block_size());
  for (int32_t i = num_released; i < num_used; ++i) {
    copies->push_back(BlockCopy{parent.blocks[i], child->blocks[i]});
    ++num_copies_;
  }
  return true;
}

void ContiguousAllocator::free(BlockTable* table) {
  for (BlockId b : table->blocks) {
    if (b != kReleasedBlock) release_block(b);
  }
  table->blocks.clear();
  table->hashes.clear();
}

KvCacheMetrics ContiguousAllocator::metrics() const {
  KvCacheMetrics m;
  m.num_blocks = num_blocks();
  m.num_free_blocks = num_free_blocks_;
  m.num_used_blocks = m.num_blocks - m.num_free_blocks;
  m.utilization = static_cast<float>(m.num_used_blocks) / static_cast<float>(m.num_blocks);
  m.num_cow_copies = num_copies_;
  for (const auto& [start, length] : free_runs_) {
    m.largest_free_run = std::max(m.largest_free_run, length);
  }
  return m;
}

BlockId ContiguousAllocator::find_free_run(int32_t length) const {
  for (const auto& [start, run_length] : free_runs_) {
    if (run_length >= length) return start;
  }
  return -1;
}

void ContiguousAllocator::take_run(BlockId start, int32_t length, BlockTable* table) {
  auto it = free_runs_.find(start);
  PVLLM_CHECK(it != free_runs_.end() && it->second >= length, "take_run of a run not free");
  const int32_t rest = it->second - length;
  free_runs_.erase(it);
  if (rest > 0) free_runs_.emplace(start + length, rest);
  num_free_blocks_ -= length;
  for (BlockId b = start; b < start + length; ++b) {
    PVLLM_CHECK(refs_[b] == 0, "a block in a free run was owned");
    refs_[b] = 1;
    table->blocks.push_back(b);
  }
}

void ContiguousAllocator::release_block(BlockId b) {
  PVLLM_CHECK(refs_[b] == 1, "release of a block that nobody owns");
  refs_[b] = 0;
  give_back(b);
}

void ContiguousAllocator::give_back(BlockId b) {
  BlockId start = b;
  int32_t length = 1;
  auto next = free_runs_.upper_bound(b);
  if (next != free_runs_.begin()) {
    auto prev = std::prev(next);
    PVLLM_CHECK(prev->first + prev->second <= b, "freeing a block that is already free");
    if (prev->first + prev->second == b) {
      start = prev->first;
      length += prev->second;
      free_runs_.erase(prev);
    }
  }
  if (next != free_runs_.end() && next->first == b + 1) {
    length += next->second;
    free_runs_.erase(next);
  }
  free_runs_.emplace(start, length);
  ++num_free_blocks_;
}

}  // namespace pvllm
