// Choosing a tokenizer implementation for a path, and the incremental
// detokenizer over the Tokenizer interface.
#include "core/tokenizer/tokenizer.h"

#include <filesystem>
#include <system_error>

#include "core/model/model_files.h"
#include "core/model/pvllm_file.h"
#include "core/tokenizer/gguf_tokenizer.h"
#include "core/tokenizer/json_tokenizer.h"
#include "core/tokenizer/sentencepiece_tokenizer.h"

namespace pvllm {

namespace fs = std::filesystem;

Status Tokenizer::load_embedded(const EmbeddedTokenizer& embedded,
                                std::unique_ptr<Tokenizer>* out) {
  switch (embedded.kind) {
    case EmbeddedTokenizer::Kind::kSentencePiece:
      return SentencePieceTokenizer::load_from_bytes(embedded.data, out);
    case EmbeddedTokenizer::Kind::kJson:
      return JsonTokenizer::load_from_text(embedded.data, embedded.config_json, out);
    case EmbeddedTokenizer::Kind::kGguf: {
      gguf::Metadata metadata;
      PVLLM_RETURN_IF_ERROR(
          gguf::parse_metadata(embedded.data, "the tokenizer's GGUF metadata", &metadata));
      std::unique_ptr<GgufTokenizer> tokenizer;
      PVLLM_RETURN_IF_ERROR(GgufTokenizer::from_metadata(metadata, "the tokenizer", &tokenizer));
      *out = std::move(tokenizer);
      return Status::Ok();
    }
    case EmbeddedTokenizer::Kind::kNone:
      break;
  }
  return NotFound("the model file carries no tokenizer");
}

Status Tokenizer::load_file(const std::string& file, std::unique_ptr<Tokenizer>* out) {
  if (fs::path(file).extension() == ".json") return JsonTokenizer::load_file(file, out);
  if (fs::path(file).extension() == ".gguf") return GgufTokenizer::load_file(file, out);
  return SentencePieceTokenizer::load_file(file, out);
}

Status Tokenizer::load(const std::string& path, std::unique_ptr<Tokenizer>* out) {
  ModelFiles files;
  PVLLM_RETURN_IF_ERROR(resolve_model_files(path, &files));
  if (files.kind == ModelFiles::Kind::kPvllm) {
    pvllm_format::FileHeader header;
    PVLLM_RETURN_IF_ERROR(pvllm_format::read_header(files.weights, &header));
    const Status st = load_embedded(header.tokenizer, out);
    if (!st.ok()) return Status(st.code(), path + ": " + st.message());
    return Status::Ok();
  }
  if (files.tokenizer.empty()) {
    return NotFound(path + " is " + files.kind_name() +
                    " with no tokenizer beside it (looked for " +
                    "tokenizer.model, tokenizer.json or one *.model file in " + files.folder + ")");
  }
  return load_file(files.tokenizer, out);
}

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer* tokenizer,
                                               int32_t last_prompt_token)
    : tokenizer_(tokenizer), spaces_to_strip_(0) {
  // The engine builds one for models without a tokenizer too (then with -1)
  // and never pushes to it.
  if (tokenizer != nullptr && (last_prompt_token < 0 || last_prompt_token == tokenizer->bos_id())) {
    spaces_to_strip_ = tokenizer->num_leading_spaces_stripped();
  }
}

std::string IncrementalDetokenizer::push(int32_t id) {
  std::string_view piece = tokenizer_->token_bytes(id);
  if (piece.empty()) return std::string();
  // The text's first spaces go as in decode(). (sentencepiece would keep
  // the space of a byte piece <0x20> here; the byte table does not tell
  // those apart, and encoders never emit one.)
  while (spaces_to_strip_ > 0 && !piece.empty() && piece.front() == ' ') {
    piece.remove_prefix(1);
    --spaces_to_strip_;
  }
  if (piece.empty()) return std::string();
  spaces_to_strip_ = 0;
  pending_.append(piece);
  std::string held;
  std::string out = take_displayable(pending_, /*final=*/false, &held);
  pending_ = std::move(held);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string held;
  std::string out = take_displayable(pending_, /*final=*/true, &held);
  pending_.clear();
  return out;
}

}  // namespace pvllm
