// The Jinja builtins and statements of core/chat, case by case: each
// template renders what Python's Jinja renders for it the way transformers
// runs it (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
// loopcontrols; the outputs were taken from jinja2 3.1), and each misuse
// fails with its status and the message that names it and its position.
// Where this renderer deliberately differs (integer overflow, constructs
// outside the subset) the case says what it does instead.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "core/chat/template.h"

namespace pvllm::chat {
namespace {

struct RenderCase {
  const char* source;
  const char* context;  // a JSON object, or "" for none
  const char* expected;
};

struct FailCase {
  const char* source;
  const char* context;
  StatusCode code;
  const char* message;
};

Status render(const char* source, const char* context, std::string* out) {
  std::unique_ptr<Template> t;
  PVLLM_RETURN_IF_ERROR(Template::parse(source, &t));
  const std::string text = context;
  return t->render(
      text.empty() ? nlohmann::ordered_json::object() : nlohmann::ordered_json::parse(text), out);
}

void expect_renders(std::span<const RenderCase> cases) {
  for (const RenderCase& c : cases) {
    SCOPED_TRACE(c.source);
    std::string out;
    const Status st = render(c.source, c.context, &out);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(out, c.expected);
  }
}

void expect_fails(std::span<const FailCase> cases) {
  for (const FailCase& c : cases) {
    SCOPED_TRACE(c.source);
    std::string out;
    const Status st = render(c.source, c.context, &out);
    EXPECT_EQ(st.code(), c.code) << st.message();
    EXPECT_EQ(st.message(), c.message);
  }
}

const RenderCase kFiltersRenders[] = {
    {"{{ [] | first }}", "", ""},
    {"{{ [] | last is defined }}", "", "False"},
    {"{{ 'abc' | first }}{{ 'abc' | last }}", "", "ac"},
    {"{{ ['b','A','c'] | sort | join(',') }}", "", "A,b,c"},
    {"{{ ['b','A','c'] | sort(case_sensitive=true) | join(',') }}", "", "A,b,c"},
    {"{{ ['b','A','c'] | sort(reverse=true) | join(',') }}", "", "c,b,A"},
    {"{{ [{'n':'b'},{'n':'a'}] | sort(attribute='n') | map(attribute='n') | join }}", "", "ab"},
    {"{{ [3,1,2] | sort(true) | join }}", "", "321"},
    {"{{ 'x' | int }}|{{ true | int }}|{{ false | int }}|{{ 2.7 | int }}|{{ '12' | int }}|{{ '  7 "
     "' | int }}|{{ '3.9' | int }}|{{ '' | int(5) }}|{{ none | int }}|{{ 'abc' | int(default=4) }}",
     "", "0|1|0|2|12|7|3|5|0|4"},
    {"{{ '0x1A' | int }}|{{ '1_000' | int }}|{{ [1] | int }}", "", "0|1000|0"},
    {"{{ 'x' | float }}|{{ true | float }}|{{ 2 | float }}|{{ '2.5' | float }}|{{ 'zz' | "
     "float(1.5) }}|{{ [1] | float }}",
     "", "0.0|1.0|2.0|2.5|1.5|0.0"},
    {"{{ 2.567 | round }}|{{ 2.567 | round(2) }}|{{ 2.5 | round(0, 'floor') }}|{{ 2.1 | round(0, "
     "'ceil') }}|{{ 3 | round }}|{{ 2.6 | round(method='floor') }}",
     "", "3.0|2.57|2.0|3.0|3|2.0"},
    {"{{ 'a\nb\n\nc' | indent }}", "", "a\n    b\n\n    c"},
    {"{{ 'a\nb\n\nc' | indent(2, true) }}", "", "  a\n  b\n\n  c"},
    {"{{ 'a\nb\n\nc' | indent(2, true, true) }}", "", "  a\n  b\n  \n  c"},
    {"{{ 'a\nb' | indent('--') }}", "", "a\n--b"},
    {"{{ 'a\nb' | indent(width='>>', first=true) }}", "", ">>a\n>>b"},
    {"{{ '<a href=\"x\">&\\'</a>' | escape }}", "",
     "&lt;a href=&#34;x&#34;&gt;&amp;&#39;&lt;/a&gt;"},
    {"{{ '<b>' | e }}", "", "&lt;b&gt;"},
    {"{% for k, v in d | dictsort %}{{ k }}={{ v }};{% endfor %}",
     "{\"d\": {\"b\": 1, \"a\": 2, \"C\": 3}}", "a=2;b=1;C=3;"},
    {"{% for k, v in d | dictsort(by='value') %}{{ k }}={{ v }};{% endfor %}",
     "{\"d\": {\"b\": 1, \"a\": 2, \"C\": 3}}", "b=1;a=2;C=3;"},
    {"{% for k, v in d | dictsort(true) %}{{ k }}={{ v }};{% endfor %}",
     "{\"d\": {\"b\": 1, \"a\": 2, \"C\": 3}}", "C=3;a=2;b=1;"},
    {"{% for k, v in d | dictsort(reverse=true) %}{{ k }}={{ v }};{% endfor %}",
     "{\"d\": {\"b\": 1, \"a\": 2, \"C\": 3}}", "C=3;b=1;a=2;"},
    {"{{ xs | selectattr('a') | list | length }}", "{\"xs\": [{\"a\": 1}, {\"a\": 0}, {\"b\": 1}]}",
     "1"},
    {"{{ xs | rejectattr('a') | list | length }}", "{\"xs\": [{\"a\": 1}, {\"a\": 0}, {\"b\": 1}]}",
     "2"},
    {"{{ xs | selectattr('a', 'equalto', 1) | list | length }}",
     "{\"xs\": [{\"a\": 1}, {\"a\": 0}]}", "1"},
    {"{{ [1,2,3,4] | select('odd') | join }}|{{ [1,2,3,4] | reject('odd') | join }}|{{ [0,1,'',2] "
     "| select | join }}",
     "", "13|24|12"},
    {"{{ [1,2,3,4] | select('divisibleby', 2) | join }}", "", "24"},
    {"{{ xs | map(attribute='a', default='z') | join }}", "{\"xs\": [{\"a\": 1}, {\"b\": 2}]}",
     "1z"},
    {"{{ xs | map(attribute='a') | join }}", "{\"xs\": [{\"a\": 1}, {\"a\": 2}]}", "12"},
    {"{{ ['a','b'] | map('upper') | join }}", "", "AB"},
    {"{{ ['a','bb'] | map('length') | sum }}", "", "3"},
    {"{{ [3,1,2] | max }}|{{ [3,1,2] | min }}|{{ ['b','A'] | max }}|{{ ['b','A'] | "
     "max(case_sensitive=true) }}|{{ [{'v':1},{'v':3}] | max(attribute='v') | tojson }}",
     "", "3|1|b|b|{\"v\": 3}"},
    {"{{ [] | max is defined }}", "", "False"},
    {"{{ 'abc' | reverse }}|{{ [1,2,3] | reverse | join }}", "", "cba|321"},
    {"{{ d | attr('zz') is defined }}", "{\"d\": {\"a\": 1}}", "False"},
    {"{{ -3 | abs }}|{{ -2.5 | abs }}|{{ true | abs }}|{{ false | abs }}", "", "3|2.5|1|0"},
    {"{{ x | default('D') }}|{{ '' | default('D', true) }}|{{ '' | default('D') }}|{{ y | d }}|{{ "
     "0 | d(5, boolean=true) }}",
     "", "D|D|||5"},
    {"{{ y | items | list | length }}", "", "0"},
    {"{{ 'abc' | list | join('-') }}|{{ d | list | join }}", "{\"d\": {\"k\": 1, \"j\": 2}}",
     "a-b-c|kj"},
    {"{{ 'a b' | string }}|{{ 5 | string }}|{{ y | string }}|", "", "a b|5||"},
    {"{{ '  a  ' | trim }}|{{ 'xxaxx' | trim('x') }}", "", "a|a"},
    {"{{ 'hELLO wORLD' | capitalize }}|{{ 'hello-world (x) [y] {z} <w>' | title }}|{{ 'aB' | upper "
     "}}{{ 'aB' | lower }}",
     "", "Hello world|Hello-World (X) [Y] {Z} <W>|ABab"},
    {"{{ 'aaa' | replace('a', 'b', 2) }}|{{ 'ab' | replace('', '-') }}|{{ 'abc' | replace('', '-', "
     "2) }}",
     "", "bba|-a-b-|-a-bc"},
    {"{{ [1,2,2,'a','A'] | unique | join }}|{{ ['a','A'] | unique(case_sensitive=true) | join "
     "}}|{{ [{'a':1},{'a':1}] | unique(attribute='a') | list | length }}",
     "", "12a|aA|1"},
    {"{{ x | safe }}", "{\"x\": 1}", "1"},
    {"{% for k, v in d | items %}{{ k }}={{ v }}{% endfor %}", "{\"d\": {\"a\": 1}}", "a=1"},
    {"{{ '0x10' | int }}|{{ '0x10' | int(base=16) }}|{{ '0x10' | float }}|{{ ' 1e3 ' | int }}|{{ "
     "'12' | int(base=8) }}|{{ 'ff' | int(0, 16) }}|{{ 'inf' | int(7) }}",
     "", "0|16|0.0|1000|10|255|7"},
    {"{{ 'x' | int(base=true) }}", "", "0"},
    {"{{ 'ab' * true }}|{{ 3 * [1] | length }}|{{ true * 'ab' }}|{{ -7 % 3 }}|{{ (-2) ** 3 }}|{{ 0 "
     "** 0 }}|{{ 7 % 7 }}|{{ -6 // 3 }}",
     "", "ab|3|ab|2|-8|1|0|-2"},
    {"{{ [1, 2, 3] | map('string') | join('-') }}|{{ ['a'] | map('replace', 'a', 'b') | first }}",
     "", "1-2-3|b"},
    {"{{ [1, 2] | first }}|{{ [1, 2] | last }}|{{ (1, 2) | last }}", "", "1|2|2"},
    {"{{ 'abc' | length }}|{{ [1] | count }}|{{ d | length }}", "{\"d\": {\"a\": 1}}", "3|1|1"},
    {"{{ -1 | abs }}|{{ 0.0 | abs }}", "", "1|0.0"},
    {"{{ ['a', 'B', 'c'] | sort(reverse=true, case_sensitive=true) | join }}|{{ [2, 1.5, 3] | sort "
     "| join(',') }}",
     "", "caB|1.5,2,3"},
    {"{{ 'Hello World' | lower | title }}|{{ 'a b' | capitalize }}|{{ '' | title }}|{{ 'x' | "
     "trim('') }}",
     "", "Hello World|A b||x"},
    {"{{ 'a-b' | replace('-', '') }}|{{ 'aaa' | replace('a', 'bb', 0) }}", "", "ab|aaa"},
    {"{{ 'a' | indent(first=true) }}|{{ '' | indent }}|{{ 'a\n' | indent(2, true) }}", "",
     "    a||  a\n"},
    {"{{ 1.5 | round }}|{{ 2.5 | round }}|{{ -1.5 | round }}|{{ 1.25 | round(1) }}|{{ 1.35 | "
     "round(1, 'floor') }}",
     "", "2.0|2.0|-2.0|1.2|1.3"},
    {"{{ '12' | float }}|{{ ' 1.5 ' | float }}|{{ '1e2' | int }}|{{ '-3' | int }}|{{ '+4' | int "
     "}}|{{ 'nan' | int }}",
     "", "12.0|1.5|100|-3|4|0"},
    {"{{ 'x' | int('a') }}", "", "a"},
    {"{{ 'a,b' | list | length }}|{{ range(3) | reverse | list | join }}|{{ d | dictsort | length "
     "}}",
     "{\"d\": {\"a\": 1}}", "3|210|1"},
    {"{{ [none, 1] | select | list | length }}|{{ [1, 2] | select('equalto', 2) | first }}|{{ xs | "
     "selectattr('a', 'defined') | list | length }}",
     "{\"xs\": [{\"a\": 1}, {}]}", "1|2|1"},
    {"{{ xs | map(attribute='a.b') | join }}|{{ xs | sum(attribute='a.b') }}",
     "{\"xs\": [{\"a\": {\"b\": 1}}, {\"a\": {\"b\": 2}}]}", "12|3"},
    {"{{ [3, 1] | min }}|{{ ['b', 'a'] | min }}|{{ [{'v': 2}, {'v': 1}] | min(attribute='v') | "
     "tojson }}",
     "", "1|a|{\"v\": 1}"},
    {"{{ ['A', 'a', 'b'] | unique | join }}", "", "Ab"},
};

const RenderCase kMethodsRenders[] = {
    {"{{ 'a-b-c'.replace('-', '+', 1) }}|{{ 'ab'.replace('', '.') }}|{{ 'abc'.replace('', '.', 2) "
     "}}|{{ 'aXbXc'.replace('X', '') }}",
     "", "a+b-c|.a.b.|.a.bc|abc"},
    {"{{ 'a\\r\\nb\\rc\\nd'.splitlines() | length }}|{{ 'a\\r\\nb\\n'.splitlines(true) | tojson "
     "}}|{{ 'x\\n'.splitlines() | tojson }}",
     "", "4|[\"a\\r\\n\", \"b\\n\"]|[\"x\"]"},
    {"{{ '  a  b c '.split() | tojson }}|{{ ' a b c '.split(None, 1) | tojson }}|{{ ' a b c "
     "'.rsplit(None, 1) | tojson }}|{{ 'a b c'.split(maxsplit=0) | tojson }}|{{ ''.split() | "
     "tojson }}|{{ '   '.split() | tojson }}",
     "", "[\"a\", \"b\", \"c\"]|[\"a\", \"b c \"]|[\" a b\", \"c\"]|[\"a b c\"]|[]|[]"},
    {"{{ 'a,b,c'.split(',', 1) | tojson }}|{{ 'a,b,c'.rsplit(',', 1) | tojson }}|{{ "
     "'a,b,c'.rsplit(',') | tojson }}|{{ 'a,,b'.split(',') | tojson }}",
     "", "[\"a\", \"b,c\"]|[\"a,b\", \"c\"]|[\"a\", \"b\", \"c\"]|[\"a\", \"\", \"b\"]"},
    {"{{ 'a b c d'.rsplit(' ', 2) | tojson }}|{{ ' a  b   c '.rsplit(None, 2) | tojson }}|{{ ' a  "
     "b   c '.split(None, 2) | tojson }}",
     "", "[\"a b\", \"c\", \"d\"]|[\" a\", \"b\", \"c\"]|[\"a\", \"b\", \"c \"]"},
    {"{{ 'abc'.startswith(('x', 'a')) }}|{{ 'abc'.endswith(('x', 'y')) }}|{{ 'abc'.endswith('bc') "
     "}}|{{ 'a'.startswith('abc') }}",
     "", "True|False|True|False"},
    {"{{ 'abc'.startswith(('a', 1)) }}", "", "True"},
    {"{{ 'hello world'.capitalize() }}|{{ ''.capitalize() }}|{{ 'hello wORLD'.title() }}", "",
     "Hello world||Hello World"},
    {"{{ 'banana'.find('an') }}|{{ 'banana'.rfind('an') }}|{{ 'banana'.index('n') }}|{{ "
     "'banana'.rindex('n') }}|{{ 'banana'.count('a') }}|{{ 'banana'.count('') }}|{{ "
     "'banana'.find('z') }}|{{ 'héllo'.find('l') }}",
     "", "1|3|2|4|3|7|-1|2"},
    {"{{ ', '.join(['a', 'b']) }}|{{ '-'.join('xyz') }}", "", "a, b|x-y-z"},
    {"{{ 'prefix_x'.removeprefix('prefix_') }}|{{ 'x.txt'.removesuffix('.txt') }}|{{ "
     "'abc'.removeprefix('z') }}|{{ 'abc'.removesuffix('z') }}",
     "", "x|x|abc|abc"},
    {"{{ '123'.isdigit() }}{{ '12a'.isdigit() }}{{ ''.isdigit() }}|{{ 'ab'.isalpha() }}{{ "
     "'a1'.isalpha() }}|{{ 'a1'.isalnum() }}{{ 'a-'.isalnum() }}|{{ ' \\t'.isspace() }}{{ ' "
     "a'.isspace() }}",
     "", "TrueFalseFalse|TrueFalse|TrueFalse|TrueFalse"},
    {"{{ 'ABC1'.isupper() }}{{ 'AbC'.isupper() }}{{ '12'.isupper() }}|{{ 'abc1'.islower() }}{{ "
     "'aBc'.islower() }}{{ ''.islower() }}",
     "", "TrueFalseFalse|TrueFalseFalse"},
    {"{{ [1, 2, 1].index(1) }}|{{ [1, 2, 1].count(1) }}|{{ [1, 2, 1].index(2) }}", "", "0|2|1"},
    {"{{ d.items() | list | length }}|{{ d.keys() | join }}|{{ d.values() | join }}|{{ d.get('a') "
     "}}|{{ d.get('z', 9) }}|{{ d.get('z') }}|{{ d.get(1, 'n') }}",
     "{\"d\": {\"a\": 1, \"b\": 2}}", "2|ab|12|1|9|None|n"},
    {"{{ 'xxaxx'.strip('x') }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'xxaxx'.rstrip('x') }}|{{ '  a "
     "'.strip(none) }}",
     "", "a|axx|xxa|a"},
    {"{{ ' a b '.split(None, 1) | tojson }}|{{ ' a b '.rsplit(None, 1) | tojson }}|{{ ' a b "
     "'.split(None, 2) | tojson }}|{{ ' a '.split(None, 0) | tojson }}|{{ ' a '.rsplit(None, 1) | "
     "tojson }}",
     "", "[\"a\", \"b \"]|[\" a\", \"b\"]|[\"a\", \"b\"]|[\"a \"]|[\"a\"]"},
    {"{{ 'xax'.strip('x') }}|{{ ' a '.strip(none) }}", "", "a|a"},
    {"{{ d | items | list | length }}|{{ d.items() | length }}|{{ d.get('a', 0) }}|{{ d.values() | "
     "list | first }}",
     "{\"d\": {\"a\": 5}}", "1|1|5|5"},
    {"{{ 'a b  c'.split(' ') | tojson }}|{{ 'abc'.split('b', -1) | tojson }}|{{ 'a'.split('a') | "
     "tojson }}|{{ 'a.b.c'.rsplit('.', 0) | tojson }}",
     "", "[\"a\", \"b\", \"\", \"c\"]|[\"a\", \"c\"]|[\"\", \"\"]|[\"a.b.c\"]"},
    {"{{ 'Hello'.startswith('He') }}|{{ 'Hello'.endswith(('x', 'lo')) }}|{{ 'ABC'.lower() }}", "",
     "True|True|abc"},
    {"{{ 'a\\nb\\n'.splitlines() | length }}|{{ '\\r\\n'.splitlines(keepends=true) | tojson }}|{{ "
     "''.splitlines() | tojson }}",
     "", "2|[\"\\r\\n\"]|[]"},
    {"{{ 'abcabc'.count('bc') }}|{{ 'abc'.rfind('z') }}|{{ 'héllo'.rindex('l') }}|{{ "
     "'abc'.index('c') }}",
     "", "2|-1|3|2"},
    {"{{ 'a'.join([]) }}|{{ '-'.join(['a']) }}", "", "|a"},
    {"{{ 'abc'.title() }}|{{ 'a1b'.title() }}|{{ 'ab'.isupper() }}|{{ 'AB'.islower() }}|{{ "
     "''.isalnum() }}|{{ ''.isspace() }}|{{ ''.isalpha() }}",
     "", "Abc|A1B|False|False|False|False|False"},
    {"{{ [1, 2].count(3) }}|{{ ['a', 'b'].index('b') }}", "", "0|1"},
};

const RenderCase kOperatorsRenders[] = {
    {"{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7 % -3 }}|{{ 2 ** 10 }}|{{ 2 ** -1 "
     "}}|{{ 7 / 2 }}|{{ 7.5 // 2 }}|{{ -7.5 % 2 }}|{{ 7.5 % -2 }}|{{ 2.0 ** 3 }}|{{ 1.5 + 1 }}|{{ "
     "1.5 - 1 }}|{{ 1.5 * 2 }}",
     "", "3|-4|1|2|-2|1024|0.5|3.5|3.0|0.5|-0.5|8.0|2.5|0.5|3.0"},
    {"{{ true + true }}|{{ 3 * true }}|{{ [1] * 2 }}|{{ 2 * [1] | length }}|{{ 2 * 'ab' }}|{{ 'ab' "
     "* 0 }}|{{ 'ab' * -1 }}|{{ [1] * 0 }}",
     "", "2|3|[1, 1]|2|abab|||[]"},
    {"{{ 1 in [1, 2] }}|{{ 'a' in 'cat' }}|{{ 'a' in d }}|{{ 1 in d }}|{{ 3 not in [1] }}",
     "{\"d\": {\"a\": 1}}", "True|True|True|False|True"},
    {"{{ [1, 2] < [1, 3] }}|{{ [1, 2] < [1, 2, 0] }}|{{ [2] > [1, 5] }}|{{ 'a' < 'b' }}|{{ 1 < 2.5 "
     "}}|{{ true < 2 }}|{{ [1,2] <= [1,2] }}|{{ 3 >= 3 }}",
     "", "True|True|True|True|True|True|True|True"},
    {"{{ d.a }}|{{ d['a'] }}|{{ d.z is defined }}|{{ d[1] is defined }}|{{ xs[0] }}|{{ xs[-1] "
     "}}|{{ xs[5] is defined }}|{{ 'héllo'[1] }}|{{ 'abc'[-1] }}|{{ 'abc'[9] is defined }}|{{ "
     "xs[true] }}",
     "{\"d\": {\"a\": 1}, \"xs\": [1, 2]}", "1|1|False|False|1|2|False|é|c|False|2"},
    {"{{ (1)[0] }}", "", ""},
    {"{{ xs[::-1] | join }}|{{ xs[-2:] | join }}|{{ xs[:-1] | join }}|{{ xs[5:] | join }}|{{ "
     "xs[::2] | join }}|{{ 'abcdef'[1:4] }}|{{ 'abcdef'[::-2] }}|{{ 'abcdef'[10:0:-1] }}|{{ "
     "xs[-10:10] | join }}|{{ xs[None:2] | join }}",
     "{\"xs\": [1, 2, 3, 4]}", "4321|34|123||13|bcd|fdb|fedcb|1234|12"},
    {"{% for c in 'héy' %}{{ c }}.{% endfor %}|{% for k in d %}{{ k }}{% endfor %}|{% for k, v in "
     "d.items() %}{{ k }}={{ v }}{% endfor %}",
     "{\"d\": {\"a\": 1, \"b\": 2}}", "h.é.y.|ab|a=1b=2"},
    {"{% for c in y %}{% endfor %}", "", ""},
    {"{{ ' x'.strip() }}|{{ '　x'.split() | length }}", "", "x|1"},
    {"{{ -true }}|{{ +true }}|{{ -x }}|{{ +2.5 }}|{{ -2.5 }}", "{\"x\": 3}", "-1|1|-3|2.5|-2.5"},
    {"{{ not y }}|{{ not 0 }}|{{ 1 if 0 }}|{{ (1 if 0) is defined }}", "", "True|True||False"},
    {"{{ [1] < [1, 2] }}|{{ [1, 2] < [1] }}|{{ true < 2.5 }}|{{ 'b' > 'a' }}|{{ [[1]] < [[2]] "
     "}}|{{ 1.5 < 2 }}",
     "", "True|False|True|True|True|True"},
};

const RenderCase kValuesRenders[] = {
    {"{{ [1, 'a', none, true, 1.5, [2], {'k': 'v'}] }}", "",
     "[1, 'a', None, True, 1.5, [2], {'k': 'v'}]"},
    {"{{ {'a': [1, {'b': none}], 'c': false} }}", "", "{'a': [1, {'b': None}], 'c': False}"},
    {"{{ none }}|{{ true }}|{{ false }}|{{ 1.0 }}|{{ 1e20 }}|{{ 1.5e-7 }}|{{ 0.1 }}|{{ -0.0 }}|{{ "
     "123456789012345678.0 }}|{{ 1e16 }}|{{ 1e15 }}|{{ 0.0001 }}|{{ 0.00001 }}",
     "",
     "None|True|False|1.0|1e+20|1.5e-07|0.1|-0.0|1.2345678901234568e+17|1e+16|1000000000000000.0|0."
     "0001|1e-05"},
    {"{{ [\"it's\", 'say \"hi\"', 'both \\' \"', 'nl\\n\\t\\r\\\\', '\\x01\\x7f'] }}", "",
     "[\"it's\", 'say \"hi\"', 'both \\' \"', 'nl\\n\\t\\r\\\\', '\\x01\\x7f']"},
    {"{{ [y] }}", "", "[Undefined]"},
    {"{{ [1, [2, 3]] == [1, [2, 3]] }}|{{ [1, 2] == [1] }}|{{ [1, 2] == [1, 3] }}|{{ {'a': 1} == "
     "{'a': 1} }}|{{ {'a': 1} == {'a': 2} }}|{{ {'a': 1} == {'b': 1} }}|{{ {'a': 1} == {'a': 1, "
     "'b': 2} }}|{{ 1 == 1.0 }}|{{ true == 1 }}|{{ none == none }}|{{ 'a' == 'a' }}|{{ 1 == 'a' "
     "}}|{{ 1.5 == 1.5 }}|{{ none == 0 }}",
     "", "True|False|False|True|False|False|False|True|True|True|True|False|True|False"},
    {"{% set ns = namespace(a=1) %}{{ ns == ns }}", "", "True"},
    {"{{ range == range }}", "", "True"},
    {"{{ x.y }}", "{\"x\": 1}", ""},
    {"{{ 1 is number }}|{{ 1.5 is float }}|{{ 1 is float }}|{{ true is true }}|{{ 1 is true }}|{{ "
     "false is false }}|{{ 0 is false }}|{{ none is none }}|{{ 'a' is string }}|{{ [1] is sequence "
     "}}|{{ d is mapping }}|{{ d is iterable }}|{{ 1 is iterable }}|{{ range is callable }}|{{ 1 "
     "is callable }}",
     "{\"d\": {}}",
     "True|True|False|True|False|True|False|True|True|True|True|True|False|True|False"},
    {"{{ 'ABC' is upper }}|{{ 'AbC' is upper }}|{{ 'abc' is lower }}|{{ 'aBc' is lower }}|{{ 1 is "
     "lower }}|{{ '1' is upper }}",
     "", "True|False|True|False|False|False"},
    {"{{ 3 is odd }}|{{ 3 is even }}|{{ true is odd }}|{{ 6 is divisibleby 3 }}|{{ 7 is "
     "divisibleby(3) }}",
     "", "True|False|True|True|False"},
    {"{{ none is sameas none }}|{{ true is sameas true }}|{{ true is sameas 1 }}|{{ 1 is sameas 1 "
     "}}|{{ false is sameas none }}",
     "", "True|True|False|True|False"},
    {"{{ y is defined }}|{{ y is undefined }}|{{ 1 is undefined }}", "", "False|True|False"},
    {"{{ xs[true] }}|{{ xs[-5] is defined }}|{{ 'abc'[-5] is defined }}|{{ d[1] is defined }}|{{ "
     "'abc'[false] }}",
     "{\"xs\": [1, 2], \"d\": {\"a\": 1}}", "2|False|False|False|a"},
    {"{{ x is string }}|{{ x is number }}|{{ x is mapping }}|{{ x is sequence }}|{{ 'abc' is "
     "iterable }}|{{ none is iterable }}",
     "{\"x\": [1]}", "False|False|False|True|True|False"},
    {"{{ 2 is even }}|{{ false is even }}|{{ 7 is odd }}|{{ none is sameas false }}", "",
     "True|True|True|False"},
};

const RenderCase kGlobalsRenders[] = {
    {"{{ range(3) | join }}|{{ range(1, 4) | join }}|{{ range(10, 0, -3) | join }}|{{ range(true) "
     "| join }}|{{ range(0, 10, 4) | join }}|{{ range(3, 1) | join }}",
     "", "012|123|10741|0|048|"},
    {"{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}", "", "12"},
    {"{{ dict(a=1, b=2) | tojson }}|{{ dict() | length }}", "", "{\"a\": 1, \"b\": 2}|0"},
    {"{{ strftime_now('') }}|", "", "|"},
    {"{{ 'ab' | indent(width=true) }}", "", "ab"},
    {"{{ dict(a=1, b=[2]) | tojson }}", "", "{\"a\": 1, \"b\": [2]}"},
    {"{{ range(false, 3) | join }}", "", "012"},
    {"{{ namespace() is defined }}", "", "True"},
};

const RenderCase kStatementsRenders[] = {
    {"{% macro m(a, b=2) %}{{ a }}{{ b }}{{ c is defined }}{% endmacro %}{{ m(1) }}|{{ m(1, 3) "
     "}}|{{ m(b=4, a=5) }}",
     "", "12False|13False|54False"},
    {"{% macro m(a, b) %}[{{ a }}{{ b is defined }}]{% endmacro %}{{ m() }}", "", "[False]"},
    {"{% filter upper %}ab{% endfilter %}|{% filter replace('a', 'b') | upper %}aa{% endfilter %}",
     "", "AB|BB"},
    {"{% set x %}hi {{ 1 }}{% endset %}[{{ x }}]", "", "[hi 1]"},
    {"{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set c, d = [3, 4] %}{{ c }}{{ d }}", "", "12|34"},
    {"{% for i in [1, 2, 3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ "
     "loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem is defined "
     "}}{{ loop.nextitem is defined }}{{ loop.cycle('a', 'b') }},{% endfor %}",
     "", "1032TrueFalse3FalseTruea,2121FalseFalse3TrueTrueb,3210FalseTrue3TrueFalsea,"},
    {"{% for i in [1, 2] %}{{ loop.previtem }}{{ loop.nextitem }}{% endfor %}", "", "21"},
    {"{% for i in [] %}x{% else %}empty{% endfor %}|{% for i in [1, 2, 3] if i > 1 %}{{ i }}{% "
     "else %}none{% endfor %}",
     "", "empty|23"},
    {"{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% "
     "endif %}{{ i }}{% endfor %}",
     "", "02"},
    {"{% for (a, b) in [(1, 2)] %}{{ a }}{{ b }}{% endfor %}", "", "12"},
    {"{% for a in [1] %}{% endfor %}{{ a is defined }}", "", "False"},
    {"{% if 0 %}a{% elif 1 %}b{% else %}c{% endif %}|{% if 0 %}a{% elif 0 %}b{% else %}c{% endif "
     "%}",
     "", "b|c"},
    {"{% generation %}gen{% endgeneration %}", "", "gen"},
    {"{{ (1, 2) | join }}|{{ (1,) | join }}|{{ () | length }}|{{ (1, 2,) | length }}", "",
     "12|1|0|2"},
    {"{{ {'a': 1, 'b': 2} | length }}|{{ {} | length }}", "", "2|0"},
    {"{{ 1 if 1 else 2 }}|{{ 1 if 0 else 2 }}|{{ 'x' ~ 1 ~ none }}|{{ 2 ** 2 ** 3 }}|{{ (1 + 2) * "
     "3 }}|{{ -2 ** 2 }}",
     "", "1|2|x1None|64|9|4"},
    {"{{ xs.0 }}|{{ d.a.b }}", "{\"xs\": [5], \"d\": {\"a\": {\"b\": 7}}}", "5|7"},
    {"{{ x | string | length }}", "{\"x\": 12345}", "5"},
    {"{{ range(3)|list }}", "", "[0, 1, 2]"},
    {"{{ x is divisibleby 3 }}", "{\"x\": 9}", "True"},
    {"{{ x is in [1, 2] }}", "{\"x\": 1}", "True"},
    {"{{ x is in 'abc' }}", "{\"x\": \"b\"}", "True"},
    {"{{ x is eq(3) }}", "{\"x\": 3}", "True"},
    {"{{ x is eq {'a': 1} }}", "{\"x\": 3}", "False"},
    {"{{ x is eq [1] }}", "{\"x\": 3}", "False"},
    {"{{ x is eq 1.5 }}", "{\"x\": 3}", "False"},
    {"{{ x is defined and x is eq 3 }}", "{\"x\": 3}", "True"},
    {"{% for i in range(4) %}{{ loop.cycle('x', 'y', 'z') }}{% endfor %}", "", "xyzx"},
    {"{% if x is defined %}{{ x }}{% endif %}|{{ ns is undefined }}", "", "|True"},
    {"{% set ns = namespace(a=[1]) %}{{ ns.a[0] }}|{{ ns['a'][0] }}|{{ ns.b is defined }}", "",
     "1|1|False"},
    {"{% set ns = namespace(a=1) %}{% set ns.a = ns.a + 1 %}{{ ns.a }}", "", "2"},
    {"{% set ns = namespace(a=1) %}{% set ns.a = namespace(b=ns.a) %}{{ ns.a.b }}", "", "1"},
    {"{% for x in [[1, 2], [3, 4]] %}{% for y in x %}{{ loop.index }}{{ y }}{% endfor %};{% endfor "
     "%}",
     "", "1122;1324;"},
    {"{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}", "", "ba"},
    {"{% for x in [1, 2, 3] %}{{ x }}{% if loop.last %}.{% else %},{% endif %}{% endfor %}", "",
     "1,2,3."},
    {"{% macro m(x) %}<{{ x }}>{% endmacro %}{{ m('a') }}{{ m(x='b') }}", "", "<a><b>"},
    {"{% macro m(x) %}{{ caller is defined }}{% endmacro %}{{ m(1) }}", "", "False"},
};

const RenderCase kSyntaxRenders[] = {
    {"{{ xs[:] | join }}", "{\"xs\": [1, 2]}", "12"},
    {"{{ 'a\\qb' }}", "", "a\\qb"},
    {"{{ '\\x41\\u00e9\\U0001F600' }}|{{ '\\b\\f\\v\\0' | length }}|{{ '\\'\\\"' }}", "",
     "Aé😀|4|'\""},
    {"{{ 1_000 + 1e3 + 1E-1 + 2.5e+1 }}|{{ 1.5 }}|{{ 0.5e1 }}", "", "2025.1|1.5|5.0"},
    {"{% raw %}{{ not rendered }}{% endraw %}|{%- raw -%}  a  {%- endraw -%}  |{% raw %}b{% endraw "
     "%}|{%+ raw %}c{% endraw %}",
     "", "{{ not rendered }}|a|b|c"},
    {"{% raw %}x{% endwhat %}{% endraw %}", "", "x{% endwhat %}"},
    {"a  {%- if 1 -%}  b  {%- endif -%}  c|  {%+ if 1 %}x{% endif %}", "", "abc|  x"},
    {"a {{- 1 -}} b|a {#- c -#} b|{# c #}x", "", "a1b|ab|x"},
    {"  {% if 1 %}\r\nx{% endif %}\r\n", "", "x"},
    {"{{ '}}' }}|{{ {'a': {'b': 1}} | tojson }}|{% set x = {'a': '%}'} %}{{ x.a }}", "",
     "}}|{\"a\": {\"b\": 1}}|%}"},
    {"{{ 'ééࠀ' | length }}|{{ '\\u0800\\u07ff' }}", "", "3|ࠀ߿"},
    {"{{ x | tojson }}|{{ x | tojson(indent=2) }}|{{ x | tojson(sort_keys=true) }}",
     "{\"x\": {\"b\": [1, \"\\r\\b\\f\\t\\u0001é\"], \"a\": true, \"c\": null, \"d\": 1.5}}",
     "{\"b\": [1, \"\\r\\b\\f\\t\\u0001é\"], \"a\": true, \"c\": null, \"d\": 1.5}|{\n  \"b\": [\n "
     "   1,\n    \"\\r\\b\\f\\t\\u0001é\"\n  ],\n  \"a\": true,\n  \"c\": null,\n  \"d\": "
     "1.5\n}|{\"a\": true, \"b\": [1, \"\\r\\b\\f\\t\\u0001é\"], \"c\": null, \"d\": 1.5}"},
    {"{{ (1/3) | tojson }}|{{ 1e300 * 1e300 }}", "", "0.3333333333333333|inf"},
    {"{{ xs | tojson }}", "{\"xs\": [1.25, -2]}", "[1.25, -2]"},
    {"{% for i in [1,2] %}{% set x = i %}{% endfor %}{{ x is defined }}", "", "False"},
    {"{% set ns = namespace(c=0) %}{% for i in range(3) %}{% set ns.c = ns.c + i %}{% endfor %}{{ "
     "ns.c }}",
     "", "3"},
    {"{{ 'abc' if x is not defined else 'd' }}|{{ x is not none }}", "{\"x\": null}", "d|False"},
    {"{{ 1 not in [2] and not false or 0 }}", "", "True"},
    {"{{ 'a' ~ 'b' | upper }}", "", "aB"},
    {"{{ 'x' | upper() }}|{{ 'x' | replace('x', 'y') | upper }}", "", "X|Y"},
    {"{% raw -%}  x{% endraw %}  y|{% raw %}x{% endraw -%}  y|a\r\n", "", "x  y|xy|a"},
    {"{{\0141\013}}|{% set _x = 1 %}{{ _x }}|{{ 1 -}}   {{ 2 }}|a{|{x|{#- c #}  y|{# c #}\nz", "",
     "1|1|12|a{|{x|  y|z"},
    {"x\n", "", "x"},
    {"{% raw %} a {%- endraw %}|{% raw %}b{%+ endraw %}|{% raw %}{% if %}{% endraw %}|{% raw -%}\n "
     " c{% endraw %}",
     "", " a|b|{% if %}|c"},
    {"{{ 1.5e3 }}|{{ 1e+2 }}|{{ 2E-1 }}|{{ 1_0.5 }}|{{ 3.25 }}|{{ 10 }}", "",
     "1500.0|100.0|0.2|10.5|3.25|10"},
};

const FailCase kFiltersFailures[] = {
    {"{{ {'b': 2, 'a': 1} | tojson(ensure_ascii=true) }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 23: tojson(ensure_ascii=true) is not supported"},
    {"{{ 3 | length }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 8: object of type 'int' has no len()"},
    {"{{ none | length }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 11: object of type 'NoneType' has no len()"},
    {"{{ 'a' | round }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 10: round: expected a number, not 'str'"},
    {"{{ 2.5 | round(0, 'up') }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 10: round: method must be 'common', 'ceil' or 'floor'"},
    {"{{ 'a\nb' | indent(1.5) }}", "", StatusCode::kInvalidArgument,
     "chat template line 2, column 6: indent(): 'width' must be an integer, not 'float'"},
    {"{{ [1] | dictsort }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 10: dictsort: expected a dict, not 'list'"},
    {"{{ d | dictsort(by='x') }}", "{\"d\": {\"a\": 1}}", StatusCode::kInvalidArgument,
     "chat template line 1, column 8: dictsort: 'by' must be 'key' or 'value'"},
    {"{{ xs | selectattr() | list }}", "{\"xs\": [{\"a\": 1}]}", StatusCode::kInvalidArgument,
     "chat template line 1, column 9: selectattr() needs an attribute name"},
    {"{{ xs | selectattr('a', 3) | list }}", "{\"xs\": [{\"a\": 1}]}", StatusCode::kInvalidArgument,
     "chat template line 1, column 9: selectattr(): the test name must be a string"},
    {"{{ xs | map(attribute='a', foo=1) | join }}", "{\"xs\": [{\"a\": 1}]}",
     StatusCode::kUnsupported,
     "chat template line 1, column 9: map() got an unsupported keyword argument 'foo'"},
    {"{{ [1,2] | map(3) | join }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 12: map() needs a filter name or attribute="},
    {"{{ [1,2] | map() | join }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 12: map() needs a filter name or attribute="},
    {"{{ [1,2,3] | sum }}|{{ [1,2] | sum(10) }}|{{ [{'v':1},{'v':2}] | sum(attribute='v') }}|{{ "
     "[1.5,2] | sum(start=1) }}",
     "", StatusCode::kInvalidArgument,
     "chat template line 1, column 32: sum(): 'attribute' must be a string, not 'int'"},
    {"{{ [] | min(1, 'a', 3) }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 9: min() takes at most 2 positional arguments, 3 given"},
    {"{{ 'x' | abs }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 10: bad operand type for abs(): 'str'"},
    {"{{ 3 | items }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 8: items: expected a dict, not 'int'"},
    {"{{ 5 | list }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 8: 'int' object is not iterable"},
    {"{{ 1 | nosuchfilter }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 8: unsupported filter 'nosuchfilter'"},
    {"{{ 'x' | center }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 10: unsupported filter 'center'"},
};

const FailCase kMethodsFailures[] = {
    {"{{ 'a b'.split(1) }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 15: split(): sep must be a string or None"},
    {"{{ 'a b'.split('') }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 15: empty separator"},
    {"{{ 'abc'.startswith(1) }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 20: startswith() takes a string or a tuple of strings, not "
     "'int'"},
    {"{{ 'abc'.startswith() }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 20: startswith() is missing its argument 'prefix'"},
    {"{{ 'banana'.index('z') }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 18: substring not found"},
    {"{{ 'banana'.find(1) }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 17: find() takes a string, not 'int'"},
    {"{{ 'banana'.find() }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 17: find() is missing its argument 'sub'"},
    {"{{ ', '.join([1, 2]) }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 13: join() expects strings, found 'int'"},
    {"{{ 'abc'.zfill(5) }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 15: string method 'zfill' is not supported"},
    {"{{ [1, 2].index(3) }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 16: 3 is not in list"},
    {"{{ [1, 2].append(3) }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 17: list method 'append' would change a value; chat templates "
     "render immutably"},
    // A namespace holding itself, directly or inside a list or dict, would
    // be a reference cycle that is never freed (fuzz_chat_template's leak);
    // Python's garbage collector takes cycles, pvllm refuses them.
    {"{% set ns = namespace(a=1) %}{% set ns.a = ns %}", "", StatusCode::kUnsupported,
     "chat template line 1, column 33: 'ns.a' would make namespace 'ns' hold itself"},
    {"{% set ns = namespace(a=1) %}{% set ns.a = [1, {'k': ns}] %}", "", StatusCode::kUnsupported,
     "chat template line 1, column 33: 'ns.a' would make namespace 'ns' hold itself"},
    {"{{ [1, 2].copy() }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 15: list method 'copy' is not supported"},
    {"{{ d.update({'c': 1}) }}", "{\"d\": {\"a\": 1}}", StatusCode::kUnsupported,
     "chat template line 1, column 12: dict method 'update' would change a value; chat templates "
     "render immutably"},
    {"{{ d.copy() }}", "{\"d\": {\"a\": 1}}", StatusCode::kUnsupported,
     "chat template line 1, column 10: dict method 'copy' is not supported"},
    {"{{ x.foo() }}", "{\"x\": 1}", StatusCode::kInvalidArgument,
     "chat template line 1, column 9: 'int' object has no method 'foo'"},
    {"{{ 'abc'.nosuch() }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 16: string method 'nosuch' is not supported"},
    {"{{ 'AbC'.swapcase() }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 18: string method 'swapcase' is not supported"},
    {"{{ 'a'.strip('a', 'b') }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 13: strip() takes at most 1 positional arguments, 2 given"},
    {"{{ 'a'.strip(chars=1) }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 13: strip arg must be None or str, not int"},
    {"{{ 'abc'.replace('a') }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 17: replace() is missing its argument 'new'"},
    {"{{ 'abc'.replace('a', 'b', 'c') }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 17: replace(): 'count' must be an integer, not 'str'"},
    {"{{ 'abc'.replace(1, 'b') }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 17: replace(): 'old' must be a string, not 'int'"},
    {"{{ 'abc'.split(foo=1) }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 15: split() got an unsupported keyword argument 'foo'"},
    {"{{ 'a'.strip(1) }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 13: strip arg must be None or str, not int"},
    {"{{ [1].pop() }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 11: list method 'pop' would change a value; chat templates "
     "render immutably"},
    {"{{ d.pop('a') }}", "{\"d\": {\"a\": 1}}", StatusCode::kUnsupported,
     "chat template line 1, column 9: dict method 'pop' would change a value; chat templates "
     "render immutably"},
    {"{{ d.get() }}", "{\"d\": {\"a\": 1}}", StatusCode::kInvalidArgument,
     "chat template line 1, column 9: get() is missing its argument 'key'"},
    {"{{ d.items(1) }}", "{\"d\": {\"a\": 1}}", StatusCode::kInvalidArgument,
     "chat template line 1, column 11: items() takes at most 0 positional arguments, 1 given"},
    {"{{ 'abc'.removeprefix(1) }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 22: removeprefix(): 'affix' must be a string, not 'int'"},
    {"{{ 'a'.splitlines(1, 2) }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 18: splitlines() takes at most 1 positional arguments, 2 given"},
    {"{{ 'a'.join(1) }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 12: 'int' object is not iterable"},
};

const FailCase kOperatorsFailures[] = {
    {"{{ 1 // 0 }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 6: integer division or modulo by zero"},
    {"{{ 1 % 0 }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 6: integer division or modulo by zero"},
    {"{{ 1.0 / 0 }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 8: division by zero"},
    {"{{ 1.0 // 0 }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 8: float modulo or floor division by zero"},
    {"{{ 1.0 % 0.0 }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 8: float modulo or floor division by zero"},
    {"{{ 1 / 0 }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 6: division by zero"},
    {"{{ 9223372036854775807 + 1 }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 24: integer overflow in +"},
    {"{{ 9223372036854775807 * 2 }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 24: integer overflow in *"},
    {"{{ 3 ** 50 }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 6: integer overflow in *"},
    {"{{ 1 + 'a' }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 6: unsupported operand type(s) for +: 'int' and 'str'"},
    {"{{ 'a' - 1 }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 8: unsupported operand type(s) for -: 'str' and 'int'"},
    {"{{ [1] + [2, 3] | length }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 8: unsupported operand type(s) for +: 'list' and 'int'"},
    {"{{ 1 in 'abc' }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 6: 'in <string>' requires string as left operand, not int"},
    {"{{ 1 in 5 }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 6: argument of type 'int' is not iterable"},
    {"{{ 1 < 'a' }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 6: '<' not supported between instances of 'int' and 'str'"},
    {"{{ y < 1 }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 6: 'y' is undefined"},
    {"{{ 1 < y }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 6: 'y' is undefined"},
    {"{{ none < 1 }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 9: '<' not supported between instances of 'NoneType' and 'int'"},
    {"{{ y.a }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 5: 'y' is undefined"},
    {"{{ y[0] }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 5: 'y' is undefined"},
    {"{{ xs[::0] }}", "{\"xs\": [1]}", StatusCode::kInvalidArgument,
     "chat template line 1, column 6: slice step cannot be zero"},
    {"{{ xs['a':] }}", "{\"xs\": [1]}", StatusCode::kInvalidArgument,
     "chat template line 1, column 6: slice indices must be integers or None"},
    {"{{ y[1:] }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 5: 'y' is undefined"},
    {"{% for c in 5 %}{% endfor %}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 4: 'int' object is not iterable"},
    {"{% for a, b in [[1, 2, 3]] %}{% endfor %}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 4: too many values to unpack (expected 2, got 3)"},
    {"{% for a, b in [[1]] %}{% endfor %}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 4: not enough values to unpack (expected 2, got 1)"},
    {"{% for a, b in [1] %}{% endfor %}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 4: cannot unpack a value of type 'int' into 2 variables"},
    {"{{ -'a' }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 4: bad operand type for unary -: 'str'"},
    {"{{ -y }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 4: 'y' is undefined"},
    {"{{ 'ab' * 10000000000 }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 9: the template builds a string of more than 16 MiB"},
    {"{{ [1] * 10000000000 }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 8: the template builds a list of more than 1048576 items"},
    {"{{ [1] < 'a' }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 8: '<' not supported between instances of 'list' and 'str'"},
    {"{{ d[1:] }}", "{\"d\": {\"a\": 1}}", StatusCode::kInvalidArgument,
     "chat template line 1, column 5: 'dict' object is not subscriptable"},
};

const FailCase kValuesFailures[] = {
    {"{{ 6 is divisibleby 0 }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 9: divisibleby needs a non-zero integer"},
    {"{{ 6 is divisibleby }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 9: the test 'divisibleby' needs an argument"},
    {"{{ 'a' is odd }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 11: the test 'odd' needs an integer"},
    {"{{ y is odd }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 9: 'y' is undefined"},
    {"{{ 1 is eq 1 }}|{{ 1 is equalto 2 }}|{{ 1 is ne 2 }}|{{ 1 is lt 2 }}|{{ 1 is lessthan 0 "
     "}}|{{ 2 is gt 1 }}|{{ 2 is greaterthan 3 }}|{{ 1 is le 1 }}|{{ 1 is ge 2 }}|{{ 1 is in [1] "
     "}}|{{ 1 is == 1 }}|{{ 1 is != 1 }}|{{ 1 is < 2 }}|{{ 1 is > 2 }}|{{ 1 is <= 0 }}|{{ 1 is >= "
     "0 }}",
     "", StatusCode::kUnsupported,
     "chat template line 1, column 191: expected a test name, found '=='"},
    {"{{ 1 is nosuchtest }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 9: unsupported test 'nosuchtest'"},
};

const FailCase kGlobalsFailures[] = {
    {"{{ range() }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 9: range expected at least 1 argument, got 0"},
    {"{{ range('a') }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 9: range() takes integers, not 'str'"},
    {"{{ range(1, 2, 0) }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 9: range() arg 3 must not be zero"},
    {"{{ range(1, 2, 3, 4) }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 9: range() takes at most 3 positional arguments, 4 given"},
    {"{{ range(2000000) | length }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 9: range() of more than 1048576 items"},
    {"{% set ns = namespace({'a': 1}, {'b': 2}) %}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 22: namespace() takes at most one positional argument"},
    {"{% set ns = namespace(3) %}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 22: namespace() takes a dict, not 'int'"},
    {"{{ dict(1) }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 8: dict() takes keyword arguments only"},
    {"{{ raise_exception() }}", "", StatusCode::kInvalidArgument, ""},
    {"{{ strftime_now(1) }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 16: strftime_now(): '' must be a string, not 'int'"},
    {"{{ strftime_now('%Y', 2) }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 16: strftime_now() takes at most 1 positional arguments, 2 "
     "given"},
    {"{{ 'x' | truncate }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 10: unsupported filter 'truncate'"},
    {"{{ range(3, 'a') }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 9: range() takes integers, not 'str'"},
};

const FailCase kStatementsFailures[] = {
    {"{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 35: macro 'm' takes 1 arguments, 2 given"},
    {"{% macro m(a) %}{% endmacro %}{{ m(z=1) }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 35: macro 'm' has no parameter 'z'"},
    {"{% macro m(n) %}{{ m(n) }}{% endmacro %}{{ m(1) }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 21: macro 'm' recurses too deeply"},
    {"{% macro m() %}{% break %}{% endmacro %}{{ m() }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 45: {% break %} or {% continue %} outside a loop"},
    {"{% break %}", "", StatusCode::kUnsupported,
     "chat template: {% break %} or {% continue %} outside a loop"},
    {"{% filter upper %}{% continue %}{% endfilter %}", "", StatusCode::kUnsupported,
     "chat template line 1, column 4: {% break %} or {% continue %} inside a filter block"},
    {"{% set x %}{% break %}{% endset %}", "", StatusCode::kUnsupported,
     "chat template line 1, column 4: {% break %} or {% continue %} inside a block set"},
    {"{% set a, b = 1, 2, 3 %}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 4: too many values to unpack (expected 2, got 3)"},
    {"{% set a, b = 1 %}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 4: cannot unpack a value of type 'int' into 2 variables"},
    {"{% set a, b %}x{% endset %}", "", StatusCode::kUnsupported,
     "chat template line 1, column 4: a block set assigns one variable"},
    {"{% set a %}x{% endset | upper %}", "", StatusCode::kUnsupported,
     "chat template line 1, column 23: expected '%}', found '|'"},
    {"{% set x = 1 %}{% set x.y = 2 %}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 19: cannot assign attribute 'y' of 'x': it is not a "
     "namespace()"},
    {"{% for i in [1] %}{{ loop.cycle() }}{% endfor %}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 32: loop.cycle() needs at least one argument"},
    {"{{ {1: 2} }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 4: dict keys other than strings are not supported"},
    {"{{ x() }}", "{\"x\": 1}", StatusCode::kInvalidArgument,
     "chat template line 1, column 5: 'int' object is not callable"},
    {"{{ y() }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 5: unknown function 'y'"},
    {"{{ y.z() }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 7: 'y' is undefined"},
    {"{{ 'a'.y() }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 9: string method 'y' is not supported"},
    {"{{ foo(1, b=2, 3) }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 16: a positional argument after a keyword argument"},
    {"{{ foo(*xs) }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 8: *args and **kwargs are not supported"},
    {"{{ foo(**d) }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 8: *args and **kwargs are not supported"},
    {"{% set ns = namespace(v=1) %}{{ ns.v() }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 37: 'int' object is not callable"},
    {"{% set ns = namespace(v=1) %}{{ ns.w() }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 37: 'namespace' object has no method 'w'"},
    {"{% set x = 5 %}{% set x.a = 1 %}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 19: cannot assign attribute 'a' of 'x': it is not a "
     "namespace()"},
};

const FailCase kSyntaxFailures[] = {
    {"{{ xs[1:2:3:4] }}", "{\"xs\": [1]}", StatusCode::kUnsupported,
     "chat template line 1, column 13: expected ']', found the number 4"},
    {"{{ xs[1 2] }}", "{\"xs\": [1]}", StatusCode::kUnsupported,
     "chat template line 1, column 9: expected ':' or ']', found the number 2"},
    {"{{ (1, 2 }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 1: unclosed tag {{"},
    {"{{ [1, 2 }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 1: unclosed tag {{"},
    {"{{ {'a' 1} }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 9: expected ':', found the number 1"},
    {"{{ }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 4: expected an expression, found '}}'"},
    {"{{ 1 + }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 8: expected an expression, found '}}'"},
    {"{{ 1 2 }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 6: expected '}}', found the number 2"},
    {"{% if 1 %}x", "", StatusCode::kUnsupported,
     "chat template line 1, column 11: missing {% endif %} for the tag opened here"},
    {"{% endif %}", "", StatusCode::kUnsupported,
     "chat template line 1, column 4: unexpected {% endif %}"},
    {"{% if 1 %}x{% endfor %}", "", StatusCode::kUnsupported,
     "chat template line 1, column 15: unexpected {% endfor %}"},
    {"{% for x 1 %}{% endfor %}", "", StatusCode::kUnsupported,
     "chat template line 1, column 10: expected 'in', found the number 1"},
    {"{% for %}{% endfor %}", "", StatusCode::kUnsupported,
     "chat template line 1, column 8: expected a variable name, found '%}'"},
    {"{% nosuchtag %}", "", StatusCode::kUnsupported,
     "chat template line 1, column 4: unsupported tag 'nosuchtag'"},
    {"{% 1 %}", "", StatusCode::kUnsupported,
     "chat template line 1, column 4: expected a tag name, found the number 1"},
    {"{% set %}", "", StatusCode::kUnsupported,
     "chat template line 1, column 8: expected a variable name, found '%}'"},
    {"{% set x = 1 2 %}", "", StatusCode::kUnsupported,
     "chat template line 1, column 14: expected '%}', found the number 2"},
    {"{% if 1 %}{% else %}{% else %}{% endif %}", "", StatusCode::kUnsupported,
     "chat template line 1, column 24: unexpected {% else %}"},
    {"{{ 'abc", "", StatusCode::kUnsupported,
     "chat template line 1, column 4: unclosed string literal"},
    {"{{ 1", "", StatusCode::kUnsupported, "chat template line 1, column 1: unclosed tag {{"},
    {"{% if 1 ", "", StatusCode::kUnsupported, "chat template line 1, column 1: unclosed tag {%"},
    {"{# comment", "", StatusCode::kUnsupported,
     "chat template line 1, column 1: unclosed comment {#"},
    {"{{ '\\xZZ' }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 6: bad \\x escape"},
    {"{{ '\\u12' }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 6: bad \\u escape"},
    {"{{ 99999999999999999999 }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 4: integer literal 99999999999999999999 is out of range"},
    {"{{ 1e }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 5: expected '}}', found 'e'"},
    {"{{ x @ 1 }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 6: unexpected character '@' in a tag"},
    {"{{ x ; 1 }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 6: unexpected character ';' in a tag"},
    {"{% raw %}x", "", StatusCode::kUnsupported,
     "chat template line 1, column 1: {% raw %} without {% endraw %}"},
    {"{% raw %}x{% endraw x %}", "", StatusCode::kUnsupported,
     "chat template line 1, column 1: {% raw %} without {% endraw %}"},
    {"{{ x | tojson(separators=(',', ':')) }}", "{\"x\": {\"a\": [1, 2]}}",
     StatusCode::kUnsupported,
     "chat template line 1, column 8: tojson() got an unsupported keyword argument 'separators'"},
    {"{{ range | tojson }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 12: tojson: a value of type function is not JSON serializable"},
    {"{{ namespace(a=1) | tojson }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 21: tojson: a value of type namespace is not JSON serializable"},
    {"{{ y | tojson }}", "", StatusCode::kInvalidArgument,
     "chat template line 1, column 8: tojson: a value of type undefined is not JSON serializable"},
    {"{{ '\\x4' }}", "", StatusCode::kUnsupported,
     "chat template line 1, column 6: bad \\x escape"},
    {"{{ 'abc\\", "", StatusCode::kUnsupported,
     "chat template line 1, column 4: unclosed string literal"},
};

TEST(ChatBuiltinsTest, FiltersRenderAsJinjaDoes) { expect_renders(kFiltersRenders); }
TEST(ChatBuiltinsTest, FilterMisuseFailsNamingIt) { expect_fails(kFiltersFailures); }
TEST(ChatBuiltinsTest, MethodsRenderAsPythonDoes) { expect_renders(kMethodsRenders); }
TEST(ChatBuiltinsTest, MethodMisuseFailsNamingIt) { expect_fails(kMethodsFailures); }
TEST(ChatBuiltinsTest, OperatorsComputeAsPythonDoes) { expect_renders(kOperatorsRenders); }
TEST(ChatBuiltinsTest, OperatorMisuseFailsNamingIt) { expect_fails(kOperatorsFailures); }
TEST(ChatBuiltinsTest, ValuesAndTestsPrintAsPythonDoes) { expect_renders(kValuesRenders); }
TEST(ChatBuiltinsTest, TestMisuseFailsNamingIt) { expect_fails(kValuesFailures); }
TEST(ChatBuiltinsTest, GlobalsRenderAsJinjaDoes) { expect_renders(kGlobalsRenders); }
TEST(ChatBuiltinsTest, GlobalMisuseFailsNamingIt) { expect_fails(kGlobalsFailures); }
TEST(ChatBuiltinsTest, StatementsRenderAsJinjaDoes) { expect_renders(kStatementsRenders); }
TEST(ChatBuiltinsTest, StatementMisuseFailsNamingIt) { expect_fails(kStatementsFailures); }
TEST(ChatBuiltinsTest, WhitespaceControlAndLiteralsLexAsJinjaDoes) {
  expect_renders(kSyntaxRenders);
}
TEST(ChatBuiltinsTest, MalformedTemplatesFailNamingThePosition) { expect_fails(kSyntaxFailures); }

// Regressions: each of these rendered differently from Jinja before.
TEST(ChatBuiltinsTest, LoopCycleIsCallable) {
  // The loop dict's cycle() was looked up as a dict method: UNSUPPORTED.
  const RenderCase cases[] = {
      {"{% for i in range(4) %}{{ loop.cycle('x', 'y', 'z') }}{% endfor %}", "", "xyzx"}};
  expect_renders(cases);
}

TEST(ChatBuiltinsTest, DictBuildsFromKeywordArguments) {
  // dict(a=1) refused every keyword argument.
  const RenderCase cases[] = {{"{{ dict(a=1, b=[2]) | tojson }}", "", "{\"a\": 1, \"b\": [2]}"}};
  expect_renders(cases);
}

TEST(ChatBuiltinsTest, NumberFiltersReadNoHexadecimal) {
  // strtod read "0x10" as 16; Python's int() and float() refuse it.
  const RenderCase cases[] = {
      {"{{ '0x10' | int }}|{{ '0x10' | float }}|{{ '0x10' | int(base=16) }}", "", "0|0.0|16"}};
  expect_renders(cases);
}

TEST(ChatBuiltinsTest, SplitWithMaxsplitKeepsTheRestAsItIs) {
  // The rest lost its trailing (rsplit: leading) whitespace, and a maxsplit
  // one short of the number of words split them all.
  const RenderCase cases[] = {
      {"{{ ' a b c '.split(None, 1) | tojson }}|{{ ' a b c '.rsplit(None, 1) | tojson }}", "",
       "[\"a\", \"b c \"]|[\" a b\", \"c\"]"},
      {"{{ ' a b '.split(None, 1) | tojson }}|{{ ' a '.split(None, 0) | tojson }}", "",
       "[\"a\", \"b \"]|[\"a \"]"}};
  expect_renders(cases);
}

TEST(ChatBuiltinsTest, RawStripsOnlyItsBodyAndAFinalCrLfGoes) {
  // {% raw -%} stripped the text after {% endraw %}, not the body; a final
  // "\r\n" left its "\r".
  const RenderCase cases[] = {{"{% raw -%}  x{% endraw %}  y", "", "x  y"},
                              {"{% if 1 %}x{% endif %}\r\n", "", "x"}};
  expect_renders(cases);
}

}  // namespace
}  // namespace pvllm::chat
