// Sampler: one next token from one row of logits, on the host.
//
// Randomness is counter based: the draw for a sequence's t-th generated
// token depends only on (seed, sample_index, t), so a seeded request gives
// the same tokens whatever shares its batch and after preemption.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/base/status.h"
#include "core/sample/sampling_params.h"

namespace pvllm {

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

// The logprob fields are filled only when the params ask (logprobs >= 0);
// otherwise logprob is 0 and top_logprobs empty.
struct SampleResult {
  int32_t token_id = 0;
  float logprob = 0.0f;                    // of the chosen token, from the raw logits
  std::vector<TokenLogprob> top_logprobs;  // the `logprobs` best, best first
};

// One token to draw in a step, as the engine hands it to a backend next to
// the batch (core/backend/backend.h): which logits row it reads and everything the
// draw depends on. Several rows may read one logits row (the n samples of a
// request draw their first tokens from its last prompt row).
struct SampleRow {
  int32_t logits_index = 0;                // entry of BatchMetadata::logits_rows it reads
  const SamplingParams* params = nullptr;  // the request's; valid for the call
  uint64_t seed = 0;
  int32_t sample_index = 0;             // which of the request's n samples
  int32_t step = 0;                     // tokens this sample has generated so far
  std::span<const int32_t> prompt_ids;  // for the penalties
  std::span<const int32_t> output_ids;
  // Structured output: when not empty, only the tokens whose bit is set
  // (bit i of word i / 64; ids past the mask excluded) may be drawn.
  std::span<const uint64_t> allowed;
};

// InvalidArgument naming the row when one has no params or reads a logits
// row outside [0, num_logits). Backends check their input with it.
Status validate_sample_rows(std::span<const SampleRow> rows, int32_t num_logits);

// A uniform float in [0, 1) from the counter-based generator.
float sampler_uniform(uint64_t seed, int32_t sample_index, int32_t step);
// A uniform double in [0, 1) for (seed, sample_index, step) on stream
// `stream`: independent of sampler_uniform's draw and of other streams'
// (speculative decoding draws its acceptances and residuals so).
double sampler_uniform_stream(uint64_t seed, int32_t sample_index, int32_t step, uint32_t stream);

// The distribution sample_token draws from with these arguments,
// normalised: (*probs)[id] for every id, 0 for those the mask, top-k, top-p
// or min-p leave out. Temperature 0: 1 on the token sample_token returns.
// A mask that allows nothing: all 0.
void sample_distribution(std::span<const float> logits, const SamplingParams& params,
                         std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids,
                         std::span<const uint64_t> allowed, std::vector<double>* probs);

// `logits`: [vocab_size] raw model output (copied internally; not changed).
// `prompt_ids` and `output_ids` feed the penalties. `step` is the index of
// the token being generated (number generated so far). Logprobs are the
// log-softmax of the raw logits (before penalties and temperature), computed
// only when params.logprobs >= 0.
// Order: penalties, temperature, top-k, top-p, min-p, then the draw; with
// temperature 0 the result is the argmax after penalties (lowest id on ties).
// `allowed` (SampleRow::allowed) masks the logits first; the logprobs stay
// those of the raw logits. With a mask that allows nothing the token is -1.
SampleResult sample_token(std::span<const float> logits, const SamplingParams& params,
                          std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids,
                          uint64_t seed, int32_t sample_index, int32_t step,
                          std::span<const uint64_t> allowed = {});

// Whether bit `id` of `allowed` is set (false past its end).
inline bool token_allowed(std::span<const uint64_t> allowed, int32_t id) {
  const auto word = static_cast<size_t>(id) >> 6;
  return id >= 0 && word < allowed.size() && ((allowed[word] >> (id & 63)) & 1) != 0;
}

// The logprob of `token_id` under `logits` ([vocab_size], raw) and the
// num_top best alternatives (best first), as sample_token reports them for a
// drawn token: the log-softmax of the raw logits. For prompt logprobs.
SampleResult token_logprobs(std::span<const float> logits, int32_t token_id, int32_t num_top);

// sample_token for one row: `logits` is [num_logits, vocab_size] and the
// row reads entry row.logits_index.
SampleResult sample_row(const float* logits, int32_t vocab_size, const SampleRow& row);

}  // namespace pvllm
