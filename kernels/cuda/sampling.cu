#include <cuda_runtime.h>

#include <cfloat>
#include <climits>
#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "kernels/cuda/sampling.h"

namespace pvllm {

namespace {

constexpr int kThreads = 512;
constexpr int kBins = 256;  // 8 bits of the key per radix pass
// Probability masses exp(x - max) <= 1 are summed as integers in units of
// 2^-42: exact and order independent (so deterministic), and 2^20 tokens of
// weight 1 still fit in 62 bits.
constexpr double kMassScale = 0x1p42;
constexpr int32_t kMaxVocab = 1 << 20;

// ---- the host sampler's counter-based draw, bit for bit -------------------

__device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__device__ __forceinline__ double draw_uniform53(uint64_t seed, int32_t sample_index,
                                                 int32_t step) {
  const uint64_t counter =
      (uint64_t{static_cast<uint32_t>(sample_index)} << 32) | static_cast<uint32_t>(step);
  const uint64_t bits =
      mix64(mix64(seed + 0x9E3779B97F4A7C15ull) ^ mix64(counter ^ 0xD1B54A32D192ED03ull));
  return static_cast<double>(bits >> 11) * 0x1p-53;
}

// ---- ordering ---------------------------------------------------------------

// As the host: NaN ranks below everything, +inf becomes the largest finite.
__device__ __forceinline__ float sanitize(float v) {
  if (isnan(v)) return -INFINITY;
  if (v == INFINITY) return FLT_MAX;
  return v;
}

// A 64-bit key whose unsigned order is the host's rank order: higher logit
// first, equal logits (-0 == +0 included) by lower id. Every key is distinct.
__device__ __forceinline__ uint64_t rank_key(float x, int32_t id) {
  uint32_t bits = __float_as_uint(x);
  if (bits == 0x80000000u) bits = 0;  // -0 ties with +0
  const uint32_t ordered = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (uint64_t{ordered} << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(id));
}

// The keys at or above a radix prefix: selected iff key >> shift >= prefix.
struct Threshold {
  uint64_t prefix;
  int32_t shift;  // 64: every key
};
constexpr Threshold kAllKeys{0, 64};

__device__ __forceinline__ bool selected(Threshold t, uint64_t key) {
  return t.shift >= 64 || (key >> t.shift) >= t.prefix;
}

// One row's logits shaped for the draw, exactly the host's sequence:
// v = sanitize(raw), or the penalized values built from it; then
// x = sanitize(v / T) (sanitize(v) for the greedy view, T = 0); and its
// weight exp(x - max_x) in double.
struct RowView {
  const float* src;  // [vocab] raw logits, or the row's penalized values
  bool penalized;    // src already holds sanitized, penalized values
  int32_t vocab;
  float temperature;  // 0: the greedy view, no division
  float max_x;
  __device__ float v(int32_t i) const { return penalized ? src[i] : sanitize(src[i]); }
  __device__ float x(int32_t i) const {
    const float u = v(i);
    return sanitize(temperature == 0.0f ? u : u / temperature);
  }
  __device__ double weight(float x) const {
    return exp(static_cast<double>(x) - static_cast<double>(max_x));
  }
};

struct ArgBest {
  float value;
  int32_t id;
};

struct BetterOf {
  __device__ ArgBest operator()(const ArgBest& a, const ArgBest& b) const {
    if (a.value != b.value) return a.value > b.value ? a : b;
    return a.id < b.id ? a : b;
  }
};

using ScanU64 = cub::BlockScan<unsigned long long, kThreads>;
using ScanF64 = cub::BlockScan<double, kThreads>;
using ReduceF64 = cub::BlockReduce<double, kThreads>;
using ReduceArg = cub::BlockReduce<ArgBest, kThreads>;

struct Shared {
  union {
    ScanU64::TempStorage scan_u64;
    ScanF64::TempStorage scan_f64;
    ReduceF64::TempStorage reduce_f64;
    ReduceArg::TempStorage reduce_arg;
  } cub;
  unsigned long long bin_value[kBins];  // count, or fixed-point mass
  uint32_t bin_count[kBins];
  unsigned long long excl;  // value of the bins above the crossing bin
  int32_t crossing;         // scan index (kBins - 1 - bin) of the crossing bin
  int32_t winner;           // thread whose id range holds the draw
  int32_t last_possible;    // highest id with a positive weight
  int32_t token;
  ArgBest best;  // of the latest view_argmax
  double lse;
  unsigned long long top_keys[kDeviceMaxTopLogprobs];  // the top-k logprob keys found
  int32_t num_top;
};

// Radix walk over the keys of the candidates, from the top 8 bits down.
// COUNT: finds the `target` best keys (top-k). Otherwise: the shortest
// best-first prefix whose mass reaches `target` times the candidates' total
// mass (top-p). Each pass histograms the candidates inside the current
// prefix, finds the first bucket (best first) where the running sum reaches
// the target, and narrows to it; it stops once that bucket is wholly in
// (one key, or for COUNT exactly the target). Called by every thread.
template <bool COUNT>
__device__ Threshold radix_select(const RowView& row, Threshold candidates, double target_arg,
                                  Shared& sh) {
  uint64_t prefix = 0;
  unsigned long long before = 0;  // value of the candidates above the prefix
  double target = COUNT ? target_arg : 0.0;
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) {
      sh.bin_value[b] = 0;
      sh.bin_count[b] = 0;
    }
    if (threadIdx.x == 0) sh.crossing = kBins;
    __syncthreads();
    for (int32_t i = threadIdx.x; i < row.vocab; i += blockDim.x) {
      const float x = row.x(i);
      const uint64_t key = rank_key(x, i);
      if (!selected(candidates, key)) continue;
      if (shift < 56 && (key >> (shift + 8)) != prefix) continue;
      const auto b = static_cast<int>((key >> shift) & 0xFF);
      atomicAdd(&sh.bin_count[b], 1u);
      if (!COUNT) atomicAdd(&sh.bin_value[b], __double2ull_rn(row.weight(x) * kMassScale));
    }
    __syncthreads();

