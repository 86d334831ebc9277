// The tokenizer.json pipeline.
#include "core/tokenizer/json_tokenizer.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include "core/base/file_bytes.h"

namespace pvllm {
namespace {

using namespace tokenizer_json;
namespace fs = std::filesystem;

// A token name in tokenizer_config.json: "<s>", {"content": "<s>", ...} or null.
std::string config_token_name(const json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return "";
}

}  // namespace

Status JsonTokenizer::load_file(const std::string& path, std::unique_ptr<Tokenizer>* out) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return NotFound("tokenizer.json not found: " + path);
  std::string text, config_text;
  PVLLM_RETURN_IF_ERROR(read_file_bytes(path, &text));
  const fs::path config_path = fs::path(path).parent_path() / "tokenizer_config.json";
  if (fs::is_regular_file(config_path, ec)) {
    PVLLM_RETURN_IF_ERROR(read_file_bytes(config_path.string(), &config_text));
  }
  const Status status = load_from_text(text, config_text, out);
  if (!status.ok()) return Status(status.code(), path + ": " + status.message());
  return Status::Ok();
}

Status JsonTokenizer::load_from_text(std::string_view text, std::string_view config_text,
                                     std::unique_ptr<Tokenizer>* out) {
  const json root = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return Status(StatusCode::kTokenizerError, "tokenizer.json is not a JSON object");
  }
  std::unique_ptr<JsonTokenizer> tokenizer(new JsonTokenizer());
  PVLLM_RETURN_IF_ERROR(tokenizer->parse(root));
  PVLLM_RETURN_IF_ERROR(tokenizer->read_config(config_text));
  *out = std::move(tokenizer);
  return Status::Ok();
}

Status JsonTokenizer::parse(const json& root) {
  for (const char* key : {"truncation", "padding"}) {
    if (root.contains(key) && !root[key].is_null()) return unsupported(key, root[key]);
  }
  PVLLM_RETURN_IF_ERROR(parse_added_tokens(root, &added_tokens_));
  PVLLM_RETURN_IF_ERROR(
      parse_normalizer(root.value("normalizer", json()), "normalizer", &normalizer_));
  PVLLM_RETURN_IF_ERROR(
      parse_pre_tokenizer(root.value("pre_tokenizer", json()), "pre_tokenizer", &pre_tokenizer_));
  PVLLM_RETURN_IF_ERROR(BpeModel::parse(root.value("model", json()), &model_));
  PVLLM_RETURN_IF_ERROR(parse_post_processor(root.value("post_processor", json()), "post_processor",
                                             &post_processor_));
  PVLLM_RETURN_IF_ERROR(TokenDecoder::parse(root.value("decoder", json()), &decoder_));

  // The id tables: model tokens, then added tokens over them; an added
  // token's id as bounded as the model's (BpeModel::kIdSlack).
  const int64_t max_added_id =
      2 * static_cast<int64_t>(model_->tokens().size() + added_tokens_.size()) + BpeModel::kIdSlack;
  for (size_t i = 0; i < added_tokens_.size(); ++i) {
    if (added_tokens_[i].id >= max_added_id) {
      return Status(StatusCode::kTokenizerError,
                    "tokenizer.json: added_tokens[" + std::to_string(i) + "].id " +
                        std::to_string(added_tokens_[i].id) + " is not a valid id (below " +
                        std::to_string(max_added_id) + " for this vocabulary)");
    }
  }
  tokens_ = model_->tokens();
  for (const AddedToken& token : added_tokens_) {
    if (static_cast<size_t>(token.id) >= tokens_.size()) tokens_.resize(token.id + 1);
  }
  token_bytes_.assign(tokens_.size(), std::string());
  is_special_.assign(tokens_.size(), false);
  for (size_t id = 0; id < model_->tokens().size(); ++id) {
    if (!tokens_[id].empty()) token_bytes_[id] = decoder_->token_bytes(tokens_[id]);
  }
  for (const AddedToken& token : added_tokens_) {
    tokens_[token.id] = token.content;
    token_bytes_[token.id] = token.special ? std::string() : token.content;
    is_special_[token.id] = token.special;
    added_ids_[token.content] = token.id;
  }
  matcher_ = std::make_unique<AddedTokenMatcher>(added_tokens_);
  for (const int32_t id : post_processor_.prefix) {
    if (!is_valid_id(id))
      return malformed("post_processor", "adds unknown id " + std::to_string(id));
  }
  for (const int32_t id : post_processor_.suffix) {
    if (!is_valid_id(id))
      return malformed("post_processor", "adds unknown id " + std::to_string(id));
  }
  return Status::Ok();
}

