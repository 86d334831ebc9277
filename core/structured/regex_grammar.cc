// Regular expression -> GBNF. The pattern is parsed into a small tree
// (character sets, sequences, alternatives, repetitions), normalised so that
// no repetition that can loop ever repeats something that can match the empty
// string (the grammar refuses such left recursion), and printed as rules.
//
// Dialect (a common subset of ECMAScript, PCRE and Python `re`):
//   literals (UTF-8), `.` (any code point but \n), [classes] with ranges and
//   [^negation] (`]` first and `-` first or last are literal), \d \D \w \W
//   \s \S (ASCII meanings), escapes \n \r \t \f \v \0 (NUL, not followed by
//   a digit) \cX \xHH \x{H..} \uHHHH (surrogate pairs joined) \u{H..}
//   \UHHHHHHHH and escaped punctuation; inside a class also \b (backspace).
//   Groups ( ), (?: ), (?<name> ), (?P<name> ); `|` with empty alternatives;
//   * + ? {m} {m,} {m,n} {,n} (a `{` that starts none of these is literal),
//   lazy forms accepted as greedy (they match the same whole strings).
//   `^` at the start and `$` at the end of a top-level alternative are
//   ignored: the grammar always matches the whole string.
// Unsupported: other anchors, \b \B \A \z \Z \G, backreferences, look-around,
// atomic groups, inline flags, possessive quantifiers, \p{..}, POSIX classes,
// octal escapes and counts above kMaxRepetition.
//
// JSON Schema's "pattern" (regex_to_json_string_gbnf) reads the pattern as
// ECMA-262 does with the `u` flag, the reading JSON Schema asks for:
//   `.` is any code point but \n \r U+2028 U+2029; \s is ECMA's white space
//   and line terminators (\t \n \v \f \r, space, U+00A0 U+1680
//   U+2000-U+200A U+2028 U+2029 U+202F U+205F U+3000 U+FEFF); `[]` matches
//   nothing and `[^]` any code point. The match is a search: a top-level
//   alternative without `^` may start anywhere, one without `$` may end
//   anywhere. Spellings whose ECMA-262 meaning differs from the other
//   dialects' (\x{..}, \U.., {,n}) are Unsupported; (?P<name> ) and the
//   other spellings ECMA-262 refuses but no dialect reads otherwise are
//   accepted. The grammar is printed over the string's JSON text: each code
//   point in its canonical spelling (JsonEscape below).
#include "core/structured/regex_grammar.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/structured/grammar.h"
#include "core/structured/utf8_decoder.h"

