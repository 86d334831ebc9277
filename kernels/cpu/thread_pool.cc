#include "kernels/cpu/thread_pool.h"

#include <algorithm>

namespace pvllm::cpu {
namespace {
// Set on pool workers and on a caller while it runs a job, so nested
// parallel_for calls run inline instead of deadlocking.
thread_local bool t_inside_pool = false;
}  // namespace

ThreadPool::ThreadPool(int32_t num_threads) {
  if (num_threads <= 0) {
    num_threads = static_cast<int32_t>(std::thread::hardware_concurrency());
  }
  num_threads = std::max<int32_t>(num_threads, 1);
  workers_.reserve(num_threads - 1);
  for (int32_t i = 0; i + 1 < num_threads; ++i) {
    workers_.emplace_back([this] { worker_loop(); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_chunks() {
  for (;;) {
    const int64_t c = next_chunk_.fetch_add(1, std::memory_order_relaxed);
    if (c >= num_chunks_) return;
    const int64_t begin = c * chunk_;
    (*fn_)(begin, std::min(n_, begin + chunk_));
  }
}

void ThreadPool::worker_loop() {
  t_inside_pool = true;
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_chunks();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--num_pending_ == 0) done_cv_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t min_chunk) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(min_chunk, 1);
  // A few chunks per thread so uneven ranges (causal attention) balance.
  const int64_t target_chunks = static_cast<int64_t>(num_threads()) * 4;
  const int64_t chunk = std::max(min_chunk, (n + target_chunks - 1) / target_chunks);
  if (workers_.empty() || t_inside_pool || chunk >= n) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    chunk_ = chunk;
    num_chunks_ = (n + chunk - 1) / chunk;
    next_chunk_.store(0, std::memory_order_relaxed);
    num_pending_ = static_cast<int32_t>(workers_.size());
    ++generation_;
  }
  work_cv_.notify_all();
  t_inside_pool = true;
  run_chunks();
  t_inside_pool = false;
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return num_pending_ == 0; });
  fn_ = nullptr;
}

}  // namespace pvllm::cpu
