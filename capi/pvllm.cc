// The C ABI's entry points for versions, errors, engines, requests,
// outputs and stats; tokenizers.cc and models.cc hold the rest. Every entry
// point runs its body through guard() (capi/handles.h). Out-parameters are
// reset first thing (handles to NULL, ids and counts to 0), so they hold the
// same values after every failure, whatever failed. Output events reach
// callers through the engine's request queues (core/engine/request_events.h): per request or
// engine-wide.
#include "pvllm/pvllm.h"

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "capi/conversions.h"
#include "capi/handles.h"
#include "capi/output_batch.h"
#include "capi/struct_versions.h"
#include "core/backend/registry.h"

using namespace pvllm::capi;  // NOLINT(google-build-using-namespace): this file implements it

namespace {

// Queues the request in the engine, whose queue for its events opens with
// `delivery`.
Status submit_to_engine(pvllm_engine* engine, const pvllm_request* request,
                        const pvllm::SamplingParams& sampling, pvllm::OutputDelivery delivery,
                        uint64_t* out_request_id) {
  const bool has_text = request->prompt_text != nullptr;
  const bool has_ids = request->prompt_token_ids != nullptr || request->num_prompt_token_ids > 0;
  if (has_text == has_ids) {
    return invalid(
        "exactly one of request->prompt_text and request->prompt_token_ids must be set, got " +
        std::string(has_text ? "both" : "neither"));
  }
  if (has_text) {
    if (request->prompt_text[0] == '\0') return invalid("request->prompt_text is empty");
    return engine->engine->submit_text(request->prompt_text, sampling, request->priority,
                                       out_request_id, request->add_special_tokens != 0,
                                       std::move(delivery));
  }
  if (request->prompt_token_ids == nullptr) {
    return invalid("request->prompt_token_ids is NULL but num_prompt_token_ids is " +
                   std::to_string(request->num_prompt_token_ids));
  }
  if (request->num_prompt_token_ids == 0) {
    return invalid("request->prompt_token_ids is empty (num_prompt_token_ids is 0)");
  }
  std::vector<int32_t> ids(request->prompt_token_ids,
                           request->prompt_token_ids + request->num_prompt_token_ids);
  return engine->engine->submit_tokens(std::move(ids), sampling, request->priority, out_request_id,
                                       std::move(delivery));
}

Status submit(pvllm_engine* engine, const pvllm_request* caller, uint64_t* out_request_id) {
  if (out_request_id != nullptr) *out_request_id = 0;
  PVLLM_RETURN_IF_ERROR(check_engine(engine));
  if (caller == nullptr) return null_argument("request");
  if (out_request_id == nullptr) return null_argument("out_request_id");
  PVLLM_RETURN_IF_ERROR(check_struct_size(caller, "request"));
  const pvllm_request defaults = default_request();
  const pvllm_request request = read_struct(caller, defaults);
  pvllm::OutputDelivery delivery;
  PVLLM_RETURN_IF_ERROR(to_delivery(request.delivery, &delivery.mode));
  if (request.on_output != nullptr) {
    delivery.mode = pvllm::Delivery::kHandler;
    delivery.handler = output_handler(request.on_output, request.on_output_user_data);
  }
  pvllm::SamplingParams sampling;
  if (request.sampling != nullptr) {
    PVLLM_RETURN_IF_ERROR(to_sampling_params(request.sampling, &sampling));
  }
  uint64_t id = 0;
  PVLLM_RETURN_IF_ERROR(submit_to_engine(engine, &request, sampling, std::move(delivery), &id));
  *out_request_id = id;
  return Status::Ok();
}

#define PVLLM_STR2(x) #x
#define PVLLM_STR(x) PVLLM_STR2(x)

}  // namespace