    // Thread t scans bin kBins - 1 - t, so the inclusive sum is the value
    // of that bin and every better one.
    const int t = threadIdx.x;
    uint32_t n = 0;
    unsigned long long v = 0;
    if (t < kBins) {
      n = sh.bin_count[kBins - 1 - t];
      v = COUNT ? n : sh.bin_value[kBins - 1 - t];
    }
    unsigned long long incl = 0;
    unsigned long long total = 0;
    ScanU64(sh.cub.scan_u64).InclusiveSum(v, incl, total);
    if (!COUNT && shift == 56) target = target_arg * static_cast<double>(total);
    if (n > 0 && static_cast<double>(before + incl) >= target) atomicMin(&sh.crossing, t);
    __syncthreads();
    const int crossing = sh.crossing;
    __syncthreads();  // all have read crossing before a next pass or select resets it
    // Rounding left the sum a hair short of the target: keep all that is
    // left, as the host does.
    if (crossing == kBins) return shift == 56 ? kAllKeys : Threshold{prefix, shift + 8};
    if (t == crossing) sh.excl = incl - v;
    __syncthreads();
    const int bin = kBins - 1 - crossing;
    before += sh.excl;
    prefix = (prefix << 8) | static_cast<uint64_t>(bin);
    const uint32_t bin_count = sh.bin_count[bin];
    const unsigned long long bin_value = COUNT ? bin_count : sh.bin_value[bin];
    __syncthreads();  // all have read the histogram before the next pass clears it
    if (bin_count == 1 || (COUNT && static_cast<double>(before + bin_value) == target)) {
      return Threshold{prefix, shift};
    }
  }
  return Threshold{prefix, 0};  // not reached: at shift 0 a bucket holds one key
}

