// A byte-at-a-time UTF-8 decoder: the grammar works on code points, but
// tokens end anywhere inside a character, so the matcher feeds bytes and
// keeps the partial character as part of its state. And the encoder the
// grammar writers spell code points with.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

namespace pvllm::structured {

struct Utf8Decoder {
  uint32_t value = 0;  // bits gathered so far
  uint8_t need = 0;    // continuation bytes still to come
  uint8_t length = 0;  // bytes of the character being read

  enum Result { kNeedMore, kChar, kInvalid };

  // Feeds one byte. kChar: *cp is a complete, valid character (no
  // overlong form, no surrogate, at most U+10FFFF).
  Result feed(uint8_t b, uint32_t* cp) {
    if (need == 0) {
      if (b < 0x80) {
        *cp = b;
        return kChar;
      }
      if (b >= 0xC2 && b <= 0xDF) return start(b & 0x1F, 1, 2);
      if (b >= 0xE0 && b <= 0xEF) return start(b & 0x0F, 2, 3);
      if (b >= 0xF0 && b <= 0xF4) return start(b & 0x07, 3, 4);
      return kInvalid;
    }
    if ((b & 0xC0) != 0x80) return kInvalid;
    value = (value << 6) | (b & 0x3F);
    if (--need > 0) return in_range() ? kNeedMore : kInvalid;
    uint32_t c = value;
    uint8_t len = length;
    *this = Utf8Decoder{};
    if ((len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c > 0x10FFFF)) ||
        (c >= 0xD800 && c <= 0xDFFF)) {
      return kInvalid;
    }
    *cp = c;
    return kChar;
  }

  // While a character is incomplete: the code points it may still become.
  uint32_t lowest() const { return std::max(value << (6 * need), min_for_length()); }
  uint32_t highest() const {
    uint32_t hi = (value << (6 * need)) | ((1u << (6 * need)) - 1);
    return hi < 0x10FFFF ? hi : 0x10FFFF;
  }
  // Whether some valid character still starts this way: not overlong, not
  // past U+10FFFF, and not only UTF-16 surrogates (ED A0..BF).
  bool in_range() const {
    const uint32_t lo = lowest(), hi = highest();
    return lo <= hi && !(lo >= 0xD800 && hi <= 0xDFFF);
  }

  bool operator==(const Utf8Decoder&) const = default;

 private:
  Result start(uint32_t bits, uint8_t more, uint8_t len) {
    value = bits;
    need = more;
    length = len;
    return in_range() ? kNeedMore : kInvalid;
  }
  uint32_t min_for_length() const { return length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000; }
};

// Decodes one whole character at the start of `s` (for the grammar parser).
inline bool utf8_decode(std::string_view s, uint32_t* cp, size_t* len) {
  Utf8Decoder d;
  for (size_t i = 0; i < s.size() && i < 4; ++i) {
    Utf8Decoder::Result r = d.feed(static_cast<uint8_t>(s[i]), cp);
    if (r == Utf8Decoder::kInvalid) return false;
    if (r == Utf8Decoder::kChar) {
      *len = i + 1;
      return true;
    }
  }
  return false;
}

// Appends code point `c` (at most U+10FFFF) as UTF-8.
inline void append_utf8(uint32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

}  // namespace pvllm::structured
