#include "kernels/cpu/host_buffer.h"

#include <cstdlib>

#include "core/base/fault_injection.h"

namespace pvllm::cpu {

void HostFree::operator()(void* p) const { std::free(p); }

HostBuffer allocate_host(size_t bytes) {
  if (fault::should_fail(fault::Site::kHostAlloc)) return nullptr;
  constexpr size_t kAlign = 64;
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  if (rounded < bytes) return nullptr;  // overflow
  return HostBuffer(
      static_cast<uint8_t*>(std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded)));
}

}  // namespace pvllm::cpu
