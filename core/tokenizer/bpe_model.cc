// BPE merging with a priority queue of adjacent pairs over a linked list of
// symbols: O(n log n) per word.
#include "core/tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>
#include <queue>
#include <utility>

#include "core/tokenizer/utf8.h"

namespace pvllm {
namespace {

using namespace tokenizer_json;

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// One candidate merge in the queue: lowest rank first, then leftmost.
struct Candidate {
  int32_t rank;
  int32_t left;  // symbol index
  int32_t left_id, right_id;
  bool operator>(const Candidate& o) const {
    return rank != o.rank ? rank > o.rank : left > o.left;
  }
};

// A merge line: "left right" or ["left", "right"].
Status split_merge(const json& item, const std::string& path, std::string* left,
                   std::string* right) {
  if (item.is_string()) {
    const std::string& line = item.get_ref<const std::string&>();
    const size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
      return malformed(path, "is not two tokens separated by one space");
    }
    *left = line.substr(0, space);
    *right = line.substr(space + 1);
    return Status::Ok();
  }
  if (item.is_array() && item.size() == 2 && item[0].is_string() && item[1].is_string()) {
    *left = item[0].get<std::string>();
    *right = item[1].get<std::string>();
    return Status::Ok();
  }
  return malformed(path, "is not a pair of tokens");
}

}  // namespace

Status BpeModel::parse(const json& config, std::unique_ptr<BpeModel>* out) {
  const std::string path = "model";
  if (!config.is_object()) return malformed(path, "is missing or not an object");
  std::string type;
  PVLLM_RETURN_IF_ERROR(read_string(config, path, "type", &type));
  if (type != "BPE") return unsupported(field_path(path, "type"), type);
  PVLLM_RETURN_IF_ERROR(require_one_of(config, path, "dropout", {0, 0.0}));
  PVLLM_RETURN_IF_ERROR(require_one_of(config, path, "continuing_subword_prefix", {""}));
  PVLLM_RETURN_IF_ERROR(require_one_of(config, path, "end_of_word_suffix", {""}));

  auto model = std::unique_ptr<BpeModel>(new BpeModel());
  PVLLM_RETURN_IF_ERROR(read_bool(config, path, "byte_fallback", false, &model->byte_fallback_));
  PVLLM_RETURN_IF_ERROR(read_bool(config, path, "ignore_merges", false, &model->ignore_merges_));
  PVLLM_RETURN_IF_ERROR(read_bool(config, path, "fuse_unk", false, &model->fuse_unk_));

  const auto vocab = config.find("vocab");
  if (vocab == config.end() || !vocab->is_object()) {
    return malformed(field_path(path, "vocab"), "is missing or not an object");
  }
  model->vocab_.reserve(vocab->size());
  // The id table is as long as the largest id: ids far beyond the number of
  // entries would make a small file allocate gigabytes (found by
  // fuzz_tokenizer_json), so they must stay below twice that number, plus
  // room for padding.
  const int64_t max_id =
      std::min<int64_t>(int64_t{1} << 30, 2 * static_cast<int64_t>(vocab->size()) + kIdSlack);
  for (const auto& [token, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= max_id) {
      return malformed(field_path(path, "vocab") + "[" + json(token).dump() + "]",
                       "is not a valid id (0 to " + std::to_string(max_id - 1) +
                           " for a vocab of " + std::to_string(vocab->size()) + " entries)");
    }
    const auto index = static_cast<int32_t>(id.get<int64_t>());
    model->vocab_[token] = index;
    if (static_cast<size_t>(index) >= model->tokens_.size()) model->tokens_.resize(index + 1);
    model->tokens_[index] = token;
  }
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", byte);
    model->byte_ids_[byte] = model->token_to_id(name);
  }
  if (config.contains("unk_token") && !config["unk_token"].is_null()) {
    std::string unk;
    PVLLM_RETURN_IF_ERROR(read_string(config, path, "unk_token", &unk));
    model->unk_id_ = model->token_to_id(unk);
    if (model->unk_id_ < 0) {
      return malformed(field_path(path, "unk_token"), "names a token missing from the vocab");
    }
  }

  const json* merges = nullptr;
  PVLLM_RETURN_IF_ERROR(read_array(config, path, "merges", &merges));
  model->merges_.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const std::string where = index_path(field_path(path, "merges"), i);
    std::string left, right;
    PVLLM_RETURN_IF_ERROR(split_merge((*merges)[i], where, &left, &right));
    const int32_t left_id = model->token_to_id(left), right_id = model->token_to_id(right);
    const int32_t merged_id = model->token_to_id(left + right);
    if (left_id < 0 || right_id < 0 || merged_id < 0) {
      return malformed(where, "names a token missing from the vocab");
    }
    // The first listing of a pair holds its rank.
    model->merges_.emplace(pair_key(left_id, right_id), Merge{static_cast<int32_t>(i), merged_id});
  }
  *out = std::move(model);
  return Status::Ok();
}

