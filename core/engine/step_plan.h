// What passes between the OutputProcessor and the ModelRunner in a step:
// the plan of each scheduled sequence, decided once by the processor (which
// knows the requests), followed by the runner and read back by the
// processor; and what the runner got for it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/status.h"
#include "core/engine/output.h"
#include "core/sample/sampler.h"

namespace pvllm {

struct SeqPlan {
  // The draws made from the sequence's last row: none when it does not
  // sample this step; n for the first token of a request with n samples
  // (its siblings are forked right after); one otherwise. logits_index is
  // set by the runner.
  std::vector<SampleRow> draws;
  // >= 0: the chunk's rows also give the logprobs of the prompt tokens they
  // predict, with this many alternatives (prompt logprobs).
  int32_t prompt_logprobs = -1;
};

struct SeqOutcome {
  Status status;  // ok, or why its batch could not run
  // One per planned draw; for a sequence with proposals (Sequence::proposed,
  // one draw planned) the tokens it emits: the proposals that stood, then
  // the token after them (a rejection's draw, or the last row's).
  std::vector<SampleResult> samples;
  bool speculated = false;   // the sequence carried proposals (samples as above)
  int32_t num_accepted = 0;  // of the sequence's proposals
  // With SeqPlan::prompt_logprobs: for the prompt tokens after the chunk's
  // first position, in order (the token at num_computed_tokens + 1 first).
  std::vector<OutputLogprobs> prompt_logprobs;
};

// The longest prompt chunk of a request with prompt logprobs: its rows'
// logits, all on the host at once, stay within a fixed budget
// (core/engine/prompt_logprobs.cc).
int32_t prompt_logprobs_chunk_cap(int32_t vocab_size);

}  // namespace pvllm
