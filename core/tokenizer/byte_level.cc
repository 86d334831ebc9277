// The byte <-> character tables of the byte-level alphabet.
#include "core/tokenizer/byte_level.h"

#include <array>
#include <cstdint>

#include "core/tokenizer/utf8.h"

namespace pvllm {
namespace {

bool stands_for_itself(int byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

struct Tables {
  std::array<std::string, 256> char_of_byte;  // UTF-8 of the character
  std::array<int16_t, 324> byte_of_char;      // [code point] -> byte, -1 if none
  Tables() {
    byte_of_char.fill(-1);
    uint32_t next = 256;
    for (int byte = 0; byte < 256; ++byte) {
      const uint32_t cp = stands_for_itself(byte) ? static_cast<uint32_t>(byte) : next++;
      append_utf8(cp, &char_of_byte[byte]);
      byte_of_char[cp] = static_cast<int16_t>(byte);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

void byte_level_encode(std::string_view bytes, std::string* out) {
  const Tables& t = tables();
  for (const char c : bytes) out->append(t.char_of_byte[static_cast<unsigned char>(c)]);
}

bool byte_level_decode(std::string_view chars, std::string* bytes) {
  const Tables& t = tables();
  bytes->clear();
  for (size_t i = 0; i < chars.size();) {
    const auto lead = static_cast<unsigned char>(chars[i]);
    uint32_t cp;
    if (lead < 0x80) {
      cp = lead;
      i += 1;
    } else if ((lead & 0xE0) == 0xC0 && i + 1 < chars.size()) {
      cp = ((lead & 0x1Fu) << 6) | (static_cast<unsigned char>(chars[i + 1]) & 0x3Fu);
      i += 2;
    } else {
      return false;  // every character of the alphabet is below U+0800
    }
    if (cp >= t.byte_of_char.size() || t.byte_of_char[cp] < 0) return false;
    bytes->push_back(static_cast<char>(t.byte_of_char[cp]));
  }
  return true;
}

}  // namespace pvllm
