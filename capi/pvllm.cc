// The C ABI over pvllm::Engine. Every entry point runs its body through
// guard(), so no C++ exception crosses the boundary: std::bad_alloc becomes
// OUT_OF_MEMORY, anything else INTERNAL. Failures reach the caller as a
// pvllm_error object through the last out parameter, never through
// thread-local state, so the message belongs to the call that failed.
// Out-parameters are reset first thing (handles to NULL, ids and counts to
// 0), so they hold the same values after every failure, whatever failed.
// Output events reach callers through the engine's EventRouter
// (event_router.h): per request or engine-wide.
#include "pvllm/pvllm.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "capi/event_router.h"
#include "capi/handle_registry.h"
#include "core/base/log.h"
#include "core/base/status.h"
#include "core/base/tensor.h"
#include "core/chat/chat_template.h"
#include "core/engine/engine.h"
#include "core/model/model.h"
#include "core/model/model_files.h"
#include "core/model/random_model.h"
#include "core/sample/sampling_params.h"
#include "core/tokenizer/tokenizer.h"
#include "kernels/cpu/isa.h"

using pvllm::Status;

// Every handle starts with a magic value (see capi/handle_registry.h) and
// is known to its kind's registry from creation until destruction.
struct pvllm_error {
  static constexpr uint64_t kMagic = 0x7076657272303031ULL;
  pvllm::HandleMagic magic{kMagic};
  pvllm_status status;
  std::string message;
};

// The router is declared after the engine so that it is destroyed first.
struct pvllm_engine {
  static constexpr uint64_t kMagic = 0x7076656e67303031ULL;
  pvllm::HandleMagic magic{kMagic};
  std::unique_ptr<pvllm::Engine> engine;
  std::unique_ptr<pvllm::EventRouter> router;
  // The model folder's chat templates, read at create; a folder that could
  // not be read keeps the reason, for pvllm_apply_chat_template to report.
  pvllm::chat::ChatTemplates chat_templates;
  Status chat_templates_status;
};

// Owns every byte its pvllm_output entries point to. The backing vectors
// are filled completely before any pointer into them is taken, so the
// pointers stay valid until the batch is freed.
struct pvllm_output_batch {
  static constexpr uint64_t kMagic = 0x7076626174303031ULL;
  pvllm::HandleMagic magic{kMagic};
  std::vector<pvllm::Output> events;
  std::vector<pvllm_output> outputs;           // [events.size()]
  std::vector<pvllm_token_logprobs> logprobs;  // all events' tokens, concatenated
  std::vector<pvllm_logprob> top;              // all tokens' alternatives, concatenated
};

// A model's tokenizer and chat templates without its weights; the strings
// pvllm_tokenizer_get_info hands out live here.
struct pvllm_tokenizer {
  static constexpr uint64_t kMagic = 0x7076746f6b303031ULL;
  pvllm::HandleMagic magic{kMagic};
  std::unique_ptr<pvllm::Tokenizer> tokenizer;
  pvllm::chat::ChatTemplates chat_templates;
  Status chat_templates_status;
  std::string kind;
  std::string source;
  std::string bos_token;
  std::string eos_token;
};

struct pvllm_model_info {
  static constexpr uint64_t kMagic = 0x7076696e66303031ULL;
  pvllm::HandleMagic magic{kMagic};
  pvllm::ModelSummary summary;
};

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

Status invalid(std::string message) { return pvllm::InvalidArgument(std::move(message)); }

Status null_argument(const char* name) { return invalid(std::string(name) + " is NULL"); }

// The process-wide registries of live handles, never destroyed (a handle
// may outlive static destruction).
template <typename T>
pvllm::HandleRegistry<T>& registry() {
  static auto* live = new pvllm::HandleRegistry<T>();
  return *live;
}

// Takes ownership of a new handle: registers it and hands it out.
template <typename T>
T* publish_handle(std::unique_ptr<T> handle) {
  registry<T>().add(handle.get());
  return handle.release();
}

// Deletes a live handle; NULL, a second release and a foreign pointer do
// nothing.
template <typename T>
void release_handle(T* handle) {
  if (handle == nullptr || !registry<T>().remove(handle)) return;
  try {
    delete handle;
  } catch (...) {
    // A destructor that throws is a bug in the core; swallow it rather than
    // let it cross the ABI.
  }
}

// OK for a live handle; INVALID_ARGUMENT naming `name` for NULL, and for a
// destroyed, freed or foreign pointer.
template <typename T>
Status check_handle(const T* handle, const char* name, const char* type) {
  if (handle == nullptr) return null_argument(name);
  if (!registry<T>().is_live(handle)) {
    return invalid(std::string(name) + " is not a live " + type +
                   " (already destroyed or freed, or not a handle of that kind)");
  }
  return Status::Ok();
}

