// Attention kernel benchmark (GPU only; run by hand). Decode: achieved
// bandwidth over the bytes that must move (K/V of every context token once
// per kv head, plus q and out), in GB/s and as a fraction of this device's
// measured device-to-device copy bandwidth. Prefill: TFLOP/s of the causal
// QK^T and PV products. Prints markdown tables; --json PATH writes the rows.
//
//   attention_bench [--json results.json] [--reps N]
//
// bench/sdpa_reference.py measures the same shapes with PyTorch SDPA and
// prints the same tables, for a side-by-side comparison.
#include <cuda_runtime.h>

#include <algorithm>
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

struct ModelShape {
  int32_t head_dim;
  int32_t num_kv_heads;
  int32_t num_heads;
};

// Milliseconds per call of fn, averaged over `reps` after kWarmup calls.
template <typename Fn>
float time_ms(Fn&& fn, int reps) {
  for (int i = 0; i < kWarmup; ++i) fn();
  cudaEvent_t start, stop;
  BENCH_CHECK(cudaEventCreate(&start));
  BENCH_CHECK(cudaEventCreate(&stop));
  BENCH_CHECK(cudaEventRecord(start));
  for (int i = 0; i < reps; ++i) fn();
  BENCH_CHECK(cudaEventRecord(stop));
  BENCH_CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  BENCH_CHECK(cudaEventElapsedTime(&ms, start, stop));
  BENCH_CHECK(cudaEventDestroy(start));
  BENCH_CHECK(cudaEventDestroy(stop));
  return ms / reps;
}

// Device-to-device copy bandwidth in GB/s (bytes read + bytes written).
double copy_bandwidth_gbs(int reps) {
  const size_t bytes = size_t{1} << 30;
  void* a = nullptr;
  void* b = nullptr;
  BENCH_CHECK(cudaMalloc(&a, bytes));
  BENCH_CHECK(cudaMalloc(&b, bytes));
  BENCH_CHECK(cudaMemset(a, 1, bytes));
  const float ms =
      time_ms([&] { BENCH_CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice)); }, reps);
  BENCH_CHECK(cudaFree(a));
  BENCH_CHECK(cudaFree(b));
  return 2.0 * bytes / (ms * 1e-3) / 1e9;
}

