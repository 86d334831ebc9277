#include "kernels/cuda/sampling_plan.h"

#include <algorithm>
#include <cstring>

namespace pvllm {

namespace {

constexpr size_t kAlign = 16;

size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// Appends `count` elements of T to the layout, returning their byte offset.
template <typename T>
size_t take(size_t* size, size_t count) {
  const size_t at = *size;
  *size = align_up(at + count * sizeof(T));
  return at;
}

template <typename T>
T* at(std::vector<unsigned char>& bytes, size_t offset) {
  return reinterpret_cast<T*>(bytes.data() + offset);
}

// Whether the row's penalties can change any logit, and which tokens they
// read: repetition acts on the prompt and the output, presence and
// frequency on the output only.
bool repetition_acts(const SamplingParams& p) { return p.repetition_penalty != 1.0f; }
bool additive_acts(const SamplingParams& p) {
  return p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}

}  // namespace

// The distinct valid tokens the row's penalties act on, with their counts in
// the output, appended to penalty_ids_ / penalty_counts_. O(tokens): marks_
// counts per id and is cleared again through touched_.
void SamplingPlan::collect_penalty_tokens(const SampleRow& row) {
  const SamplingParams& p = *row.params;
  const bool repetition = repetition_acts(p);
  if (!repetition && !additive_acts(p)) return;
  touched_.clear();
  auto mark = [&](int32_t id, bool in_output) {
    if (id < 0 || id >= vocab_) return;  // as the host: invalid ids are ignored
    if (marks_[id] == 0) {
      marks_[id] = 1;
      touched_.push_back(id);
    }
    if (in_output) ++marks_[id];
  };
  if (repetition) {
    for (int32_t id : row.prompt_ids) mark(id, false);
  }
  for (int32_t id : row.output_ids) mark(id, true);
  for (int32_t id : touched_) {
    penalty_ids_.push_back(id);
    penalty_counts_.push_back(marks_[id] - 1);
    marks_[id] = 0;
  }
}

void SamplingPlan::build(std::span<const SampleRow> rows,
                         std::span<const int32_t> device_logits_row, int32_t vocab) {
  num_rows_ = static_cast<int32_t>(rows.size());
  vocab_ = vocab;
  if (marks_.size() != static_cast<size_t>(vocab)) marks_.assign(static_cast<size_t>(vocab), 0);

  // Penalties and logprob offsets first: their sizes decide the layout.
  penalty_ids_.clear();
  penalty_counts_.clear();
  penalty_offsets_.assign(1, 0);
  penalty_slot_.clear();
  num_penalty_slots_ = 0;
  num_logprob_entries_ = 0;
  has_logprobs_ = false;
  has_masks_ = false;
  num_mask_words_ = 0;
  const size_t words_per_row = (static_cast<size_t>(vocab) + 63) / 64;
  for (const SampleRow& r : rows) {
    const size_t first = penalty_ids_.size();
    collect_penalty_tokens(r);
    penalty_offsets_.push_back(static_cast<int32_t>(penalty_ids_.size()));
    // A masked row is built in a slot like a penalized one.
    const bool masked = !r.allowed.empty();
    penalty_slot_.push_back(penalty_ids_.size() > first || masked ? num_penalty_slots_++ : -1);
    if (masked) {
      has_masks_ = true;
      num_mask_words_ += words_per_row;
    }
    if (r.params->logprobs >= 0) {
      has_logprobs_ = true;
      num_logprob_entries_ += 1 + std::min(r.params->logprobs, kDeviceMaxTopLogprobs);
    }
  }
  num_penalty_entries_ = static_cast<int32_t>(penalty_ids_.size());
  has_penalties_ = num_penalty_slots_ > 0;

  const size_t n = rows.size();
  size_t size = 0;
  at_ = Offsets{};
  at_.logits_row = take<int32_t>(&size, n);
  at_.temperature = take<float>(&size, n);
  at_.top_k = take<int32_t>(&size, n);
  at_.top_p = take<float>(&size, n);
  at_.min_p = take<float>(&size, n);
  at_.seed = take<uint64_t>(&size, n);
  at_.sample_index = take<int32_t>(&size, n);
  at_.step = take<int32_t>(&size, n);
  if (has_penalties_) {
    at_.repetition = take<float>(&size, n);
    at_.presence = take<float>(&size, n);
    at_.frequency = take<float>(&size, n);
    at_.penalty_offsets = take<int32_t>(&size, n + 1);
    at_.penalty_ids = take<int32_t>(&size, penalty_ids_.size());
    at_.penalty_counts = take<int32_t>(&size, penalty_counts_.size());
    at_.penalty_slot = take<int32_t>(&size, n);
  }
  if (has_logprobs_) {
    at_.num_logprobs = take<int32_t>(&size, n);
    at_.logprob_offsets = take<int32_t>(&size, n);
  }
  if (has_masks_) {
    at_.allowed = take<uint64_t>(&size, num_mask_words_);
    at_.allowed_offset = take<int32_t>(&size, n);
  }
  inputs_.resize(size);
  size_t mask_offset = 0;

  int32_t logprob_offset = 0;
  for (size_t i = 0; i < n; ++i) {
    const SampleRow& r = rows[i];
    const SamplingParams& p = *r.params;
    at<int32_t>(inputs_, at_.logits_row)[i] = device_logits_row[r.logits_index];
    at<float>(inputs_, at_.temperature)[i] = p.temperature;
    at<int32_t>(inputs_, at_.top_k)[i] = p.top_k;
    at<float>(inputs_, at_.top_p)[i] = p.top_p;
    at<float>(inputs_, at_.min_p)[i] = p.min_p;
    at<uint64_t>(inputs_, at_.seed)[i] = r.seed;
    at<int32_t>(inputs_, at_.sample_index)[i] = r.sample_index;
    at<int32_t>(inputs_, at_.step)[i] = r.step;
    if (has_penalties_) {
      at<float>(inputs_, at_.repetition)[i] = p.repetition_penalty;
      at<float>(inputs_, at_.presence)[i] = p.presence_penalty;
      at<float>(inputs_, at_.frequency)[i] = p.frequency_penalty;
      at<int32_t>(inputs_, at_.penalty_slot)[i] = penalty_slot_[i];
    }
    if (has_masks_) {
      int32_t offset = -1;
      if (!r.allowed.empty()) {
        // Words past the row's mask allow nothing (as the host sampler).
        uint64_t* words = at<uint64_t>(inputs_, at_.allowed) + mask_offset;
        std::fill(words, words + words_per_row, uint64_t{0});
        std::copy_n(r.allowed.begin(), std::min(words_per_row, r.allowed.size()), words);
        offset = static_cast<int32_t>(mask_offset);
        mask_offset += words_per_row;
      }
      at<int32_t>(inputs_, at_.allowed_offset)[i] = offset;
    }
    if (has_logprobs_) {
      const int32_t k = p.logprobs >= 0 ? std::min(p.logprobs, kDeviceMaxTopLogprobs) : -1;
      at<int32_t>(inputs_, at_.num_logprobs)[i] = k;
      at<int32_t>(inputs_, at_.logprob_offsets)[i] = logprob_offset;
      if (k >= 0) logprob_offset += 1 + k;
    }
  }
  if (has_penalties_) {
    std::memcpy(inputs_.data() + at_.penalty_offsets, penalty_offsets_.data(),
                penalty_offsets_.size() * sizeof(int32_t));
    std::memcpy(inputs_.data() + at_.penalty_ids, penalty_ids_.data(),
                penalty_ids_.size() * sizeof(int32_t));
    std::memcpy(inputs_.data() + at_.penalty_counts, penalty_counts_.data(),
                penalty_counts_.size() * sizeof(int32_t));
  }
  logprobs_at_ = align_up(n * sizeof(int32_t));
}

void SamplingPlan::bind(const void* device_inputs, void* device_outputs, const float* logits,
                        void* workspace, size_t workspace_bytes, DeviceSamplingParams* p) const {
  const auto* in = static_cast<const unsigned char*>(device_inputs);
  auto* out = static_cast<unsigned char*>(device_outputs);
  *p = DeviceSamplingParams{};
  p->logits = logits;
  p->logits_row = reinterpret_cast<const int32_t*>(in + at_.logits_row);
  p->temperature = reinterpret_cast<const float*>(in + at_.temperature);
  p->top_k = reinterpret_cast<const int32_t*>(in + at_.top_k);
  p->top_p = reinterpret_cast<const float*>(in + at_.top_p);
  p->min_p = reinterpret_cast<const float*>(in + at_.min_p);
  p->seed = reinterpret_cast<const uint64_t*>(in + at_.seed);
  p->sample_index = reinterpret_cast<const int32_t*>(in + at_.sample_index);
  p->step = reinterpret_cast<const int32_t*>(in + at_.step);
  if (has_penalties_) {
    p->repetition_penalty = reinterpret_cast<const float*>(in + at_.repetition);
    p->presence_penalty = reinterpret_cast<const float*>(in + at_.presence);
    p->frequency_penalty = reinterpret_cast<const float*>(in + at_.frequency);
    p->penalty_offsets = reinterpret_cast<const int32_t*>(in + at_.penalty_offsets);
    p->penalty_token_ids = reinterpret_cast<const int32_t*>(in + at_.penalty_ids);
    p->penalty_output_counts = reinterpret_cast<const int32_t*>(in + at_.penalty_counts);
    p->penalty_slot = reinterpret_cast<const int32_t*>(in + at_.penalty_slot);
  }
  if (has_masks_) {
    p->allowed = reinterpret_cast<const uint64_t*>(in + at_.allowed);
    p->allowed_offset = reinterpret_cast<const int32_t*>(in + at_.allowed_offset);
  }
  if (has_logprobs_) {
    p->num_logprobs = reinterpret_cast<const int32_t*>(in + at_.num_logprobs);
    p->logprob_offsets = reinterpret_cast<const int32_t*>(in + at_.logprob_offsets);
    p->logprobs_out = reinterpret_cast<DeviceTokenLogprob*>(out + logprobs_at_);
  }
  p->token_ids = reinterpret_cast<int32_t*>(out);
  p->workspace = workspace;
  p->workspace_bytes = workspace_bytes;
  p->num_penalty_slots = num_penalty_slots_;
  p->num_rows = num_rows_;
  p->vocab = vocab_;
}

void SamplingPlan::read_results(std::span<const SampleRow> rows, const void* outputs,
                                std::vector<SampleResult>* out) const {
  const auto* bytes = static_cast<const unsigned char*>(outputs);
  const auto* ids = reinterpret_cast<const int32_t*>(bytes);
  const auto* pairs = reinterpret_cast<const DeviceTokenLogprob*>(bytes + logprobs_at_);
  out->resize(rows.size());
  size_t next = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    SampleResult& r = (*out)[i];
    r = SampleResult{};
    r.token_id = ids[i];
    // As the host sampler: a mask that allows nothing gives -1, one whose
    // every allowed logit is -inf (the device then picks 0) its first token.
    if (!rows[i].allowed.empty() && !token_allowed(rows[i].allowed, r.token_id)) {
      r.token_id = -1;
      for (int32_t id = 0; id < vocab_; ++id) {
        if (token_allowed(rows[i].allowed, id)) {
          r.token_id = id;
          break;
        }
      }
    }
    const int32_t k = rows[i].params->logprobs;
    if (k < 0) continue;
    const int32_t num_top = std::min({k, kDeviceMaxTopLogprobs, vocab_});
    r.logprob = pairs[next].logprob;
    for (int32_t j = 1; j <= num_top; ++j) {
      r.top_logprobs.push_back({pairs[next + j].token_id, pairs[next + j].logprob});
    }
    next += 1 + static_cast<size_t>(std::min(k, kDeviceMaxTopLogprobs));
  }
}

}  // namespace pvllm