// The inverse CDF over the surviving tokens in id order, as the host's
// draw(): thread t owns a contiguous id range, sums it in order, a block
// scan places the ranges, and the thread whose range holds u * total walks
// it again with the same sums.
__device__ int32_t draw_token(const RowView& row, Threshold top_k, Threshold nucleus, float min_p,
                              double u, Shared& sh) {
  auto filtered_weight = [&](int32_t i) -> double {
    const float x = row.x(i);
    const uint64_t key = rank_key(x, i);
    if (!selected(top_k, key) || !selected(nucleus, key)) return 0.0;
    const double w = row.weight(x);
    // min-p: p_i >= min_p * p_max  <=>  exp(x_i - max) >= min_p.
    if (min_p > 0.0f && w < static_cast<double>(min_p)) return 0.0;
    return w;
  };
  const int32_t per_thread = (row.vocab + blockDim.x - 1) / blockDim.x;
  const int32_t begin = min(row.vocab, static_cast<int32_t>(threadIdx.x) * per_thread);
  const int32_t end = min(row.vocab, begin + per_thread);
  double sum = 0.0;
  int32_t last = -1;
  for (int32_t i = begin; i < end; ++i) {
    const double w = filtered_weight(i);
    if (w <= 0.0) continue;
    sum += w;
    last = i;
  }
  if (threadIdx.x == 0) {
    sh.winner = INT_MAX;
    sh.last_possible = -1;
  }
  double excl = 0.0;
  double total = 0.0;
  ScanF64(sh.cub.scan_f64).ExclusiveSum(sum, excl, total);
  __syncthreads();
  const double target = u * total;
  if (sum > 0.0 && target < excl + sum) atomicMin(&sh.winner, static_cast<int32_t>(threadIdx.x));
  if (last >= 0) atomicMax(&sh.last_possible, last);
  __syncthreads();
  if (sh.winner == static_cast<int32_t>(threadIdx.x)) {
    double running = 0.0;
    int32_t token = end - 1;
    for (int32_t i = begin; i < end; ++i) {
      const double w = filtered_weight(i);
      if (w <= 0.0) continue;
      running += w;
      if (target < excl + running) {
        token = i;
        break;
      }
    }
    sh.token = token;
  }
  __syncthreads();
  if (sh.winner != INT_MAX) return sh.token;
  // u * total rounded up to the total: the last possible token; nothing
  // possible at all (min_p > 1): token 0, as the host.
  return sh.last_possible >= 0 ? sh.last_possible : 0;
}

// The best (x, id) of a view, lowest id on ties; called by every thread.
__device__ ArgBest view_argmax(const RowView& row, Shared& sh) {
  ArgBest best{-INFINITY, INT_MAX};
  for (int32_t i = threadIdx.x; i < row.vocab; i += blockDim.x) {
    best = BetterOf{}(best, ArgBest{row.x(i), i});
  }
  best = ReduceArg(sh.cub.reduce_arg).Reduce(best, BetterOf{});
  if (threadIdx.x == 0) sh.best = best;
  __syncthreads();
  const ArgBest result = sh.best;
  __syncthreads();  // all have read sh.best and the reduce storage is free again
  return result;
}

// log-sum-exp of the raw logits in double, as the host's log_sum_exp: all
// -inf (or a non-finite maximum) gives the maximum itself.
__device__ double raw_log_sum_exp(const float* raw, int32_t vocab, float max_raw, Shared& sh) {
  if (!isfinite(max_raw)) return max_raw;
  double sum = 0.0;
  for (int32_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    sum += exp(static_cast<double>(sanitize(raw[i])) - static_cast<double>(max_raw));
  }
  sum = ReduceF64(sh.cub.reduce_f64).Sum(sum);
  if (threadIdx.x == 0) sh.lse = static_cast<double>(max_raw) + log(sum);
  __syncthreads();
  const double lse = sh.lse;
  __syncthreads();
  return lse;
}

// Builds the row's penalized values in `out` ([vocab]): sanitize(raw), then
// for every entry the host's apply_penalties, one fp32 rounding per step
// (the _rn intrinsics keep the compiler from fusing them).
__device__ void build_penalized(const DeviceSamplingParams& p, int64_t r, const float* raw,
                                float* out) {
  const int32_t mask_at = p.allowed_offset != nullptr ? p.allowed_offset[r] : -1;
  if (mask_at >= 0) {
    const uint64_t* allowed = p.allowed + mask_at;
    for (int32_t i = threadIdx.x; i < p.vocab; i += blockDim.x) {
      out[i] = ((allowed[i >> 6] >> (i & 63)) & 1) != 0 ? sanitize(raw[i]) : -INFINITY;
    }
  } else {
    for (int32_t i = threadIdx.x; i < p.vocab; i += blockDim.x) out[i] = sanitize(raw[i]);
  }
  __syncthreads();  // the entries below read values other threads wrote
  const float rep = p.repetition_penalty[r];
  const float presence = p.presence_penalty[r];
  const float frequency = p.frequency_penalty[r];
  const bool additive = presence != 0.0f || frequency != 0.0f;
  for (int32_t e = p.penalty_offsets[r] + threadIdx.x; e < p.penalty_offsets[r + 1];
       e += blockDim.x) {
    const int32_t id = p.penalty_token_ids[e];
    if (id < 0 || id >= p.vocab) continue;
    float x = out[id];
    if (rep != 1.0f) x = x > 0.0f ? __fdiv_rn(x, rep) : __fmul_rn(x, rep);
    const int32_t count = p.penalty_output_counts[e];
    if (additive && count > 0) {
      x = __fsub_rn(x, __fadd_rn(presence, __fmul_rn(static_cast<float>(count), frequency)));
    }
    out[id] = x;  // entries are distinct: one writer per id
  }
  __syncthreads();
}

