// GgufVocab -> ModelProto -> sentencepiece.
#include "core/tokenizer/gguf_spm.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <exception>

#include "core/tokenizer/pieces.h"
#include "core/tokenizer/spm_model_proto.h"

namespace pvllm {
namespace {

// sentencepiece's type for a GGUF token type. llama.cpp merges into any
// token whose text the pair spells, whatever its type, so user-defined,
// unused and undefined tokens merge as normal ones here (sentencepiece
// would match user-defined pieces before merging, and split unused ones
// again). Control and unknown tokens never come from merging text;
// user-defined and special tokens written in the text are cut out before
// sentencepiece sees it (GgufTokenizer).
SpmPiece::Type piece_type(GgufTokenType type) {
  switch (type) {
    case GgufTokenType::kUnknown:
      return SpmPiece::Type::kUnknown;
    case GgufTokenType::kControl:
      return SpmPiece::Type::kControl;
    case GgufTokenType::kByte:
      return SpmPiece::Type::kByte;
    case GgufTokenType::kUndefined:
    case GgufTokenType::kNormal:
    case GgufTokenType::kUserDefined:
    case GgufTokenType::kUnused:
      break;
  }
  return SpmPiece::Type::kNormal;
}

// The pieces, with exactly one kUnknown: the first unknown-type token, else
// the unknown token id's (llama.cpp's default 0). Further unknown-type
// tokens become control pieces: never produced from text either.
Status make_spec(const GgufVocab& vocab, const std::string& path, SpmModelSpec* spec) {
  spec->pieces.resize(vocab.tokens.size());
  int32_t unknown = -1;
  for (size_t id = 0; id < vocab.tokens.size(); ++id) {
    SpmPiece& piece = spec->pieces[id];
    piece.piece = vocab.tokens[id];
    piece.score = vocab.scores[id];
    piece.type = piece_type(vocab.types[id]);
    if (piece.type == SpmPiece::Type::kUnknown) {
      if (unknown >= 0) piece.type = SpmPiece::Type::kControl;
      if (unknown < 0) unknown = static_cast<int32_t>(id);
    }
    if (piece.type == SpmPiece::Type::kByte) {
      if (byte_token_value(piece.piece) < 0) {
        return CorruptModel(path + ": tokenizer.ggml.token_type[" + std::to_string(id) +
                            "] says byte, but the token is \"" + piece.piece + "\", not <0xAB>");
      }
      spec->byte_fallback = true;
    }
  }
  // sentencepiece's byte fallback needs every byte; without it a character
  // would become the unknown token where llama.cpp writes its bytes.
  const auto num_bytes =
      std::count_if(spec->pieces.begin(), spec->pieces.end(),
                    [](const SpmPiece& p) { return p.type == SpmPiece::Type::kByte; });
  if (num_bytes != 0 && num_bytes != 256) {
    return Unsupported(path + ": the vocabulary has " + std::to_string(num_bytes) +
                       " byte tokens (<0xAB>); sentencepiece's byte fallback needs all 256");
  }
  if (unknown < 0) {
    if (vocab.unk_id < 0) {
      return Unsupported(path +
                         ": this sentencepiece vocabulary has no unknown token "
                         "(no token of type 2, no tokenizer.ggml.unknown_token_id)");
    }
    spec->pieces[vocab.unk_id].type = SpmPiece::Type::kUnknown;
  }
  spec->add_dummy_prefix = vocab.add_space_prefix;
  return Status::Ok();
}

}  // namespace

Status make_gguf_spm(const GgufVocab& vocab, const std::string& path,
                     std::unique_ptr<sentencepiece::SentencePieceProcessor>* out) {
  SpmModelSpec spec;
  PVLLM_RETURN_IF_ERROR(make_spec(vocab, path, &spec));
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  sentencepiece::util::Status status;
  // sentencepiece throws from its trie builder on some inputs rather than
  // returning a status.
  try {
    status = sp->LoadFromSerializedProto(serialize_spm_model(spec));
  } catch (const std::exception& e) {
    return CorruptModel(path + ": the tokenizer does not form a sentencepiece model: " + e.what());
  }
  if (!status.ok()) {
    return CorruptModel(
        path + ": the tokenizer does not form a sentencepiece model: " + status.ToString());
  }
  *out = std::move(sp);
  return Status::Ok();
}

}  // namespace pvllm
