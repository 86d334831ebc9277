// Which tokens a grammar state lets through: one walk over the vocabulary
// trie, advancing the state byte by byte and skipping every subtree whose
// prefix the grammar refuses.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/structured/matcher.h"
#include "core/structured/vocab_trie.h"

namespace pvllm::structured {

inline constexpr size_t kMaxMemoStates = size_t{1} << 14;

// The states a walk meets, each once, with their transitions by byte as
// they are found: most trie nodes then cost one table lookup, since tokens
// that share no prefix still lead to the same few states (every letter
// inside a JSON string, say). A state is its stacks and partial character;
// stacks are hash-consed in the matcher, so their ids identify them (valid
// until the matcher is compacted). Each state costs a 1 KiB row. (Kept
// from walk to walk per sequence it saved nothing measurable and held
// megabytes per sequence, so each mask's walk starts a fresh one.)
class MaskMemo {
 public:
  explicit MaskMemo(size_t max_states = kMaxMemoStates) : max_states_(max_states) {}

  static constexpr int32_t kDead = -1;
  // The id of `s` (kDead for a dead state); false when the memo is full.
  bool intern(const Matcher& matcher, const MatchState& s, int32_t* id);
  // The state after byte `b` from state `from`; false when the memo is full.
  bool step(Matcher* matcher, int32_t from, uint8_t b, int32_t* to);
  void clear();
  size_t size() const { return states_.size(); }
  const MatchState& state(int32_t id) const { return states_[static_cast<size_t>(id)]; }
  // Whether every plain byte and every non-ASCII character lead state `id`
  // back to itself (inside a JSON string or key without bounds); false
  // also when the memo fills up finding out.
  bool loops_on_text(Matcher* matcher, int32_t id);

 private:
  static constexpr int32_t kUnknown = -2;
  size_t max_states_;
  std::vector<MatchState> states_;
  std::vector<std::array<int32_t, 256>> next_;
  // Per state, the next state of each ASCII signature met (Matcher::
  // ascii_signature): the letters of a string all lead to one state, found
  // by one advance instead of one per letter.
  std::vector<std::vector<std::pair<uint64_t, int32_t>>> by_signature_;
  std::vector<int8_t> loops_on_text_;  // per state: -1 unknown, 0, 1
  std::unordered_map<std::string, int32_t> ids_;
  MatchState scratch_;
};

// Sets bit `id` of `mask` (trie.vocab_size() bits, cleared by the caller)
// for each token whose bytes, after up to `leading_spaces` leading spaces
// are dropped, continue `state`. `memo` (a fresh one when null; a kept one
// must belong to this matcher) is cleared and the walk repeated when it
// fills up; a walk that alone needs more states than it holds advances
// every node's own state instead.
void compute_token_mask(Matcher* matcher, const MatchState& state, int leading_spaces,
                        const VocabTrie& trie, uint64_t* mask, MaskMemo* memo = nullptr);

}  // namespace pvllm::structured
