#include "core/structured/token_mask.h"

#include <array>
#include <string>
#include <unordered_map>
#include <vector>

namespace pvllm::structured {
namespace {

constexpr int32_t kDead = -1;
constexpr int32_t kUnknown = -2;
// The states one walk meets, each once, with their transitions by byte as
// they are found: most trie nodes then cost one table lookup, since tokens
// that share no prefix still lead to the same few states (every letter
// inside a JSON string, say). A state is its stacks and partial character;
// stacks are hash-consed in the matcher, so their ids identify them.
class StateMemo {
 public:
  StateMemo(Matcher* m, size_t max_states) : m_(m), max_states_(max_states) {}

  // The id of `s` (kDead for a dead state); false when the memo is full.
  bool intern(const MatchState& s, int32_t* id) {
    if (s.dead()) {
      *id = kDead;
      return true;
    }
    std::string key(reinterpret_cast<const char*>(s.stacks.data()),
                    s.stacks.size() * sizeof(int32_t));
    key.push_back(static_cast<char>(s.partial.need));
    key.push_back(static_cast<char>(s.partial.length));
    key.append(reinterpret_cast<const char*>(&s.partial.value), sizeof s.partial.value);
    auto it = ids_.find(key);
    if (it != ids_.end()) {
      *id = it->second;
      return true;
    }
    if (states_.size() >= max_states_) return false;
    *id = static_cast<int32_t>(states_.size());
    ids_.emplace(std::move(key), *id);
    states_.push_back(s);
    next_.emplace_back();
    next_.back().fill(kUnknown);
    return true;
  }

  // The state after byte `b` from state `from`; false when the memo is full.
  bool step(int32_t from, uint8_t b, int32_t* to) {
    int32_t& t = next_[static_cast<size_t>(from)][b];
    if (t == kUnknown) {
      m_->advance(states_[static_cast<size_t>(from)], b, &scratch_);
      int32_t id = kDead;
      if (!intern(scratch_, &id)) return false;
      next_[static_cast<size_t>(from)][b] = id;  // `t` may have moved with next_
      *to = id;
      return true;
    }
    *to = t;
    return true;
  }

 private:
  Matcher* m_;
  size_t max_states_;
  std::vector<MatchState> states_;
  std::vector<std::array<int32_t, 256>> next_;
  std::unordered_map<std::string, int32_t> ids_;
  MatchState scratch_;
};

void set_tokens(const VocabTrie& trie, const VocabTrie::Node& n, uint64_t* mask) {
  const std::vector<int32_t>& ids = trie.token_ids();
  for (uint32_t t = n.tokens_begin; t < n.tokens_end; ++t) {
    auto id = static_cast<uint32_t>(ids[t]);
    mask[id >> 6] |= uint64_t{1} << (id & 63);
  }
}

enum class Next { kAlive, kDead, kGiveUp };

// One walk over the trie in pre-order. `advance(from, byte, &to)` makes the
// state after a byte; a dead one skips the node's subtree. level[d] is the
// state after the first d bytes of the current path, stripped[d] whether
// those bytes are all leading spaces the detokenizer drops. False when
// `advance` gave up (the mask is then partly set).
template <typename State, typename Advance>
bool walk(const VocabTrie& trie, int leading_spaces, const State& start, Advance advance,
          uint64_t* mask) {
  const std::vector<VocabTrie::Node>& nodes = trie.nodes();
  std::vector<State> level(trie.max_depth() + 1);
  std::vector<uint8_t> stripped(trie.max_depth() + 1, 0);
  level[0] = start;
  stripped[0] = leading_spaces > 0;
  for (size_t i = 0; i < nodes.size();) {
    const VocabTrie::Node& n = nodes[i];
    const uint32_t d = n.depth;
    stripped[d] = stripped[d - 1] && n.byte == ' ' && static_cast<int>(d) <= leading_spaces;
    if (stripped[d]) {
      level[d] = level[0];
    } else {
      const Next next = advance(level[d - 1], n.byte, &level[d]);
      if (next == Next::kGiveUp) return false;
      if (next == Next::kDead) {
        i = n.subtree_end;
        continue;
      }
    }
    set_tokens(trie, n, mask);
    ++i;
  }
  return true;
}

}  // namespace

void compute_token_mask(Matcher* matcher, const MatchState& state, int leading_spaces,
                        const VocabTrie& trie, uint64_t* mask, size_t max_memo_states) {
  StateMemo memo(matcher, max_memo_states);
  int32_t start = kDead;
  if (memo.intern(state, &start)) {
    std::vector<uint64_t> memo_mask(((static_cast<size_t>(trie.vocab_size()) + 63) / 64), 0);
    auto by_memo = [&memo](int32_t from, uint8_t b, int32_t* to) {
      if (!memo.step(from, b, to)) return Next::kGiveUp;
      return *to == kDead ? Next::kDead : Next::kAlive;
    };
    if (walk(trie, leading_spaces, start, by_memo, memo_mask.data())) {
      for (size_t w = 0; w < memo_mask.size(); ++w) mask[w] |= memo_mask[w];
      return;
    }
  }
  // A grammar with more live states than the memo holds: every node
  // advances its own state.
  auto by_matcher = [matcher](const MatchState& from, uint8_t b, MatchState* to) {
    matcher->advance(from, b, to);
    return to->dead() ? Next::kDead : Next::kAlive;
  };
  walk(trie, leading_spaces, state, by_matcher, mask);
}

}  // namespace pvllm::structured