Status JsonTokenizer::read_config(std::string_view config_text) {
  bos_id_ = post_processor_.prefix.empty() ? -1 : post_processor_.prefix.front();
  if (config_text.empty()) return Status::Ok();
  const json config =
      json::parse(config_text.begin(), config_text.end(), nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    return Status(StatusCode::kTokenizerError, "tokenizer_config.json is not a JSON object");
  }
  if (config.contains("bos_token")) bos_id_ = token_to_id(config_token_name(config, "bos_token"));
  eos_id_ = token_to_id(config_token_name(config, "eos_token"));
  return Status::Ok();
}

Status JsonTokenizer::encode_segment(std::string_view text, bool first_segment,
                                     std::vector<int32_t>* ids) const {
  std::vector<std::string> pieces(1, std::string(text));
  if (normalizer_) PVLLM_RETURN_IF_ERROR(normalizer_->apply(&pieces[0]));
  if (pieces[0].empty()) return Status::Ok();
  if (pre_tokenizer_) PVLLM_RETURN_IF_ERROR(pre_tokenizer_->apply(&pieces, first_segment));
  for (const std::string& piece : pieces) PVLLM_RETURN_IF_ERROR(model_->tokenize(piece, ids));
  return Status::Ok();
}

Status JsonTokenizer::encode(std::string_view text, bool add_special,
                             std::vector<int32_t>* ids) const {
  ids->clear();
  if (!is_valid_utf8(text)) {
    return InvalidArgument("the text is not valid UTF-8 (at byte " +
                           std::to_string(utf8_complete_prefix(text)) + ")");
  }
  if (add_special) ids->assign(post_processor_.prefix.begin(), post_processor_.prefix.end());
  for (const TextSegment& segment : matcher_->split(text)) {
    if (segment.added_id >= 0) {
      ids->push_back(segment.added_id);
    } else {
      PVLLM_RETURN_IF_ERROR(encode_segment(segment.text, segment.offset == 0, ids));
    }
  }
  if (add_special)
    ids->insert(ids->end(), post_processor_.suffix.begin(), post_processor_.suffix.end());
  return Status::Ok();
}

Status JsonTokenizer::decode(const std::vector<int32_t>& ids, std::string* text) const {
  std::string bytes;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!is_valid_id(ids[i])) {
      return InvalidArgument("token id " + std::to_string(ids[i]) + " at index " +
                             std::to_string(i) + " is outside the vocabulary [0, " +
                             std::to_string(vocab_size()) + ")");
    }
    bytes += token_bytes_[ids[i]];
  }
  size_t start = 0;
  while (start < bytes.size() && static_cast<int>(start) < num_leading_spaces_stripped() &&
         bytes[start] == ' ') {
    ++start;
  }
  *text = to_valid_utf8(std::string_view(bytes).substr(start));
  return Status::Ok();
}

int32_t JsonTokenizer::token_to_id(std::string_view token) const {
  const auto it = added_ids_.find(token);
  if (it != added_ids_.end()) return it->second;
  return token.empty() ? -1 : model_->token_to_id(token);
}

std::string JsonTokenizer::id_to_token(int32_t id) const {
  return is_valid_id(id) ? tokens_[id] : std::string();
}

const std::string& JsonTokenizer::token_bytes(int32_t id) const {
  static const std::string kEmpty;
  return is_valid_id(id) ? token_bytes_[id] : kEmpty;
}

}  // namespace pvllm
