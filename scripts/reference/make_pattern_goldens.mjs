// Writes tests/data/structured/pattern_goldens.json: JSON Schema "pattern"
// keywords checked by the engine's own RegExp (ECMA-262, with the `u` flag
// JSON Schema asks for) on a list of strings, for the regex_to_json_string_gbnf
// tests. Each case is a pattern and its texts, each text a pair
// [inside of a JSON string literal, match]: match is whether a grammar for
// the pattern must accept that text: its value contains a match of the
// pattern (RegExp.prototype.test), and the text is the value's canonical
// spelling (what JSON.stringify writes; other spellings of the same value
// must be refused).
//
// Run: node scripts/reference/make_pattern_goldens.mjs
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const out = path.join(root, "tests/data/structured/pattern_goldens.json");

// Values every pattern is checked on: matches at the start, the middle and
// the end, escapes, controls, line terminators, spaces, non-ASCII.
const COMMON = [
  "", "a", "abc", "xxabcxx", "ABC", "abcabc", "ab\nc", "a-b_c", "a b", " ", "\t", "\n",
  "123", "123-4567", "x123-4567", "123-45678", "abc123", "123abc", "42\n",
  "http://x", "https://example.com/a?b=c", "ftp://host", "xhttp://y", "HTTP://X", "file:///",
  "line1\nline2", "\r\n", "quote\"inside", "back\\slash", "\\", "\"", "\"\\\"",
  "\u0000", "nul\u0000nul", "\u001f", "\u000b", "\b\f", "\u007f", "\u0085", "\u00a0x", "\u180e",
  "\u2028", "a\u2029b", "\u3000", "\ufeff", "é", "café", "中文", "😀", "emoji 😀 end",
  "ünïcödé-123", "user@example.com", "-0.5", "2024-07", "word", "/path/x",
];

// Texts that are not the canonical spelling of their value.
const NON_CANONICAL = [
  "\\u0061bc",        // "abc" with an escaped letter
  "\\/path",          // an escaped solidus
  "caf\\u00e9",       // an escaped non-ASCII letter
  "\\u001F",          // upper-case hex
  "\\ud83d\\ude00",   // an escaped surrogate pair
  "a\\u000ab",        // a newline as \u000a
  "\\u0022",          // a quote as \u0022
];

// [pattern, extra values checked on that pattern only]
const PATTERNS = [
  ["^[a-zA-Z0-9_-]+$", ["Valid_name-1", "bad name", "bad\nname", "ok\n"]],
  ["^\\d{3}-\\d{4}$", ["555-1234", "5551-234", "555-1234\n", "٣٣٣-٤٤٤٤"]],
  ["abc", ["ab", "a\nbc", "ABCabc", "\"abc\""]],
  ["^(https?|ftp)://", ["https://", "ftps://", "http:/", " http://"]],
  ["[0-9]+$", ["abc1", "1abc", "x\n9", "9\n"]],
  ["^\\S+$", ["a\u00a0b", "a\u2003b", "a\u200bb", "x\u0085y", "é中😀", "a\\b\"c"]],
  ["^.*$", ["\u2029", "a\rb", "\t\u0001\u007f\"\\", "😀😀"]],
  ["[\"\\\\]", ["say \"hi\"", "c:\\dir", "plain"]],
  ["^[^\"\\\\]*$", ["say \"hi\"", "c:\\dir", "plain text\n"]],
  ["^\\s*$", ["  \t\n", "\u00a0\u1680\u2000\u200a\u202f\u205f", "\u200b", "\u0085", " x "]],
  ["\\s", ["a\u00a0", "a\u200bb", "\u2029"]],
  ["^[\\s\\S]{2,4}$", ["ab", "abcde", "\n\n", "😀é"]],
  ["^\\w+@\\w+\\.[a-z]{2,}$", ["a@b.cd", "a@b.c", "é@b.cd", "a_1@b_2.xyz"]],
  ["^$", []],
  ["^a|c$", ["ba", "cb", "ac", "bc"]],
  ["é|中", ["e", "ée", "x中"]],
  ["^[^a-z]+$", ["ABC", "A b", "\n", "É"]],
  ["😀", ["😁", "x😀"]],
  ["^.$", ["😀", "é", "\r", "\u2028", "\u0001", "ab"]],
  ["\\n", ["\\n", "a\nb"]],
  ["[\\x00-\\x1f]", ["\u0001", "\u001e", "\t", "x"]],
  ["^[\\u00e0-\\u00ff]+$", ["àÿ", "ß", "é"]],
  ["^-?(0|[1-9]\\d*)(\\.\\d+)?$", ["0", "-12.5", "01", "1.", "-0"]],
  ["^[^]*$", ["\u2028\r\n"]],
  ["(?:ab)+c", ["ababc", "abac", "xabcx"]],
  ["^(?<year>\\d{4})-(?<month>0[1-9]|1[0-2])$", ["2024-12", "2024-13", "2024-00"]],
  ["\\u{1F600}", ["😀", "😁"]],
  ["x*", []],
  ["^\\/path", ["/path/x", "/pat"]],
  ["\\t|\\r", ["a\tb", "a\rb", "a\nb"]],
  ["^\\cJ$", ["\n", "J"]],
  ["^[\\b]$", ["\b", "b"]],
  ["^\\D\\W$", ["a-", "1-", "a_", "é😀"]],
  ["^(a|b)*c{2,3}$", ["abcc", "ccc", "cccc", "c"]],
  ["^[^\\s\\d]{2}$", ["ab", "a1", "a ", "é\u3000"]],
  ["[^\\x20-\\x7e]", ["plain", "tab\there", "é", "\u007f"]],
  ["^a*", ["b", "aab"]],
  ["b*$", ["a", "abb"]],
  ["^\\+?[1-9]\\d{1,14}$", ["+14155552671", "14155552671", "+0123", "+1"]],
  ["^#[0-9a-fA-F]{6}$", ["#a0B1c2", "#a0B1c", "a0B1c2", "#a0B1c2\n"]],
  ["^(?:[01]\\d|2[0-3]):[0-5]\\d$", ["12:59", "23:00", "24:00", "9:30"]],
  ["^[^@\\s]+@[^@\\s]+$", ["a@b", "a@@b", "a b@c", "é@中", "\"q\"@x"]],
  ["^[A-Z]{2}\\d{2}[A-Z0-9]{1,30}$", ["DE44500105175407324931", "de44", "DE4", "DE44X"]],
];

function inner(value) {
  return JSON.stringify(value).slice(1, -1);
}

function canonical(text) {
  return inner(JSON.parse(`"${text}"`)) === text;
}

const cases = PATTERNS.map(([pattern, extra]) => {
  const re = new RegExp(pattern, "u");
  const texts = [...new Set([...COMMON, ...extra].map(inner).concat(NON_CANONICAL))];
  return {
    pattern,
    texts: texts.map((text) => [text, canonical(text) && re.test(JSON.parse(`"${text}"`))]),
  };
});

const golden = {
  generator: "scripts/reference/make_pattern_goldens.mjs",
  node: process.version,
  cases,
};
fs.mkdirSync(path.dirname(out), { recursive: true });
// One line per case.
const lines = cases.map((c) => "  " + JSON.stringify(c));
fs.writeFileSync(out,
  `{"generator": ${JSON.stringify(golden.generator)}, "node": ${JSON.stringify(golden.node)},\n` +
  ` "cases": [\n${lines.join(",\n")}\n]}\n`);
console.log(`wrote ${out}: ${cases.length} patterns`);
