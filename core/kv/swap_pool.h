// SwapPool: the ids of the host blocks that preempted sequences are swapped
// out to (preemption by swap). The backend owns the blocks' memory (plain
// memory on the CPU, page-locked on CUDA), each the size of a KV block of
// the device pool; this class only hands out ids.
//
// Invariant: every id in [0, num_blocks) is either free (in free_, once) or
// held by exactly one swapped sequence.
#pragma once

#include <cstdint>
#include <vector>

#include "core/kv/kv_cache_manager.h"

namespace pvllm {

class SwapPool {
 public:
  explicit SwapPool(int32_t num_blocks);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  bool can_allocate(int32_t n) const { return n >= 0 && n <= num_free(); }
  // n free ids; call only when can_allocate(n).
  std::vector<BlockId> allocate(int32_t n);
  void free(const std::vector<BlockId>& ids);

 private:
  int32_t num_blocks_;
  std::vector<BlockId> free_;  // a stack: the last freed is taken first
};

}  // namespace pvllm
