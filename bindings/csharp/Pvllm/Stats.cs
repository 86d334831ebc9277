namespace Pvllm
{
    /// <summary>pvllm_stats: a snapshot taken after the latest step.</summary>
    public sealed class EngineStats
    {
        internal unsafe EngineStats(NativeMethods.pvllm_stats s)
        {
            int length = 0;
            while (length < 32 && s.backend[length] != 0) length++;
            Backend = Utf8.FromNative((System.IntPtr)s.backend, length);
            NumRunning = s.num_running;
            NumWaiting = s.num_waiting;
            NumBlocksTotal = s.num_blocks_total;
            NumBlocksUsed = s.num_blocks_used;
            NumBlocksFree = s.num_blocks_free;
            NumBlocksCached = s.num_blocks_cached;
            KvUtilization = s.kv_utilization;
            ReservedUnusedSlots = s.reserved_unused_slots;
            PrefixCacheHitRate = s.prefix_cache_hit_rate;
            PrefixCacheHits = s.prefix_cache_hits;
            PrefixCacheQueries = s.prefix_cache_queries;
            NumPreemptions = s.num_preemptions;
            NumPromptTokensProcessed = s.num_prompt_tokens_processed;
            NumGenerationTokens = s.num_generation_tokens;
            NumCachedPromptTokens = s.num_cached_prompt_tokens;
            NumSteps = s.num_steps;
            NumRequestsFinished = s.num_requests_finished;
            NumKvTokensStored = s.num_kv_tokens_stored;
            NumKvSlotsReserved = s.num_kv_slots_reserved;
            NumSeqsQueuedForMemory = s.num_seqs_queued_for_memory;
            NumBlockCopies = s.num_block_copies;
            NumPrefixCacheEvictions = s.num_prefix_cache_evictions;
            StepTimeP50Ms = s.step_time_p50_ms;
            StepTimeP99Ms = s.step_time_p99_ms;
            StepTimeMaxMs = s.step_time_max_ms;
            NumPreemptionsBySwap = s.num_preemptions_by_swap;
            NumBlocksSwappedOut = s.num_blocks_swapped_out;
            NumBlocksSwappedIn = s.num_blocks_swapped_in;
            NumSwapBytes = s.num_swap_bytes;
            NumKvTokensAttended = s.num_kv_tokens_attended;
        }

        /// <summary>Sequences in the running set.</summary>
        public int NumRunning { get; }
        /// <summary>Sequences waiting, including just submitted ones.</summary>
        public int NumWaiting { get; }
        public int NumBlocksTotal { get; }
        public int NumBlocksUsed { get; }
        public int NumBlocksFree { get; }
        /// <summary>Unused blocks holding reusable prefix K/V.</summary>
        public int NumBlocksCached { get; }
        /// <summary>Used / total.</summary>
        public float KvUtilization { get; }
        public long ReservedUnusedSlots { get; }
        /// <summary>Hit blocks / looked-up blocks.</summary>
        public float PrefixCacheHitRate { get; }
        public long PrefixCacheHits { get; }
        public long PrefixCacheQueries { get; }
        public long NumPreemptions { get; }
        /// <summary>Prefill tokens fed to the model.</summary>
        public long NumPromptTokensProcessed { get; }
        /// <summary>Tokens sampled.</summary>
        public long NumGenerationTokens { get; }
        /// <summary>Prefill skipped by the prefix cache.</summary>
        public long NumCachedPromptTokens { get; }
        public long NumSteps { get; }
        public long NumRequestsFinished { get; }


        /// <summary>Slots holding computed K/V, over the distinct blocks of running sequences.</summary>
        public long NumKvTokensStored { get; }
        /// <summary>Slots reserved, over the distinct blocks of running sequences.</summary>
        public long NumKvSlotsReserved { get; }
        /// <summary>Sequences that admission refused at least once for lack of KV blocks.</summary>
        public long NumSeqsQueuedForMemory { get; }
        /// <summary>Blocks copied: copy-on-write, and contiguous-mode forks.</summary>
        public long NumBlockCopies { get; }
        /// <summary>The backend serving the engine: "cuda", or "cpu (avx2)" and the like (since 0.4).</summary>
        public string Backend { get; }
        /// <summary>Cached prefix blocks reclaimed for new use (since 0.5).</summary>
        public long NumPrefixCacheEvictions { get; }
        /// <summary>Wall time of the steps that ran a batch, over the latest 1024 (since 0.5).</summary>
        public float StepTimeP50Ms { get; }
        public float StepTimeP99Ms { get; }
        public float StepTimeMaxMs { get; }
        /// <summary>Preemptions that swapped (NumPreemptions counts both kinds; since 0.5).</summary>
        public long NumPreemptionsBySwap { get; }
        public long NumBlocksSwappedOut { get; }
        public long NumBlocksSwappedIn { get; }
        /// <summary>Bytes moved to and from the swap space (since 0.5).</summary>
        public long NumSwapBytes { get; }
        /// <summary>Context positions attention read, over every step: the whole context of each computed
        /// sequence after its step, or the last sliding_window of it (since 0.8; 0 with an older library).</summary>
        public long NumKvTokensAttended { get; }
    }

    /// <summary>pvllm_memory_estimate: what Engine.Create would need.</summary>
    public sealed class MemoryEstimate
    {
        internal MemoryEstimate(NativeMethods.pvllm_memory_estimate e)
        {
            WeightBytes = e.weight_bytes;
            KvBytesPerBlock = e.kv_bytes_per_block;
            NumBlocks = e.num_blocks;
            KvBytesTotal = e.kv_bytes_total;
            MaxTokensInCache = e.max_tokens_in_cache;
            ActivationBytes = e.activation_bytes;
            SwapBytes = e.swap_bytes;
        }

        /// <summary>Weights as stored.</summary>
        public ulong WeightBytes { get; }
        /// <summary>K and V of all layers for one block.</summary>
        public ulong KvBytesPerBlock { get; }
        /// <summary>What the options' KV budget buys.</summary>
        public int NumBlocks { get; }
        public ulong KvBytesTotal { get; }
        /// <summary>NumBlocks * BlockSize.</summary>
        public long MaxTokensInCache { get; }
        /// <summary>On the CPU: the activation buffers at their largest (since 0.4).</summary>
        public ulong ActivationBytes { get; }
        /// <summary>On the CPU: the host swap space of PreemptionMode Swap or Auto (since 0.5).</summary>
        public ulong SwapBytes { get; }
    }
}
