// Matching text against a Grammar one byte at a time, the way a pushdown
// automaton does: the state is the set of stacks of grammar positions that
// the text so far can be in, plus a partially read UTF-8 character.
//
// Stacks are persistent lists in an arena, hash-consed: a node is (element,
// parent) and equal stacks are the same node, so a state is a small sorted
// vector of node ids and comparing states is comparing vectors. The top of
// every stack in a state is a character-set element; -1 is the empty stack
// (the root rule is complete). Below the top, a node can also stand for
// the rest of an %unordered term: which of its items came and how many
// (Progress, numbered from kProgressBase in this matcher).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/structured/grammar.h"
#include "core/structured/utf8_decoder.h"

namespace pvllm::structured {

inline constexpr int32_t kEmptyStack = -1;

struct MatchState {
  std::vector<int32_t> stacks;  // sorted, unique; empty = no way on (dead)
  Utf8Decoder partial;

  bool dead() const { return stacks.empty(); }
};

class Matcher {
 public:
  explicit Matcher(const Grammar* grammar) : g_(grammar) {}
  const Grammar* grammar() const { return g_; }

  // The state before any text.
  MatchState initial();
  // The state after byte `b`; dead() when no sentence continues this way.
  void advance(const MatchState& from, uint8_t b, MatchState* to);
  // Whether the text so far is a whole sentence.
  bool can_end(const MatchState& s) const {
    return s.partial.need == 0 && !s.stacks.empty() && s.stacks.front() == kEmptyStack;
  }
  // Whether the text so far is a whole sentence and nothing may follow.
  bool must_end(const MatchState& s) const { return can_end(s) && s.stacks.size() == 1; }

  // Which stacks of `s` (a state with no partial character and at most 64
  // stacks) take ASCII byte `b`, as bits: two bytes with the same bits
  // lead to the same state. false when `s` does not qualify.
  bool ascii_signature(const MatchState& s, uint8_t b, uint64_t* bits) const;

  // Whether `s` is in the middle of a character (at most 64 stacks) whose
  // remaining bytes may be any continuation bytes, and every set on top of
  // a stack holds either all or none of the characters it can still become:
  // then only which stacks take it matters (as bits), not which character
  // it will be, and partial states with the same stacks and bits have the
  // same futures.
  bool uniform_partial(const MatchState& s, uint64_t* bits) const;

  // How the stacks of `s` (a state with no partial character) take the
  // non-ASCII characters: kNone, kAll (each stack every one or none of
  // them, and some stack every one: then all lead to one same state), or
  // kMixed.
  enum class NonAscii { kNone, kAll, kMixed };
  NonAscii non_ascii(const MatchState& s) const;

  // A serialization of `s` that does not depend on the arena: equal keys
  // for equal states in any matcher of the same grammar.
  std::string key(const MatchState& s) const;
  // Work limits, against grammars built to be slow (thousands of optional
  // elements in a row, deep ambiguity): expansion steps left (each push of
  // a grammar position) and stacks per state. Past either the matcher is
  // exhausted: every later advance is dead, and callers must report it
  // rather than trust a dead state.
  static constexpr size_t kMaxStacks = 10000;
  void set_budget(uint64_t steps) {
    budget_ = steps;
    exhausted_ = false;
  }
  bool exhausted() const { return exhausted_; }

  // Drops every arena node `s` does not use (renumbering `s`: every other
  // state of this matcher is invalid afterwards); the arena otherwise only
  // grows.
  void compact(MatchState* s);
  size_t arena_size() const { return nodes_.size(); }

 private:
  struct Node {
    uint32_t element;  // a position in the grammar's elements, or a Progress
    int32_t parent;
  };
  // Where an %unordered or %ordered term is: the items that came (those
  // that may come once), how many came in all, counted up to what its
  // bounds tell apart, and in an %ordered term the last item that came. A
  // node's element kProgressBase + i is progress_[i].
  static constexpr uint32_t kProgressBase = 1u << 31;
  struct Progress {
    uint32_t unordered = 0;
    uint32_t count = 0;
    uint32_t last = 0;  // %ordered: the last item's index + 1, 0 before the first
    std::bitset<kMaxUnorderedItems> used;
    bool operator==(const Progress&) const = default;
  };
  struct ProgressHash {
    size_t operator()(const Progress& p) const;
  };
  uint32_t progress_id(const Progress& p);
  // Expands the rest of an %unordered term: each item that may still come
  // (after the separator unless it is the first), and the term's end when
  // it may end.
  void expand_progress(int32_t parent, uint32_t id, std::vector<int32_t>* out);
  // Whether a term whose item `item` just came (giving `p`) can still end.
  bool can_end_after(const Unordered& u, const Progress& p, size_t item) const;
  int32_t intern(uint32_t element, int32_t parent);
  // Re-interns the stacks of `s`, whose nodes are in `old`, here.
  void copy_stacks(const std::vector<Node>& old, MatchState* s);
  // Pushes element `pos` on `parent` and expands until character sets are
  // on top, appending the resulting stacks to `out`. Iterative (work_), so
  // a long run of elements that match nothing costs no native stack.
  void expand(int32_t parent, uint32_t pos, std::vector<int32_t>* out);
  void advance_char(const std::vector<int32_t>& from, uint32_t cp, std::vector<int32_t>* to);
  bool any_intersects(const std::vector<int32_t>& stacks, uint32_t lo, uint32_t hi) const;

  // Open addressing over (element, parent) keys: interning is most of the
  // work of a mask's trie walk, and std::unordered_map allocates per node.
  static constexpr uint64_t kNoKey = ~uint64_t{0};
  void grow();

  const Grammar* g_;
  std::vector<Node> nodes_;
  std::vector<uint64_t> keys_;  // kNoKey = empty; capacity a power of two
  std::vector<int32_t> ids_;
  std::vector<std::pair<int32_t, uint32_t>> work_;  // expand's (parent, position) to do
  std::vector<Progress> progress_;
  std::unordered_map<Progress, uint32_t, ProgressHash> progress_ids_;
  uint64_t budget_ = ~uint64_t{0};
  bool exhausted_ = false;
};

}  // namespace pvllm::structured
