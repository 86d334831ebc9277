// Prompt logprobs in the model runner: the logprob of every prompt token
// after the first, with its top alternatives, for requests that ask
// (SamplingParams::prompt_logprobs). The rows of a prompt chunk predict the
// chunk's next tokens, so such a chunk runs through Backend::forward, which
// returns the logits of every row asked for; the sequence's draw, if the
// chunk ends the prompt, is then made on the host from its last row, by the
// same sampler. The request's first sequence is computed whole (no
// prefix-cache hit), in chunks whose logits fit kPromptLogitsBytes.
#include <algorithm>
#include <span>
#include <vector>

#include "core/engine/model_runner.h"

namespace pvllm {

namespace {

// Host memory one chunk's logits may take: it caps the chunk at this many
// bytes of rows (at least one row).
constexpr size_t kPromptLogitsBytes = size_t{64} << 20;

}  // namespace

int32_t prompt_logprobs_chunk_cap(int32_t vocab_size) {
  return std::max<int32_t>(
      1, static_cast<int32_t>(kPromptLogitsBytes / (sizeof(float) * std::max(vocab_size, 1))));
}

void ModelRunner::forward_with_prompt_logprobs(const ScheduledSeq& s, const SeqPlan& plan,
                                               SeqOutcome* outcome) {
  const Sequence& seq = *s.seq;
  ScheduledBatch one;
  one.seqs.push_back(s);
  one.num_batched_tokens = s.num_new_tokens;
  prepare_batch(one, *kv_cache_, &metadata_);
  // Rows of prompt positions c0 .. min(c1, P - 1) - 1, then the draw's row.
  const int32_t c0 = seq.num_computed_tokens;
  const int32_t last_predicting = std::min(c0 + s.num_new_tokens, seq.num_prompt_tokens - 1);
  const int32_t num_prompt_rows = last_predicting - c0;
  metadata_.logits_rows.clear();
  for (int32_t p = c0; p < last_predicting; ++p) metadata_.logits_rows.push_back(p - c0);
  if (s.samples_next_token) metadata_.logits_rows.push_back(s.num_new_tokens - 1);
  const int32_t vocab = vocab_size_;
  std::vector<float> logits(metadata_.logits_rows.size() * static_cast<size_t>(vocab));
  const Status st = backend_->forward(metadata_, logits.data());
  if (!st.ok()) {
    outcome->status = st;
    return;
  }
  for (int32_t r = 0; r < num_prompt_rows; ++r) {
    const int32_t token = seq.token_ids[c0 + r + 1];
    const SampleResult lp = token_logprobs(
        std::span<const float>(logits.data() + static_cast<size_t>(r) * vocab, vocab), token,
        plan.prompt_logprobs);
    outcome->prompt_logprobs.push_back(OutputLogprobs{token, lp.logprob, lp.top_logprobs});
  }
  for (SampleRow row : plan.draws) {
    row.logits_index = num_prompt_rows;
    outcome->samples.push_back(sample_row(logits.data(), vocab, row));
  }
}

}  // namespace pvllm
