//! Quantizing while loading (`EngineConfig::quantize`, libpvllm 0.10) on the
//! repository's stories260K checkpoint: q8_0 generates greedily, the
//! estimate counts fewer weight bytes, and an unknown scheme is an
//! `InvalidArgument` naming the schemes.
use std::path::PathBuf;

use pvllm::{estimate_memory, Engine, EngineConfig, SamplingParams, Status};

/// models/stories260K/stories260K.bin of this checkout.
fn stories260k() -> PathBuf {
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../models/stories260K/stories260K.bin");
    assert!(model.exists(), "{} is missing", model.display());
    model
}

fn config() -> EngineConfig {
    EngineConfig::new(stories260k())
        .device("cpu")
        .num_threads(2)
        .kv_cache_bytes(8 << 20)
}

#[test]
fn q8_0_generates_greedily() {
    let engine = Engine::new(&config().quantize("q8_0")).unwrap();
    let mut params = SamplingParams::greedy(8);
    params.ignore_eos = true;
    let completion = engine
        .generate("Once upon a time", &params)
        .unwrap()
        .remove(0);
    assert_eq!(completion.token_ids.len(), 8, "{:?}", completion);
    assert!(!completion.text.is_empty());
}

#[test]
fn the_estimate_counts_quantized_weights() {
    let plain = estimate_memory(&config()).unwrap();
    let q8 = estimate_memory(&config().quantize("q8_0")).unwrap();
    let q4 = estimate_memory(&config().quantize("q4_k_m")).unwrap();
    assert!(q8.weight_bytes < plain.weight_bytes, "{:?} {:?}", q8, plain);
    assert!(q4.weight_bytes < q8.weight_bytes, "{:?} {:?}", q4, q8);
    // "" is no quantizing.
    assert_eq!(estimate_memory(&config().quantize("")).unwrap(), plain);
}

#[test]
fn an_unknown_scheme_is_an_invalid_argument_naming_the_schemes() {
    let err = Engine::new(&config().quantize("q9_9")).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument, "{:?}", err);
    assert!(err.message().contains("\"q9_9\""), "{:?}", err);
    assert!(err.message().contains("q4_k_m"), "{:?}", err);
    let err = estimate_memory(&config().quantize("q9_9")).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument, "{:?}", err);
    let err = Engine::new(&config().quantize("q8\0_0")).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument, "{:?}", err);
}
