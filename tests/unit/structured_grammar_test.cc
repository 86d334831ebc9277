// The grammar core of structured output: GBNF parsing (what it accepts,
// what it refuses and where), the byte-level matcher (UTF-8 split across
// bytes, repetition bounds, recursion), the vocabulary trie's token masks
// against a token-by-token reference, and the token matcher's handling of
// the detokenizer's stripped leading space.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/structured/constraint.h"
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

TEST(GbnfTest, AcceptsExactlyItsSentences) {
  const Grammar g = parse(R"(
    # a key-value list
    root  ::= "{" ( pair ( "," pair )* )? "}"
    pair  ::= key ":" value
    key   ::= [a-z_] [a-z0-9_]{0,7}
    value ::= [0-9]+ | "\"" [^"\\\n]* "\"" | root
  )");
  for (const char* ok :
       {"{}", "{a:1}", "{a:1,b_2:\"x y\"}", "{deep:{deeper:{x:\"\"}}}", "{abcdefgh:0}"}) {
    EXPECT_TRUE(grammar_accepts(g, ok)) << ok;
  }
  for (const char* bad : {"", "{", "{a:}", "{,}", "{a:1,}", "{abcdefghi:0}", "{1a:2}",
                          "{a:\"x\ny\"}", "{a:1}}", " {}"}) {
    EXPECT_FALSE(grammar_accepts(g, bad)) << bad;
  }
}

TEST(GbnfTest, RepetitionBoundsAndEscapes) {
  const Grammar g = parse(R"(root ::= "a"{2,4} "b"{3} "c"{2,} [\x41-\x43] "\u00e9" "\t")");
  EXPECT_TRUE(grammar_accepts(g, "aabbbccA\xC3\xA9\t"));
  EXPECT_TRUE(grammar_accepts(g, "aaaabbbccccccC\xC3\xA9\t"));
  EXPECT_FALSE(grammar_accepts(g, "abbbccA\xC3\xA9\t"));      // one a
  EXPECT_FALSE(grammar_accepts(g, "aaaaabbbccA\xC3\xA9\t"));  // five
  EXPECT_FALSE(grammar_accepts(g, "aabbccA\xC3\xA9\t"));      // two b
  EXPECT_FALSE(grammar_accepts(g, "aabbbcA\xC3\xA9\t"));      // one c
  EXPECT_FALSE(grammar_accepts(g, "aabbbccD\xC3\xA9\t"));
}

TEST(GbnfTest, CodePointsNotBytes) {
  const Grammar g = parse("root ::= [α-ω]+ \"😀\"? .");
  EXPECT_TRUE(grammar_accepts(g, "αβγ😀x"));
  EXPECT_TRUE(grammar_accepts(g, "ω中"));
  EXPECT_FALSE(grammar_accepts(g, "Ωx"));             // capital omega is outside
  EXPECT_FALSE(grammar_accepts(g, "α\xF0\x9F"));      // a cut emoji is no character
  EXPECT_FALSE(grammar_accepts(g, "α\xC0\xAF"));      // overlong
  EXPECT_FALSE(grammar_accepts(g, "α\xED\xA0\x80"));  // surrogate
}

TEST(GbnfTest, ErrorsSayWhereAndWhat) {
  struct Case {
    const char* text;
    StatusCode code;
    const char* needle;
  };
  const Case cases[] = {
      {"", StatusCode::kInvalidArgument, "no rules"},
      {"root = \"a\"", StatusCode::kInvalidArgument, "line 1, column 6 (byte 5): expected '::='"},
      {"root ::= \"a\"\nx ::= \"unterminated", StatusCode::kInvalidArgument, "line 2, column 7"},
      {"root ::= (\"a\" | \"b\"", StatusCode::kInvalidArgument, "unclosed '('"},
      {"root ::= \"a\" )", StatusCode::kInvalidArgument, "unbalanced ')'"},
      {"root ::= \"\\q\"", StatusCode::kInvalidArgument, "unknown escape"},
      {"root ::= [z-a]", StatusCode::kInvalidArgument, "range out of order"},
      {"root ::= []", StatusCode::kInvalidArgument, "empty character class"},
      {"root ::= * \"a\"", StatusCode::kInvalidArgument, "nothing to repeat"},
      {"root ::= \"a\"{3,2}", StatusCode::kInvalidArgument, "below its minimum"},
      {"root ::= \"a\"{10001}", StatusCode::kUnsupported, "above 10000"},
      {"root ::= item", StatusCode::kInvalidArgument, "'item' is used but not defined"},
      {"item ::= \"a\"", StatusCode::kInvalidArgument, "no 'root' rule"},
      {"root ::= \"a\"\nroot ::= \"b\"", StatusCode::kInvalidArgument, "defined twice"},
      {"root ::= root \"a\" | \"a\"", StatusCode::kUnsupported, "'root' is left-recursive"},
      {"root ::= x\nx ::= y? x \"a\" | \"b\"\ny ::= \"c\"", StatusCode::kUnsupported,
       "'x' is left-recursive"},
      {"root ::= (\"a\"?)*", StatusCode::kUnsupported, "left-recursive"},
      {"root ::= \"\\xZZ\"", StatusCode::kInvalidArgument, "hex digits"},
  };
  for (const Case& c : cases) {
    Grammar g;
    Status st = parse_gbnf(c.text, &g);
    EXPECT_EQ(st.code(), c.code) << c.text << " -> " << st.message();
    EXPECT_NE(st.message().find(c.needle), std::string::npos) << c.text << " -> " << st.message();
  }
}

TEST(GbnfTest, RulesMadeForGroupsNeverCollideWithNamedRules) {
  const Grammar g = parse("root ::= ( \"a\" )* root-1\nroot-1 ::= \"b\"");
  EXPECT_TRUE(grammar_accepts(g, "aab"));
  EXPECT_FALSE(grammar_accepts(g, "aa"));
}

TEST(GbnfTest, TabsCarriageReturnsUnderscoreNamesAndATrailingComment) {
  // CRLF line ends, tabs around '::=', a name starting with '_', and a
  // comment that runs to the end of the text (no newline after it).
  const Grammar g =
      parse("root\t::=\t_item\t\"!\"\r\n_item\t::= Letter+\r\nLetter ::= [a-z]\t# no newline");
  EXPECT_TRUE(grammar_accepts(g, "ab!"));
  EXPECT_TRUE(grammar_accepts(g, "z!"));
  EXPECT_FALSE(grammar_accepts(g, "ab"));
  EXPECT_FALSE(grammar_accepts(g, "AB!"));
  EXPECT_FALSE(grammar_accepts(g, "ab!# no newline"));
}

TEST(GbnfTest, ClassEscapesAndTheAnyCharacterNegation) {
  const Grammar g = parse(R"(root ::= [\[\]\-\^\\]+)");
  EXPECT_TRUE(grammar_accepts(g, "[]-^\\"));
  EXPECT_TRUE(grammar_accepts(g, "^"));
  EXPECT_FALSE(grammar_accepts(g, "a"));
  EXPECT_FALSE(grammar_accepts(g, ""));
  // [^] excludes nothing: any one character.
  const Grammar any = parse("root ::= [^]");
  for (const char* ok : {"a", "\n", "\xC3\xA9", "\xF0\x9F\x98\x80"}) {
    EXPECT_TRUE(grammar_accepts(any, ok)) << ok;
  }
  EXPECT_FALSE(grammar_accepts(any, ""));
  EXPECT_FALSE(grammar_accepts(any, "ab"));
  // A '-' right before ']' is a member, not a range.
  const Grammar dash = parse("root ::= [a-]");
  EXPECT_TRUE(grammar_accepts(dash, "a"));
  EXPECT_TRUE(grammar_accepts(dash, "-"));
  EXPECT_FALSE(grammar_accepts(dash, "b"));
  // A '-' before the end of the text is no range: the class is unterminated.
  Grammar unused;
  Status st = parse_gbnf("root ::= [a-", &unused);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("(byte 9): unterminated character class"), std::string::npos)
      << st.message();
}

