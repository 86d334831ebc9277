#include "core/base/fault_injection.h"

#include <atomic>

namespace pvllm::fault {
namespace detail {
bool g_armed = false;
}  // namespace detail

namespace {

struct SiteState {
  std::atomic<int64_t> nth{0};  // 0: this site never fails
  std::atomic<int64_t> passes{0};
  std::atomic<bool> fired{false};
};

SiteState g_sites[kNumSites];

}  // namespace

void arm(Site site, int64_t nth) {
  SiteState& s = g_sites[static_cast<int>(site)];
  s.nth = nth;
  s.passes = 0;
  s.fired = false;
  __atomic_store_n(&detail::g_armed, true, __ATOMIC_RELAXED);
}

void disarm() {
  __atomic_store_n(&detail::g_armed, false, __ATOMIC_RELAXED);
  for (SiteState& s : g_sites) {
    s.nth = 0;
    s.passes = 0;
    s.fired = false;
  }
}

int64_t passes(Site site) { return g_sites[static_cast<int>(site)].passes; }

bool fired(Site site) { return g_sites[static_cast<int>(site)].fired; }

bool detail::should_fail_slow(Site site) {
  SiteState& s = g_sites[static_cast<int>(site)];
  const int64_t pass = ++s.passes;
  if (s.nth > 0 && pass == s.nth) {
    s.fired = true;
    return true;
  }
  return false;
}

}  // namespace pvllm::fault
