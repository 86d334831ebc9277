// Raw P/Invoke declarations of capi/include/pvllm/pvllm.h, one for one.
//
// Every struct mirrors its C twin field by field (LayoutKind.Sequential, the
// platform's natural alignment, like the C compiler's); size_t is UIntPtr,
// uint8_t booleans are byte, and each IntPtr says its C type in a comment.
// Strings cross the boundary as NUL-terminated UTF-8 that the caller pins or
// allocates (see NativeScope): the runtime's default string marshalling is
// ANSI on Mono, which is not UTF-8 everywhere.
using System;
using System.Runtime.InteropServices;

namespace Pvllm
{
    internal static class NativeMethods
    {
        // On Mono, Pvllm.dll.config maps "pvllm" to libpvllm.so.1; .NET probes
        // libpvllm.so / pvllm.dll / libpvllm.dylib beside the app and in the
        // runtimes/<rid>/native folders of the package.
        internal const string Library = "pvllm";

        // PVLLM_ABI_VERSION this binding was written against.
        internal const uint AbiVersion = 1;

        // The oldest library release this binding calls into (0.6.0:
        // the sampling params' constraint fields, part of the struct it
        // passes; the engine params' model_checksums of 0.7.0 is not needed:
        // an older library ignores it, and it reads no .pvllm file anyway; 0.5.0: pvllm_output's timing, prompt logprobs and score, read as part of
        // the whole struct, and on_output handlers; 0.4.0 brought
        // pvllm_output.sequence; 0.3.0 pvllm_apply_chat_template; 0.2.0 the
        // per-request calls and pvllm_output.request_finished), as
        // PVLLM_VERSION_NUMBER counts.
        internal const uint MinVersionNumber = 600;

        // What 0.9.0 appended (pvllm_request.add_special_tokens,
        // pvllm_chat_template_params.chat_template, the pvllm_tokenizer
        // calls) is used only when asked for, after a check against this
        // (Library.Require): an older library would ignore the fields.
        internal const uint VersionNumber09 = 900;

        // What 0.10.0 appended (pvllm_engine_params.quantize) likewise: an
        // older library would ignore the field and serve unquantized weights.
        internal const uint VersionNumber010 = 1000;

        // What 0.11.0 appended (pvllm_engine_params.kv_cache_dtype) likewise: an
        // older library would ignore the field and store the backend's own dtype.
        internal const uint VersionNumber011 = 1100;

        // ---- Versions -----------------------------------------------------

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern uint pvllm_version_number();

        // Returns const char*: a static string, never freed.
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr pvllm_version();

        // Returns const char*: a static string, never freed (since 0.4).
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr pvllm_cpu_isa();

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern uint pvllm_abi_version();

        // ---- Status and errors --------------------------------------------

        // Returns const char*: a static string, never freed.
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr pvllm_status_to_string(PvllmStatus status);

        // Returns const char*: a static string, never freed. Since 0.2.
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr pvllm_finish_reason_to_string(int finishReason);

        // error: const pvllm_error*
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_error_status(IntPtr error);

        // error: const pvllm_error*; returns const char* valid until pvllm_error_free.
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr pvllm_error_message(IntPtr error);

        // error: pvllm_error*
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void pvllm_error_free(IntPtr error);

        // ---- Engine -------------------------------------------------------

        // typedef void (*pvllm_progress_fn)(float fraction, const char* stage, void* user_data);
        // stage: const char*, valid during the call; userData: void*
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void pvllm_progress_fn(float fraction, IntPtr stage, IntPtr userData);

