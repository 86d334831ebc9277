//! Engine configuration and the memory estimate made from it.
use std::convert::TryFrom;
use std::ffi::CString;
use std::path::{Path, PathBuf};

use pvllm_sys as sys;

use crate::error::{check, Error, Result, Status};

/// How to build an [`Engine`](crate::Engine): the model and the KV-cache and
/// batching limits. Every setting left alone keeps the library's default
/// (from `pvllm_engine_params_init`).
///
/// ```no_run
/// # fn main() -> pvllm::Result<()> {
/// let config = pvllm::EngineConfig::new("models/llama")
///     .kv_cache_bytes(64 << 20)
///     .max_num_seqs(32)
///     .num_threads(4);
/// let engine = pvllm::Engine::new(&config)?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineConfig {
    model_path: PathBuf,
    device: Option<String>,
    block_size: Option<u32>,
    kv_cache_bytes: Option<u64>,
    num_kv_blocks: Option<u32>,
    max_num_seqs: Option<u32>,
    max_num_batched_tokens: Option<u32>,
    max_model_len: Option<u32>,
    enable_prefix_caching: Option<bool>,
    num_threads: Option<u32>,
    kv_allocator: Option<KvAllocator>,
    random_weights: Option<String>,
    // f32 bits, so that the config stays `Eq`.
    gpu_memory_utilization_bits: Option<u32>,
    dtype: Option<Dtype>,
    enable_cuda_graphs: Option<bool>,
    preemption_mode: Option<PreemptionMode>,
    swap_space_bytes: Option<u64>,
    model_checksums: Option<ModelChecksums>,
    quantize: Option<String>,
    kv_cache_dtype: Option<KvCacheDtype>,
}

/// When a `.pvllm` model file's tensor checksums are checked
/// (`pvllm_model_checksums`, libpvllm 0.7). The file's header is always
/// checked; a tensor that does not match fails engine creation with
/// [`crate::Status::CorruptModel`]. Other model formats have no checksums.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModelChecksums {
    /// Every tensor, while the model loads (the default).
    Full,
    /// Each tensor as the engine first reads it, later in creation: the
    /// file is read once.
    Lazy,
    /// None.
    None,
}

/// How a running sequence makes room when the KV pool runs dry
/// (`pvllm_preemption_mode`, libpvllm 0.5). Every mode gives the same
/// tokens; they differ in what a preemption costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PreemptionMode {
    /// Free its blocks; compute its tokens again when it comes back.
    Recompute,
    /// Copy its K/V to the host swap space and back.
    Swap,
    /// Per victim, whichever the backend estimates cheaper.
    Auto,
}

/// Weight, activation and K/V dtype on a GPU (`pvllm_dtype`); the CPU
/// computes in f32 whatever this says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// bf16, or fp16 for an fp16 checkpoint (the default).
    Auto,
    /// bfloat16.
    Bf16,
    /// IEEE half.
    Fp16,
    /// IEEE fp32 throughout, no TF32: matches the CPU engine token for
    /// token (libpvllm 0.8; an older library refuses it).
    Fp32,
}

/// What the KV cache stores (`pvllm_kv_cache_dtype`, libpvllm 0.11). The
/// 8-bit types keep one fp16 scale per (block, kv head, token), so a block
/// costs `head_dim + 2` bytes per row of K or V instead of `4 * head_dim`
/// in f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KvCacheDtype {
    /// The backend's own (the default): f32 on the CPU, the activation
    /// dtype ([`Dtype`]) on CUDA.
    Auto,
    /// IEEE fp32.
    F32,
    /// IEEE half, rounded to nearest even.
    F16,
    /// bfloat16, rounded to nearest even.
    Bf16,
    /// 8-bit integer codes, one fp16 scale (absmax / 127) per token and kv
    /// head.
    Int8,
    /// fp8 e4m3 codes, one fp16 scale (absmax / 448) per token and kv head;
    /// CUDA only ([`Status::Unsupported`] on the CPU).
    Fp8E4m3,
}

