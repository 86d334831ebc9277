//! Safe Rust API for pvllm, an embeddable LLM inference engine with a paged
//! KV cache and continuous batching, over its C ABI (`pvllm.h`, through the
//! `pvllm-sys` crate).
//!
//! An [`Engine`] owns a model, its KV-cache pool and a scheduler. Requests
//! are [`submit`](Engine::submit)ted from any thread; each
//! [`step`](Engine::step) runs one batch through the model, and the new
//! tokens come out as [`Output`] events: [`poll`](Engine::poll) takes every
//! shared request's, [`poll_request`](Engine::poll_request) and
//! [`wait`](Engine::wait) one request's (the library keeps each request's
//! events apart). An [`OutputStream`] runs that loop for its own requests
//! as an iterator, and [`generate`](Engine::generate) runs it to the end for
//! one prompt.
//!
//! ```
//! use pvllm::{Engine, EngineConfig, FinishReason, SamplingParams};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model_dir = std::path::PathBuf::from("models/my-llama");
//! # let tiny = match doc_model::make()? { Some(dir) => dir, None => return Ok(()) };
//! # let model_dir = tiny.path().to_path_buf();
//! let engine = Engine::new(&EngineConfig::new(&model_dir).kv_cache_bytes(16 << 20))?;
//!
//! let params = SamplingParams { temperature: 0.0, max_tokens: 8, ignore_eos: true, ..Default::default() };
//! let completions = engine.generate("Once upon a time", &params)?;
//! assert_eq!(completions.len(), 1);
//! assert_eq!(completions[0].token_ids.len(), 8);
//! assert_eq!(completions[0].finish_reason, FinishReason::Length);
//! println!("{}", completions[0].text);
//! # Ok(())
//! # }
//! # mod doc_model {
//! #     // Makes a tiny random model with $PVLLM_MAKE_TINY_MODEL; None (and
//! #     // the example skips) when the variable is unset.
//! #     pub struct Dir(std::path::PathBuf);
//! #     impl Dir { pub fn path(&self) -> &std::path::Path { &self.0 } }
//! #     impl Drop for Dir { fn drop(&mut self) { let _ = std::fs::remove_dir_all(&self.0); } }
//! #     pub fn make() -> std::io::Result<Option<Dir>> {
//! #         let maker = match std::env::var_os("PVLLM_MAKE_TINY_MODEL") { Some(m) => m, None => return Ok(None) };
//! #         let dir = Dir(std::env::temp_dir().join(format!("pvllm-doc-{}", std::process::id())));
//! #         let status = std::process::Command::new(maker).arg(&dir.0).stdout(std::process::Stdio::null()).status()?;
//! #         assert!(status.success(), "the tiny-model maker failed");
//! #         Ok(Some(dir))
//! #     }
//! # }
//! ```
//!
//! # Chat and tokenizers
//!
//! [`apply_chat_template`](Engine::apply_chat_template) renders a model's
//! chat template over a conversation (JSON messages, with
//! [`ChatTemplateOptions`]; `chat_template` replaces the model's own).
//! The rendered text already holds its BOS, so
//! [`chat_request`](Engine::chat_request) and [`chat`](Engine::chat)
//! submit it with [`Request::add_special_tokens`] off: the prompt starts
//! with one BOS, not two. A [`Tokenizer`] reads a model's tokenizer and
//! chat templates without its weights, to encode, decode and render from
//! any thread without an engine.
//!
//! # Threads
//!
//! `Engine` is `Send` and `Sync` (see the comment on the impls): share it in
//! an `Arc`, step it from one thread and submit, abort, poll and wait from
//! any other — for example one thread per request, each blocked in
//! [`wait`](Engine::wait) on its own request and reading it with
//! [`poll_request`](Engine::poll_request), or each iterating its own
//! [`OutputStream`]. Errors are returned by the call that failed, whatever
//! thread it ran on.
//!
//! # Linking
//!
//! `pvllm-sys` finds libpvllm through `PVLLM_LIB_DIR` or `pkg-config pvllm`;
//! at run time the dynamic loader must find `libpvllm.so.1` (install it, or
//! set `LD_LIBRARY_PATH`).
#![warn(missing_docs)]

mod async_stream;
mod chat;
mod config;
mod engine;
mod error;
mod output;
mod request;
mod stream;
mod tokenizer;

pub use async_stream::{AsyncOutputStream, Next};
pub use chat::ChatTemplateOptions;
pub use config::{
    estimate_memory, Dtype, EngineConfig, KvAllocator, KvCacheDtype, MemoryEstimate,
    ModelChecksums, PreemptionMode,
};
pub use engine::{abi_version, version, version_number, Engine, Stats};
pub use error::{Error, Result, Status};
pub use output::{
    Completion, FinishReason, Logprob, Output, RequestId, RequestMetrics, TokenLogprobs,
};
pub use request::{
    Constraint, Delivery, EarlyStopping, JsonOptions, Prompt, Request, SamplingParams, TokenId,
};
pub use stream::OutputStream;
pub use tokenizer::{Tokenizer, TokenizerInfo};

/// The ABI version this crate was generated against (`PVLLM_ABI_VERSION`).
pub const ABI_VERSION: u32 = pvllm_sys::PVLLM_ABI_VERSION;