Status BpeModel::build(const std::vector<std::string>& tokens,
                       const std::vector<std::pair<std::string, std::string>>& merges,
                       bool ignore_merges, std::unique_ptr<BpeModel>* out) {
  auto model = std::unique_ptr<BpeModel>(new BpeModel());
  model->ignore_merges_ = ignore_merges;
  model->tokens_ = tokens;
  model->vocab_.reserve(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (!model->vocab_.emplace(tokens[id], static_cast<int32_t>(id)).second) {
      return Status(StatusCode::kTokenizerError,
                    "token " + std::to_string(id) + " (\"" + tokens[id] + "\") is listed twice");
    }
  }
  std::fill(std::begin(model->byte_ids_), std::end(model->byte_ids_), -1);
  model->merges_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto& [left, right] = merges[i];
    const int32_t left_id = model->token_to_id(left), right_id = model->token_to_id(right);
    const int32_t merged_id = model->token_to_id(left + right);
    if (left_id < 0 || right_id < 0 || merged_id < 0) {
      return Status(StatusCode::kTokenizerError,
                    "merge " + std::to_string(i) + " (\"" + left + " " + right +
                        "\") names a token missing from the vocabulary");
    }
    model->merges_.emplace(pair_key(left_id, right_id), Merge{static_cast<int32_t>(i), merged_id});
  }
  *out = std::move(model);
  return Status::Ok();
}

int32_t BpeModel::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

Status BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>* symbols) const {
  bool last_was_unk = false;
  for (size_t pos = 0; pos < word.size();) {
    const size_t length =
        std::min(utf8_char_length(static_cast<unsigned char>(word[pos])), word.size() - pos);
    const std::string_view ch = word.substr(pos, length);
    pos += length;
    const int32_t id = token_to_id(ch);
    if (id >= 0) {
      symbols->push_back(id);
      last_was_unk = false;
      continue;
    }
    bool all_bytes = byte_fallback_;
    for (size_t i = 0; all_bytes && i < ch.size(); ++i) {
      all_bytes = byte_ids_[static_cast<unsigned char>(ch[i])] >= 0;
    }
    if (all_bytes) {
      for (const char c : ch) symbols->push_back(byte_ids_[static_cast<unsigned char>(c)]);
      last_was_unk = false;
      continue;
    }
    if (unk_id_ < 0) {
      return Status(StatusCode::kTokenizerError,
                    "the character \"" + std::string(ch) +
                        "\" has no token, and the tokenizer has neither byte fallback nor an "
                        "unknown token");
    }
    if (!(fuse_unk_ && last_was_unk)) symbols->push_back(unk_id_);
    last_was_unk = true;
  }
  return Status::Ok();
}

Status BpeModel::merge_word(std::string_view word, std::vector<int32_t>* ids) const {
  std::vector<int32_t> id;  // [num symbols]: the symbol's token, -1 once merged away
  PVLLM_RETURN_IF_ERROR(initial_symbols(word, &id));
  const auto n = static_cast<int32_t>(id.size());
  std::vector<int32_t> next(n), prev(n);
  for (int32_t i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto offer = [&](int32_t left) {
    const int32_t right = next[left];
    if (right < 0) return;
    const auto it = merges_.find(pair_key(id[left], id[right]));
    if (it != merges_.end()) queue.push({it->second.rank, left, id[left], id[right]});
  };
  for (int32_t i = 0; i + 1 < n; ++i) offer(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    const int32_t right = next[c.left];
    // Stale when either side has changed since the candidate was queued.
    if (id[c.left] != c.left_id || right < 0 || id[right] != c.right_id) continue;
    id[c.left] = merges_.find(pair_key(c.left_id, c.right_id))->second.merged_id;
    id[right] = -1;
    next[c.left] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.left;
    if (prev[c.left] >= 0) offer(prev[c.left]);
    offer(c.left);
  }
  for (int32_t i = 0; i >= 0 && i < n; i = next[i]) ids->push_back(id[i]);
  return Status::Ok();
}

Status BpeModel::tokenize(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return Status::Ok();
  if (ignore_merges_) {
    const int32_t id = token_to_id(word);
    if (id >= 0) {
      ids->push_back(id);
      return Status::Ok();
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(word);
    if (it != cache_.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return Status::Ok();
    }
  }
  std::vector<int32_t> word_ids;
  PVLLM_RETURN_IF_ERROR(merge_word(word, &word_ids));
  ids->insert(ids->end(), word_ids.begin(), word_ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(std::string(word), std::move(word_ids));
  }
  return Status::Ok();
}

}  // namespace pvllm
