/*
 * pvllm.h — the public C ABI of pvllm, an embeddable LLM inference engine
 * with a paged KV cache and continuous batching.
 *
 * This header is the contract. docs/api.md walks through it with examples.
 *
 * Versions and "since" marks
 *  - PVLLM_VERSION_* is the library's release (MAJOR.MINOR.PATCH);
 *    PVLLM_ABI_VERSION (also the SONAME's number, libpvllm.so.1) changes only
 *    with an incompatible change. Within one ABI version a release only
 *    appends: new functions, new enum values, new fields at the end of
 *    structs. Nothing is removed, renumbered or reordered.
 *  - Everything carries the release that added it. No mark means 0.1 (ABI
 *    1's first release); "Since 0.2." marks what 0.2.0 appended,
 *    "Since 0.3." what 0.3.0 appended, "Since 0.4." what 0.4.0 appended,
 *    "Since 0.5." what 0.5.0 appended, "Since 0.6." what 0.6.0 appended,
 *    "Since 0.7." what 0.7.0 appended, "Since 0.8." what 0.8.0 appended,
 *    "Since 0.9." what 0.9.0 appended, "Since 0.10." what 0.10.0 appended,
 *    "Since 0.11." what 0.11.0 appended.
 *    A program built against this header and using something marked "since X.Y"
 *    needs a library at least that new: a missing function fails at load
 *    time; for an enum value or a struct field, check
 *    pvllm_version_number() >= X * 10000 + Y * 100 at run time, or, in a
 *    struct the library fills, PVLLM_STRUCT_HAS (below).
 *
 * Conventions that hold for every function:
 *
 *  - Every fallible function returns a pvllm_status and takes a last
 *    argument `pvllm_error** error`. On failure, when `error` is not NULL,
 *    *error receives a new error object holding the status and a message;
 *    the caller owns it and frees it with pvllm_error_free(). On success
 *    *error is set to NULL. The message therefore reaches the caller that
 *    failed, whatever thread it runs on and whatever runs in between (Go may
 *    move a goroutine to another OS thread between two cgo calls). Pass NULL
 *    to ignore messages.
 *  - Status values are pinned and only ever appended.
 *  - Structs the caller allocates start with `struct_size`. Fill one with
 *    its *_init(struct, sizeof(struct)) first, then set fields: *_init
 *    writes the defaults of the fields that fit in the size the caller
 *    passes (zeroing any bytes beyond the fields this library knows) and
 *    stores that size in struct_size. Structs only ever grow at the end:
 *    the library reads and writes only the fields that a caller's
 *    struct_size covers (later fields take their defaults), so a binary
 *    built against an older header keeps working with a newer library. A
 *    struct_size smaller than the struct had in ABI version 1 is
 *    PVLLM_STATUS_INVALID_ARGUMENT. An appended field starts at or after
 *    the struct's previous sizeof, never in its tail padding, so an older
 *    caller's struct_size never covers bytes it did not know about.
 *  - Input buffers (strings, token arrays) are copied before the call
 *    returns; the caller may free or move them right after.
 *  - Out-parameters after a failure (any status but OK, INVALID_ARGUMENT
 *    included, whenever the out-pointer itself is not NULL): a handle
 *    (*out_engine, *out_batch, *out_info) is NULL; *out_request_id is 0; a
 *    count is 0 unless the function says otherwise (BUFFER_TOO_SMALL
 *    reports the size needed; pvllm_step reports the unfinished requests
 *    even when the step failed); a struct the caller handed in for the
 *    library to fill (pvllm_stats, pvllm_model_config, pvllm_tensor_info,
 *    pvllm_memory_estimate) is left exactly as it was.
 *  - Memory the library hands out: a pointer inside a struct the library
 *    filled (pvllm_output and the arrays it points to,
 *    pvllm_tensor_info.name) belongs to the object it came from (the batch,
 *    the model info) and stays valid until that object is freed; never free
 *    it yourself. Static strings (pvllm_version, the *_to_string names,
 *    pvllm_tensor_info.dtype) live as long as the process. Objects the
 *    library returns (engines, batches, errors, model infos) do not depend
 *    on each other: a batch or an error stays valid after its engine is
 *    destroyed.
 *  - Every destructor accepts NULL. No C++ exception crosses this boundary.
 *  - Handles are checked on entry (since 0.4). The library keeps the set of
 *    live handles of each kind (engines, batches, errors, model infos): a
 *    function given a destroyed or freed handle, or a pointer that is not a
 *    handle of the kind it takes (a batch passed as an engine), returns
 *    PVLLM_STATUS_INVALID_ARGUMENT without touching it; a second
 *    destroy or free of the same handle is a no-op; the getters that return
 *    no status return their NULL-handle value (0, NULL, "",
 *    PVLLM_STATUS_INVALID_ARGUMENT from pvllm_error_status). This is
 *    detected from the pointer alone, never by reading freed memory. What
 *    cannot be detected: a freed handle whose address the allocator has
 *    since given to a new handle of the same kind (it is that handle now),
 *    and a destroy that races another call on the same handle (forbidden
 *    below).
 *  - Text the library returns (event text, pvllm_detokenize,
 *    pvllm_apply_chat_template) is UTF-8 with no NUL byte inside (since
 *    0.4): a decoded NUL (the byte token <0x00>, "\u0000" in chat JSON)
 *    becomes U+FFFD, so strlen(text) equals the length reported beside it.
 *    Token ids are never changed.
 *  - Integers are fixed width; booleans in structs are uint8_t (0 or 1).
 *
 * Threads (each function says more):
 *  - On one engine, pvllm_submit, pvllm_abort, pvllm_detach, pvllm_poll,
 *    pvllm_poll_request, pvllm_wait, pvllm_get_stats, pvllm_tokenize and
 *    pvllm_detokenize may run on any threads at once, also while another
 *    thread is inside pvllm_step. pvllm_step calls are serialised (a second
 *    caller waits for the first). pvllm_engine_destroy must not overlap any
 *    other call on its engine, a blocked pvllm_wait included.
 *  - The typical service: one thread steps in a loop; request threads
 *    submit, then pvllm_wait and pvllm_poll_request their own request (see
 *    "Outputs").
 *  - Objects the caller owns: a batch, an error or a model info is never
 *    changed by the library after it is returned, so any thread may read it
 *    and several may read it at once; free it once, after the last read.
 *    Parameter structs (pvllm_engine_params, pvllm_request,
 *    pvllm_sampling_params) are only read, and only during the call they are
 *    passed to: several threads may pass the same one at once, and it may be
 *    changed or freed as soon as the call returns. A struct the library
 *    fills (pvllm_stats, ...) is written during the call: give each
 *    concurrent call its own.
 *  - Functions that take no engine (versions, *_to_string, *_init, model
 *    inspection, memory estimates) are thread-safe.
 */
#ifndef PVLLM_PVLLM_H_
#define PVLLM_PVLLM_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#if defined(PVLLM_BUILDING_LIBRARY)
#define PVLLM_API __declspec(dllexport)
#else
#define PVLLM_API __declspec(dllimport)
#endif
#else
#define PVLLM_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Versions
 * ------------------------------------------------------------------------ */

#define PVLLM_VERSION_MAJOR 0
#define PVLLM_VERSION_MINOR 11
#define PVLLM_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH */
#define PVLLM_VERSION_NUMBER \
  (PVLLM_VERSION_MAJOR * 10000 + PVLLM_VERSION_MINOR * 100 + PVLLM_VERSION_PATCH)
/* Bumped on any incompatible ABI change; also the SONAME's number. */
#define PVLLM_ABI_VERSION 1

/* The run-time twins of the macros above: compare them to check that the
 * library loaded is the one a binding was built against. */
PVLLM_API uint32_t pvllm_version_number(void);
/* "MAJOR.MINOR.PATCH"; a static string, never freed. */
PVLLM_API const char* pvllm_version(void);

/* Since 0.4. The instruction set of the CPU kernels this process runs:
 * "x86-64-v2", "avx2" or "avx512" on x86-64 (the best the CPU and OS
 * support, unless the environment variable PVLLM_CPU_ISA names another),
 * "generic" elsewhere. A static string, never freed. Thread-safe. Creating
 * a CPU engine fails with UNSUPPORTED when PVLLM_CPU_ISA names a set this
 * CPU lacks, INVALID_ARGUMENT when it names none. */
PVLLM_API const char* pvllm_cpu_isa(void);
PVLLM_API uint32_t pvllm_abi_version(void);

/* Since 0.2. Whether a struct the library filled, `ptr` (of type `type`,
 * struct_size first), holds `field`: true when the library that wrote it
 * knows the field. Use it before reading a field newer than the oldest
 * library a program supports, e.g.
 * PVLLM_STRUCT_HAS(output, pvllm_output, request_finished). */
#define PVLLM_STRUCT_HAS(ptr, type, field) \
  ((size_t)(ptr)->struct_size >= offsetof(type, field) + sizeof(((type*)0)->field))

/* ------------------------------------------------------------------------
 * Status and errors
 * ------------------------------------------------------------------------ */