Status check_engine(const pvllm_engine* engine) {
  return check_handle(engine, "engine", "pvllm_engine");
}

// check_engine, and that request_id is not another engine's.
Status check_engine_and_request(const pvllm_engine* engine, uint64_t request_id) {
  PVLLM_RETURN_IF_ERROR(check_engine(engine));
  if (engine->engine->is_other_engines_request_id(request_id)) {
    return invalid("request_id " + std::to_string(request_id) +
                   " was returned by another engine's pvllm_submit");
  }
  return Status::Ok();
}

// The special tokens chat templates read: tokenizer_config.json's, else the
// tokenizer's own BOS and EOS (`tokenizer` may be NULL).
void fill_special_tokens(const pvllm::Tokenizer* tokenizer, pvllm::chat::ChatTemplates* templates) {
  if (tokenizer == nullptr) return;
  const auto text = [&](int32_t id) { return id < 0 ? std::string() : tokenizer->id_to_token(id); };
  templates->set_missing_special_tokens(text(tokenizer->bos_id()), text(tokenizer->eos_id()));
}

Status check_tokenizer(const pvllm_tokenizer* tokenizer) {
  return check_handle(tokenizer, "tokenizer", "pvllm_tokenizer");
}

Status check_info(const pvllm_model_info* info) {
  return check_handle(info, "info", "pvllm_model_info");
}

// Hands a failed status to the caller as a new error object; sets *error to
// NULL on success. When even the error cannot be allocated, *error stays
// NULL and only the status tells what happened.
pvllm_status deliver(const Status& status, pvllm_error** error) {
  const auto code = static_cast<pvllm_status>(status.code());
  if (error == nullptr) return code;
  *error = nullptr;
  if (status.ok()) return code;
  try {
    auto made = std::make_unique<pvllm_error>();
    made->status = code;
    made->message = status.message();
    *error = publish_handle(std::move(made));
  } catch (...) {
    *error = nullptr;
  }
  return code;
}

// Runs `body` (returning Status) and turns whatever it throws into a status.
template <typename Body>
pvllm_status guard(pvllm_error** error, Body&& body) noexcept {
  if (error != nullptr) *error = nullptr;
  try {
    return deliver(body(), error);
  } catch (const std::bad_alloc&) {
    return deliver(pvllm::OutOfMemory("out of memory"), error);
  } catch (const std::exception& e) {
    return deliver(pvllm::Internal(std::string("internal error: ") + e.what()), error);
  } catch (...) {
    return deliver(pvllm::Internal("internal error: unknown exception"), error);
  }
}

// Caller-allocated structs only grow at the end. kV1Size<T> is the size a
// struct had in ABI version 1, the smallest struct_size accepted; fields
// appended later are read from and written to a caller's struct only when
// its struct_size covers them, which read_struct / write_struct do by
// copying min(struct_size, sizeof(T)) bytes.
template <typename T>
constexpr size_t kV1Size = sizeof(T);
// pvllm_engine_params grew random_weights within 0.1, after ABI 1's first
// layout; pvllm_request grew delivery in 0.2, past 0.1's sizeof.
template <>
constexpr size_t kV1Size<pvllm_engine_params> = offsetof(pvllm_engine_params, random_weights);
template <>
constexpr size_t kV1Size<pvllm_request> = offsetof(pvllm_request, delivery);
// pvllm_model_config grew rope_type and the fields after it in 0.3; the 0.2
// struct ended right after eos_token_id (all its fields are 4-byte or less).
template <>
constexpr size_t kV1Size<pvllm_model_config> = offsetof(pvllm_model_config, rope_type);
// pvllm_sampling_params grew prompt_logprobs and what follows in 0.5.
template <>
constexpr size_t kV1Size<pvllm_sampling_params> = offsetof(pvllm_sampling_params, prompt_logprobs);
static_assert(offsetof(pvllm_sampling_params, prompt_logprobs) ==
                  (offsetof(pvllm_sampling_params, n) + sizeof(int32_t) + alignof(int64_t) - 1) /
                      alignof(int64_t) * alignof(int64_t),
              "pvllm_sampling_params.prompt_logprobs must start where the 0.4 struct ended");
// pvllm_chat_template_params grew chat_template in 0.9; the 0.3 struct ended
// with template_name (a pointer: no tail padding).
template <>
constexpr size_t kV1Size<pvllm_chat_template_params> = offsetof(pvllm_chat_template_params,
                                                                chat_template);
