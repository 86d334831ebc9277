// The C view of output events.
#include "capi/output_batch.h"

#include <cstring>
#include <utility>

#include "capi/conversions.h"
#include "core/base/log.h"

namespace pvllm::capi {
namespace {

// Appends the C view of `lps` to the batch's logprob arrays (reserved
// beforehand: no pointer taken moves); NULL when empty.
const pvllm_token_logprobs* append_logprobs(pvllm_output_batch* batch,
                                            const std::vector<pvllm::OutputLogprobs>& lps) {
  if (lps.empty()) return nullptr;
  const pvllm_token_logprobs* first = batch->logprobs.data() + batch->logprobs.size();
  for (const pvllm::OutputLogprobs& lp : lps) {
    pvllm_token_logprobs t{};
    t.token_id = lp.token_id;
    t.logprob = lp.logprob;
    t.num_top = lp.top.size();
    t.top = lp.top.empty() ? nullptr : batch->top.data() + batch->top.size();
    for (const pvllm::TokenLogprob& alt : lp.top) {
      batch->top.push_back(pvllm_logprob{alt.token_id, alt.logprob});
    }
    batch->logprobs.push_back(t);
  }
  return first;
}

}  // namespace

// Builds the C view of polled events. Sizes are counted first so the
// concatenated logprob vectors never reallocate once pointers are taken.
void build_batch(pvllm_output_batch* batch) {
  size_t num_tokens_with_logprobs = 0;
  size_t num_top = 0;
  for (const pvllm::Output& e : batch->events) {
    num_tokens_with_logprobs += e.logprobs.size() + e.prompt_logprobs.size();
    for (const pvllm::OutputLogprobs& lp : e.logprobs) num_top += lp.top.size();
    for (const pvllm::OutputLogprobs& lp : e.prompt_logprobs) num_top += lp.top.size();
  }
  batch->logprobs.reserve(num_tokens_with_logprobs);
  batch->top.reserve(num_top);
  batch->outputs.reserve(batch->events.size());
  for (pvllm::Output& e : batch->events) replace_nul(&e.text);
  for (const pvllm::Output& e : batch->events) {
    pvllm_output out{};
    out.struct_size = sizeof(pvllm_output);
    out.request_id = e.request_id;
    out.sample_index = e.sample_index;
    out.token_ids = e.token_ids.empty() ? nullptr : e.token_ids.data();
    out.num_token_ids = e.token_ids.size();
    out.text = e.text.c_str();
    out.text_len = e.text.size();
    out.finish_reason = static_cast<int32_t>(e.finish_reason);
    out.error_message = e.error.c_str();
    out.request_finished = e.request_finished ? 1 : 0;
    out.sequence = e.sequence;
    out.time_queued = e.metrics.time_queued;
    out.time_to_first_token = e.metrics.time_to_first_token;
    out.time_per_output_token = e.metrics.time_per_output_token;
    out.e2e_latency = e.metrics.e2e_latency;
    out.num_prompt_tokens = e.metrics.num_prompt_tokens;
    out.num_prefill_tokens = e.metrics.num_prefill_tokens;
    out.num_cached_prompt_tokens = e.metrics.num_cached_prompt_tokens;
    out.num_generated_tokens = e.metrics.num_generated_tokens;
    out.logprobs = append_logprobs(batch, e.logprobs);
    out.prompt_logprobs = append_logprobs(batch, e.prompt_logprobs);
    out.num_prompt_logprobs = e.prompt_logprobs.size();
    out.score = e.score;
    batch->outputs.push_back(out);
  }
}

// A request's on_output as the router calls it: each event as a one-event
// batch, alive for the call. An event that cannot be built (out of memory)
// cannot reach the handler; it says so on stderr rather than throw into the
// step.
// When an event cannot be built (out of memory), a sample's final event
// still reaches the handler, as an ERROR event without tokens made on the
// stack, so a consumer waiting for the end is never left waiting; an event
// in the middle of a sample is lost, and said so.
pvllm::OutputHandler output_handler(pvllm_output_callback fn, void* user_data) {
  return [fn, user_data](pvllm::Output&& event) {
    pvllm_output fallback;
    std::memset(&fallback, 0, sizeof fallback);
    fallback.struct_size = sizeof(pvllm_output);
    fallback.request_id = event.request_id;
    fallback.sample_index = event.sample_index;
    fallback.finish_reason = static_cast<int32_t>(event.finish_reason);
    fallback.request_finished = event.request_finished ? 1 : 0;
    fallback.sequence = event.sequence;
    try {
      pvllm_output_batch batch;
      batch.events.push_back(std::move(event));
      build_batch(&batch);
      fn(&batch.outputs[0], user_data);
      return;
    } catch (const std::bad_alloc&) {
      pvllm::log_warning("an event of a request with on_output was lost: out of memory");
    }
    if (fallback.finish_reason == PVLLM_FINISH_NONE) return;
    fallback.finish_reason = PVLLM_FINISH_ERROR;
    fallback.text = "";
    fallback.error_message = "out of memory: the sample's last event could not be built";
    fn(&fallback, user_data);
  };
}

}  // namespace pvllm::capi