typedef enum pvllm_status {
  PVLLM_STATUS_OK = 0,
  PVLLM_STATUS_INVALID_ARGUMENT = 1, /* NULL, out of range, wrong struct_size */
  PVLLM_STATUS_NOT_FOUND = 2,        /* file, tensor or request unknown */
  PVLLM_STATUS_IO_ERROR = 3,         /* the OS refused a file */
  PVLLM_STATUS_CORRUPT_MODEL = 4,    /* malformed or inconsistent model file */
  PVLLM_STATUS_UNSUPPORTED = 5,      /* valid, but this build cannot serve it */
  PVLLM_STATUS_OUT_OF_MEMORY = 6,    /* host/device memory or KV pool exhausted */
  PVLLM_STATUS_INTERNAL = 7,         /* a bug in pvllm; please report */
  PVLLM_STATUS_TOKENIZER_ERROR = 8,  /* tokenizer missing or failed */
  PVLLM_STATUS_BUFFER_TOO_SMALL = 9, /* an output buffer is too small */
  PVLLM_STATUS_TIMEOUT = 10          /* since 0.2: pvllm_wait's time ran out */
} pvllm_status;

/* A short constant name ("PVLLM_STATUS_OK", ...); never NULL, never freed.
 * Unknown values give "PVLLM_STATUS_UNKNOWN". Thread-safe. */
PVLLM_API const char* pvllm_status_to_string(pvllm_status status);

/* An error: a status and a message, made by the call that failed and owned
 * by its caller (see the conventions above). Immutable: any thread may read
 * it; free it once. */
typedef struct pvllm_error pvllm_error;

/* The status an error carries; PVLLM_STATUS_OK for NULL. */
PVLLM_API pvllm_status pvllm_error_status(const pvllm_error* error);
/* The message, NUL-terminated UTF-8, valid until pvllm_error_free(error);
 * "" for NULL. */
PVLLM_API const char* pvllm_error_message(const pvllm_error* error);
/* Frees an error; NULL is a no-op. */
PVLLM_API void pvllm_error_free(pvllm_error* error);

/* ------------------------------------------------------------------------
 * Engine
 * ------------------------------------------------------------------------ */

typedef struct pvllm_engine pvllm_engine;

/* Called while the engine loads, from the thread inside
 * pvllm_engine_create: `fraction` in [0, 1], `stage` a short description
 * valid during the call only. */
typedef void (*pvllm_progress_fn)(float fraction, const char* stage, void* user_data);

typedef struct pvllm_engine_params {
  uint32_t struct_size;
  /* A Hugging Face folder (config.json, *.safetensors, tokenizer.model),
   * a llama2.c .bin with a tokenizer.model beside it, or a .pvllm file
   * (docs/format.md; its tensor checksums are checked before create
   * returns). Required. */
  const char* model_path;
  /* "cpu", "cuda" (= "cuda:0"), "cuda:N" or "auto" (default): auto runs on
   * CUDA device 0 when the CUDA backend module (libpvllm_cuda.so, next to
   * this library or at $PVLLM_CUDA_BACKEND) loads, a device exists and the
   * model's shapes are served, else on the CPU. "cuda" without the module, a
   * driver or the device is UNSUPPORTED at create, the message saying which;
   * anything else is INVALID_ARGUMENT. */
  const char* device;
  int32_t block_size;             /* tokens per KV block: 8..256, power of two; default 16 */
  int64_t kv_cache_bytes;         /* KV budget in bytes when num_kv_blocks is 0; default 256 MiB */
  int32_t num_kv_blocks;          /* exact KV block count; 0 = from kv_cache_bytes */
  int32_t max_num_seqs;           /* sequences running at once; default 256 */
  int32_t max_num_batched_tokens; /* tokens fed per step; default 2048 */
  /* Context length; 0 = the model's longest: max_position_embeddings,
   * times the factor of linear or dynamic RoPE scaling. */
  int32_t max_model_len;
  uint8_t enable_prefix_caching; /* default 1 */
  int32_t num_threads;           /* CPU threads; 0 = all cores */
  pvllm_progress_fn progress;    /* may be NULL */
  void* progress_user_data;
  /* How sequences reserve KV slots, a pvllm_kv_allocator; default PAGED. */
  int32_t kv_allocator;
  /* Appended within 0.1, after ABI 1's first layout: a struct_size that
   * ends before this field is accepted and the fields from here on take
   * their defaults. NULL (default) = load model_path. A shape
   * name ("tiny", "tinyllama-1.1b", "llama-2-7b", "llama-3-8b") = build that
   * model in memory with random bf16 weights (fixed seed) for benchmarks;
   * model_path is then ignored and may be NULL. Such a model has no
   * tokenizer: submit token ids (text prompts give TOKENIZER_ERROR). An
   * unknown shape is INVALID_ARGUMENT, the message listing the known ones.
   * pvllm_estimate_memory honours it too. */
  const char* random_weights;
  /* Appended within 0.1 (as random_weights). CUDA devices only (ignored on
   * the CPU).
   * The KV pool gets free GPU memory * gpu_memory_utilization, measured
   * after the weights and activation buffers, less a fixed reserve
   * (num_kv_blocks > 0 still fixes the count; kv_cache_bytes is ignored on
   * the GPU). In (0, 1]; default 0.90. */
  float gpu_memory_utilization;
  /* Weight, activation and K/V dtype on the GPU, a pvllm_dtype; default
   * AUTO (bf16, or fp16 for fp16 checkpoints); checkpoints of another dtype
   * are converted while uploading (FP32, since 0.8, keeps fp32). */
  int32_t dtype;
  /* 1 (default): pure-decode steps replay CUDA graphs captured per batch
   * size bucket (1, 2, 4, ..., 256); 0: always launch eagerly. */
  uint8_t enable_cuda_graphs;
  /* Since 0.5. The host swap space of preemption_mode SWAP and AUTO, in
   * bytes; 0 (default) = as many blocks as the KV pool. On the CPU it
   * counts in the memory pvllm_estimate_memory reports (swap_bytes). */
  int64_t swap_space_bytes;
  /* Since 0.5. How a running sequence is preempted when the KV pool runs
   * dry, a pvllm_preemption_mode; default RECOMPUTE. */
  int32_t preemption_mode;
  /* Since 0.7. When a .pvllm model file's tensor checksums are checked, a
   * pvllm_model_checksums; default FULL. Other formats have none. 64 bits
   * wide so that it starts past the 0.6 struct's tail padding (an older
   * caller's struct_size covers that padding, whatever it holds). */
  int64_t model_checksums;
  /* Since 0.10. Quantize the weight matrices while loading, by one of these
   * schemes (llama-quantize's file types, the same recipe):
   *   "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "q2_k", "q3_k",
   *   "q4_k", "q5_k", "q6_k", "iq4_xs": every matrix in that type, the
   *     output projection (lm_head, or the embeddings when tied) in Q6_K
   *     (q8_0 keeps Q8_0);
   *   "q4_k_m", "q5_k_m": Q4_K (Q5_K), with Q6_K for the output projection
   *     and for attn_v and ffn_down in the layers that get more bits.
   * A type whose block does not divide a row falls back as llama-quantize
   * does (finally to F16); vectors (norms, biases) stay as they are. The
   * engine quantizes after reading the weights (progress stage "quantizing
   * weights") and serves the quantized copies, whose bytes the memory plan
   * and pvllm_estimate_memory count (weight_bytes). Quantized weights run
   * on the CPU backend: device "cuda" is UNSUPPORTED, "auto" runs on the
   * CPU. NULL or "" (default): the weights as stored. Names are
   * case-insensitive. An
   * unknown scheme is INVALID_ARGUMENT, the message listing the schemes; a
   * model whose matrices are already quantized (a quantized GGUF file) is
   * UNSUPPORTED naming the tensor. A library older than 0.10 ignores the
   * field: check pvllm_version_number() >= 1000. */
  const char* quantize;
  /* Since 0.11. What the KV cache stores, a pvllm_kv_cache_dtype; default
   * AUTO (fp32 on the CPU; the dtype above on CUDA). The CPU serves AUTO,
   * F32, F16, BF16 and INT8; CUDA serves AUTO, INT8, FP8_E4M3 and the one
   * of F16, BF16 and F32 that equals its activation dtype. Any other pairing
   * is UNSUPPORTED at create (and from pvllm_estimate_memory), naming the
   * dtypes that device serves; a value outside the enum is INVALID_ARGUMENT.
   * The block size in bytes (pvllm_memory_estimate.kv_bytes_per_block), and
   * with it the blocks kv_cache_bytes buys, follow the dtype. A library
   * older than 0.11 ignores the field: check pvllm_version_number() >=
   * 1100. */
  int32_t kv_cache_dtype;
  /* Since 0.11. Speculative decoding (docs/speculative.md): NULL, "" or
   * "off" (default), or "ngram": prompt lookup, proposing what followed the
   * latest earlier occurrence of the sequence's longest tail of
   * ngram_min..ngram_max tokens; the target model verifies up to
   * speculative_tokens proposals in one pass. Greedy output is the same
   * token for token; a sampled one keeps its distribution (a seeded request
   * stays reproducible whatever its batch). Requests under beam search or
   * an output constraint run without it. Another method is
   * INVALID_ARGUMENT. A library older than 0.11 ignores these fields: check
   * pvllm_version_number() >= 1100. */
  const char* speculative;
  int32_t speculative_tokens;      /* Since 0.11. 1..16; default 4 */
  int32_t ngram_min;               /* Since 0.11. default 1 */
  int32_t ngram_max;               /* Since 0.11. ngram_min..64; default 4 */
  int32_t speculative_max_running; /* Since 0.11. no proposals while more sequences
                                      run; 0 (default): no limit */
} pvllm_engine_params;

