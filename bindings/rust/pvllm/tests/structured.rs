//! Structured output (libpvllm 0.6) through the safe API, on the trained
//! stories260K checkpoint this repository carries: JSON that parses and has
//! the schema's shape, a choice, a regex and a grammar match, each ending with
//! `FinishReason::Stop`; the JSON options (libpvllm 0.11) letting whitespace
//! and unlisted members in; bad constraints refused at submit with the
//! library's status and where it went wrong.
use std::path::PathBuf;

use pvllm::{Constraint, Engine, EngineConfig, FinishReason, JsonOptions, SamplingParams, Status};

/// models/stories260K/stories260K.bin of this repository, else of
/// $PVLLM_SHARED_DIR.
fn stories260k() -> PathBuf {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../models/stories260K/stories260K.bin");
    if repo.exists() {
        return repo;
    }
    let shared = std::env::var_os("PVLLM_SHARED_DIR")
        .filter(|d| !d.is_empty())
        .map(|d| PathBuf::from(d).join("models/stories260K/stories260K.bin"));
    match shared {
        Some(path) if path.exists() => path,
        _ => panic!(
            "stories260K.bin is neither at {} nor under $PVLLM_SHARED_DIR/models",
            repo.display()
        ),
    }
}

fn engine() -> Engine {
    Engine::new(
        &EngineConfig::new(stories260k())
            .num_threads(1)
            .kv_cache_bytes(16 << 20),
    )
    .expect("engine over stories260K")
}

const PROMPT: &str = "Once upon a time";

const SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 8},
    "age": {"type": "integer"}
  },
  "required": ["name", "age"],
  "additionalProperties": false
}"#;

fn constrained(constraint: Constraint, temperature: f32, seed: u64) -> SamplingParams {
    SamplingParams {
        temperature,
        seed: Some(seed),
        max_tokens: 200,
        ..Default::default()
    }
    .with_constraint(constraint)
}

#[test]
fn json_schema_output_parses_with_the_schemas_keys() {
    let engine = engine();
    for (temperature, seed) in [(0.0, 0), (1.0, 1), (1.0, 2), (1.0, 3)] {
        let params = constrained(
            Constraint::JsonSchema(SCHEMA.to_string()),
            temperature,
            seed,
        );
        let completion = engine.generate(PROMPT, &params).unwrap().remove(0);
        let text = &completion.text;
        assert_eq!(completion.finish_reason, FinishReason::Stop, "{:?}", text);
        let doc: serde_json::Value =
            serde_json::from_str(text).unwrap_or_else(|e| panic!("{:?} is not JSON: {}", text, e));
        let members = doc
            .as_object()
            .unwrap_or_else(|| panic!("{:?} is not an object", text));
        let mut keys: Vec<&str> = members.keys().map(|k| k.as_str()).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["age", "name"], "{:?}", text);
        let name = members["name"]
            .as_str()
            .unwrap_or_else(|| panic!("name is not a string in {:?}", text));
        assert!(name.chars().count() <= 8, "name too long in {:?}", text);
        let age = &members["age"];
        // An integer literal (at most 16 digits) reads back as an i64; one
        // with a fraction or an exponent as a float.
        assert!(age.is_i64(), "age is not an integer in {:?}", text);
        // Compact: the library writes no whitespace between tokens.
        assert!(
            !text.starts_with(' ') && !text.contains("\": "),
            "{:?}",
            text
        );
    }
}

#[test]
fn without_a_constraint_the_same_prompt_is_no_json() {
    // The test above can fail: unconstrained, the model tells a story.
    let completion = engine()
        .generate(PROMPT, &SamplingParams::greedy(40))
        .unwrap()
        .remove(0);
    assert!(
        serde_json::from_str::<serde_json::Value>(&completion.text).is_err(),
        "{:?}",
        completion.text
    );
}

