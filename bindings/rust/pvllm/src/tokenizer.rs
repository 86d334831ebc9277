//! A model's tokenizer and chat templates without its weights
//! (`pvllm_tokenizer`, libpvllm 0.9).
use std::ffi::CStr;
use std::os::raw::c_char;
use std::path::{Path, PathBuf};
use std::ptr::{self, NonNull};

use pvllm_sys as sys;

use crate::chat::ChatTemplateOptions;
use crate::config::{nul_error, path_to_cstring};
use crate::error::{check, read_ids, read_text, Error, Result, Status};
use crate::request::TokenId;

/// A model's tokenizer and chat templates, read without its weights: to
/// tokenize, count tokens or render a chat template in milliseconds rather
/// than the seconds an [`Engine`](crate::Engine) takes to create. It gives
/// the same ids as an engine over the same path. Freed on drop.
///
/// ```no_run
/// # fn main() -> pvllm::Result<()> {
/// let tokenizer = pvllm::Tokenizer::open("models/llama")?;
/// let ids = tokenizer.encode("Once upon a time", true)?;
/// println!("{} tokens, BOS {:?}", ids.len(), tokenizer.info()?.bos_id);
/// println!("{}", tokenizer.decode(&ids)?);
/// # Ok(()) }
/// ```
pub struct Tokenizer {
    handle: NonNull<sys::pvllm_tokenizer>,
}

// SAFETY (Send and Sync): the header declares a pvllm_tokenizer immutable
// once opened ("any thread may use it, several at once; free it once"):
// encode, decode, apply_chat_template and get_info only read it, take it as
// `const pvllm_tokenizer*`, and return errors through their own error
// out-parameter, with no thread-local state. So `&Tokenizer` may be used
// from several threads at once and the handle moved to another thread. The
// one call that must run once and alone, pvllm_tokenizer_free, runs only in
// `Drop`, which has exclusive ownership. The strings get_info hands out
// belong to the handle and are copied before the call returns to Rust code.
unsafe impl Send for Tokenizer {}
unsafe impl Sync for Tokenizer {}

impl Drop for Tokenizer {
    fn drop(&mut self) {
        // SAFETY: the handle came from pvllm_tokenizer_open and `drop` has
        // the only reference left.
        unsafe { sys::pvllm_tokenizer_free(self.handle.as_ptr()) }
    }
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("handle", &self.handle)
            .finish()
    }
}

/// What a [`Tokenizer`] is (`pvllm_tokenizer_info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenizerInfo {
    /// One past the largest id, added tokens included; 0 for chat templates
    /// alone.
    pub vocab_size: usize,
    /// The BOS id, if the tokenizer has one.
    pub bos_id: Option<TokenId>,
    /// The EOS id, if the tokenizer has one.
    pub eos_id: Option<TokenId>,
    /// The BOS text the chat templates read (tokenizer_config.json's
    /// `bos_token`), else the tokenizer's own BOS token's; `""` when there
    /// is none.
    pub bos_token: String,
    /// Likewise the EOS text: a chat model's end of turn (`"<|im_end|>"`,
    /// `"</s>"`), a stop string for a chat.
    pub eos_token: String,
    /// `"sentencepiece"` (tokenizer.model) or `"tokenizer.json"`; `""` for
    /// chat templates alone.
    pub kind: String,
    /// The file it was read from, or the `.pvllm` file that carries it;
    /// `None` for chat templates alone.
    pub source: Option<PathBuf>,
    /// Whether [`encode`](Tokenizer::encode) with `add_special_tokens` puts
    /// BOS first.
    pub adds_bos: bool,
    /// Whether the model has a chat template of its own.
    pub has_chat_template: bool,
}

impl Tokenizer {
    /// Opens the tokenizer and chat templates of the model at
    /// `model_path`: any path [`Engine::new`](crate::Engine::new) accepts
    /// (a Hugging Face folder, a llama2.c `.bin` with its tokenizer beside
    /// it, a `.pvllm` file, ...), a `tokenizer.model` or `tokenizer.json`
    /// file, or a folder holding only a tokenizer. A folder with chat
    /// templates and no tokenizer opens too: it renders them, and
    /// [`encode`](Self::encode) and [`decode`](Self::decode) fail with
    /// [`Status::TokenizerError`].
    ///
    /// Errors: [`Status::NotFound`] when there is no such path or it holds
    /// neither a tokenizer nor chat templates (the message says what was
    /// looked for), [`Status::InvalidArgument`] for an empty path or a
    /// folder with several models, [`Status::Unsupported`] for a file of
    /// another kind, and `IoError`, `CorruptModel` or `TokenizerError` for
    /// an unreadable or malformed tokenizer.
    pub fn open(model_path: impl AsRef<Path>) -> Result<Tokenizer> {
        let path = path_to_cstring(model_path.as_ref())?;
        let mut handle: *mut sys::pvllm_tokenizer = ptr::null_mut();
        // SAFETY: a NUL-terminated path and a valid out-pointer.
        check(|err| unsafe { sys::pvllm_tokenizer_open(path.as_ptr(), &mut handle, err) })?;
        NonNull::new(handle)
            .map(|handle| Tokenizer { handle })
            .ok_or_else(|| {
                Error::new(
                    Status::Internal,
                    "pvllm_tokenizer_open returned OK and no tokenizer",
                )
            })
    }

