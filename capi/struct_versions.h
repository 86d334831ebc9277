// Versioned structs: the caller allocates them, they start with
// struct_size and only grow at the end (pvllm.h's conventions). These read
// and write exactly the fields a caller's struct_size covers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "capi/handles.h"

namespace pvllm::capi {

// Caller-allocated structs only grow at the end. kV1Size<T> is the size a
// struct had in ABI version 1, the smallest struct_size accepted; fields
// appended later are read from and written to a caller's struct only when
// its struct_size covers them, which read_struct / write_struct do by
// copying min(struct_size, sizeof(T)) bytes.
template <typename T>
inline constexpr size_t kV1Size = sizeof(T);
// pvllm_engine_params grew random_weights within 0.1, after ABI 1's first
// layout; pvllm_request grew delivery in 0.2, past 0.1's sizeof.
template <>
inline constexpr size_t kV1Size<pvllm_engine_params> = offsetof(pvllm_engine_params,
                                                                random_weights);
template <>
inline constexpr size_t kV1Size<pvllm_request> = offsetof(pvllm_request, delivery);
// pvllm_model_config grew rope_type and the fields after it in 0.3; the 0.2
// struct ended right after eos_token_id (all its fields are 4-byte or less).
template <>
inline constexpr size_t kV1Size<pvllm_model_config> = offsetof(pvllm_model_config, rope_type);
// pvllm_sampling_params grew prompt_logprobs and what follows in 0.5.
template <>
inline constexpr size_t kV1Size<pvllm_sampling_params> = offsetof(pvllm_sampling_params,
                                                                  prompt_logprobs);
static_assert(offsetof(pvllm_sampling_params, prompt_logprobs) ==
                  (offsetof(pvllm_sampling_params, n) + sizeof(int32_t) + alignof(int64_t) - 1) /
                      alignof(int64_t) * alignof(int64_t),
              "pvllm_sampling_params.prompt_logprobs must start where the 0.4 struct ended");
// pvllm_chat_template_params grew chat_template in 0.9; the 0.3 struct ended
// with template_name (a pointer: no tail padding).
template <>
inline constexpr size_t kV1Size<pvllm_chat_template_params> = offsetof(pvllm_chat_template_params,
                                                                       chat_template);
// pvllm_stats grew backend in 0.4.
template <>
inline constexpr size_t kV1Size<pvllm_stats> = offsetof(pvllm_stats, backend);
// pvllm_memory_estimate grew activation_bytes in 0.4.
template <>
inline constexpr size_t kV1Size<pvllm_memory_estimate> = offsetof(pvllm_memory_estimate,
                                                                  activation_bytes);
// pvllm_engine_params grew quantize in 0.10; the 0.7 struct ended with
// model_checksums (64-bit: no tail padding), so quantize starts there.
static_assert(offsetof(pvllm_engine_params, quantize) ==
                  offsetof(pvllm_engine_params, model_checksums) + sizeof(int64_t),
              "pvllm_engine_params.quantize must start where the 0.7 struct ended");
// pvllm_engine_params grew kv_cache_dtype in 0.11; the 0.10 struct ended
// with quantize (a pointer: no tail padding).
static_assert(offsetof(pvllm_engine_params, kv_cache_dtype) ==
                  offsetof(pvllm_engine_params, quantize) + sizeof(const char*),
              "pvllm_engine_params.kv_cache_dtype must start where the 0.10 struct ended");
// pvllm_sampling_params grew constraint_flags in 0.11; the 0.6 struct ended
// with num_choices (a size_t: no tail padding).
static_assert(offsetof(pvllm_sampling_params, constraint_flags) ==
                  offsetof(pvllm_sampling_params, num_choices) + sizeof(size_t),
              "pvllm_sampling_params.constraint_flags must start where the 0.6 struct ended");
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
inline std::span<const AppendedField> appended_fields<pvllm_engine_params>() {
  static constexpr AppendedField kFields[] = {
      PVLLM_APPENDED(pvllm_engine_params, random_weights),
      PVLLM_APPENDED(pvllm_engine_params, gpu_memory_utilization),
      PVLLM_APPENDED(pvllm_engine_params, dtype),
      PVLLM_APPENDED(pvllm_engine_params, enable_cuda_graphs),
      PVLLM_APPENDED(pvllm_engine_params, swap_space_bytes),
      PVLLM_APPENDED(pvllm_engine_params, preemption_mode),
      PVLLM_APPENDED(pvllm_engine_params, model_checksums),
      PVLLM_APPENDED(pvllm_engine_params, quantize),
      PVLLM_APPENDED(pvllm_engine_params, kv_cache_dtype)};
  return kFields;
}
template <>
inline std::span<const AppendedField> appended_fields<pvllm_sampling_params>() {
  static constexpr AppendedField kFields[] = {
      PVLLM_APPENDED(pvllm_sampling_params, prompt_logprobs),
      PVLLM_APPENDED(pvllm_sampling_params, beam_width),
      PVLLM_APPENDED(pvllm_sampling_params, length_penalty),
      PVLLM_APPENDED(pvllm_sampling_params, early_stopping),
      PVLLM_APPENDED(pvllm_sampling_params, constraint_kind),
      PVLLM_APPENDED(pvllm_sampling_params, constraint),
      PVLLM_APPENDED(pvllm_sampling_params, choices),
      PVLLM_APPENDED(pvllm_sampling_params, num_choices),
      PVLLM_APPENDED(pvllm_sampling_params, constraint_flags)};
  return kFields;
}
template <>
inline std::span<const AppendedField> appended_fields<pvllm_request>() {
  static constexpr AppendedField kFields[] = {PVLLM_APPENDED(pvllm_request, delivery),
                                              PVLLM_APPENDED(pvllm_request, on_output),
                                              PVLLM_APPENDED(pvllm_request, on_output_user_data),
                                              PVLLM_APPENDED(pvllm_request, add_special_tokens)};
  return kFields;
}
template <>
inline std::span<const AppendedField> appended_fields<pvllm_chat_template_params>() {
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

template <typename T>
T zeroed_struct() {
  T t;
  std::memset(&t, 0, sizeof(t));
  t.struct_size = sizeof(t);
  return t;
}

}  // namespace pvllm::capi