TEST(GbnfTest, RangesThatTouchTheSurrogatesOrTheLastCodePoint) {
  // Surrogates are no characters: a range through them keeps the rest.
  const Grammar into = parse(R"(root ::= [\x41-\uDA00])");
  EXPECT_TRUE(grammar_accepts(into, "A"));
  EXPECT_TRUE(grammar_accepts(into, "\xED\x9F\xBF"));   // U+D7FF
  EXPECT_FALSE(grammar_accepts(into, "\xEE\x80\x80"));  // U+E000
  EXPECT_FALSE(grammar_accepts(into, "@"));
  const Grammar out_of = parse(R"(root ::= [\uD900-\uE001])");
  EXPECT_TRUE(grammar_accepts(out_of, "\xEE\x80\x80"));   // U+E000
  EXPECT_TRUE(grammar_accepts(out_of, "\xEE\x80\x81"));   // U+E001
  EXPECT_FALSE(grammar_accepts(out_of, "\xEE\x80\x82"));  // U+E002
  EXPECT_FALSE(grammar_accepts(out_of, "\xED\x9F\xBF"));  // U+D7FF
  // Only surrogates: a class no character matches.
  const Grammar none = parse(R"(root ::= [\uD800-\uDFFF] | "a")");
  EXPECT_TRUE(grammar_accepts(none, "a"));
  EXPECT_FALSE(grammar_accepts(none, "\xED\xA0\x80"));
  EXPECT_FALSE(grammar_accepts(none, "\xED\x9F\xBF"));
  // A negated class whose last range ends at U+10FFFF has nothing above it.
  const Grammar low = parse(R"(root ::= [^b-\U0010FFFF])");
  EXPECT_TRUE(grammar_accepts(low, "a"));
  EXPECT_TRUE(grammar_accepts(low, std::string(1, '\0')));
  EXPECT_FALSE(grammar_accepts(low, "b"));
  EXPECT_FALSE(grammar_accepts(low, "\xF0\x9F\x98\x80"));
  EXPECT_FALSE(grammar_accepts(low, "\xF4\x8F\xBF\xBF"));  // U+10FFFF
}

