// A context-free grammar over Unicode code points, the form every output
// constraint (JSON schema, regex, choices, GBNF text) is compiled into.
//
// GBNF, the text form (as llama.cpp's grammars write it):
//   root    ::= object                 # a rule; `root` is where output starts
//   object  ::= "{" ( pair ( "," pair )* )? "}"
//   name    ::= [a-zA-Z_] [a-zA-Z0-9_]{0,31}
// Rule names: [a-zA-Z_][a-zA-Z0-9_-]*. A definition runs until the next
// `name ::=`. Terms: "literal" (UTF-8; escapes \" \\ \/ \n \r \t \xHH
// \uHHHH \UHHHHHHHH), [class] and [^class] (ranges a-z; the same escapes
// plus \] \[ \- \^), `.` (any code point), a rule name, ( group ).
// Postfix * + ? {m} {m,} {m,n} (n <= 10000). `|` separates alternatives;
// # starts a comment to the end of the line.
//
// An extension for members that may come in any order:
//   members ::= %unordered{1,3}( "," ; a b? c* )
// matches items separated by the alternatives before the `;` ("," here),
// in any order: an item with no postfix exactly once, one with `?` at most
// once, one with `*` any number of times; the optional {m}, {m,} or {m,n}
// bounds how many items come in all; after the items, "; 2 -> 3 4, 1 -> 2"
// says that when item 2 came (items count from 1) items 3 and 4 must come
// too (JSON Schema's dependentRequired). Items are single terms (a literal, a
// class, a rule, a group); at most kMaxUnorderedItems of them, and one
// repeated with `*` must not match the empty text. `a b? c*` is
// a JSON object's required, optional and unlisted members. The matcher
// keeps which items came in its stacks, so the cost is per item, not per
// order.
//
// `%ordered` takes the same form and keeps the items in the order listed:
// an item comes only after the ones before it that came (one repeated with
// `*` may follow itself), so `%ordered( "," ; a? b? c? ; 1 -> 3 )` is a
// JSON object's members in declared order with JSON Schema's
// dependentRequired and property counts held exactly. In both, an item
// comes only where the term can still end: what must come (items without
// a postfix, dependencies of the items that came) still can, within the
// maximum, and the minimum is still in reach.
//
// Left recursion (a rule reaching itself before consuming a character,
// through rules that can be empty too) is refused: the matcher expands
// rules eagerly and would not end.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"

namespace pvllm::structured {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;
// A repetition's maximum when it has none (x* and x+, {m,}).
inline constexpr uint32_t kUnbounded = UINT32_MAX;

struct CharRange {
  uint32_t lo = 0;  // inclusive
  uint32_t hi = 0;  // inclusive
};

struct Element {
  enum Kind : uint8_t { kEnd, kChars, kRule, kUnordered };
  Kind kind = kEnd;
  // kChars: index into Grammar::char_sets; kRule: rule index;
  // kUnordered: index into Grammar::unordered.
  uint32_t value = 0;
};

inline constexpr size_t kMaxUnorderedItems = 256;

// A %unordered term. Each item has two sequences in Grammar::elements,
// each ended by kEnd: the item alone (the first to come) and the
// separator then the item (any later one).
struct Unordered {
  enum Count : uint8_t { kOnce, kOptional, kMany };
  struct Item {
    uint32_t first = 0;  // element positions
    uint32_t later = 0;
    Count count = kOnce;
  };
  std::vector<Item> items;
  std::bitset<kMaxUnorderedItems> once;  // the items that must come
  // Per item (empty when there are no dependencies): the items that must
  // come too once it came.
  // Closed: when 1 -> 2 and 2 -> 3, item 1 needs item 3 too.
  std::vector<std::bitset<kMaxUnorderedItems>> needs;
  bool ordered = false;  // %ordered: the items in the order listed
  uint32_t min = 0;      // items in all, kUnbounded: no maximum
  uint32_t max = kUnbounded;
};

// A set of code points: sorted, disjoint, non-adjacent ranges, and a
// bitmap of its ASCII part for the common case.
struct CharSet {
  std::vector<CharRange> ranges;
  uint64_t ascii[2] = {0, 0};
  bool contains(uint32_t c) const;
  // Whether some code point in [lo, hi] is in the set.
  bool intersects(uint32_t lo, uint32_t hi) const;
  // Whether every code point in [lo, hi] is.
  bool covers(uint32_t lo, uint32_t hi) const;
};

struct Grammar {
  std::vector<Element> elements;             // alternatives, each ended by kEnd
  std::vector<std::vector<uint32_t>> rules;  // per rule: each alternative's first element
  std::vector<CharSet> char_sets;
  std::vector<std::string> rule_names;
  std::vector<Unordered> unordered;
  uint32_t root = 0;
};

// Parses GBNF text. Errors are InvalidArgument naming the line, column and
// byte offset ("grammar: line 2, column 7 (byte 19): expected '::='");
// an undefined rule, a missing root, left recursion and a grammar larger
// than the limits below name the rule.
Status parse_gbnf(std::string_view text, Grammar* out);
// A GBNF "literal" matching exactly `text` (UTF-8): quotes and backslashes
// escaped, \n \r \t written so, other control characters as \xHH.
std::string gbnf_literal(std::string_view text);

// Whether the whole of `text` (UTF-8) is a sentence of the grammar's root.
// Invalid UTF-8 is not.
bool grammar_accepts(const Grammar& grammar, std::string_view text);

// Limits that keep a hostile constraint from exhausting memory at compile
// time.
inline constexpr size_t kMaxGrammarElements = 1 << 20;
inline constexpr uint32_t kMaxRepetition = 10000;

}  // namespace pvllm::structured