impl KvCacheDtype {
    /// The name the CLI and pvllm-server take: `"auto"`, `"f32"`, `"f16"`,
    /// `"bf16"`, `"int8"` or `"fp8_e4m3"`.
    pub fn name(self) -> &'static str {
        match self {
            KvCacheDtype::Auto => "auto",
            KvCacheDtype::F32 => "f32",
            KvCacheDtype::F16 => "f16",
            KvCacheDtype::Bf16 => "bf16",
            KvCacheDtype::Int8 => "int8",
            KvCacheDtype::Fp8E4m3 => "fp8_e4m3",
        }
    }

    /// The `pvllm_kv_cache_dtype` value.
    pub(crate) fn to_raw(self) -> i32 {
        (match self {
            KvCacheDtype::Auto => sys::pvllm_kv_cache_dtype_PVLLM_KV_CACHE_DTYPE_AUTO,
            KvCacheDtype::F32 => sys::pvllm_kv_cache_dtype_PVLLM_KV_CACHE_DTYPE_F32,
            KvCacheDtype::F16 => sys::pvllm_kv_cache_dtype_PVLLM_KV_CACHE_DTYPE_F16,
            KvCacheDtype::Bf16 => sys::pvllm_kv_cache_dtype_PVLLM_KV_CACHE_DTYPE_BF16,
            KvCacheDtype::Int8 => sys::pvllm_kv_cache_dtype_PVLLM_KV_CACHE_DTYPE_INT8,
            KvCacheDtype::Fp8E4m3 => sys::pvllm_kv_cache_dtype_PVLLM_KV_CACHE_DTYPE_FP8_E4M3,
        }) as i32
    }
}

impl std::fmt::Display for KvCacheDtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for KvCacheDtype {
    type Err = Error;

    /// A name as [`KvCacheDtype::name`] gives it, case-insensitive, or one
    /// of the aliases `fp32`, `fp16` and `fp8`; anything else is
    /// [`Status::InvalidArgument`] listing the names.
    fn from_str(name: &str) -> Result<KvCacheDtype> {
        match name.to_ascii_lowercase().as_str() {
            "auto" => Ok(KvCacheDtype::Auto),
            "f32" | "fp32" => Ok(KvCacheDtype::F32),
            "f16" | "fp16" => Ok(KvCacheDtype::F16),
            "bf16" => Ok(KvCacheDtype::Bf16),
            "int8" => Ok(KvCacheDtype::Int8),
            "fp8_e4m3" | "fp8" => Ok(KvCacheDtype::Fp8E4m3),
            _ => Err(Error::new(
                Status::InvalidArgument,
                format!(
                    "unknown KV cache dtype {:?} (auto, f32, f16, bf16, int8, fp8_e4m3)",
                    name
                ),
            )),
        }
    }
}

/// How sequences reserve KV slots (`pvllm_kv_allocator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KvAllocator {
    /// Blocks are taken as tokens arrive; forks share blocks copy-on-write
    /// (the default).
    Paged,
    /// The baseline for memory measurements: each sequence reserves
    /// `max_model_len` slots up front. Same outputs, more memory.
    Contiguous,
}

impl EngineConfig {
    /// A Hugging Face folder (config.json, *.safetensors, tokenizer.model),
    /// a llama2.c `.bin` with a tokenizer.model beside it, or a `.pvllm`
    /// file (`pvllm convert`).
    pub fn new(model_path: impl AsRef<Path>) -> EngineConfig {
        EngineConfig {
            model_path: model_path.as_ref().to_path_buf(),
            device: None,
            block_size: None,
            kv_cache_bytes: None,
            num_kv_blocks: None,
            max_num_seqs: None,
            max_num_batched_tokens: None,
            max_model_len: None,
            enable_prefix_caching: None,
            num_threads: None,
            kv_allocator: None,
            random_weights: None,
            gpu_memory_utilization_bits: None,
            dtype: None,
            enable_cuda_graphs: None,
            preemption_mode: None,
            swap_space_bytes: None,
            model_checksums: None,
            quantize: None,
            kv_cache_dtype: None,
        }
    }

    /// A model of a standard shape (`"tiny"`, `"tinyllama-1.1b"`,
    /// `"llama-2-7b"`, `"llama-3-8b"`) built in memory with random weights,
    /// for benchmarks. It has no tokenizer: submit token ids.
    pub fn random_weights(shape: impl Into<String>) -> EngineConfig {
        let mut config = EngineConfig::new("");
        config.random_weights = Some(shape.into());
        config
    }

