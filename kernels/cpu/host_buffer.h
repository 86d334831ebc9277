// Large host allocations of the CPU backend (packed weights, the K/V pool):
// 64-byte aligned and not touched here, so pages arrive when first written
// (a K/V pool costs nothing at startup). Transparent huge pages were tried
// and left out: on the development VM (THP "madvise", defrag "madvise")
// they made 110M-shape decode slower (68-72 against 66-84 tokens/s) and
// startup slower (1.7 s against 0.9-1.2 s), the first touch of each 2 MiB
// waiting on compaction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace pvllm::cpu {

struct HostFree {
  void operator()(void* p) const;
};
using HostBuffer = std::unique_ptr<uint8_t[], HostFree>;

// NULL when the memory cannot be had (or the fault-injection hook says so).
HostBuffer allocate_host(size_t bytes);

}  // namespace pvllm::cpu
