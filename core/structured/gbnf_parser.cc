// GBNF text -> Grammar (grammar.h): a recursive-descent parser that writes
// groups and repetitions as rules of their own, then the checks that make
// the grammar safe to expand (every rule defined, no left recursion).
#include <cstdio>
#include <functional>
#include <map>
#include <unordered_map>

#include "core/structured/grammar.h"
#include "core/structured/utf8_decoder.h"

namespace pvllm::structured {
namespace {

using Sequence = std::vector<Element>;
using Alternatives = std::vector<Sequence>;

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9') || c == '-'; }

// Sorts and merges ranges into a CharSet, complementing it if asked.
CharSet make_set(std::vector<CharRange> ranges, bool negate) {
  std::sort(ranges.begin(), ranges.end(),
            [](const CharRange& a, const CharRange& b) { return a.lo < b.lo; });
  std::vector<CharRange> merged;
  for (const CharRange& r : ranges) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  // Surrogates are no characters (UTF-8 cannot carry them): no set holds
  // them, so "this set can still match" is exact for partial characters.
  auto without_surrogates = [](std::vector<CharRange> in) {
    std::vector<CharRange> out;
    for (const CharRange& r : in) {
      if (r.hi < 0xD800 || r.lo > 0xDFFF) {
        out.push_back(r);
        continue;
      }
      if (r.lo < 0xD800) out.push_back({r.lo, 0xD7FF});
      if (r.hi > 0xDFFF) out.push_back({0xE000, r.hi});
    }
    return out;
  };
  if (negate) {
    std::vector<CharRange> inverse;
    uint32_t next = 0;
    for (const CharRange& r : merged) {
      if (r.lo > next) inverse.push_back({next, r.lo - 1});
      next = r.hi + 1;
    }
    if (next <= kMaxCodePoint) inverse.push_back({next, kMaxCodePoint});
    merged = std::move(inverse);
  }
  CharSet set;
  set.ranges = without_surrogates(std::move(merged));
  for (const CharRange& r : set.ranges) {
    for (uint32_t c = r.lo; c <= std::min<uint32_t>(r.hi, 127); ++c) {
      set.ascii[c >> 6] |= uint64_t{1} << (c & 63);
    }
  }
  return set;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Status parse(Grammar* out) {
    skip_space();
    if (at_end()) return error("the grammar has no rules");
    while (!at_end()) {
      Status s = parse_definition();
      if (!s.ok()) return s;
    }
    for (size_t r = 0; r < defined_.size(); ++r) {
      if (!defined_[r]) {
        return InvalidArgument("grammar: rule '" + g_.rule_names[r] + "' is used but not defined");
      }
    }
    auto root = names_.find("root");
    if (root == names_.end()) return InvalidArgument("grammar: no 'root' rule");
    g_.root = root->second;
    Status s = check_left_recursion();
    if (!s.ok()) return s;
    *out = std::move(g_);
    return Status::Ok();
  }

 private:
  // --- lexing helpers
  bool at_end() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }

  void skip_space() {
    while (!at_end()) {
      char c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  Status error(const std::string& what) const { return error_at(pos_, what); }
  Status error_at(size_t at, const std::string& what) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return InvalidArgument("grammar: line " + std::to_string(line) + ", column " +
                           std::to_string(column) + " (byte " + std::to_string(at) + "): " + what);
  }

  std::string parse_name() {
    size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  // Whether a `name ::=` starts here (the end of the current definition).
  bool at_definition() const {
    size_t p = pos_;
    if (p >= text_.size() || !is_name_start(text_[p])) return false;
    while (p < text_.size() && is_name_char(text_[p])) ++p;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
    return text_.substr(p, 3) == "::=";
  }

  // --- rules
  uint32_t rule_index(const std::string& name) {
    auto [it, added] = names_.emplace(name, static_cast<uint32_t>(g_.rules.size()));
    if (added) {
      g_.rules.emplace_back();
      g_.rule_names.push_back(name);
      defined_.push_back(false);
    }
    return it->second;
  }

  // A rule for a group or repetition, named with a '~' that no rule name
  // in the text can contain, so a rule defined later never collides.
  uint32_t new_rule(const std::string& base) {
    uint32_t rule = rule_index(base + "~" + std::to_string(++synthetic_));
    return rule;
  }

  Status define(uint32_t rule, const Alternatives& alternatives) {
    for (const Sequence& seq : alternatives) {
      if (g_.elements.size() + seq.size() + 1 > kMaxGrammarElements) {
        return InvalidArgument("grammar: more than " + std::to_string(kMaxGrammarElements) +
                               " elements");
      }
      g_.rules[rule].push_back(static_cast<uint32_t>(g_.elements.size()));
      g_.elements.insert(g_.elements.end(), seq.begin(), seq.end());
      g_.elements.push_back({Element::kEnd, 0});
    }
    defined_[rule] = true;
    return Status::Ok();
  }

  Status parse_definition() {
    size_t start = pos_;
    if (!is_name_start(peek())) return error("expected a rule name");
    std::string name = parse_name();
    skip_space();
    if (text_.substr(pos_, 3) != "::=") return error("expected '::='");
    pos_ += 3;
    uint32_t rule = rule_index(name);
    if (defined_[rule]) return error_at(start, "rule '" + name + "' is defined twice");
    current_ = name;
    Alternatives alternatives;
    Status s = parse_alternatives(&alternatives, 0);
    if (!s.ok()) return s;
    return define(rule, alternatives);
  }

  // Alternatives up to the end of the definition (depth 0) or a ')'.
  Status parse_alternatives(Alternatives* out, int depth) {
    if (depth > 512) return Unsupported("grammar: groups nested deeper than 512");
    for (;;) {
      Sequence seq;
      Status s = parse_sequence(&seq, depth);
      if (!s.ok()) return s;
      out->push_back(std::move(seq));
      skip_space();
      if (peek() != '|') break;
      ++pos_;
    }
    if (depth == 0 && !at_end() && !at_definition()) {
      return error(peek() == ')' ? "unbalanced ')'"
                                 : "unexpected '" + std::string(1, peek()) + "'");
    }
    return Status::Ok();
  }

  Status parse_sequence(Sequence* seq, int depth) {
    for (;;) {
      skip_space();
      char c = peek();
      if (at_end() || c == '|' || c == ')' || c == ';' || at_definition()) return Status::Ok();
      size_t term_start = seq->size();
      Status s = parse_term(seq, depth);
      if (!s.ok()) return s;
      s = parse_postfix(seq, term_start);
      if (!s.ok()) return s;
    }
  }

  Status parse_term(Sequence* seq, int depth) {
    char c = peek();
    if (c == '"') return parse_literal(seq);
    if (c == '[') return parse_class(seq);
    if (c == '.') {
      ++pos_;
      seq->push_back(chars({{0, kMaxCodePoint}}, false));
      return Status::Ok();
    }
    if (c == '(') {
      size_t open = pos_++;
      Alternatives group;
      Status s = parse_alternatives(&group, depth + 1);
      if (!s.ok()) return s;
      skip_space();
      if (peek() != ')') return error_at(open, "unclosed '('");
      ++pos_;
      uint32_t rule = new_rule(current_);
      s = define(rule, group);
      if (!s.ok()) return s;
      seq->push_back({Element::kRule, rule});
      return Status::Ok();
    }
    if (is_name_start(c)) {
      seq->push_back({Element::kRule, rule_index(parse_name())});
      return Status::Ok();
    }
    if (c == '%') return parse_unordered(seq, depth);
    if (c == '*' || c == '+' || c == '?' || c == '{') return error("nothing to repeat");
    return error("unexpected '" + std::string(1, c) + "'");
  }

  // %unordered{m,n}( separator ; item item? item* ... ) and %ordered
  // (grammar.h).
  Status parse_unordered(Sequence* seq, int depth) {
    const size_t start = pos_;
    auto keyword = [&](std::string_view k) {
      return text_.substr(pos_, k.size()) == k && !is_name_char(peek(k.size()));
    };
    Unordered u;
    if (keyword("%unordered")) {
      pos_ += std::string_view("%unordered").size();
    } else if (keyword("%ordered")) {
      pos_ += std::string_view("%ordered").size();
      u.ordered = true;
    } else {
      return error("unknown directive (those there are: %unordered, %ordered)");
    }
    const std::string name = u.ordered ? "%ordered" : "%unordered";
    if (peek() == '{') {
      PVLLM_RETURN_IF_ERROR(parse_braces(&u.min, &u.max));
    }
    skip_space();
    if (peek() != '(') return error("expected '(' after " + name);
    ++pos_;
    Alternatives sep;
    PVLLM_RETURN_IF_ERROR(parse_alternatives(&sep, depth + 1));
    skip_space();
    if (peek() != ';') return error("expected ';' after " + name + "'s separator");
    ++pos_;
    const uint32_t sep_rule = new_rule(current_);
    PVLLM_RETURN_IF_ERROR(define(sep_rule, sep));
    for (;;) {
      skip_space();
      if (at_end()) return error_at(start, "unclosed " + name + "(");
      if (peek() == ')') break;
      if (peek() == ';') {
        PVLLM_RETURN_IF_ERROR(parse_needs(&u));
        skip_space();
        if (peek() != ')') return error_at(start, "unclosed " + name + "(");
        break;
      }
      if (u.items.size() == kMaxUnorderedItems) {
        return Unsupported("grammar: more than " + std::to_string(kMaxUnorderedItems) +
                           " items in one " + name + " (byte " + std::to_string(start) + ")");
      }
      Sequence term;
      PVLLM_RETURN_IF_ERROR(parse_term(&term, depth + 1));
      Unordered::Item item;
      if (peek() == '?' || peek() == '*') {
        item.count = peek() == '?' ? Unordered::kOptional : Unordered::kMany;
        ++pos_;
      } else if (peek() == '+' || peek() == '{') {
        return error("an " + name + " item takes '?', '*' or nothing");
      }
      Element element = term.size() == 1 ? term[0] : Element{};
      if (term.size() != 1) {
        const uint32_t rule = new_rule(current_);
        PVLLM_RETURN_IF_ERROR(define(rule, {term}));
        element = {Element::kRule, rule};
      }
      if (g_.elements.size() + 5 > kMaxGrammarElements) {
        return InvalidArgument("grammar: more than " + std::to_string(kMaxGrammarElements) +
                               " elements");
      }
      item.first = static_cast<uint32_t>(g_.elements.size());
      g_.elements.insert(g_.elements.end(), {element, {Element::kEnd, 0}});
      item.later = static_cast<uint32_t>(g_.elements.size());
      g_.elements.insert(g_.elements.end(),
                         {{Element::kRule, sep_rule}, element, {Element::kEnd, 0}});
      if (item.count == Unordered::kOnce) u.once.set(u.items.size());
      u.items.push_back(item);
    }
    ++pos_;
    seq->push_back({Element::kUnordered, static_cast<uint32_t>(g_.unordered.size())});
    g_.unordered.push_back(std::move(u));
    return Status::Ok();
  }

  // An %unordered's dependencies after its items: "; 2 -> 3 4, 1 -> 2",
  // items numbered from 1: when item 2 came, items 3 and 4 must too.
  Status parse_needs(Unordered* u) {
    ++pos_;  // ';'
    auto item_number = [&](size_t* index) {
      skip_space();
      const size_t at = pos_;
      size_t n = 0;
      while (peek() >= '0' && peek() <= '9' && n <= kMaxUnorderedItems) {
        n = n * 10 + static_cast<size_t>(peek() - '0');
        ++pos_;
      }
      if (pos_ == at) return error("expected an item number");
      if (n == 0 || n > u->items.size()) {
        return error_at(at, "no item " + std::to_string(n) + " in this term");
      }
      *index = n - 1;
      if (u->items[*index].count == Unordered::kMany) {
        return error_at(at, "a dependency of an item repeated with '*'");
      }
      return Status::Ok();
    };
    u->needs.assign(u->items.size(), {});
    for (;;) {
      size_t from = 0;
      PVLLM_RETURN_IF_ERROR(item_number(&from));
      skip_space();
      if (text_.substr(pos_, 2) != "->") return error("expected '->'");
      pos_ += 2;
      do {
        size_t to = 0;
        PVLLM_RETURN_IF_ERROR(item_number(&to));
        u->needs[from].set(to);
        skip_space();
      } while (peek() >= '0' && peek() <= '9');
      if (peek() != ',') break;
      ++pos_;
    }
    // Closed under "needs": what an item needs, the items it needs need.
    for (bool changed = true; changed;) {
      changed = false;
      for (auto& n : u->needs) {
        std::bitset<kMaxUnorderedItems> all = n;
        for (size_t j = 0; j < u->needs.size(); ++j) {
          if (n[j]) all |= u->needs[j];
        }
        if (all != n) {
          n = all;
          changed = true;
        }
      }
    }
    return Status::Ok();
  }

  Element chars(std::vector<CharRange> ranges, bool negate) {
    CharSet set = make_set(std::move(ranges), negate);
    std::vector<uint32_t> key;
    for (const CharRange& r : set.ranges) key.insert(key.end(), {r.lo, r.hi});
    auto [it, added] = sets_.emplace(std::move(key), static_cast<uint32_t>(g_.char_sets.size()));
    if (added) g_.char_sets.push_back(std::move(set));
    return {Element::kChars, it->second};
  }

  // One code point of a literal or class at pos_, escapes decoded.
  Status parse_char(uint32_t* cp, bool in_class) {
    size_t start = pos_;
    if (at_end()) return error("unexpected end of the grammar");
    if (peek() != '\\') {
      size_t len = 0;
      if (!utf8_decode(text_.substr(pos_), cp, &len)) return error("invalid UTF-8");
      pos_ += len;
      return Status::Ok();
    }
    ++pos_;
    char e = peek();
    ++pos_;
    switch (e) {
      case 'n':
        *cp = '\n';
        return Status::Ok();
      case 'r':
        *cp = '\r';
        return Status::Ok();
      case 't':
        *cp = '\t';
        return Status::Ok();
      case '"':
      case '\\':
      case '/':
        *cp = static_cast<uint8_t>(e);
        return Status::Ok();
      case 'x':
        return parse_hex(2, cp, start);
      case 'u':
        return parse_hex(4, cp, start);
      case 'U':
        return parse_hex(8, cp, start);
      default:
        if (in_class && (e == ']' || e == '[' || e == '-' || e == '^')) {
          *cp = static_cast<uint8_t>(e);
          return Status::Ok();
        }
        return error_at(start, "unknown escape '\\" + std::string(1, e) + "'");
    }
  }

  Status parse_hex(int digits, uint32_t* cp, size_t start) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      char h = peek();
      int d = (h >= '0' && h <= '9')   ? h - '0'
              : (h >= 'a' && h <= 'f') ? h - 'a' + 10
              : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                       : -1;
      if (d < 0) return error_at(start, "expected " + std::to_string(digits) + " hex digits");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (v > kMaxCodePoint) return error_at(start, "code point beyond U+10FFFF");
    *cp = v;
    return Status::Ok();
  }

  Status parse_literal(Sequence* seq) {
    size_t open = pos_++;
    for (;;) {
      if (at_end()) return error_at(open, "unterminated string");
      if (peek() == '"') break;
      uint32_t cp = 0;
      Status s = parse_char(&cp, false);
      if (!s.ok()) return s;
      seq->push_back(chars({{cp, cp}}, false));
    }
    ++pos_;
    return Status::Ok();
  }

  Status parse_class(Sequence* seq) {
    size_t open = pos_++;
    bool negate = peek() == '^';
    if (negate) ++pos_;
    std::vector<CharRange> ranges;
    for (;;) {
      if (at_end()) return error_at(open, "unterminated character class");
      if (peek() == ']') break;
      size_t at = pos_;
      uint32_t lo = 0, hi = 0;
      Status s = parse_char(&lo, true);
      if (!s.ok()) return s;
      hi = lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        s = parse_char(&hi, true);
        if (!s.ok()) return s;
        if (hi < lo) return error_at(at, "range out of order");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    if (ranges.empty() && !negate) return error_at(open, "empty character class");
    seq->push_back(chars(std::move(ranges), negate));
    return Status::Ok();
  }

  // --- repetition
  Status parse_postfix(Sequence* seq, size_t term_start) {
    for (;;) {
      char c = peek();
      uint32_t min = 0, max = 0;
      if (c == '*') {
        min = 0, max = kUnbounded;
        ++pos_;
      } else if (c == '+') {
        min = 1, max = kUnbounded;
        ++pos_;
      } else if (c == '?') {
        min = 0, max = 1;
        ++pos_;
      } else if (c == '{') {
        Status s = parse_braces(&min, &max);
        if (!s.ok()) return s;
      } else {
        return Status::Ok();
      }
      Sequence term(seq->begin() + static_cast<std::ptrdiff_t>(term_start), seq->end());
      seq->resize(term_start);
      Status s = repeat(term, min, max, seq);
      if (!s.ok()) return s;
    }
  }

  Status parse_braces(uint32_t* min, uint32_t* max) {
    size_t open = pos_++;
    auto number = [&](uint32_t* v) {
      size_t start = pos_;
      uint64_t n = 0;
      while (peek() >= '0' && peek() <= '9') {
        n = n * 10 + static_cast<uint64_t>(peek() - '0');
        if (n > kMaxRepetition) n = kMaxRepetition + 1;
        ++pos_;
      }
      *v = static_cast<uint32_t>(n);
      return pos_ > start;
    };
    if (!number(min)) return error_at(open, "expected a count after '{'");
    *max = *min;
    if (peek() == ',') {
      ++pos_;
      if (!number(max)) *max = kUnbounded;
    }
    if (peek() != '}') return error_at(open, "expected '}'");
    ++pos_;
    if (*min > kMaxRepetition || (*max != kUnbounded && *max > kMaxRepetition)) {
      return Unsupported("grammar: a repetition count above " + std::to_string(kMaxRepetition) +
                         " (byte " + std::to_string(open) + ")");
    }
    if (*max < *min) return error_at(open, "repetition maximum below its minimum");
    return Status::Ok();
  }

  // Appends `term` repeated [min, max] times (max may be kUnbounded).
  Status repeat(const Sequence& term, uint32_t min, uint32_t max, Sequence* seq) {
    Element item = term.size() == 1 ? term[0] : Element{};
    if (term.size() != 1) {
      uint32_t rule = new_rule(current_);
      Status s = define(rule, {term});
      if (!s.ok()) return s;
      item = {Element::kRule, rule};
    }
    if (static_cast<uint64_t>(min) + (max == kUnbounded ? 2 : max - min) * 2 + g_.elements.size() >
        kMaxGrammarElements) {
      return InvalidArgument("grammar: more than " + std::to_string(kMaxGrammarElements) +
                             " elements");
    }
    for (uint32_t i = 0; i < min; ++i) seq->push_back(item);
    if (max == kUnbounded) {  // R ::= item R | ""
      uint32_t rule = new_rule(current_);
      Status s = define(rule, {{item, {Element::kRule, rule}}, {}});
      if (!s.ok()) return s;
      seq->push_back({Element::kRule, rule});
      return Status::Ok();
    }
    // Optional tail: O_k ::= item O_{k-1} | "" with O_1 ::= item | "".
    uint32_t tail = UINT32_MAX;
    for (uint32_t k = 0; k < max - min; ++k) {
      uint32_t rule = new_rule(current_);
      Sequence with = {item};
      if (tail != UINT32_MAX) with.push_back({Element::kRule, tail});
      Status s = define(rule, {with, {}});
      if (!s.ok()) return s;
      tail = rule;
    }
    if (tail != UINT32_MAX) seq->push_back({Element::kRule, tail});
    return Status::Ok();
  }

  // --- checks
  Status check_left_recursion() {
    size_t n = g_.rules.size();
    std::vector<bool> nullable(n, false);
    // An %unordered is empty when no item need come and none must.
    auto element_nullable = [&](const Element& el) {
      switch (el.kind) {
        case Element::kChars:
        case Element::kEnd:
          return false;
        case Element::kRule:
          return static_cast<bool>(nullable[el.value]);
        case Element::kUnordered:
          break;
      }
      const Unordered& u = g_.unordered[el.value];
      if (u.min > 0) return false;
      for (const Unordered::Item& item : u.items) {
        const Element& it = g_.elements[item.first];
        if (item.count == Unordered::kOnce && (it.kind != Element::kRule || !nullable[it.value])) {
          return false;
        }
      }
      return true;
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (uint32_t alt : g_.rules[r]) {
          bool all = true;
          for (uint32_t e = alt; g_.elements[e].kind != Element::kEnd; ++e) {
            if (!element_nullable(g_.elements[e])) {
              all = false;
              break;
            }
          }
          if (all) {
            nullable[r] = true;
            changed = true;
            break;
          }
        }
      }
    }
    // Rules each rule can start with (through nullable prefixes).
    // An %unordered can start with any item, and with its separator when an
    // item before it matched nothing.
    std::vector<std::vector<uint32_t>> starts(n);
    for (size_t r = 0; r < n; ++r) {
      for (uint32_t alt : g_.rules[r]) {
        for (uint32_t e = alt;; ++e) {
          const Element& el = g_.elements[e];
          if (el.kind == Element::kRule) {
            starts[r].push_back(el.value);
          } else if (el.kind == Element::kUnordered) {
            for (const Unordered::Item& item : g_.unordered[el.value].items) {
              for (uint32_t at : {item.later, item.later + 1}) {
                if (g_.elements[at].kind == Element::kRule) {
                  starts[r].push_back(g_.elements[at].value);
                }
              }
            }
          } else {
            break;
          }
          if (!element_nullable(el)) break;
        }
      }
    }
    // An item repeated with `*` that can match nothing would repeat forever.
    for (const Unordered& u : g_.unordered) {
      for (const Unordered::Item& item : u.items) {
        if (item.count == Unordered::kMany && element_nullable(g_.elements[item.first])) {
          return Unsupported(
              "grammar: an %unordered item repeated with '*' can match the empty text");
        }
      }
    }
    std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
    std::string cycle;
    std::function<bool(uint32_t)> visit = [&](uint32_t r) {
      color[r] = 1;
      for (uint32_t next : starts[r]) {
        if (color[next] == 1) {
          cycle = g_.rule_names[next];
          return true;
        }
        if (color[next] == 0 && visit(next)) return true;
      }
      color[r] = 2;
      return false;
    };
    for (uint32_t r = 0; r < n; ++r) {
      if (color[r] == 0 && visit(r)) {
        return Unsupported("grammar: rule '" + cycle +
                           "' is left-recursive (it can reach itself before consuming a "
                           "character, also through rules that match nothing)");
      }
    }
    return Status::Ok();
  }

  std::string_view text_;
  size_t pos_ = 0;
  Grammar g_;
  std::unordered_map<std::string, uint32_t> names_;
  std::vector<bool> defined_;
  std::map<std::vector<uint32_t>, uint32_t> sets_;
  std::string current_;
  uint32_t synthetic_ = 0;
};

}  // namespace

Status parse_gbnf(std::string_view text, Grammar* out) { return Parser(text).parse(out); }

std::string gbnf_literal(std::string_view text) {
  std::string out = "\"";
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace pvllm::structured
