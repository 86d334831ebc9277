// A sentencepiece model (the ModelProto of sentencepiece_model.proto)
// written by hand, for vocabularies stored elsewhere (a GGUF file's
// tokenizer.ggml.*): the pieces, a BPE trainer spec and the normalizer,
// which is everything sentencepiece's processor reads to tokenize. The
// protobuf headers are not needed: six fields in three messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pvllm {

struct SpmPiece {
  // sentencepiece's piece types (ModelProto.SentencePiece.Type).
  enum class Type : uint8_t {
    kNormal = 1,
    kUnknown = 2,
    kControl = 3,
    kUserDefined = 4,
    kUnused = 5,
    kByte = 6,  // "<0xAB>"; needs byte_fallback
  };
  std::string piece;  // not empty
  float score = 0;    // BPE merges the highest-scored pair first
  Type type = Type::kNormal;
};

struct SpmModelSpec {
  std::vector<SpmPiece> pieces;  // [vocab size], by id; exactly one kUnknown
  bool byte_fallback = false;    // unknown characters as their <0xAB> pieces
  // The normalizer: no character mapping, no whitespace removal, spaces
  // escaped as U+2581; a U+2581 prepended to every text when set.
  bool add_dummy_prefix = true;
};

// The serialized ModelProto (a BPE model) for
// SentencePieceProcessor::LoadFromSerializedProto.
std::string serialize_spm_model(const SpmModelSpec& spec);

}  // namespace pvllm