TEST(GbnfTest, HexEscapesInEitherCase) {
  const Grammar g = parse(R"(root ::= "\x4a\x4A\u00E9\u00e9\U0001F600" [\x61-\x7A])");
  EXPECT_TRUE(grammar_accepts(g, "JJ\xC3\xA9\xC3\xA9\xF0\x9F\x98\x80z"));
  EXPECT_FALSE(grammar_accepts(g, "jJ\xC3\xA9\xC3\xA9\xF0\x9F\x98\x80z"));
  EXPECT_FALSE(grammar_accepts(g, "JJ\xC3\xA9\xC3\xA9\xF0\x9F\x98\x80Z"));
}

TEST(GbnfTest, MultiCharacterTermsRepeatAsAWhole) {
  const Grammar star = parse(R"(root ::= "ab"* "c")");
  for (const char* ok : {"c", "abc", "ababc"}) EXPECT_TRUE(grammar_accepts(star, ok)) << ok;
  for (const char* bad : {"ac", "abac", "aabc", "abab"}) {
    EXPECT_FALSE(grammar_accepts(star, bad)) << bad;
  }
  const Grammar bounded = parse(R"(root ::= "xy"{2,3})");
  EXPECT_TRUE(grammar_accepts(bounded, "xyxy"));
  EXPECT_TRUE(grammar_accepts(bounded, "xyxyxy"));
  EXPECT_FALSE(grammar_accepts(bounded, "xy"));
  EXPECT_FALSE(grammar_accepts(bounded, "xyxyx"));
  EXPECT_FALSE(grammar_accepts(bounded, "xyxyxyxy"));
  // The empty literal made optional matches nothing more than itself.
  const Grammar empty = parse(R"(root ::= "a" ""? "b")");
  EXPECT_TRUE(grammar_accepts(empty, "ab"));
  EXPECT_FALSE(grammar_accepts(empty, "a"));
}

TEST(GbnfTest, MoreErrorsSayWhereAndWhat) {
  struct Case {
    const char* text;
    StatusCode code;
    const char* needle;
  };
  const Case cases[] = {
      {"\"a\" ::= \"b\"", StatusCode::kInvalidArgument,
       "line 1, column 1 (byte 0): expected a rule name"},
      {"-x ::= \"b\"", StatusCode::kInvalidArgument, "(byte 0): expected a rule name"},
      {"root ::= \"\xFF\"", StatusCode::kInvalidArgument, "(byte 10): invalid UTF-8"},
      {"root ::= [a\xC3]", StatusCode::kInvalidArgument, "(byte 11): invalid UTF-8"},
      {"root ::= [\\q]", StatusCode::kInvalidArgument, "(byte 10): unknown escape '\\q'"},
      {"root ::= [a-\\q]", StatusCode::kInvalidArgument, "(byte 12): unknown escape '\\q'"},
      {"root ::= \"\\]\"", StatusCode::kInvalidArgument, "(byte 10): unknown escape '\\]'"},
      {"root ::= ( \"a\" | [z-a] )", StatusCode::kInvalidArgument, "(byte 18): range out of order"},
      {"root ::= + \"a\"", StatusCode::kInvalidArgument, "(byte 9): nothing to repeat"},
      {"root ::= \"a\" | ?", StatusCode::kInvalidArgument, "(byte 15): nothing to repeat"},
      {"root ::= {2} \"a\"", StatusCode::kInvalidArgument, "(byte 9): nothing to repeat"},
      {"root ::= \"a\" ; \"b\"", StatusCode::kInvalidArgument, "(byte 13): unexpected ';'"},
      {"root ::= \"a\"{,3}", StatusCode::kInvalidArgument, "(byte 12): expected a count"},
      {"root ::= \"a\"{2,3", StatusCode::kInvalidArgument, "(byte 12): expected '}'"},
      {"root ::= \"a\"{2x}", StatusCode::kInvalidArgument, "(byte 12): expected '}'"},
      {"root ::= \"a\"{1,10001}", StatusCode::kUnsupported, "above 10000 (byte 12)"},
      {"root ::= \"a\"{99999999999,}", StatusCode::kUnsupported, "above 10000 (byte 12)"},
      {"root ::= \"\\x!0\"", StatusCode::kInvalidArgument, "(byte 10): expected 2 hex digits"},
      {"root ::= \"\\x:0\"", StatusCode::kInvalidArgument, "(byte 10): expected 2 hex digits"},
      {"root ::= \"\\xg0\"", StatusCode::kInvalidArgument, "(byte 10): expected 2 hex digits"},
      {"root ::= \"\\x0G\"", StatusCode::kInvalidArgument, "(byte 10): expected 2 hex digits"},
      {"root ::= \"\\u12\"", StatusCode::kInvalidArgument, "(byte 10): expected 4 hex digits"},
      {"root ::= \"\\U00110000\"", StatusCode::kInvalidArgument,
       "(byte 10): code point beyond U+10FFFF"},
      {"root ::= \"\"*", StatusCode::kUnsupported, "left-recursive"},
  };
  for (const Case& c : cases) {
    Grammar g;
    Status st = parse_gbnf(c.text, &g);
    EXPECT_EQ(st.code(), c.code) << c.text << " -> " << st.message();
    EXPECT_NE(st.message().find(c.needle), std::string::npos) << c.text << " -> " << st.message();
  }
}

