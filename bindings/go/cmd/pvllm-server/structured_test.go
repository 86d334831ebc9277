package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"pvllm.dev/pvllm/pvllm"
)

// The fields of response_format and the guided_* extensions, as parsed:
// the constraint each sets and the field a refusal names.
func TestParseConstraint(t *testing.T) {
	schema := `{"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}}}`
	ok := []struct {
		body  string
		want  pvllm.Constraint
		field string
	}{
		{`{}`, pvllm.Constraint{}, ""},
		{`{"response_format":null}`, pvllm.Constraint{}, ""},
		{`{"response_format":{"type":"text"}}`, pvllm.Constraint{}, ""},
		{`{"response_format":{"type":"json_object"}}`, pvllm.JSONObject(), "response_format"},
		// The schema keeps the client's key order, compacted.
		{`{"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,
			"description":"d","schema":` + strings.ReplaceAll(schema, ",", ",\n ") + `}}}`,
			pvllm.JSONSchema(schema), "response_format.json_schema.schema"},
		{`{"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":null,"schema":{}}}}`,
			pvllm.JSONSchema(`{}`), "response_format.json_schema.schema"},
		{`{"guided_regex":"[a-z]+"}`, pvllm.Regex("[a-z]+"), "guided_regex"},
		{`{"guided_grammar":"root ::= \"a\""}`, pvllm.Grammar(`root ::= "a"`), "guided_grammar"},
		{`{"guided_choice":["yes","no"]}`, pvllm.Choice("yes", "no"), "guided_choice"},
		{`{"response_format":{"type":"text"},"guided_choice":["yes"]}`, pvllm.Choice("yes"),
			"guided_choice"},
	}
	for _, c := range ok {
		var b body
		if err := json.Unmarshal([]byte(c.body), &b); err != nil {
			t.Fatal(err)
		}
		g := generationRequest{}
		if aerr := parseConstraint(b, &g); aerr != nil {
			t.Errorf("%s: %v", c.body, aerr.Message)
			continue
		}
		if jsonString(g.params.Constraint) != jsonString(c.want) || g.constraintField != c.field {
			t.Errorf("%s: %+v from %q, want %+v from %q", c.body, g.params.Constraint,
				g.constraintField, c.want, c.field)
		}
	}
}

// Refusals before the engine, and the library's refusals of a schema,
// grammar or expression, as 400s naming the field.
func TestConstraintRefusals(t *testing.T) {
	f := newFixture(t)
	const msgs = `"messages":[{"role":"user","content":"Hi"}],"max_tokens":4`
	rf := func(v string) string { return `{` + msgs + `,"response_format":` + v + `}` }
	js := func(v string) string { return rf(`{"type":"json_schema","json_schema":` + v + `}`) }
	cases := []struct {
		body    string
		param   string
		code    interface{}
		message string // a part of the message
	}{
		{rf(`"json"`), "response_format", nil, "an object"},
		{rf(`{}`), "response_format.type", nil, "required"},
		{rf(`{"type":5}`), "response_format.type", nil, "'response_format.type' must be a string"},
		{rf(`{"type":"xml"}`), "response_format.type", "unsupported_parameter", "xml"},
		{rf(`{"type":"json_object","schema":{}}`), "response_format.schema", "unsupported_parameter", ""},
		{rf(`{"type":"text","json_schema":{}}`), "response_format.json_schema", "unsupported_parameter", ""},
		{rf(`{"type":"json_schema"}`), "response_format.json_schema", nil, "required"},
		{js(`[]`), "response_format.json_schema", nil, "an object"},
		{js(`{"schema":{}}`), "response_format.json_schema.name", nil, "name"},
		{js(`{"name":7,"schema":{}}`), "response_format.json_schema.name", nil, "a string"},
		{js(`{"name":"x"}`), "response_format.json_schema.schema", nil, "required"},
		{js(`{"name":"x","schema":null}`), "response_format.json_schema.schema", nil, "required"},
		{js(`{"name":"x","schema":"{}"}`), "response_format.json_schema.schema", nil, "an object"},
		{js(`{"name":"x","schema":{},"strict":"yes"}`), "response_format.json_schema.strict", nil, "a boolean"},
		{js(`{"name":"x","schema":{},"format":"y"}`), "response_format.json_schema.format",
			"unsupported_parameter", ""},
		// The library's refusals: where a schema goes wrong, what it lacks.
		{js(`{"name":"x","schema":{"type":"object","properties":{"a":{"type":"strin"}}}}`),
			"response_format.json_schema.schema", nil, "/properties/a"},
		{js(`{"name":"x","schema":{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}}`),
			"response_format.json_schema.schema", "unsupported_parameter", `unsupported keyword "uniqueItems"`},
		{`{` + msgs + `,"guided_regex":"(ab"}`, "guided_regex", nil, "regex:"},
		{`{` + msgs + `,"guided_regex":"a\u0000b"}`, "guided_regex", nil, "NUL"},
		{`{` + msgs + `,"guided_regex":5}`, "guided_regex", nil, "a string"},
		{`{` + msgs + `,"guided_grammar":"root ::= x"}`, "guided_grammar", nil, "grammar:"},
		{`{` + msgs + `,"guided_choice":[]}`, "guided_choice", nil, "non-empty"},
		{`{` + msgs + `,"guided_choice":["a",""]}`, "guided_choice", nil, "choice 1 is empty"},
		{`{` + msgs + `,"guided_choice":"a"}`, "guided_choice", nil, "an array"},
		{`{` + msgs + `,"response_format":{"type":"json_object"},"guided_regex":"a"}`, "guided_regex",
			nil, "'response_format' and 'guided_regex'"},
	}
	for _, c := range cases {
		for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
			b := c.body
			if path == "/v1/completions" {
				b = strings.Replace(b, `"messages":[{"role":"user","content":"Hi"}]`, `"prompt":"Hi"`, 1)
			}
			status, resp := f.post(t, path, b)
			msg := apiErr(t, path+" "+b, status, resp, 400, c.param, c.code)
			if !strings.Contains(msg, c.message) {
				t.Errorf("%s %s: message %q lacks %q", path, b, msg, c.message)
			}
		}
	}
	if !f.idle() {
		t.Error("refused calls left work in the engine")
	}
}

