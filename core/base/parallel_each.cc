#include "core/base/parallel_each.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace pvllm {

Status parallel_each(size_t n, size_t threads, const std::function<Status(size_t)>& task,
                     const std::function<void(size_t done)>& on_done) {
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status first_error = Status::Ok();
  auto work = [&](bool report) {
    for (;;) {
      const size_t i = next.fetch_add(1);
      if (i >= n || failed.load()) return;
      Status st = task(i);
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failed.exchange(true)) first_error = std::move(st);
        return;
      }
      const size_t finished = done.fetch_add(1) + 1;
      if (report && on_done) on_done(finished);
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < std::min(threads, n); ++t) pool.emplace_back(work, false);
  work(true);
  for (std::thread& t : pool) t.join();
  if (failed) return first_error;
  return Status::Ok();
}

}  // namespace pvllm
