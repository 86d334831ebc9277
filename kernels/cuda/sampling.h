// Sampling on the device: one next token per sample row, the same token the
// host sampler (core/sample/sampler.h) picks for the same logits, parameters, seed,
// sample index and step, and the same logprobs. Plain C++ header; the
// launcher is in sampling.cu, and sampling_plan.h packs a step's
// SampleRows into the arrays below.
//
// What is covered, in the host's order and with the host's tie rule (higher
// logit first, equal logits by lower id): repetition, presence and frequency
// penalties, temperature (0 = greedy), top-k, top-p, min-p, the
// counter-based draw, and the logprob of the chosen token plus the top-k
// logprobs of the raw logits.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pvllm {

// Logprobs a row may ask for beyond the chosen token's (SamplingParams
// allows up to 20).
constexpr int32_t kDeviceMaxTopLogprobs = 20;

// One (token, logprob) pair of the logprobs output.
struct DeviceTokenLogprob {
  int32_t token_id;
  float logprob;
};

struct DeviceSamplingParams {
  const float* logits = nullptr;  // [num_logits_rows, vocab] raw model output, fp32
  // [num_rows] the logits row each sample row reads; several rows may read
  // one (the n samples of a request's first token). nullptr: row r reads
  // logits row r.
  const int32_t* logits_row = nullptr;
  // Per-row parameters, each [num_rows], with core/sample/sampling_params.h
  // meanings: temperature >= 0 (0 = greedy argmax); top_k <= 0 or >= vocab
  // is off; top_p >= 1 is off; min_p <= 0 is off.
  const float* temperature = nullptr;
  const int32_t* top_k = nullptr;
  const float* top_p = nullptr;
  const float* min_p = nullptr;
  // Penalties, all nullptr when no row has any. Each row's tokens are the
  // entries [penalty_offsets[r], penalty_offsets[r + 1]): every distinct
  // token of its prompt and output once, in any order, with its number of
  // occurrences in the output. repetition_penalty (1 = off) acts on every
  // entry, presence and frequency (0 = off) on those with a count > 0.
  const float* repetition_penalty = nullptr;       // [num_rows]
  const float* presence_penalty = nullptr;         // [num_rows]
  const float* frequency_penalty = nullptr;        // [num_rows]
  const int32_t* penalty_offsets = nullptr;        // [num_rows + 1]
  const int32_t* penalty_token_ids = nullptr;      // [num_penalty_entries], in [0, vocab)
  const int32_t* penalty_output_counts = nullptr;  // [num_penalty_entries]
  // [num_rows] the row's slot in the workspace, where its penalized logits
  // are built, or -1 when its penalties change nothing (no entries, or all
  // penalties off): the row is then drawn from its raw logits.
  const int32_t* penalty_slot = nullptr;
  // Structured output, both nullptr when no row has a mask. allowed_offset[r]:
  // -1, or the first of the row's (vocab + 63) / 64 words in `allowed`, where
  // bit i of word w allows token 64 w + i. A masked row always has a penalty
  // slot: its workspace row gets -inf for every token the mask refuses, and
  // every later pass reads that row (logprobs stay those of the raw logits).
  const uint64_t* allowed = nullptr;
  const int32_t* allowed_offset = nullptr;  // [num_rows]
  // The counter of the draw (core/sample/sampler.cc): the token depends only on
  // (seed, sample_index, step), never on the batch around the row.
  const uint64_t* seed = nullptr;
  const int32_t* sample_index = nullptr;
  const int32_t* step = nullptr;
  // Logprobs, both nullptr when no row asks. num_logprobs[r]: -1 none; k in
  // [0, kDeviceMaxTopLogprobs]: k + 1 pairs at logprobs_out[
  // logprob_offsets[r]], the chosen token's first, then the k best raw
  // logits best first (ties by lower id). All are log-softmax of the raw
  // logits, before penalties and temperature.
  const int32_t* num_logprobs = nullptr;       // [num_rows]
  const int32_t* logprob_offsets = nullptr;    // [num_rows]
  DeviceTokenLogprob* logprobs_out = nullptr;  // [sum over asking rows of k + 1] out
  int32_t* token_ids = nullptr;                // [num_rows] out
  // pvllm_cuda_sampling_workspace_bytes(num_penalty_slots, vocab) bytes of
  // device memory, 16-byte aligned (may be null when 0):
  // fp32 [num_penalty_slots, vocab] penalized logits.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  int32_t num_penalty_slots = 0;  // every penalty_slot entry is -1 or below this
  int32_t num_rows = 0;
  int32_t vocab = 0;  // 1 .. 2^20
};

// Device memory the sampler needs for `num_penalty_slots` penalized rows.
size_t pvllm_cuda_sampling_workspace_bytes(int32_t num_penalty_slots, int32_t vocab);

// Samples every row on `stream` (asynchronous). One CUDA block of 512
// threads per row; every pass streams the row from global memory (L2):
//  0. penalized (or masked) rows: the row's sanitized raw logits are copied
//     to its workspace slot, -inf where the structured-output mask refuses
//     a token, and the penalties applied there (fp32, rounded step by step
//     as the host: x > 0 ? x / rep : x * rep, then x - (presence + count *
//     frequency));
//  1. argmax (lowest id on ties) of the raw logits and, when the row asks
//     for logprobs, their log-sum-exp in double (as the host);
//  2. top-k: an exact radix select (8 bits per pass, up to 8 passes, usually
//     3-4) of the k-th best (logit, id) key — no limit on k;
//  3. top-p over the top-k survivors: the same radix walk with each bucket
//     weighted by its probability mass (exp(x - max) in double, summed in
//     2^-42 fixed point so the result is deterministic) until the bucket
//     where the mass reaches top_p of the total is a single token: the
//     nucleus over the full vocab, without sorting;
//  4. min-p on exp(x - max) as the host, then the draw: the 53-bit
//     uniform u of core/sample/sampler.cc (splitmix64, bit for bit) times the total
//     surviving weight, found by an inverse CDF walked in id order;
//  5. rows asking for k > 0 logprobs: the radix select of step 2 over the
//     raw logits, then the k keys sorted.
// Host and device therefore pick the same token unless a probability mass
// lies within rounding of a boundary: for top-p, the fixed-point masses are
// off by at most vocab * 2^-43 of the top token's weight (typically ~1e-11);
// for the draw, double rounding (~1e-15 relative). Exactly tied logits are
// no such case: ranks break ties by id exactly, as the host. Logprobs differ
// from the host's only by the summation order of the log-sum-exp (~1e-12).
//
// Cost and limits: each pass reads the row once (usually 6-10 passes with
// top-k and top-p, 1-3 without); early passes of the radix walk put many
// tokens in the same bucket, so shared-memory atomics contend there. Fine
// for decode batches; a multi-block-per-row variant would serve huge
// batches of 256k-vocab rows better.
// Returns a cudaError_t value: cudaSuccess (also for num_rows == 0),
// cudaErrorInvalidValue for a bad size, a null pointer (penalty or logprob
// arrays given in part) or a too small workspace (before any CUDA call,
// nothing launched), or the launch error.
int pvllm_cuda_sample(const DeviceSamplingParams& params, void* stream);

}  // namespace pvllm
