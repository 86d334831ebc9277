// The host sampler of pvllm 0.4.0, the reference for the current one.
#pragma once

#include <cstdint>
#include <span>

#include "core/sample/sampler.h"

namespace pvllm::testing {

SampleResult reference_sample_token(std::span<const float> logits, const SamplingParams& params,
                                    std::span<const int32_t> prompt_ids,
                                    std::span<const int32_t> output_ids, uint64_t seed,
                                    int32_t sample_index, int32_t step);

}  // namespace pvllm::testing
