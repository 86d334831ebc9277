// A fixed pool of worker threads for the CPU kernels. Work is split into
// contiguous index ranges; a range is never split further, so a kernel that
// keeps each reduction inside one index (one output feature, one head) gets
// the same bits whatever the thread count.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace pvllm::cpu {

class ThreadPool {
 public:
  // num_threads counts the calling thread; 0 = std::thread::hardware_concurrency().
  explicit ThreadPool(int32_t num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int32_t num_threads() const { return static_cast<int32_t>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint ranges covering [0, n), each at least
  // min_chunk long (except the last), and returns when all are done. The
  // caller runs ranges too. Calls from inside fn run inline; calls from two
  // outside threads at once are serialised.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                    int64_t min_chunk = 1);

 private:
  void worker_loop();
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // one parallel_for at a time

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  uint64_t generation_ = 0;  // bumped per job; workers wake on change
  bool stop_ = false;
  int32_t num_pending_ = 0;  // workers that have not finished the current job

  // The current job; written under mu_ before generation_ is bumped.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 1;
  int64_t num_chunks_ = 0;
  std::atomic<int64_t> next_chunk_{0};
};

}  // namespace pvllm::cpu