extern "C" {

/* ---------------------------------------------------------------- versions */

uint32_t pvllm_version_number(void) { return PVLLM_VERSION_NUMBER; }

const char* pvllm_cpu_isa(void) { return pvllm::cpu_backend_isa(); }

const char* pvllm_version(void) {
  return PVLLM_STR(PVLLM_VERSION_MAJOR) "." PVLLM_STR(PVLLM_VERSION_MINOR) "." PVLLM_STR(
      PVLLM_VERSION_PATCH);
}

uint32_t pvllm_abi_version(void) { return PVLLM_ABI_VERSION; }

/* ---------------------------------------------------------------- errors */

const char* pvllm_status_to_string(pvllm_status status) {
  switch (status) {
    case PVLLM_STATUS_OK:
      return "PVLLM_STATUS_OK";
    case PVLLM_STATUS_INVALID_ARGUMENT:
      return "PVLLM_STATUS_INVALID_ARGUMENT";
    case PVLLM_STATUS_NOT_FOUND:
      return "PVLLM_STATUS_NOT_FOUND";
    case PVLLM_STATUS_IO_ERROR:
      return "PVLLM_STATUS_IO_ERROR";
    case PVLLM_STATUS_CORRUPT_MODEL:
      return "PVLLM_STATUS_CORRUPT_MODEL";
    case PVLLM_STATUS_UNSUPPORTED:
      return "PVLLM_STATUS_UNSUPPORTED";
    case PVLLM_STATUS_OUT_OF_MEMORY:
      return "PVLLM_STATUS_OUT_OF_MEMORY";
    case PVLLM_STATUS_INTERNAL:
      return "PVLLM_STATUS_INTERNAL";
    case PVLLM_STATUS_TOKENIZER_ERROR:
      return "PVLLM_STATUS_TOKENIZER_ERROR";
    case PVLLM_STATUS_BUFFER_TOO_SMALL:
      return "PVLLM_STATUS_BUFFER_TOO_SMALL";
    case PVLLM_STATUS_TIMEOUT:
      return "PVLLM_STATUS_TIMEOUT";
  }
  return "PVLLM_STATUS_UNKNOWN";
}

const char* pvllm_finish_reason_to_string(int32_t finish_reason) {
  switch (finish_reason) {
    case PVLLM_FINISH_NONE:
      return "PVLLM_FINISH_NONE";
    case PVLLM_FINISH_STOP:
      return "PVLLM_FINISH_STOP";
    case PVLLM_FINISH_LENGTH:
      return "PVLLM_FINISH_LENGTH";
    case PVLLM_FINISH_ABORT:
      return "PVLLM_FINISH_ABORT";
    case PVLLM_FINISH_ERROR:
      return "PVLLM_FINISH_ERROR";
  }
  return "PVLLM_FINISH_UNKNOWN";
}

pvllm_status pvllm_error_status(const pvllm_error* error) {
  if (error == nullptr) return PVLLM_STATUS_OK;
  if (!registry<pvllm_error>().is_live(error)) return PVLLM_STATUS_INVALID_ARGUMENT;
  return error->status;
}

const char* pvllm_error_message(const pvllm_error* error) {
  if (error == nullptr) return "";
  if (!registry<pvllm_error>().is_live(error)) {
    return "not a live pvllm_error (already freed, or not an error handle)";
  }
  return error->message.c_str();
}

void pvllm_error_free(pvllm_error* error) { release_handle(error); }

/* ---------------------------------------------------------------- engine */

void pvllm_engine_params_init(pvllm_engine_params* params, size_t struct_size) {
  init_struct(params, struct_size, default_engine_params());
}

pvllm_status pvllm_engine_create(const pvllm_engine_params* params, pvllm_engine** out_engine,
                                 pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_engine == nullptr) return null_argument("out_engine");
    *out_engine = nullptr;
    pvllm::EngineConfig config;
    PVLLM_RETURN_IF_ERROR(to_engine_config(params, &config));
    auto handle = std::make_unique<pvllm_engine>();
    PVLLM_RETURN_IF_ERROR(pvllm::Engine::create(config, &handle->engine));
    // Unreachable: Engine::create sets the engine whenever it returns OK.
    // GCOVR_EXCL_START
    if (handle->engine == nullptr) return pvllm::Internal("Engine::create returned no engine");
    // GCOVR_EXCL_STOP
    if (!config.model_path.empty() && config.random_weights.empty()) {
      handle->chat_templates_status =
          pvllm::chat::ChatTemplates::load(config.model_path, &handle->chat_templates);
      fill_special_tokens(handle->engine->tokenizer(), &handle->chat_templates);
    }
    *out_engine = publish_handle(std::move(handle));
    return Status::Ok();
  });
}

