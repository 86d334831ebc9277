#include "core/structured/matcher.h"

#include <algorithm>
#include <unordered_map>

namespace pvllm::structured {
namespace {

uint64_t mix(uint64_t k) {  // a 64-bit finalizer: keys differ in few bits
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return k;
}

void sort_unique(std::vector<int32_t>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

}  // namespace

int32_t Matcher::intern(uint32_t element, int32_t parent) {
  if ((nodes_.size() + 1) * 2 > keys_.size()) grow();
  const uint64_t k = (uint64_t{element} << 32) | static_cast<uint32_t>(parent + 1);
  const size_t mask = keys_.size() - 1;
  for (size_t h = mix(k) & mask;; h = (h + 1) & mask) {
    if (keys_[h] == k) return ids_[h];
    if (keys_[h] == kNoKey) {
      keys_[h] = k;
      ids_[h] = static_cast<int32_t>(nodes_.size());
      nodes_.push_back({element, parent});
      return ids_[h];
    }
  }
}

void Matcher::grow() {
  const size_t capacity = std::max<size_t>(64, keys_.size() * 2);
  keys_.assign(capacity, kNoKey);
  ids_.assign(capacity, 0);
  const size_t mask = capacity - 1;
  for (size_t id = 0; id < nodes_.size(); ++id) {
    const uint64_t k =
        (uint64_t{nodes_[id].element} << 32) | static_cast<uint32_t>(nodes_[id].parent + 1);
    size_t h = mix(k) & mask;
    while (keys_[h] != kNoKey) h = (h + 1) & mask;
    keys_[h] = k;
    ids_[h] = static_cast<int32_t>(id);
  }
}

namespace {

// Progress as bytes, for Matcher::key: the term, the count, the last item,
// the items.
void append_progress(uint32_t unordered, uint32_t count, uint32_t last,
                     const std::bitset<kMaxUnorderedItems>& used, std::string* out) {
  out->append(reinterpret_cast<const char*>(&unordered), sizeof unordered);
  out->append(reinterpret_cast<const char*>(&count), sizeof count);
  out->append(reinterpret_cast<const char*>(&last), sizeof last);
  const std::bitset<kMaxUnorderedItems> word(~uint64_t{0});
  for (size_t w = 0; w < kMaxUnorderedItems; w += 64) {
    const uint64_t bits = ((used >> w) & word).to_ullong();
    out->append(reinterpret_cast<const char*>(&bits), sizeof bits);
  }
}

}  // namespace

size_t Matcher::ProgressHash::operator()(const Progress& p) const {
  return std::hash<std::bitset<kMaxUnorderedItems>>()(p.used) ^
         (size_t{p.unordered} * 0x9E3779B97F4A7C15ULL) ^ (size_t{p.count} << 17) ^
         (size_t{p.last} << 41);
}

bool Matcher::can_end_after(const Unordered& u, const Progress& p, size_t item) const {
  const size_t n = u.items.size();
  // What must still come: the items without a postfix, and what the items
  // that came need (closed, grammar.h).
  std::bitset<kMaxUnorderedItems> missing = u.once;
  if (!u.needs.empty()) {
    for (size_t i = 0; i < n; ++i) {
      if (p.used[i]) missing |= u.needs[i];
    }
  }
  missing &= ~p.used;
  if (u.ordered && (missing & ~(~std::bitset<kMaxUnorderedItems>() << (item + 1))).any()) {
    return false;  // one of them was passed over
  }
  const size_t must = missing.count();
  if (u.max != kUnbounded && p.count + must > u.max) return false;
  if (p.count + must >= u.min) return true;
  // The minimum: each item that may still come at most once counts one,
  // one that may repeat fills it.
  size_t may = 0;
  for (size_t i = u.ordered ? item : 0; i < n; ++i) {
    if (u.items[i].count == Unordered::kMany) return true;
    may += !p.used[i];
  }
  return p.count + may >= u.min;
}

uint32_t Matcher::progress_id(const Progress& p) {
  auto [it, added] = progress_ids_.emplace(p, static_cast<uint32_t>(progress_.size()));
  if (added) progress_.push_back(p);
  return kProgressBase + it->second;
}

void Matcher::expand_progress(int32_t under, uint32_t id, std::vector<int32_t>* out) {
  const Progress p = progress_[id - kProgressBase];  // a copy: progress_ may grow
  const Unordered& u = g_->unordered[p.unordered];
  bool may_end = p.count >= u.min && (u.once & ~p.used).none();
  for (size_t i = 0; may_end && i < u.needs.size(); ++i) {
    may_end = !p.used[i] || (u.needs[i] & ~p.used).none();
  }
  if (may_end) {  // the term may end here
    if (under == kEmptyStack) {
      out->push_back(kEmptyStack);
    } else {
      work_.emplace_back(nodes_[under].parent, nodes_[under].element);
    }
  }
  if (u.max != kUnbounded && p.count >= u.max) return;
  // Counts above both bounds' need are one: min when there is no maximum
  // (at least 1, which tells the first item from later ones).
  const uint32_t cap = u.max != kUnbounded ? u.max : std::max<uint32_t>(u.min, 1);
  // %ordered: from the last item on (itself again only when it repeats).
  for (size_t i = u.ordered && p.last > 0 ? p.last - 1 : 0; i < u.items.size(); ++i) {
    const Unordered::Item& item = u.items[i];
    Progress next = p;
    if (item.count != Unordered::kMany) {
      if (p.used[i]) continue;
      next.used.set(i);
    }
    next.count = std::min(p.count + 1, cap);
    if (u.ordered) next.last = static_cast<uint32_t>(i + 1);
    if (!can_end_after(u, next, i)) continue;
    work_.emplace_back(intern(progress_id(next), under), p.count == 0 ? item.first : item.later);
  }
}

void Matcher::expand(int32_t parent, uint32_t pos, std::vector<int32_t>* out) {
  work_.clear();
  work_.emplace_back(parent, pos);
  while (!work_.empty()) {
    if (budget_ == 0) {
      exhausted_ = true;
      return;
    }
    --budget_;
    const auto [under, at] = work_.back();
    work_.pop_back();
    if (at >= kProgressBase) {
      expand_progress(under, at, out);
      continue;
    }
    const Element& e = g_->elements[at];
    switch (e.kind) {
      case Element::kEnd:  // the rule is done: go on where its caller was
        if (under == kEmptyStack) {
          out->push_back(kEmptyStack);
        } else {
          work_.emplace_back(nodes_[under].parent, nodes_[under].element);
        }
        break;
      case Element::kChars:
        out->push_back(intern(at, under));
        break;
      case Element::kRule: {
        // The continuation after the rule; a rule at the end of its
        // alternative continues with the parent directly (no growth for
        // right recursion).
        const int32_t cont =
            g_->elements[at + 1].kind == Element::kEnd ? under : intern(at + 1, under);
        for (uint32_t alt : g_->rules[e.value]) work_.emplace_back(cont, alt);
        break;
      }
      case Element::kUnordered: {
        const int32_t cont =
            g_->elements[at + 1].kind == Element::kEnd ? under : intern(at + 1, under);
        Progress start;
        start.unordered = e.value;
        work_.emplace_back(cont, progress_id(start));
        break;
      }
    }
  }
}

MatchState Matcher::initial() {
  MatchState s;
  for (uint32_t alt : g_->rules[g_->root]) expand(kEmptyStack, alt, &s.stacks);
  sort_unique(&s.stacks);
  if (exhausted_ || s.stacks.size() > kMaxStacks) {
    exhausted_ = true;
    s.stacks.clear();
  }
  return s;
}

void Matcher::advance_char(const std::vector<int32_t>& from, uint32_t cp,
                           std::vector<int32_t>* to) {
  to->clear();
  for (int32_t stack : from) {
    if (stack == kEmptyStack) continue;
    Node n = nodes_[stack];
    if (g_->char_sets[g_->elements[n.element].value].contains(cp)) {
      expand(n.parent, n.element + 1, to);
    }
  }
  sort_unique(to);
}

bool Matcher::any_intersects(const std::vector<int32_t>& stacks, uint32_t lo, uint32_t hi) const {
  for (int32_t stack : stacks) {
    if (stack == kEmptyStack) continue;
    if (g_->char_sets[g_->elements[nodes_[stack].element].value].intersects(lo, hi)) return true;
  }
  return false;
}

void Matcher::advance(const MatchState& from, uint8_t b, MatchState* to) {
  if (exhausted_) {
    to->stacks.clear();
    return;
  }
  to->partial = from.partial;
  uint32_t cp = 0;
  switch (to->partial.feed(b, &cp)) {
    case Utf8Decoder::kInvalid:
      to->stacks.clear();
      return;
    case Utf8Decoder::kNeedMore:
      if (any_intersects(from.stacks, to->partial.lowest(), to->partial.highest())) {
        to->stacks = from.stacks;
      } else {
        to->stacks.clear();
      }
      return;
    case Utf8Decoder::kChar:
      advance_char(from.stacks, cp, &to->stacks);
      if (exhausted_ || to->stacks.size() > kMaxStacks) {
        exhausted_ = true;
        to->stacks.clear();
      }
      return;
  }
}

bool Matcher::ascii_signature(const MatchState& s, uint8_t b, uint64_t* bits) const {
  if (b >= 0x80 || s.partial.need != 0 || s.stacks.size() > 64) return false;
  *bits = 0;
  for (size_t i = 0; i < s.stacks.size(); ++i) {
    const int32_t stack = s.stacks[i];
    if (stack == kEmptyStack) continue;
    const CharSet& set = g_->char_sets[g_->elements[nodes_[stack].element].value];
    if (set.contains(b)) *bits |= uint64_t{1} << i;
  }
  return true;
}

bool Matcher::uniform_partial(const MatchState& s, uint64_t* bits) const {
  const Utf8Decoder& p = s.partial;
  if (p.need == 0 || s.stacks.size() > 64) return false;
  // After E0, ED, F0 and F4 the next byte's range is narrower than 80..BF.
  if ((p.length == 3 && p.need == 2 && (p.value == 0x0 || p.value == 0xD)) ||
      (p.length == 4 && p.need == 3 && (p.value == 0x0 || p.value == 0x4))) {
    return false;
  }
  const uint32_t lo = p.lowest(), hi = p.highest();
  *bits = 0;
  for (size_t i = 0; i < s.stacks.size(); ++i) {
    const int32_t stack = s.stacks[i];
    if (stack == kEmptyStack) continue;
    const CharSet& set = g_->char_sets[g_->elements[nodes_[stack].element].value];
    if (set.covers(lo, hi)) {
      *bits |= uint64_t{1} << i;
    } else if (set.intersects(lo, hi)) {
      return false;
    }
  }
  return true;
}

Matcher::NonAscii Matcher::non_ascii(const MatchState& s) const {
  if (s.partial.need != 0) return NonAscii::kMixed;
  bool some = false;
  for (int32_t stack : s.stacks) {
    if (stack == kEmptyStack) continue;
    const CharSet& set = g_->char_sets[g_->elements[nodes_[stack].element].value];
    // No set holds a surrogate (gbnf_parser.cc), so "all" skips them.
    if (set.covers(0x80, 0xD7FF) && set.covers(0xE000, kMaxCodePoint)) {
      some = true;
    } else if (set.intersects(0x80, kMaxCodePoint)) {
      return NonAscii::kMixed;
    }
  }
  return some ? NonAscii::kAll : NonAscii::kNone;
}

std::string Matcher::key(const MatchState& s) const {
  std::string k;
  auto put = [&k](uint32_t v) { k.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(s.partial.value);
  put((uint32_t{s.partial.need} << 8) | s.partial.length);
  // Stacks top to bottom, each ended by a marker; the state's order of
  // stacks follows node ids, so sort the serialized stacks.
  std::vector<std::string> stacks;
  for (int32_t stack : s.stacks) {
    std::string one;
    for (int32_t n = stack; n != kEmptyStack; n = nodes_[n].parent) {
      uint32_t e = nodes_[n].element;
      if (e >= kProgressBase) {  // by value: progress ids are this matcher's
        const Progress& p = progress_[e - kProgressBase];
        e = kProgressBase;
        one.append(reinterpret_cast<const char*>(&e), sizeof e);
        append_progress(p.unordered, p.count, p.last, p.used, &one);
        continue;
      }
      one.append(reinterpret_cast<const char*>(&e), sizeof e);
    }
    stacks.push_back(std::move(one));
  }
  std::sort(stacks.begin(), stacks.end());
  for (const std::string& one : stacks) {
    put(static_cast<uint32_t>(one.size()));
    k += one;
  }
  return k;
}

void Matcher::compact(MatchState* s) {
  std::vector<Node> old = std::move(nodes_);
  nodes_.clear();
  keys_.assign(keys_.size(), kNoKey);
  copy_stacks(old, s);
}

void Matcher::copy_stacks(const std::vector<Node>& old, MatchState* s) {
  std::unordered_map<int32_t, int32_t> renumbered;
  std::vector<int32_t> chain;  // a stack's nodes not yet copied, top first
  for (int32_t& stack : s->stacks) {
    chain.clear();
    int32_t n = stack;
    while (n != kEmptyStack && renumbered.count(n) == 0) {
      chain.push_back(n);
      n = old[static_cast<size_t>(n)].parent;
    }
    int32_t below = n == kEmptyStack ? kEmptyStack : renumbered.at(n);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      below = intern(old[static_cast<size_t>(*it)].element, below);
      renumbered.emplace(*it, below);
    }
    stack = below;
  }
  sort_unique(&s->stacks);
}

bool grammar_accepts(const Grammar& grammar, std::string_view text) {
  if (grammar.root >= grammar.rules.size()) return false;
  Matcher m(&grammar);
  MatchState s = m.initial(), next;
  for (char c : text) {
    m.advance(s, static_cast<uint8_t>(c), &next);
    if (next.dead()) return false;
    std::swap(s, next);
  }
  return m.can_end(s);
}

}  // namespace pvllm::structured
