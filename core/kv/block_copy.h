// A block id and a whole-block copy between two of them: what the KV
// bookkeeping (kv_cache_manager.h) asks a backend to do
// (core/backend/backend.h: copy_blocks for copy-on-write, swap_blocks for
// preemption by swap), in a header of its own so that a backend sees no
// more of core/kv than this.
#pragma once

#include <cstdint>

namespace pvllm {

using BlockId = int32_t;

// A request to copy one block's K/V (every layer's) into another:
// copy-on-write within the pool, or a swap between the pool and the host
// swap space.
struct BlockCopy {
  BlockId src;
  BlockId dst;
};

}  // namespace pvllm