/* Values of pvllm_engine_params.model_checksums (since 0.7). The file's
 * header is always checked (docs/format.md); a tensor whose checksum does
 * not match fails create with CORRUPT_MODEL naming it. */
typedef enum pvllm_model_checksums {
  /* Every tensor is checked while the model loads, before anything reads it. */
  PVLLM_MODEL_CHECKSUMS_FULL = 0,
  /* Each tensor is checked as the engine first reads its pages, later in
   * create: the file is read once. */
  PVLLM_MODEL_CHECKSUMS_LAZY = 1,
  /* No tensor is checked. */
  PVLLM_MODEL_CHECKSUMS_NONE = 2
} pvllm_model_checksums;

/* Values of pvllm_engine_params.preemption_mode (since 0.5). Every mode
 * gives the same tokens; they differ in the work a preemption costs. */
typedef enum pvllm_preemption_mode {
  /* The victim's blocks are freed; its tokens are computed again when it
   * comes back (prefix caching often makes that cheap). */
  PVLLM_PREEMPTION_RECOMPUTE = 0,
  /* Its computed K/V is copied to the host swap space and back (CUDA:
   * pinned memory; CPU: plain memory); when the swap space is full, it is
   * recomputed. A sequence whose sliding window released blocks is always
   * recomputed. */
  PVLLM_PREEMPTION_SWAP = 1,
  /* Per victim, whichever the backend estimates cheaper: moving its blocks
   * out and back, or computing its tokens again. */
  PVLLM_PREEMPTION_AUTO = 2
} pvllm_preemption_mode;

/* Values of pvllm_engine_params.dtype. */
typedef enum pvllm_dtype {
  PVLLM_DTYPE_AUTO = 0,
  PVLLM_DTYPE_BF16 = 1,
  PVLLM_DTYPE_FP16 = 2,
  /* Since 0.8. IEEE fp32 throughout (no TF32): the engine that matches the
   * CPU engine token for token, at twice bf16's memory and a fraction of
   * its speed. Also serves head dims the fast kernels do not (see
   * docs/gpu.md). A library older than 0.8 refuses it with
   * PVLLM_STATUS_INVALID_ARGUMENT. */
  PVLLM_DTYPE_FP32 = 3
} pvllm_dtype;

/* Values of pvllm_engine_params.kv_cache_dtype (since 0.11). Rounding is
 * to nearest even; the 8-bit types keep one fp16 scale per (block, kv head,
 * token), the largest magnitude of that token's head over 127 (INT8) or
 * 448 (FP8_E4M3), which costs 2 bytes per head_dim codes (see
 * docs/memory.md for the accuracy each dtype costs). */
typedef enum pvllm_kv_cache_dtype {
  PVLLM_KV_CACHE_DTYPE_AUTO = 0,
  PVLLM_KV_CACHE_DTYPE_F16 = 1,
  PVLLM_KV_CACHE_DTYPE_BF16 = 2,
  PVLLM_KV_CACHE_DTYPE_INT8 = 3,
  PVLLM_KV_CACHE_DTYPE_FP8_E4M3 = 4, /* CUDA only */
  PVLLM_KV_CACHE_DTYPE_F32 = 5
} pvllm_kv_cache_dtype;

/* Values of pvllm_engine_params.kv_allocator. */
typedef enum pvllm_kv_allocator {
  /* Blocks are taken as tokens arrive; forks share blocks copy-on-write;
   * prefix caching as enable_prefix_caching says. */
  PVLLM_KV_ALLOCATOR_PAGED = 0,
  /* The baseline for memory measurements: each sequence reserves
   * max_model_len slots up front as one run of consecutive blocks (first
   * fit) and never grows; a request waits in the queue while no run fits;
   * prefix caching is off whatever enable_prefix_caching says; each of n > 1
   * samples reserves its own run and copies the prompt's K/V. Same outputs,
   * more memory. */
  PVLLM_KV_ALLOCATOR_CONTIGUOUS = 1
} pvllm_kv_allocator;

/* Fills defaults; pass sizeof(pvllm_engine_params). NULL is a no-op. */
PVLLM_API void pvllm_engine_params_init(pvllm_engine_params* params, size_t struct_size);

/* Loads the model and tokenizer, allocates the KV pool and returns a new
 * engine in *out_engine (NULL on failure). The caller destroys it with
 * pvllm_engine_destroy.
 * Returns OK; INVALID_ARGUMENT (NULL params/out_engine, bad struct_size,
 * a field out of range); NOT_FOUND (no model at the path); IO_ERROR;
 * CORRUPT_MODEL (truncated or inconsistent files: the message names the file
 * and the tensor); UNSUPPORTED (unknown architecture or device);
 * TOKENIZER_ERROR; OUT_OF_MEMORY (the KV pool cannot be allocated). */
PVLLM_API pvllm_status pvllm_engine_create(const pvllm_engine_params* params,
                                           pvllm_engine** out_engine, pvllm_error** error);

/* Finishes nothing and frees everything: pending outputs are dropped
 * (batches and errors already returned stay valid). NULL, and a second
 * destroy of the same engine, are no-ops (see "Handles are checked"). Must
 * not run concurrently with any other call on the same engine, a blocked
 * pvllm_wait included: end the waits first (give them a finite timeout, or
 * abort their requests and step until their last events are taken). */
PVLLM_API void pvllm_engine_destroy(pvllm_engine* engine);

/* ------------------------------------------------------------------------
 * Requests
 * ------------------------------------------------------------------------ */

typedef struct pvllm_sampling_params {
  uint32_t struct_size;
  float temperature;             /* 0 = greedy; default 1 */
  int32_t top_k;                 /* 0 = off (default) */
  float top_p;                   /* (0, 1]; 1 = off (default) */
  float min_p;                   /* [0, 1]; 0 = off (default) */
  float repetition_penalty;      /* > 0; 1 = off (default) */
  float presence_penalty;        /* default 0 */
  float frequency_penalty;       /* default 0 */
  int32_t max_tokens;            /* >= 1; default 16 */
  const int32_t* stop_token_ids; /* extra tokens that end generation */
  size_t num_stop_token_ids;
  const char* const* stop; /* stop strings, NUL-terminated; not in the output */
  size_t num_stop;
  uint8_t ignore_eos; /* 1 = do not stop at EOS (nor the model's extra stop ids) */
  int32_t logprobs;   /* -1 none (default); 0 chosen token; k: plus top k (<= 20) */
  uint8_t has_seed;   /* 1 = use `seed`; otherwise a random seed */
  uint64_t seed;
  int32_t n; /* parallel samples, 1..max_num_seqs; default 1 */
  /* Since 0.5. Prompt logprobs: -1 (default) none; 0 each prompt token's
   * logprob (all but the first); k <= 20: plus the k most likely tokens at
   * each of those positions. They come once, with the request's first
   * event (pvllm_output.prompt_logprobs). The prompt is then computed
   * whole, without prefix-cache hits. 64 bits wide so that it starts past
   * the 0.4 struct's tail padding. */
  int64_t prompt_logprobs;
  /* Since 0.5. Beam search with this many beams (1..10; 0 = off, the
   * default): the best n (<= beam_width) hypotheses come back as samples
   * 0..n-1, best first, each in one event with its score. Beam search is
   * deterministic and ranks tokens by the raw model distribution:
   * temperature must be 0, top_k 0, top_p 1, min_p 0 and the penalties off;
   * no stop strings; logprobs -1 or 0 (no alternatives). It needs the
   * paged KV allocator and a pool that holds beam_width beams of the
   * longest length unshared. The rules are Hugging Face's: each step every
   * beam proposes its 2 * beam_width best tokens; a stop token ranked in
   * the first beam_width ends a hypothesis; a hypothesis scores its summed
   * logprob over its length (generated tokens, a final stop token
   * included) to the power length_penalty. */
  int32_t beam_width;
  float length_penalty; /* default 1 */
  /* When beam search stops, a pvllm_early_stopping; default HEURISTIC. */
  int32_t early_stopping;
  /* Since 0.6. Structured output: a pvllm_constraint_kind (default NONE).
   * The generated text then matches the constraint: each draw is limited to
   * the tokens that can continue it, and end-of-sequence tokens are allowed
   * only once the text is complete; a constraint nothing may follow ends the
   * sample (PVLLM_FINISH_STOP). A text cut short by max_tokens or a stop
   * string is a prefix of a match. The constraint is compiled at
   * pvllm_submit (cached by its text): a malformed one is
   * PVLLM_STATUS_INVALID_ARGUMENT naming where it goes wrong, one that uses
   * something pvllm does not implement PVLLM_STATUS_UNSUPPORTED naming it.
   * It needs the model's tokenizer and cannot be combined with beam search.
   * Logprobs stay those of the unconstrained distribution. */
  int32_t constraint_kind;
  /* The JSON schema (JSON_SCHEMA), GBNF grammar (GRAMMAR) or regular
   * expression (REGEX) as NUL-terminated UTF-8; unused by the other kinds. */
  const char* constraint;
  /* CHOICE: the text is exactly one of these NUL-terminated strings. */
  const char* const* choices;
  size_t num_choices;
  /* Since 0.11. Options of the JSON kinds, pvllm_constraint_flag bits ORed
   * together; default 0 (compact JSON; an object whose schema lists
   * properties gets only those, in that order). A bit this library does
   * not know, or any bit with a kind other than JSON_SCHEMA and
   * JSON_OBJECT (NONE included), is INVALID_ARGUMENT at pvllm_submit,
   * naming it. The flags are part of
   * the compiled constraint's cache key. A library older than 0.11 ignores
   * the field: check pvllm_version_number() >= 1100. */
  uint32_t constraint_flags;
  /* Since 0.11. 0 keeps this request out of speculative decoding where the
   * engine has it on; default 1. A library older than 0.11 ignores the
   * field. */
  int32_t speculative;
} pvllm_sampling_params;