std::string nested_groups(int depth) {
  return "root ::= " + std::string(depth, '(') + "\"a\"" + std::string(depth, ')');
}

TEST(GbnfTest, GroupsNestUpTo512Deep) {
  const Grammar g = parse(nested_groups(512));
  EXPECT_TRUE(grammar_accepts(g, "a"));
  EXPECT_FALSE(grammar_accepts(g, "aa"));
  Grammar unused;
  Status st = parse_gbnf(nested_groups(513), &unused);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.message();
  EXPECT_NE(st.message().find("nested deeper than 512"), std::string::npos) << st.message();
}

std::string repeated_terms(const std::string& term, int count) {
  std::string out;
  for (int i = 0; i < count; ++i) out += " " + term;
  return out;
}

TEST(GbnfTest, MoreThanTwoToTheTwentyElementsAreRefused) {
  // Each "a"{10000} writes 10,000 elements into its rule; 104 of them fit
  // under 2^20 = 1,048,576, 105 do not, in a rule or in a group.
  Grammar g;
  Status st = parse_gbnf("root ::=" + repeated_terms("\"a\"{10000}", 104), &g);
  EXPECT_TRUE(st.ok()) << st.message();
  for (const std::string& text :
       {"root ::=" + repeated_terms("\"a\"{10000}", 105),
        "root ::= (" + repeated_terms("\"a\"{10000}", 105) + " )",
        // Optional tails: rules of their own, 4 elements per count.
        "root ::=" + repeated_terms("\"x\"{0,10000}", 27),
        "root ::=" + repeated_terms("\"x\"{0,10000}", 25) + " \"x\"{0,3000} \"x\"{0,10000}",
        // A repeated literal of 9,000 characters is a rule of its own.
        "root ::=" + repeated_terms("\"x\"{0,10000}", 26) + " \"" + std::string(9000, 'y') +
            "\"*"}) {
    st = parse_gbnf(text, &g);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
    EXPECT_NE(st.message().find("more than 1048576 elements"), std::string::npos) << st.message();
  }
}

TEST(MatcherTest, PartialCharactersAreCheckedAgainstWhatTheyCanBecome) {
  const Grammar g = parse("root ::= [a-z] | \"é\"");
  Matcher m(&g);
  MatchState start = m.initial(), s, t;
  m.advance(start, 0xC3, &s);  // é begins with C3: alive
  EXPECT_FALSE(s.dead());
  EXPECT_FALSE(m.can_end(s));
  m.advance(s, 0xA9, &t);
  EXPECT_TRUE(m.must_end(t));
  m.advance(s, 0xA8, &t);  // è: refused
  EXPECT_TRUE(t.dead());
  m.advance(start, 0xE4, &s);  // a 3-byte lead: nothing above U+07FF is allowed
  EXPECT_TRUE(s.dead());

  const Grammar any = parse("root ::= [^a]");
  Matcher n(&any);
  start = n.initial();
  n.advance(start, 0xED, &s);  // U+D000..U+D7FF start with ED 80..9F
  EXPECT_FALSE(s.dead());
  n.advance(s, 0xA0, &t);  // ED A0..BF can only become surrogates: no character
  EXPECT_TRUE(t.dead()) << "a dead end would leave no token to draw later";
  n.advance(s, 0x9F, &t);
  EXPECT_FALSE(t.dead());
}