void pvllm_engine_destroy(pvllm_engine* engine) { release_handle(engine); }

/* ---------------------------------------------------------------- requests */

void pvllm_sampling_params_init(pvllm_sampling_params* params, size_t struct_size) {
  init_struct(params, struct_size, default_sampling_params());
}

void pvllm_request_init(pvllm_request* request, size_t struct_size) {
  init_struct(request, struct_size, default_request());
}

pvllm_status pvllm_submit(pvllm_engine* engine, const pvllm_request* request,
                          uint64_t* out_request_id, pvllm_error** error) {
  return guard(error, [&] { return submit(engine, request, out_request_id); });
}

pvllm_status pvllm_abort(pvllm_engine* engine, uint64_t request_id, pvllm_error** error) {
  return guard(error, [&]() -> Status {
    PVLLM_RETURN_IF_ERROR(check_engine_and_request(engine, request_id));
    return engine->engine->abort(request_id);
  });
}

pvllm_status pvllm_detach(pvllm_engine* engine, uint64_t request_id, pvllm_error** error) {
  return guard(error, [&]() -> Status {
    PVLLM_RETURN_IF_ERROR(check_engine_and_request(engine, request_id));
    return engine->engine->detach(request_id);
  });
}

pvllm_status pvllm_step(pvllm_engine* engine, int32_t* out_num_unfinished, pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_num_unfinished != nullptr) *out_num_unfinished = 0;
    PVLLM_RETURN_IF_ERROR(check_engine(engine));
    // Whatever the step's status, what it made reaches pollers, waiters
    // and handlers.
    Status status = engine->engine->step();
    if (out_num_unfinished != nullptr) {
      *out_num_unfinished = engine->engine->num_unfinished_requests();
    }
    return status;
  });
}

/* ---------------------------------------------------------------- outputs */

pvllm_status pvllm_poll(pvllm_engine* engine, size_t max_events, pvllm_output_batch** out_batch,
                        pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_batch != nullptr) *out_batch = nullptr;
    PVLLM_RETURN_IF_ERROR(check_engine(engine));
    if (out_batch == nullptr) return null_argument("out_batch");
    // Allocate the batch before draining, so an allocation failure loses no
    // event.
    auto batch = std::make_unique<pvllm_output_batch>();
    engine->engine->poll(&batch->events, max_events == 0 ? SIZE_MAX : max_events);
    build_batch(batch.get());
    *out_batch = publish_handle(std::move(batch));
    return Status::Ok();
  });
}

pvllm_status pvllm_poll_request(pvllm_engine* engine, uint64_t request_id, size_t max_events,
                                pvllm_output_batch** out_batch, pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_batch != nullptr) *out_batch = nullptr;
    PVLLM_RETURN_IF_ERROR(check_engine_and_request(engine, request_id));
    if (out_batch == nullptr) return null_argument("out_batch");
    auto batch = std::make_unique<pvllm_output_batch>();
    PVLLM_RETURN_IF_ERROR(engine->engine->poll_request(
        request_id, max_events == 0 ? SIZE_MAX : max_events, &batch->events));
    build_batch(batch.get());
    *out_batch = publish_handle(std::move(batch));
    return Status::Ok();
  });
}

pvllm_status pvllm_wait(pvllm_engine* engine, uint64_t request_id, int32_t timeout_ms,
                        pvllm_error** error) {
  return guard(error, [&]() -> Status {
    PVLLM_RETURN_IF_ERROR(check_engine_and_request(engine, request_id));
    if (timeout_ms < PVLLM_WAIT_INFINITE) {
      return invalid("timeout_ms is " + std::to_string(timeout_ms) +
                     "; use >= 0 milliseconds, or PVLLM_WAIT_INFINITE (-1)");
    }
    return engine->engine->wait(request_id, timeout_ms);
  });
}

