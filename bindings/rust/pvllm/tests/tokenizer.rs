//! `Tokenizer` (libpvllm 0.9): a model's tokenizer and chat templates
//! without an engine, on the tiny model, a folder of chat templates alone,
//! paths that are not models, and Llama 3.1's tokenizer.json from the
//! reference tokenizers (skipped with a reason when they are absent).
mod common;

use std::path::Path;
use std::sync::Arc;

use common::{TempDir, TinyModel};
use pvllm::{ChatTemplateOptions, Status, Tokenizer};

const TEXT: &str = "Hello world, once upon a time.";
const HELLO: &str = r#"[{"role": "user", "content": "Hello!"}]"#;

fn tiny_chat_config() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../tests/data/chat_template_tiny/tokenizer_config.json")
}

#[test]
fn opens_a_models_tokenizer_and_gives_the_engines_ids() {
    let model = TinyModel::new();
    let tokenizer = Tokenizer::open(model.path()).unwrap();
    let info = tokenizer.info().unwrap();
    assert_eq!(info.vocab_size, 384, "{:?}", info);
    assert_eq!(info.bos_id, Some(1));
    assert_eq!(info.eos_id, Some(2));
    assert!(info.adds_bos);
    assert!(!info.has_chat_template);
    assert_eq!(info.kind, "sentencepiece");
    assert_eq!(
        info.source.as_deref().and_then(Path::file_name),
        Some("tokenizer.model".as_ref()),
        "{:?}",
        info
    );

    let engine = model.engine();
    let plain = tokenizer.encode(TEXT, false).unwrap();
    let special = tokenizer.encode(TEXT, true).unwrap();
    assert_eq!(plain, engine.tokenize(TEXT, false).unwrap());
    assert_eq!(special, engine.tokenize(TEXT, true).unwrap());
    assert_eq!(special[0], 1);
    assert_eq!(&special[1..], &plain[..]);
    assert_eq!(tokenizer.decode(&plain).unwrap(), TEXT);
    assert_eq!(tokenizer.decode(&[]).unwrap(), "");
    // Longer than the first guess of either buffer.
    let long = "tokens ".repeat(300);
    let long_ids = tokenizer.encode(&long, false).unwrap();
    assert_eq!(tokenizer.decode(&long_ids).unwrap(), long);

    let err = tokenizer.decode(&[384]).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains("384"), "{:?}", err);
    // No chat template beside this model.
    assert_eq!(
        tokenizer
            .apply_chat_template(HELLO, &ChatTemplateOptions::default())
            .unwrap_err()
            .status(),
        Status::NotFound
    );
    // The tokenizer outlives the engine over the same folder.
    drop(engine);
    assert_eq!(tokenizer.encode(TEXT, false).unwrap(), plain);
}

#[test]
fn renders_chat_templates_like_the_engine() {
    let model = TinyModel::new();
    std::fs::copy(
        tiny_chat_config(),
        model.path().join("tokenizer_config.json"),
    )
    .unwrap();
    let tokenizer = Tokenizer::open(model.path()).unwrap();
    assert!(tokenizer.info().unwrap().has_chat_template);
    // tests/data/chat_goldens/tiny.json, "user_with_generation_prompt".
    let rendered = tokenizer
        .apply_chat_template(HELLO, &ChatTemplateOptions::default())
        .unwrap();
    assert_eq!(rendered, "<s>[USER] Hello!\n[BOT]");
    let engine = model.engine();
    assert_eq!(
        engine
            .apply_chat_template(HELLO, &ChatTemplateOptions::default())
            .unwrap(),
        rendered
    );
    // The template override.
    let custom = ChatTemplateOptions {
        chat_template: Some(
            "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}".into(),
        ),
        ..Default::default()
    };
    assert_eq!(
        tokenizer.apply_chat_template(HELLO, &custom).unwrap(),
        "<user>Hello!"
    );
    let err = tokenizer
        .apply_chat_template(
            r#"[{"role": "robot", "content": "beep"}]"#,
            &Default::default(),
        )
        .unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert_eq!(err.message(), "unknown role: robot");
}

