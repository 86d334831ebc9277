// Reading every weight page at create (weight_reader.h).
#include "core/engine/weight_reader.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "core/base/parallel_each.h"

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
  PVLLM_RETURN_IF_ERROR(parallel_each(
      tensors.size(), threads,
      [&](size_t i) {
        if (check) return model.verify_tensor(*tensors[i]);
        touch_pages(*tensors[i]);
        return Status::Ok();
      },
      [&](size_t done) {
        if (progress) progress(static_cast<float>(done) / static_cast<float>(tensors.size()));
      }));
  if (progress) progress(1.0f);
  return Status::Ok();
}

}  // namespace pvllm