#[test]
fn json_object_starts_an_object() {
    let params = constrained(Constraint::JsonObject, 0.0, 0);
    let completion = engine().generate(PROMPT, &params).unwrap().remove(0);
    let text = &completion.text;
    assert!(text.starts_with('{'), "{:?}", text);
    if completion.finish_reason == FinishReason::Stop {
        assert!(
            serde_json::from_str::<serde_json::Value>(text).map_or(false, |v| v.is_object()),
            "{:?}",
            text
        );
    } else {
        assert_eq!(completion.finish_reason, FinishReason::Length, "{:?}", text);
    }
}

#[test]
fn choice_gives_one_of_the_choices() {
    let choices = ["happy", "sad", "very sleepy"];
    let params = SamplingParams {
        n: 6,
        ..constrained(
            Constraint::Choice(choices.iter().map(|s| s.to_string()).collect()),
            1.0,
            3,
        )
    };
    let completions = engine().generate(PROMPT, &params).unwrap();
    assert_eq!(completions.len(), 6);
    for c in &completions {
        assert!(choices.contains(&c.text.as_str()), "{:?}", c.text);
        assert_eq!(c.finish_reason, FinishReason::Stop, "{:?}", c.text);
    }
}

/// `(Tom|Lily) (is|was) [a-z]{2,8}\.` checked by hand.
fn matches_sentence(text: &str) -> bool {
    let rest = match text
        .strip_prefix("Tom ")
        .or_else(|| text.strip_prefix("Lily "))
    {
        Some(r) => r,
        None => return false,
    };
    let rest = match rest
        .strip_prefix("is ")
        .or_else(|| rest.strip_prefix("was "))
    {
        Some(r) => r,
        None => return false,
    };
    match rest.strip_suffix('.') {
        Some(word) => (2..=8).contains(&word.len()) && word.bytes().all(|b| b.is_ascii_lowercase()),
        None => false,
    }
}

#[test]
fn regex_output_matches() {
    assert!(matches_sentence("Lily was happy."));
    assert!(!matches_sentence("Lily was happy"));
    assert!(!matches_sentence("Lily was a."));
    let engine = engine();
    let pattern = r"(Tom|Lily) (is|was) [a-z]{2,8}\.";
    for (temperature, seed) in [(0.0, 0), (1.0, 1), (1.0, 2), (1.0, 3)] {
        let params = constrained(Constraint::Regex(pattern.to_string()), temperature, seed);
        let completion = engine.generate(PROMPT, &params).unwrap().remove(0);
        assert!(matches_sentence(&completion.text), "{:?}", completion.text);
        assert_eq!(
            completion.finish_reason,
            FinishReason::Stop,
            "{:?}",
            completion.text
        );
    }
}

#[test]
fn grammar_output_matches() {
    let gbnf = "root ::= \"The \" animal \" \" (\"ran\" | \"sat\") \".\"\n\
                animal ::= \"cat\" | \"dog\" | \"big \" animal\n";
    let params = constrained(Constraint::Grammar(gbnf.to_string()), 1.0, 9);
    let completion = engine().generate(PROMPT, &params).unwrap().remove(0);
    let text = completion.text.as_str();
    let mut rest = text
        .strip_prefix("The ")
        .unwrap_or_else(|| panic!("{:?}", text));
    while let Some(r) = rest.strip_prefix("big ") {
        rest = r;
    }
    assert!(
        ["cat ran.", "cat sat.", "dog ran.", "dog sat."].contains(&rest),
        "{:?}",
        text
    );
    assert_eq!(completion.finish_reason, FinishReason::Stop, "{:?}", text);
}

fn refused(constraint: Constraint) -> pvllm::Error {
    let params = SamplingParams::greedy(8).with_constraint(constraint);
    match engine().submit(&pvllm::Request::text("Hi").with_sampling(params)) {
        Ok(id) => panic!("the bad constraint was accepted as request {:?}", id),
        Err(e) => e,
    }
}