TEST(MatcherTest, KeysAreEqualForEqualStatesAcrossMatchers) {
  const Grammar g = parse("root ::= (\"ab\" | \"ac\")+");
  Matcher a(&g), b(&g);
  MatchState sa = a.initial(), sb = b.initial(), next;
  // Different arenas: b interns extra nodes first.
  b.advance(sb, 'a', &next);
  for (char c : std::string("abac")) {
    a.advance(sa, static_cast<uint8_t>(c), &next);
    sa = next;
  }
  sb = b.initial();
  for (char c : std::string("acab")) {
    b.advance(sb, static_cast<uint8_t>(c), &next);
    sb = next;
  }
  EXPECT_EQ(a.key(sa), b.key(sb));
  a.advance(sa, 'a', &next);
  EXPECT_NE(a.key(next), b.key(sb));
  // Compacting renumbers the state (older states of this matcher are then
  // invalid) and keeps its key.
  const std::string before = a.key(next);
  const size_t nodes = a.arena_size();
  a.compact(&next);
  EXPECT_EQ(a.key(next), before);
  EXPECT_LT(a.arena_size(), nodes);
}

// Tokens a state allows, one by one: the reference for the trie's walk.
std::vector<uint64_t> reference_mask(const Grammar& g, const std::vector<std::string>& tokens,
                                     const std::string& prefix, int spaces) {
  std::vector<uint64_t> mask((tokens.size() + 63) / 64, 0);
  for (size_t id = 0; id < tokens.size(); ++id) {
    std::string t = tokens[id];
    if (t.empty()) continue;
    int strip = spaces;
    size_t i = 0;
    while (strip > 0 && i < t.size() && t[i] == ' ') ++i, --strip;
    Matcher m(&g);
    MatchState s = m.initial(), next;
    bool alive = true;
    for (char c : prefix + t.substr(i)) {
      m.advance(s, static_cast<uint8_t>(c), &next);
      if (next.dead()) {
        alive = false;
        break;
      }
      s = next;
    }
    if (alive) mask[id / 64] |= uint64_t{1} << (id % 64);
  }
  return mask;
}

