// Greedy generation through the raw C ABI, for the suites that check what a
// model path and its options give (capi_pvllm_file_test, capi_quantize_test).
#pragma once

#include <gtest/gtest.h>
#include <pvllm/pvllm.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/integration/capi_helpers.h"

namespace pvllm::testing {

// Creates an engine from `p` and appends to *ids the greedy continuation
// of "Once upon a time" (max_tokens tokens, EOS ignored), checking that
// every call succeeds and the request finishes with no error. When create
// fails, its status, with its message in *message.
// With `stats` the engine's counters at the end; `speculative` is the
// request's sampling.speculative.
inline pvllm_status generate_greedy(const pvllm_engine_params& p, int32_t max_tokens,
                                    std::vector<int32_t>* ids, std::string* message,
                                    pvllm_stats* stats = nullptr, int32_t speculative = 1) {
  pvllm_engine* raw = nullptr;
  pvllm_error* error = nullptr;
  const pvllm_status st = pvllm_engine_create(&p, &raw, &error);
  *message = take_message(error);
  if (st != PVLLM_STATUS_OK) {
    EXPECT_EQ(raw, nullptr);
    return st;
  }
  EnginePtr engine(raw);
  pvllm_sampling_params sp;
  pvllm_sampling_params_init(&sp, sizeof(sp));
  sp.temperature = 0;
  sp.max_tokens = max_tokens;
  sp.ignore_eos = 1;
  sp.speculative = speculative;
  pvllm_request r;
  pvllm_request_init(&r, sizeof(r));
  r.prompt_text = "Once upon a time";
  r.sampling = &sp;
  uint64_t id = 0;
  EXPECT_EQ(pvllm_submit(engine.get(), &r, &id, nullptr), PVLLM_STATUS_OK);
  bool finished = false;
  for (int i = 0; i < 100 && !finished; ++i) {
    EXPECT_EQ(pvllm_step(engine.get(), nullptr, nullptr), PVLLM_STATUS_OK);
    pvllm_output_batch* raw_batch = nullptr;
    EXPECT_EQ(pvllm_poll(engine.get(), 0, &raw_batch, nullptr), PVLLM_STATUS_OK);
    BatchPtr batch(raw_batch);
    for (size_t k = 0; k < pvllm_output_batch_size(batch.get()); ++k) {
      const pvllm_output* o = pvllm_output_batch_get(batch.get(), k);
      EXPECT_NE(o->finish_reason, PVLLM_FINISH_ERROR);
      ids->insert(ids->end(), o->token_ids, o->token_ids + o->num_token_ids);
      finished = finished || o->finish_reason != PVLLM_FINISH_NONE;
    }
  }
  EXPECT_TRUE(finished);
  if (stats != nullptr) {
    pvllm_stats_init(stats, sizeof(*stats));
    EXPECT_EQ(pvllm_get_stats(engine.get(), stats, nullptr), PVLLM_STATUS_OK);
  }
  return PVLLM_STATUS_OK;
}

}  // namespace pvllm::testing