// Writes the chosen token's logprob and, for k > 0, the k best raw logits'
// (best first) to `out` ([k + 1]).
__device__ void write_logprobs(const float* raw, int32_t vocab, int32_t token, int32_t k,
                               double lse, DeviceTokenLogprob* out, Shared& sh) {
  auto logprob = [&](int32_t id) {
    return static_cast<float>(static_cast<double>(sanitize(raw[id])) - lse);
  };
  if (threadIdx.x == 0) {
    out[0] = DeviceTokenLogprob{token, logprob(token)};
    sh.num_top = 0;
  }
  if (k <= 0) return;
  const RowView row{raw, false, vocab, 1.0f, 0.0f};  // sanitize(raw): the host's ranking
  const Threshold top =
      k < vocab ? radix_select<true>(row, kAllKeys, static_cast<double>(k), sh) : kAllKeys;
  __syncthreads();  // sh.num_top is reset
  for (int32_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const uint64_t key = rank_key(row.x(i), i);
    if (!selected(top, key)) continue;
    const int32_t slot = atomicAdd(&sh.num_top, 1);
    if (slot < kDeviceMaxTopLogprobs) sh.top_keys[slot] = key;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    // Exactly min(k, vocab) keys are selected (keys are distinct); at most
    // kDeviceMaxTopLogprobs, so an insertion sort is enough.
    const int32_t n = min(sh.num_top, kDeviceMaxTopLogprobs);
    for (int32_t a = 1; a < n; ++a) {
      const unsigned long long key = sh.top_keys[a];
      int32_t b = a;
      for (; b > 0 && sh.top_keys[b - 1] < key; --b) sh.top_keys[b] = sh.top_keys[b - 1];
      sh.top_keys[b] = key;
    }
    for (int32_t a = 0; a < n; ++a) {
      const auto id = static_cast<int32_t>(0xFFFFFFFFu - static_cast<uint32_t>(sh.top_keys[a]));
      out[1 + a] = DeviceTokenLogprob{id, logprob(id)};
    }
  }
}