        [StructLayout(LayoutKind.Sequential)]
        internal struct pvllm_engine_params
        {
            public uint struct_size;
            public IntPtr model_path;             // const char*
            public IntPtr device;                 // const char*
            public int block_size;
            public long kv_cache_bytes;
            public int num_kv_blocks;
            public int max_num_seqs;
            public int max_num_batched_tokens;
            public int max_model_len;
            public byte enable_prefix_caching;    // uint8_t boolean
            public int num_threads;
            public IntPtr progress;               // pvllm_progress_fn
            public IntPtr progress_user_data;     // void*
            public int kv_allocator;              // pvllm_kv_allocator
            public IntPtr random_weights;         // const char* (NUL-terminated UTF-8), or NULL
            public float gpu_memory_utilization;  // float, (0, 1]
            public int dtype;                     // pvllm_dtype
            public byte enable_cuda_graphs;       // uint8_t boolean
            public long swap_space_bytes;         // int64_t (since 0.5)
            public int preemption_mode;           // pvllm_preemption_mode (since 0.5)
            public long model_checksums;          // pvllm_model_checksums, int64_t (since 0.7)
            public IntPtr quantize;               // const char* (NUL-terminated UTF-8), or NULL (since 0.10)
            public int kv_cache_dtype;            // pvllm_kv_cache_dtype, int32_t (since 0.11)
            public IntPtr speculative;            // const char*: NULL, "off" or "ngram" (since 0.11)
            public int speculative_tokens;        // since 0.11
            public int ngram_min;                 // since 0.11
            public int ngram_max;                 // since 0.11
            public int speculative_max_running;   // since 0.11
        }

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void pvllm_engine_params_init(IntPtr parameters, UIntPtr structSize); // (pvllm_engine_params*, size_t); see NativeStruct.Init

        // outEngine: pvllm_engine**; error: pvllm_error**
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_engine_create(ref pvllm_engine_params parameters,
            out EngineHandle outEngine, out IntPtr error);

        // engine: pvllm_engine* (called by EngineHandle.ReleaseHandle only)
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void pvllm_engine_destroy(IntPtr engine);

        // ---- Requests -----------------------------------------------------

        [StructLayout(LayoutKind.Sequential)]
        internal struct pvllm_sampling_params
        {
            public uint struct_size;
            public float temperature;
            public int top_k;
            public float top_p;
            public float min_p;
            public float repetition_penalty;
            public float presence_penalty;
            public float frequency_penalty;
            public int max_tokens;
            public IntPtr stop_token_ids;         // const int32_t* [num_stop_token_ids]
            public UIntPtr num_stop_token_ids;    // size_t
            public IntPtr stop;                   // const char* const* [num_stop]
            public UIntPtr num_stop;              // size_t
            public byte ignore_eos;               // uint8_t boolean
            public int logprobs;
            public byte has_seed;                 // uint8_t boolean
            public ulong seed;
            public int n;
            public long prompt_logprobs;          // int64_t (since 0.5)
            public int beam_width;                // since 0.5
            public float length_penalty;          // since 0.5
            public int early_stopping;            // pvllm_early_stopping (since 0.5)
            public int constraint_kind;           // pvllm_constraint_kind (since 0.6)
            public IntPtr constraint;             // const char*: schema, grammar or regex (since 0.6)
            public IntPtr choices;                // const char* const* [num_choices] (since 0.6)
            public UIntPtr num_choices;           // size_t (since 0.6)
            public uint constraint_flags;         // pvllm_constraint_flag bits (since 0.11)
            public int speculative;               // 0 keeps the request out (since 0.11)
        }

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void pvllm_sampling_params_init(IntPtr parameters, UIntPtr structSize); // (pvllm_sampling_params*, size_t); see NativeStruct.Init

        [StructLayout(LayoutKind.Sequential)]
        internal struct pvllm_request
        {
            public uint struct_size;
            public IntPtr prompt_text;            // const char*
            public IntPtr prompt_token_ids;       // const int32_t* [num_prompt_token_ids]
            public UIntPtr num_prompt_token_ids;  // size_t
            public IntPtr sampling;               // const pvllm_sampling_params*
            public int priority;
            public long delivery;                 // int64_t, a pvllm_delivery (since 0.2)
            public IntPtr on_output;              // pvllm_output_callback or NULL (since 0.5)
            public IntPtr on_output_user_data;    // void* (since 0.5)
            public byte add_special_tokens;       // uint8_t boolean, default 1 (since 0.9)
        }

        // typedef void (*pvllm_output_callback)(const pvllm_output* output, void* user_data);
        // output: const pvllm_output*, valid during the call; userData: void*. Since 0.5.
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void pvllm_output_callback(IntPtr output, IntPtr userData);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void pvllm_request_init(IntPtr request, UIntPtr structSize); // (pvllm_request*, size_t); see NativeStruct.Init

        // engine: pvllm_engine*; error: pvllm_error**
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_submit(EngineHandle engine, ref pvllm_request request,
            out ulong outRequestId, out IntPtr error);

        // engine: pvllm_engine*; error: pvllm_error**
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_abort(EngineHandle engine, ulong requestId, out IntPtr error);

