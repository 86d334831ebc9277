// pvllm_cuda_prefill_attention: the plan (host) and the checks every
// variant shares; the kernels are in prefill_attention_mma.cu and
// prefill_attention_wmma.cu.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cuda/attention_generic.h"
#include "kernels/cuda/common/vec.cuh"
#include "kernels/cuda/prefill_attention.h"
#include "kernels/cuda/prefill_attention_variants.h"

namespace pvllm {

using cuda_ops::aligned16;

std::vector<int32_t> plan_prefill_attention(const int32_t* query_start, const int32_t* context_lens,
                                            int32_t num_seqs, int32_t sliding_window) {
  struct Tile {
    int32_t seq;
    int32_t q_row0;
    int64_t num_keys;
  };
  std::vector<Tile> tiles;
  for (int32_t s = 0; s < num_seqs; ++s) {
    const int32_t q_len = query_start[s + 1] - query_start[s];
    for (int32_t r = 0; r < q_len; r += kPrefillQueryTile) {
      const int32_t last_row = std::min(q_len, r + kPrefillQueryTile) - 1;
      const int64_t first_pos = static_cast<int64_t>(context_lens[s]) - q_len + r;
      const int64_t key_begin =
          sliding_window > 0 ? std::max<int64_t>(0, first_pos - sliding_window + 1) : 0;
      tiles.push_back({s, r, first_pos + (last_row - r) + 1 - key_begin});
    }
  }
  // Longest first: the heaviest tiles start in the first wave.
  std::stable_sort(tiles.begin(), tiles.end(),
                   [](const Tile& a, const Tile& b) { return a.num_keys > b.num_keys; });
  std::vector<int32_t> items;
  items.reserve(tiles.size() * 2);
  for (const Tile& t : tiles) {
    items.push_back(t.seq);
    items.push_back(t.q_row0);
  }
  return items;
}

int pvllm_cuda_prefill_attention(const PrefillAttentionParams& p, void* stream) {
  if (generic_attention::serves(p.dtype, p.paged_kv)) {
    return generic_attention::prefill(p, stream);
  }
  const PagedKv& kv = p.paged_kv;
  if (!paged_kv_dtype_ok(kv, p.dtype)) return cudaErrorInvalidValue;
  // Every shape check precedes the first CUDA call. The variant's dispatch
  // turns supported dtypes, head dims and block sizes into compile-time
  // constants; anything else (an unknown variant too) is
  // cudaErrorInvalidValue.
  prefill_detail::PrefillLaunchFn launch = nullptr;
  int found = cudaErrorInvalidValue;
  switch (p.variant) {
    case PrefillVariant::kMma:
      found = prefill_detail::mma_prefill_launcher(p.dtype, kv.head_dim, kv.block_size, &launch);
      break;
    case PrefillVariant::kWmma:
      found = prefill_detail::wmma_prefill_launcher(p.dtype, kv.head_dim, kv.block_size, &launch);
      break;
  }
  if (found != cudaSuccess) return found;
  const bool sizes_ok = p.num_work_items >= 0 && p.num_seqs >= 0 && p.num_heads > 0 &&
                        p.num_heads <= 65535 && kv.num_kv_heads > 0 &&
                        p.num_heads % kv.num_kv_heads == 0 && kv.max_blocks_per_seq > 0 &&
                        p.sliding_window >= 0 &&
                        (p.q_token_stride == 0 ||
                         (p.q_token_stride >= static_cast<int64_t>(p.num_heads) * kv.head_dim &&
                          p.q_token_stride % 8 == 0));
  if (!sizes_ok) return cudaErrorInvalidValue;
  if (p.num_work_items == 0) return cudaSuccess;
  const bool pointers_ok = p.q != nullptr && p.out != nullptr && kv.k_cache != nullptr &&
                           kv.v_cache != nullptr && p.query_start != nullptr &&
                           p.context_lens != nullptr && kv.block_tables != nullptr &&
                           p.work_items != nullptr && aligned16(p.q) && aligned16(p.out) &&
                           aligned16(kv.k_cache) && aligned16(kv.v_cache);
  if (!pointers_ok) return cudaErrorInvalidValue;
  PrefillAttentionParams kp = p;  // the kernel reads an explicit stride
  if (kp.q_token_stride == 0) kp.q_token_stride = static_cast<int64_t>(p.num_heads) * kv.head_dim;
  return launch(kp, stream);
}

}  // namespace pvllm
