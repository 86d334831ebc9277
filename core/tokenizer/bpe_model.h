// The BPE model of tokenizer.json: a vocabulary, ranked merges, byte
// fallback and the unknown token. tokenize() merges one pre-tokenized word:
// the word starts as its characters (or their <0xXX> byte tokens, or the
// unknown token), and the lowest-ranked adjacent pair is merged until no
// listed pair remains. With ignore_merges (Llama 3), a word that is itself
// in the vocabulary is that one token. Results for short words are cached.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/tokenizer/json_fields.h"
#include "core/tokenizer/string_map.h"

namespace pvllm {

class BpeModel {
 public:
  // Ids may run this far past twice the number of entries (padding, holes);
  // the id tables are as long as the largest id.
  static constexpr int64_t kIdSlack = 1 << 16;
  // Builds the model from the "model" object of tokenizer.json. Options
  // other than those listed above (dropout, a word prefix or suffix) are
  // Unsupported.
  static Status parse(const nlohmann::json& config, std::unique_ptr<BpeModel>* out);

  // The model from its parts, for vocabularies stored elsewhere (a GGUF
  // file's tokenizer.ggml.tokens and .merges): `tokens` by id (none empty,
  // none twice), `merges` as (left, right) by rank, no byte fallback, no
  // unknown token. A merge naming a token missing from `tokens` (left,
  // right or their concatenation) is a TokenizerError naming its index.
  static Status build(const std::vector<std::string>& tokens,
                      const std::vector<std::pair<std::string, std::string>>& merges,
                      bool ignore_merges, std::unique_ptr<BpeModel>* out);

  // Appends the ids of `word` to *ids. A character with no token, no byte
  // fallback and no unknown token is a TokenizerError.
  Status tokenize(std::string_view word, std::vector<int32_t>* ids) const;

  // The vocabulary: token -> id and id -> token (ids may have gaps, "").
  int32_t token_to_id(std::string_view token) const;
  const std::vector<std::string>& tokens() const { return tokens_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };
  Status add_merge(const std::string& left, const std::string& right, int32_t rank);
  Status merge_word(std::string_view word, std::vector<int32_t>* ids) const;
  // The initial symbols of `word`: its characters as ids.
  Status initial_symbols(std::string_view word, std::vector<int32_t>* symbols) const;

  StringMap<int32_t> vocab_;
  std::vector<std::string> tokens_;             // [max id + 1]
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) -> merge
  int32_t byte_ids_[256];                       // <0xXX> ids, -1 when absent
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  bool fuse_unk_ = false;
  int32_t unk_id_ = -1;

  // Words up to kMaxCachedWordBytes -> their ids; cleared when full.
  static constexpr size_t kMaxCachedWordBytes = 64;
  static constexpr size_t kMaxCacheEntries = 1 << 16;
  mutable std::mutex cache_mutex_;
  mutable StringMap<std::vector<int32_t>> cache_;
};

}  // namespace pvllm
