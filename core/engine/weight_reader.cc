// Reading every weight page at create (weight_reader.h).
#include "core/engine/weight_reader.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace pvllm {

namespace {

// Below this, threads cost more than they save.
constexpr size_t kThreadedBytes = size_t{16} << 20;

// Reads one byte per page of a tensor so the OS maps it in.
void touch_pages(const Tensor& t) {
  const volatile unsigned char* p = static_cast<const unsigned char*>(t.data);
  if (p == nullptr) return;
  unsigned char sink = 0;
  for (size_t off = 0; off < t.nbytes(); off += 4096) sink ^= p[off];
  (void)sink;
}

}  // namespace

Status read_weights(const Model& model, int num_threads,
                    const std::function<void(float fraction)>& progress) {
  std::vector<const Tensor*> tensors;
  size_t total = 0;
  model.for_each_weight([&](const Tensor& t) {
    tensors.push_back(&t);
    total += t.nbytes();
  });
  if (tensors.empty()) return Status::Ok();
  const bool check = model.pending_checksums != nullptr;
  size_t threads = num_threads > 0 ? static_cast<size_t>(num_threads)
                                   : std::max(1u, std::thread::hardware_concurrency());
  if (total < kThreadedBytes) threads = 1;
  threads = std::min(threads, tensors.size());

  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  std::mutex mu;
  Status first_error = Status::Ok();
  std::atomic<bool> failed{false};
  auto work = [&](bool report) {
    for (;;) {
      const size_t i = next.fetch_add(1);
      if (i >= tensors.size() || failed.load()) return;
      if (check) {
        Status st = model.verify_tensor(*tensors[i]);
        if (!st.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (!failed.exchange(true)) first_error = std::move(st);
          return;
        }
      } else {
        touch_pages(*tensors[i]);
      }
      const size_t n = done.fetch_add(1) + 1;
      if (report && progress) {
        progress(static_cast<float>(n) / static_cast<float>(tensors.size()));
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work, false);
  work(true);
  for (std::thread& t : pool) t.join();
  if (failed) return first_error;
  if (progress) progress(1.0f);
  return Status::Ok();
}

}  // namespace pvllm