// pvllm_stats grew backend in 0.4.
template <>
constexpr size_t kV1Size<pvllm_stats> = offsetof(pvllm_stats, backend);
// pvllm_memory_estimate grew activation_bytes in 0.4.
template <>
constexpr size_t kV1Size<pvllm_memory_estimate> = offsetof(pvllm_memory_estimate, activation_bytes);
static_assert(offsetof(pvllm_model_config, rope_type) ==
                  offsetof(pvllm_model_config, eos_token_id) + sizeof(int32_t),
              "pvllm_model_config.rope_type must start where the 0.2 struct ended");
// The 0.1 struct was pointer-aligned, so its sizeof is the first multiple
// of that alignment after `priority`: delivery starts exactly there.
static_assert(offsetof(pvllm_request, delivery) % alignof(void*) == 0 &&
                  offsetof(pvllm_request, delivery) - offsetof(pvllm_request, priority) <=
                      alignof(void*),
              "pvllm_request.delivery must start where the 0.1 struct ended");

// Larger sizes than this are garbage, not a newer header.
constexpr size_t kMaxStructSize = 1 << 16;

// The fields appended after ABI 1 to a struct the library reads. Every
// older header's sizeof ends at a field boundary; a struct_size that ends
// inside one of these would have read_struct take a torn pointer or value.
struct AppendedField {
  const char* name;
  size_t offset;
  size_t size;
};
#define PVLLM_APPENDED(T, f) \
  AppendedField { #f, offsetof(T, f), sizeof(T::f) }
template <typename T>
std::span<const AppendedField> appended_fields() {
  return {};
}
template <>
std::span<const AppendedField> appended_fields<pvllm_engine_params>() {
  static constexpr AppendedField kFields[] = {
      PVLLM_APPENDED(pvllm_engine_params, random_weights),
      PVLLM_APPENDED(pvllm_engine_params, gpu_memory_utilization),
      PVLLM_APPENDED(pvllm_engine_params, dtype),
      PVLLM_APPENDED(pvllm_engine_params, enable_cuda_graphs),
      PVLLM_APPENDED(pvllm_engine_params, swap_space_bytes),
      PVLLM_APPENDED(pvllm_engine_params, preemption_mode),
      PVLLM_APPENDED(pvllm_engine_params, model_checksums)};
  return kFields;
}
template <>
std::span<const AppendedField> appended_fields<pvllm_sampling_params>() {
  static constexpr AppendedField kFields[] = {
      PVLLM_APPENDED(pvllm_sampling_params, prompt_logprobs),
      PVLLM_APPENDED(pvllm_sampling_params, beam_width),
      PVLLM_APPENDED(pvllm_sampling_params, length_penalty),
      PVLLM_APPENDED(pvllm_sampling_params, early_stopping),
      PVLLM_APPENDED(pvllm_sampling_params, constraint_kind),
      PVLLM_APPENDED(pvllm_sampling_params, constraint),
      PVLLM_APPENDED(pvllm_sampling_params, choices),
      PVLLM_APPENDED(pvllm_sampling_params, num_choices)};
  return kFields;
}
template <>
std::span<const AppendedField> appended_fields<pvllm_request>() {
  static constexpr AppendedField kFields[] = {PVLLM_APPENDED(pvllm_request, delivery),
                                              PVLLM_APPENDED(pvllm_request, on_output),
                                              PVLLM_APPENDED(pvllm_request, on_output_user_data),
                                              PVLLM_APPENDED(pvllm_request, add_special_tokens)};
  return kFields;
}
template <>
std::span<const AppendedField> appended_fields<pvllm_chat_template_params>() {
  static constexpr AppendedField kFields[] = {
      PVLLM_APPENDED(pvllm_chat_template_params, chat_template)};
  return kFields;
}
#undef PVLLM_APPENDED

template <typename T>
Status check_struct_size(const T* s, const char* name) {
  if (s->struct_size < kV1Size<T> || s->struct_size > kMaxStructSize) {
    return invalid(std::string(name) + "->struct_size is " + std::to_string(s->struct_size) +
                   ", expected at least " + std::to_string(kV1Size<T>) +
                   " (fill the struct with the matching *_init(ptr, sizeof *ptr) first)");
  }
  for (const AppendedField& f : appended_fields<T>()) {
    if (s->struct_size > f.offset && s->struct_size < f.offset + f.size) {
      return invalid(std::string(name) + "->struct_size is " + std::to_string(s->struct_size) +
                     ", which ends inside field " + f.name +
                     " (fill the struct with the matching *_init(ptr, sizeof *ptr) first)");
    }
  }
  return Status::Ok();
}

// The caller's struct as this library sees it: the fields its struct_size
// covers, defaults for the rest.
template <typename T>
T read_struct(const T* in, const T& defaults) {
  T out = defaults;
  std::memcpy(&out, in, std::min<size_t>(in->struct_size, sizeof(T)));
  return out;
}

// Writes `value` into a caller's struct, only the bytes its struct_size
// covers, keeping its struct_size.
template <typename T>
void write_struct(T* out, const T& value) {
  const uint32_t size = out->struct_size;
  std::memcpy(out, &value, std::min<size_t>(size, sizeof(T)));
  out->struct_size = size;
}

// *_init: the defaults for the fields that fit in the caller's size, zero
// beyond the fields this library knows, and that size in struct_size.
template <typename T>
void init_struct(T* out, size_t struct_size, const T& defaults) {
  if (out == nullptr || struct_size < sizeof(uint32_t) || struct_size > kMaxStructSize) return;
  const size_t known = std::min(struct_size, sizeof(T));
  std::memcpy(out, &defaults, known);
  if (struct_size > known) {
    std::memset(reinterpret_cast<unsigned char*>(out) + known, 0, struct_size - known);
  }
  out->struct_size = static_cast<uint32_t>(struct_size);
}

// Copies `value` and its NUL into a caller's buffer of `capacity` bytes;
// *out_len = its length, also when it does not fit (BUFFER_TOO_SMALL).
// Text crossing the ABI is NUL-terminated and holds no NUL of its own: a
// NUL byte (the byte token <0x00>, a "\u0000" in chat JSON) becomes U+FFFD,
// so strlen(text) == text_len always holds. Token ids are never changed.
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
  return p;
}

