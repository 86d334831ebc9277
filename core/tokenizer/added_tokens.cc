// Reading and matching tokenizer.json's added tokens.
#include "core/tokenizer/added_tokens.h"

#include <algorithm>

namespace pvllm {

using namespace tokenizer_json;

Status parse_added_tokens(const json& root, std::vector<AddedToken>* out) {
  out->clear();
  const auto items = root.find("added_tokens");
  if (items == root.end() || items->is_null()) return Status::Ok();
  if (!items->is_array()) return malformed("added_tokens", "is not an array");
  const bool has_normalizer = root.contains("normalizer") && !root["normalizer"].is_null();
  for (size_t i = 0; i < items->size(); ++i) {
    const json& item = (*items)[i];
    const std::string path = index_path("added_tokens", i);
    if (!item.is_object()) return malformed(path, "is not an object");
    AddedToken token;
    int64_t id = -1;
    PVLLM_RETURN_IF_ERROR(read_int(item, path, "id", -1, &id));
    if (id < 0 || id >= (1 << 30)) return malformed(field_path(path, "id"), "is not a valid id");
    token.id = static_cast<int32_t>(id);
    PVLLM_RETURN_IF_ERROR(read_string(item, path, "content", &token.content));
    if (token.content.empty()) return malformed(field_path(path, "content"), "is empty");
    PVLLM_RETURN_IF_ERROR(read_bool(item, path, "special", false, &token.special));
    for (const char* option : {"single_word", "lstrip", "rstrip"}) {
      PVLLM_RETURN_IF_ERROR(require_one_of(item, path, option, {false}));
    }
    // Without a normalizer, matching the normalized text is matching the text.
    if (has_normalizer) PVLLM_RETURN_IF_ERROR(require_one_of(item, path, "normalized", {false}));
    out->push_back(std::move(token));
  }
  return Status::Ok();
}

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) : by_first_byte_(256) {
  for (const AddedToken& token : tokens) {
    by_first_byte_[static_cast<unsigned char>(token.content[0])].push_back(
        {token.content, token.id});
  }
  for (auto& candidates : by_first_byte_) {
    std::stable_sort(
        candidates.begin(), candidates.end(),
        [](const Candidate& a, const Candidate& b) { return a.content.size() > b.content.size(); });
  }
}

std::vector<TextSegment> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<TextSegment> segments;
  size_t text_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    const Candidate* found = nullptr;
    for (const Candidate& c : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
      if (text.compare(pos, c.content.size(), c.content) == 0) {
        found = &c;
        break;
      }
    }
    if (found == nullptr) {
      ++pos;
      continue;
    }
    if (pos > text_start) {
      segments.push_back({text.substr(text_start, pos - text_start), -1, text_start});
    }
    segments.push_back({text.substr(pos, found->content.size()), found->id, pos});
    pos += found->content.size();
    text_start = pos;
  }
  if (text_start < text.size()) {
    segments.push_back({text.substr(text_start), -1, text_start});
  }
  return segments;
}

}  // namespace pvllm
