// Tokenizer over sentencepiece, plus the per-token byte table the
// incremental detokenizer needs.
#include "core/tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "core/tokenizer/pieces.h"

namespace pvllm {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // "▁" (U+2581)

Status tokenizer_error(std::string message) {
  return Status(StatusCode::kTokenizerError, std::move(message));
}

// The surface bytes of every piece, indexed by id ([vocab_size]); see
// Tokenizer::token_bytes.
std::vector<std::string> build_token_bytes(const sentencepiece::SentencePieceProcessor& sp) {
  const int32_t num_pieces = sp.GetPieceSize();
  std::vector<std::string> table(num_pieces);
  for (int32_t id = 0; id < num_pieces; ++id) {
    if (sp.IsControl(id) || sp.IsUnknown(id)) continue;  // invisible
    const std::string& piece = sp.IdToPiece(id);
    const int byte = sp.IsByte(id) ? byte_token_value(piece) : -1;
    table[id] =
        byte >= 0 ? std::string(1, static_cast<char>(byte)) : replace_all(piece, kSpaceSymbol, " ");
  }
  return table;
}

// The pieces written as text that stand for control and unknown tokens.
std::vector<std::pair<std::string, int32_t>> find_special_pieces(
    const sentencepiece::SentencePieceProcessor& sp) {
  std::vector<std::pair<std::string, int32_t>> special;
  for (int32_t id = 0; id < sp.GetPieceSize(); ++id) {
    if ((sp.IsControl(id) || sp.IsUnknown(id)) && !sp.IdToPiece(id).empty()) {
      special.emplace_back(sp.IdToPiece(id), id);
    }
  }
  std::stable_sort(special.begin(), special.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  return special;
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer()
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

Status SentencePieceTokenizer::load_file(const std::string& path, std::unique_ptr<Tokenizer>* out) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return NotFound("tokenizer model not found: " + path);
  }
  std::unique_ptr<SentencePieceTokenizer> tokenizer(new SentencePieceTokenizer());
  const auto status = tokenizer->sp_->Load(path);
  if (!status.ok()) {
    return tokenizer_error("cannot load sentencepiece model " + path + ": " + status.ToString());
  }
  tokenizer->token_bytes_ = build_token_bytes(*tokenizer->sp_);
  tokenizer->special_pieces_ = find_special_pieces(*tokenizer->sp_);
  *out = std::move(tokenizer);
  return Status::Ok();
}

Status SentencePieceTokenizer::load_from_bytes(std::string_view bytes,
                                               std::unique_ptr<Tokenizer>* out) {
  std::unique_ptr<SentencePieceTokenizer> tokenizer(new SentencePieceTokenizer());
  // sentencepiece throws (from its trie builder) on some malformed models,
  // e.g. an empty piece, rather than returning a status.
  sentencepiece::util::Status status;
  try {
    status = tokenizer->sp_->LoadFromSerializedProto(bytes);
  } catch (const std::exception& e) {
    return tokenizer_error("cannot load sentencepiece model from " + std::to_string(bytes.size()) +
                           " bytes: " + e.what());
  }
  if (!status.ok()) {
    return tokenizer_error("cannot load sentencepiece model from " + std::to_string(bytes.size()) +
                           " bytes: " + status.ToString());
  }
  tokenizer->token_bytes_ = build_token_bytes(*tokenizer->sp_);
  tokenizer->special_pieces_ = find_special_pieces(*tokenizer->sp_);
  *out = std::move(tokenizer);
  return Status::Ok();
}

Status SentencePieceTokenizer::encode_plain(std::string_view text,
                                            std::vector<int32_t>* ids) const {
  if (text.empty()) return Status::Ok();
  std::vector<int> pieces;
  const auto status = sp_->Encode(text, &pieces);
  if (!status.ok()) return tokenizer_error("sentencepiece encode failed: " + status.ToString());
  ids->insert(ids->end(), pieces.begin(), pieces.end());
  return Status::Ok();
}

Status SentencePieceTokenizer::encode(std::string_view text, bool add_special,
                                      std::vector<int32_t>* ids) const {
  ids->clear();
  if (add_special) {
    if (bos_id() < 0) return tokenizer_error("this tokenizer has no BOS token");
    ids->push_back(bos_id());
  }
  // Split at the earliest special piece (the longest where several start
  // there); plain runs in between go to sentencepiece. next[i] caches where
  // piece i occurs next, so the text is scanned once per piece.
  std::vector<size_t> next(special_pieces_.size(), 0);
  for (size_t i = 0; i < next.size(); ++i) next[i] = text.find(special_pieces_[i].first);
  size_t start = 0;
  while (start < text.size()) {
    size_t best = std::string_view::npos;
    size_t found = next.size();
    for (size_t i = 0; i < next.size(); ++i) {
      if (next[i] != std::string_view::npos && next[i] < start) {
        next[i] = text.find(special_pieces_[i].first, start);
      }
      if (next[i] < best) {
        best = next[i];
        found = i;
      }
    }
    if (found == next.size()) break;
    PVLLM_RETURN_IF_ERROR(encode_plain(text.substr(start, best - start), ids));
    ids->push_back(special_pieces_[found].second);
    start = best + special_pieces_[found].first.size();
  }
  return encode_plain(text.substr(start), ids);
}

Status SentencePieceTokenizer::decode(const std::vector<int32_t>& ids, std::string* text) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!is_valid_id(ids[i])) {
      return InvalidArgument("token id " + std::to_string(ids[i]) + " at index " +
                             std::to_string(i) + " is outside the vocabulary [0, " +
                             std::to_string(vocab_size()) + ")");
    }
  }
  const std::vector<int> pieces(ids.begin(), ids.end());
  const auto status = sp_->Decode(pieces, text);
  if (!status.ok()) return tokenizer_error("sentencepiece decode failed: " + status.ToString());
  return Status::Ok();
}

int32_t SentencePieceTokenizer::bos_id() const { return sp_->bos_id(); }
int32_t SentencePieceTokenizer::eos_id() const { return sp_->eos_id(); }

int32_t SentencePieceTokenizer::token_to_id(std::string_view token) const {
  const int id = sp_->PieceToId(token);
  // PieceToId answers the unknown id for an absent piece.
  return id >= 0 && id < vocab_size() && sp_->IdToPiece(id) == token ? id : -1;
}

std::string SentencePieceTokenizer::id_to_token(int32_t id) const {
  return is_valid_id(id) ? sp_->IdToPiece(id) : std::string();
}

const std::string& SentencePieceTokenizer::token_bytes(int32_t id) const {
  static const std::string kEmpty;
  return is_valid_id(id) ? token_bytes_[id] : kEmpty;
}

}  // namespace pvllm
