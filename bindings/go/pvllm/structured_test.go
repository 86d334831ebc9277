package pvllm_test

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"pvllm.dev/pvllm/pvllm"
)

// stories260K is the repository's trained checkpoint: constrained text
// from a real model.
func stories260K(t *testing.T) *pvllm.Engine {
	t.Helper()
	path := filepath.Join("..", "..", "..", "models", "stories260K", "stories260K.bin")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("the repository's stories260K is missing: %v", err)
	}
	eng, err := pvllm.New(pvllm.Config{ModelPath: path, NumThreads: 1, KVCacheBytes: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// constrained generates greedily and with n seeded samples at temperature
// 1, and returns every sample, each checked to have ended with FinishStop.
func constrained(t *testing.T, eng *pvllm.Engine, c pvllm.Constraint) []string {
	t.Helper()
	var texts []string
	greedy := pvllm.GreedySamplingParams(200)
	greedy.Constraint = c
	sampled := pvllm.DefaultSamplingParams()
	sampled.MaxTokens = 200
	sampled.N = 4
	seed := uint64(7)
	sampled.Seed = &seed
	sampled.Constraint = c
	for _, p := range []pvllm.SamplingParams{greedy, sampled} {
		res, err := eng.Generate(testContext(t), "Once upon a time", p)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range res.Samples {
			if s.FinishReason != pvllm.FinishStop {
				t.Errorf("finish %v, want stop: %q", s.FinishReason, s.Text)
			}
			texts = append(texts, s.Text)
		}
	}
	if len(texts) != 1+sampled.N {
		t.Fatalf("%d samples, want %d", len(texts), 1+sampled.N)
	}
	return texts
}

func TestConstraintJSONSchema(t *testing.T) {
	eng := stories260K(t)
	schema := `{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":8},
		"age":{"type":"integer"},"mood":{"enum":["happy","sad"]}},
		"required":["name","age","mood"],"additionalProperties":false}`
	for _, text := range constrained(t, eng, pvllm.JSONSchema(schema)) {
		var got struct {
			Name *string      `json:"name"`
			Age  *json.Number `json:"age"`
			Mood *string      `json:"mood"`
		}
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil {
			t.Errorf("%q: %v", text, err)
			continue
		}
		if dec.More() {
			t.Errorf("%q: more than one JSON value", text)
		}
		if got.Name == nil || got.Age == nil || got.Mood == nil {
			t.Errorf("%q: a required property is missing", text)
			continue
		}
		if n := len([]rune(*got.Name)); n < 1 || n > 8 {
			t.Errorf("%q: name of %d characters", text, n)
		}
		if !regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`).MatchString(got.Age.String()) {
			t.Errorf("%q: age %s is not an integer", text, *got.Age)
		}
		if *got.Mood != "happy" && *got.Mood != "sad" {
			t.Errorf("%q: mood %q", text, *got.Mood)
		}
	}
}

func TestConstraintJSONObject(t *testing.T) {
	eng := stories260K(t)
	p := pvllm.GreedySamplingParams(60)
	p.Constraint = pvllm.JSONObject()
	res, err := eng.Generate(testContext(t), "Once upon a time", p)
	if err != nil {
		t.Fatal(err)
	}
	text := res.Text()
	if !strings.HasPrefix(text, "{") {
		t.Fatalf("%q does not start a JSON object", text)
	}
	// A story model rarely closes the object: a text cut short by
	// MaxTokens is a prefix of one, whose tokens read up to the end.
	if res.Samples[0].FinishReason == pvllm.FinishStop {
		var v map[string]interface{}
		if err := json.Unmarshal([]byte(text), &v); err != nil {
			t.Errorf("%q: %v", text, err)
		}
		return
	}
	dec := json.NewDecoder(strings.NewReader(text))
	for {
		_, err := dec.Token()
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			t.Fatalf("%q is not the start of a JSON object: %v", text, err)
		}
	}
}

func TestConstraintChoice(t *testing.T) {
	eng := stories260K(t)
	choices := []string{"yes", "no", "maybe later", "ça va"}
	for _, text := range constrained(t, eng, pvllm.Choice(choices...)) {
		ok := false
		for _, c := range choices {
			ok = ok || text == c
		}
		if !ok {
			t.Errorf("%q is not one of %q", text, choices)
		}
	}
}

func TestConstraintRegex(t *testing.T) {
	eng := stories260K(t)
	pattern := `(Tom|Lily|Sue) (is|was) ([a-z]{2,8} ){0,3}[a-z]{2,8}\.`
	re := regexp.MustCompile(`^(?:` + pattern + `)$`)
	for _, text := range constrained(t, eng, pvllm.Regex(pattern)) {
		if !re.MatchString(text) {
			t.Errorf("%q does not match %s", text, re)
		}
	}
}

func TestConstraintGrammar(t *testing.T) {
	eng := stories260K(t)
	grammar := `root ::= "The " animal " is " ("big" | "small") "."
animal ::= "cat" | "dog"`
	re := regexp.MustCompile(`^The (cat|dog) is (big|small)\.$`)
	for _, text := range constrained(t, eng, pvllm.Grammar(grammar)) {
		if !re.MatchString(text) {
			t.Errorf("%q does not match the grammar", text)
		}
	}
}

// Refusals come from Submit: a malformed constraint is invalid, naming
// where it goes wrong; a feature pvllm lacks is unsupported, named.
func TestConstraintRefusals(t *testing.T) {
	eng := stories260K(t)
	cases := []struct {
		c    pvllm.Constraint
		want pvllm.Status
		msg  []string // substrings of the message
	}{
		{pvllm.JSONSchema(`{"type": "object",`), pvllm.StatusInvalidArgument,
			[]string{"json schema", "malformed JSON at byte"}},
		{pvllm.JSONSchema(`{"type":"object","properties":{"a":{"type":"strin"}}}`),
			pvllm.StatusInvalidArgument, []string{"json schema", `"type"`, "/properties/a"}},
		{pvllm.JSONSchema(`{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}`),
			pvllm.StatusUnsupported, []string{`unsupported keyword "uniqueItems"`, "/properties/a"}},
		{pvllm.Constraint{Kind: pvllm.ConstraintRegex, Text: "a+",
			JSON: pvllm.JSONOptions{Whitespace: true}},
			pvllm.StatusInvalidArgument, []string{"constraint_flags"}},
		{pvllm.Constraint{JSON: pvllm.JSONOptions{UnlistedProperties: true}},
			pvllm.StatusInvalidArgument, []string{"constraint_flags"}},
		{pvllm.Constraint{Kind: pvllm.ConstraintGrammar, Text: `root ::= "a"`,
			JSON: pvllm.JSONOptions{AnyOrder: true}},
			pvllm.StatusInvalidArgument, []string{"constraint_flags"}},
		{pvllm.Regex(`(ab`), pvllm.StatusInvalidArgument, []string{"regex:"}},
		{pvllm.Grammar(`root ::= "a" other`), pvllm.StatusInvalidArgument,
			[]string{"grammar:", "'other'"}},
		{pvllm.Choice(), pvllm.StatusInvalidArgument, []string{"choice", "empty"}},
		{pvllm.Choice("yes", ""), pvllm.StatusInvalidArgument, []string{"choice 1 is empty"}},
		{pvllm.Regex("a\x00b"), pvllm.StatusInvalidArgument, []string{"NUL"}},
		{pvllm.Choice("a", "b\x00"), pvllm.StatusInvalidArgument, []string{"choice 1", "NUL"}},
		{pvllm.Constraint{Kind: 9}, pvllm.StatusInvalidArgument, []string{"constraint_kind"}},
	}
	for _, c := range cases {
		p := pvllm.GreedySamplingParams(8)
		p.Constraint = c.c
		_, err := eng.Submit(testContext(t), pvllm.Request{Prompt: "Once", Params: p})
		var perr *pvllm.Error
		if !errors.As(err, &perr) || perr.Status != c.want {
			t.Errorf("%+v: %v, want %v", c.c, err, c.want)
			continue
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%+v: errors.Is(%v, %v) is false", c.c, err, c.want)
		}
		for _, m := range c.msg {
			if !strings.Contains(perr.Message, m) {
				t.Errorf("%+v: message %q lacks %q", c.c, perr.Message, m)
			}
		}
	}
	// Beam search cannot follow a constraint.
	p := pvllm.GreedySamplingParams(8)
	p.BeamWidth = 2
	p.Constraint = pvllm.Choice("yes", "no")
	if _, err := eng.Submit(testContext(t), pvllm.Request{Prompt: "Once", Params: p}); !errors.Is(err, pvllm.StatusUnsupported) {
		t.Errorf("a constraint with beam search: %v, want UNSUPPORTED", err)
	}
	// The engine still serves.
	if _, err := eng.Generate(testContext(t), "Once", pvllm.GreedySamplingParams(4)); err != nil {
		t.Fatal(err)
	}
}

// hasWhitespace reports whether JSON text has whitespace between its
// tokens (outside strings).
func hasWhitespace(text string) bool {
	inString := false
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return true
		}
	}
	return false
}

// jsonSamples generates seeded samples at temperature 1 under c and
// returns their texts; those that ended with FinishStop must parse as an
// object.
func jsonSamples(t *testing.T, eng *pvllm.Engine, c pvllm.Constraint) []string {
	t.Helper()
	p := pvllm.DefaultSamplingParams()
	p.MaxTokens = 80
	p.N = 8
	seed := uint64(11)
	p.Seed = &seed
	p.Constraint = c
	res, err := eng.Generate(testContext(t), "Once upon a time", p)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, s := range res.Samples {
		if s.FinishReason == pvllm.FinishStop {
			var v map[string]interface{}
			if err := json.Unmarshal([]byte(s.Text), &v); err != nil {
				t.Errorf("%q: %v", s.Text, err)
			}
		}
		texts = append(texts, s.Text)
	}
	return texts
}

// The JSON options (pvllm.h since 0.11) reach the grammar: whitespace and
// unlisted members come only when asked for. An unlisted member's name is
// free text the model may not close within MaxTokens, so a member counts
// once the comma after the listed one is there.
func TestConstraintJSONOptions(t *testing.T) {
	eng := stories260K(t)
	schema := `{"type":"object","properties":{"a":{"const":1}},"required":["a"],
		"additionalProperties":{"type":"boolean"}}`
	count := func(c pvllm.Constraint) (spaced, unlisted int) {
		for _, text := range jsonSamples(t, eng, c) {
			if hasWhitespace(text) {
				spaced++
			}
			if strings.HasPrefix(text, `{"a":1,`) {
				unlisted++
			}
		}
		return spaced, unlisted
	}
	compact := pvllm.JSONSchema(schema)
	if s, u := count(compact); s != 0 || u != 0 {
		t.Errorf("no options: %d spaced, %d with unlisted members; want none", s, u)
	}
	spaced := pvllm.JSONSchema(schema)
	spaced.JSON.Whitespace = true
	if s, _ := count(spaced); s == 0 {
		t.Errorf("Whitespace: no sample has whitespace")
	}
	open := pvllm.JSONSchema(schema)
	open.JSON.UnlistedProperties = true
	if s, u := count(open); s != 0 || u == 0 {
		t.Errorf("UnlistedProperties: %d spaced, %d with unlisted members; want none, some", s, u)
	}
	object := pvllm.JSONObject()
	object.JSON = pvllm.JSONOptions{Whitespace: true}
	if s, _ := count(object); s == 0 {
		t.Errorf("JSONObject with Whitespace: no sample has whitespace")
	}
}

// Each JSON option is its pvllm_constraint_flag bit.
func TestJSONOptionsFlags(t *testing.T) {
	cases := []struct {
		o    pvllm.JSONOptions
		want uint32
	}{
		{pvllm.JSONOptions{}, 0},
		{pvllm.JSONOptions{Whitespace: true}, 1},
		{pvllm.JSONOptions{UnlistedProperties: true}, 2},
		{pvllm.JSONOptions{AnyOrder: true}, 4},
		{pvllm.JSONOptions{Whitespace: true, UnlistedProperties: true, AnyOrder: true}, 7},
	}
	for _, c := range cases {
		if got := pvllm.JSONFlags(c.o); got != c.want {
			t.Errorf("%+v: flags %d, want %d", c.o, got, c.want)
		}
	}
}

// AnyOrder (pvllm.h since 0.11) is taken by both JSON kinds; whichever
// order the grammar lets the members come in, what ends is what the schema
// allows: both members, each once, compact.
func TestConstraintJSONAnyOrder(t *testing.T) {
	eng := stories260K(t)
	c := pvllm.JSONSchema(`{"type":"object","properties":{"a":{"const":1},"b":{"const":true}},
		"required":["a","b"],"additionalProperties":false}`)
	c.JSON.AnyOrder = true
	ended := 0
	for _, text := range jsonSamples(t, eng, c) {
		if hasWhitespace(text) {
			t.Errorf("%q has whitespace", text)
		}
		var v map[string]interface{}
		if json.Unmarshal([]byte(text), &v) != nil {
			continue // cut short by MaxTokens
		}
		ended++
		if len(v) != 2 || v["a"] != 1.0 || v["b"] != true {
			t.Errorf("%q: want the members a: 1 and b: true", text)
		}
	}
	if ended == 0 {
		t.Errorf("AnyOrder: no sample ended")
	}
	object := pvllm.JSONObject()
	object.JSON.AnyOrder = true
	for _, text := range jsonSamples(t, eng, object) {
		if hasWhitespace(text) {
			t.Errorf("JSONObject with AnyOrder: %q has whitespace", text)
		}
	}
}
