//! A .pvllm model file (libpvllm 0.7): the tiny model converted by
//! $PVLLM_MAKE_TINY_MODEL --pvllm serves the same tokens as its folder under
//! every checksum mode, and a damaged tensor is refused by name.
mod common;

use std::process::{Command, Stdio};

use common::{TempDir, TinyModel};
use pvllm::{Engine, ModelChecksums, SamplingParams, Status};

/// The tiny model's folder and its .pvllm file, made together.
fn tiny_pvllm(dir: &TempDir) -> std::path::PathBuf {
    let maker = std::env::var_os("PVLLM_MAKE_TINY_MODEL")
        .expect("PVLLM_MAKE_TINY_MODEL must name the tiny-model maker");
    let file = dir.path().join("tiny.pvllm");
    let status = Command::new(&maker)
        .arg(dir.path().join("folder"))
        .arg("--pvllm")
        .arg(&file)
        .stdout(Stdio::null())
        .status()
        .expect("run the tiny-model maker");
    assert!(status.success());
    file
}

#[test]
fn a_pvllm_file_serves_the_folders_tokens_under_every_checksum_mode() {
    let folder = TinyModel::new();
    let dir = TempDir::new("pvllm-file");
    let file = tiny_pvllm(&dir);
    let params = SamplingParams::greedy(12);
    let want = folder
        .engine()
        .generate("Once upon a time", &params)
        .unwrap()
        .remove(0);
    assert!(!want.token_ids.is_empty());
    for mode in [
        ModelChecksums::Full,
        ModelChecksums::Lazy,
        ModelChecksums::None,
    ] {
        let config = pvllm::EngineConfig::new(&file)
            .num_threads(1)
            .kv_cache_bytes(4 << 20)
            .model_checksums(mode);
        let engine = Engine::new(&config).expect("engine over the .pvllm file");
        let got = engine
            .generate("Once upon a time", &params)
            .unwrap()
            .remove(0);
        assert_eq!(got.token_ids, want.token_ids, "{:?}", mode);
        assert_eq!(got.text, want.text, "{:?}", mode);
    }
}

#[test]
fn a_damaged_tensor_is_corrupt_model_naming_it_unless_checks_are_off() {
    let dir = TempDir::new("pvllm-damaged");
    let file = tiny_pvllm(&dir);
    let mut bytes = std::fs::read(&file).unwrap();
    let last = bytes.len() - 1; // inside the last tensor (the packed head)
    bytes[last] ^= 0x40;
    std::fs::write(&file, &bytes).unwrap();
    for mode in [ModelChecksums::Full, ModelChecksums::Lazy] {
        let config = pvllm::EngineConfig::new(&file).model_checksums(mode);
        let err = Engine::new(&config)
            .err()
            .expect("a damaged file is refused");
        assert_eq!(
            err.status(),
            Status::CorruptModel,
            "{:?}: {}",
            mode,
            err.message()
        );
        assert!(
            err.message()
                .contains("lm_head.weight does not match its checksum"),
            "{}",
            err.message()
        );
    }
    let config = pvllm::EngineConfig::new(&file).model_checksums(ModelChecksums::None);
    assert!(Engine::new(&config).is_ok());
}
