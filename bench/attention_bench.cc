// Attention kernel benchmark (GPU only). Decode: achieved bandwidth over the
// bytes that must move (K/V of every context token once per kv head, plus q
// and out), in GB/s and as a fraction of this device's device-to-device
// copy bandwidth measured in the same run. Prefill: TFLOP/s of the causal
// QK^T and PV products, for every PrefillVariant. Times are medians of
// per-call event timings over random data (never constants). Prints
// markdown tables; --json PATH writes the rows, which
// bench/sdpa_reference.py reads to time PyTorch SDPA on the same shapes:
//
//   attention_bench --json pvllm.json [--reps N] [--only decode|prefill]
//   python3 bench/sdpa_reference.py --shapes pvllm.json --json sdpa.json
//
// The shapes are those of the attention goals in docs/performance.md:
// decode at head_dim 64 and 128, GQA 1, 4 and 8 (32 query heads), block
// sizes 16 and 32, batch x context from 512 to 256k tokens (32k and more
// being the goal's range, one sequence of 32k the split-KV case); prefill
// of fresh prompts of 512 to 8192 tokens at head_dim 128, GQA 1 and 8.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/cuda_check.h"
#include "core/base/tensor.h"
#include "kernels/cuda/common/paged_kv.h"
#include "kernels/cuda/decode_attention.h"
#include "kernels/cuda/prefill_attention.h"

namespace {

constexpr int kWarmup = 3;
constexpr int32_t kQueryHeads = 32;

struct ModelShape {
  int32_t head_dim;
  int32_t num_kv_heads;
  int32_t num_heads;
};

// Median milliseconds of one call of fn over `reps` calls, each between its
// own pair of events, after kWarmup calls.
template <typename Fn>
float median_ms(Fn&& fn, int reps) {
  for (int i = 0; i < kWarmup; ++i) fn();
  std::vector<cudaEvent_t> events(static_cast<size_t>(reps) + 1);
  for (cudaEvent_t& e : events) BENCH_CHECK(cudaEventCreate(&e));
  BENCH_CHECK(cudaEventRecord(events[0]));
  for (int i = 0; i < reps; ++i) {
    fn();
    BENCH_CHECK(cudaEventRecord(events[i + 1]));
  }
  BENCH_CHECK(cudaEventSynchronize(events.back()));
  std::vector<float> ms(reps);
  for (int i = 0; i < reps; ++i)
    BENCH_CHECK(cudaEventElapsedTime(&ms[i], events[i], events[i + 1]));
  for (cudaEvent_t e : events) BENCH_CHECK(cudaEventDestroy(e));
  std::nth_element(ms.begin(), ms.begin() + reps / 2, ms.end());
  return ms[reps / 2];
}

// Fills `bytes` of device memory with random bf16 values in [-1, 1): one
// 64 MiB random block, made once, copied over the whole range from a
// starting point that `stream` picks (so K, V and q differ).
void fill_random(void* device, size_t bytes, uint32_t stream) {
  constexpr size_t kBlockBytes = size_t{64} << 20;
  static const std::vector<uint16_t> block = [] {
    std::vector<uint16_t> b(2 * kBlockBytes / 2);  // twice, so any start has a whole block after it
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (size_t i = 0; i < kBlockBytes / 2; ++i) {
      const float f = dist(rng);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      b[i] = static_cast<uint16_t>(bits >> 16);
    }
    std::copy(b.begin(), b.begin() + kBlockBytes / 2, b.begin() + kBlockBytes / 2);
    return b;
  }();
  const uint16_t* src = block.data() + (stream * 7919u) % (kBlockBytes / 2);
  auto* dst = static_cast<unsigned char*>(device);
  for (size_t off = 0; off < bytes; off += kBlockBytes) {
    BENCH_CHECK(
        cudaMemcpy(dst + off, src, std::min(kBlockBytes, bytes - off), cudaMemcpyHostToDevice));
  }
}

// Device-to-device copy bandwidth in GB/s (bytes read + bytes written).
double copy_bandwidth_gbs(int reps) {
  const size_t bytes = size_t{1} << 30;
  void* a = nullptr;
  void* b = nullptr;
  BENCH_CHECK(cudaMalloc(&a, bytes));
  BENCH_CHECK(cudaMalloc(&b, bytes));
  fill_random(a, bytes, 5);
  const float ms =
      median_ms([&] { BENCH_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); }, reps);
  BENCH_CHECK(cudaFree(a));
  BENCH_CHECK(cudaFree(b));
  return 2.0 * bytes / (ms * 1e-3) / 1e9;
}