/* Values of pvllm_sampling_params.constraint_kind (since 0.6). */
typedef enum pvllm_constraint_kind {
  PVLLM_CONSTRAINT_NONE = 0,
  /* JSON that validates against the schema (compact unless
   * constraint_flags says otherwise). Most of what schemas use is
   * implemented: types, properties and required, enum and const, string
   * lengths, pattern and the common formats, numeric bounds and multipleOf,
   * arrays and tuples, property counts, anyOf, allOf, oneOf of disjoint
   * alternatives, simple forms of not, $ref to any pointer.
   * docs/structured-output.md lists it all and what is refused
   * (UNSUPPORTED, naming the keyword). */
  PVLLM_CONSTRAINT_JSON_SCHEMA = 1,
  PVLLM_CONSTRAINT_JSON_OBJECT = 2, /* any JSON object (compact unless constraint_flags) */
  /* A GBNF grammar (rules `name ::= ...`, output starts at `root`). */
  PVLLM_CONSTRAINT_GRAMMAR = 3,
  PVLLM_CONSTRAINT_REGEX = 4, /* a regular expression the whole text matches */
  PVLLM_CONSTRAINT_CHOICE = 5 /* one of `choices` */
} pvllm_constraint_kind;

/* Bits of pvllm_sampling_params.constraint_flags (since 0.11). */
typedef enum pvllm_constraint_flag {
  /* JSON_SCHEMA, JSON_OBJECT: JSON's whitespace (space, tab, newline,
   * carriage return) is allowed between tokens, as in pretty-printed or
   * ", "-separated JSON. Without it the JSON is compact. */
  PVLLM_CONSTRAINT_JSON_WHITESPACE = 1,
  /* JSON_SCHEMA: members a schema does not list may follow the listed ones
   * wherever its additionalProperties (or patternProperties) allows them,
   * as JSON Schema reads it. Without it an object whose schema lists
   * properties gets only those (as OpenAI's strict schemas have it); an
   * object that lists none takes any member either way. JSON_OBJECT takes
   * the bit and is unchanged by it. */
  PVLLM_CONSTRAINT_JSON_UNLISTED_PROPERTIES = 2,
  /* JSON_SCHEMA: an object's members may come in any order, each at most
   * once and the required ones present, as JSON Schema reads objects.
   * Without it they come in the order the schema lists them. JSON_OBJECT
   * takes the bit and is unchanged by it. */
  PVLLM_CONSTRAINT_JSON_ANY_ORDER = 4
} pvllm_constraint_flag;

/* Values of pvllm_sampling_params.early_stopping (since 0.5), as Hugging
 * Face's early_stopping False, True and "never". Each needs beam_width
 * finished hypotheses first. */
typedef enum pvllm_early_stopping {
  /* Stop when no live beam's best logprob sum over the current length can
   * beat the worst finished hypothesis. */
  PVLLM_EARLY_STOPPING_HEURISTIC = 0,
  PVLLM_EARLY_STOPPING_TRUE = 1, /* stop at once */
  /* As HEURISTIC but over the longest length a beam may reach when
   * length_penalty > 0: the exact bound. */
  PVLLM_EARLY_STOPPING_NEVER = 2
} pvllm_early_stopping;

PVLLM_API void pvllm_sampling_params_init(pvllm_sampling_params* params, size_t struct_size);

/* Values of pvllm_request.delivery (since 0.2): who may take a request's
 * output events. */
typedef enum pvllm_delivery {
  /* Any poller: pvllm_poll (every shared request's events) and
   * pvllm_poll_request / pvllm_wait on this id; whoever comes first. */
  PVLLM_DELIVERY_SHARED = 0,
  /* Only pvllm_poll_request / pvllm_wait on this id. pvllm_poll never
   * returns its events, so an engine-wide poller elsewhere in the program
   * cannot take them from the request's own consumer. */
  PVLLM_DELIVERY_PER_REQUEST = 1
} pvllm_delivery;

/* Since 0.5. A request's output handler (pvllm_request.on_output): called
 * with each of the request's events, in order (`sequence`), instead of
 * queueing them for pvllm_poll, pvllm_poll_request and pvllm_wait. It runs on
 * the thread inside pvllm_step, after the step's work and outside the
 * engine's locks (since 0.9 also for the first events, which a step on
 * another thread may make before pvllm_submit has returned); never on two
 * threads at once for one request. `output` and everything it points to
 * are valid during the call only: copy what must live longer. The last
 * call has output->request_finished = 1. The handler may call
 * pvllm_submit, pvllm_abort, pvllm_get_stats, pvllm_tokenize and
 * pvllm_detokenize on the engine; it must not call pvllm_step,
 * pvllm_poll*, pvllm_wait or pvllm_engine_destroy on it (they would
 * deadlock or pull the engine from under the call). Keep it short: the
 * step waits for it. */
struct pvllm_output;
typedef void (*pvllm_output_callback)(const struct pvllm_output* output, void* user_data);

typedef struct pvllm_request {
  uint32_t struct_size;
  /* Exactly one of prompt_text and prompt_token_ids. Text is tokenized with
   * the special tokens the tokenizer adds (BOS for Llama-style tokenizers)
   * unless add_special_tokens says otherwise; token ids are used as
   * given. */
  const char* prompt_text;
  const int32_t* prompt_token_ids;
  size_t num_prompt_token_ids;
  const pvllm_sampling_params* sampling; /* NULL = defaults */
  int32_t priority; /* lower values are served first and preempted last; default 0 */
  /* Since 0.2. A pvllm_delivery; default SHARED (what every request got
   * before 0.2). 64 bits wide so that it starts past the 0.1 struct's tail
   * padding (see struct_size above). */
  int64_t delivery;
  /* Since 0.5. When set, every event of the request goes to this handler
   * (see pvllm_output_callback) and `delivery` is ignored: pvllm_poll never
   * returns them, and pvllm_poll_request, pvllm_wait and pvllm_detach on
   * the id are INVALID_ARGUMENT. NULL (default): delivery as `delivery`
   * says. */
  pvllm_output_callback on_output;
  void* on_output_user_data;
  /* Since 0.9. 1 (default): prompt_text is tokenized with the special
   * tokens the tokenizer adds around a text (BOS for Llama-style
   * tokenizers, nothing for Qwen's), as Hugging Face's add_special_tokens.
   * 0: none are added; special tokens written in the text still count. Set
   * 0 for a prompt made by a chat template, which writes its own BOS.
   * Ignored for prompt_token_ids. */
  uint8_t add_special_tokens;
} pvllm_request;

PVLLM_API void pvllm_request_init(pvllm_request* request, size_t struct_size);

/* Queues a request; its output events appear once pvllm_step runs, to be
 * taken as request->delivery says (see "Outputs"). *out_request_id receives
 * its id, never 0 and never reused by this engine; 0 after a failure.
 * Since 0.4 an id also names its engine (its bits from 40 up hold the
 * engine's number in the process, which wraps after 8191 engines; ids stay
 * below 2^53, exact in a double), so passing it to another engine is
 * INVALID_ARGUMENT rather than NOT_FOUND. Treat ids as opaque.
 * Thread-safe: may be called from any thread, also while another thread is
 * inside pvllm_step. Everything is copied before it returns.
 * Returns OK; INVALID_ARGUMENT (NULL, bad struct_size, empty prompt, both or
 * neither prompt form, token id outside the vocabulary, sampling out of
 * range, prompt longer than the context leaves room for, n larger than
 * max_num_seqs, an unknown delivery); TOKENIZER_ERROR. A failed submit
 * changes nothing. */
