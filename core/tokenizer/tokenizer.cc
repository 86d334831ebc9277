// Tokenizer: sentencepiece behind pvllm's Status, plus the per-token byte
// table and the UTF-8 bookkeeping the incremental detokenizer needs.
#include "core/tokenizer/tokenizer.h"

#include <sentencepiece_processor.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>

namespace pvllm {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";      // "▁" (U+2581)
constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

Status tokenizer_error(std::string message) {
  return Status(StatusCode::kTokenizerError, std::move(message));
}

// "<0xAB>" -> 0xAB; -1 when `piece` is not in that form.
int byte_piece_value(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  char* end = nullptr;
  const std::string hex = piece.substr(3, 2);
  const long value = std::strtol(hex.c_str(), &end, 16);
  if (end != hex.c_str() + 2) return -1;
  return static_cast<int>(value);
}

std::string replace_space_symbols(const std::string& piece) {
  std::string out;
  out.reserve(piece.size());
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, kSpaceSymbol.size(), kSpaceSymbol) == 0) {
      out.push_back(' ');
      i += kSpaceSymbol.size();
    } else {
      out.push_back(piece[i++]);
    }
  }
  return out;
}

// The surface bytes of every piece, indexed by id ([vocab_size]); see
// Tokenizer::token_bytes.
std::vector<std::string> build_token_bytes(const sentencepiece::SentencePieceProcessor& sp) {
  const int32_t num_pieces = sp.GetPieceSize();
  std::vector<std::string> table(num_pieces);
  for (int32_t id = 0; id < num_pieces; ++id) {
    if (sp.IsControl(id) || sp.IsUnknown(id)) continue;  // invisible
    const std::string& piece = sp.IdToPiece(id);
    const int byte = sp.IsByte(id) ? byte_piece_value(piece) : -1;
    table[id] = byte >= 0 ? std::string(1, static_cast<char>(byte)) : replace_space_symbols(piece);
  }
  return table;
}

// Length of the UTF-8 character starting at `s[0]` when it is complete and
// valid (no overlong forms, no surrogates, at most U+10FFFF), else 0.
// Sets *could_complete when `s` is a proper prefix of some valid character,
// i.e. more bytes might still turn it into one.
size_t valid_char_length(std::string_view s, bool* could_complete) {
  *could_complete = false;
  const auto lead = static_cast<unsigned char>(s[0]);
  size_t length = 0;
  unsigned char second_min = 0x80, second_max = 0xBF;
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_min = 0xA0;  // overlong
    if (lead == 0xED) second_max = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_min = 0x90;  // overlong
    if (lead == 0xF4) second_max = 0x8F;  // above U+10FFFF
  } else {
    return 0;  // a continuation byte or a byte that never starts a character
  }
  for (size_t i = 1; i < length; ++i) {
    if (i >= s.size()) {
      *could_complete = true;
      return 0;
    }
    const auto byte = static_cast<unsigned char>(s[i]);
    const unsigned char lo = i == 1 ? second_min : 0x80;
    const unsigned char hi = i == 1 ? second_max : 0xBF;
    if (byte < lo || byte > hi) return 0;
  }
  return length;
}

// Splits `bytes` into text that can be shown now and a tail that is held:
// complete characters pass through, each byte that can never be part of a
// valid character becomes U+FFFD (one per byte, as sentencepiece decodes
// byte pieces), and a trailing prefix of a valid character is returned in
// *held. With `final`, the held tail is replaced too.
std::string take_displayable(std::string_view bytes, bool final, std::string* held) {
  std::string out;
  size_t pos = 0;
  while (pos < bytes.size()) {
    bool could_complete = false;
    const size_t length = valid_char_length(bytes.substr(pos), &could_complete);
    if (length > 0) {
      out.append(bytes.substr(pos, length));
      pos += length;
    } else if (could_complete && !final) {
      break;
    } else {
      out.append(kReplacementChar);
      pos += 1;
    }
  }
  held->assign(bytes.substr(pos));
  return out;
}

}  // namespace

Tokenizer::Tokenizer() : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
Tokenizer::~Tokenizer() = default;

Status Tokenizer::load(const std::string& path, std::unique_ptr<Tokenizer>* out) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return NotFound("tokenizer model not found: " + path);
  }
  std::unique_ptr<Tokenizer> tokenizer(new Tokenizer());
  const auto status = tokenizer->sp_->Load(path);
  if (!status.ok()) {
    return tokenizer_error("cannot load sentencepiece model " + path + ": " + status.ToString());
  }
  tokenizer->token_bytes_ = build_token_bytes(*tokenizer->sp_);
  *out = std::move(tokenizer);
  return Status::Ok();
}

Status Tokenizer::load_from_bytes(std::string_view bytes, std::unique_ptr<Tokenizer>* out) {
  std::unique_ptr<Tokenizer> tokenizer(new Tokenizer());
  const auto status = tokenizer->sp_->LoadFromSerializedProto(bytes);
  if (!status.ok()) {
    return tokenizer_error("cannot load sentencepiece model from " + std::to_string(bytes.size()) +
                           " bytes: " + status.ToString());
  }
  tokenizer->token_bytes_ = build_token_bytes(*tokenizer->sp_);
  *out = std::move(tokenizer);
  return Status::Ok();
}

Status Tokenizer::encode(std::string_view text, bool add_bos, std::vector<int32_t>* ids) const {
  std::vector<int> pieces;
  const auto status = sp_->Encode(text, &pieces);
  if (!status.ok()) return tokenizer_error("sentencepiece encode failed: " + status.ToString());
  ids->clear();
  ids->reserve(pieces.size() + 1);
  if (add_bos) {
    if (bos_id() < 0) return tokenizer_error("this tokenizer has no BOS token");
    ids->push_back(bos_id());
  }
  ids->insert(ids->end(), pieces.begin(), pieces.end());
  return Status::Ok();
}

Status Tokenizer::decode(const std::vector<int32_t>& ids, std::string* text) const {
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

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(token_bytes_.size()); }
int32_t Tokenizer::bos_id() const { return sp_->bos_id(); }
int32_t Tokenizer::eos_id() const { return sp_->eos_id(); }

const std::string& Tokenizer::token_bytes(int32_t id) const {
  static const std::string kEmpty;
  return is_valid_id(id) ? token_bytes_[id] : kEmpty;
}

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer* tokenizer,
                                               int32_t last_prompt_token)
    : tokenizer_(tokenizer),
      strip_leading_space_(last_prompt_token < 0 || last_prompt_token == tokenizer->bos_id()) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  std::string_view piece = tokenizer_->token_bytes(id);
  if (piece.empty()) return std::string();
  if (strip_leading_space_) {
    // The first visible piece loses its "▁" as in sentencepiece's decode.
    // (sentencepiece would keep the space of a byte piece <0x20> here; the
    // byte table does not tell those apart, and encoders never emit one.)
    strip_leading_space_ = false;
    if (piece.front() == ' ') piece.remove_prefix(1);
  }
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

size_t utf8_complete_prefix(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    bool could_complete = false;
    const size_t length = valid_char_length(s.substr(pos), &could_complete);
    if (length == 0) break;
    pos += length;
  }
  return pos;
}

}  // namespace pvllm
