// The engine's record of one submitted request and of each of its samples.
// Private to core/engine: only the engine's own sources include it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/engine/engine.h"
#include "core/sample/sampling_params.h"
#include "core/sched/sequence.h"
#include "core/tokenizer/tokenizer.h"

namespace pvllm {

// One sample's output state: its detokenizer and the text not yet
// released (held back while it could still grow into a stop string).
struct Engine::SampleState {
  Sequence* seq = nullptr;
  IncrementalDetokenizer detok;
  std::string text;          // all text produced so far
  size_t num_text_sent = 0;  // bytes of `text` already in events
  bool finished = false;

  SampleState(const Tokenizer* tok, int32_t last_prompt_token) : detok(tok, last_prompt_token) {}
};

struct Engine::Request {
  uint64_t id = 0;
  std::vector<int32_t> prompt_ids;
  SamplingParams params;
  int32_t priority = 0;
  uint64_t arrival_order = 0;  // place in submit order
  uint64_t seed = 0;
  std::vector<int32_t> stop_ids;  // tokens that end generation
  size_t max_stop_len = 0;        // longest stop string, in bytes
  bool forked = false;            // the n samples exist
  std::vector<std::unique_ptr<SampleState>> samples;
  int32_t num_finished = 0;
  uint64_t next_event_sequence = 0;  // Output::sequence of its next event
};

}  // namespace pvllm
