//! The trained stories260K checkpoint from $PVLLM_SHARED_DIR/models; skipped
//! with a reason when PVLLM_SHARED_DIR is unset or empty.
use std::path::PathBuf;

use pvllm::{Engine, EngineConfig, SamplingParams};

const EXPECTED: &str = ", there was a little girl named Lily";

fn shared_models() -> Option<PathBuf> {
    match std::env::var_os("PVLLM_SHARED_DIR") {
        Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir).join("models")),
        _ => {
            println!("SKIPPED: PVLLM_SHARED_DIR is not set, so the stories260K checkpoint is not available");
            None
        }
    }
}

fn greedy_continuation(model: PathBuf) -> String {
    assert!(
        model.exists(),
        "PVLLM_SHARED_DIR is set but {} is missing",
        model.display()
    );
    let engine = Engine::new(
        &EngineConfig::new(&model)
            .num_threads(1)
            .kv_cache_bytes(16 << 20),
    )
    .unwrap();
    let completions = engine
        .generate("Once upon a time", &SamplingParams::greedy(24))
        .unwrap();
    completions[0].text.clone()
}

#[test]
fn llama2c_checkpoint_continues_once_upon_a_time() {
    let models = match shared_models() {
        Some(m) => m,
        None => return,
    };
    let text = greedy_continuation(models.join("stories260K").join("stories260K.bin"));
    assert!(text.starts_with(EXPECTED), "got {:?}", text);
}

#[test]
fn hugging_face_copy_continues_the_same_way() {
    let models = match shared_models() {
        Some(m) => m,
        None => return,
    };
    let text = greedy_continuation(models.join("stories260K-hf"));
    assert!(text.starts_with(EXPECTED), "got {:?}", text);
}