#[test]
fn a_folder_of_chat_templates_alone_renders_but_does_not_encode() {
    let dir = TempDir::new("chat-only");
    std::fs::create_dir_all(dir.path()).unwrap();
    std::fs::copy(tiny_chat_config(), dir.path().join("tokenizer_config.json")).unwrap();
    let tokenizer = Tokenizer::open(dir.path()).unwrap();
    let info = tokenizer.info().unwrap();
    assert_eq!(info.kind, "");
    assert_eq!(info.source, None);
    assert_eq!(info.vocab_size, 0);
    assert_eq!(info.bos_id, None);
    assert!(info.has_chat_template);
    assert_eq!(
        tokenizer
            .apply_chat_template(HELLO, &ChatTemplateOptions::default())
            .unwrap(),
        "<s>[USER] Hello!\n[BOT]"
    );
    assert_eq!(
        tokenizer.encode(TEXT, true).unwrap_err().status(),
        Status::TokenizerError
    );
    assert_eq!(
        tokenizer.decode(&[1]).unwrap_err().status(),
        Status::TokenizerError
    );
}

#[test]
fn paths_that_are_not_models_are_refused_with_their_status() {
    let dir = TempDir::new("no-tokenizer");
    let missing = dir.path().join("no-such-model");
    let err = Tokenizer::open(&missing).unwrap_err();
    assert_eq!(err.status(), Status::NotFound);
    let shown = missing.display().to_string();
    assert!(
        err.message().contains(&shown),
        "{:?} does not name {}",
        err,
        shown
    );
    // A folder that holds neither a tokenizer nor chat templates.
    std::fs::create_dir_all(dir.path()).unwrap();
    assert_eq!(
        Tokenizer::open(dir.path()).unwrap_err().status(),
        Status::NotFound
    );
    assert_eq!(
        Tokenizer::open("").unwrap_err().status(),
        Status::InvalidArgument
    );
    // Refused before it reaches the library.
    let err = Tokenizer::open("models\0llama").unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains("NUL"), "{:?}", err);

    let model = TinyModel::new();
    let tokenizer = Tokenizer::open(model.path()).unwrap();
    assert_eq!(
        tokenizer.encode("a\0b", false).unwrap_err().status(),
        Status::InvalidArgument
    );
}

#[test]
fn one_tokenizer_serves_several_threads() {
    fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<Tokenizer>();

    let model = TinyModel::new();
    let tokenizer = Arc::new(Tokenizer::open(model.path()).unwrap());
    let want = tokenizer.encode(TEXT, true).unwrap();
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let tokenizer = Arc::clone(&tokenizer);
            std::thread::spawn(move || {
                let text = format!("{} {}", TEXT, i);
                for _ in 0..50 {
                    let ids = tokenizer.encode(&text, true).unwrap();
                    assert_eq!(tokenizer.decode(&ids[1..]).unwrap(), text);
                }
                tokenizer.encode(TEXT, true).unwrap()
            })
        })
        .collect();
    for thread in threads {
        assert_eq!(thread.join().unwrap(), want);
    }
    // The last reference frees it, on whichever thread drops it.
    let last = std::thread::spawn(move || drop(tokenizer));
    last.join().unwrap();
}

/// Llama 3.1's tokenizer.json, opened from a folder that holds only a
/// tokenizer: its special tokens and its BOS-writing chat template.
#[test]
fn llama3_1_tokenizer_json() {
    let dir = match common::reference_tokenizer("tokenizer-llama3_1") {
        Some(dir) => dir,
        None => return,
    };
    let tokenizer = Tokenizer::open(&dir).unwrap();
    let info = tokenizer.info().unwrap();
    assert_eq!(info.kind, "tokenizer.json");
    assert_eq!(info.vocab_size, 128256);
    assert_eq!(info.bos_id, Some(128000));
    assert_eq!(info.bos_token, "<|begin_of_text|>");
    assert_eq!(info.eos_token, "<|eot_id|>");
    assert!(info.adds_bos);
    assert!(info.has_chat_template);
    assert_eq!(
        info.source.as_deref().and_then(Path::file_name),
        Some("tokenizer.json".as_ref())
    );

    let rendered = tokenizer
        .apply_chat_template(HELLO, &ChatTemplateOptions::default())
        .unwrap();
    assert!(rendered.starts_with("<|begin_of_text|>"), "{:?}", rendered);
    // The template wrote the BOS: encoding without special tokens keeps
    // exactly that one; with them, a second comes first.
    let ids = tokenizer.encode(&rendered, false).unwrap();
    assert_eq!(ids[0], 128000);
    assert_eq!(ids.iter().filter(|&&id| id == 128000).count(), 1);
    let doubled = tokenizer.encode(&rendered, true).unwrap();
    assert_eq!(&doubled[..2], &[128000, 128000]);
    let hello = tokenizer.encode("Hello world", false).unwrap();
    assert_eq!(tokenizer.decode(&hello).unwrap(), "Hello world");
}