// newStoriesFixture serves the repository's stories260K with a chat
// template that joins the messages' contents.
func newStoriesFixture(t *testing.T) *fixture {
	t.Helper()
	src := filepath.Join("..", "..", "..", "..", "models", "stories260K")
	dir := t.TempDir()
	for _, name := range []string{"stories260K.bin", "tok512.model"} {
		in, err := os.Open(filepath.Join(src, name))
		if err != nil {
			t.Fatalf("the repository's stories260K is missing: %v", err)
		}
		out, err := os.Create(filepath.Join(dir, name))
		if err == nil {
			_, err = io.Copy(out, in)
		}
		in.Close()
		if err != nil || out.Close() != nil {
			t.Fatal(err)
		}
	}
	tmpl := "{% for m in messages %}{{ m.content }}{% endfor %}"
	if err := os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	return newFixtureFor(t, filepath.Join(dir, "stories260K.bin"), "stories260K")
}

// Constrained generation on a real model through both endpoints: JSON
// that validates against the schema, streamed as answered; choices; a
// regular expression; the start of a JSON object.
func TestStories260KResponseFormat(t *testing.T) {
	f := newStoriesFixture(t)
	const msgs = `"messages":[{"role":"user","content":"Once upon a time"}]`
	schema := `{"type":"object","properties":{"name":{"type":"string","maxLength":8},` +
		`"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false}`
	body := `{` + msgs + `,"max_tokens":100,"n":3,"seed":5,"response_format":{"type":"json_schema",` +
		`"json_schema":{"name":"person","strict":true,"schema":` + schema + `}}}`
	c := f.chat(t, body)
	if len(c.Choices) != 3 {
		t.Fatalf("%d choices", len(c.Choices))
	}
	for _, ch := range c.Choices {
		text := ch.Message.Content
		var got struct {
			Name *string      `json:"name"`
			Age  *json.Number `json:"age"`
		}
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		dec.UseNumber()
		if err := dec.Decode(&got); err != nil || dec.More() {
			t.Errorf("%q: %v", text, err)
			continue
		}
		if got.Name == nil || got.Age == nil || len([]rune(*got.Name)) > 8 ||
			!regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`).MatchString(got.Age.String()) {
			t.Errorf("%q does not validate", text)
		}
		if ch.FinishReason == nil || *ch.FinishReason != "stop" {
			t.Errorf("%q: finish %v", text, ch.FinishReason)
		}
	}
	chunks, done := f.stream(t, "/v1/chat/completions",
		strings.Replace(body, `"n":3`, `"n":3,"stream":true`, 1))
	streamed := map[int]string{}
	for _, ch := range chunks {
		for _, x := range ch["choices"].([]interface{}) {
			x := x.(map[string]interface{})
			if s, ok := x["delta"].(map[string]interface{})["content"].(string); ok {
				streamed[int(x["index"].(float64))] += s
			}
		}
	}
	for i, ch := range c.Choices {
		if !done || streamed[i] != ch.Message.Content {
			t.Errorf("choice %d streamed %q, answered %q", i, streamed[i], ch.Message.Content)
		}
	}

	choices := []string{"yes", "no", "maybe later"}
	comp := f.complete(t, `{"prompt":"Once upon a time","max_tokens":8,"n":4,"seed":1,`+
		`"guided_choice":["yes","no","maybe later"]}`)
	for _, ch := range comp.Choices {
		if !contains(choices, ch.Text) || ch.FinishReason == nil || *ch.FinishReason != "stop" {
			t.Errorf("%q (finish %v) is not one of %q", ch.Text, ch.FinishReason, choices)
		}
	}
	pattern := `(Tom|Lily) (is|was) [a-z]{2,8}\.`
	comp = f.complete(t, `{"prompt":"Once upon a time","max_tokens":30,"n":4,"seed":1,`+
		`"guided_regex":`+jsonString(pattern)+`}`)
	re := regexp.MustCompile(`^(?:` + pattern + `)$`)
	for _, ch := range comp.Choices {
		if !re.MatchString(ch.Text) || ch.FinishReason == nil || *ch.FinishReason != "stop" {
			t.Errorf("%q (finish %v) does not match %s", ch.Text, ch.FinishReason, re)
		}
	}
	// A story model rarely closes a JSON object: its start, and a valid
	// prefix of one, is what 24 tokens show.
	obj := f.chat(t, `{`+msgs+`,"max_tokens":24,"response_format":{"type":"json_object"}}`)
	text := obj.Choices[0].Message.Content
	if !strings.HasPrefix(text, `{"`) || !jsonPrefix(text) {
		t.Errorf("json_object: %q is not the start of a JSON object", text)
	}
	if !f.idle() {
		t.Error("the calls left work in the engine")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// jsonPrefix reports whether text is a valid beginning of a JSON value:
// its tokens read without a syntax error up to the end of the input.
func jsonPrefix(text string) bool {
	dec := json.NewDecoder(strings.NewReader(text))
	for {
		_, err := dec.Token()
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return true
		}
		if err != nil {
			_, syntax := err.(*json.SyntaxError)
			return !syntax && strings.Contains(err.Error(), "unexpected EOF")
		}
	}
}