        // engine: pvllm_engine*; error: pvllm_error**. Since 0.2.
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_detach(EngineHandle engine, ulong requestId, out IntPtr error);

        // engine: pvllm_engine*; error: pvllm_error**
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_step(EngineHandle engine, out int outNumUnfinished,
            out IntPtr error);

        // ---- Outputs ------------------------------------------------------

        [StructLayout(LayoutKind.Sequential)]
        internal struct pvllm_logprob
        {
            public int token_id;
            public float logprob;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct pvllm_token_logprobs
        {
            public int token_id;
            public float logprob;
            public IntPtr top;                    // const pvllm_logprob* [num_top]
            public UIntPtr num_top;               // size_t
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct pvllm_output
        {
            public uint struct_size;
            public ulong request_id;
            public int sample_index;
            public IntPtr token_ids;              // const int32_t* [num_token_ids]
            public UIntPtr num_token_ids;         // size_t
            public IntPtr text;                   // const char* UTF-8 [text_len bytes + NUL]
            public UIntPtr text_len;              // size_t
            public int finish_reason;             // pvllm_finish_reason
            public IntPtr logprobs;               // const pvllm_token_logprobs* [num_token_ids] or NULL
            public IntPtr error_message;          // const char*
            public byte request_finished;         // uint8_t boolean (since 0.2)
            public ulong sequence;                // uint64_t (since 0.4)
            // Since 0.5: on the request's last event, its timing (seconds) and counts.
            public double time_queued;
            public double time_to_first_token;
            public double time_per_output_token;
            public double e2e_latency;
            public long num_prompt_tokens;
            public long num_prefill_tokens;
            public long num_cached_prompt_tokens;
            public long num_generated_tokens;
            public IntPtr prompt_logprobs;        // const pvllm_token_logprobs* [num_prompt_logprobs] or NULL
            public UIntPtr num_prompt_logprobs;   // size_t
            public double score;
        }

        // engine: pvllm_engine*; outBatch: pvllm_output_batch**; error: pvllm_error**
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_poll(EngineHandle engine, UIntPtr maxEvents,
            out OutputBatchHandle outBatch, out IntPtr error);

        // engine: pvllm_engine*; outBatch: pvllm_output_batch**; error: pvllm_error**. Since 0.2.
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_poll_request(EngineHandle engine, ulong requestId,
            UIntPtr maxEvents, out OutputBatchHandle outBatch, out IntPtr error);

        // engine: pvllm_engine*; timeoutMs: int32_t (-1 = PVLLM_WAIT_INFINITE); error: pvllm_error**.
        // Blocks the calling thread. Since 0.2.
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_wait(EngineHandle engine, ulong requestId, int timeoutMs,
            out IntPtr error);

        // batch: const pvllm_output_batch*
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern UIntPtr pvllm_output_batch_size(OutputBatchHandle batch);

        // batch: const pvllm_output_batch*; returns const pvllm_output*, valid until the batch is freed
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr pvllm_output_batch_get(OutputBatchHandle batch, UIntPtr index);

        // batch: pvllm_output_batch* (called by OutputBatchHandle.ReleaseHandle only)
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void pvllm_output_batch_free(IntPtr batch);

        // ---- Statistics ---------------------------------------------------

        [StructLayout(LayoutKind.Sequential)]
        internal unsafe struct pvllm_stats
        {
            public uint struct_size;
            public int num_running;
            public int num_waiting;
            public int num_blocks_total;
            public int num_blocks_used;
            public int num_blocks_free;
            public int num_blocks_cached;
            public float kv_utilization;
            public long reserved_unused_slots;
            public float prefix_cache_hit_rate;
            public long prefix_cache_hits;
            public long prefix_cache_queries;
            public long num_preemptions;
            public long num_prompt_tokens_processed;
            public long num_generation_tokens;
            public long num_cached_prompt_tokens;
            public long num_steps;
            public long num_requests_finished;
            public long num_kv_tokens_stored;
            public long num_kv_slots_reserved;
            public long num_seqs_queued_for_memory;
            public long num_block_copies;
            public fixed byte backend[32];        // char[32], NUL-terminated (since 0.4)
            // Since 0.5.
            public long num_prefix_cache_evictions;
            public float step_time_p50_ms;
            public float step_time_p99_ms;
            public float step_time_max_ms;
            public long num_preemptions_by_swap;
            public long num_blocks_swapped_out;
            public long num_blocks_swapped_in;
            public long num_swap_bytes;
            public long num_kv_tokens_attended;   // since 0.8
            public long num_spec_drafts;          // since 0.11
            public long num_spec_proposed_tokens; // since 0.11
            public long num_spec_accepted_tokens; // since 0.11
            public fixed long spec_accepted_at[16]; // since 0.11
        }

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void pvllm_stats_init(IntPtr stats, UIntPtr structSize); // (pvllm_stats*, size_t); see NativeStruct.Init

        // engine: pvllm_engine*; error: pvllm_error**
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_get_stats(EngineHandle engine, ref pvllm_stats outStats,
            out IntPtr error);

        // ---- Tokenizer ----------------------------------------------------

        // engine: pvllm_engine*; text: const char* (NUL-terminated UTF-8, pinned array);
        // ids: int32_t* [capacity] or NULL; error: pvllm_error**
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_tokenize(EngineHandle engine, byte[] text, byte addBos,
            [Out] int[] ids, UIntPtr capacity, out UIntPtr outNumIds, out IntPtr error);

        // engine: pvllm_engine*; ids: const int32_t* [numIds]; text: char* [capacity] or NULL;
        // error: pvllm_error**
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_detokenize(EngineHandle engine, int[] ids, UIntPtr numIds,
            [Out] byte[] text, UIntPtr capacity, out UIntPtr outLen, out IntPtr error);

        // ---- Chat templates (since 0.3) -----------------------------------

        [StructLayout(LayoutKind.Sequential)]
        internal struct pvllm_chat_template_params
        {
            public uint struct_size;
            public IntPtr messages_json;        // const char*, a JSON array
            public IntPtr tools_json;           // const char*, NULL = none
            public IntPtr extra_context_json;   // const char*, NULL = none
            public byte add_generation_prompt;  // uint8_t boolean
            public IntPtr template_name;        // const char*, NULL = default
            public IntPtr chat_template;        // const char*, a Jinja template; NULL = the model's (since 0.9)
        }

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void pvllm_chat_template_params_init(IntPtr p, UIntPtr structSize); // (pvllm_chat_template_params*, size_t); see NativeStruct.Init

        // engine: pvllm_engine*; text: char* [capacity]; error: pvllm_error**
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_apply_chat_template(EngineHandle engine,
            ref pvllm_chat_template_params p, [Out] byte[] text, UIntPtr capacity, out UIntPtr outLen,
            out IntPtr error);

        // ---- Tokenizers without an engine (since 0.9) ----------------------

        // modelPath: const char* (NUL-terminated UTF-8, pinned array);
        // outTokenizer: pvllm_tokenizer**; error: pvllm_error**
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_tokenizer_open(byte[] modelPath, out TokenizerHandle outTokenizer,
            out IntPtr error);

        // tokenizer: pvllm_tokenizer* (called by TokenizerHandle.ReleaseHandle only)
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void pvllm_tokenizer_free(IntPtr tokenizer);

        // tokenizer: const pvllm_tokenizer*; text: const char* (NUL-terminated UTF-8, pinned array);
        // ids: int32_t* [capacity] or NULL; error: pvllm_error**
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_tokenizer_encode(TokenizerHandle tokenizer, byte[] text,
            byte addSpecialTokens, [Out] int[] ids, UIntPtr capacity, out UIntPtr outNumIds, out IntPtr error);

        // tokenizer: const pvllm_tokenizer*; ids: const int32_t* [numIds]; text: char* [capacity] or NULL;
        // error: pvllm_error**
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_tokenizer_decode(TokenizerHandle tokenizer, int[] ids,
            UIntPtr numIds, [Out] byte[] text, UIntPtr capacity, out UIntPtr outLen, out IntPtr error);

        // tokenizer: const pvllm_tokenizer*; text: char* [capacity]; error: pvllm_error**
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_tokenizer_apply_chat_template(TokenizerHandle tokenizer,
            ref pvllm_chat_template_params p, [Out] byte[] text, UIntPtr capacity, out UIntPtr outLen,
            out IntPtr error);

        [StructLayout(LayoutKind.Sequential)]
        internal struct pvllm_tokenizer_info
        {
            public uint struct_size;
            public int vocab_size;
            public int bos_id;                    // -1 when there is none
            public int eos_id;                    // -1 when there is none
            public IntPtr bos_token;              // const char*, owned by the tokenizer
            public IntPtr eos_token;              // const char*, owned by the tokenizer
            public IntPtr kind;                   // const char*: "sentencepiece", "tokenizer.json" or ""
            public IntPtr source;                 // const char*: the file it was read from, or ""
            public byte adds_bos;                 // uint8_t boolean
            public byte has_chat_template;        // uint8_t boolean
        }

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void pvllm_tokenizer_info_init(IntPtr info, UIntPtr structSize); // (pvllm_tokenizer_info*, size_t); see NativeStruct.Init

        // tokenizer: const pvllm_tokenizer*; error: pvllm_error**
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_tokenizer_get_info(TokenizerHandle tokenizer,
            ref pvllm_tokenizer_info outInfo, out IntPtr error);

        // ---- Models -------------------------------------------------------

        [StructLayout(LayoutKind.Sequential)]
        internal unsafe struct pvllm_model_config
        {
            public uint struct_size;
            public fixed byte architecture[32];   // char[32], NUL-terminated
            public fixed byte format[32];         // char[32], NUL-terminated
            public int hidden_size;
            public int intermediate_size;
            public int num_layers;
            public int num_heads;
            public int num_kv_heads;
            public int head_dim;
            public int vocab_size;
            public int max_position_embeddings;
            public float rms_norm_eps;
            public float rope_theta;
            public byte tie_word_embeddings;      // uint8_t boolean
            public int bos_token_id;
            public int eos_token_id;
            // Since 0.3.
            public int rope_type;
            public float rope_factor;
            public float rope_low_freq_factor;
            public float rope_high_freq_factor;
            public int rope_original_max_position_embeddings;
            public int sliding_window;
            public byte qkv_bias;                 // uint8_t boolean
            public byte o_bias;                   // uint8_t boolean
            public byte qk_norm;                  // uint8_t boolean
            public int num_stop_token_ids;
            public fixed int stop_token_ids[16];
        }

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void pvllm_model_config_init(IntPtr config, UIntPtr structSize); // (pvllm_model_config*, size_t); see NativeStruct.Init

        [StructLayout(LayoutKind.Sequential)]
        internal unsafe struct pvllm_tensor_info
        {
            public IntPtr name;                   // const char*, valid until the model info is freed
            public IntPtr dtype;                  // const char*: "F32", "F16" or "BF16"
            public int num_dims;
            public fixed long shape[4];           // int64_t[4]
        }

        // modelPath: const char* (NUL-terminated UTF-8, pinned array);
        // outInfo: pvllm_model_info**; error: pvllm_error**
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_model_inspect(byte[] modelPath, out ModelInfoHandle outInfo,
            out IntPtr error);

        // shape: const char* (NUL-terminated UTF-8, pinned array);
        // outInfo: pvllm_model_info**; error: pvllm_error**
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_model_inspect_random(byte[] shape, out ModelInfoHandle outInfo,
            out IntPtr error);

        // info: const pvllm_model_info*; error: pvllm_error**
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_model_info_config(ModelInfoHandle info,
            ref pvllm_model_config outConfig, out IntPtr error);

        // info: const pvllm_model_info*
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern UIntPtr pvllm_model_info_num_tensors(ModelInfoHandle info);

        // info: const pvllm_model_info*; error: pvllm_error**
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_model_info_tensor(ModelInfoHandle info, UIntPtr index,
            out pvllm_tensor_info outTensor, out IntPtr error);

        // info: pvllm_model_info* (called by ModelInfoHandle.ReleaseHandle only)
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void pvllm_model_info_free(IntPtr info);

        [StructLayout(LayoutKind.Sequential)]
        internal struct pvllm_memory_estimate
        {
            public uint struct_size;
            public ulong weight_bytes;
            public ulong kv_bytes_per_block;
            public int num_blocks;
            public ulong kv_bytes_total;
            public long max_tokens_in_cache;
            public ulong activation_bytes;        // since 0.4
            public ulong swap_bytes;              // since 0.5
        }

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void pvllm_memory_estimate_init(IntPtr estimate, UIntPtr structSize); // (pvllm_memory_estimate*, size_t); see NativeStruct.Init

        // error: pvllm_error**
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern PvllmStatus pvllm_estimate_memory(ref pvllm_engine_params parameters,
            ref pvllm_memory_estimate outEstimate, out IntPtr error);
    }
}
