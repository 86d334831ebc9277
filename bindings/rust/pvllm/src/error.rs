//! The one error type: a pvllm status and its message.
use std::ffi::CStr;
use std::fmt;
use std::ptr;

use pvllm_sys as sys;

/// Why a call failed: the `pvllm_status` values of `pvllm.h` other than OK.
///
/// The C enum is only ever appended to; a value this crate does not know
/// yet arrives as [`Status::Unknown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// NULL, out of range or a wrong struct_size.
    InvalidArgument,
    /// A file, tensor or request that does not exist.
    NotFound,
    /// The operating system refused a file.
    IoError,
    /// A malformed or inconsistent model file.
    CorruptModel,
    /// Valid, but this build cannot serve it.
    Unsupported,
    /// Host/device memory or the KV pool is exhausted.
    OutOfMemory,
    /// A bug in pvllm.
    Internal,
    /// The tokenizer is missing or failed.
    TokenizerError,
    /// An output buffer was too small (the safe API sizes its buffers, so
    /// this is not expected here).
    BufferTooSmall,
    /// A wait ended before its request had an event (libpvllm 0.2;
    /// [`Engine::wait`](crate::Engine::wait) reports it as `Ok(false)`).
    Timeout,
    /// A status newer than this crate.
    Unknown(u32),
}

impl Status {
    pub(crate) fn from_raw(status: sys::pvllm_status) -> Status {
        match status {
            sys::pvllm_status_PVLLM_STATUS_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::pvllm_status_PVLLM_STATUS_NOT_FOUND => Status::NotFound,
            sys::pvllm_status_PVLLM_STATUS_IO_ERROR => Status::IoError,
            sys::pvllm_status_PVLLM_STATUS_CORRUPT_MODEL => Status::CorruptModel,
            sys::pvllm_status_PVLLM_STATUS_UNSUPPORTED => Status::Unsupported,
            sys::pvllm_status_PVLLM_STATUS_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::pvllm_status_PVLLM_STATUS_INTERNAL => Status::Internal,
            sys::pvllm_status_PVLLM_STATUS_TOKENIZER_ERROR => Status::TokenizerError,
            sys::pvllm_status_PVLLM_STATUS_BUFFER_TOO_SMALL => Status::BufferTooSmall,
            sys::pvllm_status_PVLLM_STATUS_TIMEOUT => Status::Timeout,
            other => Status::Unknown(other),
        }
    }

    /// The C value of this status.
    pub fn to_raw(self) -> u32 {
        match self {
            Status::InvalidArgument => sys::pvllm_status_PVLLM_STATUS_INVALID_ARGUMENT,
            Status::NotFound => sys::pvllm_status_PVLLM_STATUS_NOT_FOUND,
            Status::IoError => sys::pvllm_status_PVLLM_STATUS_IO_ERROR,
            Status::CorruptModel => sys::pvllm_status_PVLLM_STATUS_CORRUPT_MODEL,
            Status::Unsupported => sys::pvllm_status_PVLLM_STATUS_UNSUPPORTED,
            Status::OutOfMemory => sys::pvllm_status_PVLLM_STATUS_OUT_OF_MEMORY,
            Status::Internal => sys::pvllm_status_PVLLM_STATUS_INTERNAL,
            Status::TokenizerError => sys::pvllm_status_PVLLM_STATUS_TOKENIZER_ERROR,
            Status::BufferTooSmall => sys::pvllm_status_PVLLM_STATUS_BUFFER_TOO_SMALL,
            Status::Timeout => sys::pvllm_status_PVLLM_STATUS_TIMEOUT,
            Status::Unknown(raw) => raw,
        }
    }

    /// The library's constant name, e.g. `"PVLLM_STATUS_NOT_FOUND"`.
    pub fn name(self) -> &'static str {
        // SAFETY: pvllm_status_to_string returns a static NUL-terminated
        // string for every value, never NULL.
        let name = unsafe { CStr::from_ptr(sys::pvllm_status_to_string(self.to_raw())) };
        name.to_str().unwrap_or("PVLLM_STATUS_UNKNOWN")
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed call: the status and the library's message (which names the
/// file, parameter or request at fault).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
}