// grid: (num_rows), block: kThreads. See sampling.h for the passes.
__global__ void __launch_bounds__(kThreads) sampling_kernel(const DeviceSamplingParams p) {
  __shared__ Shared sh;
  const int64_t r = blockIdx.x;
  const int64_t logits_row = p.logits_row != nullptr ? p.logits_row[r] : r;
  const float* raw = p.logits + logits_row * p.vocab;  // [vocab]
  const int32_t num_logprobs = p.num_logprobs != nullptr ? p.num_logprobs[r] : -1;
  const int32_t slot = p.penalty_slot != nullptr ? p.penalty_slot[r] : -1;

  const ArgBest raw_best = view_argmax(RowView{raw, false, p.vocab, 0.0f, 0.0f}, sh);
  const double lse = num_logprobs >= 0 ? raw_log_sum_exp(raw, p.vocab, raw_best.value, sh) : 0.0;

  // v: the values the host shapes, sanitize(raw) or the penalized copy.
  const float* src = raw;
  if (slot >= 0) {
    float* penalized = static_cast<float*>(p.workspace) + static_cast<int64_t>(slot) * p.vocab;
    build_penalized(p, r, raw, penalized);
    src = penalized;
  }
  const bool penalized = slot >= 0;

  const float temperature = p.temperature[r];
  int32_t token = raw_best.id;
  if (temperature == 0.0f) {
    if (penalized) token = view_argmax(RowView{src, true, p.vocab, 0.0f, 0.0f}, sh).id;
  } else {
    RowView row{src, penalized, p.vocab, temperature, 0.0f};
    // Division is monotonic, so without penalties the shaped maximum is the
    // shaped raw maximum.
    row.max_x = penalized ? view_argmax(row, sh).value : sanitize(raw_best.value / temperature);
    if (row.max_x == -INFINITY) {
      token = 0;  // nothing is possible
    } else {
      const int32_t top_k = p.top_k[r];
      const float top_p = p.top_p[r];
      const Threshold k_set =
          top_k > 0 && top_k < p.vocab
              ? radix_select<true>(row, kAllKeys, static_cast<double>(top_k), sh)
              : kAllKeys;
      // top-p acts on the distribution left by top-k, renormalised.
      const Threshold p_set =
          top_p < 1.0f ? radix_select<false>(row, k_set, static_cast<double>(top_p), sh) : kAllKeys;
      const double u = draw_uniform53(p.seed[r], p.sample_index[r], p.step[r]);
      token = draw_token(row, k_set, p_set, p.min_p[r], u, sh);
    }
  }
  if (threadIdx.x == 0) p.token_ids[r] = token;
  if (num_logprobs >= 0) {
    write_logprobs(raw, p.vocab, token, num_logprobs, lse, p.logprobs_out + p.logprob_offsets[r],
                   sh);
  }
}

}  // namespace

size_t pvllm_cuda_sampling_workspace_bytes(int32_t num_penalty_slots, int32_t vocab) {
  if (num_penalty_slots <= 0 || vocab <= 0) return 0;
  return static_cast<size_t>(num_penalty_slots) * static_cast<size_t>(vocab) * sizeof(float);
}

int pvllm_cuda_sample(const DeviceSamplingParams& params, void* stream) {
  const DeviceSamplingParams& p = params;
  // Penalty and logprob arrays come as a set or not at all.
  const bool any_penalty = p.repetition_penalty != nullptr || p.presence_penalty != nullptr ||
                           p.frequency_penalty != nullptr || p.penalty_offsets != nullptr ||
                           p.penalty_token_ids != nullptr || p.penalty_output_counts != nullptr ||
                           p.penalty_slot != nullptr;
  const bool all_penalty = p.repetition_penalty != nullptr && p.presence_penalty != nullptr &&
                           p.frequency_penalty != nullptr && p.penalty_offsets != nullptr &&
                           p.penalty_token_ids != nullptr && p.penalty_output_counts != nullptr &&
                           p.penalty_slot != nullptr;
  const bool any_logprob =
      p.num_logprobs != nullptr || p.logprob_offsets != nullptr || p.logprobs_out != nullptr;
  const bool all_logprob =
      p.num_logprobs != nullptr && p.logprob_offsets != nullptr && p.logprobs_out != nullptr;
  // A mask lives in a penalty slot.
  const bool mask_ok = (p.allowed == nullptr) == (p.allowed_offset == nullptr) &&
                       (p.allowed == nullptr || all_penalty);
  const bool valid =
      mask_ok && p.logits != nullptr && p.temperature != nullptr && p.top_k != nullptr &&
      p.top_p != nullptr && p.min_p != nullptr && p.seed != nullptr && p.sample_index != nullptr &&
      p.step != nullptr && p.token_ids != nullptr && any_penalty == all_penalty &&
      any_logprob == all_logprob && p.num_rows >= 0 && p.vocab > 0 && p.vocab <= kMaxVocab &&
      p.num_penalty_slots >= 0 && (p.num_penalty_slots == 0 || all_penalty) &&
      p.workspace_bytes >= pvllm_cuda_sampling_workspace_bytes(p.num_penalty_slots, p.vocab) &&
      (p.workspace != nullptr || p.num_penalty_slots == 0);
  if (!valid) return cudaErrorInvalidValue;
  if (p.num_rows == 0) return cudaSuccess;
  sampling_kernel<<<static_cast<unsigned>(p.num_rows), kThreads, 0,
                    static_cast<cudaStream_t>(stream)>>>(p);
  return cudaGetLastError();
}

}  // namespace pvllm
