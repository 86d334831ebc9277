#include "core/structured/token_mask.h"

#include <algorithm>

namespace pvllm::structured {

bool MaskMemo::intern(const Matcher& matcher, const MatchState& s, int32_t* id) {
  if (s.dead()) {
    *id = kDead;
    return true;
  }
  std::string key(reinterpret_cast<const char*>(s.stacks.data()),
                  s.stacks.size() * sizeof(int32_t));
  key.push_back(static_cast<char>(s.partial.need));
  key.push_back(static_cast<char>(s.partial.length));
  // A partial character whose exact value cannot change what follows
  // (Matcher::uniform_partial) is keyed by the stacks that take it: the
  // thousands of CJK prefixes inside a JSON string are then a few states.
  uint64_t bits = 0;
  if (matcher.uniform_partial(s, &bits)) {
    key.push_back('u');
    key.append(reinterpret_cast<const char*>(&bits), sizeof bits);
  } else {
    key.append(reinterpret_cast<const char*>(&s.partial.value), sizeof s.partial.value);
  }
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
  by_signature_.emplace_back();
  loops_on_text_.push_back(-1);
  return true;
}

bool MaskMemo::loops_on_text(Matcher* matcher, int32_t id) {
  const auto at = static_cast<size_t>(id);
  if (loops_on_text_[at] >= 0) return loops_on_text_[at] != 0;
  // One plain byte first: most states fail there.
  int32_t to = kDead;
  bool loops = step(matcher, id, 'a', &to) && to == id;
  for (int b = 0x20; b < 0x7F && loops; ++b) {
    if (!VocabTrie::is_plain(static_cast<uint8_t>(b))) continue;
    loops = step(matcher, id, static_cast<uint8_t>(b), &to) && to == id;
  }
  loops = loops && matcher->non_ascii(states_[at]) == Matcher::NonAscii::kAll;
  int32_t mid = kDead;
  loops = loops && step(matcher, id, 0xC3, &mid) && mid != kDead &&  // U+00E9
          step(matcher, mid, 0xA9, &to) && to == id;
  loops_on_text_[at] = loops ? 1 : 0;
  return loops;
}

bool MaskMemo::step(Matcher* matcher, int32_t from, uint8_t b, int32_t* to) {
  const int32_t known = next_[static_cast<size_t>(from)][b];
  if (known != kUnknown) {
    *to = known;
    return true;
  }
  const auto f = static_cast<size_t>(from);
  uint64_t signature = 0;
  const bool grouped = matcher->ascii_signature(states_[f], b, &signature);
  if (grouped) {
    for (const auto& [bits, id] : by_signature_[f]) {
      if (bits == signature) {
        next_[f][b] = *to = id;
        return true;
      }
    }
  }
  matcher->advance(states_[f], b, &scratch_);
  if (!intern(*matcher, scratch_, to)) return false;
  next_[f][b] = *to;
  if (grouped) by_signature_[f].emplace_back(signature, *to);
  return true;
}

void MaskMemo::clear() {
  states_.clear();
  next_.clear();
  by_signature_.clear();
  loops_on_text_.clear();
  ids_.clear();
}

namespace {

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
//
// `plain`: when not null, plain[j] is the state after any j plain bytes
// (VocabTrie::is_plain) from `start`, alive for every j up to the trie's
// depth, and the caller sets every token of trie.plain_mask(): a node
// reached by plain bytes alone is then in plain[depth] without advancing,
// and a subtree with nothing but plain bytes below is skipped whole. Inside
// a JSON string (bounded by maxLength or not) that is most of the
// vocabulary.
//
// `loops(state)`: whether every text character leads `state` back to
// itself; a node in such a state whose tail is text (VocabTrie::Node::
// tail_text) has its whole subtree allowed, without walking it. Asked
// only of nodes with a large subtree.
template <typename State, typename Advance, typename Loops>
bool walk(const VocabTrie& trie, int leading_spaces, const State& start, Advance advance,
          Loops loops, uint64_t* mask, const std::vector<State>* plain = nullptr) {
  constexpr uint32_t kLargeSubtree = 32;
  const std::vector<VocabTrie::Node>& nodes = trie.nodes();
  std::vector<State> level(trie.max_depth() + 1);
  std::vector<uint8_t> stripped(trie.max_depth() + 1, 0);
  std::vector<uint8_t> plain_path(trie.max_depth() + 1, 0);
  level[0] = start;
  stripped[0] = leading_spaces > 0;
  plain_path[0] = plain != nullptr && leading_spaces == 0;
  for (size_t i = 0; i < nodes.size();) {
    const VocabTrie::Node& n = nodes[i];
    const uint32_t d = n.depth;
    plain_path[d] = plain_path[d - 1] && VocabTrie::is_plain(n.byte);
    if (plain_path[d]) {
      if (n.plain_below) {
        i = n.subtree_end;  // all in plain_mask()
        continue;
      }
      level[d] = (*plain)[d];
      ++i;  // this node's own tokens are plain too
      continue;
    }
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
      if (n.tail_text && n.subtree_end - i >= kLargeSubtree && loops(level[d])) {
        const std::vector<int32_t>& ids = trie.token_ids();
        for (uint32_t t = n.tokens_begin, end = trie.subtree_tokens_end(i); t < end; ++t) {
          const auto id = static_cast<uint32_t>(ids[t]);
          mask[id >> 6] |= uint64_t{1} << (id & 63);
        }
        i = n.subtree_end;
        continue;
      }
    }
    set_tokens(trie, n, mask);
    ++i;
  }
  return true;
}

// Node `first` (reached in state `before` from its parent) and its
// subtree, as walk() takes them: for a walk from a state that takes text
// alike, which needs only the trie's frontier (VocabTrie::frontier).
template <typename Advance, typename Loops>
bool walk_subtree(const VocabTrie& trie, uint32_t first, int32_t before, Advance advance,
                  Loops loops, std::vector<int32_t>* level, uint64_t* mask) {
  constexpr uint32_t kLargeSubtree = 32;
  const std::vector<VocabTrie::Node>& nodes = trie.nodes();
  const uint32_t base = nodes[first].depth;
  (*level)[base - 1] = before;
  for (size_t i = first; i < nodes[first].subtree_end;) {
    const VocabTrie::Node& n = nodes[i];
    const uint32_t d = n.depth;
    const Next next = advance((*level)[d - 1], n.byte, &(*level)[d]);
    if (next == Next::kGiveUp) return false;
    if (next == Next::kDead) {
      i = n.subtree_end;
      continue;
    }
    if (n.tail_text && n.subtree_end - i >= kLargeSubtree && loops((*level)[d])) {
      const std::vector<int32_t>& ids = trie.token_ids();
      for (uint32_t t = n.tokens_begin, end = trie.subtree_tokens_end(i); t < end; ++t) {
        const auto id = static_cast<uint32_t>(ids[t]);
        mask[id >> 6] |= uint64_t{1} << (id & 63);
      }
      i = n.subtree_end;
      continue;
    }
    set_tokens(trie, n, mask);
    ++i;
  }
  return true;
}

// A state that sends every character but a few plain ones to one state
// that takes text alike (a key that may be any name but the listed ones,
// after its first character): every text token whose first character is
// not one of the few is in, and the walk visits only the subtrees of
// those few first bytes, of the bytes that are not text, and the trie's
// frontier. *split is false (and nothing done) when `start` is not such
// a state; false when the memo filled up.
bool split_text_walk(Matcher* matcher, int32_t start, const VocabTrie& trie, MaskMemo* memo,
                     uint64_t* mask, bool* split) {
  constexpr int kMaxExceptions = 16;
  *split = false;
  if (matcher->non_ascii(memo->state(start)) != Matcher::NonAscii::kAll) return true;
  int32_t mid = MaskMemo::kDead, text = MaskMemo::kDead;
  if (!memo->step(matcher, start, 0xC3, &mid)) return false;  // U+00E9
  if (mid == MaskMemo::kDead) return true;
  if (!memo->step(matcher, mid, 0xA9, &text)) return false;
  if (text == MaskMemo::kDead || !memo->loops_on_text(matcher, text)) return true;
  uint8_t exceptions[kMaxExceptions];
  int num_exceptions = 0;
  for (int b = 0x20; b < 0x7F; ++b) {
    if (!VocabTrie::is_plain(static_cast<uint8_t>(b))) continue;
    int32_t to = MaskMemo::kDead;
    if (!memo->step(matcher, start, static_cast<uint8_t>(b), &to)) return false;
    if (to == text) continue;
    if (num_exceptions == kMaxExceptions) return true;
    exceptions[num_exceptions++] = static_cast<uint8_t>(b);
  }
  *split = true;
  auto by_memo = [matcher, memo](int32_t from, uint8_t b, int32_t* to) {
    if (!memo->step(matcher, from, b, to)) return Next::kGiveUp;
    return *to == MaskMemo::kDead ? Next::kDead : Next::kAlive;
  };
  auto on_text = [matcher, memo](int32_t id) { return memo->loops_on_text(matcher, id); };
  const std::vector<uint64_t>& all = trie.text_mask(VocabTrie::kAnyLength);
  for (size_t w = 0; w < all.size(); ++w) mask[w] |= all[w];
  // The few first bytes' subtrees: out of the text mask, then walked; and
  // the subtrees of first bytes that are not text.
  const std::vector<VocabTrie::Node>& nodes = trie.nodes();
  const std::vector<int32_t>& ids = trie.token_ids();
  bool walked[256] = {};
  for (int k = 0; k < num_exceptions; ++k) {
    const int32_t node = trie.first_byte_node(exceptions[k]);
    if (node < 0) continue;
    walked[exceptions[k]] = true;
    for (uint32_t t = nodes[node].tokens_begin, end = trie.subtree_tokens_end(node); t < end; ++t) {
      const auto id = static_cast<uint32_t>(ids[t]);
      mask[id >> 6] &= ~(uint64_t{1} << (id & 63));
    }
  }
  std::vector<int32_t> level(trie.max_depth() + 1);
  for (int b = 0; b < 256; ++b) {
    const int32_t node = trie.first_byte_node(static_cast<uint8_t>(b));
    if (node < 0) continue;
    if (!nodes[node].text) walked[b] = true;
    if (walked[b] &&
        !walk_subtree(trie, static_cast<uint32_t>(node), start, by_memo, on_text, &level, mask)) {
      return false;
    }
  }
  // Below the frontier of the other first bytes, whose text leads to `text`.
  for (const VocabTrie::Frontier& f : trie.frontier()) {
    if (!f.boundary || nodes[f.node].depth == 1 || walked[f.first_byte]) continue;
    if (!walk_subtree(trie, f.node, text, by_memo, on_text, &level, mask)) return false;
  }
  return true;
}

bool walk_memoized(Matcher* matcher, const MatchState& state, int leading_spaces,
                   const VocabTrie& trie, MaskMemo* memo, std::vector<uint64_t>* mask) {
  int32_t start = MaskMemo::kDead;
  if (!memo->intern(*matcher, state, &start)) return false;
  auto by_memo = [matcher, memo](int32_t from, uint8_t b, int32_t* to) {
    if (!memo->step(matcher, from, b, to)) return Next::kGiveUp;
    return *to == MaskMemo::kDead ? Next::kDead : Next::kAlive;
  };
  // The states after 0, 1, ... plain bytes, while every plain byte leads to
  // the same live one; a state that leads back to itself holds from there
  // (`loops`), and a chain may end in a state that takes no plain byte
  // (`ends`: a string of at most so many characters).
  std::vector<int32_t> plain;
  bool loops = false, ends = false;
  if (leading_spaces == 0) {
    plain.push_back(start);
    while (plain.size() <= trie.max_depth()) {
      const int32_t from = plain.back();
      int32_t common = MaskMemo::kDead;
      bool same = true;
      for (int b = 0x20; b < 0x7F && same; ++b) {
        if (!VocabTrie::is_plain(static_cast<uint8_t>(b))) continue;
        int32_t to = MaskMemo::kDead;
        if (!memo->step(matcher, from, static_cast<uint8_t>(b), &to)) return false;
        same = b == 0x20 || to == common;
        common = to;
      }
      if (!same) break;
      if (common == MaskMemo::kDead) {
        ends = true;
        break;
      }
      if (common == from) {
        loops = true;
        plain.resize(trie.max_depth() + 1, from);
        break;
      }
      plain.push_back(common);
    }
  }
  const bool plain_known = plain.size() == trie.max_depth() + 1;
  // Text tokens of up to n characters all continue a state whose chain
  // takes every plain byte and every non-ASCII character alike for n
  // steps and no character after (a JSON string of at most n more
  // characters; n unbounded when the chain loops): the characters are
  // uniform (Matcher::NonAscii::kAll), so one of them shows where all go.
  bool text = false;
  uint32_t limit = VocabTrie::kAnyLength;
  if (plain_known || ends) {
    size_t steps = plain.size() - 1;  // states that must take every character
    if (loops) {
      steps = 0;
      while (plain[steps] != plain[steps + 1]) ++steps;
      ++steps;
    }
    text = true;
    for (size_t k = 0; k < steps && text; ++k) {
      int32_t mid = MaskMemo::kDead, end = MaskMemo::kDead;
      text = matcher->non_ascii(memo->state(plain[k])) == Matcher::NonAscii::kAll;
      if (!text) break;
      if (!memo->step(matcher, plain[k], 0xC3, &mid)) return false;  // U+00E9
      if (mid != MaskMemo::kDead && !memo->step(matcher, mid, 0xA9, &end)) return false;
      text = end == plain[k + 1];
    }
    if (text && ends) {
      text = matcher->non_ascii(memo->state(plain.back())) == Matcher::NonAscii::kNone;
      limit = static_cast<uint32_t>(plain.size() - 1);
    }
  }
  if (text || plain_known) {
    const std::vector<uint64_t>& bits = text ? trie.text_mask(limit) : trie.plain_mask();
    for (size_t w = 0; w < bits.size(); ++w) (*mask)[w] |= bits[w];
  }
  auto on_text = [matcher, memo](int32_t id) { return memo->loops_on_text(matcher, id); };
  if (text) {
    // Every text token of up to `limit` characters is in; what is left
    // hangs below the frontier, each reached from the state after its
    // parent's characters (plain[chars]).
    std::vector<int32_t> level(trie.max_depth() + 1);
    for (const VocabTrie::Frontier& f : trie.frontier()) {
      if (!f.boundary || f.chars >= plain.size()) continue;
      if (!walk_subtree(trie, f.node, plain[f.chars], by_memo, on_text, &level, mask->data())) {
        return false;
      }
    }
    return true;
  }
  if (leading_spaces == 0 && !plain_known) {
    bool split = false;
    if (!split_text_walk(matcher, start, trie, memo, mask->data(), &split)) return false;
    if (split) return true;
  }
  return walk(trie, leading_spaces, start, by_memo, on_text, mask->data(),
              plain_known ? &plain : nullptr);
}

}  // namespace

void compute_token_mask(Matcher* matcher, const MatchState& state, int leading_spaces,
                        const VocabTrie& trie, uint64_t* mask, MaskMemo* memo) {
  MaskMemo local;
  if (memo == nullptr) memo = &local;
  const size_t words = (static_cast<size_t>(trie.vocab_size()) + 63) / 64;
  // Twice at most: with what the memo holds, then from an empty memo.
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::vector<uint64_t> found(words, 0);
    if (walk_memoized(matcher, state, leading_spaces, trie, memo, &found)) {
      for (size_t w = 0; w < words; ++w) mask[w] |= found[w];
      return;
    }
    memo->clear();
  }
  // A walk that alone meets more states than the memo holds.
  auto by_matcher = [matcher](const MatchState& from, uint8_t b, MatchState* to) {
    matcher->advance(from, b, to);
    return to->dead() ? Next::kDead : Next::kAlive;
  };
  walk(
      trie, leading_spaces, state, by_matcher, [](const MatchState&) { return false; }, mask);
}

}  // namespace pvllm::structured
