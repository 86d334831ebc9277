//! Engine::apply_chat_template on the tiny model with the template of
//! tests/data/chat_template_tiny; the expected texts are those of
//! tests/data/chat_goldens/tiny.json (rendered by @huggingface/jinja). The
//! 0.9 additions: the template override, and chat requests that hold one
//! BOS, on the tiny model and on one serving Llama 3.1's tokenizer.json
//! from the reference tokenizers (skipped with a reason when absent).
mod common;

use std::path::Path;

use common::TinyModel;
use pvllm::{ChatTemplateOptions, Completion, Prompt, SamplingParams, Status, TokenId};

fn tiny_with_template() -> TinyModel {
    let model = TinyModel::new();
    let config = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../tests/data/chat_template_tiny/tokenizer_config.json");
    std::fs::copy(&config, model.path().join("tokenizer_config.json"))
        .unwrap_or_else(|e| panic!("cannot copy {:?}: {}", config, e));
    model
}

const HELLO: &str = r#"[{"role": "user", "content": "Hello!"}]"#;

#[test]
fn renders_the_models_template() {
    let engine = tiny_with_template().engine();
    let no_prompt = ChatTemplateOptions {
        add_generation_prompt: false,
        ..Default::default()
    };
    // tiny.json, "user_no_generation_prompt".
    assert_eq!(
        engine.apply_chat_template(HELLO, &no_prompt).unwrap(),
        "<s>[USER] Hello!\n"
    );
    assert_eq!(
        engine
            .apply_chat_template(HELLO, &ChatTemplateOptions::default())
            .unwrap(),
        "<s>[USER] Hello!\n[BOT]"
    );
    // Longer than the first buffer: the BUFFER_TOO_SMALL protocol.
    let long = "x".repeat(1000);
    let text = engine
        .apply_chat_template(
            &format!(r#"[{{"role": "user", "content": "{}"}}]"#, long),
            &ChatTemplateOptions::default(),
        )
        .unwrap();
    assert_eq!(text, format!("<s>[USER] {}\n[BOT]", long));
}

#[test]
fn rejections_carry_their_status() {
    let engine = tiny_with_template().engine();
    let opts = ChatTemplateOptions::default();
    // tiny.json, "unknown_role_is_rejected": the template's raise_exception.
    let err = engine
        .apply_chat_template(r#"[{"role": "robot", "content": "beep"}]"#, &opts)
        .unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert_eq!(err.message(), "unknown role: robot");
    let err = engine.apply_chat_template("[{", &opts).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    let named = ChatTemplateOptions {
        template_name: Some("tool_use".into()),
        ..Default::default()
    };
    assert_eq!(
        engine
            .apply_chat_template(HELLO, &named)
            .unwrap_err()
            .status(),
        Status::NotFound
    );

    let plain = TinyModel::new().engine();
    assert_eq!(
        plain
            .apply_chat_template(HELLO, &opts)
            .unwrap_err()
            .status(),
        Status::NotFound
    );
}

/// A template of this test's own: the BOS text, then each message.
const OVERRIDE: &str =
    "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}";

#[test]
fn a_template_override_replaces_the_models() {
    let custom = ChatTemplateOptions {
        chat_template: Some(OVERRIDE.into()),
        // Ignored with an override (the model has no template of that name).
        template_name: Some("tool_use".into()),
        ..Default::default()
    };
    // Over the model's own template.
    let engine = tiny_with_template().engine();
    assert_eq!(
        engine.apply_chat_template(HELLO, &custom).unwrap(),
        "<s><user>Hello!\n"
    );
    // A model with no template renders the override, with the BOS text
    // of its tokenizer (it has no tokenizer_config.json).
    let plain = TinyModel::new().engine();
    assert_eq!(
        plain.apply_chat_template(HELLO, &custom).unwrap(),
        "<s><user>Hello!\n"
    );
    let empty = ChatTemplateOptions {
        chat_template: Some(String::new()),
        ..Default::default()
    };
    let err = plain.apply_chat_template(HELLO, &empty).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains("chat_template"), "{:?}", err);
    let nul = ChatTemplateOptions {
        chat_template: Some("{{ bos_token }}\0".into()),
        ..Default::default()
    };
    let err = plain.apply_chat_template(HELLO, &nul).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains("chat_template"), "{:?}", err);
}