size_t pvllm_output_batch_size(const pvllm_output_batch* batch) {
  return registry<pvllm_output_batch>().is_live(batch) ? batch->outputs.size() : 0;
}

const pvllm_output* pvllm_output_batch_get(const pvllm_output_batch* batch, size_t index) {
  if (!registry<pvllm_output_batch>().is_live(batch) || index >= batch->outputs.size()) {
    return nullptr;
  }
  return &batch->outputs[index];
}

void pvllm_output_batch_free(pvllm_output_batch* batch) { release_handle(batch); }

/* ---------------------------------------------------------------- stats */

void pvllm_stats_init(pvllm_stats* stats, size_t struct_size) {
  init_struct(stats, struct_size, zeroed_struct<pvllm_stats>());
}

pvllm_status pvllm_get_stats(pvllm_engine* engine, pvllm_stats* out_stats, pvllm_error** error) {
  return guard(error, [&]() -> Status {
    PVLLM_RETURN_IF_ERROR(check_engine(engine));
    if (out_stats == nullptr) return null_argument("out_stats");
    PVLLM_RETURN_IF_ERROR(check_struct_size(out_stats, "out_stats"));
    pvllm_stats out = zeroed_struct<pvllm_stats>();
    const pvllm::EngineStats s = engine->engine->stats();
    out.num_running = s.num_running;
    out.num_waiting = s.num_waiting;
    out.num_blocks_total = s.num_blocks_total;
    out.num_blocks_used = s.num_blocks_used;
    out.num_blocks_free = s.num_blocks_free;
    out.num_blocks_cached = s.num_blocks_cached;
    out.kv_utilization = s.kv_utilization;
    out.reserved_unused_slots = s.reserved_unused_slots;
    out.prefix_cache_hit_rate = s.prefix_cache_hit_rate;
    out.prefix_cache_hits = s.prefix_cache_hits;
    out.prefix_cache_queries = s.prefix_cache_queries;
    out.num_preemptions = s.num_preemptions;
    out.num_prompt_tokens_processed = s.num_prompt_tokens_processed;
    out.num_generation_tokens = s.num_generation_tokens;
    out.num_cached_prompt_tokens = s.num_cached_prompt_tokens;
    out.num_steps = s.num_steps;
    out.num_requests_finished = s.num_requests_finished;
    out.num_kv_tokens_stored = s.num_kv_tokens_stored;
    out.num_kv_slots_reserved = s.num_kv_slots_reserved;
    out.num_seqs_queued_for_memory = s.num_seqs_queued_for_memory;
    out.num_block_copies = s.num_block_copies;
    copy_fixed(out.backend, engine->engine->backend_name());
    out.num_prefix_cache_evictions = s.num_prefix_cache_evictions;
    out.step_time_p50_ms = s.step_time_p50_ms;
    out.step_time_p99_ms = s.step_time_p99_ms;
    out.step_time_max_ms = s.step_time_max_ms;
    out.num_preemptions_by_swap = s.num_preemptions_by_swap;
    out.num_blocks_swapped_out = s.num_blocks_swapped_out;
    out.num_blocks_swapped_in = s.num_blocks_swapped_in;
    out.num_swap_bytes = s.num_swap_bytes;
    out.num_kv_tokens_attended = s.num_kv_tokens_attended;
    out.num_spec_drafts = s.num_spec_drafts;
    out.num_spec_proposed_tokens = s.num_spec_proposed_tokens;
    out.num_spec_accepted_tokens = s.num_spec_accepted_tokens;
    static_assert(sizeof(out.spec_accepted_at) / sizeof(out.spec_accepted_at[0]) ==
                  pvllm::EngineStats::kSpecPositions);
    for (int i = 0; i < pvllm::EngineStats::kSpecPositions; ++i) {
      out.spec_accepted_at[i] = s.spec_accepted_at[i];
    }
    write_struct(out_stats, out);
    return Status::Ok();
  });
}

}  // extern "C"