template <typename T>
T zeroed_struct() {
  T t;
  std::memset(&t, 0, sizeof(t));
  t.struct_size = sizeof(t);
  return t;
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
  if (params.progress != nullptr) {
    config->progress = [fn = params.progress, user = params.progress_user_data](
                           float fraction, const char* stage) { fn(fraction, stage, user); };
  }
  return config->validate();
}

// pvllm_sampling_params' constraint fields (since 0.6) as a ConstraintSpec.
Status to_constraint(const pvllm_sampling_params& in, pvllm::structured::ConstraintSpec* out) {
  using pvllm::structured::ConstraintKind;
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

// Queues the request in the engine; the caller registers it with the router.
Status submit_to_engine(pvllm_engine* engine, const pvllm_request* request,
                        const pvllm::SamplingParams& sampling, uint64_t* out_request_id) {
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
                                       out_request_id, request->add_special_tokens != 0);
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
  return engine->engine->submit_tokens(std::move(ids), sampling, request->priority, out_request_id);
}

pvllm::OutputHandler output_handler(pvllm_output_callback fn, void* user_data);

Status submit(pvllm_engine* engine, const pvllm_request* caller, uint64_t* out_request_id) {
  if (out_request_id != nullptr) *out_request_id = 0;
  PVLLM_RETURN_IF_ERROR(check_engine(engine));
  if (caller == nullptr) return null_argument("request");
  if (out_request_id == nullptr) return null_argument("out_request_id");
  PVLLM_RETURN_IF_ERROR(check_struct_size(caller, "request"));
  const pvllm_request defaults = default_request();
  const pvllm_request request = read_struct(caller, defaults);
  pvllm::Delivery delivery = pvllm::Delivery::kShared;
  PVLLM_RETURN_IF_ERROR(to_delivery(request.delivery, &delivery));
  pvllm::SamplingParams sampling;
  if (request.sampling != nullptr) {
    PVLLM_RETURN_IF_ERROR(to_sampling_params(request.sampling, &sampling));
  }
  uint64_t id = 0;
  PVLLM_RETURN_IF_ERROR(submit_to_engine(engine, &request, sampling, &id));
  *out_request_id = id;
  if (request.on_output != nullptr) {
    engine->router->add_request(id, pvllm::Delivery::kHandler,
                                output_handler(request.on_output, request.on_output_user_data));
  } else {
    engine->router->add_request(id, delivery);
  }
  return Status::Ok();
}

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

const char* format_name(pvllm::ModelFormat format) {
  switch (format) {
    case pvllm::ModelFormat::kHuggingFace:
      return "huggingface";
    case pvllm::ModelFormat::kLlama2c:
      return "llama2c";
    case pvllm::ModelFormat::kPvllm:
      return "pvllm";
  }
  return "unknown";  // GCOVR_EXCL_LINE: the switch covers every ModelFormat
}

// Copies a string into a fixed char array, truncating, always NUL-terminated.
template <size_t N>
void copy_fixed(char (&dst)[N], const std::string& src) {
  const size_t n = std::min(src.size(), N - 1);
  std::memcpy(dst, src.data(), n);
  std::memset(dst + n, 0, N - n);
}

#define PVLLM_STR2(x) #x
#define PVLLM_STR(x) PVLLM_STR2(x)

}  // namespace

