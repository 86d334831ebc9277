// The byte-level alphabet: each of the 256 byte values stands for one
// printable character, so byte-level BPE vocabularies are plain strings.
// Printable Latin-1 bytes stand for themselves; the others (controls,
// space, 0x7F-0xA0, 0xAD) take U+0100 upwards in byte order ("Ġ" is the
// space, "Ċ" the newline).
#pragma once

#include <string>
#include <string_view>

namespace pvllm {

// Appends the byte-level characters of `bytes` (UTF-8 encoded) to *out.
void byte_level_encode(std::string_view bytes, std::string* out);

// The bytes the byte-level characters of `chars` stand for. False (and
// *bytes unspecified) when `chars` holds a character outside the alphabet.
bool byte_level_decode(std::string_view chars, std::string* bytes);

}  // namespace pvllm
