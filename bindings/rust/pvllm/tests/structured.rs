//! Structured output (libpvllm 0.6) through the safe API, on the trained
//! stories260K checkpoint this repository carries: JSON that parses and has
//! the schema's shape, a choice, a regex and a grammar match, each ending with
//! `FinishReason::Stop`; bad constraints refused at submit with the library's
//! status and where it went wrong.
use std::path::PathBuf;

use pvllm::{Constraint, Engine, EngineConfig, FinishReason, SamplingParams, Status};

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
        let doc = json::parse(text).unwrap_or_else(|e| panic!("{:?} is not JSON: {}", text, e));
        let members = match doc {
            json::Value::Object(members) => members,
            other => panic!("{:?} is not an object: {:?}", text, other),
        };
        let keys: Vec<&str> = members.iter().map(|(k, _)| k.as_str()).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, ["age", "name"], "{:?}", text);
        for (key, value) in &members {
            match (key.as_str(), value) {
                ("name", json::Value::String(s)) => {
                    assert!(s.chars().count() <= 8, "name too long in {:?}", text)
                }
                ("age", json::Value::Number(n)) => assert!(
                    !n.contains(['.', 'e', 'E']),
                    "age is not an integer in {:?}",
                    text
                ),
                _ => panic!("{} has the wrong type in {:?}", key, text),
            }
        }
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
        json::parse(&completion.text).is_err(),
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
            matches!(json::parse(text), Ok(json::Value::Object(_))),
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
        r#"{"type": "integer", "minimum": 3}"#.to_string(),
    ));
    assert_eq!(err.status(), Status::Unsupported, "{:?}", err);
    assert!(err.message().contains("\"minimum\""), "{:?}", err);
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

/// A small JSON parser (RFC 8259) for checking outputs: the crate has no
/// third-party dependencies to borrow one from.
mod json {
    #[derive(Debug, Clone, PartialEq)]
    pub enum Value {
        Null,
        Bool(bool),
        /// The number's text, as written.
        Number(String),
        String(String),
        Array(Vec<Value>),
        /// Members in document order.
        Object(Vec<(String, Value)>),
    }

    pub fn parse(text: &str) -> Result<Value, String> {
        let mut p = Parser {
            s: text.as_bytes(),
            i: 0,
        };
        let value = p.value()?;
        p.ws();
        if p.i != p.s.len() {
            return Err(format!("trailing text at byte {}", p.i));
        }
        Ok(value)
    }