extern "C" {

/* ---------------------------------------------------------------- versions */

uint32_t pvllm_version_number(void) { return PVLLM_VERSION_NUMBER; }

const char* pvllm_cpu_isa(void) { return pvllm::cpu::cpu_isa_name(pvllm::cpu::active_cpu_isa()); }

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
    handle->router = std::make_unique<pvllm::EventRouter>(handle->engine.get());
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
    return engine->router->detach(request_id);
  });
}

pvllm_status pvllm_step(pvllm_engine* engine, int32_t* out_num_unfinished, pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_num_unfinished != nullptr) *out_num_unfinished = 0;
    PVLLM_RETURN_IF_ERROR(check_engine(engine));
    Status status = engine->engine->step();
    // Whatever the step's status, what it made reaches pollers and waiters.
    engine->router->publish();
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
    engine->router->take_shared(max_events == 0 ? SIZE_MAX : max_events, &batch->events);
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
    PVLLM_RETURN_IF_ERROR(engine->router->take_request(
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
    return engine->router->wait(request_id, timeout_ms);
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
    write_struct(out_stats, out);
    return Status::Ok();
  });
}

/* ---------------------------------------------------------------- tokenizer */

namespace {

// What pvllm_tokenize and pvllm_tokenizer_encode share: `tokenizer` may be
// NULL (an engine without one, a handle of chat templates alone), which is
// TOKENIZER_ERROR saying `no_tokenizer`.
Status encode_into(const pvllm::Tokenizer* tokenizer, const char* text, uint8_t add_special,
                   int32_t* ids, size_t capacity, size_t* out_num_ids, const char* no_tokenizer) {
  if (text == nullptr) return null_argument("text");
  if (out_num_ids == nullptr) return null_argument("out_num_ids");
  if (ids == nullptr && capacity > 0) return invalid("ids is NULL but capacity is > 0");
  if (tokenizer == nullptr) return pvllm::Status(pvllm::StatusCode::kTokenizerError, no_tokenizer);
  std::vector<int32_t> encoded;
  PVLLM_RETURN_IF_ERROR(tokenizer->encode(text, add_special != 0, &encoded));
  *out_num_ids = encoded.size();
  if (encoded.size() > capacity) {
    return pvllm::Status(pvllm::StatusCode::kBufferTooSmall,
                         "ids needs " + std::to_string(encoded.size()) + " entries, capacity is " +
                             std::to_string(capacity));
  }
  std::copy(encoded.begin(), encoded.end(), ids);
  return Status::Ok();
}

// What pvllm_detokenize and pvllm_tokenizer_decode share.
Status decode_into(const pvllm::Tokenizer* tokenizer, const int32_t* ids, size_t num_ids,
                   char* text, size_t capacity, size_t* out_len, const char* no_tokenizer) {
  if (ids == nullptr && num_ids > 0) return invalid("ids is NULL but num_ids is > 0");
  if (text == nullptr && capacity > 0) return invalid("text is NULL but capacity is > 0");
  if (out_len == nullptr) return null_argument("out_len");
  if (tokenizer == nullptr) return pvllm::Status(pvllm::StatusCode::kTokenizerError, no_tokenizer);
  std::vector<int32_t> input(ids, ids + num_ids);
  for (size_t i = 0; i < input.size(); ++i) {
    if (!tokenizer->is_valid_id(input[i])) {
      return invalid("ids[" + std::to_string(i) + "] = " + std::to_string(input[i]) +
                     " is outside the vocabulary [0, " + std::to_string(tokenizer->vocab_size()) +
                     ")");
    }
  }
  std::string decoded;
  PVLLM_RETURN_IF_ERROR(tokenizer->decode(input, &decoded));
  return copy_text(std::move(decoded), text, capacity, out_len);
}

// What pvllm_apply_chat_template and pvllm_tokenizer_apply_chat_template
// share: `loaded` says whether the model's templates could be read.
Status render_chat_template(const pvllm::chat::ChatTemplates& templates, const Status& loaded,
                            const pvllm_chat_template_params* params, char* text, size_t capacity,
                            size_t* out_len) {
  if (params == nullptr) return null_argument("params");
  if (out_len == nullptr) return null_argument("out_len");
  if (text == nullptr && capacity > 0) return invalid("text is NULL but capacity is > 0");
  PVLLM_RETURN_IF_ERROR(check_struct_size(params, "params"));
  const pvllm_chat_template_params p = read_struct(params, default_chat_template_params());
  pvllm::chat::ChatRequest request;
  PVLLM_RETURN_IF_ERROR(pvllm::chat::parse_chat_request(p.messages_json, p.tools_json,
                                                        p.extra_context_json, &request));
  request.add_generation_prompt = p.add_generation_prompt != 0;
  if (p.template_name != nullptr) request.template_name = p.template_name;
  PVLLM_RETURN_IF_ERROR(loaded);
  std::string rendered;
  if (p.chat_template != nullptr) {
    if (p.chat_template[0] == '\0') return invalid("params->chat_template is empty");
    request.template_name.clear();
    PVLLM_RETURN_IF_ERROR(templates.with_template(p.chat_template).apply(request, &rendered));
  } else {
    PVLLM_RETURN_IF_ERROR(templates.apply(request, &rendered));
  }
  return copy_text(std::move(rendered), text, capacity, out_len);
}

}  // namespace