    fn raw(&self) -> *const sys::pvllm_tokenizer {
        self.handle.as_ptr()
    }

    /// Encodes text; `add_special_tokens` adds the special tokens the
    /// tokenizer puts around a text (BOS for Llama-style tokenizers, nothing
    /// for Qwen's), as Hugging Face's `add_special_tokens`. Special tokens
    /// written in the text count either way.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<TokenId>> {
        let text = std::ffi::CString::new(text).map_err(|_| nul_error("the text"))?;
        let guess = text.as_bytes().len() + 2;
        // SAFETY: `ids` has `capacity` writable entries; the handle is live.
        read_ids(guess, |ids, capacity, needed, err| unsafe {
            sys::pvllm_tokenizer_encode(
                self.raw(),
                text.as_ptr(),
                u8::from(add_special_tokens),
                ids,
                capacity,
                needed,
                err,
            )
        })
    }

    /// Decodes token ids into text. [`Status::InvalidArgument`] for an id
    /// outside the vocabulary.
    pub fn decode(&self, ids: &[TokenId]) -> Result<String> {
        // SAFETY: `text` has `capacity` writable bytes; `ids` is read only
        // during the call.
        read_text(ids.len() * 8, |text, capacity, len, err| unsafe {
            sys::pvllm_tokenizer_decode(
                self.raw(),
                if ids.is_empty() {
                    ptr::null()
                } else {
                    ids.as_ptr()
                },
                ids.len(),
                text,
                capacity,
                len,
                err,
            )
        })
    }

    /// Renders the model's chat template over `messages_json`, as
    /// [`Engine::apply_chat_template`](crate::Engine::apply_chat_template)
    /// does, with the same errors. The text usually starts with the BOS
    /// token's text: encode it with `add_special_tokens` off, or submit it
    /// with [`Request::add_special_tokens`](crate::Request::add_special_tokens)
    /// off.
    pub fn apply_chat_template(
        &self,
        messages_json: &str,
        options: &ChatTemplateOptions,
    ) -> Result<String> {
        let params = options.to_raw(messages_json)?;
        // SAFETY: the strings `params` points to live until the call
        // returns; `text` has `capacity` writable bytes.
        read_text(256, |text, capacity, len, err| unsafe {
            sys::pvllm_tokenizer_apply_chat_template(
                self.raw(),
                &params.raw,
                text,
                capacity,
                len,
                err,
            )
        })
    }

    /// What the tokenizer is: vocabulary, special tokens, where it came
    /// from.
    pub fn info(&self) -> Result<TokenizerInfo> {
        // SAFETY: init fills struct_size and the defaults of every field.
        let mut info = unsafe {
            let mut info = std::mem::MaybeUninit::<sys::pvllm_tokenizer_info>::zeroed();
            sys::pvllm_tokenizer_info_init(
                info.as_mut_ptr(),
                std::mem::size_of::<sys::pvllm_tokenizer_info>(),
            );
            info.assume_init()
        };
        // SAFETY: a live handle and an initialised struct.
        check(|err| unsafe { sys::pvllm_tokenizer_get_info(self.raw(), &mut info, err) })?;
        // SAFETY: the strings are NULL or NUL-terminated and live as long as
        // the handle, which `&self` keeps; they are copied here.
        let (bos_token, eos_token, kind, source) = unsafe {
            (
                owned(info.bos_token),
                owned(info.eos_token),
                owned(info.kind),
                owned_path(info.source),
            )
        };
        Ok(TokenizerInfo {
            vocab_size: info.vocab_size.max(0) as usize,
            bos_id: Some(info.bos_id).filter(|&id| id >= 0),
            eos_id: Some(info.eos_id).filter(|&id| id >= 0),
            bos_token,
            eos_token,
            kind,
            source,
            adds_bos: info.adds_bos != 0,
            has_chat_template: info.has_chat_template != 0,
        })
    }
}

/// A copy of a C string, `""` for NULL.
///
/// # Safety
/// `text` is NULL or points to a NUL-terminated string.
unsafe fn owned(text: *const c_char) -> String {
    if text.is_null() {
        String::new()
    } else {
        CStr::from_ptr(text).to_string_lossy().into_owned()
    }
}

/// A copy of a C string naming a file, `None` for NULL or `""`.
///
/// # Safety
/// As [`owned`].
unsafe fn owned_path(text: *const c_char) -> Option<PathBuf> {
    if text.is_null() || *text == 0 {
        return None;
    }
    let bytes = CStr::from_ptr(text).to_bytes();
    #[cfg(unix)]
    let path = {
        use std::os::unix::ffi::OsStrExt;
        PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
    };
    #[cfg(not(unix))]
    let path = PathBuf::from(String::from_utf8_lossy(bytes).into_owned());
    Some(path)
}
