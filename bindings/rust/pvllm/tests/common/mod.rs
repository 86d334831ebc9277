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
        let maker = std::env::var_os("PVLLM_MAKE_TINY_MODEL").expect(
            "PVLLM_MAKE_TINY_MODEL must name the tiny-model maker (bindings/rust/test.sh sets it)",
        );
        let dir = TempDir::new("model");
        let status = Command::new(&maker)
            .arg(dir.path())
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