pvllm_status pvllm_tokenize(pvllm_engine* engine, const char* text, uint8_t add_bos, int32_t* ids,
                            size_t capacity, size_t* out_num_ids, pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_num_ids != nullptr) *out_num_ids = 0;
    PVLLM_RETURN_IF_ERROR(check_engine(engine));
    return encode_into(engine->engine->tokenizer(), text, add_bos, ids, capacity, out_num_ids,
                       "the engine has no tokenizer");
  });
}

pvllm_status pvllm_detokenize(pvllm_engine* engine, const int32_t* ids, size_t num_ids, char* text,
                              size_t capacity, size_t* out_len, pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_len != nullptr) *out_len = 0;
    PVLLM_RETURN_IF_ERROR(check_engine(engine));
    return decode_into(engine->engine->tokenizer(), ids, num_ids, text, capacity, out_len,
                       "the engine has no tokenizer");
  });
}

pvllm_status pvllm_tokenizer_open(const char* model_path, pvllm_tokenizer** out_tokenizer,
                                  pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_tokenizer == nullptr) return null_argument("out_tokenizer");
    *out_tokenizer = nullptr;
    if (model_path == nullptr) return null_argument("model_path");
    auto handle = std::make_unique<pvllm_tokenizer>();
    pvllm::ModelFiles files;
    PVLLM_RETURN_IF_ERROR(pvllm::resolve_model_files(model_path, &files));
    handle->chat_templates_status =
        pvllm::chat::ChatTemplates::load(model_path, &handle->chat_templates);
    const bool chat_only = files.kind == pvllm::ModelFiles::Kind::kTokenizerOnly &&
                           files.tokenizer.empty() && handle->chat_templates_status.ok();
    if (!chat_only) {
      PVLLM_RETURN_IF_ERROR(pvllm::Tokenizer::load(model_path, &handle->tokenizer));
      handle->source =
          files.kind == pvllm::ModelFiles::Kind::kPvllm ? files.weights : files.tokenizer;
      handle->kind = handle->tokenizer->kind();
    }
    fill_special_tokens(handle->tokenizer.get(), &handle->chat_templates);
    handle->bos_token = handle->chat_templates.bos_token();
    handle->eos_token = handle->chat_templates.eos_token();
    *out_tokenizer = publish_handle(std::move(handle));
    return Status::Ok();
  });
}

void pvllm_tokenizer_free(pvllm_tokenizer* tokenizer) { release_handle(tokenizer); }

pvllm_status pvllm_tokenizer_encode(const pvllm_tokenizer* tokenizer, const char* text,
                                    uint8_t add_special_tokens, int32_t* ids, size_t capacity,
                                    size_t* out_num_ids, pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_num_ids != nullptr) *out_num_ids = 0;
    PVLLM_RETURN_IF_ERROR(check_tokenizer(tokenizer));
    return encode_into(tokenizer->tokenizer.get(), text, add_special_tokens, ids, capacity,
                       out_num_ids, "the tokenizer handle holds chat templates only");
  });
}

pvllm_status pvllm_tokenizer_decode(const pvllm_tokenizer* tokenizer, const int32_t* ids,
                                    size_t num_ids, char* text, size_t capacity, size_t* out_len,
                                    pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_len != nullptr) *out_len = 0;
    PVLLM_RETURN_IF_ERROR(check_tokenizer(tokenizer));
    return decode_into(tokenizer->tokenizer.get(), ids, num_ids, text, capacity, out_len,
                       "the tokenizer handle holds chat templates only");
  });
}

pvllm_status pvllm_tokenizer_apply_chat_template(const pvllm_tokenizer* tokenizer,
                                                 const pvllm_chat_template_params* params,
                                                 char* text, size_t capacity, size_t* out_len,
                                                 pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_len != nullptr) *out_len = 0;
    PVLLM_RETURN_IF_ERROR(check_tokenizer(tokenizer));
    return render_chat_template(tokenizer->chat_templates, tokenizer->chat_templates_status, params,
                                text, capacity, out_len);
  });
}