TEST(TokenMaskTest, TrieWalkEqualsTokenByTokenOverRandomVocabularies) {
  std::mt19937 rng(7);
  // Pieces that split characters, also after the lead bytes whose next
  // byte has a narrower range (E0, ED, F0, F4) and into a surrogate (ED A0).
  const std::string alphabet[] = {
      "a",    "b",    "{",        "}",    "\"",       ":",        ",",        " ",
      "1",    "é",    "\xC3",     "\xA9", "中",       "\xE4\xB8", "\xAD",     "x",
      "\xE0", "\xA0", "\xED\xA0", "\xED", "\x9F\xBF", "\xF0\x90", "\xF4\x8F", "\xBF"};
  std::vector<std::string> tokens;
  for (int i = 0; i < 3000; ++i) {
    std::string t;
    const int len = 1 + static_cast<int>(rng() % 5);
    for (int k = 0; k < len; ++k) t += alphabet[rng() % std::size(alphabet)];
    tokens.push_back(i % 97 == 0 ? std::string() : t);  // some special tokens
  }
  tokens.push_back(tokens[10]);  // a duplicate
  const VocabTrie trie(tokens);
  // Keys of a few characters; values also strings of any character but the
  // quote (whose partial characters the walk's memo keys by what takes them).
  const Grammar g = parse(R"(root ::= "{" (kv ("," kv)*)? "}"
                             kv ::= "\"" [a-zé中]* "\"" ":" ([0-9]+ | root | "\"" [^"]* "\""))");
  for (const std::string& prefix :
       {"", "{", "{\"a", "{\"é", "{\"\xC3", "{\"ab\":1", "{\"a\":{", "{\"a\":\"", "{\"a\":\"\xE4",
        "{\"a\":\"\xE4\xB8", "{\"a\":\"\xF0\x9F"}) {
    for (int spaces : {0, 1}) {
      Matcher m(&g);
      MatchState s = m.initial(), next;
      for (char c : prefix) {
        m.advance(s, static_cast<uint8_t>(c), &next);
        ASSERT_FALSE(next.dead()) << prefix;
        s = next;
      }
      const std::vector<uint64_t> reference = reference_mask(g, tokens, prefix, spaces);
      // With a memo of this matcher's, then with it again (full of what
      // the first walk met), with a fresh one, with one too small for this
      // grammar (the walk starts over, then goes without it), and without.
      MaskMemo kept, tiny(3), none(0);
      for (MaskMemo* memo : {&kept, &kept, static_cast<MaskMemo*>(nullptr), &tiny, &none}) {
        std::vector<uint64_t> mask((tokens.size() + 63) / 64, 0);
        compute_token_mask(&m, s, spaces, trie, mask.data(), memo);
        EXPECT_EQ(mask, reference) << "prefix " << prefix << ", spaces " << spaces;
      }
      std::vector<uint64_t> mask((tokens.size() + 63) / 64, 0);
      compute_token_mask(&m, s, spaces, trie, mask.data());
      int allowed = 0;
      for (uint64_t w : mask) allowed += __builtin_popcountll(w);
      EXPECT_GT(allowed, 0) << prefix;
    }
  }
}

TEST(TokenMaskTest, TextTokensInsideAStringEqualTokenByToken) {
  // Inside a JSON string every plain byte and every non-ASCII character
  // lead back to the same state, so the walk skips text subtrees whole
  // (VocabTrie::text_mask): the pieces that are not text (overlong forms,
  // surrogates, lone continuation bytes, past U+10FFFF, control
  // characters, quotes, escapes) must still be walked.
  std::mt19937 rng(13);
  const std::string alphabet[] = {
      "a",        "Z",        " ",        "\\",       "\\n",  "\"",       ",",
      "\t",       "é",        "中",       "😀",        "\xC3", "\xA9",     "\xE4\xB8",
      "\xAD",     "\xF0\x9F", "\x98\x80", "\x80",     "\xC0", "\xC1\xBF", "\xF5",
      "\xED\xA0", "\xED",     "\xE0\x80", "\xF4\x90", "\xFF", "}"};
  std::vector<std::string> tokens;
  for (int i = 0; i < 4000; ++i) {
    std::string t;
    const int len = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < len; ++k) t += alphabet[rng() % std::size(alphabet)];
    tokens.push_back(t);
  }
  const VocabTrie trie(tokens);
  // Strings without bounds, of at most / exactly so many characters, and
  // ones whose characters are not all alike (walked node by node).
  for (const char* text : {
           R"(root ::= "\"" ( [^"\\\x00-\x1F] | "\\" ["\\nt] )* "\"" ","? "}")",
           R"(root ::= "\"" [^"\\\x00-\x1F]{0,5} "\"" "}"?)",
           R"(root ::= "\"" [^"\\\x00-\x1F]{4} "\"")",
           R"(root ::= "\"" [^"\\\x00-\x1F]{2,3} ( "\"" | "\\n" [a-z]* "\"" ))",
           R"(root ::= "\"" [a-zé中]{0,3} [^"\\\x00-\x1F]* "\"")",
       }) {
    const Grammar g = parse(text);
    for (const std::string prefix : {"", "\"", "\"ab", "\"\xC3\xA9", "\"\xE4", "\"\\"}) {
      Matcher m(&g);
      MatchState s = m.initial(), next;
      bool alive = true;
      for (char c : prefix) {
        m.advance(s, static_cast<uint8_t>(c), &next);
        alive = alive && !next.dead();
        if (!alive) break;
        s = next;
      }
      if (!alive) continue;
      const std::vector<uint64_t> reference = reference_mask(g, tokens, prefix, 0);
      std::vector<uint64_t> mask((tokens.size() + 63) / 64, 0);
      compute_token_mask(&m, s, 0, trie, mask.data());
      EXPECT_EQ(mask, reference) << text << "\nprefix " << prefix;
      int allowed = 0;
      for (uint64_t w : mask) allowed += __builtin_popcountll(w);
      EXPECT_GT(allowed, 10) << text << "\nprefix " << prefix;
    }
  }
}

TEST(TokenMaskTest, TextSubtreesBelowAStringsQuoteAreTakenWhole) {
  // From the start a string's quote: below it, the subtrees whose bytes
  // are all text are taken whole from the state inside the string
  // (VocabTrie::Node::tail_text); those beside them that are not (an
  // escape that JSON has not, a stray continuation byte) are walked.
  std::mt19937 rng(17);
  const std::string text[] = {"a", "Z", " ", "x", "é", "中", "😀"};
  const std::string other[] = {"\\q", "\\n", "\x80", "\"", "\"}", "\xC3"};
  std::vector<std::string> tokens;
  for (int i = 0; i < 6000; ++i) {
    std::string t = "\"";
    const int len = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < len; ++k) t += text[rng() % std::size(text)];
    if (i % 5 == 0) t = "\"" + other[rng() % std::size(other)] + t.substr(1);
    tokens.push_back(i % 7 == 0 ? t.substr(1) : t);
  }
  const VocabTrie trie(tokens);
  const Grammar g = parse(R"(root ::= "\"" ( [^"\\\x00-\x1F] | "\\" ["\\n] )* "\"" "}"?)");
  Matcher m(&g);
  const MatchState s = m.initial();
  const std::vector<uint64_t> reference = reference_mask(g, tokens, "", 0);
  std::vector<uint64_t> mask((tokens.size() + 63) / 64, 0);
  compute_token_mask(&m, s, 0, trie, mask.data());
  EXPECT_EQ(mask, reference);
  int allowed = 0;
  for (uint64_t w : mask) allowed += __builtin_popcountll(w);
  EXPECT_GT(allowed, 1000);
}

