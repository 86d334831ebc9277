#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#if defined(__linux__)
#include <sched.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace pvllm::cpu {
namespace {

// Set on pool workers and on a caller while it runs a job, so nested
// parallel_for calls run inline instead of deadlocking.
thread_local bool t_inside_pool = false;

constexpr int32_t kMaxThreads = 0xFFFF;
constexpr uint64_t kRangeMask = 0xFFFF;  // ranges and the next range: 16 bits each
constexpr int64_t kMaxRanges = 0xFFFF;

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() or about kSpinMicros have passed; true when done().
template <typename Done>
bool spin_until(Done done) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::microseconds(ThreadPool::kSpinMicros);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (Clock::now() >= deadline) return done();
  }
}

// The whitespace-separated words of `path`'s first line; false when the
// file cannot be read or the line is empty.
bool read_words(const std::string& path, std::vector<std::string>* words) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return false;
  std::istringstream s(line);
  for (std::string w; s >> w;) words->push_back(w);
  return !words->empty();
}

// s as a whole integer, or -1.
int64_t parse_int(const std::string& s) {
  try {
    size_t used = 0;
    const long long v = std::stoll(s, &used);
    return used == s.size() ? v : -1;
  } catch (...) {
    return -1;
  }
}

int32_t quota_cpus(int64_t quota, int64_t period) {
  if (quota <= 0 || period <= 0) return 0;
  const int64_t cpus = (quota + period - 1) / period;
  return static_cast<int32_t>(std::min<int64_t>(cpus, kMaxThreads));
}

}  // namespace

int32_t cgroup_cpu_quota(const std::string& cgroup_root) {
  // cgroup v2: "cpu.max" holds "QUOTA PERIOD" or "max PERIOD".
  std::vector<std::string> words;
  if (read_words(cgroup_root + "/cpu.max", &words)) {
    if (words.size() < 2 || words[0] == "max") return 0;
    return quota_cpus(parse_int(words[0]), parse_int(words[1]));
  }
  // cgroup v1: the cpu controller's quota (-1 = none) and period.
  for (const std::string dir : {"/cpu", "/cpu,cpuacct", ""}) {
    std::vector<std::string> quota, period;
    if (read_words(cgroup_root + dir + "/cpu.cfs_quota_us", &quota) &&
        read_words(cgroup_root + dir + "/cpu.cfs_period_us", &period)) {
      return quota_cpus(parse_int(quota[0]), parse_int(period[0]));
    }
  }
  return 0;
}

int32_t usable_cpu_count(const std::string& cgroup_root) {
  int32_t cpus = static_cast<int32_t>(std::thread::hardware_concurrency());
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cpus = CPU_COUNT(&set);
#endif
  const int32_t quota = cgroup_cpu_quota(cgroup_root);
  if (quota > 0) cpus = std::min(cpus, quota);
  return std::clamp(cpus, 1, kMaxThreads);
}

ThreadPool::ThreadPool(int32_t num_threads) {
  if (num_threads <= 0) num_threads = usable_cpu_count();
  num_threads = std::clamp(num_threads, 1, kMaxThreads);
  workers_.reserve(num_threads - 1);
  for (int32_t i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  job_word_.fetch_add(uint64_t{1} << 32);
  job_word_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::claim_and_run(uint64_t job) {
  uint64_t word = job_word_.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t next = word & kRangeMask;
    if ((word >> 32) != job || next >= ((word >> 16) & kRangeMask)) return;
    if (!job_word_.compare_exchange_weak(word, word + 1, std::memory_order_acquire)) continue;
    // Range `next` is ours until num_done_ counts it: job_ stays as it is.
    const int64_t begin = static_cast<int64_t>(next) * job_.chunk;
    (*job_.fn)(begin, std::min(job_.n, begin + job_.chunk));
    num_done_.fetch_add(1);
    if (caller_sleeping_.load()) num_done_.notify_one();
    word = job_word_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_loop() {
  t_inside_pool = true;
  uint64_t seen = 0;  // the word before the first job: a worker that starts late joins in
  for (;;) {
    auto changed = [&] { return job_word_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(changed)) {
      num_sleeping_.fetch_add(1);
      // The destructor sets stop_ before it moves the word on, so a worker
      // that saw the final word sees stop_ here and does not sleep.
      if (!stop_.load()) job_word_.wait(seen);  // returns at once if the word moved on
      num_sleeping_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = job_word_.load(std::memory_order_acquire);
    claim_and_run(seen >> 32);
    seen = job_word_.load(std::memory_order_acquire);
  }
}

void ThreadPool::wait_until_done(int64_t num_ranges) {
  auto done = [&] { return num_done_.load(std::memory_order_acquire) >= num_ranges; };
  if (spin_until(done)) return;
  caller_sleeping_.store(true);
  for (int64_t d = num_done_.load(); d < num_ranges; d = num_done_.load()) num_done_.wait(d);
  caller_sleeping_.store(false);
}

void ThreadPool::run(int64_t num_ranges) {
  num_done_.store(0, std::memory_order_relaxed);
  const uint64_t job = (job_word_.load(std::memory_order_relaxed) >> 32) + 1;
  job_word_.store((job << 32) | (static_cast<uint64_t>(num_ranges) << 16));
  if (num_sleeping_.load() > 0) job_word_.notify_all();
  t_inside_pool = true;
  claim_and_run(job & 0xFFFFFFFF);
  t_inside_pool = false;
  wait_until_done(num_ranges);
  job_.fn = nullptr;
}

void ThreadPool::parallel_for(int64_t n, RangeFn fn, int64_t min_chunk) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(min_chunk, 1);
  const int64_t num_ranges = std::min<int64_t>(num_threads(), n / min_chunk);
  if (num_ranges <= 1 || t_inside_pool) {
    fn(0, n);
    return;
  }
  const int64_t chunk = (n + num_ranges - 1) / num_ranges;
  std::lock_guard<std::mutex> call_lock(call_mu_);
  job_ = Job{&fn, n, chunk};
  run((n + chunk - 1) / chunk);
}

void ThreadPool::parallel_for_dynamic(int64_t n, RangeFn fn, int64_t chunk) {
  if (n <= 0) return;
  chunk = std::max({chunk, int64_t{1}, (n + kMaxRanges - 1) / kMaxRanges});
  const int64_t num_ranges = (n + chunk - 1) / chunk;
  if (num_ranges <= 1 || workers_.empty() || t_inside_pool) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  job_ = Job{&fn, n, chunk};
  run(num_ranges);
}

}  // namespace pvllm::cpu