PVLLM_API pvllm_status pvllm_submit(pvllm_engine* engine, const pvllm_request* request,
                                    uint64_t* out_request_id, pvllm_error** error);

/* Aborts a request in any state; the next pvllm_step ends each of its
 * unfinished samples with a PVLLM_FINISH_ABORT event (the last of them
 * with request_finished = 1), delivered like its other events.
 * When abort returns OK, the request ends with PVLLM_FINISH_ABORT, also
 * when a pvllm_step running at the time of the call would have finished
 * it: its samples that finish in that step report ABORT (that last event
 * then carries the step's tokens). Samples that had finished before keep
 * their reason.
 * Thread-safe like pvllm_submit.
 * Returns OK; INVALID_ARGUMENT (NULL or stale engine, or, since 0.4, an id
 * that another engine's pvllm_submit returned: request ids carry their
 * engine's number); NOT_FOUND (unknown id, or a request whose final event
 * has been made, even if some of its events are not taken yet). */
PVLLM_API pvllm_status pvllm_abort(pvllm_engine* engine, uint64_t request_id, pvllm_error** error);

/* Since 0.2. Stops delivering a request's events: those not taken yet are
 * dropped now, those it makes later are dropped as they come, and the
 * library forgets the request once it has finished. The request itself runs
 * on: pvllm_abort it first to stop it early. For a consumer that walks away
 * (a closed stream, a cancelled call), so that nobody has to take events
 * nobody wants. Waiters on the request return NOT_FOUND.
 * Thread-safe like pvllm_submit.
 * Returns OK; INVALID_ARGUMENT (NULL engine); NOT_FOUND (as
 * pvllm_poll_request: unknown, already detached, or over with every event
 * taken). */
PVLLM_API pvllm_status pvllm_detach(pvllm_engine* engine, uint64_t request_id, pvllm_error** error);

/* Runs one scheduler iteration: admits queued requests, runs one forward
 * pass over the scheduled batch, samples and publishes output events. The
 * events become visible to pvllm_poll / pvllm_poll_request, and wake the
 * threads in pvllm_wait on their requests, before this returns.
 * *out_num_unfinished (may be NULL) receives the number of requests not yet
 * finished after the step (also when the step failed; 0 for a NULL
 * engine). Only one thread steps an engine at a time: concurrent calls are
 * serialised.
 * Returns OK; INVALID_ARGUMENT (NULL engine); INTERNAL or OUT_OF_MEMORY when
 * the engine itself failed — then the affected requests end with
 * PVLLM_FINISH_ERROR events and the others keep their work. */
PVLLM_API pvllm_status pvllm_step(pvllm_engine* engine, int32_t* out_num_unfinished,
                                  pvllm_error** error);

/* ------------------------------------------------------------------------
 * Outputs
 *
 * Each pvllm_step turns its work into events: the new tokens of one sample
 * of one request (pvllm_output). The library keeps every event until it is
 * taken, and delivers each exactly once, to whoever takes it first:
 *  - pvllm_poll takes the oldest events of all requests submitted with
 *    PVLLM_DELIVERY_SHARED (the default);
 *  - pvllm_poll_request takes the oldest events of one request, whatever
 *    its delivery;
 *  - pvllm_wait blocks until one request has events to take.
 * A request's events come in the order they were made. Each of its n
 * samples ends with exactly one event whose finish_reason is not NONE, and
 * its very last event has request_finished = 1 (all n samples done): once
 * that is taken the request is over and its id is unknown to
 * pvllm_poll_request, pvllm_wait and pvllm_detach (NOT_FOUND).
 *
 * One consumer per request, any number of them on their own threads, while
 * one thread steps (error handling left out):
 *
 *   request.delivery = PVLLM_DELIVERY_PER_REQUEST;
 *   pvllm_submit(engine, &request, &id, NULL);
 *   for (int over = 0; !over;) {
 *     if (pvllm_wait(engine, id, 1000, NULL) == PVLLM_STATUS_TIMEOUT) continue;
 *     pvllm_output_batch* batch;
 *     if (pvllm_poll_request(engine, id, 0, &batch, NULL) != PVLLM_STATUS_OK) break;
 *     for (size_t i = 0; i < pvllm_output_batch_size(batch); ++i) {
 *       const pvllm_output* out = pvllm_output_batch_get(batch, i);
 *       fwrite(out->text, 1, out->text_len, stdout);
 *       over = over || out->request_finished;
 *     }
 *     pvllm_output_batch_free(batch);
 *   }
 *
 * A consumer that stops early calls pvllm_abort and pvllm_detach. A
 * consumer that stops reading holds back only its own request's events; the
 * engine and every other request go on.
 * ------------------------------------------------------------------------ */

typedef enum pvllm_finish_reason {
  PVLLM_FINISH_NONE = 0,   /* still generating */
  PVLLM_FINISH_STOP = 1,   /* EOS, a stop token or a stop string */
  PVLLM_FINISH_LENGTH = 2, /* max_tokens or the context length */
  PVLLM_FINISH_ABORT = 3,  /* pvllm_abort */
  PVLLM_FINISH_ERROR = 4   /* see error_message */
} pvllm_finish_reason;

/* Since 0.2. A short constant name ("PVLLM_FINISH_STOP", ...) for a value
 * of pvllm_output.finish_reason (hence the int32_t); never NULL, never
 * freed. Unknown values give "PVLLM_FINISH_UNKNOWN". Thread-safe. */
PVLLM_API const char* pvllm_finish_reason_to_string(int32_t finish_reason);

typedef struct pvllm_logprob {
  int32_t token_id;
  float logprob;
} pvllm_logprob;

typedef struct pvllm_token_logprobs {
  int32_t token_id; /* the chosen token */
  float logprob;    /* its log-probability under the raw model distribution */
  /* The most likely alternatives, best first: [num_top], NULL when num_top
   * is 0. Owned by the batch, like every pointer in pvllm_output. */
  const pvllm_logprob* top;
  size_t num_top;
} pvllm_token_logprobs;

/* One event: new tokens of one sample of one request. The library fills
 * it; read it through pvllm_output_batch_get. Every pointer in it (and in
 * the pvllm_token_logprobs it points to) is owned by the batch that holds it
 * and valid until pvllm_output_batch_free(batch); copy what must live
 * longer. */
typedef struct pvllm_output {
  /* The bytes the library filled: sizeof(pvllm_output) of the library that
   * made it. A field newer than the library a program runs with is beyond
   * it (PVLLM_STRUCT_HAS). */
  uint32_t struct_size;
  uint64_t request_id;
  int32_t sample_index;     /* 0..n-1 */
  const int32_t* token_ids; /* new tokens since this sample's previous event: [num_token_ids],
                               NULL when 0 */
  size_t num_token_ids;     /* 0 on a final event that adds no token (a stop token, an abort) */
  const char* text;         /* their text, NUL-terminated UTF-8, never a broken character, no NUL
                               inside (U+FFFD stands for a decoded NUL); never NULL ("" when empty) */
  size_t text_len;          /* bytes, without the NUL */
  int32_t finish_reason;    /* a pvllm_finish_reason; NONE until the sample's final event */
  /* [num_token_ids] when the request asked for logprobs (sampling.logprobs
   * >= 0) and num_token_ids > 0; NULL otherwise. */
  const pvllm_token_logprobs* logprobs;
  const char* error_message; /* never NULL; "" unless finish_reason is PVLLM_FINISH_ERROR */
  /* Since 0.2. 1 on the request's last event: every one of its n samples
   * has finished (this event's sample was the last), and nothing more will
   * come for the request; 0 on every other event. Check
   * PVLLM_STRUCT_HAS(output, pvllm_output, request_finished) first when the
   * library may be 0.1. */
  uint8_t request_finished;
  /* Since 0.4. The event's place among its request's events, over all its
   * samples: 0 for the first, then 1, 2, ... in the order the engine made
   * them. Within one poll's batch a request's events are already in this
   * order; when several threads poll the same request at once, sorting what
   * they took by `sequence` restores it. Check
   * PVLLM_STRUCT_HAS(output, pvllm_output, sequence) first when the library
   * may be older. */
  uint64_t sequence;
  /* Since 0.5. On the request's last event (request_finished = 1): its
   * timing in seconds, measured from pvllm_submit, and its token counts;
   * all 0 on every other event. Check PVLLM_STRUCT_HAS(output, pvllm_output,
   * num_generated_tokens) first when the library may be older. */
  double time_queued;           /* to the first step that ran any of its tokens */
  double time_to_first_token;   /* to the end of the step that made its first token; 0 if none */
  double time_per_output_token; /* mean gap between its token-making steps after the first;
                                   0 with fewer than two */
  double e2e_latency;           /* to the end of its last step */
  int64_t num_prompt_tokens;
  int64_t num_prefill_tokens;       /* prompt tokens computed, recomputation included */
  int64_t num_cached_prompt_tokens; /* prompt tokens the prefix cache spared */
  int64_t num_generated_tokens;     /* over all its samples */
  /* Since 0.5. On the request's first event when it asked for prompt
   * logprobs (sampling.prompt_logprobs >= 0): [num_prompt_logprobs], entry
   * i for prompt token i + 1, with its top alternatives; NULL with 0
   * otherwise (and for a one-token prompt). */
  const pvllm_token_logprobs* prompt_logprobs;
  size_t num_prompt_logprobs;
  /* Since 0.5. Beam search: the hypothesis' score (summed logprob over its
   * length^length_penalty); 0 otherwise. */
  double score;
} pvllm_output;