    /// The model path given to [`EngineConfig::new`].
    pub fn model_path(&self) -> &Path {
        &self.model_path
    }

    /// `"auto"` (the default: the first GPU when the CUDA module and a
    /// driver are there, else the CPU), `"cpu"`, `"cuda"` or `"cuda:N"`.
    pub fn device(mut self, device: impl Into<String>) -> Self {
        self.device = Some(device.into());
        self
    }

    /// Tokens per KV block: a power of two in 8..=256 (default 16).
    pub fn block_size(mut self, tokens: u32) -> Self {
        self.block_size = Some(tokens);
        self
    }

    /// The KV-cache budget in bytes, used when no exact block count is set
    /// (default 256 MiB).
    pub fn kv_cache_bytes(mut self, bytes: u64) -> Self {
        self.kv_cache_bytes = Some(bytes);
        self
    }

    /// An exact number of KV blocks; overrides [`kv_cache_bytes`](Self::kv_cache_bytes).
    pub fn num_kv_blocks(mut self, blocks: u32) -> Self {
        self.num_kv_blocks = Some(blocks);
        self
    }

    /// Sequences running at once (default 256).
    pub fn max_num_seqs(mut self, seqs: u32) -> Self {
        self.max_num_seqs = Some(seqs);
        self
    }

    /// Tokens fed to the model per step (default 2048).
    pub fn max_num_batched_tokens(mut self, tokens: u32) -> Self {
        self.max_num_batched_tokens = Some(tokens);
        self
    }

    /// The context length; the model's own by default.
    pub fn max_model_len(mut self, tokens: u32) -> Self {
        self.max_model_len = Some(tokens);
        self
    }

    /// Reuse the KV blocks of shared prompt prefixes (default on).
    pub fn enable_prefix_caching(mut self, enable: bool) -> Self {
        self.enable_prefix_caching = Some(enable);
        self
    }

    /// CPU threads; 0 (the default) uses every core.
    pub fn num_threads(mut self, threads: u32) -> Self {
        self.num_threads = Some(threads);
        self
    }

    /// How sequences reserve KV slots (default [`KvAllocator::Paged`]).
    /// A library older than this setting ignores it.
    pub fn kv_allocator(mut self, allocator: KvAllocator) -> Self {
        self.kv_allocator = Some(allocator);
        self
    }

    /// On a GPU, the share of free device memory (after weights and
    /// activations) the KV pool takes, in (0, 1] (default 0.90); a value
    /// outside that range is an `InvalidArgument` from [`Engine::new`].
    /// Ignored on the CPU.
    ///
    /// [`Engine::new`]: crate::Engine::new
    pub fn gpu_memory_utilization(mut self, fraction: f32) -> Self {
        self.gpu_memory_utilization_bits = Some(fraction.to_bits());
        self
    }

    /// The dtype weights, activations and K/V take on a GPU (default
    /// [`Dtype::Auto`]); f32 checkpoints are converted while uploading.
    pub fn dtype(mut self, dtype: Dtype) -> Self {
        self.dtype = Some(dtype);
        self
    }

    /// Whether pure-decode steps on a GPU replay captured CUDA graphs
    /// (default true); false launches every kernel eagerly.
    pub fn enable_cuda_graphs(mut self, enable: bool) -> Self {
        self.enable_cuda_graphs = Some(enable);
        self
    }

    /// How running sequences are preempted (default
    /// [`PreemptionMode::Recompute`]; libpvllm 0.5).
    pub fn preemption_mode(mut self, mode: PreemptionMode) -> Self {
        self.preemption_mode = Some(mode);
        self
    }

    /// The host swap space of [`PreemptionMode::Swap`] and
    /// [`PreemptionMode::Auto`], in bytes (default 0: as many blocks as the
    /// KV pool; libpvllm 0.5).
    pub fn swap_space_bytes(mut self, bytes: u64) -> Self {
        self.swap_space_bytes = Some(bytes);
        self
    }

    /// When a `.pvllm` model file's tensor checksums are checked (default
    /// [`ModelChecksums::Full`]; libpvllm 0.7).
    pub fn model_checksums(mut self, mode: ModelChecksums) -> Self {
        self.model_checksums = Some(mode);
        self
    }

