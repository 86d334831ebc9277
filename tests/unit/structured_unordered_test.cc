// GBNF's %unordered (grammar.h): items in any order (and %ordered's in the
// listed order), each as often as its
// postfix says, within the term's count bounds. Checked against a direct
// reading of that rule over every sequence of items up to a length, with
// items that share prefixes, whitespace separators, nesting and recursion;
// the matcher's keys and the token mask's trie walk with the term's progress
// on the stacks; and the parser's refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/structured/grammar.h"
#include "core/structured/matcher.h"
#include "core/structured/token_mask.h"
#include "core/structured/vocab_trie.h"

namespace pvllm::structured {
namespace {

Grammar parse(const std::string& text) {
  Grammar g;
  Status st = parse_gbnf(text, &g);
  EXPECT_TRUE(st.ok()) << st.message() << "\n" << text;
  return g;
}

struct Item {
  std::string text;
  char count;  // ' ' once, '?' at most once, '*' any number
};

// Item i needs item j: (i, j), indices from 0.
using Needs = std::vector<std::pair<int, int>>;

// Whether `seq` (indices into `items`) is what the term allows; `ordered`:
// an %ordered term.
bool allowed(const std::vector<Item>& items, const std::vector<int>& seq, uint32_t min,
             uint32_t max, const Needs& needs = {}, bool ordered = false) {
  if (seq.size() < min || (max != kUnbounded && seq.size() > max)) return false;
  if (ordered && !std::is_sorted(seq.begin(), seq.end())) return false;
  std::map<int, int> seen;
  for (int i : seq) ++seen[i];
  for (size_t i = 0; i < items.size(); ++i) {
    const int n = seen[static_cast<int>(i)];
    if (items[i].count == ' ' && n != 1) return false;
    if (items[i].count == '?' && n > 1) return false;
  }
  for (const auto& [i, j] : needs) {
    if (seen[i] > 0 && seen[j] == 0) return false;
  }
  return true;
}

// Whether some sequence the term allows starts with `seq`, looking at
// sequences up to `limit` items long. What decides is how often each item
// came (2 standing for more), the length and the last item: memoized so.
bool completes(const std::vector<Item>& items, std::vector<int>* seq, uint32_t min, uint32_t max,
               const Needs& needs, bool ordered, size_t limit, std::map<std::string, bool>* memo) {
  if (ordered && !std::is_sorted(seq->begin(), seq->end())) return false;
  std::string key(items.size(), '0');
  for (int i : *seq) key[i] = key[i] == '0' ? '1' : '2';
  key += "/" + std::to_string(seq->size()) + "/" + std::to_string(seq->empty() ? -1 : seq->back());
  if (auto it = memo->find(key); it != memo->end()) return it->second;
  bool ok = allowed(items, *seq, min, max, needs, ordered);
  for (size_t i = 0; !ok && seq->size() < limit && i < items.size(); ++i) {
    seq->push_back(static_cast<int>(i));
    ok = completes(items, seq, min, max, needs, ordered, limit, memo);
    seq->pop_back();
  }
  (*memo)[key] = ok;
  return ok;
}

// Every sequence of items up to `max_len` long, joined by `sep`, against
// the rule; items are distinct texts that no join of others spells. Each
// sequence that is not whole yet leaves the matcher alive exactly when a
// whole one can follow it (no dead ends), where an item's needs do not
// meet a minimum (there the matcher may let an item come whose needs
// overshoot the maximum: `exact_ends` false).
void check_all_sequences(const std::vector<Item>& items, const std::string& sep, uint32_t min,
                         uint32_t max, int max_len, const Needs& needs = {}, bool ordered = false) {
  std::string bounds;
  if (min != 0 || max != kUnbounded) {
    bounds = "{" + std::to_string(min) + "," +
             (max == kUnbounded ? std::string() : std::to_string(max)) + "}";
  }
  const bool exact_ends = needs.empty() || min == 0;
  std::string text = std::string("root ::= \"<\" ") + (ordered ? "%ordered" : "%unordered") +
                     bounds + "( " + gbnf_literal(sep) + " ;";
  for (const Item& item : items) {
    text += " " + gbnf_literal(item.text) + (item.count == ' ' ? "" : std::string(1, item.count));
  }
  for (size_t k = 0; k < needs.size(); ++k) {
    text += (k ? ", " : " ; ") + std::to_string(needs[k].first + 1) + " -> " +
            std::to_string(needs[k].second + 1);
  }
  text += " ) \">\"";
  const Grammar g = parse(text);
  std::vector<int> seq;
  int checked = 0;
  // Long enough for any item once more and the minimum.
  const size_t limit = static_cast<size_t>(max_len) + items.size() + min + 1;
  std::map<std::string, bool> memo;
  std::function<void()> visit = [&]() {
    std::string s = "<";
    for (size_t k = 0; k < seq.size(); ++k) s += (k ? sep : "") + items[seq[k]].text;
    s += ">";
    EXPECT_EQ(grammar_accepts(g, s), allowed(items, seq, min, max, needs, ordered)) << text << "\n"
                                                                                    << s;
    Matcher m(&g);
    MatchState state = m.initial(), next;
    for (char c : s.substr(0, s.size() - 1)) {
      m.advance(state, static_cast<uint8_t>(c), &next);
      state = next;
    }
    std::vector<int> from = seq;
    const bool can = completes(items, &from, min, max, needs, ordered, limit, &memo);
    if (can) {
      EXPECT_FALSE(state.dead()) << text << "\n" << s << " can go on";
    } else if (exact_ends) {
      EXPECT_TRUE(state.dead()) << text << "\n" << s << " is a dead end";
    }
    ++checked;
    if (static_cast<int>(seq.size()) == max_len) return;
    for (size_t i = 0; i < items.size(); ++i) {
      seq.push_back(static_cast<int>(i));
      visit();
      seq.pop_back();
    }
  };
  visit();
  EXPECT_GT(checked, 1);
}

TEST(UnorderedTest, EverySequenceOfItemsAsTheRuleSays) {
  check_all_sequences({{"a", ' '}, {"b", ' '}, {"c", ' '}}, ",", 0, kUnbounded, 4);
  check_all_sequences({{"a", ' '}, {"b", '?'}, {"c", '?'}, {"d", '*'}}, ",", 0, kUnbounded, 5);
  check_all_sequences({{"x", '?'}, {"y", '?'}, {"z", '?'}}, ", ", 1, 2, 4);
  check_all_sequences({{"x", '*'}, {"y", '?'}}, ";", 2, kUnbounded, 5);
  check_all_sequences({{"p", ' '}, {"q", '*'}}, "", 0, 3, 5);  // no separator
  check_all_sequences({{"k", '?'}}, ",", 0, 0, 2);             // nothing may come
}

TEST(UnorderedTest, RandomItemSetsAndBounds) {
  std::mt19937 rng(11);
  const char names[] = "abcdef";
  for (int round = 0; round < 30; ++round) {
    std::vector<Item> items;
    const int n = 1 + static_cast<int>(rng() % 5);
    for (int i = 0; i < n; ++i) items.push_back({std::string(1, names[i]), " ?*"[rng() % 3]});
    const uint32_t min = rng() % 3;
    const uint32_t max = rng() % 3 == 0 ? kUnbounded : min + rng() % 3;
    // Dependencies between items that are not repeated.
    Needs needs;
    for (int k = static_cast<int>(rng() % 3); k > 0; --k) {
      const int i = static_cast<int>(rng() % n), j = static_cast<int>(rng() % n);
      if (i != j && items[i].count != '*' && items[j].count != '*') needs.emplace_back(i, j);
    }
    check_all_sequences(items, ",", min, max, 4, needs, round % 2 == 1);
  }
}

TEST(UnorderedTest, OrderedTermsKeepTheListedOrder) {
  check_all_sequences({{"a", ' '}, {"b", ' '}, {"c", ' '}}, ",", 0, kUnbounded, 4, {}, true);
  check_all_sequences({{"a", '?'}, {"b", '*'}, {"c", '?'}, {"d", '*'}}, ",", 0, kUnbounded, 5, {},
                      true);
  check_all_sequences({{"x", '?'}, {"y", '?'}, {"z", '?'}}, ", ", 2, 2, 4, {}, true);
  // z needs x, which comes before it; y needs z.
  check_all_sequences({{"x", '?'}, {"y", '?'}, {"z", '?'}, {"w", '*'}}, ",", 0, 3, 5,
                      {{2, 0}, {1, 2}}, true);
}

TEST(UnorderedTest, ItemsComeOnlyWhereTheTermCanStillEnd) {
  // Needs closed through others: a needs b, b needs c, and at most two
  // items: a may not come at all.
  check_all_sequences({{"a", '?'}, {"b", '?'}, {"c", '?'}}, ",", 0, 2, 4, {{0, 1}, {1, 2}});
  // Three items at least, of which one repeats.
  check_all_sequences({{"a", '?'}, {"b", '?'}, {"r", '*'}}, ",", 3, kUnbounded, 5, {}, true);
  const Grammar g = parse(R"(root ::= %ordered{0,2}( "," ; "a"? "b"? "c"? ; 1 -> 3 ))");
  Matcher m(&g);
  MatchState s = m.initial(), next;
  m.advance(s, 'a', &next);
  ASSERT_FALSE(next.dead());
  m.advance(next, ',', &s);
  m.advance(s, 'b', &next);
  EXPECT_TRUE(next.dead()) << "after a and b, c could not come within two items";
}

TEST(UnorderedTest, ItemsThatShareAPrefixAndJsonMembers) {
  // Members whose keys share prefixes; values that nest objects of the
  // same rule; whitespace around the separator.
  const Grammar g = parse(R"(
    root ::= "{" ws %unordered( ws "," ws ; a ab? abc? extra* ) ws "}"
    a ::= "\"a\"" ws ":" ws value
    ab ::= "\"ab\"" ws ":" ws value
    abc ::= "\"abc\"" ws ":" ws value
    extra ::= "\"x" [0-9] "\"" ws ":" ws value
    value ::= [0-9]+ | root
    ws ::= [ ]?
  )");
  for (const char* ok :
       {R"({"a":1})", R"({ "ab":2 , "a":1 })", R"({"abc":3,"a":{"a":1,"x1":2},"ab":2})",
        R"({"x1":1,"a":2,"x1":3,"x2":4})", R"({"a":{"ab":{"a":5},"a":{"a":6}}})"}) {
    EXPECT_TRUE(grammar_accepts(g, ok)) << ok;
  }
  for (const char* bad : {"{}", R"({"ab":2})", R"({"a":1,"a":1})", R"({"a":1,"ab":2,"ab":3})",
                          R"({"a":1,})", R"({,"a":1})", R"({"a":{"ab":1}})", R"({"a":1"ab":2})"}) {
    EXPECT_FALSE(grammar_accepts(g, bad)) << bad;
  }
}

TEST(UnorderedTest, TermsInsideRepetitionsAndAlternatives) {
  const Grammar g = parse(R"(
    root ::= ( "[" %unordered{1,}( "," ; "a" "b"? ) "]" | "-" )+
  )");
  for (const char* ok : {"[a]", "[b,a][a]", "-[a,b]-", "[a]-[b,a]"}) {
    EXPECT_TRUE(grammar_accepts(g, ok)) << ok;
  }
  for (const char* bad : {"[]", "[b]", "[a,a]", "[a][b]", "[a,b,a]"}) {
    EXPECT_FALSE(grammar_accepts(g, bad)) << bad;
  }
}

TEST(UnorderedTest, KeysTellProgressApartAcrossMatchers) {
  const Grammar g = parse(R"(root ::= %unordered( "," ; "a" "b"? "c"? ) "."?)");
  auto run = [&g](Matcher* m, const std::string& text) {
    MatchState s = m->initial(), next;
    for (char c : text) {
      m->advance(s, static_cast<uint8_t>(c), &next);
      s = next;
    }
    return s;
  };
  Matcher a(&g), b(&g);
  run(&b, "c,b,a");  // b's arena and progress table fill in another order
  const MatchState sa = run(&a, "a,b"), sb = run(&b, "b,a");
  ASSERT_FALSE(sa.dead());
  // The same items came (in another order): the same state.
  EXPECT_EQ(a.key(sa), b.key(sb));
  EXPECT_NE(a.key(sa), b.key(run(&b, "a,c")));
  EXPECT_NE(a.key(sa), b.key(run(&b, "a")));
  // Compacting keeps the progress.
  MatchState compacted = sa;
  const std::string before = a.key(sa);
  a.compact(&compacted);
  EXPECT_EQ(a.key(compacted), before);
  MatchState next;
  a.advance(compacted, ',', &next);
  MatchState after;
  a.advance(next, 'a', &after);
  EXPECT_TRUE(after.dead()) << "a came already";
  a.advance(next, 'c', &after);
  ASSERT_FALSE(after.dead());
  EXPECT_TRUE(a.can_end(after));
  a.advance(after, ',', &next);
  EXPECT_TRUE(next.dead()) << "every item came";
}

TEST(UnorderedTest, TrieWalkEqualsTokenByToken) {
  std::mt19937 rng(5);
  const std::string alphabet[] = {"{", "}", "\"", "a", "b", "c", ":", ",", "1", " ", "ab"};
  std::vector<std::string> tokens;
  for (int i = 0; i < 2000; ++i) {
    std::string t;
    const int len = 1 + static_cast<int>(rng() % 6);
    for (int k = 0; k < len; ++k) t += alphabet[rng() % std::size(alphabet)];
    tokens.push_back(t);
  }
  const VocabTrie trie(tokens);
  const Grammar g = parse(R"(
    root ::= "{" %unordered( "," ; ( "\"a\":" v ) ( "\"b\":" v )? ( "\"ab\":" v )?
                                 ( "\"c" [a-c]* "\":" v )* ) "}"
    v ::= "1"+ | root
  )");
  for (const std::string prefix : {"{", "{\"a\":1", "{\"b\":1,", "{\"a\":1,\"b\":1",
                                   "{\"c\":{\"ab\":1", "{\"ca\":1,\"a\":1"}) {
    Matcher m(&g);
    MatchState s = m.initial(), next;
    for (char c : prefix) {
      m.advance(s, static_cast<uint8_t>(c), &next);
      ASSERT_FALSE(next.dead()) << prefix;
      s = next;
    }
    std::vector<uint64_t> reference((tokens.size() + 63) / 64, 0);
    for (size_t id = 0; id < tokens.size(); ++id) {
      Matcher r(&g);
      MatchState t = r.initial();
      bool alive = true;
      for (char c : prefix + tokens[id]) {
        r.advance(t, static_cast<uint8_t>(c), &next);
        if (next.dead()) {
          alive = false;
          break;
        }
        t = next;
      }
      if (alive) reference[id / 64] |= uint64_t{1} << (id % 64);
    }
    std::vector<uint64_t> mask(reference.size(), 0);
    compute_token_mask(&m, s, 0, trie, mask.data());
    EXPECT_EQ(mask, reference) << prefix;
    int allowed = 0;
    for (uint64_t w : mask) allowed += __builtin_popcountll(w);
    EXPECT_GT(allowed, 0) << prefix;
  }
}

TEST(UnorderedTest, RefusalsSayWhat) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : {
           Case{"root ::= %sorted( \",\" ; \"a\" )", "unknown directive"},
           Case{"root ::= %ordered( \",\" ; \"a\"+ )", "%ordered item takes"},
           Case{"root ::= %unordered \"a\"", "expected '('"},
           Case{"root ::= %unordered( \"a\" \"b\" )", "expected ';'"},
           Case{"root ::= %unordered( \",\" ; \"a\"+ )", "takes '?', '*' or nothing"},
           Case{"root ::= %unordered( \",\" ; \"a\"{2} )", "takes '?', '*' or nothing"},
           Case{"root ::= %unordered( \",\" ; \"a\"", "unclosed %unordered("},
           Case{"root ::= %unordered{3,2}( \",\" ; \"a\" )", "maximum below its minimum"},
           Case{"root ::= %unordered( \",\" ; \"a\" e* )\ne ::= \"b\"?", "empty text"},
           Case{"root ::= %unordered( \",\" ; root \"a\" )", "left-recursive"},
           Case{"root ::= %unordered( \",\" ; \"a\" \"b\"? ; 1 -> 3 )", "no item 3"},
           Case{"root ::= %unordered( \",\" ; \"a\" \"b\"? ; 1 3 )", "expected '->'"},
           Case{"root ::= %unordered( \",\" ; \"a\" \"b\"* ; 1 -> 2 )", "repeated with '*'"},
           Case{"root ::= %unordered( \",\" ; \"a\"? \"b\"? \"c\"? ; 1 -> 2 3, 2 -> 1 )", nullptr},
           Case{"root ::= \"[\" %unordered( \",\" | \";\" ; e? ) \"]\"\ne ::= \"x\" | root ",
                nullptr},
       }) {
    Grammar g;
    const Status st = parse_gbnf(c.text, &g);
    if (c.says == nullptr) {
      EXPECT_TRUE(st.ok()) << c.text << ": " << st.message();
      continue;
    }
    ASSERT_FALSE(st.ok()) << c.text;
    EXPECT_NE(st.message().find(c.says), std::string::npos) << c.text << ": " << st.message();
  }
  std::string many = "root ::= %unordered( \",\" ;";
  for (size_t i = 0; i <= kMaxUnorderedItems; ++i) many += " \"k" + std::to_string(i) + "\"?";
  Grammar g;
  const Status st = parse_gbnf(many + " )", &g);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("more than 256 items"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace pvllm::structured
