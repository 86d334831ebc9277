//! The KV cache's dtype (`EngineConfig::kv_cache_dtype`, libpvllm 0.11) on
//! the repository's stories260K checkpoint: int8 generates greedily, the
//! estimate's block bytes follow the dtype exactly, and fp8_e4m3 is
//! `Unsupported` on the CPU. (An out-of-range value, which this enum cannot
//! express, is checked in config.rs's unit tests.)
use std::path::PathBuf;

use pvllm::{estimate_memory, Engine, EngineConfig, KvCacheDtype, SamplingParams, Status};

/// models/stories260K/stories260K.bin of this checkout.
fn stories260k() -> PathBuf {
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../models/stories260K/stories260K.bin");
    assert!(model.exists(), "{} is missing", model.display());
    model
}

fn config(dtype: KvCacheDtype) -> EngineConfig {
    EngineConfig::new(stories260k())
        .device("cpu")
        .num_threads(2)
        .kv_cache_bytes(8 << 20)
        .kv_cache_dtype(dtype)
}

#[test]
fn int8_generates_greedily() {
    let engine = Engine::new(&config(KvCacheDtype::Int8)).unwrap();
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
fn the_estimate_counts_the_dtype() {
    let f32 = estimate_memory(&config(KvCacheDtype::F32)).unwrap();
    let f16 = estimate_memory(&config(KvCacheDtype::F16)).unwrap();
    let bf16 = estimate_memory(&config(KvCacheDtype::Bf16)).unwrap();
    let int8 = estimate_memory(&config(KvCacheDtype::Int8)).unwrap();
    // Auto is f32 on the CPU.
    assert_eq!(estimate_memory(&config(KvCacheDtype::Auto)).unwrap(), f32);
    assert_eq!(f16.kv_bytes_per_block * 2, f32.kv_bytes_per_block);
    assert_eq!(bf16.kv_bytes_per_block, f16.kv_bytes_per_block);
    // stories260K's head_dim is 8: a row of K or V is 4 * 8 = 32 bytes in
    // f32 and 8 codes + a 2-byte fp16 scale = 10 bytes in int8.
    assert_eq!(int8.kv_bytes_per_block * 32, f32.kv_bytes_per_block * 10);
    // The same budget buys more blocks.
    assert!(int8.num_blocks > f16.num_blocks, "{:?} {:?}", int8, f16);
    assert!(f16.num_blocks > f32.num_blocks, "{:?} {:?}", f16, f32);
    assert_eq!(f32.weight_bytes, int8.weight_bytes);
}

#[test]
fn fp8_e4m3_is_unsupported_on_the_cpu() {
    let err = Engine::new(&config(KvCacheDtype::Fp8E4m3)).unwrap_err();
    assert_eq!(err.status(), Status::Unsupported, "{:?}", err);
    assert!(err.message().contains("int8"), "{:?}", err);
    let err = estimate_memory(&config(KvCacheDtype::Fp8E4m3)).unwrap_err();
    assert_eq!(err.status(), Status::Unsupported, "{:?}", err);
}

#[test]
fn names_parse_and_print() {
    for dtype in [
        KvCacheDtype::Auto,
        KvCacheDtype::F32,
        KvCacheDtype::F16,
        KvCacheDtype::Bf16,
        KvCacheDtype::Int8,
        KvCacheDtype::Fp8E4m3,
    ] {
        assert_eq!(dtype.name().parse::<KvCacheDtype>().unwrap(), dtype);
        assert_eq!(dtype.to_string(), dtype.name());
    }
    assert_eq!("INT8".parse::<KvCacheDtype>().unwrap(), KvCacheDtype::Int8);
    assert_eq!("fp16".parse::<KvCacheDtype>().unwrap(), KvCacheDtype::F16);
    assert_eq!(
        "fp8".parse::<KvCacheDtype>().unwrap(),
        KvCacheDtype::Fp8E4m3
    );
    let err = "int4".parse::<KvCacheDtype>().unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument, "{:?}", err);
    assert!(err.message().contains("\"int4\""), "{:?}", err);
}