TEST(TokenMaskTest, KeysThatMayBeAnyNameButTheListedOnes) {
  // Inside a key that may be any name but "ab" (what the JSON schema
  // converter writes for unlisted members), every first character but
  // the listed names' next one leads to one state that takes text alike:
  // the walk takes those tokens at once and walks the others (here "a"
  // must be followed by a digit or "b", so most text after it is out).
  std::mt19937 rng(19);
  const std::string alphabet[] = {"a",   "b",  "ab",  "Z",   " ",    "é",    "中", "\"",
                                  "\":", ":1", "\\n", "\\q", "\x80", "\xC3", "x"};
  std::vector<std::string> tokens;
  for (int i = 0; i < 6000; ++i) {
    std::string t;
    const int len = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < len; ++k) t += alphabet[rng() % std::size(alphabet)];
    tokens.push_back(t);
  }
  const VocabTrie trie(tokens);
  const Grammar g = parse(R"(
    root ::= "\"" n0 ":1"
    n0 ::= "\"" | [^"\\\x00-\x1Fa] rest | esc rest | "a" n1
    n1 ::= [0-9] rest | "b" n2
    n2 ::= [^"\\\x00-\x1F] rest | esc rest
    rest ::= ( [^"\\\x00-\x1F] | esc )* "\""
    esc ::= "\\" ["\\/bfnrt]
  )");
  for (const std::string prefix : {"\"", "\"a", "\"ab"}) {
    Matcher m(&g);
    MatchState s = m.initial(), next;
    for (char c : prefix) {
      m.advance(s, static_cast<uint8_t>(c), &next);
      ASSERT_FALSE(next.dead()) << prefix;
      s = next;
    }
    const std::vector<uint64_t> reference = reference_mask(g, tokens, prefix, 0);
    std::vector<uint64_t> mask((tokens.size() + 63) / 64, 0);
    compute_token_mask(&m, s, 0, trie, mask.data());
    EXPECT_EQ(mask, reference) << "prefix " << prefix;
    int allowed = 0;
    for (uint64_t w : mask) allowed += __builtin_popcountll(w);
    EXPECT_GT(allowed, 100) << prefix;
  }
}

TEST(TokenMatcherTest, FollowsTokensAndTheStrippedLeadingSpace) {
  std::vector<std::string> tokens = {"", "{", " {", "}", "\"a\"", ":1", "{}", " ", "x"};
  ConstraintCompiler compiler(tokens);
  ConstraintSpec spec;
  spec.kind = ConstraintKind::kJsonSchema;
  spec.text = R"({"type": "object", "properties": {"a": {"type": "integer"}},
                  "additionalProperties": false})";
  std::shared_ptr<const CompiledConstraint> c;
  ASSERT_TRUE(compiler.compile(spec, &c).ok());
  std::shared_ptr<const CompiledConstraint> again;
  ASSERT_TRUE(compiler.compile(spec, &again).ok());
  EXPECT_EQ(c.get(), again.get()) << "compiled once per text";

  auto bit = [](const CompiledConstraint::Mask& m, int id) { return ((*m)[0] >> id) & 1; };
  TokenMatcher after_bos(c, 1);  // the detokenizer drops the first space
  CompiledConstraint::Mask m = after_bos.allowed();
  EXPECT_TRUE(bit(m, 1));
  EXPECT_TRUE(bit(m, 2)) << "\" {\" writes \"{\" after BOS";
  EXPECT_TRUE(bit(m, 6));
  EXPECT_FALSE(bit(m, 0)) << "special tokens never";
  EXPECT_FALSE(bit(m, 8));
  TokenMatcher mid_text(c, 0);
  EXPECT_FALSE(bit(mid_text.allowed(), 2)) << "\" {\" writes a space mid-text";

  EXPECT_TRUE(after_bos.accept(2));
  EXPECT_FALSE(after_bos.accept(2)) << "no second brace";
  EXPECT_FALSE(after_bos.can_end());
  EXPECT_TRUE(after_bos.accept(4));
  EXPECT_TRUE(after_bos.accept(5));
  EXPECT_FALSE(after_bos.must_end());
  EXPECT_TRUE(after_bos.accept(3));
  EXPECT_TRUE(after_bos.must_end());
  m = after_bos.allowed();
  EXPECT_EQ((*m)[0], 0u) << "nothing may follow a complete object";
}

TEST(ConstraintTest, TheCompiledCacheStaysBoundedInEntriesAndBytes) {
  ConstraintCompiler compiler({"a", "b"});
  std::shared_ptr<const CompiledConstraint> c;
  ConstraintSpec spec;
  spec.kind = ConstraintKind::kRegex;
  for (int i = 0; i < 300; ++i) {
    spec.text = "a{" + std::to_string(i) + "}";
    ASSERT_TRUE(compiler.compile(spec, &c).ok());
    EXPECT_LE(compiler.num_cached(), ConstraintCompiler::kMaxCached);
  }
  // Grammars of a few MB each: the byte bound starts the cache over.
  spec.kind = ConstraintKind::kGrammar;
  size_t most = 0;
  for (int i = 0; i < 40; ++i) {
    spec.text = "root ::= " + std::string(i % 2 ? "\"b\"" : "\"a\"") +
                " (\"a\"{0,10000} \"b\"{0,10000} \"a\"{0,10000}) \"x\"{" + std::to_string(i) + "}";
    ASSERT_TRUE(compiler.compile(spec, &c).ok());
    most = std::max(most, compiler.cached_bytes());
    EXPECT_LE(compiler.cached_bytes(), ConstraintCompiler::kMaxCachedBytes);
  }
  EXPECT_GT(most, ConstraintCompiler::kMaxCachedBytes / 4) << "the grammars were not large";
}

TEST(ConstraintTest, ChoicesAndKindsRefusedAtCompile) {
  ConstraintCompiler compiler({"a", "b"});
  std::shared_ptr<const CompiledConstraint> c;
  ConstraintSpec spec;
  spec.kind = ConstraintKind::kChoice;
  EXPECT_EQ(compiler.compile(spec, &c).code(), StatusCode::kInvalidArgument);
  spec.choices = {"a", ""};
  EXPECT_EQ(compiler.compile(spec, &c).code(), StatusCode::kInvalidArgument);
  spec.choices = {"a", "\xFF"};
  EXPECT_EQ(compiler.compile(spec, &c).code(), StatusCode::kInvalidArgument);
  spec.choices = {"say \"hi\"\\", "b\n"};
  ASSERT_TRUE(compiler.compile(spec, &c).ok());
  EXPECT_TRUE(grammar_accepts(c->grammar(), "say \"hi\"\\"));
  EXPECT_TRUE(grammar_accepts(c->grammar(), "b\n"));
  EXPECT_FALSE(grammar_accepts(c->grammar(), "b"));
  spec.kind = static_cast<ConstraintKind>(42);
  EXPECT_EQ(compiler.compile(spec, &c).code(), StatusCode::kInvalidArgument);
}

// Grammars built to be slow: thousands of optional elements in a row made
// the recursive expansion overflow the native stack and every character cost
// quadratic work. The expansion is iterative now and bounded: a grammar whose
// start is too ambiguous is refused at compile, one that becomes so later
// fails its sample with a message instead of hanging.
std::string optional_run(int n) {
  std::string body;
  for (int i = 0; i < n; ++i) body += " \"a\"?";
  return body;
}

TEST(ConstraintTest, TooAmbiguousGrammarsAreRefusedOrFailWithAMessage) {
  ConstraintCompiler compiler({"a", "x", "aa"});
  ConstraintSpec spec;
  spec.kind = ConstraintKind::kGrammar;
  spec.text = "root ::=" + optional_run(30000);
  std::shared_ptr<const CompiledConstraint> c;
  Status st = compiler.compile(spec, &c);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.message();
  EXPECT_NE(st.message().find("too ambiguous"), std::string::npos) << st.message();

  spec.text = "root ::= \"x\"" + optional_run(20000);
  ASSERT_TRUE(compiler.compile(spec, &c).ok()) << "its start is one parse";
  TokenMatcher m(c, 0);
  EXPECT_FALSE(m.failed());
  EXPECT_FALSE(m.accept(1)) << "the next character opens 20001 parses";
  EXPECT_TRUE(m.failed());
  EXPECT_NE(m.error().find("too ambiguous"), std::string::npos) << m.error();
  CompiledConstraint::Mask mask = m.allowed();
  for (uint64_t w : *mask) EXPECT_EQ(w, 0u);

  // A long but unambiguous run costs nothing special.
  std::string seq = "root ::=";
  for (int i = 0; i < 20000; ++i) seq += " \"a\"";
  spec.text = seq;
  ASSERT_TRUE(compiler.compile(spec, &c).ok());
  TokenMatcher plain(c, 0);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(plain.accept(2)) << i;
  EXPECT_FALSE(plain.failed());
}

}  // namespace
}  // namespace pvllm::structured
