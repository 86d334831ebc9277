// A fixed pool of worker threads for the CPU kernels.
//
// A step of the engine runs hundreds of parallel loops, a few microseconds
// each on small models, so handing out work must cost far less than that:
// no lock and no system call per loop. Workers stay hot between loops:
// after a job they spin on the job word for a short while (kSpinMicros),
// then sleep on it (a futex through std::atomic::wait) until the next one.
// The caller publishes a job with one atomic store and wakes sleepers only
// when there are any.
//
// A job is a fixed list of index ranges. Threads claim ranges one at a time
// from the job word (a compare-and-swap), the caller included, so a worker
// the OS has not scheduled yet delays nobody: the caller claims its ranges
// too. Which thread runs a range never changes what the range computes.
//
// Work is split into contiguous index ranges; a range is never split
// further, so a kernel that keeps each reduction inside one index (one
// output feature, one head) gets the same bits whatever the thread count.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace pvllm::cpu {

// The CPUs this process may use: its affinity mask, bounded by the cgroup
// CPU quota (cgroup v2 cpu.max, or v1 cpu.cfs_quota_us / cpu.cfs_period_us,
// rounded up). At least 1. `cgroup_root` is where the cgroup file system is
// mounted (tests point it at a fake tree).
int32_t usable_cpu_count(const std::string& cgroup_root = "/sys/fs/cgroup");

// The CPU quota of the cgroup tree at `cgroup_root` in whole CPUs (rounded
// up), or 0 when there is none (no file, "max", or unreadable).
int32_t cgroup_cpu_quota(const std::string& cgroup_root);

// A non-owning reference to a callable void(int64_t begin, int64_t end):
// no allocation, unlike std::function over a lambda with many captures.
class RangeFn {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, RangeFn>>>
  RangeFn(F&& f)  // NOLINT(google-explicit-constructor): used like a function
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, int64_t b, int64_t e) { (*static_cast<std::decay_t<F>*>(o))(b, e); }) {}
  void operator()(int64_t begin, int64_t end) const { call_(obj_, begin, end); }

 private:
  void* obj_;
  void (*call_)(void*, int64_t, int64_t);
};

class ThreadPool {
 public:
  // num_threads counts the calling thread; 0 = usable_cpu_count().
  explicit ThreadPool(int32_t num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int32_t num_threads() const { return static_cast<int32_t>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint ranges covering [0, n) and returns
  // when all are done. One range per thread, each at least min_chunk long
  // (except the last), so fewer threads take part when there is little
  // work, and none but the caller below 2 * min_chunk. Calls from inside fn
  // run inline; calls from two outside threads at once are serialised.
  void parallel_for(int64_t n, RangeFn fn, int64_t min_chunk = 1);

  // As parallel_for, but in ranges of `chunk` indices (at most 65535 ranges:
  // larger when needed), which threads claim in turn: for loops whose
  // indices cost unequal amounts (causal attention rows).
  void parallel_for_dynamic(int64_t n, RangeFn fn, int64_t chunk);

  // How long a worker spins for the next job before it sleeps.
  static constexpr int64_t kSpinMicros = 200;

 private:
  // The job being run: written by the caller before job_word_ announces
  // it, read by a thread only while it holds an unfinished range of it.
  struct Job {
    const RangeFn* fn = nullptr;
    int64_t n = 0;
    int64_t chunk = 1;  // indices per range; range i starts at i * chunk
  };

  void worker_loop();
  // Publishes job_ as num_ranges ranges, claims and runs ranges until none
  // is left, then waits for those the workers hold.
  void run(int64_t num_ranges);
  // Claims and runs ranges of the job whose number is `job` while any is
  // left; false once it is over.
  void claim_and_run(uint64_t job);
  void wait_until_done(int64_t num_ranges);

  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // one job at a time

  Job job_;
  // (job number << 32) | (ranges << 16) | next unclaimed range: a thread
  // claims range `next` by bumping it, and only for the job it saw, so a
  // worker that wakes late never touches a later job's ranges. Workers
  // wait on it for the next job.
  std::atomic<uint64_t> job_word_{0};
  std::atomic<int64_t> num_done_{0};      // ranges of the current job finished
  std::atomic<int32_t> num_sleeping_{0};  // workers blocked in job_word_.wait
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stop_{false};
};

}  // namespace pvllm::cpu