void pvllm_tokenizer_info_init(pvllm_tokenizer_info* info, size_t struct_size) {
  init_struct(info, struct_size, default_tokenizer_info());
}

pvllm_status pvllm_tokenizer_get_info(const pvllm_tokenizer* tokenizer,
                                      pvllm_tokenizer_info* out_info, pvllm_error** error) {
  return guard(error, [&]() -> Status {
    PVLLM_RETURN_IF_ERROR(check_tokenizer(tokenizer));
    if (out_info == nullptr) return null_argument("out_info");
    PVLLM_RETURN_IF_ERROR(check_struct_size(out_info, "out_info"));
    pvllm_tokenizer_info info = default_tokenizer_info();
    info.bos_token = tokenizer->bos_token.c_str();
    info.eos_token = tokenizer->eos_token.c_str();
    info.kind = tokenizer->kind.c_str();
    info.source = tokenizer->source.c_str();
    if (const pvllm::Tokenizer* t = tokenizer->tokenizer.get(); t != nullptr) {
      info.vocab_size = t->vocab_size();
      info.bos_id = t->bos_id();
      info.eos_id = t->eos_id();
      std::vector<int32_t> probe;
      info.adds_bos = t->bos_id() >= 0 && t->encode("a", true, &probe).ok() && !probe.empty() &&
                              probe.front() == t->bos_id()
                          ? 1
                          : 0;
    }
    info.has_chat_template =
        tokenizer->chat_templates_status.ok() && !tokenizer->chat_templates.empty() ? 1 : 0;
    write_struct(out_info, info);
    return Status::Ok();
  });
}

/* ---------------------------------------------------------------- chat templates */

void pvllm_chat_template_params_init(pvllm_chat_template_params* params, size_t struct_size) {
  init_struct(params, struct_size, default_chat_template_params());
}

pvllm_status pvllm_apply_chat_template(pvllm_engine* engine,
                                       const pvllm_chat_template_params* params, char* text,
                                       size_t capacity, size_t* out_len, pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_len != nullptr) *out_len = 0;
    PVLLM_RETURN_IF_ERROR(check_engine(engine));
    return render_chat_template(engine->chat_templates, engine->chat_templates_status, params, text,
                                capacity, out_len);
  });
}

/* ---------------------------------------------------------------- models */

void pvllm_model_config_init(pvllm_model_config* config, size_t struct_size) {
  init_struct(config, struct_size, zeroed_struct<pvllm_model_config>());
}

pvllm_status pvllm_model_inspect(const char* model_path, pvllm_model_info** out_info,
                                 pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_info != nullptr) *out_info = nullptr;
    if (model_path == nullptr) return null_argument("model_path");
    if (out_info == nullptr) return null_argument("out_info");
    if (model_path[0] == '\0') return invalid("model_path is empty");
    auto info = std::make_unique<pvllm_model_info>();
    PVLLM_RETURN_IF_ERROR(pvllm::inspect_model(model_path, &info->summary));
    *out_info = publish_handle(std::move(info));
    return Status::Ok();
  });
}

pvllm_status pvllm_model_inspect_random(const char* shape, pvllm_model_info** out_info,
                                        pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_info != nullptr) *out_info = nullptr;
    if (shape == nullptr) return null_argument("shape");
    if (out_info == nullptr) return null_argument("out_info");
    auto info = std::make_unique<pvllm_model_info>();
    PVLLM_RETURN_IF_ERROR(pvllm::inspect_random_model(shape, pvllm::DType::kBF16, &info->summary));
    *out_info = publish_handle(std::move(info));
    return Status::Ok();
  });
}

