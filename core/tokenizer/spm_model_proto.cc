// Protobuf wire format, just enough for a sentencepiece ModelProto.
#include "core/tokenizer/spm_model_proto.h"

#include <cstring>

namespace pvllm {
namespace {

// Field numbers, from sentencepiece_model.proto.
constexpr uint32_t kModelPieces = 1;                       // repeated SentencePiece
constexpr uint32_t kModelTrainerSpec = 2;                  // TrainerSpec
constexpr uint32_t kModelNormalizerSpec = 3;               // NormalizerSpec
constexpr uint32_t kPiecePiece = 1;                        // string
constexpr uint32_t kPieceScore = 2;                        // float
constexpr uint32_t kPieceType = 3;                         // enum Type
constexpr uint32_t kTrainerModelType = 3;                  // enum ModelType (BPE = 2)
constexpr uint32_t kTrainerVocabSize = 4;                  // int32
constexpr uint32_t kTrainerByteFallback = 35;              // bool
constexpr uint32_t kNormalizerName = 1;                    // string
constexpr uint32_t kNormalizerAddDummyPrefix = 3;          // bool
constexpr uint32_t kNormalizerRemoveExtraWhitespaces = 4;  // bool
constexpr uint32_t kNormalizerEscapeWhitespaces = 5;       // bool
constexpr uint64_t kModelTypeBpe = 2;

enum WireType : uint32_t { kVarint = 0, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void put_tag(uint32_t field, WireType wire, std::string* out) {
  put_varint((static_cast<uint64_t>(field) << 3) | wire, out);
}

void put_varint_field(uint32_t field, uint64_t v, std::string* out) {
  put_tag(field, kVarint, out);
  put_varint(v, out);
}

void put_bytes_field(uint32_t field, const std::string& bytes, std::string* out) {
  put_tag(field, kLengthDelimited, out);
  put_varint(bytes.size(), out);
  out->append(bytes);
}

void put_float_field(uint32_t field, float v, std::string* out) {
  put_tag(field, kFixed32, out);
  uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof(bits));
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
}

std::string piece_message(const SpmPiece& piece) {
  std::string m;
  put_bytes_field(kPiecePiece, piece.piece, &m);
  put_float_field(kPieceScore, piece.score, &m);
  put_varint_field(kPieceType, static_cast<uint64_t>(piece.type), &m);
  return m;
}

}  // namespace

std::string serialize_spm_model(const SpmModelSpec& spec) {
  std::string out;
  for (const SpmPiece& piece : spec.pieces)
    put_bytes_field(kModelPieces, piece_message(piece), &out);

  std::string trainer;
  put_varint_field(kTrainerModelType, kModelTypeBpe, &trainer);
  put_varint_field(kTrainerVocabSize, spec.pieces.size(), &trainer);
  put_varint_field(kTrainerByteFallback, spec.byte_fallback ? 1 : 0, &trainer);
  put_bytes_field(kModelTrainerSpec, trainer, &out);

  std::string normalizer;
  put_bytes_field(kNormalizerName, "identity", &normalizer);
  put_varint_field(kNormalizerAddDummyPrefix, spec.add_dummy_prefix ? 1 : 0, &normalizer);
  put_varint_field(kNormalizerRemoveExtraWhitespaces, 0, &normalizer);
  put_varint_field(kNormalizerEscapeWhitespaces, 1, &normalizer);
  put_bytes_field(kModelNormalizerSpec, normalizer, &out);
  return out;
}

}  // namespace pvllm
