// Fault injection for tests: make the Nth pass through a named site fail,
// as a real failure there would (an allocation throwing std::bad_alloc, the
// KV pool reporting no room, a file read coming up short), to check that
// every failure ends in a status or in FINISH_ERROR for the request it
// hits, and that nothing leaks or crashes (tests/integration/
// fault_walk_test.cc walks N over every pass of create, submit and step).
//
// Disarmed (always, outside such tests) a site costs one relaxed atomic
// load. Not part of the C ABI.
#pragma once

#include <cstdint>

namespace pvllm::fault {

enum class Site : int {
  kHostAlloc = 0,    // host buffers: the CPU backend's KV pool, activations, logits
  kKvBlocks = 1,     // the scheduler asking the KV pool for room (admission, appends)
  kFileRead = 2,     // opening and mapping a model or tokenizer file
  kDeviceAlloc = 3,  // the CUDA module's device and pinned-host allocations
};
constexpr int kNumSites = 4;

// From now on, the nth pass (1-based) through `site` fails; the others
// pass. Resets the site's pass count. Not thread-safe against a run in
// progress: arm, run, then read passes().
void arm(Site site, int64_t nth);
// Disarms every site and resets the counts.
void disarm();
// Passes through `site` since arm (counted only while some site is armed).
int64_t passes(Site site);
// Whether an armed site's failure fired.
bool fired(Site site);

namespace detail {
bool should_fail_slow(Site site);
extern bool g_armed;  // written only by arm/disarm, between runs
}  // namespace detail

// Called at a site: true when this pass must fail.
inline bool should_fail(Site site) {
  if (!__atomic_load_n(&detail::g_armed, __ATOMIC_RELAXED)) return false;
  return detail::should_fail_slow(site);
}

}  // namespace pvllm::fault
