using System;

namespace Pvllm
{
    /// <summary>pvllm_kv_allocator: how sequences reserve KV slots.</summary>
    public enum KvAllocator
    {
        /// <summary>Blocks are taken as tokens arrive; forks share blocks copy-on-write; prefix caching as enabled.</summary>
        Paged = 0,
        /// <summary>
        /// The baseline for memory measurements: each sequence reserves max_model_len
        /// slots up front in one run of blocks; no prefix caching. Same outputs, more memory.
        /// </summary>
        Contiguous = 1,
    }

    /// <summary>pvllm_dtype: weights, activations and K/V on the GPU.</summary>
    public enum Dtype
    {
        /// <summary>bf16, or fp16 for fp16 checkpoints.</summary>
        Auto = 0,
        Bf16 = 1,
        Fp16 = 2,
        /// <summary>IEEE fp32 throughout, no TF32: matches the CPU engine token for token. Since 0.8 (an older library refuses it).</summary>
        Fp32 = 3,
    }

    /// <summary>
    /// pvllm_kv_cache_dtype: what the KV cache stores. The 8-bit types keep one fp16
    /// scale per (block, kv head, token), so a row of K or V costs head_dim + 2 bytes
    /// instead of 4 * head_dim in F32. Since 0.11.
    /// </summary>
    public enum KvCacheDtype
    {
        /// <summary>The backend's own: F32 on the CPU, the activation dtype on CUDA.</summary>
        Auto = 0,
        /// <summary>IEEE half, rounded to nearest even.</summary>
        F16 = 1,
        /// <summary>bfloat16, rounded to nearest even.</summary>
        Bf16 = 2,
        /// <summary>int8 codes, one fp16 scale (absmax / 127) per token and kv head.</summary>
        Int8 = 3,
        /// <summary>fp8 e4m3 codes, one fp16 scale (absmax / 448) per token and kv head; CUDA only.</summary>
        Fp8E4M3 = 4,
        /// <summary>IEEE fp32.</summary>
        F32 = 5,
    }

    /// <summary>
    /// pvllm_preemption_mode: how a running sequence makes room when the KV pool
    /// runs dry. Every mode gives the same tokens. Since 0.5.
    /// </summary>
    public enum PreemptionMode
    {
        /// <summary>Free its blocks; compute its tokens again later.</summary>
        Recompute = 0,
        /// <summary>Copy its K/V to the host swap space and back.</summary>
        Swap = 1,
        /// <summary>Per victim, whichever the backend estimates cheaper.</summary>
        Auto = 2,
    }

    /// <summary>
    /// pvllm_model_checksums: when a .pvllm model file's tensor checksums are
    /// checked. Its header is always checked; a damaged tensor makes
    /// Engine.Create throw with Status.CorruptModel naming it. Other model
    /// formats have no checksums. Since 0.7.
    /// </summary>
    public enum ModelChecksums
    {
        /// <summary>Every tensor while the model loads.</summary>
        Full = 0,
        /// <summary>Each tensor as the engine first reads it: the file is read once.</summary>
        Lazy = 1,
        /// <summary>No tensor.</summary>
        None = 2,
    }

    /// <summary>
    /// pvllm_engine_params. A new instance holds the library's defaults
    /// (pvllm_engine_params_init); only ModelPath is required.
    /// </summary>
    public sealed class EngineOptions
    {
        public EngineOptions() : this(null) { }

        public EngineOptions(string modelPath)
        {
            var p = NativeStruct.Init<NativeMethods.pvllm_engine_params>(NativeMethods.pvllm_engine_params_init);
            ModelPath = modelPath;
            Device = p.device == IntPtr.Zero ? null : Utf8.FromNative(p.device);
            BlockSize = p.block_size;
            KvCacheBytes = p.kv_cache_bytes;
            NumKvBlocks = p.num_kv_blocks;
            MaxNumSeqs = p.max_num_seqs;
            MaxNumBatchedTokens = p.max_num_batched_tokens;
            MaxModelLen = p.max_model_len;
            EnablePrefixCaching = p.enable_prefix_caching != 0;
            NumThreads = p.num_threads;
            KvAllocator = (KvAllocator)p.kv_allocator;
            RandomWeights = null;
            GpuMemoryUtilization = p.gpu_memory_utilization;
            Dtype = (Dtype)p.dtype;
            EnableCudaGraphs = p.enable_cuda_graphs != 0;
            SwapSpaceBytes = p.swap_space_bytes;
            PreemptionMode = (PreemptionMode)p.preemption_mode;
            ModelChecksums = (ModelChecksums)p.model_checksums;
            Quantize = null;
            KvCacheDtype = (KvCacheDtype)p.kv_cache_dtype;
        }

