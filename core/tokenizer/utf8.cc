// UTF-8 validity and the displayable/held split of byte streams.
#include "core/tokenizer/utf8.h"

namespace pvllm {
namespace {

// Length of the UTF-8 character starting at `s[0]` when it is complete and
// valid (no overlong forms, no surrogates, at most U+10FFFF), else 0.
// Sets *could_complete when `s` is a proper prefix of some valid character,
// i.e. more bytes might still turn it into one.
size_t valid_char_length(std::string_view s, bool* could_complete) {
  *could_complete = false;
  const auto lead = static_cast<unsigned char>(s[0]);
  size_t length = 0;
  unsigned char second_min = 0x80, second_max = 0xBF;
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_min = 0xA0;  // overlong
    if (lead == 0xED) second_max = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_min = 0x90;  // overlong
    if (lead == 0xF4) second_max = 0x8F;  // above U+10FFFF
  } else {
    return 0;  // a continuation byte or a byte that never starts a character
  }
  for (size_t i = 1; i < length; ++i) {
    if (i >= s.size()) {
      *could_complete = true;
      return 0;
    }
    const auto byte = static_cast<unsigned char>(s[i]);
    const unsigned char lo = i == 1 ? second_min : 0x80;
    const unsigned char hi = i == 1 ? second_max : 0xBF;
    if (byte < lo || byte > hi) return 0;
  }
  return length;
}

}  // namespace

size_t utf8_complete_prefix(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    bool could_complete = false;
    const size_t length = valid_char_length(s.substr(pos), &could_complete);
    if (length == 0) break;
    pos += length;
  }
  return pos;
}

std::string take_displayable(std::string_view bytes, bool final, std::string* held) {
  std::string out;
  size_t pos = 0;
  while (pos < bytes.size()) {
    bool could_complete = false;
    const size_t length = valid_char_length(bytes.substr(pos), &could_complete);
    if (length > 0) {
      out.append(bytes.substr(pos, length));
      pos += length;
    } else if (could_complete && !final) {
      break;
    } else {
      out.append(kReplacementChar);
      pos += 1;
    }
  }
  held->assign(bytes.substr(pos));
  return out;
}

std::string to_valid_utf8(std::string_view bytes) {
  std::string held;
  return take_displayable(bytes, /*final=*/true, &held);
}

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace pvllm