namespace pvllm::structured {
namespace {

constexpr size_t kMaxPatternBytes = 64 * 1024;
constexpr int kMaxNesting = 256;

// ---------------------------------------------------------------------------
// Sets of code points: sorted, disjoint, non-adjacent ranges.

using Ranges = std::vector<CharRange>;

Ranges normalized(Ranges r) {
  std::sort(r.begin(), r.end(), [](CharRange a, CharRange b) { return a.lo < b.lo; });
  Ranges out;
  for (CharRange c : r) {
    if (!out.empty() && c.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, c.hi);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

Ranges complement(const Ranges& set) {
  Ranges out;
  uint32_t next = 0;
  for (CharRange c : set) {
    if (c.lo > next) out.push_back({next, c.lo - 1});
    next = c.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

Ranges digit_set() { return {{'0', '9'}}; }
Ranges word_set() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
Ranges space_set() { return {{'\t', '\r'}, {' ', ' '}}; }  // \t \n \v \f \r and space
// ECMA-262's WhiteSpace and LineTerminator: the above, the Unicode space
// separators (Zs), U+2028, U+2029 and U+FEFF.
Ranges ecma_space_set() {
  return {{'\t', '\r'},     {' ', ' '},       {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
          {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
}

// ---------------------------------------------------------------------------
// The tree. Nodes are immutable, may be shared, and live in the Builder that
// made them (freed together, so a long chain is not freed recursively).

struct Node;
using NodePtr = const Node*;

struct Node {
  enum Kind { kNever, kEmpty, kChars, kSeq, kAlt, kRepeat, kRule };
  Kind kind = kEmpty;
  bool nullable = false;  // whether it matches the empty string
  Ranges chars;           // kChars: never empty
  std::vector<NodePtr> children;
  uint32_t min = 0;  // kRepeat
  uint32_t max = 0;  // kRepeat; kUnbounded for no limit
};

// Makes nodes, simplifying as it goes: sequences and alternatives are flat,
// the empty string is never an alternative, and a repetition never repeats
// something that can match the empty string.
class Builder {
 public:
  NodePtr never() { return add(Node::kNever, false); }
  NodePtr empty() { return add(Node::kEmpty, true); }

  NodePtr chars(Ranges set) {
    set = normalized(std::move(set));
    if (set.empty()) return never();
    return add(Node::kChars, false, {}, std::move(set));
  }

  NodePtr one_char(uint32_t c) { return chars({{c, c}}); }

  // A node printed as a rule of its own; shares a subtree between its users.
  NodePtr rule(NodePtr child) { return add(Node::kRule, child->nullable, {child}); }

  NodePtr seq(const std::vector<NodePtr>& parts) {
    std::vector<NodePtr> flat;
    for (NodePtr p : parts) {
      if (p->kind == Node::kNever) return p;
      if (p->kind == Node::kEmpty) continue;
      if (p->kind == Node::kSeq) {
        flat.insert(flat.end(), p->children.begin(), p->children.end());
      } else {
        flat.push_back(p);
      }
    }
    if (flat.empty()) return empty();
    if (flat.size() == 1) return flat[0];
    bool nullable = std::all_of(flat.begin(), flat.end(), [](NodePtr p) { return p->nullable; });
    return add(Node::kSeq, nullable, std::move(flat));
  }

  // An empty alternative makes the rest optional, so the grammar never needs
  // an empty alternative.
  NodePtr alt(const std::vector<NodePtr>& options) {
    std::vector<NodePtr> flat;
    bool has_empty = false;
    for (NodePtr o : options) {
      if (o->kind == Node::kNever) continue;
      if (o->kind == Node::kEmpty) {
        has_empty = true;
      } else if (o->kind == Node::kAlt) {
        flat.insert(flat.end(), o->children.begin(), o->children.end());
      } else {
        flat.push_back(o);
      }
    }
    merge_char_options(&flat);
    if (flat.empty()) return has_empty ? empty() : never();
    NodePtr result = flat[0];
    if (flat.size() > 1) {
      bool nullable = std::any_of(flat.begin(), flat.end(), [](NodePtr p) { return p->nullable; });
      result = add(Node::kAlt, nullable, std::move(flat));
    }
    if (!has_empty || result->nullable) return result;
    return repeat(result, 0, 1);
  }

  // child{min,max}. A nullable child is replaced by its non-empty part:
  // X{m,} = X* = (X')* and X{m,n} = X'{0,n} when X matches "".
  NodePtr repeat(NodePtr child, uint32_t min, uint32_t max) {
    if (max == 0 || child->kind == Node::kEmpty) return empty();
    if (child->kind == Node::kNever) return min == 0 ? empty() : child;
    if (min == 1 && max == 1) return child;
    if (child->nullable) {
      if (max == kUnbounded) {
        std::vector<NodePtr> parts;
        star_parts(child, &parts);
        child = alt(parts);
      } else {
        child = without_empty(child);
      }
      min = 0;
      if (child->kind == Node::kNever) return empty();
      if (max == 1) return repeat(child, 0, 1);
    }
    Node* n = add(Node::kRepeat, min == 0, {child});
    n->min = min;
    n->max = max;
    return n;
  }

 private:
  Node* add(Node::Kind kind, bool nullable, std::vector<NodePtr> children = {}, Ranges set = {}) {
    nodes_.push_back(std::make_unique<Node>());
    Node* n = nodes_.back().get();
    n->kind = kind;
    n->nullable = nullable;
    n->children = std::move(children);
    n->chars = std::move(set);
    return n;
  }

  // Alternatives that are character sets become one set (a|b|[cd] -> [a-d]),
  // in the place of the first: fewer, unambiguous alternatives.
  void merge_char_options(std::vector<NodePtr>* options) {
    Ranges merged;
    size_t first = options->size();
    size_t sets = 0;
    for (size_t i = 0; i < options->size(); ++i) {
      if ((*options)[i]->kind != Node::kChars) continue;
      first = std::min(first, i);
      ++sets;
      merged.insert(merged.end(), (*options)[i]->chars.begin(), (*options)[i]->chars.end());
    }
    if (sets < 2) return;
    std::vector<NodePtr> out;
    for (size_t i = 0; i < options->size(); ++i) {
      if (i == first) {
        out.push_back(chars(merged));
      } else if ((*options)[i]->kind != Node::kChars) {
        out.push_back((*options)[i]);
      }
    }
    *options = std::move(out);
  }

  // The node's language without the empty string. Repetitions in the tree
  // never repeat a nullable child, so this only descends through sequences,
  // alternatives and rules.
  NodePtr without_empty(NodePtr n) {
    if (!n->nullable) return n;
    switch (n->kind) {
      case Node::kEmpty:
        return never();
      case Node::kRepeat:
        return repeat(n->children[0], std::max<uint32_t>(n->min, 1), n->max);
      case Node::kRule:
        return rule(without_empty(n->children[0]));
      case Node::kAlt: {
        std::vector<NodePtr> options;
        for (NodePtr c : n->children) options.push_back(without_empty(c));
        return alt(options);
      }
      case Node::kSeq:
        return seq_without_empty(n->children);
      default:
        return n;
    }
  }

  // c1 c2 ... cn minus the empty string, every ci nullable: the strings
  // whose first non-empty part is ci, that is ci' followed by c(i+1)..cn.
  // The suffixes are shared rules, so the result grows linearly with n.
  NodePtr seq_without_empty(const std::vector<NodePtr>& parts) {
    std::vector<NodePtr> options;
    NodePtr suffix = parts.back();
    options.push_back(without_empty(parts.back()));
    for (size_t i = parts.size() - 1; i-- > 0;) {
      NodePtr rest = rule(suffix);
      options.push_back(seq({without_empty(parts[i]), rest}));
      suffix = seq({parts[i], rest});
    }
    return alt(options);
  }

  // Non-nullable parts whose alternation, starred, equals n*: under a star
  // the order of the nullable parts of a sequence does not matter.
  static void star_parts(NodePtr n, std::vector<NodePtr>* out) {
    if (!n->nullable) {
      out->push_back(n);
      return;
    }
    switch (n->kind) {
      case Node::kEmpty:
        return;
      case Node::kRepeat:
        out->push_back(n->children[0]);
        return;
      case Node::kRule:
        star_parts(n->children[0], out);
        return;
      default:  // kSeq, kAlt
        for (NodePtr c : n->children) star_parts(c, out);
    }
  }

  std::vector<std::unique_ptr<Node>> nodes_;
};

// ---------------------------------------------------------------------------
// UTF-8 decoding.

struct CodePoint {
  uint32_t value;
  size_t offset;  // byte offset in the pattern
};

// Decodes one code point at `s[i]`; returns its length, or 0 if invalid.
size_t decode_utf8(std::string_view s, size_t i, uint32_t* cp) {
  auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  uint8_t b = byte(i);
  if (b < 0x80) {
    *cp = b;
    return 1;
  }
  size_t len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
  if (len == 0 || b >= 0xF8 || i + len > s.size()) return 0;
  uint32_t v = b & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    v = (v << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
  if (v < kMinForLength[len] || v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return len;
}

std::string at_offset(size_t offset) { return " at offset " + std::to_string(offset); }

Status invalid(const std::string& what, size_t offset) {
  return InvalidArgument("regex: " + what + at_offset(offset));
}

Status unsupported(const std::string& what, size_t offset) {
  return Unsupported("regex: " + what + " is not supported" + at_offset(offset));
}

Status decode_pattern(std::string_view pattern, std::vector<CodePoint>* out) {
  for (size_t i = 0; i < pattern.size();) {
    uint32_t cp = 0;
    size_t len = decode_utf8(pattern, i, &cp);
    if (len == 0) return invalid("invalid UTF-8", i);
    out->push_back({cp, i});
    i += len;
  }
  return Status::Ok();
}

bool is_digit(uint32_t c) { return c >= '0' && c <= '9'; }
bool is_alpha(uint32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

int hex_value(uint32_t c) {
  if (is_digit(c)) return static_cast<int>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
  return -1;
}

// ---------------------------------------------------------------------------
// The parser: recursive descent over code points.

// What an escape stands for: one code point or a set (\d ...).
struct Escape {
  bool is_set = false;
  uint32_t cp = 0;
  Ranges set;
};

// A top-level alternative and whether it was anchored at either end.
struct Branch {
  NodePtr node = nullptr;
  bool at_start = false;  // began with `^`
  bool at_end = false;    // ended with `$`
};

class RegexParser {
 public:
  // `ecma`: ECMA-262's meanings (the file comment), for JSON Schema.
  RegexParser(std::vector<CodePoint> cps, size_t end_offset, bool ecma, Builder* builder)
      : cps_(std::move(cps)), end_offset_(end_offset), ecma_(ecma), b_(*builder) {}

  // The top-level alternatives, in order.
  Status parse(std::vector<Branch>* branches) {
    NodePtr unused = nullptr;
    PVLLM_RETURN_IF_ERROR(parse_alternation(/*top=*/true, &unused));
    if (!at_end()) return invalid("unbalanced ')'", offset());
    *branches = std::move(branches_);
    return Status::Ok();
  }

 private:
  bool at_end() const { return pos_ >= cps_.size(); }
  uint32_t peek(size_t ahead = 0) const {
    return pos_ + ahead < cps_.size() ? cps_[pos_ + ahead].value : UINT32_MAX;
  }
  size_t offset(size_t ahead = 0) const {
    return pos_ + ahead < cps_.size() ? cps_[pos_ + ahead].offset : end_offset_;
  }

  Status parse_alternation(bool top, NodePtr* out) {
    std::vector<NodePtr> options;
    while (true) {
      Branch branch;
      PVLLM_RETURN_IF_ERROR(parse_branch(top, &branch));
      options.push_back(branch.node);
      if (top) branches_.push_back(branch);
      if (peek() != '|') break;
      ++pos_;
    }
    *out = b_.alt(options);
    return Status::Ok();
  }

  bool branch_ends() const { return at_end() || peek() == '|' || peek() == ')'; }

  Status parse_branch(bool top, Branch* out) {
    std::vector<NodePtr> parts;
    if (top && peek() == '^') {
      ++pos_;
      out->at_start = true;
    }
    while (!branch_ends()) {
      PVLLM_RETURN_IF_ERROR(check_anchor(top));
      if (top && peek() == '$') {
        ++pos_;
        out->at_end = true;
        break;
      }
      NodePtr atom = nullptr;
      PVLLM_RETURN_IF_ERROR(parse_atom(&atom));
      PVLLM_RETURN_IF_ERROR(parse_quantifiers(&atom));
      parts.push_back(atom);
    }
    out->node = b_.seq(parts);
    return Status::Ok();
  }

  // `^` is only accepted first and `$` only last in a top-level branch.
  Status check_anchor(bool top) {
    if (peek() == '^') return unsupported("the anchor '^' other than at the start", offset());
    if (peek() != '$') return Status::Ok();
    bool last = pos_ + 1 >= cps_.size() || peek(1) == '|';
    if (top && last) return Status::Ok();
    return unsupported("the anchor '$' other than at the end", offset());
  }

  Status parse_atom(NodePtr* out) {
    if (starts_quantifier()) return invalid("a quantifier with nothing to repeat", offset());
    uint32_t c = peek();
    switch (c) {
      case '(':
        return parse_group(out);
      case '[':
        return parse_class(out);
      case '.':
        ++pos_;
        *out = b_.chars(ecma_ ? complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}})
                              : complement({{'\n', '\n'}}));
        return Status::Ok();
      case '\\': {
        Escape e;
        PVLLM_RETURN_IF_ERROR(parse_escape(/*in_class=*/false, &e));
        *out = e.is_set ? b_.chars(e.set) : b_.one_char(e.cp);
        return Status::Ok();
      }
      default:
        ++pos_;
        *out = b_.one_char(c);
        return Status::Ok();
    }
  }

  // ---- quantifiers

  // Reads {m} {m,} {m,n} {,n} at the current position without consuming
  // it; false if the text there is not one (then `{` is a literal).
  bool brace_quantifier(uint32_t* min, uint32_t* max, size_t* length) const {
    size_t i = 1;
    auto number = [&](bool* any) {
      uint64_t v = 0;
      *any = false;
      while (is_digit(peek(i))) {
        v = std::min<uint64_t>(v * 10 + (peek(i) - '0'), uint64_t{1} << 40);
        *any = true;
        ++i;
      }
      return v;
    };
    bool has_min = false, has_max = false;
    uint64_t lo = number(&has_min), hi = lo;
    if (peek(i) == ',') {
      ++i;
      hi = number(&has_max);
      if (!has_min && !has_max) return false;
    } else if (!has_min) {
      return false;
    } else {
      has_max = true;  // {m}
    }
    if (peek(i) != '}') return false;
    // Counts past the limit stay past it (and below kUnbounded).
    auto clamp = [](uint64_t v) {
      return static_cast<uint32_t>(std::min<uint64_t>(v, kUnbounded - 1));
    };
    *min = clamp(lo);
    *max = has_max ? clamp(hi) : kUnbounded;
    *length = i + 1;
    return true;
  }

  // Parses one quantifier if present, with its lazy or possessive suffix.
  Status read_quantifier(bool* found, uint32_t* min, uint32_t* max) {
    uint32_t c = peek();
    size_t start = offset();
    size_t length = 1;
    *found = true;
    if (c == '*') {
      *min = 0, *max = kUnbounded;
    } else if (c == '+') {
      *min = 1, *max = kUnbounded;
    } else if (c == '?') {
      *min = 0, *max = 1;
    } else if (c != '{' || !brace_quantifier(min, max, &length)) {
      *found = false;
      return Status::Ok();
    }
    if ((*max != kUnbounded && *max > kMaxRepetition) || *min > kMaxRepetition) {
      return unsupported("a repetition count above " + std::to_string(kMaxRepetition), start);
    }
    if (*min > *max) return invalid("a repetition {m,n} with m > n", start);
    // ECMA-262 reads {,n} as text (or refuses it); other dialects as {0,n}.
    if (ecma_ && c == '{' && peek(1) == ',') return unsupported("the repetition '{,n}'", start);
    pos_ += length;
    if (peek() == '+') return unsupported("the possessive quantifier", offset());
    if (peek() == '?') ++pos_;  // lazy: the same strings match in full
    return Status::Ok();
  }

  // A second quantifier (a** or a{2}{3}) is a syntax error, as in ECMAScript.
  Status parse_quantifiers(NodePtr* atom) {
    bool found = false;
    uint32_t min = 0, max = 0;
    PVLLM_RETURN_IF_ERROR(read_quantifier(&found, &min, &max));
    if (!found) return Status::Ok();
    *atom = b_.repeat(*atom, min, max);
    if (starts_quantifier()) return invalid("a quantifier with nothing to repeat", offset());
    return Status::Ok();
  }

  bool starts_quantifier() const {
    uint32_t c = peek();
    uint32_t min = 0, max = 0;
    size_t length = 0;
    return c == '*' || c == '+' || c == '?' || (c == '{' && brace_quantifier(&min, &max, &length));
  }

  // ---- groups

  Status parse_group(NodePtr* out) {
    size_t start = offset();
    if (++depth_ > kMaxNesting) {
      return unsupported("nesting deeper than " + std::to_string(kMaxNesting), start);
    }
    ++pos_;
    if (peek() == '?') PVLLM_RETURN_IF_ERROR(parse_group_prefix());
    NodePtr inner = nullptr;
    PVLLM_RETURN_IF_ERROR(parse_alternation(/*top=*/false, &inner));
    if (peek() != ')') return invalid("unbalanced '('", start);
    ++pos_;
    --depth_;
    *out = inner;
    return Status::Ok();
  }

  // After "(?": accepts ':' and group names, refuses the rest.
  Status parse_group_prefix() {
    size_t start = offset() - 1;
    uint32_t a = peek(1), b = peek(2);
    if (a == ':') {
      pos_ += 2;
      return Status::Ok();
    }
    if (a == '<' && (b == '=' || b == '!')) return unsupported("look-behind '(?<'", start);
    if (a == '=' || a == '!') return unsupported("look-ahead '(?='", start);
    if (a == '<') {
      pos_ += 2;
      return parse_group_name(start);
    }
    if (a == 'P' && b == '<') {
      pos_ += 3;
      return parse_group_name(start);
    }
    if (a == 'P' && (b == '=' || b == '>')) return unsupported("the backreference '(?P='", start);
    if (a == '>') return unsupported("the atomic group '(?>'", start);
    if (a == '#') return unsupported("the comment group '(?#'", start);
    if (is_alpha(a) || a == '-' || a == '^') return unsupported("inline flags '(?flags)'", start);
    if (a == UINT32_MAX) return invalid("unbalanced '('", start);
    return unsupported("the group construct '(?'", start);
  }

  Status parse_group_name(size_t start) {
    uint32_t c = peek();
    if (!is_alpha(c) && c != '_') return invalid("a bad group name", start);
    while (is_alpha(peek()) || is_digit(peek()) || peek() == '_') ++pos_;
    if (peek() != '>') return invalid("a bad group name", start);
    ++pos_;
    return Status::Ok();
  }

  // ---- character classes

  Status parse_class(NodePtr* out) {
    size_t start = offset();
    ++pos_;
    bool negate = peek() == '^';
    if (negate) ++pos_;
    Ranges set;
    // A `]` first is a member, but ends the class in ECMA-262: `[]` is
    // empty and `[^]` any code point.
    for (bool first = !ecma_;; first = false) {
      if (at_end()) return invalid("an unterminated character class", start);
      if (peek() == ']' && !first) break;
      PVLLM_RETURN_IF_ERROR(parse_class_item(&set));
    }
    ++pos_;
    if (negate) set = complement(normalized(std::move(set)));
    *out = b_.chars(std::move(set));
    return Status::Ok();
  }

  // One member: a code point, a set (\d), or a range lo-hi. A `-` first,
  // last or next to a set is literal.
  Status parse_class_item(Ranges* set) {
    size_t lo_offset = offset();
    Escape lo;
    PVLLM_RETURN_IF_ERROR(parse_class_atom(&lo));
    add(lo, set);
    if (lo.is_set && peek() == '-') {
      ++pos_;
      set->push_back({'-', '-'});
      return Status::Ok();
    }
    bool range = !lo.is_set && peek() == '-' && pos_ + 1 < cps_.size() && peek(1) != ']';
    if (!range) return Status::Ok();
    ++pos_;
    Escape hi;
    PVLLM_RETURN_IF_ERROR(parse_class_atom(&hi));
    if (hi.is_set) {
      set->push_back({'-', '-'});
      add(hi, set);
      return Status::Ok();
    }
    if (hi.cp < lo.cp) return invalid("a range whose end precedes its start", lo_offset);
    set->push_back({lo.cp, hi.cp});
    return Status::Ok();
  }

  static void add(const Escape& e, Ranges* set) {
    if (e.is_set) {
      set->insert(set->end(), e.set.begin(), e.set.end());
    } else {
      set->push_back({e.cp, e.cp});
    }
  }

  Status parse_class_atom(Escape* out) {
    uint32_t c = peek();
    if (c == '[' && (peek(1) == ':' || peek(1) == '.' || peek(1) == '=')) {
      return unsupported("the POSIX class '[:'", offset());
    }
    if (c == '\\') return parse_escape(/*in_class=*/true, out);
    ++pos_;
    out->cp = c;
    return Status::Ok();
  }

  // ---- escapes

  Status parse_escape(bool in_class, Escape* out) {
    size_t start = offset();
    if (pos_ + 1 >= cps_.size()) return invalid("a dangling backslash", start);
    uint32_t c = peek(1);
    pos_ += 2;
    if (set_escape(c, out)) return Status::Ok();
    if (std::optional<uint32_t> v = control_escape(c, in_class)) {
      out->cp = *v;
      return Status::Ok();
    }
    switch (c) {
      case '0':
        if (is_digit(peek())) return unsupported("the octal escape '\\0'", start);
        out->cp = 0;
        return Status::Ok();
      case 'x':
        // ECMA-262 reads \x{41} as 41 x's (or refuses it).
        if (ecma_ && peek() == '{') return unsupported("the escape '\\x{'", start);
        return parse_hex_escape(start, 2, out);
      case 'u':
        return parse_u_escape(start, out);
      case 'U':
        if (ecma_) return unsupported_escape(c, start);
        return parse_fixed_hex(start, 8, &out->cp);
      case 'c':
        if (!is_alpha(peek())) return invalid("'\\c' without a letter", start);
        out->cp = peek() % 32;
        ++pos_;
        return Status::Ok();
    }
    if (c < 0x80 && !is_alpha(c) && !is_digit(c)) {
      out->cp = c;  // escaped punctuation
      return Status::Ok();
    }
    if (c >= 0x80) {
      out->cp = c;
      return Status::Ok();
    }
    if (in_class && is_digit(c)) return unsupported("the octal escape", start);
    return unsupported_escape(c, start);
  }

  bool set_escape(uint32_t c, Escape* out) const {
    Ranges set;
    switch (c | 0x20) {
      case 'd':
        set = digit_set();
        break;
      case 'w':
        set = word_set();
        break;
      case 's':
        set = ecma_ ? ecma_space_set() : space_set();
        break;
      default:
        return false;
    }
    out->is_set = true;
    out->set = (c & 0x20) ? set : complement(set);
    return true;
  }

  static std::optional<uint32_t> control_escape(uint32_t c, bool in_class) {
    switch (c) {
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case 'f':
        return '\f';
      case 'v':
        return '\v';
      case 'b':
        if (in_class) return '\b';
        return std::nullopt;
      default:
        return std::nullopt;
    }
  }

  static Status unsupported_escape(uint32_t c, size_t start) {
    std::string name = std::string("'\\") + static_cast<char>(c) + "'";
    if (is_digit(c)) return unsupported("the backreference " + name, start);
    if (c == 'k') return unsupported("the backreference '\\k'", start);
    if (c == 'b' || c == 'B') return unsupported("the word boundary " + name, start);
    if (c == 'A' || c == 'z' || c == 'Z' || c == 'G') {
      return unsupported("the anchor " + name, start);
    }
    if (c == 'p' || c == 'P') return unsupported("the Unicode property " + name, start);
    return unsupported("the escape " + name, start);
  }

  // \xHH or \x{H...}.
  Status parse_hex_escape(size_t start, size_t digits, Escape* out) {
    if (peek() == '{') return parse_braced_hex(start, &out->cp);
    return parse_fixed_hex(start, digits, &out->cp);
  }

  // \uHHHH (a surrogate pair \uD8xx\uDCxx is joined) or \u{H...}.
  Status parse_u_escape(size_t start, Escape* out) {
    if (peek() == '{') return parse_braced_hex(start, &out->cp);
    uint32_t high = 0;
    PVLLM_RETURN_IF_ERROR(parse_fixed_hex_raw(start, 4, &high));
    if (high >= 0xD800 && high <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
      size_t saved = pos_;
      pos_ += 2;
      uint32_t low = 0;
      if (parse_fixed_hex_raw(start, 4, &low).ok() && low >= 0xDC00 && low <= 0xDFFF) {
        out->cp = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
        return Status::Ok();
      }
      pos_ = saved;
    }
    return check_code_point(high, start, &out->cp);
  }

  Status parse_fixed_hex_raw(size_t start, size_t digits, uint32_t* out) {
    uint32_t v = 0;
    for (size_t i = 0; i < digits; ++i) {
      int h = hex_value(peek());
      if (h < 0) return invalid("a bad hexadecimal escape", start);
      v = v * 16 + static_cast<uint32_t>(h);
      ++pos_;
    }
    *out = v;
    return Status::Ok();
  }

  Status parse_fixed_hex(size_t start, size_t digits, uint32_t* out) {
    uint32_t v = 0;
    PVLLM_RETURN_IF_ERROR(parse_fixed_hex_raw(start, digits, &v));
    return check_code_point(v, start, out);
  }

  Status parse_braced_hex(size_t start, uint32_t* out) {
    ++pos_;  // '{'
    uint32_t v = 0;
    size_t digits = 0;
    for (; hex_value(peek()) >= 0; ++pos_, ++digits) {
      if (digits >= 8) return invalid("a code point above U+10FFFF", start);
      v = v * 16 + static_cast<uint32_t>(hex_value(peek()));
    }
    if (digits == 0 || peek() != '}') return invalid("a bad hexadecimal escape", start);
    ++pos_;
    return check_code_point(v, start, out);
  }

  static Status check_code_point(uint32_t v, size_t start, uint32_t* out) {
    if (v > kMaxCodePoint) return invalid("a code point above U+10FFFF", start);
    if (v >= 0xD800 && v <= 0xDFFF) return invalid("a lone surrogate code point", start);
    *out = v;
    return Status::Ok();
  }

  std::vector<CodePoint> cps_;
  size_t end_offset_;
  bool ecma_;
  Builder& b_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::vector<Branch> branches_;
};

// ---------------------------------------------------------------------------
// Printing GBNF.

// Code points printed as escapes: controls, C1 controls, surrogates,
// spaces other than U+0020, invisible separators and formatting (bidi
// controls among them) and private use.
bool needs_escape(uint32_t c) {
  if (c < 0x20 || c == 0x7F) return true;
  if (c < 0x80) return false;
  return c <= 0xA0 || c == 0xAD || c == 0x1680 || c == 0x180E || (c >= 0x2000 && c <= 0x200F) ||
         (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x206F) || c == 0x3000 ||
         (c >= 0xD800 && c <= 0xF8FF) || c == 0xFEFF || c >= 0xF0000;
}

void append_escaped(uint32_t c, std::string* out) {
  char buf[16];
  switch (c) {
    case '\n':
      *out += "\\n";
      return;
    case '\r':
      *out += "\\r";
      return;
    case '\t':
      *out += "\\t";
      return;
  }
  if (c < 0x80) {
    std::snprintf(buf, sizeof buf, "\\x%02X", c);
  } else if (c <= 0xFFFF) {
    std::snprintf(buf, sizeof buf, "\\u%04X", c);
  } else {
    std::snprintf(buf, sizeof buf, "\\U%08X", c);
  }
  *out += buf;
}

void append_literal_char(uint32_t c, std::string* out) {
  if (c == '"' || c == '\\') {
    out->push_back('\\');
    out->push_back(static_cast<char>(c));
  } else if (needs_escape(c)) {
    append_escaped(c, out);
  } else {
    append_utf8(c, out);
  }
}

void append_class_char(uint32_t c, std::string* out) {
  if (c == ']' || c == '[' || c == '\\' || c == '-' || c == '^') {
    out->push_back('\\');
    out->push_back(static_cast<char>(c));
  } else if (needs_escape(c)) {
    append_escaped(c, out);
  } else {
    append_utf8(c, out);
  }
}

std::string class_body(const Ranges& set) {
  std::string out;
  for (CharRange r : set) {
    append_class_char(r.lo, &out);
    if (r.hi == r.lo) continue;
    if (r.hi > r.lo + 1) out.push_back('-');
    append_class_char(r.hi, &out);
  }
  return out;
}

bool single_char(NodePtr n) {
  return n->kind == Node::kChars && n->chars.size() == 1 && n->chars[0].lo == n->chars[0].hi;
}

std::string chars_term(const Ranges& set) {
  if (set.size() == 1 && set[0].lo == set[0].hi) {
    std::string out = "\"";
    append_literal_char(set[0].lo, &out);
    return out + "\"";
  }
  if (set.size() == 1 && set[0].lo == 0 && set[0].hi == kMaxCodePoint) return ".";
  Ranges negated = complement(set);
  if (negated.size() < set.size()) return "[^" + class_body(negated) + "]";
  return "[" + class_body(set) + "]";
}

// How JSON text spells a code point, canonically (as JSON.stringify,
// Python's json.dumps(ensure_ascii=False) and nlohmann::json::dump()
// write it): `"` and `\` after a backslash, \b \f \n \r \t, the other
// controls U+0000-U+001F as \u00xx in lower case, the rest as itself.
struct JsonEscape {
  // The code points written as an escape.
  static bool escaped(uint32_t c) { return c < 0x20 || c == '"' || c == '\\'; }
  static Ranges escaped_set() { return {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}; }
  // The letter after the backslash of a short escape, or 0 for \u00xx.
  static char short_letter(uint32_t c) {
    switch (c) {
      case '"':
        return '"';
      case '\\':
        return '\\';
      case '\b':
        return 'b';
      case '\f':
        return 'f';
      case '\n':
        return 'n';
      case '\r':
        return 'r';
      case '\t':
        return 't';
      default:
        return 0;
    }
  }
  static std::string spelling(uint32_t c) {
    static constexpr char kHex[] = "0123456789abcdef";
    if (char letter = short_letter(c)) return std::string("\\") + letter;
    return std::string("\\u00") + kHex[c >> 4] + kHex[c & 15];
  }
};

bool ranges_contain(const Ranges& set, uint32_t c) {
  return std::any_of(set.begin(), set.end(), [c](CharRange r) { return r.lo <= c && c <= r.hi; });
}

Ranges ranges_minus(const Ranges& set, const Ranges& removed) {
  Ranges kept = complement(removed), out;
  for (CharRange a : set) {
    for (CharRange b : kept) {
      uint32_t lo = std::max(a.lo, b.lo), hi = std::min(a.hi, b.hi);
      if (lo <= hi) out.push_back({lo, hi});
    }
  }
  return out;
}

// `prefix` (ASCII) followed by one of `last` (ASCII) as GBNF: one literal
// when `last` is one character.
std::string literal_then(const std::string& prefix, const Ranges& last) {
  if (last.size() == 1 && last[0].lo == last[0].hi) {
    return gbnf_literal(prefix + static_cast<char>(last[0].lo));
  }
  if (prefix.empty()) return chars_term(last);
  return gbnf_literal(prefix) + " " + chars_term(last);
}

// Options as one GBNF term.
std::string group(const std::vector<std::string>& options) {
  if (options.size() == 1 && options[0].find(' ') == std::string::npos) return options[0];
  std::string out = "(";
  for (size_t i = 0; i < options.size(); ++i) out += (i ? " | " : " ") + options[i];
  return out + " )";
}

// The JSON spellings of the code points of `set` as one GBNF term: a class
// of those written as themselves, or a backslash and what may follow it in
// the escapes of the others (grouped by all but their last character). One
// backslash for all escapes keeps the matcher's stacks few in a long run of
// any character.
std::string json_chars_term(const Ranges& set) {
  Ranges letters, low[2];  // low[h]: the last digits of \u00h.
  for (uint32_t c = 0; c <= '\\'; ++c) {
    if (!JsonEscape::escaped(c) || !ranges_contain(set, c)) continue;
    if (char letter = JsonEscape::short_letter(c)) {
      letters.push_back({static_cast<uint32_t>(letter), static_cast<uint32_t>(letter)});
    } else {
      char digit = JsonEscape::spelling(c).back();
      low[c >> 4].push_back({static_cast<uint32_t>(digit), static_cast<uint32_t>(digit)});
    }
  }
  // After the backslash: (text, its last character).
  std::vector<std::pair<std::string, Ranges>> escapes;
  if (!letters.empty()) escapes.emplace_back("", normalized(letters));
  for (int h = 0; h < 2; ++h) {
    if (!low[h].empty()) escapes.emplace_back("u00" + std::to_string(h), normalized(low[h]));
  }
  std::vector<std::string> options;
  Ranges raw = ranges_minus(set, JsonEscape::escaped_set());
  if (!raw.empty()) options.push_back(chars_term(raw));
  if (escapes.size() == 1) {
    options.push_back(literal_then("\\" + escapes[0].first, escapes[0].second));
  } else if (!escapes.empty()) {
    std::vector<std::string> tails;
    for (const auto& [text, last] : escapes) tails.push_back(literal_then(text, last));
    options.push_back(gbnf_literal("\\") + " " + group(tails));
  }
  return group(options);
}

class Printer {
 public:
  // `json`: print each code point as JSON text spells it (JsonEscape). The
  // root rule is `root`; the others are `prefix` and a number.
  Printer(bool json, std::string root, std::string prefix)
      : json_(json), root_(std::move(root)), prefix_(std::move(prefix)) {}

  std::string print(NodePtr root) {
    std::string out = root_ + " ::= " + body(root) + "\n";
    // Rules are printed as they are discovered; their bodies may add more.
    for (size_t i = 0; i < pending_.size(); ++i) {
      auto [name, node] = pending_[i];  // a copy: body() may add rules
      out += name + " ::= " + body(node) + "\n";
    }
    return out;
  }

 private:
  std::string body(NodePtr n) {
    if (n->kind == Node::kRule) return body(n->children[0]);
    if (n->kind != Node::kAlt) return sequence(n);
    // Alternatives printed alike are one language: keep one (fewer
    // ambiguous parses for the matcher to follow).
    std::string out;
    std::unordered_set<std::string> seen;
    for (NodePtr c : n->children) {
      std::string option = sequence(c);
      if (!seen.insert(option).second) continue;
      if (!out.empty()) out += " | ";
      out += option;
    }
    return out;
  }

  // Terms separated by spaces; runs of single code points become one literal.
  std::string sequence(NodePtr n) {
    if (n->kind == Node::kEmpty) return "\"\"";
    if (n->kind != Node::kSeq) return term(n);
    std::string out, literal;
    auto flush = [&] {
      if (literal.empty()) return;
      if (!out.empty()) out += " ";
      out += "\"" + literal + "\"";
      literal.clear();
    };
    for (NodePtr c : n->children) {
      if (single_char(c)) {
        append_char(c->chars[0].lo, &literal);
        continue;
      }
      flush();
      if (!out.empty()) out += " ";
      out += term(c);
    }
    flush();
    return out;
  }

  // Code point `c` inside a GBNF literal.
  void append_char(uint32_t c, std::string* literal) const {
    if (!json_ || !JsonEscape::escaped(c)) return append_literal_char(c, literal);
    for (char e : JsonEscape::spelling(c)) append_literal_char(static_cast<uint8_t>(e), literal);
  }

  std::string chars(const Ranges& set) const {
    return json_ ? json_chars_term(set) : chars_term(set);
  }

  std::string term(NodePtr n) {
    switch (n->kind) {
      case Node::kChars:
        return chars(n->chars);
      case Node::kRepeat:
        return repeated(n->children[0]) + suffix(n->min, n->max);
      case Node::kEmpty:
        return "\"\"";
      default:
        return rule_name(n);
    }
  }

  // The operand of a postfix operator: a class, a literal, a flat
  // parenthesised sequence or a rule.
  std::string repeated(NodePtr n) {
    if (n->kind == Node::kChars) return chars(n->chars);
    if (n->kind == Node::kSeq && flat(n)) return "(" + sequence(n) + ")";
    return rule_name(n);
  }

  static bool flat(NodePtr n) {
    return std::all_of(n->children.begin(), n->children.end(),
                       [](NodePtr c) { return c->kind == Node::kChars; });
  }

  static std::string suffix(uint32_t min, uint32_t max) {
    if (max == kUnbounded) {
      if (min == 0) return "*";
      if (min == 1) return "+";
      return "{" + std::to_string(min) + ",}";
    }
    if (min == 0 && max == 1) return "?";
    if (min == max) return "{" + std::to_string(min) + "}";
    return "{" + std::to_string(min) + "," + std::to_string(max) + "}";
  }

  std::string rule_name(NodePtr n) {
    auto it = names_.find(n);
    if (it != names_.end()) return it->second;
    std::string name = prefix_ + std::to_string(names_.size() + 1);
    names_.emplace(n, name);
    pending_.emplace_back(name, n);
    return name;
  }

  bool json_;
  std::string root_;
  std::string prefix_;
  std::unordered_map<NodePtr, std::string> names_;
  std::vector<std::pair<std::string, NodePtr>> pending_;
};

// Decodes and parses `pattern` into its top-level alternatives.
Status parse_regex(std::string_view pattern, bool ecma, Builder* builder,
                   std::vector<Branch>* branches) {
  if (pattern.size() > kMaxPatternBytes) {
    return InvalidArgument("regex: a pattern longer than " + std::to_string(kMaxPatternBytes) +
                           " bytes" + at_offset(kMaxPatternBytes));
  }
  std::vector<CodePoint> cps;
  PVLLM_RETURN_IF_ERROR(decode_pattern(pattern, &cps));
  return RegexParser(std::move(cps), pattern.size(), ecma, builder).parse(branches);
}

Status refuse_if_never(NodePtr root) {
  if (root->kind != Node::kNever) return Status::Ok();
  return Unsupported("regex: a pattern that matches no string" + at_offset(0));
}

bool valid_prefix(std::string_view name) {
  if (name.empty() || is_digit(static_cast<uint8_t>(name[0])) || name[0] == '-') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    auto u = static_cast<uint8_t>(c);
    return is_alpha(u) || is_digit(u) || c == '_' || c == '-';
  });
}

}  // namespace

Status regex_to_gbnf(std::string_view pattern, std::string* gbnf) {
  Builder builder;
  std::vector<Branch> branches;
  PVLLM_RETURN_IF_ERROR(parse_regex(pattern, /*ecma=*/false, &builder, &branches));
  std::vector<NodePtr> options;
  for (const Branch& b : branches) options.push_back(b.node);
  NodePtr root = builder.alt(options);
  PVLLM_RETURN_IF_ERROR(refuse_if_never(root));
  *gbnf = Printer(/*json=*/false, "root", "r").print(root);
  return Status::Ok();
}

Status regex_to_json_string_gbnf(std::string_view pattern, std::string_view rule_prefix,
                                 std::string* rules) {
  if (!valid_prefix(rule_prefix)) {
    return InvalidArgument("regex: '" + std::string(rule_prefix) + "' is not a rule name");
  }
  Builder builder;
  std::vector<Branch> branches;
  PVLLM_RETURN_IF_ERROR(parse_regex(pattern, /*ecma=*/true, &builder, &branches));
  // A search: any text before an alternative not anchored at the start,
  // any after one not anchored at the end.
  NodePtr any_text =
      builder.rule(builder.repeat(builder.chars({{0, kMaxCodePoint}}), 0, kUnbounded));
  std::vector<NodePtr> options;
  for (const Branch& b : branches) {
    if (b.node->nullable && !(b.at_start && b.at_end)) {
      options.push_back(any_text);  // found (empty) at one end of every string
      continue;
    }
    options.push_back(builder.seq(
        {b.at_start ? builder.empty() : any_text, b.node, b.at_end ? builder.empty() : any_text}));
  }
  NodePtr root = builder.alt(options);
  PVLLM_RETURN_IF_ERROR(refuse_if_never(root));
  std::string prefix(rule_prefix);
  *rules = Printer(/*json=*/true, prefix, prefix + "-").print(root);
  return Status::Ok();
}

}  // namespace pvllm::structured