struct Row {
  std::string kind;     // "decode" or "prefill"
  std::string variant;  // the prefill kernel; "" for decode
  ModelShape shape;
  int32_t num_seqs;
  int32_t context_len;
  int32_t block_size;
  int32_t num_splits;
  double ms;
  double value;     // GB/s (decode) or TFLOP/s (prefill)
  double fraction;  // of copy bandwidth (decode), 0 for prefill
};

// The cache the kernels read: the model's kv heads and head dim over these
// pools and block tables ([num_seqs, blocks_per_seq]).
pvllm::PagedKv paged_kv(const ModelShape& m, void* k_cache, void* v_cache,
                        const int32_t* block_tables, int32_t blocks_per_seq, int32_t block_size) {
  pvllm::PagedKv kv;
  kv.k_cache = k_cache;
  kv.v_cache = v_cache;
  kv.block_tables = block_tables;
  kv.max_blocks_per_seq = blocks_per_seq;
  kv.block_size = block_size;
  kv.num_kv_heads = m.num_kv_heads;
  kv.head_dim = m.head_dim;
  return kv;
}

// A shuffled block table: sequence s owns ceil(context / block_size) blocks.
std::vector<int32_t> shuffled_tables(int32_t num_seqs, int32_t blocks_per_seq, std::mt19937& rng) {
  std::vector<int32_t> ids(static_cast<size_t>(num_seqs) * blocks_per_seq);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  return ids;
}

