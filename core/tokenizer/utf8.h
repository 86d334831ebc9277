// UTF-8 bookkeeping shared by the tokenizers and the incremental
// detokenizer: validity, complete-prefix lengths, and turning arbitrary
// bytes into displayable text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pvllm {

// U+FFFD, what every byte that can never be part of a valid character
// becomes.
inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

// Number of bytes at the start of `s` that form complete, valid UTF-8
// characters, stopping before a trailing incomplete sequence.
size_t utf8_complete_prefix(std::string_view s);

inline bool is_valid_utf8(std::string_view s) { return utf8_complete_prefix(s) == s.size(); }

// Splits `bytes` into text that can be shown now and a tail that is held:
// complete characters pass through, each byte that can never be part of a
// valid character becomes U+FFFD (one per byte), and a trailing prefix of a
// valid character is returned in *held. With `final`, the held tail is
// replaced too (and *held is empty).
std::string take_displayable(std::string_view bytes, bool final, std::string* held);

// `bytes` as valid UTF-8: take_displayable with final = true.
std::string to_valid_utf8(std::string_view bytes);

// Appends the UTF-8 encoding of code point `cp` (at most U+10FFFF).
void append_utf8(uint32_t cp, std::string* out);

// Length in bytes of the (valid) UTF-8 character whose lead byte is `lead`.
inline size_t utf8_char_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

}  // namespace pvllm