        /// <summary>A Hugging Face folder, a llama2.c .bin with a tokenizer.model beside it, or a .pvllm file.</summary>
        public string ModelPath { get; set; }
        /// <summary>"cpu" or "auto"; null keeps the library's default.</summary>
        public string Device { get; set; }
        /// <summary>Tokens per KV block: 8..256, a power of two; default 16.</summary>
        public int BlockSize { get; set; }
        /// <summary>KV budget in bytes when NumKvBlocks is 0; default 256 MiB.</summary>
        public long KvCacheBytes { get; set; }
        /// <summary>Exact KV block count; 0 = from KvCacheBytes.</summary>
        public int NumKvBlocks { get; set; }
        /// <summary>Sequences running at once; default 256.</summary>
        public int MaxNumSeqs { get; set; }
        /// <summary>Tokens fed per step; default 2048.</summary>
        public int MaxNumBatchedTokens { get; set; }
        /// <summary>Context length; 0 = the model's.</summary>
        public int MaxModelLen { get; set; }
        public bool EnablePrefixCaching { get; set; }
        /// <summary>CPU threads; 0 = all cores.</summary>
        public int NumThreads { get; set; }
        /// <summary>How sequences reserve KV slots; default Paged.</summary>
        public KvAllocator KvAllocator { get; set; }
        /// <summary>
        /// A shape name ("tiny", "tinyllama-1.1b", "llama-2-7b", "llama-3-8b") builds that
        /// model with random weights in memory for benchmarks (ModelPath is ignored; no
        /// tokenizer, so submit token ids); null loads ModelPath.
        /// </summary>
        public string RandomWeights { get; set; }
        /// <summary>CUDA only: the share of free GPU memory the KV pool takes; default 0.90.</summary>
        public float GpuMemoryUtilization { get; set; }
        /// <summary>CUDA only: weight, activation and K/V dtype; default Auto.</summary>
        public Dtype Dtype { get; set; }
        /// <summary>CUDA only: replay CUDA graphs for pure-decode steps; default true.</summary>
        public bool EnableCudaGraphs { get; set; }
        /// <summary>How a running sequence makes room; default Recompute. Since 0.5.</summary>
        public PreemptionMode PreemptionMode { get; set; }
        /// <summary>The host swap space of Swap and Auto in bytes; 0 = as many blocks as the KV pool. Since 0.5.</summary>
        public long SwapSpaceBytes { get; set; }
        /// <summary>When a .pvllm file's tensor checksums are checked; default Full. Since 0.7.</summary>
        public ModelChecksums ModelChecksums { get; set; }
        /// <summary>
        /// Quantize the weight matrices while loading, by a scheme of llama-quantize's:
        /// "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "q2_k", "q3_k", "q4_k",
        /// "q5_k", "q6_k", "iq4_xs", "q4_k_m" or "q5_k_m"; null or "" (default) keeps
        /// the weights as stored. Quantized weights run on the CPU (Device "auto"
        /// lands there, "cuda" is Unsupported) and Engine.EstimateMemory counts them
        /// quantized. An unknown scheme is InvalidArgument naming the schemes; a model
        /// already quantized (a quantized GGUF file) is Unsupported. Needs libpvllm
        /// 0.10 (Unsupported before). Since 0.10.
        /// </summary>
        public string Quantize { get; set; }
        /// <summary>
        /// What the KV cache stores; default Auto (F32 on the CPU, the activation dtype on
        /// CUDA). The CPU serves Auto, F32, F16, Bf16 and Int8; CUDA serves Auto, Int8,
        /// Fp8E4M3 and the one of F16, Bf16 and F32 that equals its activation dtype. Any
        /// other pairing is Unsupported from Engine.Create and Engine.EstimateMemory, naming
        /// the dtypes that device serves; a value outside the enum is InvalidArgument.
        /// MemoryEstimate.KvBytesPerBlock, and so the blocks KvCacheBytes buys, follow it.
        /// Needs libpvllm 0.11 (Unsupported before, for anything but Auto). Since 0.11.
        /// </summary>
        public KvCacheDtype KvCacheDtype { get; set; }
        /// <summary>
        /// Called while the engine loads, on the thread inside Engine.Create, with
        /// a fraction in [0, 1] and a short stage description. An exception it
        /// throws is rethrown by Engine.Create once the library returns.
        /// </summary>
        public Action<float, string> Progress { get; set; }

        /// <summary>The C struct without its progress callback; strings live in `scope`.</summary>
        internal NativeMethods.pvllm_engine_params ToNative(NativeScope scope)
        {
            var p = NativeStruct.Init<NativeMethods.pvllm_engine_params>(NativeMethods.pvllm_engine_params_init);
            p.model_path = scope.Utf8String(ModelPath);
            if (Device != null) p.device = scope.Utf8String(Device);
            p.block_size = BlockSize;
            p.kv_cache_bytes = KvCacheBytes;
            p.num_kv_blocks = NumKvBlocks;
            p.max_num_seqs = MaxNumSeqs;
            p.max_num_batched_tokens = MaxNumBatchedTokens;
            p.max_model_len = MaxModelLen;
            p.enable_prefix_caching = EnablePrefixCaching ? (byte)1 : (byte)0;
            p.num_threads = NumThreads;
            p.kv_allocator = (int)KvAllocator;
            if (RandomWeights != null) p.random_weights = scope.Utf8String(RandomWeights);
            p.gpu_memory_utilization = GpuMemoryUtilization;
            p.dtype = (int)Dtype;
            p.enable_cuda_graphs = EnableCudaGraphs ? (byte)1 : (byte)0;
            p.swap_space_bytes = SwapSpaceBytes;
            p.preemption_mode = (int)PreemptionMode;
            p.model_checksums = (long)ModelChecksums;
            if (!string.IsNullOrEmpty(Quantize))
            {
                Library.Require(NativeMethods.VersionNumber010, "EngineOptions.Quantize");
                p.quantize = scope.NulFreeUtf8String(Quantize, "EngineOptions.Quantize");
            }
            if (KvCacheDtype != KvCacheDtype.Auto)
            {
                Library.Require(NativeMethods.VersionNumber011, "EngineOptions.KvCacheDtype");
                p.kv_cache_dtype = (int)KvCacheDtype;
            }
            return p;
        }
    }
}