    struct Parser<'a> {
        s: &'a [u8],
        i: usize,
    }

    impl Parser<'_> {
        fn ws(&mut self) {
            while self.i < self.s.len() && b" \t\r\n".contains(&self.s[self.i]) {
                self.i += 1;
            }
        }

        fn peek(&self) -> Option<u8> {
            self.s.get(self.i).copied()
        }

        fn err<T>(&self, what: &str) -> Result<T, String> {
            Err(format!("{} at byte {}", what, self.i))
        }

        fn eat(&mut self, lit: &str) -> Result<(), String> {
            if self.s[self.i..].starts_with(lit.as_bytes()) {
                self.i += lit.len();
                Ok(())
            } else {
                self.err(&format!("expected {}", lit))
            }
        }

        fn value(&mut self) -> Result<Value, String> {
            self.ws();
            match self.peek() {
                Some(b'{') => self.object(),
                Some(b'[') => self.array(),
                Some(b'"') => self.string().map(Value::String),
                Some(b't') => self.eat("true").map(|_| Value::Bool(true)),
                Some(b'f') => self.eat("false").map(|_| Value::Bool(false)),
                Some(b'n') => self.eat("null").map(|_| Value::Null),
                Some(b'-') | Some(b'0'..=b'9') => self.number(),
                _ => self.err("expected a value"),
            }
        }

        fn object(&mut self) -> Result<Value, String> {
            self.i += 1;
            let mut members = Vec::new();
            self.ws();
            if self.peek() == Some(b'}') {
                self.i += 1;
                return Ok(Value::Object(members));
            }
            loop {
                self.ws();
                if self.peek() != Some(b'"') {
                    return self.err("expected a key");
                }
                let key = self.string()?;
                self.ws();
                self.eat(":")?;
                members.push((key, self.value()?));
                self.ws();
                match self.peek() {
                    Some(b',') => self.i += 1,
                    Some(b'}') => {
                        self.i += 1;
                        return Ok(Value::Object(members));
                    }
                    _ => return self.err("expected , or }"),
                }
            }
        }

        fn array(&mut self) -> Result<Value, String> {
            self.i += 1;
            let mut items = Vec::new();
            self.ws();
            if self.peek() == Some(b']') {
                self.i += 1;
                return Ok(Value::Array(items));
            }
            loop {
                items.push(self.value()?);
                self.ws();
                match self.peek() {
                    Some(b',') => self.i += 1,
                    Some(b']') => {
                        self.i += 1;
                        return Ok(Value::Array(items));
                    }
                    _ => return self.err("expected , or ]"),
                }
            }
        }

        fn hex4(&mut self) -> Result<u32, String> {
            let digits = self.s.get(self.i..self.i + 4).ok_or("short \\u escape")?;
            let text = std::str::from_utf8(digits).map_err(|e| e.to_string())?;
            let v = u32::from_str_radix(text, 16).map_err(|e| e.to_string())?;
            self.i += 4;
            Ok(v)
        }

        fn string(&mut self) -> Result<String, String> {
            self.i += 1;
            let mut out = Vec::new();
            loop {
                let b = match self.peek() {
                    Some(b) => b,
                    None => return self.err("unterminated string"),
                };
                self.i += 1;
                match b {
                    b'"' => return String::from_utf8(out).map_err(|e| e.to_string()),
                    b'\\' => {
                        let e = self.peek().ok_or("unterminated escape")?;
                        self.i += 1;
                        let c = match e {
                            b'"' => '"',
                            b'\\' => '\\',
                            b'/' => '/',
                            b'b' => '\u{8}',
                            b'f' => '\u{c}',
                            b'n' => '\n',
                            b'r' => '\r',
                            b't' => '\t',
                            b'u' => {
                                let mut v = self.hex4()?;
                                if (0xD800..0xDC00).contains(&v) {
                                    self.eat("\\u")?;
                                    let low = self.hex4()?;
                                    if !(0xDC00..0xE000).contains(&low) {
                                        return self.err("bad surrogate pair");
                                    }
                                    v = 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00);
                                }
                                char::from_u32(v).ok_or("bad \\u escape")?
                            }
                            _ => return self.err("bad escape"),
                        };
                        let mut buf = [0u8; 4];
                        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    }
                    0..=0x1f => return self.err("control character in a string"),
                    _ => out.push(b),
                }
            }
        }

        fn digits(&mut self) -> usize {
            let start = self.i;
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.i += 1;
            }
            self.i - start
        }

        fn number(&mut self) -> Result<Value, String> {
            let start = self.i;
            if self.peek() == Some(b'-') {
                self.i += 1;
            }
            if self.peek() == Some(b'0') {
                self.i += 1;
            } else if self.digits() == 0 {
                return self.err("expected digits");
            }
            if self.peek() == Some(b'.') {
                self.i += 1;
                if self.digits() == 0 {
                    return self.err("expected fraction digits");
                }
            }
            if matches!(self.peek(), Some(b'e') | Some(b'E')) {
                self.i += 1;
                if matches!(self.peek(), Some(b'+') | Some(b'-')) {
                    self.i += 1;
                }
                if self.digits() == 0 {
                    return self.err("expected exponent digits");
                }
            }
            let text = std::str::from_utf8(&self.s[start..self.i]).map_err(|e| e.to_string())?;
            Ok(Value::Number(text.to_string()))
        }
    }

    #[test]
    fn parser_accepts_json_and_refuses_the_rest() {
        let v = parse(r#" {"a": [1, -2.5e3, true, null], "b\u00e9": "x\"y"} "#).unwrap();
        assert_eq!(
            v,
            Value::Object(vec![
                (
                    "a".to_string(),
                    Value::Array(vec![
                        Value::Number("1".to_string()),
                        Value::Number("-2.5e3".to_string()),
                        Value::Bool(true),
                        Value::Null
                    ])
                ),
                ("bé".to_string(), Value::String("x\"y".to_string())),
            ])
        );
        for bad in [
            "",
            "{",
            "{\"a\":}",
            "[1,]",
            "01",
            "\"a",
            "{} x",
            "Once upon",
        ] {
            assert!(parse(bad).is_err(), "{:?}", bad);
        }
    }
}