/* A set of events taken by one poll, owned by the caller. Immutable: any
 * thread may read it, several at once; free it once, after the last read.
 * It does not depend on the engine (it may outlive it). */
typedef struct pvllm_output_batch pvllm_output_batch;

/* Moves up to `max_events` (0 = all) of the oldest events of requests
 * submitted with PVLLM_DELIVERY_SHARED into a new batch that the caller
 * owns and frees with pvllm_output_batch_free; the batch may hold zero
 * events. Never blocks beyond a short lock. Events of PER_REQUEST requests
 * are never returned here.
 * Thread-safe: several threads may poll, also while another steps; each
 * event is delivered once.
 * Returns OK; INVALID_ARGUMENT (NULL engine or out_batch). */
PVLLM_API pvllm_status pvllm_poll(pvllm_engine* engine, size_t max_events,
                                  pvllm_output_batch** out_batch, pvllm_error** error);

/* Since 0.2. Moves up to `max_events` (0 = all) of request_id's oldest
 * events, whatever its delivery, into a new batch that the caller owns and
 * frees with pvllm_output_batch_free. The batch may hold zero events: the
 * request is still running and has made nothing new (pvllm_wait blocks
 * until it has). Never blocks beyond a short lock.
 * Thread-safe like pvllm_poll. Several threads may poll the same request
 * (each event still goes to one of them), though one consumer per request
 * is the intended use; a SHARED request's events may also go to pvllm_poll.
 * Returns OK; INVALID_ARGUMENT (NULL engine or out_batch); NOT_FOUND:
 * request_id is unknown, detached, or over with every event taken (for an
 * id that pvllm_submit returned, NOT_FOUND means the request is over and
 * someone else took its last event). */
PVLLM_API pvllm_status pvllm_poll_request(pvllm_engine* engine, uint64_t request_id,
                                          size_t max_events, pvllm_output_batch** out_batch,
                                          pvllm_error** error);

/* pvllm_wait's timeout_ms for "no limit". */
#define PVLLM_WAIT_INFINITE (-1)

/* Since 0.2. Blocks the calling thread until request_id has an event to
 * take, or until timeout_ms milliseconds have passed (0: check and return
 * at once; PVLLM_WAIT_INFINITE: no limit). Takes nothing: follow it with
 * pvllm_poll_request. Events appear when the pvllm_step that made them
 * returns, so some other thread must be stepping: a wait without a limit on
 * the only thread that steps never returns.
 * Thread-safe: any number of threads may wait, on the same or on different
 * requests, while others step, submit, poll or abort. pvllm_engine_destroy
 * must not run while a wait is blocked.
 * Returns
 *  - OK: the request has at least one event to take, or its last event was
 *    taken by another thread while this call waited (the request is over);
 *  - TIMEOUT: neither happened within timeout_ms (a normal outcome: pass
 *    error = NULL to skip making an error object for it);
 *  - NOT_FOUND: as pvllm_poll_request when the call starts, or the request
 *    was detached while it waited;
 *  - INVALID_ARGUMENT: NULL engine, or timeout_ms below -1. */
PVLLM_API pvllm_status pvllm_wait(pvllm_engine* engine, uint64_t request_id, int32_t timeout_ms,
                                  pvllm_error** error);

/* Number of events in a batch; 0 for NULL. */
PVLLM_API size_t pvllm_output_batch_size(const pvllm_output_batch* batch);
/* Event i, valid until pvllm_output_batch_free(batch); NULL when out of
 * range. */
PVLLM_API const pvllm_output* pvllm_output_batch_get(const pvllm_output_batch* batch, size_t index);
/* NULL is a no-op. */
PVLLM_API void pvllm_output_batch_free(pvllm_output_batch* batch);

/* ------------------------------------------------------------------------
 * Statistics
 * ------------------------------------------------------------------------ */

typedef struct pvllm_stats {
  uint32_t struct_size; /* set by the caller (pvllm_stats_init) */
  int32_t num_running;  /* sequences in the running set */
  int32_t num_waiting;  /* sequences waiting, including just submitted ones */
  int32_t num_blocks_total;
  int32_t num_blocks_used;
  int32_t num_blocks_free;
  int32_t num_blocks_cached; /* unused but holding reusable prefix K/V */
  float kv_utilization;      /* used / total */
  int64_t reserved_unused_slots;
  float prefix_cache_hit_rate; /* hit blocks / looked-up blocks */
  int64_t prefix_cache_hits;
  int64_t prefix_cache_queries;
  int64_t num_preemptions;
  int64_t num_prompt_tokens_processed; /* prefill tokens fed to the model */
  int64_t num_generation_tokens;       /* tokens sampled */
  int64_t num_cached_prompt_tokens;    /* prefill skipped by the prefix cache */
  int64_t num_steps;
  int64_t num_requests_finished;
  /* Over the distinct blocks held by running sequences: slots holding
   * computed K/V, and slots reserved. Their ratio is the KV utilization
   * the memory benchmarks report (kv_utilization above is blocks used /
   * blocks total). */
  int64_t num_kv_tokens_stored;
  int64_t num_kv_slots_reserved;
  /* Sequences that admission refused at least once for lack of KV blocks
   * (they waited in the queue, they were not dropped). */
  int64_t num_seqs_queued_for_memory;
  /* Blocks copied: copy-on-write, and contiguous-mode forks. */
  int64_t num_block_copies;
  /* Since 0.4. The backend serving the engine, NUL-terminated: "cuda", or
   * "cpu (x86-64-v2)", "cpu (avx2)", "cpu (avx512)": the CPU kernels'
   * instruction set (see pvllm_cpu_isa). */
  char backend[32];
  /* Since 0.5. Cached prefix blocks reclaimed for new use. */
  int64_t num_prefix_cache_evictions;
  /* Since 0.5. Wall time of the steps that ran a batch, over the latest
   * 1024 of them, in milliseconds: median, 99th percentile, maximum; 0
   * before the first. */
  float step_time_p50_ms;
  float step_time_p99_ms;
  float step_time_max_ms;
  /* Since 0.5. Preemption by swap (num_preemptions counts both kinds):
   * preemptions that swapped, blocks moved each way, and the bytes moved
   * both ways. */
  int64_t num_preemptions_by_swap;
  int64_t num_blocks_swapped_out;
  int64_t num_blocks_swapped_in;
  int64_t num_swap_bytes;
  /* Since 0.8. Over every step, the context positions the attention of
   * each computed sequence read: its whole context after the step (or the
   * last sliding_window of it). Times the K/V bytes per token
   * (pvllm_memory_estimate.kv_bytes_per_block / block_size), the cache
   * traffic no attention kernel can avoid; with the weights read once per
   * step (num_steps * weight_bytes), the bytes of a bandwidth roofline. */
  int64_t num_kv_tokens_attended;
  /* Since 0.11. Speculative decoding: decode steps that carried proposals,
   * the tokens proposed and those that stood, and how many of those steps
   * had their i-th proposal stand (acceptance by position). */
  int64_t num_spec_drafts;
  int64_t num_spec_proposed_tokens;
  int64_t num_spec_accepted_tokens;
  int64_t spec_accepted_at[16];
} pvllm_stats;

PVLLM_API void pvllm_stats_init(pvllm_stats* stats, size_t struct_size);

/* A snapshot taken after the latest step, written into the fields that
 * out_stats->struct_size covers (set by pvllm_stats_init); out_stats is
 * left as it was on failure. Thread-safe.
 * Returns OK; INVALID_ARGUMENT (NULL, bad struct_size). */
PVLLM_API pvllm_status pvllm_get_stats(pvllm_engine* engine, pvllm_stats* out_stats,
                                       pvllm_error** error);

/* ------------------------------------------------------------------------
 * Tokenizer
 * ------------------------------------------------------------------------ */

/* Encodes `text` (NUL-terminated UTF-8) into `ids` (capacity entries).
 * `add_bos` nonzero adds the special tokens the tokenizer puts around a
 * text (BOS for Llama-style tokenizers, nothing for Qwen's); special tokens
 * written in the text (<|im_start|>) are recognized either way.
 * *out_num_ids receives the number of ids the text needs, also when the
 * buffer is too small (then BUFFER_TOO_SMALL and nothing useful in ids);
 * ids may be NULL with capacity 0 to ask for the size. After any other
 * failure *out_num_ids is 0. Thread-safe.
 * Returns OK; BUFFER_TOO_SMALL; INVALID_ARGUMENT (NULL engine, text or
 * out_num_ids; NULL ids with capacity > 0; text that is not valid UTF-8
 * for a tokenizer.json tokenizer); TOKENIZER_ERROR (no tokenizer, or it
 * failed). */