struct Row {
  std::string kind;
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

std::vector<Row> bench_decode(const ModelShape& m, double copy_gbs, int reps) {
  const std::vector<int32_t> batches{1, 8, 32, 128, 256};
  const std::vector<int32_t> contexts{128, 512, 2048, 8192};
  const std::vector<int32_t> block_sizes{16, 32};
  const int64_t max_tokens = int64_t{256} * 8192;
  const size_t token_bytes = static_cast<size_t>(m.num_kv_heads) * m.head_dim * 2;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  BENCH_CHECK(cudaMalloc(&k_cache, max_tokens * token_bytes));
  BENCH_CHECK(cudaMalloc(&v_cache, max_tokens * token_bytes));
  BENCH_CHECK(cudaMemset(k_cache, 0x3C, max_tokens * token_bytes));  // bf16 ~0.0115
  BENCH_CHECK(cudaMemset(v_cache, 0x3C, max_tokens * token_bytes));
  const size_t q_bytes = size_t{256} * m.num_heads * m.head_dim * 2;
  void* q = nullptr;
  void* out = nullptr;
  BENCH_CHECK(cudaMalloc(&q, q_bytes));
  BENCH_CHECK(cudaMalloc(&out, q_bytes));
  BENCH_CHECK(cudaMemset(q, 0x3C, q_bytes));
  std::mt19937 rng(1);
  std::vector<Row> rows;
  for (int32_t block_size : block_sizes) {
    for (int32_t num_seqs : batches) {
      for (int32_t context : contexts) {
        const int32_t blocks_per_seq = (context + block_size - 1) / block_size;
        const std::vector<int32_t> tables = shuffled_tables(num_seqs, blocks_per_seq, rng);
        const std::vector<int32_t> lens(num_seqs, context);
        int32_t* d_tables = nullptr;
        int32_t* d_lens = nullptr;
        BENCH_CHECK(cudaMalloc(&d_tables, tables.size() * 4));
        BENCH_CHECK(cudaMalloc(&d_lens, lens.size() * 4));
        BENCH_CHECK(cudaMemcpy(d_tables, tables.data(), tables.size() * 4, cudaMemcpyHostToDevice));
        BENCH_CHECK(cudaMemcpy(d_lens, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice));
        pvllm::DecodeAttentionParams p;
        p.q = q;
        p.out = out;
        p.paged_kv = paged_kv(m, k_cache, v_cache, d_tables, blocks_per_seq, block_size);
        p.context_lens = d_lens;
        p.dtype = pvllm::DType::kBF16;
        p.num_seqs = num_seqs;
        p.num_heads = m.num_heads;
        p.max_context_len = context;
        p.scale = 0.088f;
        void* workspace = nullptr;
        const size_t ws_bytes = pvllm_cuda_decode_attention_workspace_bytes(p);
        if (ws_bytes > 0) BENCH_CHECK(cudaMalloc(&workspace, ws_bytes));
        p.workspace = workspace;
        const float ms =
            time_ms([&] { BENCH_CHECK(pvllm::pvllm_cuda_decode_attention(p, nullptr)); }, reps);
        const double bytes =
            2.0 * num_seqs * context * token_bytes + 2.0 * num_seqs * m.num_heads * m.head_dim * 2;
        const double gbs = bytes / (ms * 1e-3) / 1e9;
        rows.push_back({"decode", m, num_seqs, context, block_size,
                        pvllm::pvllm_cuda_decode_attention_num_splits(p), ms, gbs, gbs / copy_gbs});
        if (workspace != nullptr) BENCH_CHECK(cudaFree(workspace));
        BENCH_CHECK(cudaFree(d_tables));
        BENCH_CHECK(cudaFree(d_lens));
      }
    }
  }
  BENCH_CHECK(cudaFree(k_cache));
  BENCH_CHECK(cudaFree(v_cache));
  BENCH_CHECK(cudaFree(q));
  BENCH_CHECK(cudaFree(out));
  return rows;
}

std::vector<Row> bench_prefill(const ModelShape& m, int reps) {
  struct Case {
    int32_t num_seqs;
    int32_t prompt_len;
  };
  const std::vector<Case> cases{{1, 512}, {1, 2048}, {1, 8192}, {4, 1024}, {16, 512}};
  const int32_t block_size = 16;
  std::mt19937 rng(2);
  std::vector<Row> rows;
  for (const Case& c : cases) {
    const int32_t num_tokens = c.num_seqs * c.prompt_len;
    const int32_t blocks_per_seq = (c.prompt_len + block_size - 1) / block_size;
    const size_t token_bytes = static_cast<size_t>(m.num_kv_heads) * m.head_dim * 2;
    const size_t cache_bytes =
        static_cast<size_t>(c.num_seqs) * blocks_per_seq * block_size * token_bytes;
    const size_t q_bytes = static_cast<size_t>(num_tokens) * m.num_heads * m.head_dim * 2;
    std::vector<int32_t> query_start(c.num_seqs + 1);
    for (int32_t s = 0; s <= c.num_seqs; ++s) query_start[s] = s * c.prompt_len;
    const std::vector<int32_t> lens(c.num_seqs, c.prompt_len);
    const std::vector<int32_t> tables = shuffled_tables(c.num_seqs, blocks_per_seq, rng);
    const std::vector<int32_t> items =
        pvllm::plan_prefill_attention(query_start.data(), lens.data(), c.num_seqs);
    void *q, *out, *k_cache, *v_cache;
    int32_t *d_qs, *d_lens, *d_tables, *d_items;
    BENCH_CHECK(cudaMalloc(&q, q_bytes));
    BENCH_CHECK(cudaMalloc(&out, q_bytes));
    BENCH_CHECK(cudaMalloc(&k_cache, cache_bytes));
    BENCH_CHECK(cudaMalloc(&v_cache, cache_bytes));
    BENCH_CHECK(cudaMemset(q, 0x3C, q_bytes));
    BENCH_CHECK(cudaMemset(k_cache, 0x3C, cache_bytes));
    BENCH_CHECK(cudaMemset(v_cache, 0x3C, cache_bytes));
    BENCH_CHECK(cudaMalloc(&d_qs, query_start.size() * 4));
    BENCH_CHECK(cudaMalloc(&d_lens, lens.size() * 4));
    BENCH_CHECK(cudaMalloc(&d_tables, tables.size() * 4));
    BENCH_CHECK(cudaMalloc(&d_items, items.size() * 4));
    BENCH_CHECK(
        cudaMemcpy(d_qs, query_start.data(), query_start.size() * 4, cudaMemcpyHostToDevice));
    BENCH_CHECK(cudaMemcpy(d_lens, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice));
    BENCH_CHECK(cudaMemcpy(d_tables, tables.data(), tables.size() * 4, cudaMemcpyHostToDevice));
    BENCH_CHECK(cudaMemcpy(d_items, items.data(), items.size() * 4, cudaMemcpyHostToDevice));
    pvllm::PrefillAttentionParams p;
    p.q = q;
    p.out = out;
    p.paged_kv = paged_kv(m, k_cache, v_cache, d_tables, blocks_per_seq, block_size);
    p.query_start = d_qs;
    p.context_lens = d_lens;
    p.work_items = d_items;
    p.dtype = pvllm::DType::kBF16;
    p.num_work_items = static_cast<int32_t>(items.size() / 2);
    p.num_seqs = c.num_seqs;
    p.num_heads = m.num_heads;
    p.scale = 0.088f;
    const float ms =
        time_ms([&] { BENCH_CHECK(pvllm::pvllm_cuda_prefill_attention(p, nullptr)); }, reps);
    // Causal: query i sees i + 1 keys; QK^T and PV are 2 flops per MAC each.
    const double pairs = static_cast<double>(c.prompt_len) * (c.prompt_len + 1) / 2.0;
    const double flops = 4.0 * c.num_seqs * pairs * m.num_heads * m.head_dim;
    rows.push_back({"prefill", m, c.num_seqs, c.prompt_len, block_size, 1, ms,
                    flops / (ms * 1e-3) / 1e12, 0.0});
    for (void* ptr : {q, out, k_cache, v_cache}) BENCH_CHECK(cudaFree(ptr));
    for (int32_t* ptr : {d_qs, d_lens, d_tables, d_items}) BENCH_CHECK(cudaFree(ptr));
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
    std::printf("| prefill | %d | %d | %d | %d | %d | %d | %.4f | %.2f |\n", r.shape.head_dim,
                r.shape.num_kv_heads, r.shape.num_heads, r.num_seqs, r.context_len, r.block_size,
                r.ms, r.value);
  }
}

void write_json(const std::string& path, const std::vector<Row>& rows, double copy_gbs) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
  std::fprintf(f, "{\n  \"implementation\": \"pvllm\",\n  \"copy_gbs\": %.3f,\n  \"rows\": [\n",
               copy_gbs);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(
        f,
        "    {\"kind\": \"%s\", \"head_dim\": %d, \"num_kv_heads\": %d, \"num_heads\": %d, "
        "\"num_seqs\": %d, \"context_len\": %d, \"block_size\": %d, \"num_splits\": %d, "
        "\"ms\": %.6f, \"%s\": %.4f, \"fraction_of_copy\": %.4f}%s\n",
        r.kind.c_str(), r.shape.head_dim, r.shape.num_kv_heads, r.shape.num_heads, r.num_seqs,
        r.context_len, r.block_size, r.num_splits, r.ms, r.kind == "decode" ? "gbs" : "tflops",
        r.value, r.fraction, i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int reps = 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json_path = argv[++i];
    } else if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--reps N]\n", argv[0]);
      return 2;
    }
  }
  const double copy_gbs = copy_bandwidth_gbs(reps);
  const std::vector<ModelShape> shapes{{128, 8, 32}, {64, 4, 32}};
  std::vector<Row> rows;
  for (const ModelShape& m : shapes) {
    const std::vector<Row> d = bench_decode(m, copy_gbs, reps);
    rows.insert(rows.end(), d.begin(), d.end());
  }
  for (const ModelShape& m : shapes) {
    const std::vector<Row> pr = bench_prefill(m, reps);
    rows.insert(rows.end(), pr.begin(), pr.end());
  }
  print_tables(rows, copy_gbs);
  if (!json_path.empty()) write_json(json_path, rows, copy_gbs);
  return 0;
}