// A host vector on the device, freed with the object.
struct DeviceInts {
  int32_t* ptr = nullptr;
  explicit DeviceInts(const std::vector<int32_t>& v) {
    BENCH_CHECK(cudaMalloc(&ptr, std::max<size_t>(4, v.size() * 4)));
    BENCH_CHECK(cudaMemcpy(ptr, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
  }
  ~DeviceInts() { BENCH_CHECK(cudaFree(ptr)); }
  DeviceInts(const DeviceInts&) = delete;
  DeviceInts& operator=(const DeviceInts&) = delete;
};

struct DecodeCase {
  int32_t num_seqs;
  int32_t context_len;
};

// 512 tokens (latency), 32k tokens split seven ways (one long sequence to
// many short ones), then 128k and 256k.
const std::vector<DecodeCase>& decode_cases() {
  static const std::vector<DecodeCase> cases{{1, 512},    {1, 32768}, {4, 8192}, {8, 4096},
                                             {16, 2048},  {32, 1024}, {64, 512}, {32, 4096},
                                             {128, 2048}, {256, 1024}};
  return cases;
}

std::vector<Row> bench_decode(const ModelShape& m, double copy_gbs, int reps) {
  int64_t max_tokens = 0;
  int32_t max_seqs = 0;
  for (const DecodeCase& c : decode_cases()) {
    max_tokens = std::max<int64_t>(max_tokens, int64_t{c.num_seqs} * c.context_len);
    max_seqs = std::max(max_seqs, c.num_seqs);
  }
  max_tokens += 32 * 32;  // a partly filled last block per sequence at most
  const size_t token_bytes = static_cast<size_t>(m.num_kv_heads) * m.head_dim * 2;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  BENCH_CHECK(cudaMalloc(&k_cache, max_tokens * token_bytes));
  BENCH_CHECK(cudaMalloc(&v_cache, max_tokens * token_bytes));
  fill_random(k_cache, max_tokens * token_bytes, 1);
  fill_random(v_cache, max_tokens * token_bytes, 2);
  const size_t q_bytes = static_cast<size_t>(max_seqs) * m.num_heads * m.head_dim * 2;
  void* q = nullptr;
  void* out = nullptr;
  BENCH_CHECK(cudaMalloc(&q, q_bytes));
  BENCH_CHECK(cudaMalloc(&out, q_bytes));
  fill_random(q, q_bytes, 3);
  std::mt19937 rng(1);
  std::vector<Row> rows;
  for (int32_t block_size : {16, 32}) {
    for (const DecodeCase& c : decode_cases()) {
      const int32_t blocks_per_seq = (c.context_len + block_size - 1) / block_size;
      const DeviceInts tables(shuffled_tables(c.num_seqs, blocks_per_seq, rng));
      const DeviceInts lens(std::vector<int32_t>(c.num_seqs, c.context_len));
      pvllm::DecodeAttentionParams p;
      p.q = q;
      p.out = out;
      p.paged_kv = paged_kv(m, k_cache, v_cache, tables.ptr, blocks_per_seq, block_size);
      p.context_lens = lens.ptr;
      p.dtype = pvllm::DType::kBF16;
      p.num_seqs = c.num_seqs;
      p.num_heads = m.num_heads;
      p.max_context_len = c.context_len;
      p.scale = 1.0f / std::sqrt(static_cast<float>(m.head_dim));
      void* workspace = nullptr;
      const size_t ws_bytes = pvllm_cuda_decode_attention_workspace_bytes(p);
      if (ws_bytes > 0) BENCH_CHECK(cudaMalloc(&workspace, ws_bytes));
      p.workspace = workspace;
      const float ms =
          median_ms([&] { BENCH_CHECK(pvllm::pvllm_cuda_decode_attention(p, nullptr)); }, reps);
      const double bytes = 2.0 * c.num_seqs * c.context_len * token_bytes +
                           2.0 * c.num_seqs * m.num_heads * m.head_dim * 2;
      const double gbs = bytes / (ms * 1e-3) / 1e9;
      rows.push_back({"decode", "", m, c.num_seqs, c.context_len, block_size,
                      pvllm::pvllm_cuda_decode_attention_num_splits(p), ms, gbs, gbs / copy_gbs});
      if (workspace != nullptr) BENCH_CHECK(cudaFree(workspace));
    }
  }
  for (void* ptr : {k_cache, v_cache, q, out}) BENCH_CHECK(cudaFree(ptr));
  return rows;
}

struct PrefillCase {
  int32_t num_seqs;
  int32_t prompt_len;
};

std::vector<Row> bench_prefill(const ModelShape& m, int reps) {
  const std::vector<PrefillCase> cases{{1, 512},  {1, 1024}, {1, 2048},
                                       {1, 4096}, {1, 8192}, {4, 2048}};
  const std::vector<std::pair<pvllm::PrefillVariant, std::string>> variants{
      {pvllm::PrefillVariant::kMma, "mma"}, {pvllm::PrefillVariant::kWmma, "wmma"}};
  const int32_t block_size = 16;
  std::mt19937 rng(2);
  std::vector<Row> rows;
  for (const PrefillCase& c : cases) {
    const int32_t num_tokens = c.num_seqs * c.prompt_len;
    const int32_t blocks_per_seq = (c.prompt_len + block_size - 1) / block_size;
    const size_t token_bytes = static_cast<size_t>(m.num_kv_heads) * m.head_dim * 2;
    const size_t cache_bytes =
        static_cast<size_t>(c.num_seqs) * blocks_per_seq * block_size * token_bytes;
    const size_t q_bytes = static_cast<size_t>(num_tokens) * m.num_heads * m.head_dim * 2;
    std::vector<int32_t> query_start(c.num_seqs + 1);
    for (int32_t s = 0; s <= c.num_seqs; ++s) query_start[s] = s * c.prompt_len;
    const std::vector<int32_t> lens(c.num_seqs, c.prompt_len);
    const std::vector<int32_t> items =
        pvllm::plan_prefill_attention(query_start.data(), lens.data(), c.num_seqs);
    void *q, *out, *k_cache, *v_cache;
    BENCH_CHECK(cudaMalloc(&q, q_bytes));
    BENCH_CHECK(cudaMalloc(&out, q_bytes));
    BENCH_CHECK(cudaMalloc(&k_cache, cache_bytes));
    BENCH_CHECK(cudaMalloc(&v_cache, cache_bytes));
    fill_random(q, q_bytes, 3);
    fill_random(k_cache, cache_bytes, 1);
    fill_random(v_cache, cache_bytes, 2);
    const DeviceInts d_qs(query_start);
    const DeviceInts d_lens(lens);
    const DeviceInts d_tables(shuffled_tables(c.num_seqs, blocks_per_seq, rng));
    const DeviceInts d_items(items);
    pvllm::PrefillAttentionParams p;
    p.q = q;
    p.out = out;
    p.paged_kv = paged_kv(m, k_cache, v_cache, d_tables.ptr, blocks_per_seq, block_size);
    p.query_start = d_qs.ptr;
    p.context_lens = d_lens.ptr;
    p.work_items = d_items.ptr;
    p.dtype = pvllm::DType::kBF16;
    p.num_work_items = static_cast<int32_t>(items.size() / 2);
    p.num_seqs = c.num_seqs;
    p.num_heads = m.num_heads;
    p.scale = 1.0f / std::sqrt(static_cast<float>(m.head_dim));
    // Causal: query i sees i + 1 keys; QK^T and PV are 2 flops per MAC each.
    const double pairs = static_cast<double>(c.prompt_len) * (c.prompt_len + 1) / 2.0;
    const double flops = 4.0 * c.num_seqs * pairs * m.num_heads * m.head_dim;
    for (const auto& [variant, name] : variants) {
      p.variant = variant;
      const float ms =
          median_ms([&] { BENCH_CHECK(pvllm::pvllm_cuda_prefill_attention(p, nullptr)); }, reps);
      rows.push_back({"prefill", name, m, c.num_seqs, c.prompt_len, block_size, 1, ms,
                      flops / (ms * 1e-3) / 1e12, 0.0});
    }
    for (void* ptr : {q, out, k_cache, v_cache}) BENCH_CHECK(cudaFree(ptr));
  }
  return rows;
}

void print_tables(const std::vector<Row>& rows, double copy_gbs) {
  std::printf("device-to-device copy bandwidth: %.1f GB/s\n\n", copy_gbs);
  std::printf(
      "| kernel | head_dim | kv_heads | q_heads | batch | context | block | splits | ms | GB/s | "
      "of copy |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    if (r.kind != "decode") continue;
    std::printf("| decode | %d | %d | %d | %d | %d | %d | %d | %.4f | %.1f | %.2f |\n",
                r.shape.head_dim, r.shape.num_kv_heads, r.shape.num_heads, r.num_seqs,
                r.context_len, r.block_size, r.num_splits, r.ms, r.value, r.fraction);
  }
  std::printf(
      "\n| kernel | head_dim | kv_heads | q_heads | seqs | prompt | block | ms | TFLOP/s |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    if (r.kind != "prefill") continue;
    std::printf("| prefill %s | %d | %d | %d | %d | %d | %d | %.4f | %.2f |\n", r.variant.c_str(),
                r.shape.head_dim, r.shape.num_kv_heads, r.shape.num_heads, r.num_seqs,
                r.context_len, r.block_size, r.ms, r.value);
  }
}

void write_json(const std::string& path, const std::vector<Row>& rows, double copy_gbs) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::fprintf(f,
               "{\n  \"implementation\": \"pvllm\",\n  \"device\": \"%s\",\n  \"copy_gbs\": %.3f,\n"
               "  \"rows\": [\n",
               prop.name, copy_gbs);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(
        f,
        "    {\"kind\": \"%s\", \"variant\": \"%s\", \"head_dim\": %d, \"num_kv_heads\": %d, "
        "\"num_heads\": %d, \"num_seqs\": %d, \"context_len\": %d, \"block_size\": %d, "
        "\"num_splits\": %d, \"ms\": %.6f, \"%s\": %.4f, \"fraction_of_copy\": %.4f}%s\n",
        r.kind.c_str(), r.variant.c_str(), r.shape.head_dim, r.shape.num_kv_heads,
        r.shape.num_heads, r.num_seqs, r.context_len, r.block_size, r.num_splits, r.ms,
        r.kind == "decode" ? "gbs" : "tflops", r.value, r.fraction, i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  std::string only;
  int reps = 30;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json_path = argv[++i];
    } else if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc &&
               (std::strcmp(argv[i + 1], "decode") == 0 ||
                std::strcmp(argv[i + 1], "prefill") == 0)) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--reps N] [--only decode|prefill]\n", argv[0]);
      return 2;
    }
  }
  const double copy_gbs = copy_bandwidth_gbs(reps);
  std::vector<Row> rows;
  if (only != "prefill") {
    for (int32_t head_dim : {128, 64}) {
      for (int32_t group : {1, 4, 8}) {
        const std::vector<Row> d =
            bench_decode({head_dim, kQueryHeads / group, kQueryHeads}, copy_gbs, reps);
        rows.insert(rows.end(), d.begin(), d.end());
      }
    }
  }
  if (only != "decode") {
    for (int32_t group : {1, 8}) {
      const std::vector<Row> pr = bench_prefill({128, kQueryHeads / group, kQueryHeads}, reps);
      rows.insert(rows.end(), pr.begin(), pr.end());
    }
  }
  print_tables(rows, copy_gbs);
  if (!json_path.empty()) write_json(json_path, rows, copy_gbs);
  return 0;
}
