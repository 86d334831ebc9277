//! Engine::apply_chat_template on the tiny model with the template of
//! tests/data/chat_template_tiny; the expected texts are those of
//! tests/data/chat_goldens/tiny.json (rendered by @huggingface/jinja).
mod common;

use std::path::Path;

use common::TinyModel;
use pvllm::{ChatTemplateOptions, Status};

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
