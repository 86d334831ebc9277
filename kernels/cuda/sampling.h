// Sampling on the device: one next token per row of logits, the same token
// the host sampler (core/sampler.h) picks for the same row, parameters,
// seed, sample index and step. Plain C++ header; the launcher is in
// sampling.cu.
//
// What is covered: temperature (0 = greedy), top-k, top-p, min-p and the
// counter-based draw, in the host's order, with the host's tie rule (higher
// logit first, equal logits by lower id). Penalties are not: rows that use
// repetition / presence / frequency penalties are sampled on the host.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pvllm {

struct DeviceSamplingParams {
  const float* logits = nullptr;  // [num_rows, vocab] raw model output, fp32
  // Per-row parameters, each [num_rows], with core/sampling_params.h
  // meanings: temperature >= 0 (0 = greedy argmax); top_k <= 0 or >= vocab
  // is off; top_p >= 1 is off; min_p <= 0 is off.
  const float* temperature = nullptr;
  const int32_t* top_k = nullptr;
  const float* top_p = nullptr;
  const float* min_p = nullptr;
  // The counter of the draw (core/sampler.cc): the token depends only on
  // (seed, sample_index, step), never on the batch around the row.
  const uint64_t* seed = nullptr;
  const int32_t* sample_index = nullptr;
  const int32_t* step = nullptr;
  int32_t* token_ids = nullptr;  // [num_rows] out
  float* logprobs = nullptr;     // [num_rows] out: log-softmax of the raw logits at the token
  void* workspace = nullptr;     // workspace_bytes of device memory (may be null when 0)
  size_t workspace_bytes = 0;    // >= pvllm_cuda_sampling_workspace_bytes(num_rows, vocab)
  int32_t num_rows = 0;
  int32_t vocab = 0;  // 1 .. 2^20
};

// Device memory the sampler needs for these sizes. Today 0: every pass
// recomputes its values from the logits instead of storing them; callers
// still ask, so a later version can use scratch without an API change.
size_t pvllm_cuda_sampling_workspace_bytes(int32_t num_rows, int32_t vocab);

// Samples every row on `stream` (asynchronous). One CUDA block of 512
// threads per row; every pass streams the row from global memory (L2):
//  1. argmax (lowest id on ties) and the log-sum-exp of the raw logits, in
//     double, for the logprob (as the host);
//  2. top-k: an exact radix select (8 bits per pass, up to 8 passes, usually
//     3-4) of the k-th best (logit, id) key — no limit on k;
//  3. top-p over the top-k survivors: the same radix walk with each bucket
//     weighted by its probability mass (exp(x - max) in double, summed in
//     2^-42 fixed point so the result is deterministic) until the bucket
//     where the mass reaches top_p of the total is a single token: the
//     nucleus over the full vocab, without sorting;
//  4. min-p on exp(x - max) as the host, then the draw: the 53-bit
//     uniform u of core/sampler.cc (splitmix64, bit for bit) times the total
//     surviving weight, found by an inverse CDF walked in id order.
// Host and device therefore pick the same token unless a probability mass
// lies within rounding of a boundary: for top-p, the fixed-point masses are
// off by at most vocab * 2^-43 of the top token's weight (typically ~1e-11);
// for the draw, double rounding (~1e-15 relative). Exactly tied logits are
// no such case: ranks break ties by id exactly, as the host.
//
// Cost and limits: each pass reads the row once (usually 6-10 passes with
// top-k and top-p, 2-3 without); early passes of the radix walk put many
// tokens in the same bucket, so shared-memory atomics contend there. Fine
// for decode batches; a multi-block-per-row variant would serve huge
// batches of 256k-vocab rows better.
// Returns a cudaError_t value: cudaSuccess (also for num_rows == 0),
// cudaErrorInvalidValue for a bad size, null pointer or too small workspace
// (before any CUDA call, nothing launched), or the launch error.
int pvllm_cuda_sample(const DeviceSamplingParams& params, void* stream);

}  // namespace pvllm