impl Error {
    /// An error made on the Rust side, before reaching the library (for
    /// example a string with an interior NUL).
    pub(crate) fn new(status: Status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
        }
    }

    /// The status.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.status)
        } else {
            write!(f, "{} ({})", self.message, self.status)
        }
    }
}

impl std::error::Error for Error {}

/// `Result<T, pvllm::Error>`.
pub type Result<T> = std::result::Result<T, Error>;

/// Runs one fallible C call with an error out-parameter and turns its
/// status into a `Result`. The error object is read and freed right here, so
/// the message belongs to this call whatever thread runs it.
pub(crate) fn check<F>(call: F) -> Result<()>
where
    F: FnOnce(*mut *mut sys::pvllm_error) -> sys::pvllm_status,
{
    let mut error: *mut sys::pvllm_error = ptr::null_mut();
    let status = call(&mut error);
    if status == sys::pvllm_status_PVLLM_STATUS_OK {
        // SAFETY: NULL is a no-op; on success the library sets NULL anyway.
        unsafe { sys::pvllm_error_free(error) };
        return Ok(());
    }
    // SAFETY: `error` is NULL or an error object the library gave us; the
    // message is valid until pvllm_error_free and copied before that.
    let message = unsafe {
        let text = CStr::from_ptr(sys::pvllm_error_message(error))
            .to_string_lossy()
            .into_owned();
        sys::pvllm_error_free(error);
        text
    };
    Err(Error {
        status: Status::from_raw(status),
        message,
    })
}

/// The text a C call writes into a buffer (text, capacity, &len, err),
/// starting with room for `guess` bytes and growing once when the call
/// answers BUFFER_TOO_SMALL with the length it needs. `call` must write at
/// most `capacity` bytes to `text`.
pub(crate) fn read_text<F>(guess: usize, mut call: F) -> Result<String>
where
    F: FnMut(
        *mut std::os::raw::c_char,
        usize,
        &mut usize,
        *mut *mut sys::pvllm_error,
    ) -> sys::pvllm_status,
{
    let mut text: Vec<u8> = vec![0; guess + 1];
    loop {
        let mut len = 0usize;
        let capacity = text.len();
        let result = check(|err| {
            call(
                text.as_mut_ptr() as *mut std::os::raw::c_char,
                capacity,
                &mut len,
                err,
            )
        });
        match result {
            Ok(()) => {
                text.truncate(len);
                return Ok(String::from_utf8_lossy(&text).into_owned());
            }
            Err(e) if e.status() == Status::BufferTooSmall && len + 1 > text.len() => {
                text.resize(len + 1, 0);
            }
            Err(e) => return Err(e),
        }
    }
}

/// The token ids a C call writes into an array (ids, capacity, &num_ids,
/// err), starting with room for `guess` ids and growing once when the call
/// answers BUFFER_TOO_SMALL with the number it needs. `call` must write at
/// most `capacity` ids.
pub(crate) fn read_ids<F>(guess: usize, mut call: F) -> Result<Vec<i32>>
where
    F: FnMut(*mut i32, usize, &mut usize, *mut *mut sys::pvllm_error) -> sys::pvllm_status,
{
    let mut ids: Vec<i32> = vec![0; guess];
    loop {
        let mut needed = 0usize;
        let capacity = ids.len();
        let result = check(|err| call(ids.as_mut_ptr(), capacity, &mut needed, err));
        match result {
            Ok(()) => {
                ids.truncate(needed);
                return Ok(ids);
            }
            Err(e) if e.status() == Status::BufferTooSmall && needed > ids.len() => {
                ids.resize(needed, 0);
            }
            Err(e) => return Err(e),
        }
    }
}
