// Pieces of tokenizer.json files that the tokenizer tests write: the
// sentencepiece-style ("▁" for spaces) normalizer and decoder that Llama 2
// and Mistral ship.
#pragma once

#include <nlohmann/json.hpp>

namespace pvllm::testing {

// Prepend "▁", then every space becomes "▁".
inline nlohmann::json dummy_prefix_normalizer() {
  return {{"type", "Sequence"},
          {"normalizers",
           {{{"type", "Prepend"}, {"prepend", "▁"}},
            {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}};
}

// "▁" back to spaces, byte tokens to bytes, the first space stripped.
inline nlohmann::json dummy_prefix_decoder() {
  return {{"type", "Sequence"},
          {"decoders",
           {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
            {{"type", "ByteFallback"}},
            {{"type", "Fuse"}},
            {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
}

}  // namespace pvllm::testing