    /// Quantize the weight matrices while loading, by a scheme of
    /// llama-quantize's (`pvllm_engine_params.quantize`, libpvllm 0.10):
    /// `"q8_0"`, `"q4_0"`, `"q4_1"`, `"q5_0"`, `"q5_1"`, `"iq4_nl"`,
    /// `"q2_k"`, `"q3_k"`, `"q4_k"`, `"q5_k"`, `"q6_k"`, `"iq4_xs"`,
    /// `"q4_k_m"` or `"q5_k_m"`; `""` (the default) keeps the weights as
    /// stored. Quantized weights run on the CPU (device `"auto"` lands
    /// there, `"cuda"` is [`Status::Unsupported`]), and
    /// [`estimate_memory`] counts them quantized. An unknown scheme is
    /// [`Status::InvalidArgument`] naming the schemes; a model already
    /// quantized (a quantized GGUF file) is [`Status::Unsupported`].
    pub fn quantize(mut self, scheme: impl Into<String>) -> Self {
        self.quantize = Some(scheme.into());
        self
    }

    /// What the KV cache stores (`pvllm_engine_params.kv_cache_dtype`,
    /// libpvllm 0.11; default [`KvCacheDtype::Auto`]). The CPU serves
    /// `Auto`, `F32`, `F16`, `Bf16` and `Int8`; CUDA serves `Auto`, `Int8`,
    /// `Fp8E4m3` and the one of `F16`, `Bf16` and `F32` that equals its
    /// activation dtype. Any other pairing is [`Status::Unsupported`] from
    /// [`Engine::new`](crate::Engine::new) and [`estimate_memory`], naming
    /// the dtypes that device serves. The bytes of a block
    /// ([`MemoryEstimate::kv_bytes_per_block`]), and so the blocks
    /// [`kv_cache_bytes`](Self::kv_cache_bytes) buys, follow the dtype.
    pub fn kv_cache_dtype(mut self, dtype: KvCacheDtype) -> Self {
        self.kv_cache_dtype = Some(dtype);
        self
    }

