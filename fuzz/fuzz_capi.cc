// The C ABI: the input is a program of calls on an engine over a tiny
// random-weights model (no files): create, submit, step, poll,
// poll_request, wait, abort, detach, tokenize, detokenize, stats, chat
// template, memory estimate and destroy, in any order and with fuzzed parameter structs
// (struct_size included, never past the struct), also on a NULL or
// destroyed engine. Every status is acceptable; crashes, leaks, hangs and
// sanitizer reports are not.
#include <pvllm/pvllm.h>

#include <cstring>
#include <string>
#include <vector>

#include "fuzz/byte_stream.h"

namespace {

using pvllm::fuzz::ByteStream;

constexpr int kMaxCalls = 48;

void drop(pvllm_error* error) {
  if (error != nullptr) {
    (void)pvllm_error_message(error);
    (void)pvllm_error_status(error);
  }
  pvllm_error_free(error);
}

// A struct_size: mostly the real one, sometimes short (older callers) or 0.
size_t struct_size(ByteStream& in, size_t full) {
  switch (in.below(8)) {
    case 0:
      return 0;
    case 1:
      return in.below(static_cast<uint32_t>(full) + 1);
    default:
      return full;
  }
}

pvllm_engine_params engine_params(ByteStream& in) {
  pvllm_engine_params params;
  pvllm_engine_params_init(&params, sizeof(params));
  params.struct_size = static_cast<uint32_t>(struct_size(in, sizeof(params)));
  params.random_weights = in.below(16) == 0 ? "no-such-shape" : "tiny";
  params.device = in.below(16) == 0 ? "gpu" : "cpu";
  params.num_threads = 1;
  params.block_size = 1 << in.range(2, 6);
  params.num_kv_blocks = in.range(-1, 64);
  params.max_num_seqs = in.range(-1, 8);
  params.max_num_batched_tokens = in.range(-1, 256);
  params.max_model_len = in.range(-1, 160);
  params.enable_prefix_caching = static_cast<uint8_t>(in.below(3));
  params.kv_allocator = in.range(-1, 2);
  params.kv_cache_bytes = in.below(4) == 0 ? static_cast<int64_t>(in.u64()) : 1 << 20;
  return params;
}

pvllm_engine* create(ByteStream& in) {
  const pvllm_engine_params params = engine_params(in);
  pvllm_engine* engine = nullptr;
  pvllm_error* error = nullptr;
  (void)pvllm_engine_create(&params, &engine, &error);
  drop(error);
  return engine;
}

void submit(ByteStream& in, pvllm_engine* engine, std::vector<uint64_t>* ids) {
  std::vector<int32_t> prompt(in.below(24));
  for (auto& id : prompt) id = in.below(8) == 0 ? static_cast<int32_t>(in.u32()) : in.range(0, 511);
  std::vector<int32_t> stop_ids(in.below(3));
  for (auto& id : stop_ids) id = in.range(-1, 520);
  static const char* const kStops[] = {"", "a", "\xff", "the end"};
  std::vector<const char*> stops(in.below(3));
  for (auto& s : stops) s = kStops[in.below(4)];

  pvllm_sampling_params sampling;
  pvllm_sampling_params_init(&sampling, sizeof(sampling));
  sampling.struct_size = static_cast<uint32_t>(struct_size(in, sizeof(sampling)));
  sampling.temperature = in.number();
  sampling.top_k = in.range(-1, 600);
  sampling.top_p = in.number();
  sampling.min_p = in.number();
  sampling.repetition_penalty = in.number();
  sampling.presence_penalty = in.number();
  sampling.frequency_penalty = in.number();
  sampling.max_tokens = in.range(-1, 12);
  sampling.stop_token_ids = stop_ids.empty() ? nullptr : stop_ids.data();
  sampling.num_stop_token_ids = stop_ids.size();
  sampling.stop = stops.empty() ? nullptr : stops.data();
  sampling.num_stop = stops.size();
  sampling.ignore_eos = static_cast<uint8_t>(in.below(2));
  sampling.logprobs = in.range(-2, 21);
  sampling.has_seed = static_cast<uint8_t>(in.below(2));
  sampling.seed = in.u64();
  sampling.n = in.range(-1, 3);

  pvllm_request request;
  pvllm_request_init(&request, sizeof(request));
  request.struct_size = static_cast<uint32_t>(struct_size(in, sizeof(request)));
  if (in.below(8) == 0) request.prompt_text = "hello";
  request.prompt_token_ids = prompt.empty() ? nullptr : prompt.data();
  request.num_prompt_token_ids = prompt.size();
  request.sampling = in.below(4) == 0 ? nullptr : &sampling;
  request.priority = in.range(-2, 2);
  request.delivery = in.range(-1, 2);

  uint64_t id = 0;
  pvllm_error* error = nullptr;
  if (pvllm_submit(engine, &request, &id, &error) == PVLLM_STATUS_OK) ids->push_back(id);
  drop(error);
}

// Reads every field of every event, so that the sanitizers see them.
void consume(pvllm_output_batch* batch) {
  size_t n = pvllm_output_batch_size(batch);
  volatile size_t sink = 0;
  for (size_t i = 0; i <= n; ++i) {
    const pvllm_output* out = pvllm_output_batch_get(batch, i);
    if (out == nullptr) continue;
    for (size_t t = 0; t < out->num_token_ids; ++t)
      sink = sink + static_cast<size_t>(out->token_ids[t]);
    sink = sink + strlen(out->text) + out->text_len + strlen(out->error_message);
    (void)pvllm_finish_reason_to_string(out->finish_reason);
  }
  pvllm_output_batch_free(batch);
}

uint64_t pick_id(ByteStream& in, const std::vector<uint64_t>& ids) {
  if (ids.empty() || in.below(8) == 0) return in.u64() % 4;
  return ids[in.below(static_cast<uint32_t>(ids.size()))];
}

void call(ByteStream& in, pvllm_engine** engine, std::vector<uint64_t>* ids) {
  pvllm_error* error = nullptr;
  switch (in.below(15)) {
    case 0:
      if (*engine == nullptr) *engine = create(in);
      break;
    case 1:
      pvllm_engine_destroy(*engine);
      *engine = nullptr;
      ids->clear();
      break;
    case 2:
    case 3:
      submit(in, *engine, ids);
      break;
    case 4:
    case 5: {
      int32_t unfinished = 0;
      (void)pvllm_step(*engine, in.below(4) == 0 ? nullptr : &unfinished, &error);
      break;
    }
    case 6: {
      pvllm_output_batch* batch = nullptr;
      if (pvllm_poll(*engine, in.below(4), &batch, &error) == PVLLM_STATUS_OK) consume(batch);
      break;
    }
    case 7: {
      pvllm_output_batch* batch = nullptr;
      if (pvllm_poll_request(*engine, pick_id(in, *ids), in.below(4), &batch, &error) ==
          PVLLM_STATUS_OK) {
        consume(batch);
      }
      break;
    }
    case 8:
      (void)pvllm_abort(*engine, pick_id(in, *ids), &error);
      break;
    case 9:
      (void)pvllm_detach(*engine, pick_id(in, *ids), &error);
      break;
    case 10:
      (void)pvllm_wait(*engine, pick_id(in, *ids), 0, &error);
      break;
    case 11: {
      int32_t tokens[8] = {0};
      size_t n = 0;
      (void)pvllm_tokenize(*engine, "hi there", static_cast<uint8_t>(in.below(2)), tokens,
                           in.below(9), &n, &error);
      drop(error);
      error = nullptr;
      char text[16];
      tokens[0] = in.range(-1, 520);
      (void)pvllm_detokenize(*engine, tokens, in.below(9), text, in.below(17), &n, &error);
      break;
    }
    case 12: {
      pvllm_stats stats;
      pvllm_stats_init(&stats, sizeof(stats));
      stats.struct_size = static_cast<uint32_t>(struct_size(in, sizeof(stats)));
      (void)pvllm_get_stats(*engine, &stats, &error);
      break;
    }
    case 13: {
      pvllm_chat_template_params params;
      pvllm_chat_template_params_init(&params, sizeof(params));
      params.struct_size = static_cast<uint32_t>(struct_size(in, sizeof(params)));
      params.messages_json = in.below(4) == 0 ? "[" : R"([{"role": "user", "content": "Hi"}])";
      size_t len = 0;
      char text[32];
      (void)pvllm_apply_chat_template(*engine, &params, text, in.below(33), &len, &error);
      break;
    }
    case 14: {
      const pvllm_engine_params params = engine_params(in);
      pvllm_memory_estimate estimate;
      pvllm_memory_estimate_init(&estimate, sizeof(estimate));
      estimate.struct_size = static_cast<uint32_t>(struct_size(in, sizeof(estimate)));
      (void)pvllm_estimate_memory(&params, &estimate, &error);
      break;
    }
  }
  drop(error);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteStream in(data, size);
  pvllm_engine* engine = nullptr;
  std::vector<uint64_t> ids;
  for (int i = 0; i < kMaxCalls && !in.empty(); ++i) call(in, &engine, &ids);
  pvllm_engine_destroy(engine);
  return 0;
}
