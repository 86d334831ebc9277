// Running a fallible task per item on a few short-lived threads: for work
// done once per engine (checksums, reading weight pages), not the kernels'
// thread pool.
#pragma once

#include <cstddef>
#include <functional>

#include "core/base/status.h"

namespace pvllm {

// Calls task(i) for i in [0, n), on `threads` threads (the calling thread
// one of them). Items are taken in order; after the first failure no new
// item starts, and that failure is returned. `on_done`, when given, runs on
// the calling thread after each of its items with the count finished so
// far (for progress).
Status parallel_each(size_t n, size_t threads, const std::function<Status(size_t)>& task,
                     const std::function<void(size_t done)>& on_done = nullptr);

}  // namespace pvllm