PVLLM_API pvllm_status pvllm_tokenize(pvllm_engine* engine, const char* text, uint8_t add_bos,
                                      int32_t* ids, size_t capacity, size_t* out_num_ids,
                                      pvllm_error** error);

/* Decodes ids into `text` (capacity bytes, NUL-terminated on success).
 * Special tokens (BOS, EOS, <|im_end|>) are left out.
 * *out_len receives the byte length without the NUL, also when the buffer
 * is too small (BUFFER_TOO_SMALL). INVALID_ARGUMENT for an id outside the
 * vocabulary. After any other failure *out_len is 0 and text is left as it
 * was. Thread-safe.
 * Returns OK; BUFFER_TOO_SMALL; INVALID_ARGUMENT (also NULL engine or
 * out_len, NULL ids or text with a count > 0); TOKENIZER_ERROR. */
PVLLM_API pvllm_status pvllm_detokenize(pvllm_engine* engine, const int32_t* ids, size_t num_ids,
                                        char* text, size_t capacity, size_t* out_len,
                                        pvllm_error** error);

/* ------------------------------------------------------------------------
 * Chat templates (since 0.3)
 *
 * A model's chat template (a Jinja template from tokenizer_config.json's
 * "chat_template", a string or a list of {"name", "template"}, or from a
 * chat_template.jinja beside it, which wins) turns a conversation into the
 * prompt text the model was trained on. pvllm_engine_create reads it from
 * the model's folder (for a llama2.c .bin, the folder holding it), with
 * the bos_token and eos_token the template reads (since 0.9, the
 * tokenizer's own BOS and EOS where tokenizer_config.json names none, as
 * transformers does); a folder without one creates fine, and
 * pvllm_apply_chat_template then says NOT_FOUND.
 *
 * The renderer implements the subset of Jinja that chat templates use,
 * with Python's semantics, as transformers renders them (trim_blocks,
 * lstrip_blocks, raise_exception, strftime_now, tojson). A construct
 * outside that subset is UNSUPPORTED with its name, line and column, never
 * a wrong prompt. docs/api.md lists what is supported.
 *
 * The rendered text usually starts with the BOS token's text when the
 * model has one: submit it as prompt_text with add_special_tokens = 0 (since
 * 0.9), or as tokens from pvllm_tokenize(add_bos = 0); prompt_text with the
 * default add_special_tokens = 1 would add a second BOS.
 * ------------------------------------------------------------------------ */

/* Since 0.3. */
typedef struct pvllm_chat_template_params {
  uint32_t struct_size;
  /* The conversation: a JSON array of OpenAI-style messages, e.g.
   * [{"role": "user", "content": "Hi"}]. Required. */
  const char* messages_json;
  /* The tools' function schemas, a JSON array; NULL (default) = none. */
  const char* tools_json;
  /* More template variables, a JSON object, e.g. {"enable_thinking":
   * false}; NULL (default) = none. They may override bos_token and the
   * other special tokens, not messages, tools or add_generation_prompt. */
  const char* extra_context_json;
  /* 1 (default): end with the header that opens the assistant's turn. */
  uint8_t add_generation_prompt;
  /* A template of a model that ships several by name; NULL (default) =
   * "tool_use" when tools are given and the model has one, else
   * "default". */
  const char* template_name;
  /* Since 0.9. A Jinja chat template to render instead of the model's (for
   * a model that ships none, or to try another), as vLLM's --chat-template;
   * template_name is then ignored. The special tokens it reads (bos_token,
   * eos_token) still come from the model. NULL (default): the model's. */
  const char* chat_template;
} pvllm_chat_template_params;

/* Since 0.3. Fills defaults; pass sizeof(pvllm_chat_template_params). NULL
 * is a no-op. */
PVLLM_API void pvllm_chat_template_params_init(pvllm_chat_template_params* params,
                                               size_t struct_size);

/* Since 0.3. Renders the engine's chat template over params into `text`
 * (capacity bytes, NUL-terminated UTF-8 on success), as pvllm_detokenize
 * fills its buffer: *out_len receives the byte length without the NUL,
 * also when the buffer is too small (BUFFER_TOO_SMALL; text may be NULL
 * with capacity 0 to ask for the size). After any other failure *out_len
 * is 0 and text is left as it was. Thread-safe.
 * Returns OK; BUFFER_TOO_SMALL; INVALID_ARGUMENT (NULL engine, params or
 * out_len, bad struct_size, NULL text with capacity > 0, JSON that does not
 * parse or is of the wrong type, or messages the template rejects: its
 * raise_exception() message comes through as it is); NOT_FOUND (the model
 * has no chat template, or none of that name); UNSUPPORTED (the template
 * uses a construct outside the supported subset); CORRUPT_MODEL (a
 * malformed tokenizer_config.json).
 * Templates write their own BOS: to generate from the result, submit it as
 * prompt_text with add_special_tokens = 0 (since 0.9), or encode it with
 * pvllm_tokenize(..., add_bos = 0, ...) and submit the ids. */
PVLLM_API pvllm_status pvllm_apply_chat_template(pvllm_engine* engine,
                                                 const pvllm_chat_template_params* params,
                                                 char* text, size_t capacity, size_t* out_len,
                                                 pvllm_error** error);

/* ------------------------------------------------------------------------
 * Tokenizers without an engine (since 0.9)
 *
 * A model's tokenizer and chat templates, read without its weights: what a
 * tool that tokenizes, renders a chat template or counts tokens needs,
 * in milliseconds rather than the seconds an engine takes to create. The
 * model path is any path pvllm_engine_create accepts (a Hugging Face
 * folder, a llama2.c .bin with its tokenizer beside it, a .pvllm file, a
 * folder holding one .pvllm or one .bin), and also a tokenizer.model or
 * tokenizer.json file or a folder holding only a tokenizer. The tokenizer
 * is the one an engine over the same path uses: the same ids.
 * ------------------------------------------------------------------------ */

/* Since 0.9. Immutable once opened: any thread may use it, several at
 * once; free it once. */
typedef struct pvllm_tokenizer pvllm_tokenizer;

/* Since 0.9. Opens the tokenizer (and the chat templates beside it) of the
 * model at model_path. The caller frees *out_tokenizer with
 * pvllm_tokenizer_free.
 * A folder that holds chat templates (tokenizer_config.json,
 * chat_template.jinja) but no tokenizer opens too: it renders them, and
 * encode and decode say TOKENIZER_ERROR.
 * Returns OK; INVALID_ARGUMENT (NULL or empty path, NULL out_tokenizer, a
 * folder with several .pvllm or .bin files); NOT_FOUND (no such path, or
 * one with neither a tokenizer nor chat templates: the message names what
 * was looked for);
 * UNSUPPORTED (a file of another kind); IO_ERROR, CORRUPT_MODEL,
 * TOKENIZER_ERROR (an unreadable or malformed tokenizer or
 * tokenizer_config.json). */
PVLLM_API pvllm_status pvllm_tokenizer_open(const char* model_path, pvllm_tokenizer** out_tokenizer,
                                            pvllm_error** error);

/* Since 0.9. NULL is a no-op. */
PVLLM_API void pvllm_tokenizer_free(pvllm_tokenizer* tokenizer);

/* Since 0.9. As pvllm_tokenize, over a tokenizer: `add_special_tokens`
 * nonzero adds the special tokens the tokenizer puts around a text. */
PVLLM_API pvllm_status pvllm_tokenizer_encode(const pvllm_tokenizer* tokenizer, const char* text,
                                              uint8_t add_special_tokens, int32_t* ids,
                                              size_t capacity, size_t* out_num_ids,
                                              pvllm_error** error);

/* Since 0.9. As pvllm_detokenize, over a tokenizer. */
PVLLM_API pvllm_status pvllm_tokenizer_decode(const pvllm_tokenizer* tokenizer, const int32_t* ids,
                                              size_t num_ids, char* text, size_t capacity,
                                              size_t* out_len, pvllm_error** error);

/* Since 0.9. As pvllm_apply_chat_template, with the tokenizer's model's
 * chat templates. */
PVLLM_API pvllm_status pvllm_tokenizer_apply_chat_template(const pvllm_tokenizer* tokenizer,
                                                           const pvllm_chat_template_params* params,
                                                           char* text, size_t capacity,
                                                           size_t* out_len, pvllm_error** error);

/* Since 0.9. What a tokenizer is, filled by pvllm_tokenizer_get_info. The
 * strings belong to the tokenizer and live as long as it. */