pvllm_status pvllm_model_info_config(const pvllm_model_info* info, pvllm_model_config* out_config,
                                     pvllm_error** error) {
  return guard(error, [&]() -> Status {
    PVLLM_RETURN_IF_ERROR(check_info(info));
    if (out_config == nullptr) return null_argument("out_config");
    PVLLM_RETURN_IF_ERROR(check_struct_size(out_config, "out_config"));
    pvllm_model_config out = zeroed_struct<pvllm_model_config>();
    const pvllm::ModelConfig& c = info->summary.config;
    copy_fixed(out.architecture, c.architecture);
    copy_fixed(out.format, format_name(info->summary.format));
    out.hidden_size = c.hidden_size;
    out.intermediate_size = c.intermediate_size;
    out.num_layers = c.num_layers;
    out.num_heads = c.num_heads;
    out.num_kv_heads = c.num_kv_heads;
    out.head_dim = c.head_dim;
    out.vocab_size = c.vocab_size;
    out.max_position_embeddings = c.max_position_embeddings;
    out.rms_norm_eps = c.rms_norm_eps;
    out.rope_theta = c.rope_theta;
    out.tie_word_embeddings = c.tie_word_embeddings ? 1 : 0;
    out.bos_token_id = c.bos_token_id;
    out.eos_token_id = c.eos_token_id;
    const pvllm::RopeScaling& rs = c.rope_scaling;
    out.rope_type = static_cast<int32_t>(rs.type);
    using Rope = pvllm::RopeScaling::Type;
    if (rs.type != Rope::kNone) out.rope_factor = rs.factor;
    if (rs.type == Rope::kLlama3) {
      out.rope_low_freq_factor = rs.low_freq_factor;
      out.rope_high_freq_factor = rs.high_freq_factor;
    }
    if (rs.type == Rope::kLlama3 || rs.type == Rope::kDynamic) {
      out.rope_original_max_position_embeddings = rs.original_max_position_embeddings;
    }
    out.sliding_window = c.sliding_window;
    out.qkv_bias = c.qkv_bias ? 1 : 0;
    out.o_bias = c.o_bias ? 1 : 0;
    out.qk_norm = c.qk_norm ? 1 : 0;
    out.num_stop_token_ids = static_cast<int32_t>(c.extra_stop_token_ids.size());
    constexpr size_t kMaxStops = sizeof(out.stop_token_ids) / sizeof(out.stop_token_ids[0]);
    for (size_t i = 0; i < c.extra_stop_token_ids.size() && i < kMaxStops; ++i) {
      out.stop_token_ids[i] = c.extra_stop_token_ids[i];
    }
    write_struct(out_config, out);
    return Status::Ok();
  });
}

size_t pvllm_model_info_num_tensors(const pvllm_model_info* info) {
  return registry<pvllm_model_info>().is_live(info) ? info->summary.tensors.size() : 0;
}

pvllm_status pvllm_model_info_tensor(const pvllm_model_info* info, size_t index,
                                     pvllm_tensor_info* out_tensor, pvllm_error** error) {
  return guard(error, [&]() -> Status {
    PVLLM_RETURN_IF_ERROR(check_info(info));
    if (out_tensor == nullptr) return null_argument("out_tensor");
    const auto& tensors = info->summary.tensors;
    if (index >= tensors.size()) {
      return invalid("index " + std::to_string(index) + " is out of range; the model has " +
                     std::to_string(tensors.size()) + " tensors");
    }
    const pvllm::ModelSummary::TensorInfo& t = tensors[index];
    constexpr size_t kMaxDims = sizeof(out_tensor->shape) / sizeof(out_tensor->shape[0]);
    // Unreachable today: the loaders accept only the 1-D and 2-D shapes an
    // architecture dictates; kept for a future one. GCOVR_EXCL_START
    if (t.shape.size() > kMaxDims) {
      return pvllm::Unsupported("tensor " + t.name + " has " + std::to_string(t.shape.size()) +
                                " dimensions; pvllm_tensor_info holds at most " +
                                std::to_string(kMaxDims));
    }  // GCOVR_EXCL_STOP
    std::memset(out_tensor, 0, sizeof(*out_tensor));
    out_tensor->name = t.name.c_str();
    out_tensor->dtype = pvllm::dtype_name(t.dtype);
    out_tensor->num_dims = static_cast<int32_t>(t.shape.size());
    std::copy(t.shape.begin(), t.shape.end(), out_tensor->shape);
    return Status::Ok();
  });
}

void pvllm_model_info_free(pvllm_model_info* info) { release_handle(info); }

void pvllm_memory_estimate_init(pvllm_memory_estimate* estimate, size_t struct_size) {
  init_struct(estimate, struct_size, zeroed_struct<pvllm_memory_estimate>());
}

pvllm_status pvllm_estimate_memory(const pvllm_engine_params* params,
                                   pvllm_memory_estimate* out_estimate, pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_estimate == nullptr) return null_argument("out_estimate");
    PVLLM_RETURN_IF_ERROR(check_struct_size(out_estimate, "out_estimate"));
    pvllm::EngineConfig config;
    PVLLM_RETURN_IF_ERROR(to_engine_config(params, &config));
    pvllm::MemoryEstimate e;
    pvllm_memory_estimate out = zeroed_struct<pvllm_memory_estimate>();
    PVLLM_RETURN_IF_ERROR(pvllm::estimate_memory(config, &e));
    out.weight_bytes = e.weight_bytes;
    out.kv_bytes_per_block = e.kv_bytes_per_block;
    out.num_blocks = e.num_blocks;
    out.kv_bytes_total = e.kv_bytes_total;
    out.max_tokens_in_cache = e.max_tokens_in_cache;
    out.activation_bytes = e.activation_bytes;
    out.swap_bytes = e.swap_bytes;
    write_struct(out_estimate, out);
    return Status::Ok();
  });
}

}  // extern "C"