    /// The C parameter struct, with the strings it points into.
    pub(crate) fn to_raw(&self) -> Result<RawEngineParams> {
        let model_path = path_to_cstring(&self.model_path)?;
        let random_weights = match &self.random_weights {
            Some(s) => Some(CString::new(s.as_str()).map_err(|_| nul_error("random_weights"))?),
            None => None,
        };
        let device = match &self.device {
            Some(d) => Some(CString::new(d.as_str()).map_err(|_| nul_error("device"))?),
            None => None,
        };
        let quantize = match &self.quantize {
            Some(q) => Some(CString::new(q.as_str()).map_err(|_| nul_error("quantize"))?),
            None => None,
        };
        // SAFETY: pvllm_engine_params_init fills the fields that fit in the size we
        // pass (ours) and zeroes any it does not know.
        let mut raw = unsafe {
            let mut raw = std::mem::MaybeUninit::<sys::pvllm_engine_params>::zeroed();
            sys::pvllm_engine_params_init(
                raw.as_mut_ptr(),
                std::mem::size_of::<sys::pvllm_engine_params>(),
            );
            raw.assume_init()
        };
        raw.model_path = model_path.as_ptr();
        if let Some(r) = &random_weights {
            raw.random_weights = r.as_ptr();
        }
        if let Some(d) = &device {
            raw.device = d.as_ptr();
        }
        if let Some(v) = self.block_size {
            raw.block_size = to_i32("block_size", v)?;
        }
        if let Some(v) = self.kv_cache_bytes {
            raw.kv_cache_bytes = i64::try_from(v).map_err(|_| range_error("kv_cache_bytes", v))?;
        }
        if let Some(v) = self.num_kv_blocks {
            raw.num_kv_blocks = to_i32("num_kv_blocks", v)?;
        }
        if let Some(v) = self.max_num_seqs {
            raw.max_num_seqs = to_i32("max_num_seqs", v)?;
        }
        if let Some(v) = self.max_num_batched_tokens {
            raw.max_num_batched_tokens = to_i32("max_num_batched_tokens", v)?;
        }
        if let Some(v) = self.max_model_len {
            raw.max_model_len = to_i32("max_model_len", v)?;
        }
        if let Some(v) = self.enable_prefix_caching {
            raw.enable_prefix_caching = u8::from(v);
        }
        if let Some(v) = self.num_threads {
            raw.num_threads = to_i32("num_threads", v)?;
        }
        if let Some(v) = self.kv_allocator {
            raw.kv_allocator = match v {
                KvAllocator::Paged => sys::pvllm_kv_allocator_PVLLM_KV_ALLOCATOR_PAGED,
                KvAllocator::Contiguous => sys::pvllm_kv_allocator_PVLLM_KV_ALLOCATOR_CONTIGUOUS,
            } as i32;
        }
        if let Some(bits) = self.gpu_memory_utilization_bits {
            raw.gpu_memory_utilization = f32::from_bits(bits);
        }
        if let Some(v) = self.dtype {
            raw.dtype = match v {
                Dtype::Auto => sys::pvllm_dtype_PVLLM_DTYPE_AUTO,
                Dtype::Bf16 => sys::pvllm_dtype_PVLLM_DTYPE_BF16,
                Dtype::Fp16 => sys::pvllm_dtype_PVLLM_DTYPE_FP16,
                Dtype::Fp32 => sys::pvllm_dtype_PVLLM_DTYPE_FP32,
            } as i32;
        }
        if let Some(v) = self.enable_cuda_graphs {
            raw.enable_cuda_graphs = u8::from(v);
        }
        if let Some(mode) = self.preemption_mode {
            raw.preemption_mode = match mode {
                PreemptionMode::Recompute => sys::pvllm_preemption_mode_PVLLM_PREEMPTION_RECOMPUTE,
                PreemptionMode::Swap => sys::pvllm_preemption_mode_PVLLM_PREEMPTION_SWAP,
                PreemptionMode::Auto => sys::pvllm_preemption_mode_PVLLM_PREEMPTION_AUTO,
            } as i32;
        }
        if let Some(bytes) = self.swap_space_bytes {
            raw.swap_space_bytes =
                i64::try_from(bytes).map_err(|_| range_error("swap_space_bytes", bytes))?;
        }
        if let Some(q) = &quantize {
            raw.quantize = q.as_ptr();
        }
        if let Some(dtype) = self.kv_cache_dtype {
            raw.kv_cache_dtype = dtype.to_raw();
        }
        if let Some(mode) = self.model_checksums {
            raw.model_checksums = match mode {
                ModelChecksums::Full => sys::pvllm_model_checksums_PVLLM_MODEL_CHECKSUMS_FULL,
                ModelChecksums::Lazy => sys::pvllm_model_checksums_PVLLM_MODEL_CHECKSUMS_LAZY,
                ModelChecksums::None => sys::pvllm_model_checksums_PVLLM_MODEL_CHECKSUMS_NONE,
            } as i64;
        }
        Ok(RawEngineParams {
            raw,
            _model_path: model_path,
            _device: device,
            _random_weights: random_weights,
            _quantize: quantize,
        })
    }
}

/// `pvllm_engine_params` and the C strings its pointers refer to (a
/// CString's bytes stay put when the CString moves).
pub(crate) struct RawEngineParams {
    pub(crate) raw: sys::pvllm_engine_params,
    _model_path: CString,
    _device: Option<CString>,
    _random_weights: Option<CString>,
    _quantize: Option<CString>,
}

/// What creating an engine with a config would need, read from the model's
/// config and tensor table without loading weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryEstimate {
    /// Weights as stored, or as quantized with [`EngineConfig::quantize`].
    pub weight_bytes: u64,
    /// K and V of all layers for one block, in the
    /// [`EngineConfig::kv_cache_dtype`] chosen.
    pub kv_bytes_per_block: u64,
    /// Blocks the config's KV budget buys.
    pub num_blocks: i32,
    /// `num_blocks * kv_bytes_per_block`.
    pub kv_bytes_total: u64,
    /// `num_blocks * block_size`.
    pub max_tokens_in_cache: i64,
    /// On the CPU: the host swap space of [`PreemptionMode::Swap`] or
    /// [`PreemptionMode::Auto`] (libpvllm 0.5).
    pub swap_bytes: u64,
}

