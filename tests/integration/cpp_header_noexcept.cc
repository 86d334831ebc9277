// Built with -fno-exceptions: pvllm.hpp leaves its throwing wrappers out and
// what remains (owning pointers, out_ptr, defaults, OutputBatch) is enough
// to generate. Uses no standard container, so nothing here is instantiated
// twice with different exception settings.
#include "tests/integration/cpp_header_noexcept.h"

#include <cstdio>
#include <pvllm/pvllm.hpp>

static_assert(PVLLM_CXX_EXCEPTIONS == 0, "this file must be built with -fno-exceptions");

namespace {

namespace px = pvllm::cxx;

// Records the first failure in *run; true when status is OK.
bool ok(pvllm_status status, const px::ErrorPtr& error, NoexceptRun* run) {
  if (status == PVLLM_STATUS_OK) return true;
  run->status = status;
  std::snprintf(run->message, sizeof run->message, "%s", pvllm_error_message(error.get()));
  return false;
}

}  // namespace

NoexceptRun greedy_without_exceptions(const char* model_path, const char* prompt,
                                      int32_t max_tokens) noexcept {
  NoexceptRun run;
  pvllm_engine_params params = px::defaults<pvllm_engine_params>();
  params.model_path = model_path;
  params.num_kv_blocks = 64;
  params.num_threads = 1;
  px::EnginePtr engine;
  px::ErrorPtr error;
  pvllm_status status = pvllm_engine_create(&params, px::out_ptr(engine), px::out_ptr(error));
  if (!ok(status, error, &run)) return run;

  pvllm_sampling_params sampling = px::defaults<pvllm_sampling_params>();
  sampling.temperature = 0.0f;
  sampling.max_tokens = max_tokens;
  sampling.ignore_eos = 1;
  pvllm_request request = px::defaults<pvllm_request>();
  request.prompt_text = prompt;
  request.sampling = &sampling;
  uint64_t id = 0;
  status = pvllm_submit(engine.get(), &request, &id, px::out_ptr(error));
  if (!ok(status, error, &run)) return run;

  for (int32_t num_unfinished = 1; num_unfinished > 0;) {
    status = pvllm_step(engine.get(), &num_unfinished, px::out_ptr(error));
    if (!ok(status, error, &run)) return run;
    px::OutputBatchPtr raw;
    status = pvllm_poll(engine.get(), 0, px::out_ptr(raw), px::out_ptr(error));
    if (!ok(status, error, &run)) return run;
    const px::OutputBatch batch(std::move(raw));
    for (const pvllm_output& out : batch) {
      for (size_t i = 0; i < out.num_token_ids && run.num_tokens < 64; ++i) {
        run.tokens[run.num_tokens++] = out.token_ids[i];
      }
    }
  }
  return run;
}