typedef struct pvllm_tokenizer_info {
  uint32_t struct_size; /* set by the caller (pvllm_tokenizer_info_init) */
  int32_t vocab_size;   /* one past the largest id (added tokens included) */
  int32_t bos_id;       /* -1 when there is none */
  int32_t eos_id;       /* -1 when there is none */
  /* The BOS and EOS texts the chat templates read: tokenizer_config.json's
   * bos_token and eos_token, else the tokenizer's own tokens' texts (as
   * transformers does); "" when there is none. A chat model's eos_token is
   * the end of a turn ("<|im_end|>", "</s>"): a stop string for a chat. */
  const char* bos_token;
  const char* eos_token;
  /* "sentencepiece" (tokenizer.model) or "tokenizer.json"; "" for chat
   * templates alone. */
  const char* kind;
  /* The file it was read from, or the .pvllm file that carries it; "" for
   * chat templates alone. */
  const char* source;
  /* 1 when pvllm_tokenizer_encode(add_special_tokens = 1) puts BOS first. */
  uint8_t adds_bos;
  /* 1 when the model has a chat template of its own. */
  uint8_t has_chat_template;
} pvllm_tokenizer_info;

/* Since 0.9. Fills defaults; pass sizeof(pvllm_tokenizer_info). NULL is a
 * no-op. */
PVLLM_API void pvllm_tokenizer_info_init(pvllm_tokenizer_info* info, size_t struct_size);

/* Since 0.9. Writes the fields out_info->struct_size covers. Returns OK;
 * INVALID_ARGUMENT (NULL or stale tokenizer, NULL out_info, bad
 * struct_size). */
PVLLM_API pvllm_status pvllm_tokenizer_get_info(const pvllm_tokenizer* tokenizer,
                                                pvllm_tokenizer_info* out_info,
                                                pvllm_error** error);

/* ------------------------------------------------------------------------
 * Models: inspection and memory estimates (no engine needed)
 * ------------------------------------------------------------------------ */

typedef struct pvllm_model_config {
  uint32_t struct_size; /* set by the caller (pvllm_model_config_init) */
  char architecture[32];
  char format[32]; /* "huggingface", "llama2c", "pvllm" or "gguf" */
  int32_t hidden_size;
  int32_t intermediate_size;
  int32_t num_layers;
  int32_t num_heads;
  int32_t num_kv_heads;
  int32_t head_dim;
  int32_t vocab_size;
  int32_t max_position_embeddings;
  float rms_norm_eps;
  float rope_theta;
  uint8_t tie_word_embeddings;
  int32_t bos_token_id;
  int32_t eos_token_id;
  /* Since 0.3. Every other field the model's config sets that changes the
   * math, and every id that ends generation (PVLLM_STRUCT_HAS tells whether
   * the library filled them). */
  int32_t rope_type; /* a pvllm_rope_type */
  /* The scaling's parameters; 0 where rope_type does not use them.
   * LINEAR and DYNAMIC stretch the longest context an engine serves (its
   * max_model_len when the params leave it 0) to
   * floor(max_position_embeddings * rope_factor). */
  float rope_factor;                             /* LINEAR, LLAMA3, DYNAMIC */
  float rope_low_freq_factor;                    /* LLAMA3 */
  float rope_high_freq_factor;                   /* LLAMA3 */
  int32_t rope_original_max_position_embeddings; /* LLAMA3, DYNAMIC */
  int32_t sliding_window; /* a query attends the last sliding_window keys; 0 = all */
  uint8_t qkv_bias;       /* q, k and v projections carry a bias */
  uint8_t o_bias;         /* the output projection carries a bias */
  uint8_t qk_norm;        /* per-head RMSNorm of q and k before RoPE */
  /* The ids besides eos_token_id that end generation by default (the
   * config's eos list, generation_config.json's, llama2.c's BOS): the first
   * min(num_stop_token_ids, 16) of them. */
  int32_t num_stop_token_ids;
  int32_t stop_token_ids[16];
} pvllm_model_config;

/* Since 0.3. Values of pvllm_model_config.rope_type. */
typedef enum pvllm_rope_type {
  PVLLM_ROPE_DEFAULT = 0, /* no scaling */
  PVLLM_ROPE_LINEAR = 1,  /* every frequency divided by rope_factor */
  PVLLM_ROPE_LLAMA3 = 2,  /* low frequencies divided, high kept, blended between */
  PVLLM_ROPE_DYNAMIC = 3  /* NTK-aware: the base grows with the sequence's length */
} pvllm_rope_type;

PVLLM_API void pvllm_model_config_init(pvllm_model_config* config, size_t struct_size);

typedef struct pvllm_tensor_info {
  const char* name;  /* owned by the model info: valid until pvllm_model_info_free */
  const char* dtype; /* "F32", "F16" or "BF16": a static string */
  int32_t num_dims;
  int64_t shape[4];
} pvllm_tensor_info;

/* A model's config and tensor table, owned by the caller. Immutable: any
 * thread may read it, several at once; free it once. */
typedef struct pvllm_model_info pvllm_model_info;

/* Reads a model's config and tensor table without loading weights.
 * Returns OK, NOT_FOUND, IO_ERROR, CORRUPT_MODEL, UNSUPPORTED,
 * INVALID_ARGUMENT. The caller frees *out_info with pvllm_model_info_free. */
PVLLM_API pvllm_status pvllm_model_inspect(const char* model_path, pvllm_model_info** out_info,
                                           pvllm_error** error);
/* The same for a random-weights shape (pvllm_engine_params.random_weights):
 * its config and bf16 tensor table, allocating no weight. Returns OK or
 * INVALID_ARGUMENT (NULL, or an unknown shape: the message lists the known
 * ones). The caller frees *out_info with pvllm_model_info_free. */
PVLLM_API pvllm_status pvllm_model_inspect_random(const char* shape, pvllm_model_info** out_info,
                                                  pvllm_error** error);
/* Writes the model's config into the fields out_config->struct_size covers
 * (set by pvllm_model_config_init). Returns OK; INVALID_ARGUMENT (NULL, bad
 * struct_size). */
PVLLM_API pvllm_status pvllm_model_info_config(const pvllm_model_info* info,
                                               pvllm_model_config* out_config, pvllm_error** error);
/* 0 for NULL. */
PVLLM_API size_t pvllm_model_info_num_tensors(const pvllm_model_info* info);
/* Tensor i. Returns OK; INVALID_ARGUMENT (NULL, or index out of range);
 * UNSUPPORTED (more dimensions than pvllm_tensor_info holds). */
PVLLM_API pvllm_status pvllm_model_info_tensor(const pvllm_model_info* info, size_t index,
                                               pvllm_tensor_info* out_tensor, pvllm_error** error);
/* NULL is a no-op. */
PVLLM_API void pvllm_model_info_free(pvllm_model_info* info);

typedef struct pvllm_memory_estimate {
  uint32_t struct_size; /* set by the caller (pvllm_memory_estimate_init) */
  /* Weights as stored; since 0.10, as quantized when params->quantize
   * names a scheme. */
  uint64_t weight_bytes;
  uint64_t kv_bytes_per_block; /* K and V of all layers for one block */
  int32_t num_blocks;          /* what the params' KV budget buys */
  uint64_t kv_bytes_total;
  int64_t max_tokens_in_cache; /* num_blocks * block_size */
  /* Since 0.4. On the CPU: the activation buffers at their largest
   * (max_num_batched_tokens tokens, max_num_seqs sampled rows); 0 on CUDA,
   * where they are taken out of the device budget before num_blocks. */
  uint64_t activation_bytes;
  /* Since 0.5. On the CPU: the host swap space of preemption_mode SWAP or
   * AUTO; 0 otherwise and on CUDA. */
  uint64_t swap_bytes;
} pvllm_memory_estimate;

PVLLM_API void pvllm_memory_estimate_init(pvllm_memory_estimate* estimate, size_t struct_size);

/* What pvllm_engine_create(params) would need, read from the model's
 * config and tensor table before loading anything.
 * On CUDA (device "cuda"/"cuda:N", or "auto" with a usable GPU) the weights
 * and K/V count 2 bytes per element and num_blocks is what the device's free
 * memory buys now (an estimate: the engine measures again after uploading);
 * "cuda" with no module, driver or device is UNSUPPORTED, as at create;
 * "auto" without a GPU estimates the CPU pool. With params->quantize (since
 * 0.10) the weights count as quantized, on the CPU ("auto" estimates the CPU
 * pool; "cuda" is UNSUPPORTED, as at create).
 * Writes the fields out_estimate->struct_size covers (set by
 * pvllm_memory_estimate_init).
 * On the CPU the estimate is the plan pvllm_engine_create checks before it
 * loads anything (since 0.4): it fails exactly when create's memory checks
 * would, with the same status: INVALID_ARGUMENT when max_model_len exceeds
 * the model's context or the KV pool cannot hold one sequence of
 * max_model_len; OUT_OF_MEMORY when weights + KV pool + activations exceed
 * the machine's physical memory.
 * Returns the statuses of pvllm_model_inspect, and INVALID_ARGUMENT for
 * params out of range. */
PVLLM_API pvllm_status pvllm_estimate_memory(const pvllm_engine_params* params,
                                             pvllm_memory_estimate* out_estimate,
                                             pvllm_error** error);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PVLLM_PVLLM_H_ */
