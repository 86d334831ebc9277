// The CPU thread pool: every index once under every split, nested and
// concurrent callers, a pool larger than the machine, construction and
// destruction in quick succession, and the CPU count taken from the
// affinity mask and the cgroup quota (fake cgroup trees).
#include "kernels/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace pvllm::cpu {
namespace {

namespace fs = std::filesystem;

// Runs `run` (a parallel_for flavour) over n indices and checks that every
// index was covered once; returns the ranges the body saw.
template <typename Run>
std::vector<std::pair<int64_t, int64_t>> cover(int64_t n, Run run) {
  std::vector<std::atomic<int>> hits(n);
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  run([&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i]++;
    std::lock_guard<std::mutex> lock(mu);
    ranges.emplace_back(b, e);
  });
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  return ranges;
}

TEST(ThreadPool, StaticSplitGivesAtMostOneRangePerThreadOfAtLeastMinChunk) {
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 5, 7, 100, 1001}) {
    for (int64_t min_chunk : {1, 3, 50}) {
      const auto ranges = cover(n, [&](auto fn) { pool.parallel_for(n, fn, min_chunk); });
      EXPECT_LE(ranges.size(), 3u);
      if (n < 2 * min_chunk) EXPECT_EQ(ranges.size(), 1u) << "too little work to share";
      for (const auto& [b, e] : ranges) {
        if (e != n) EXPECT_GE(e - b, min_chunk) << "n=" << n << " min_chunk=" << min_chunk;
      }
    }
  }
}

TEST(ThreadPool, DynamicSplitCoversEveryIndexInRangesOfChunk) {
  ThreadPool pool(3);
  for (int64_t n : {1, 9, 64, 1000}) {
    for (int64_t chunk : {1, 4, 7}) {
      const auto ranges = cover(n, [&](auto fn) { pool.parallel_for_dynamic(n, fn, chunk); });
      for (const auto& [b, e] : ranges) {
        EXPECT_EQ(b % chunk, 0);
        if (e != n) EXPECT_EQ(e - b, chunk);
      }
    }
  }
  // More than 65535 ranges asked for: larger ranges, still every index.
  cover(200000, [&](auto fn) { pool.parallel_for_dynamic(200000, fn, 1); });
}

TEST(ThreadPool, CallersOnTwoThreadsAreServedOneJobAtATime) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  auto caller = [&] {
    for (int i = 0; i < 300; ++i) {
      pool.parallel_for(64, [&](int64_t b, int64_t e) { total += e - b; });
    }
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2 * 300 * 64);
}

// Eight threads on a machine with fewer cores: workers the OS has not
// scheduled must not hold a job up (the caller claims their ranges), and
// thousands of short jobs finish with every index once.
TEST(ThreadPool, MoreThreadsThanCoresStillFinishEveryJob) {
  ThreadPool pool(8);
  std::atomic<int64_t> total{0};
  for (int i = 0; i < 3000; ++i) {
    pool.parallel_for(8, [&](int64_t b, int64_t e) { total += e - b; });
  }
  EXPECT_EQ(total.load(), 3000 * 8);
}

TEST(ThreadPool, CreatedAndDestroyedInQuickSuccession) {
  for (int i = 0; i < 200; ++i) {
    ThreadPool pool(3);
    if (i % 2 == 0) pool.parallel_for(6, [](int64_t, int64_t) {});
  }
}

TEST(ThreadPool, DefaultsToTheUsableCpus) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.num_threads(), usable_cpu_count());
  EXPECT_GE(usable_cpu_count(), 1);
  EXPECT_LE(usable_cpu_count(),
            static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency())));
}

class FakeCgroup : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("pvllm_cgroup_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
             "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  std::string root() const { return root_.string(); }
  fs::path root_;
};

TEST_F(FakeCgroup, V2QuotaIsRoundedUpAndMaxMeansNone) {
  write("cpu.max", "150000 100000\n");
  EXPECT_EQ(cgroup_cpu_quota(root()), 2);
  write("cpu.max", "50000 100000\n");
  EXPECT_EQ(cgroup_cpu_quota(root()), 1);
  write("cpu.max", "max 100000\n");
  EXPECT_EQ(cgroup_cpu_quota(root()), 0);
  write("cpu.max", "garbage\n");
  EXPECT_EQ(cgroup_cpu_quota(root()), 0);
  write("cpu.max", "100000x 100000\n");
  EXPECT_EQ(cgroup_cpu_quota(root()), 0);
}

TEST_F(FakeCgroup, V1QuotaIsReadFromTheCpuController) {
  write("cpu,cpuacct/cpu.cfs_quota_us", "300000\n");
  write("cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(cgroup_cpu_quota(root()), 3);
  write("cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  EXPECT_EQ(cgroup_cpu_quota(root()), 0);
}

TEST_F(FakeCgroup, NoFilesMeansNoQuota) { EXPECT_EQ(cgroup_cpu_quota(root()), 0); }

TEST_F(FakeCgroup, AQuotaOfOneCpuLimitsTheCount) {
  write("cpu.max", "100000 100000\n");
  EXPECT_EQ(usable_cpu_count(root()), 1);
  write("cpu.max", "max 100000\n");
  EXPECT_EQ(usable_cpu_count(root()), usable_cpu_count(root() + "/absent"));
}

}  // namespace
}  // namespace pvllm::cpu
