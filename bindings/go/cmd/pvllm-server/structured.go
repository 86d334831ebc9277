package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"
	"strings"

	"pvllm.dev/pvllm/pvllm"
)

// constraintFields are the structured-output fields both generation
// endpoints honour: OpenAI's response_format, and vLLM's guided_regex,
// guided_choice and guided_grammar. A request sets at most one of them
// (response_format {"type":"text"} sets none).
var constraintFields = []string{"response_format", "guided_regex", "guided_choice", "guided_grammar"}

// parseConstraint reads the structured-output fields into g: the
// constraint, and the field that set it (what a refusal of the constraint
// by the library names).
func parseConstraint(b body, g *generationRequest) *apiError {
	for _, name := range constraintFields {
		if !b.has(name) {
			continue
		}
		var c pvllm.Constraint
		param := name
		var aerr *apiError
		switch name {
		case "response_format":
			c, param, aerr = parseResponseFormat(b[name])
		case "guided_regex", "guided_grammar":
			var text string
			if _, aerr = b.decode(name, &text); aerr == nil {
				if name == "guided_regex" {
					c = pvllm.Regex(text)
				} else {
					c = pvllm.Grammar(text)
				}
			}
		case "guided_choice":
			var choices []string
			if _, aerr = b.decode(name, &choices); aerr == nil {
				if len(choices) == 0 {
					aerr = invalidRequest(name, "'%s' must be a non-empty array of strings", name)
				}
				c = pvllm.Choice(choices...)
			}
		}
		if aerr != nil {
			return aerr
		}
		if c.Kind == pvllm.ConstraintNone {
			continue
		}
		if g.constraintField != "" {
			return invalidRequest(name, "'%s' and '%s' both constrain the output; "+
				"send at most one", strings.SplitN(g.constraintField, ".", 2)[0], name)
		}
		g.params.Constraint = c
		g.constraintField = param
	}
	return nil
}

// parseResponseFormat reads OpenAI's response_format: {"type":"text"} (no
// constraint), {"type":"json_object"}, or {"type":"json_schema",
// "json_schema":{"name":..., "description":..., "schema":{...},
// "strict":...}}. It returns the constraint and the field that names the
// schema (for the library's refusals of it).
func parseResponseFormat(raw json.RawMessage) (pvllm.Constraint, string, *apiError) {
	const field = "response_format"
	var none pvllm.Constraint
	var rf map[string]json.RawMessage
	if err := json.Unmarshal(raw, &rf); err != nil {
		return none, "", fieldError(field, err)
	}
	var kind string
	if ok, err := body(rf).decode("type", &kind); err != nil {
		return none, "", renamed(err, "type", field+".type")
	} else if !ok {
		return none, "", invalidRequest(field+".type", "'%s.type' is required: \"text\", "+
			"\"json_object\" or \"json_schema\"", field)
	}
	allowed := map[string]bool{"type": true}
	if kind == "json_schema" {
		allowed["json_schema"] = true
	}
	if aerr := onlyFields(rf, allowed, field); aerr != nil {
		return none, "", aerr
	}
	switch kind {
	case "text":
		return none, "", nil
	case "json_object":
		return pvllm.JSONObject(), field, nil
	case "json_schema":
	default:
		return none, "", withCode(invalidRequest(field+".type", "'%s.type' is '%s'; this server "+
			"supports \"text\", \"json_object\" and \"json_schema\"", field, kind), "unsupported_parameter")
	}
	const js = field + ".json_schema"
	var spec map[string]json.RawMessage
	if ok, err := body(rf).decode("json_schema", &spec); err != nil {
		return none, "", renamed(err, "json_schema", js)
	} else if !ok {
		return none, "", invalidRequest(js, "'%s' is required when '%s.type' is \"json_schema\"",
			js, field)
	}
	if aerr := onlyFields(spec, map[string]bool{"name": true, "description": true, "schema": true,
		"strict": true}, js); aerr != nil {
		return none, "", aerr
	}
	var name, description string
	var strict bool
	for _, f := range []struct {
		name string
		dst  interface{}
	}{{"name", &name}, {"description", &description}, {"strict", &strict}} {
		if _, err := body(spec).decode(f.name, f.dst); err != nil {
			return none, "", renamed(err, f.name, js+"."+f.name)
		}
	}
	if name == "" {
		return none, "", invalidRequest(js+".name", "'%s.name' must be a non-empty string", js)
	}
	// The schema as the client wrote it, compacted: its properties keep
	// their order, which is the order the output writes them in.
	const schemaField = js + ".schema"
	if !body(spec).has("schema") {
		return none, "", invalidRequest(schemaField, "'%s' is required", schemaField)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(spec["schema"], &obj); err != nil {
		return none, "", renamed(fieldError("schema", err), "schema", schemaField)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, spec["schema"]); err != nil {
		return none, "", invalidRequest(schemaField, "'%s' is not valid JSON: %v", schemaField, err)
	}
	return pvllm.JSONSchema(compact.String()), schemaField, nil
}

// onlyFields refuses the first member of an object (in name order) that
// allowed lacks, naming it as parent.member.
func onlyFields(obj map[string]json.RawMessage, allowed map[string]bool, parent string) *apiError {
	names := make([]string, 0, len(obj))
	for name := range obj {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !allowed[name] {
			return withCode(invalidRequest(parent+"."+name,
				"Unrecognized request argument supplied: %s.%s", parent, name), "unsupported_parameter")
		}
	}
	return nil
}

// renamed makes a field's error name it by its full path.
func renamed(e *apiError, short, full string) *apiError {
	e.Param = strPtr(full)
	e.Message = strings.Replace(e.Message, "'"+short+"'", "'"+full+"'", 1)
	return e
}

// constraintPrefixes begin the library's messages about a constraint it
// cannot compile (pvllm_submit: INVALID_ARGUMENT naming the place,
// UNSUPPORTED naming the feature).
var constraintPrefixes = []string{"json schema:", "grammar:", "regex:", "choice:", "constraint:",
	"sampling params: constraint"}

// constraintError maps the library's refusal of a request's constraint to
// a 400 naming field, with the library's message; nil when err is not one.
func constraintError(err error, field string) *apiError {
	var perr *pvllm.Error
	if field == "" || !errors.As(err, &perr) ||
		(perr.Status != pvllm.StatusInvalidArgument && perr.Status != pvllm.StatusUnsupported) {
		return nil
	}
	about := strings.Contains(perr.Message, "constraint")
	for _, p := range constraintPrefixes {
		about = about || strings.HasPrefix(perr.Message, p)
	}
	if !about {
		return nil
	}
	e := invalidRequest(field, "%s", perr.Message)
	if perr.Status == pvllm.StatusUnsupported {
		e = withCode(e, "unsupported_parameter")
	}
	return e
}