/// Greedy, one token, with prompt logprobs: they show every prompt token
/// but the first.
fn probe() -> SamplingParams {
    SamplingParams {
        prompt_logprobs: Some(0),
        ignore_eos: true,
        ..SamplingParams::greedy(1)
    }
}

/// The prompt the engine ran: its length, and its ids after the first.
fn submitted(completions: &[Completion]) -> (usize, Vec<TokenId>) {
    let completion = &completions[0];
    let count = completion.metrics.expect("metrics").num_prompt_tokens as usize;
    let rest = completion
        .prompt_logprobs
        .as_ref()
        .expect("prompt logprobs")
        .iter()
        .map(|entry| entry.token_id)
        .collect();
    (count, rest)
}

#[test]
fn chat_requests_submit_the_rendered_prompt_without_another_bos() {
    let engine = tiny_with_template().engine();
    let opts = ChatTemplateOptions::default();
    let rendered = engine.apply_chat_template(HELLO, &opts).unwrap();
    let request = engine.chat_request(HELLO, &opts).unwrap();
    assert_eq!(request.prompt, Prompt::Text(rendered.clone()));
    assert!(!request.add_special_tokens);
    assert_eq!(request.sampling, SamplingParams::default());

    // The template's "<s>" is the tiny tokenizer's BOS (1), once.
    let ids = engine.tokenize(&rendered, false).unwrap();
    assert_eq!(ids[0], 1, "{:?}", ids);
    let (count, rest) = submitted(&engine.chat(HELLO, &opts, &probe()).unwrap());
    assert_eq!(count, ids.len());
    assert_eq!(rest, ids[1..]);
    // A chat template error comes back from chat and chat_request.
    let robot = r#"[{"role": "robot", "content": "beep"}]"#;
    assert_eq!(
        engine.chat(robot, &opts, &probe()).unwrap_err().status(),
        Status::InvalidArgument
    );
    assert!(engine.chat_request(robot, &opts).is_err());
}

/// Llama 3.1's chat template writes `<|begin_of_text|>` itself: what a chat
/// request submits starts with exactly one BOS, where the rendered text
/// submitted as a plain prompt gets a second.
#[test]
fn llama3_1_chat_prompt_holds_exactly_one_bos() {
    let dir = match common::reference_tokenizer("tokenizer-llama3_1") {
        Some(dir) => dir,
        None => return,
    };
    const BOS: TokenId = 128000;
    let model = TinyModel::with_tokenizer(&dir);
    let engine = model.engine();
    let opts = ChatTemplateOptions::default();
    let rendered = engine.apply_chat_template(HELLO, &opts).unwrap();
    assert!(rendered.starts_with("<|begin_of_text|>"), "{:?}", rendered);
    // The rendered text's own tokens: one BOS, first.
    let ids = engine.tokenize(&rendered, false).unwrap();
    assert_eq!(ids[0], BOS);
    assert_eq!(ids.iter().filter(|&&id| id == BOS).count(), 1, "{:?}", ids);

    // The chat helper submits exactly those: as many tokens, the same ones
    // after the first, so no BOS but the template's.
    let (count, rest) = submitted(&engine.chat(HELLO, &opts, &probe()).unwrap());
    assert_eq!(count, ids.len(), "a BOS was added");
    assert_eq!(rest, ids[1..]);
    assert!(!rest.contains(&BOS), "{:?}", rest);
    let request = engine
        .chat_request(HELLO, &opts)
        .unwrap()
        .with_sampling(probe());
    let events: Vec<_> = engine
        .stream(&[request])
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let streamed = events
        .iter()
        .find_map(|event| event.prompt_logprobs.clone())
        .expect("prompt logprobs on the first event");
    assert_eq!(
        streamed.iter().map(|e| e.token_id).collect::<Vec<_>>(),
        rest
    );

    // What it avoids: the same text as a plain prompt gets the tokenizer's
    // BOS in front of the template's.
    let (count, rest) = submitted(&engine.generate(rendered.as_str(), &probe()).unwrap());
    assert_eq!(count, ids.len() + 1);
    assert_eq!(rest[0], BOS, "{:?}", &rest[..4]);
    assert_eq!(rest[1..], ids[1..]);
}
