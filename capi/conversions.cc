// Conversions between the C ABI's structs and the core's types.
#include "capi/conversions.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "capi/struct_versions.h"
#include "core/model/quantize_model.h"
#include "core/model/random_model.h"
#include "core/structured/constraint_spec.h"

namespace pvllm::capi {
namespace {

// StatusCode values are pinned to equal pvllm_status values.
static_assert(static_cast<int>(pvllm::ChecksumMode::kFull) == PVLLM_MODEL_CHECKSUMS_FULL);
static_assert(static_cast<int>(pvllm::ChecksumMode::kLazy) == PVLLM_MODEL_CHECKSUMS_LAZY);
static_assert(static_cast<int>(pvllm::ChecksumMode::kNone) == PVLLM_MODEL_CHECKSUMS_NONE);
static_assert(static_cast<int>(pvllm::StatusCode::kOk) == PVLLM_STATUS_OK);
static_assert(static_cast<int>(pvllm::StatusCode::kInvalidArgument) ==
              PVLLM_STATUS_INVALID_ARGUMENT);
static_assert(static_cast<int>(pvllm::StatusCode::kNotFound) == PVLLM_STATUS_NOT_FOUND);
static_assert(static_cast<int>(pvllm::StatusCode::kIoError) == PVLLM_STATUS_IO_ERROR);
static_assert(static_cast<int>(pvllm::StatusCode::kCorruptModel) == PVLLM_STATUS_CORRUPT_MODEL);
static_assert(static_cast<int>(pvllm::StatusCode::kUnsupported) == PVLLM_STATUS_UNSUPPORTED);
static_assert(static_cast<int>(pvllm::StatusCode::kOutOfMemory) == PVLLM_STATUS_OUT_OF_MEMORY);
static_assert(static_cast<int>(pvllm::StatusCode::kInternal) == PVLLM_STATUS_INTERNAL);
static_assert(static_cast<int>(pvllm::StatusCode::kTokenizerError) == PVLLM_STATUS_TOKENIZER_ERROR);
static_assert(static_cast<int>(pvllm::StatusCode::kBufferTooSmall) ==
              PVLLM_STATUS_BUFFER_TOO_SMALL);
static_assert(static_cast<int>(pvllm::StatusCode::kTimeout) == PVLLM_STATUS_TIMEOUT);
static_assert(static_cast<int>(pvllm::Delivery::kShared) == PVLLM_DELIVERY_SHARED);
static_assert(static_cast<int>(pvllm::Delivery::kPerRequest) == PVLLM_DELIVERY_PER_REQUEST);
static_assert(static_cast<int>(pvllm::FinishReason::kNone) == PVLLM_FINISH_NONE);
static_assert(static_cast<int>(pvllm::FinishReason::kStop) == PVLLM_FINISH_STOP);
static_assert(static_cast<int>(pvllm::FinishReason::kLength) == PVLLM_FINISH_LENGTH);
static_assert(static_cast<int>(pvllm::FinishReason::kAbort) == PVLLM_FINISH_ABORT);
static_assert(static_cast<int>(pvllm::FinishReason::kError) == PVLLM_FINISH_ERROR);
static_assert(static_cast<int>(pvllm::KvCacheDtype::kAuto) == PVLLM_KV_CACHE_DTYPE_AUTO);
static_assert(static_cast<int>(pvllm::KvCacheDtype::kF16) == PVLLM_KV_CACHE_DTYPE_F16);
static_assert(static_cast<int>(pvllm::KvCacheDtype::kBF16) == PVLLM_KV_CACHE_DTYPE_BF16);
static_assert(static_cast<int>(pvllm::KvCacheDtype::kInt8) == PVLLM_KV_CACHE_DTYPE_INT8);
static_assert(static_cast<int>(pvllm::KvCacheDtype::kFp8E4M3) == PVLLM_KV_CACHE_DTYPE_FP8_E4M3);
static_assert(static_cast<int>(pvllm::KvCacheDtype::kF32) == PVLLM_KV_CACHE_DTYPE_F32);

// pvllm_sampling_params.constraint_flags (since 0.11): known bits only, and
// only with the JSON kinds.
Status check_constraint_flags(const pvllm_sampling_params& in) {
  constexpr uint32_t kKnown = PVLLM_CONSTRAINT_JSON_WHITESPACE |
                              PVLLM_CONSTRAINT_JSON_UNLISTED_PROPERTIES |
                              PVLLM_CONSTRAINT_JSON_ANY_ORDER;
  if (in.constraint_flags == 0) return Status::Ok();
  if ((in.constraint_flags & ~kKnown) != 0) {
    char bits[16];
    std::snprintf(bits, sizeof bits, "0x%x", in.constraint_flags & ~kKnown);
    return invalid(std::string("request->sampling->constraint_flags has unknown bits ") + bits +
                   " (known: PVLLM_CONSTRAINT_JSON_WHITESPACE (1), "
                   "PVLLM_CONSTRAINT_JSON_UNLISTED_PROPERTIES (2), "
                   "PVLLM_CONSTRAINT_JSON_ANY_ORDER (4))");
  }
  if (in.constraint_kind != PVLLM_CONSTRAINT_JSON_SCHEMA &&
      in.constraint_kind != PVLLM_CONSTRAINT_JSON_OBJECT) {
    return invalid("request->sampling->constraint_flags is " + std::to_string(in.constraint_flags) +
                   ", but the flags apply only to constraint_kind PVLLM_CONSTRAINT_JSON_SCHEMA "
                   "(1) and PVLLM_CONSTRAINT_JSON_OBJECT (2), not " +
                   std::to_string(in.constraint_kind));
  }
  return Status::Ok();
}

// pvllm_sampling_params' constraint fields (since 0.6) as a ConstraintSpec.
Status to_constraint(const pvllm_sampling_params& in, pvllm::structured::ConstraintSpec* out) {
  using pvllm::structured::ConstraintKind;
  PVLLM_RETURN_IF_ERROR(check_constraint_flags(in));
  out->json_whitespace = (in.constraint_flags & PVLLM_CONSTRAINT_JSON_WHITESPACE) != 0;
  // Any object takes any member, in any order, already: one cache entry
  // either way.
  const bool schema = in.constraint_kind == PVLLM_CONSTRAINT_JSON_SCHEMA;
  out->json_unlisted_properties =
      schema && (in.constraint_flags & PVLLM_CONSTRAINT_JSON_UNLISTED_PROPERTIES) != 0;
  out->json_any_order = schema && (in.constraint_flags & PVLLM_CONSTRAINT_JSON_ANY_ORDER) != 0;
  switch (in.constraint_kind) {
    case PVLLM_CONSTRAINT_NONE:
      return Status::Ok();
    case PVLLM_CONSTRAINT_JSON_SCHEMA:
    case PVLLM_CONSTRAINT_GRAMMAR:
    case PVLLM_CONSTRAINT_REGEX:
      if (in.constraint == nullptr) {
        return invalid("request->sampling->constraint is NULL; constraint_kind " +
                       std::to_string(in.constraint_kind) + " needs its text");
      }
      out->text = in.constraint;
      break;
    case PVLLM_CONSTRAINT_JSON_OBJECT:
      break;
    case PVLLM_CONSTRAINT_CHOICE:
      if (in.num_choices > 0 && in.choices == nullptr) {
        return invalid("request->sampling->choices is NULL but num_choices is " +
                       std::to_string(in.num_choices));
      }
      for (size_t i = 0; i < in.num_choices; ++i) {
        if (in.choices[i] == nullptr) {
          return invalid("request->sampling->choices[" + std::to_string(i) + "] is NULL");
        }
        out->choices.emplace_back(in.choices[i]);
      }
      break;
    default:
      return invalid(
          "request->sampling->constraint_kind must be a pvllm_constraint_kind (0-5), "
          "got " +
          std::to_string(in.constraint_kind));
  }
  out->kind = static_cast<ConstraintKind>(in.constraint_kind);
  return Status::Ok();
}

}  // namespace

void replace_nul(std::string* value) {
  if (value->find('\0') == std::string::npos) return;
  std::string out;
  out.reserve(value->size() + 8);
  for (char c : *value) {
    if (c == '\0') {
      out += "\xEF\xBF\xBD";
    } else {
      out += c;
    }
  }
  *value = std::move(out);
}

Status copy_text(std::string value, char* text, size_t capacity, size_t* out_len) {
  replace_nul(&value);
  *out_len = value.size();
  if (value.size() + 1 > capacity) {
    return pvllm::Status(pvllm::StatusCode::kBufferTooSmall,
                         "text needs " + std::to_string(value.size() + 1) +
                             " bytes with the NUL, capacity is " + std::to_string(capacity));
  }
  std::memcpy(text, value.data(), value.size());
  text[value.size()] = '\0';
  return Status::Ok();
}

pvllm_engine_params default_engine_params() {
  const pvllm::EngineConfig d;
  pvllm_engine_params p;
  std::memset(&p, 0, sizeof(p));
  p.struct_size = sizeof(p);
  p.model_path = nullptr;
  p.device = "auto";
  p.block_size = d.block_size;
  p.kv_cache_bytes = d.kv_cache_bytes;
  p.num_kv_blocks = d.num_kv_blocks;
  p.max_num_seqs = d.max_num_seqs;
  p.max_num_batched_tokens = d.max_num_batched_tokens;
  p.max_model_len = d.max_model_len;
  p.enable_prefix_caching = d.enable_prefix_caching ? 1 : 0;
  p.num_threads = d.num_threads;
  p.progress = nullptr;
  p.progress_user_data = nullptr;
  p.kv_allocator = static_cast<int32_t>(d.kv_allocator);
  p.random_weights = nullptr;
  p.gpu_memory_utilization = d.gpu_memory_utilization;
  p.dtype = d.dtype;
  p.enable_cuda_graphs = d.enable_cuda_graphs ? 1 : 0;
  p.swap_space_bytes = d.swap_space_bytes;
  p.preemption_mode = static_cast<int32_t>(d.preemption_mode);
  p.model_checksums = static_cast<int64_t>(d.model_checksums);
  p.quantize = nullptr;
  p.kv_cache_dtype = static_cast<int32_t>(d.kv_cache_dtype);
  p.speculative = nullptr;
  p.speculative_tokens = d.speculative_tokens;
  p.ngram_min = d.ngram_min;
  p.ngram_max = d.ngram_max;
  p.speculative_max_running = d.speculative_max_running;
  return p;
}

pvllm_sampling_params default_sampling_params() {
  const pvllm::SamplingParams d;
  pvllm_sampling_params p;
  std::memset(&p, 0, sizeof(p));
  p.struct_size = sizeof(p);
  p.temperature = d.temperature;
  p.top_k = d.top_k;
  p.top_p = d.top_p;
  p.min_p = d.min_p;
  p.repetition_penalty = d.repetition_penalty;
  p.presence_penalty = d.presence_penalty;
  p.frequency_penalty = d.frequency_penalty;
  p.max_tokens = d.max_tokens;
  p.stop_token_ids = nullptr;
  p.num_stop_token_ids = 0;
  p.stop = nullptr;
  p.num_stop = 0;
  p.ignore_eos = d.ignore_eos ? 1 : 0;
  p.logprobs = d.logprobs;
  p.has_seed = d.has_seed ? 1 : 0;
  p.seed = d.seed;
  p.n = d.n;
  p.prompt_logprobs = d.prompt_logprobs;
  p.beam_width = d.beam_width;
  p.length_penalty = d.length_penalty;
  p.early_stopping = static_cast<int32_t>(d.early_stopping);
  p.constraint_kind = PVLLM_CONSTRAINT_NONE;
  p.constraint = nullptr;
  p.choices = nullptr;
  p.num_choices = 0;
  p.constraint_flags = 0;
  p.speculative = d.speculative ? 1 : 0;
  return p;
}

pvllm_request default_request() {
  pvllm_request r = zeroed_struct<pvllm_request>();
  r.delivery = PVLLM_DELIVERY_SHARED;
  r.add_special_tokens = 1;
  return r;
}

pvllm_tokenizer_info default_tokenizer_info() {
  pvllm_tokenizer_info info = zeroed_struct<pvllm_tokenizer_info>();
  info.bos_id = -1;
  info.eos_id = -1;
  return info;
}

pvllm_chat_template_params default_chat_template_params() {
  pvllm_chat_template_params p = zeroed_struct<pvllm_chat_template_params>();
  p.add_generation_prompt = 1;
  return p;
}

// A field holding one of an enum's values 0..names.size()-1: INVALID_ARGUMENT
// listing them ("params->x must be A (0), B (1) or C (2), got 7") otherwise.
Status check_enum(const char* field, int64_t value, std::initializer_list<const char*> names) {
  if (value >= 0 && value < static_cast<int64_t>(names.size())) return Status::Ok();
  std::string message = std::string("params->") + field + " must be ";
  int64_t i = 0;
  for (const char* name : names) {
    if (i > 0) message += i + 1 == static_cast<int64_t>(names.size()) ? " or " : ", ";
    message += std::string(name) + " (" + std::to_string(i++) + ")";
  }
  return invalid(message + ", got " + std::to_string(value));
}

Status to_engine_config(const pvllm_engine_params* in, pvllm::EngineConfig* config) {
  if (in == nullptr) return null_argument("params");
  PVLLM_RETURN_IF_ERROR(check_struct_size(in, "params"));
  const pvllm_engine_params params = read_struct(in, default_engine_params());
  if (params.random_weights != nullptr) {
    if (params.random_weights[0] == '\0') return invalid("params->random_weights is empty");
    config->random_weights = params.random_weights;
    pvllm::ModelConfig shape;
    PVLLM_RETURN_IF_ERROR(pvllm::random_model_config(config->random_weights, &shape));
  } else {
    if (params.model_path == nullptr) return null_argument("params->model_path");
    if (params.model_path[0] == '\0') return invalid("params->model_path is empty");
  }
  if (params.model_path != nullptr) config->model_path = params.model_path;
  config->device = params.device != nullptr ? params.device : "auto";
  config->block_size = params.block_size;
  config->kv_cache_bytes = params.kv_cache_bytes;
  config->num_kv_blocks = params.num_kv_blocks;
  config->max_num_seqs = params.max_num_seqs;
  config->max_num_batched_tokens = params.max_num_batched_tokens;
  config->max_model_len = params.max_model_len;
  config->enable_prefix_caching = params.enable_prefix_caching != 0;
  config->num_threads = params.num_threads;
  PVLLM_RETURN_IF_ERROR(check_enum("kv_allocator", params.kv_allocator,
                                   {"PVLLM_KV_ALLOCATOR_PAGED", "PVLLM_KV_ALLOCATOR_CONTIGUOUS"}));
  config->kv_allocator = static_cast<pvllm::KvAllocator>(params.kv_allocator);
  config->gpu_memory_utilization = params.gpu_memory_utilization;
  config->dtype = params.dtype;
  config->enable_cuda_graphs = params.enable_cuda_graphs != 0;
  config->swap_space_bytes = params.swap_space_bytes;
  PVLLM_RETURN_IF_ERROR(
      check_enum("preemption_mode", params.preemption_mode,
                 {"PVLLM_PREEMPTION_RECOMPUTE", "PVLLM_PREEMPTION_SWAP", "PVLLM_PREEMPTION_AUTO"}));
  config->preemption_mode = static_cast<pvllm::PreemptionMode>(params.preemption_mode);
  PVLLM_RETURN_IF_ERROR(check_enum(
      "model_checksums", params.model_checksums,
      {"PVLLM_MODEL_CHECKSUMS_FULL", "PVLLM_MODEL_CHECKSUMS_LAZY", "PVLLM_MODEL_CHECKSUMS_NONE"}));
  config->model_checksums = static_cast<pvllm::ChecksumMode>(params.model_checksums);
  if (params.quantize != nullptr && params.quantize[0] != '\0') {
    if (!pvllm::is_quantize_scheme(params.quantize)) {
      return invalid(std::string("params->quantize is \"") + params.quantize +
                     "\", which is not a quantization scheme (" + pvllm::quantize_scheme_names() +
                     ")");
    }
    config->quantize = params.quantize;
  }
  PVLLM_RETURN_IF_ERROR(check_enum(
      "kv_cache_dtype", params.kv_cache_dtype,
      {"PVLLM_KV_CACHE_DTYPE_AUTO", "PVLLM_KV_CACHE_DTYPE_F16", "PVLLM_KV_CACHE_DTYPE_BF16",
       "PVLLM_KV_CACHE_DTYPE_INT8", "PVLLM_KV_CACHE_DTYPE_FP8_E4M3", "PVLLM_KV_CACHE_DTYPE_F32"}));
  config->kv_cache_dtype = static_cast<pvllm::KvCacheDtype>(params.kv_cache_dtype);
  if (params.speculative != nullptr && params.speculative[0] != '\0') {
    config->speculative = params.speculative;  // EngineConfig::validate names the methods
  }
  config->speculative_tokens = params.speculative_tokens;
  config->ngram_min = params.ngram_min;
  config->ngram_max = params.ngram_max;
  config->speculative_max_running = params.speculative_max_running;
  if (params.progress != nullptr) {
    config->progress = [fn = params.progress, user = params.progress_user_data](
                           float fraction, const char* stage) { fn(fraction, stage, user); };
  }
  return config->validate();
}

Status to_sampling_params(const pvllm_sampling_params* caller, pvllm::SamplingParams* out) {
  PVLLM_RETURN_IF_ERROR(check_struct_size(caller, "request->sampling"));
  const pvllm_sampling_params params = read_struct(caller, default_sampling_params());
  const pvllm_sampling_params* in = &params;
  out->temperature = in->temperature;
  out->top_k = in->top_k;
  out->top_p = in->top_p;
  out->min_p = in->min_p;
  out->repetition_penalty = in->repetition_penalty;
  out->presence_penalty = in->presence_penalty;
  out->frequency_penalty = in->frequency_penalty;
  out->max_tokens = in->max_tokens;
  if (in->num_stop_token_ids > 0) {
    if (in->stop_token_ids == nullptr) {
      return invalid("request->sampling->stop_token_ids is NULL but num_stop_token_ids is " +
                     std::to_string(in->num_stop_token_ids));
    }
    out->stop_token_ids.assign(in->stop_token_ids, in->stop_token_ids + in->num_stop_token_ids);
  }
  if (in->num_stop > 0) {
    if (in->stop == nullptr) {
      return invalid("request->sampling->stop is NULL but num_stop is " +
                     std::to_string(in->num_stop));
    }
    for (size_t i = 0; i < in->num_stop; ++i) {
      if (in->stop[i] == nullptr) {
        return invalid("request->sampling->stop[" + std::to_string(i) + "] is NULL");
      }
      out->stop.emplace_back(in->stop[i]);
    }
  }
  out->ignore_eos = in->ignore_eos != 0;
  out->logprobs = in->logprobs;
  out->has_seed = in->has_seed != 0;
  out->seed = in->seed;
  out->n = in->n;
  if (in->prompt_logprobs < -1 || in->prompt_logprobs > 20) {
    return invalid("sampling params: prompt_logprobs must be in [-1, 20], got " +
                   std::to_string(in->prompt_logprobs));
  }
  out->prompt_logprobs = static_cast<int32_t>(in->prompt_logprobs);
  out->speculative = in->speculative != 0;
  out->beam_width = in->beam_width;
  out->length_penalty = in->length_penalty;
  out->early_stopping = static_cast<pvllm::EarlyStopping>(in->early_stopping);
  return to_constraint(*in, &out->constraint);
}

Status to_delivery(int64_t value, pvllm::Delivery* out) {
  if (value != PVLLM_DELIVERY_SHARED && value != PVLLM_DELIVERY_PER_REQUEST) {
    return invalid(
        "request->delivery must be PVLLM_DELIVERY_SHARED (0) or PVLLM_DELIVERY_PER_REQUEST (1), "
        "got " +
        std::to_string(value));
  }
  *out = static_cast<pvllm::Delivery>(value);
  return Status::Ok();
}

// The special tokens chat templates read: tokenizer_config.json's, else the
// tokenizer's own BOS and EOS (`tokenizer` may be NULL).
void fill_special_tokens(const pvllm::Tokenizer* tokenizer, pvllm::chat::ChatTemplates* templates) {
  if (tokenizer == nullptr) return;
  const auto text = [&](int32_t id) { return id < 0 ? std::string() : tokenizer->id_to_token(id); };
  templates->set_missing_special_tokens(text(tokenizer->bos_id()), text(tokenizer->eos_id()));
}

const char* format_name(pvllm::ModelFormat format) {
  switch (format) {
    case pvllm::ModelFormat::kHuggingFace:
      return "huggingface";
    case pvllm::ModelFormat::kLlama2c:
      return "llama2c";
    case pvllm::ModelFormat::kPvllm:
      return "pvllm";
    case pvllm::ModelFormat::kGguf:
      return "gguf";
  }
  return "unknown";  // GCOVR_EXCL_LINE: the switch covers every ModelFormat
}

}  // namespace pvllm::capi