/// Estimates the memory [`Engine::new`](crate::Engine::new) would need for
/// `config`, without loading the model.
pub fn estimate_memory(config: &EngineConfig) -> Result<MemoryEstimate> {
    let params = config.to_raw()?;
    // SAFETY: init fills every field; the library writes the rest.
    let mut raw = unsafe {
        let mut raw = std::mem::MaybeUninit::<sys::pvllm_memory_estimate>::zeroed();
        sys::pvllm_memory_estimate_init(
            raw.as_mut_ptr(),
            std::mem::size_of::<sys::pvllm_memory_estimate>(),
        );
        raw.assume_init()
    };
    // SAFETY: both structs are initialised and outlive the call.
    check(|err| unsafe { sys::pvllm_estimate_memory(&params.raw, &mut raw, err) })?;
    Ok(MemoryEstimate {
        weight_bytes: raw.weight_bytes,
        kv_bytes_per_block: raw.kv_bytes_per_block,
        num_blocks: raw.num_blocks,
        kv_bytes_total: raw.kv_bytes_total,
        max_tokens_in_cache: raw.max_tokens_in_cache,
        swap_bytes: raw.swap_bytes,
    })
}

fn to_i32(name: &str, value: u32) -> Result<i32> {
    i32::try_from(value).map_err(|_| range_error(name, value))
}

fn range_error(name: &str, value: impl std::fmt::Display) -> Error {
    Error::new(
        Status::InvalidArgument,
        format!("{} = {} is out of range", name, value),
    )
}

pub(crate) fn nul_error(what: &str) -> Error {
    Error::new(
        Status::InvalidArgument,
        format!("{} contains a NUL byte", what),
    )
}

#[cfg(unix)]
pub(crate) fn path_to_cstring(path: &Path) -> Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes()).map_err(|_| nul_error("model path"))
}

#[cfg(not(unix))]
pub(crate) fn path_to_cstring(path: &Path) -> Result<CString> {
    let text = path.to_str().ok_or_else(|| {
        Error::new(
            Status::InvalidArgument,
            format!("model path {:?} is not UTF-8", path),
        )
    })?;
    CString::new(text).map_err(|_| nul_error("model path"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// models/stories260K/stories260K.bin of this checkout.
    fn stories260k() -> PathBuf {
        let model = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../../models/stories260K/stories260K.bin");
        assert!(model.exists(), "{} is missing", model.display());
        model
    }

    #[test]
    fn kv_cache_dtype_reaches_the_params() {
        let config = EngineConfig::new(stories260k());
        let auto = config.to_raw().unwrap();
        assert_eq!(
            auto.raw.kv_cache_dtype,
            sys::pvllm_kv_cache_dtype_PVLLM_KV_CACHE_DTYPE_AUTO as i32
        );
        let int8 = config.kv_cache_dtype(KvCacheDtype::Int8).to_raw().unwrap();
        assert_eq!(int8.raw.kv_cache_dtype, 3);
    }

    /// A value outside pvllm_kv_cache_dtype, which KvCacheDtype cannot
    /// express, is the library's InvalidArgument.
    #[test]
    fn an_out_of_range_kv_cache_dtype_is_an_invalid_argument() {
        let mut params = EngineConfig::new(stories260k())
            .device("cpu")
            .kv_cache_bytes(8 << 20)
            .to_raw()
            .unwrap();
        params.raw.kv_cache_dtype = 6;
        let mut estimate = unsafe {
            let mut raw = std::mem::MaybeUninit::<sys::pvllm_memory_estimate>::zeroed();
            sys::pvllm_memory_estimate_init(
                raw.as_mut_ptr(),
                std::mem::size_of::<sys::pvllm_memory_estimate>(),
            );
            raw.assume_init()
        };
        // SAFETY: both structs are initialised and outlive the call.
        let err =
            check(|err| unsafe { sys::pvllm_estimate_memory(&params.raw, &mut estimate, err) })
                .unwrap_err();
        assert_eq!(err.status(), Status::InvalidArgument, "{:?}", err);
        let mut engine: *mut sys::pvllm_engine = std::ptr::null_mut();
        // SAFETY: params is initialised; engine is null on failure.
        let err = check(|err| unsafe { sys::pvllm_engine_create(&params.raw, &mut engine, err) })
            .unwrap_err();
        assert_eq!(err.status(), Status::InvalidArgument, "{:?}", err);
        assert!(engine.is_null());
    }
}
