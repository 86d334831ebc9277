// Conversions between the C ABI's structs and the core's types: the
// defaults *_init writes, the checks and translations of parameter structs,
// the text the library hands out, and names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>

#include "capi/handles.h"
#include "core/engine/engine_config.h"
#include "core/sample/sampling_params.h"

namespace pvllm::capi {

// U+FFFD in place of each NUL byte (see copy_text).
void replace_nul(std::string* value);

// Copies `value` and its NUL into a caller's buffer of `capacity` bytes;
// *out_len = its length, also when it does not fit (BUFFER_TOO_SMALL).
// Text crossing the ABI is NUL-terminated and holds no NUL of its own: a
// NUL byte (the byte token <0x00>, a "\u0000" in chat JSON) becomes U+FFFD,
// so strlen(text) == text_len always holds. Token ids are never changed.
Status copy_text(std::string value, char* text, size_t capacity, size_t* out_len);

// The defaults each *_init writes.
pvllm_engine_params default_engine_params();
pvllm_sampling_params default_sampling_params();
pvllm_request default_request();
pvllm_tokenizer_info default_tokenizer_info();
pvllm_chat_template_params default_chat_template_params();

// A field holding one of an enum's values 0..names.size()-1: INVALID_ARGUMENT
// listing them ("params->x must be A (0), B (1) or C (2), got 7") otherwise.
Status check_enum(const char* field, int64_t value, std::initializer_list<const char*> names);
Status to_engine_config(const pvllm_engine_params* in, pvllm::EngineConfig* config);
// The caller's sampling params, checked (its struct_size first).
Status to_sampling_params(const pvllm_sampling_params* caller, pvllm::SamplingParams* out);
Status to_delivery(int64_t value, pvllm::Delivery* out);

// The special tokens chat templates read: tokenizer_config.json's, else the
// tokenizer's own BOS and EOS (`tokenizer` may be NULL).
void fill_special_tokens(const pvllm::Tokenizer* tokenizer, pvllm::chat::ChatTemplates* templates);

const char* format_name(pvllm::ModelFormat format);

// Copies a string into a fixed char array, truncating, always NUL-terminated.
template <size_t N>
void copy_fixed(char (&dst)[N], const std::string& src) {
  const size_t n = std::min(src.size(), N - 1);
  std::memcpy(dst, src.data(), n);
  std::memset(dst + n, 0, N - n);
}

}  // namespace pvllm::capi