#[test]
fn malformed_constraints_are_invalid_arguments_naming_where() {
    let cases = [
        (
            Constraint::JsonSchema(r#"{"type": "object","#.to_string()),
            "byte",
        ),
        (
            Constraint::Grammar("root ::= \"a\" (".to_string()),
            "column",
        ),
        (Constraint::Regex("(ab".to_string()), "offset"),
        (Constraint::Choice(Vec::new()), "empty"),
    ];
    for (constraint, needle) in cases {
        let err = refused(constraint.clone());
        assert_eq!(
            err.status(),
            Status::InvalidArgument,
            "{:?}: {:?}",
            constraint,
            err
        );
        assert!(
            err.message().contains(needle),
            "{:?}: {:?} does not say {:?}",
            constraint,
            err,
            needle
        );
    }
    // The malformed schema's position is its end, where a key should come.
    let schema = r#"{"type": "object","#;
    let err = refused(Constraint::JsonSchema(schema.to_string()));
    let at_end = format!("byte {}", schema.len());
    assert!(err.message().contains(&at_end), "{:?}", err);
}

#[test]
fn unsupported_keywords_are_unsupported_naming_them() {
    let err = refused(Constraint::JsonSchema(
        r#"{"type": "array", "uniqueItems": true}"#.to_string(),
    ));
    assert_eq!(err.status(), Status::Unsupported, "{:?}", err);
    assert!(err.message().contains("\"uniqueItems\""), "{:?}", err);
    // Nor with beam search.
    let params = SamplingParams {
        beam_width: 2,
        ..SamplingParams::greedy(8).with_constraint(Constraint::Regex("a+".to_string()))
    };
    let err = engine()
        .submit(&pvllm::Request::text("Hi").with_sampling(params))
        .unwrap_err();
    assert_eq!(err.status(), Status::Unsupported, "{:?}", err);
}

#[test]
fn interior_nul_bytes_are_refused_before_the_library() {
    for constraint in [
        Constraint::JsonSchema("{\"type\": \0\"object\"}".to_string()),
        Constraint::Grammar("root ::= \"a\0\"".to_string()),
        Constraint::Regex("a\0b".to_string()),
        Constraint::Choice(vec!["yes".to_string(), "n\0o".to_string()]),
    ] {
        let err = refused(constraint.clone());
        assert_eq!(
            err.status(),
            Status::InvalidArgument,
            "{:?}: {:?}",
            constraint,
            err
        );
        assert!(err.message().contains("NUL"), "{:?}: {:?}", constraint, err);
    }
}

/// Whether JSON text has whitespace between its tokens (outside strings).
fn has_whitespace(json: &str) -> bool {
    let mut in_string = false;
    let mut escaped = false;
    for c in json.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
        } else if matches!(c, ' ' | '\t' | '\n' | '\r') {
            return true;
        }
    }
    false
}

