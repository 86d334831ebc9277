// The host side of device sampling: packs one step's SampleRows into the
// arrays DeviceSamplingParams points at, laid out in one buffer that a
// single copy moves to the device, and turns what the device wrote back into
// SampleResults. Plain C++ without CUDA, so it is tested and timed on any
// machine.
//
// What crosses the bus per step: the inputs (about 60 bytes per row, plus 8
// bytes per distinct token of the rows whose penalties act) and the outputs
// (4 bytes per row, plus 8 bytes per logprob asked for); with structured
// output, each masked row's (vocab + 63) / 64 mask words.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/sample/sampler.h"
#include "kernels/cuda/sampling.h"

namespace pvllm {

class SamplingPlan {
 public:
  // Packs `rows`. Entry i of the batch's logits rows lives in row
  // device_logits_row[i] of the device's logits buffer. The rows must have
  // passed validate_sample_rows.
  void build(std::span<const SampleRow> rows, std::span<const int32_t> device_logits_row,
             int32_t vocab);

  // The packed input arrays, to copy to the device as they are.
  const std::vector<unsigned char>& inputs() const { return inputs_; }
  // Bytes the device writes: token ids, then the logprob pairs.
  size_t output_bytes() const {
    return logprobs_at_ + num_logprob_entries_ * sizeof(DeviceTokenLogprob);
  }
  int32_t num_penalty_slots() const { return num_penalty_slots_; }
  int32_t num_penalty_entries() const { return num_penalty_entries_; }
  int32_t num_logprob_entries() const { return num_logprob_entries_; }

  // Fills `p` for launching: its arrays point into `device_inputs` (a copy
  // of inputs()) and `device_outputs` (output_bytes()), the penalized rows
  // into `workspace`.
  void bind(const void* device_inputs, void* device_outputs, const float* logits, void* workspace,
            size_t workspace_bytes, DeviceSamplingParams* p) const;

  // out[i] for rows[i] (the rows given to build) from a host copy of the
  // outputs; logprobs only for the rows that asked.
  void read_results(std::span<const SampleRow> rows, const void* outputs,
                    std::vector<SampleResult>* out) const;

 private:
  // Byte offsets of each array inside inputs_ (and its device copy).
  struct Offsets {
    size_t logits_row = 0, temperature = 0, top_k = 0, top_p = 0, min_p = 0, seed = 0,
           sample_index = 0, step = 0;
    size_t repetition = 0, presence = 0, frequency = 0, penalty_offsets = 0, penalty_ids = 0,
           penalty_counts = 0, penalty_slot = 0;
    size_t num_logprobs = 0, logprob_offsets = 0;
    size_t allowed = 0, allowed_offset = 0;
  };

  void collect_penalty_tokens(const SampleRow& row);

  int32_t num_rows_ = 0;
  int32_t vocab_ = 0;
  int32_t num_penalty_slots_ = 0;
  int32_t num_penalty_entries_ = 0;
  int32_t num_logprob_entries_ = 0;
  bool has_penalties_ = false;
  bool has_logprobs_ = false;
  bool has_masks_ = false;
  size_t num_mask_words_ = 0;  // over every masked row
  Offsets at_;
  size_t logprobs_at_ = 0;  // byte offset of the logprob pairs in the outputs
  std::vector<unsigned char> inputs_;

  // Scratch of build(), kept between steps.
  std::vector<int32_t> marks_;  // [vocab] 0 = unseen, else 1 + count in the output
  std::vector<int32_t> touched_;
  std::vector<int32_t> penalty_ids_, penalty_counts_, penalty_offsets_, penalty_slot_;
};

}  // namespace pvllm
