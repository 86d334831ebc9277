// GgufTokenizer: llama.cpp's tokenize over sentencepiece or the BPE parts
// tokenizer.json uses.
#include "core/tokenizer/gguf_tokenizer.h"

#include <sentencepiece_processor.h>

#include <utility>

#include "core/tokenizer/byte_level.h"
#include "core/tokenizer/gguf_spm.h"
#include "core/tokenizer/pieces.h"

namespace pvllm {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // "▁" (U+2581)

bool is_special(GgufTokenType type) {
  return type == GgufTokenType::kControl || type == GgufTokenType::kUnknown ||
         type == GgufTokenType::kUserDefined;
}

// What token `id` decodes to (llama.cpp's token_to_piece without special
// tokens): see Tokenizer::token_bytes.
std::string surface_bytes(const GgufVocab& vocab, int32_t id) {
  const std::string& text = vocab.tokens[id];
  switch (vocab.types[id]) {
    case GgufTokenType::kUserDefined:
      return text;
    case GgufTokenType::kNormal:
      if (vocab.kind == GgufVocab::Kind::kSpm) return replace_all(text, kSpaceSymbol, " ");
      if (std::string bytes; byte_level_decode(text, &bytes)) return bytes;
      return text;
    case GgufTokenType::kByte:
      if (vocab.kind == GgufVocab::Kind::kSpm) {
        return std::string(1, static_cast<char>(byte_token_value(text)));
      }
      return std::string();
    case GgufTokenType::kUndefined:
    case GgufTokenType::kUnknown:
    case GgufTokenType::kControl:
    case GgufTokenType::kUnused:
      break;
  }
  return std::string();
}

}  // namespace

GgufTokenizer::GgufTokenizer() = default;
GgufTokenizer::~GgufTokenizer() = default;

Status GgufTokenizer::load_file(const std::string& path, std::unique_ptr<Tokenizer>* out) {
  gguf::File file;
  PVLLM_RETURN_IF_ERROR(gguf::open(path, &file));
  std::unique_ptr<GgufTokenizer> tokenizer;
  PVLLM_RETURN_IF_ERROR(from_metadata(file.metadata(), path, &tokenizer));
  *out = std::move(tokenizer);
  return Status::Ok();
}

Status GgufTokenizer::from_metadata(const gguf::Metadata& metadata, const std::string& path,
                                    std::unique_ptr<GgufTokenizer>* out) {
  std::unique_ptr<GgufTokenizer> tokenizer(new GgufTokenizer());
  PVLLM_RETURN_IF_ERROR(read_gguf_vocab(metadata, path, &tokenizer->vocab_));
  PVLLM_RETURN_IF_ERROR(tokenizer->build(path));
  *out = std::move(tokenizer);
  return Status::Ok();
}

Status GgufTokenizer::build(const std::string& path) {
  if (vocab_.kind == GgufVocab::Kind::kSpm) {
    PVLLM_RETURN_IF_ERROR(make_gguf_spm(vocab_, path, &sp_));
  } else {
    PVLLM_RETURN_IF_ERROR(make_gguf_pre_tokenizer(vocab_.pre_type, &pre_tokenizer_));
    const Status st =
        BpeModel::build(vocab_.tokens, vocab_.merges, vocab_.pre_type.ignore_merges, &bpe_);
    if (!st.ok()) return CorruptModel(path + ": tokenizer.ggml.merges: " + st.message());
    vocab_.merges = {};
  }
  std::vector<AddedToken> special, user_defined;
  token_bytes_.resize(vocab_.tokens.size());
  ids_.reserve(vocab_.tokens.size());
  for (int32_t id = 0; id < vocab_.num_tokens(); ++id) {
    ids_.emplace(vocab_.tokens[id], id);
    token_bytes_[id] = surface_bytes(vocab_, id);
    const GgufTokenType type = vocab_.types[id];
    if (is_special(type)) special.push_back({id, vocab_.tokens[id], true});
    if (type == GgufTokenType::kUserDefined) user_defined.push_back({id, vocab_.tokens[id], false});
  }
  special_matcher_ = std::make_unique<AddedTokenMatcher>(special);
  user_defined_matcher_ = std::make_unique<AddedTokenMatcher>(user_defined);
  return Status::Ok();
}

Status GgufTokenizer::encode_run(std::string_view text, std::vector<int32_t>* ids) const {
  if (sp_) {
    std::vector<int> pieces;
    const auto status = sp_->Encode(text, &pieces);
    if (!status.ok()) {
      return Status(StatusCode::kTokenizerError,
                    "sentencepiece encode failed: " + status.ToString());
    }
    ids->insert(ids->end(), pieces.begin(), pieces.end());
    return Status::Ok();
  }
  std::vector<std::string> words(1, std::string(text));
  PVLLM_RETURN_IF_ERROR(pre_tokenizer_->apply(&words, /*first_segment=*/true));
  for (const std::string& word : words) PVLLM_RETURN_IF_ERROR(bpe_->tokenize(word, ids));
  return Status::Ok();
}

Status GgufTokenizer::encode(std::string_view text, bool add_special,
                             std::vector<int32_t>* ids) const {
  return tokenize(text, add_special, /*parse_special=*/true, ids);
}

Status GgufTokenizer::tokenize(std::string_view text, bool add_special, bool parse_special,
                               std::vector<int32_t>* ids) const {
  ids->clear();
  if (!is_valid_utf8(text)) {
    return InvalidArgument("the text is not valid UTF-8 (at byte " +
                           std::to_string(utf8_complete_prefix(text)) + ")");
  }
  if (add_special && vocab_.add_bos) ids->push_back(vocab_.bos_id);
  const AddedTokenMatcher& matcher = parse_special ? *special_matcher_ : *user_defined_matcher_;
  for (const TextSegment& segment : matcher.split(text)) {
    if (segment.added_id >= 0) {
      ids->push_back(segment.added_id);
    } else {
      PVLLM_RETURN_IF_ERROR(encode_run(segment.text, ids));
    }
  }
  if (add_special && vocab_.add_eos) ids->push_back(vocab_.eos_id);
  return Status::Ok();
}

Status GgufTokenizer::decode(const std::vector<int32_t>& ids, std::string* text) const {
  std::string bytes;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!is_valid_id(ids[i])) {
      return InvalidArgument("token id " + std::to_string(ids[i]) + " at index " +
                             std::to_string(i) + " is outside the vocabulary [0, " +
                             std::to_string(vocab_size()) + ")");
    }
    bytes += token_bytes_[ids[i]];
  }
  const size_t strip = bytes.empty() || bytes[0] != ' ' ? 0 : num_leading_spaces_stripped();
  *text = to_valid_utf8(std::string_view(bytes).substr(strip));
  return Status::Ok();
}

int32_t GgufTokenizer::token_to_id(std::string_view token) const {
  const auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

std::string GgufTokenizer::id_to_token(int32_t id) const {
  return is_valid_id(id) ? vocab_.tokens[id] : std::string();
}

const std::string& GgufTokenizer::token_bytes(int32_t id) const {
  static const std::string kEmpty;
  return is_valid_id(id) ? token_bytes_[id] : kEmpty;
}

}  // namespace pvllm