/// Seeded samples at temperature 1 under `constraint` and `options`: how many
/// have whitespace between tokens, and how many a member after the listed
/// one (its name is free text the model may not close within max_tokens, so
/// the comma counts). Those that end with `Stop` parse as objects.
fn json_samples(engine: &Engine, constraint: Constraint, options: JsonOptions) -> (u32, u32) {
    let params = SamplingParams {
        temperature: 1.0,
        seed: Some(11),
        max_tokens: 80,
        n: 8,
        ..Default::default()
    }
    .with_constraint(constraint)
    .with_json_options(options);
    let (mut spaced, mut unlisted) = (0, 0);
    for completion in engine.generate(PROMPT, &params).unwrap() {
        let text = &completion.text;
        if completion.finish_reason == FinishReason::Stop {
            let doc: serde_json::Value = serde_json::from_str(text)
                .unwrap_or_else(|e| panic!("{:?} is not JSON: {}", text, e));
            assert!(doc.is_object(), "{:?}", text);
        }
        spaced += u32::from(has_whitespace(text));
        unlisted += u32::from(text.starts_with(r#"{"a":1,"#));
    }
    (spaced, unlisted)
}

#[test]
fn json_options_let_whitespace_and_unlisted_members_in() {
    let engine = engine();
    let schema = r#"{"type": "object", "properties": {"a": {"const": 1}},
        "required": ["a"], "additionalProperties": {"type": "boolean"}}"#;
    let json_schema = || Constraint::JsonSchema(schema.to_string());
    assert_eq!(
        json_samples(&engine, json_schema(), JsonOptions::default()),
        (0, 0),
        "no options"
    );
    let whitespace = JsonOptions {
        whitespace: true,
        ..Default::default()
    };
    let (spaced, _) = json_samples(&engine, json_schema(), whitespace);
    assert!(spaced > 0, "whitespace: no sample has any");
    let unlisted = JsonOptions {
        unlisted_properties: true,
        ..Default::default()
    };
    let (spaced, extra) = json_samples(&engine, json_schema(), unlisted);
    assert_eq!(spaced, 0, "unlisted_properties");
    assert!(
        extra > 0,
        "unlisted_properties: no sample has an unlisted member"
    );
    let (spaced, _) = json_samples(&engine, Constraint::JsonObject, whitespace);
    assert!(spaced > 0, "JsonObject with whitespace: no sample has any");
}

#[test]
fn json_any_order_is_taken_by_the_json_constraints() {
    // Whichever order the grammar lets the members come in, what ends is
    // what the schema allows: both members, each once, compact.
    let engine = engine();
    let schema = r#"{"type": "object", "properties": {"a": {"const": 1},
        "b": {"const": true}}, "required": ["a", "b"], "additionalProperties": false}"#;
    let any_order = JsonOptions {
        any_order: true,
        ..Default::default()
    };
    let params = |constraint: Constraint| {
        SamplingParams {
            temperature: 1.0,
            seed: Some(11),
            max_tokens: 60,
            n: 4,
            ..Default::default()
        }
        .with_constraint(constraint)
        .with_json_options(any_order)
    };
    let completions = engine
        .generate(PROMPT, &params(Constraint::JsonSchema(schema.to_string())))
        .unwrap();
    let mut stopped = 0;
    for completion in completions {
        let text = &completion.text;
        assert!(!has_whitespace(text), "{:?}", text);
        if completion.finish_reason != FinishReason::Stop {
            continue;
        }
        stopped += 1;
        let doc: serde_json::Value =
            serde_json::from_str(text).unwrap_or_else(|e| panic!("{:?} is not JSON: {}", text, e));
        assert_eq!(doc, serde_json::json!({"a": 1, "b": true}), "{:?}", text);
    }
    assert!(stopped > 0, "any_order: no sample ended");
    // Any object takes its members in any order already: the option is
    // taken and changes nothing.
    let (spaced, _) = json_samples(&engine, Constraint::JsonObject, any_order);
    assert_eq!(spaced, 0, "JsonObject with any_order");
}

#[test]
fn json_options_without_a_json_constraint_are_refused() {
    let whitespace = JsonOptions {
        whitespace: true,
        ..Default::default()
    };
    let err = refused_with(
        SamplingParams::greedy(8)
            .with_constraint(Constraint::Regex("a+".to_string()))
            .with_json_options(whitespace),
    );
    assert_eq!(err.status(), Status::InvalidArgument, "{:?}", err);
    assert!(err.message().contains("constraint_flags"), "{:?}", err);
    let err = refused_with(SamplingParams::greedy(8).with_json_options(whitespace));
    assert_eq!(err.status(), Status::InvalidArgument, "{:?}", err);
    assert!(err.message().contains("constraint_flags"), "{:?}", err);
    let any_order = JsonOptions {
        any_order: true,
        ..Default::default()
    };
    let err = refused_with(
        SamplingParams::greedy(8)
            .with_constraint(Constraint::Choice(vec!["a".to_string()]))
            .with_json_options(any_order),
    );
    assert_eq!(err.status(), Status::InvalidArgument, "{:?}", err);
    assert!(err.message().contains("constraint_flags"), "{:?}", err);
}

fn refused_with(params: SamplingParams) -> pvllm::Error {
    match engine().submit(&pvllm::Request::text("Hi").with_sampling(params)) {
        Ok(id) => panic!("the request was accepted as {:?}", id),
        Err(e) => e,
    }
}
