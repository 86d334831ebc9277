package pvllm

import (
	"fmt"
	"strings"
)

// Config describes an engine. Zero fields keep the library's defaults
// (pvllm_engine_params_init); only ModelPath is required.
type Config struct {
	// A Hugging Face folder (config.json, *.safetensors, tokenizer.model), a
	// llama2.c .bin with its tokenizer beside it, or a .pvllm file.
	ModelPath string
	// RandomWeights, when set, names a shape ("tiny", "tinyllama-1.1b",
	// "llama-2-7b", "llama-3-8b") that the library builds in memory with
	// random weights, for benchmarks; ModelPath is then ignored. Such a
	// model has no tokenizer: submit PromptTokens.
	RandomWeights        string
	Device               string // "cpu", "cuda", "cuda:N" or "auto" (default)
	BlockSize            int    // tokens per KV block: 8..256, a power of two (default 16)
	KVCacheBytes         int64  // KV budget in bytes when NumKVBlocks is 0 (default 256 MiB)
	NumKVBlocks          int    // exact KV block count
	MaxNumSeqs           int    // sequences running at once (default 256)
	MaxNumBatchedTokens  int    // tokens fed per step (default 2048)
	MaxModelLen          int    // context length (default: the model's)
	DisablePrefixCaching bool   // prefix caching is on unless this is set
	NumThreads           int    // CPU threads (default: all cores)
	KVAllocator          KVAllocator

	// CUDA only (ignored on the CPU).
	GPUMemoryUtilization float32 // share of free GPU memory for the KV pool (default 0.90)
	DType                DType   // weights, activations and K/V (default DTypeAuto)
	DisableCUDAGraphs    bool    // decode steps replay CUDA graphs unless this is set

	// Preemption (libpvllm 0.5): how a running sequence makes room when the
	// KV pool runs dry (default PreemptionRecompute), and the host swap
	// space of PreemptionSwap and PreemptionAuto in bytes (0 = as many
	// blocks as the KV pool).
	PreemptionMode PreemptionMode
	SwapSpaceBytes int64

	// ModelChecksums (libpvllm 0.7): when a .pvllm model file's tensor
	// checksums are checked (default ModelChecksumsFull).
	ModelChecksums ModelChecksums

	// Quantize (libpvllm 0.10), when set, names a scheme the weight
	// matrices are quantized by while loading, as llama-quantize's file
	// types: "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "q2_k",
	// "q3_k", "q4_k", "q5_k", "q6_k", "iq4_xs", "q4_k_m" or "q5_k_m".
	// Quantized weights run on the CPU (Device "auto" lands there, "cuda"
	// is StatusUnsupported) and EstimateMemory counts them quantized. An
	// unknown scheme is StatusInvalidArgument naming the schemes; a model
	// already quantized (a quantized GGUF file) is StatusUnsupported; a
	// library older than 0.10 is StatusUnsupported.
	Quantize string

	// KVCacheDtype (libpvllm 0.11) is what the KV cache stores (default
	// KVCacheDtypeAuto: fp32 on the CPU, the activation dtype on CUDA).
	// The CPU serves Auto, F32, F16, BF16 and Int8; CUDA serves Auto,
	// Int8, FP8E4M3 and the one of F16, BF16 and F32 that equals its
	// activation dtype. Any other pairing is StatusUnsupported from New
	// and EstimateMemory, naming the dtypes that device serves; a value
	// outside the constants is StatusInvalidArgument. EstimateMemory's
	// KVBytesPerBlock, and so the blocks KVCacheBytes buys, follow it. A
	// library older than 0.11, which would ignore it, is StatusUnsupported.
	KVCacheDtype KVCacheDtype

	// Speculative (libpvllm 0.11) turns on speculative decoding: "" or
	// "off" (default), or "ngram" (prompt lookup: what followed the latest
	// earlier occurrence of the output's tail is proposed and verified in
	// one pass; greedy output is the same token for token, sampled output
	// keeps its distribution). SpeculativeTokens (1..16, 0 = the library's
	// 4) proposals per step, NgramMin..NgramMax (0 = 1 and 4) the tail
	// lengths matched, none while more than SpeculativeMaxRunning sequences
	// run (0 = no limit). An unknown method is StatusInvalidArgument; a
	// library older than 0.11, which would ignore it, is StatusUnsupported.
	Speculative           string
	SpeculativeTokens     int
	NgramMin, NgramMax    int
	SpeculativeMaxRunning int

	// Progress, when set, is called while New loads the model, on the
	// goroutine that called New. fraction is in [0, 1].
	Progress func(fraction float32, stage string)

	// StreamBuffer is the capacity of each Stream's channel (default 64).
	// It only smooths delivery: a full channel never stalls the engine or
	// another request (see Stream).
	StreamBuffer int
}

// KVAllocator mirrors pvllm_kv_allocator: how sequences reserve KV slots.
type KVAllocator int32

const (
	// KVAllocatorPaged takes blocks as tokens arrive (the default).
	KVAllocatorPaged KVAllocator = 0
	// KVAllocatorContiguous reserves the whole context per sequence up
	// front: the baseline for memory measurements.
	KVAllocatorContiguous KVAllocator = 1
)

// PreemptionMode mirrors pvllm_preemption_mode (libpvllm 0.5). Every mode
// gives the same tokens; they differ in what a preemption costs.
type PreemptionMode int32

const (
	PreemptionRecompute PreemptionMode = 0 // free the blocks, compute the tokens again later
	PreemptionSwap      PreemptionMode = 1 // copy the K/V to the host swap space and back
	PreemptionAuto      PreemptionMode = 2 // per victim, whichever the backend estimates cheaper
)

// ModelChecksums mirrors pvllm_model_checksums (libpvllm 0.7): when a
// .pvllm file's tensor checksums are checked. Its header is always checked;
// a damaged tensor makes New fail with StatusCorruptModel naming it. Other
// model formats have no checksums.
type ModelChecksums int32

const (
	ModelChecksumsFull ModelChecksums = 0 // every tensor while the model loads
	ModelChecksumsLazy ModelChecksums = 1 // each tensor as the engine first reads it: the file is read once
	ModelChecksumsNone ModelChecksums = 2 // none
)

// DType mirrors pvllm_dtype: the GPU's weight, activation and K/V type.
type DType int32

const (
	DTypeAuto DType = 0 // bf16, or fp16 for fp16 checkpoints
	DTypeBF16 DType = 1
	DTypeFP16 DType = 2
	// DTypeFP32 (libpvllm 0.8; an older library refuses it): IEEE fp32
	// throughout, no TF32, matching the CPU engine token for token.
	DTypeFP32 DType = 3
)

// KVCacheDtype mirrors pvllm_kv_cache_dtype (libpvllm 0.11): what the KV
// cache stores. The 8-bit types keep one fp16 scale per (block, kv head,
// token): a row of K or V costs head_dim + 2 bytes instead of 4 * head_dim
// in f32.
type KVCacheDtype int32

const (
	KVCacheDtypeAuto    KVCacheDtype = 0 // the backend's own: f32 on the CPU, the activation dtype on CUDA
	KVCacheDtypeF16     KVCacheDtype = 1 // IEEE half, rounded to nearest even
	KVCacheDtypeBF16    KVCacheDtype = 2 // bfloat16, rounded to nearest even
	KVCacheDtypeInt8    KVCacheDtype = 3 // int8 codes, one fp16 scale (absmax / 127) per token and kv head
	KVCacheDtypeFP8E4M3 KVCacheDtype = 4 // fp8 e4m3 codes, one fp16 scale (absmax / 448); CUDA only
	KVCacheDtypeF32     KVCacheDtype = 5 // IEEE fp32
)

// String is the dtype's name as ParseKVCacheDtype takes it ("auto",
// "f32", "f16", "bf16", "int8", "fp8_e4m3"), or "KVCacheDtype(N)".
func (d KVCacheDtype) String() string {
	switch d {
	case KVCacheDtypeAuto:
		return "auto"
	case KVCacheDtypeF16:
		return "f16"
	case KVCacheDtypeBF16:
		return "bf16"
	case KVCacheDtypeInt8:
		return "int8"
	case KVCacheDtypeFP8E4M3:
		return "fp8_e4m3"
	case KVCacheDtypeF32:
		return "f32"
	}
	return fmt.Sprintf("KVCacheDtype(%d)", int32(d))
}

// ParseKVCacheDtype reads a name, case-insensitive: auto, f32 (fp32), f16
// (fp16), bf16, int8 or fp8_e4m3 (fp8), as the CLI's --kv-cache-dtype.
// Anything else is StatusInvalidArgument listing the names.
func ParseKVCacheDtype(name string) (KVCacheDtype, error) {
	switch strings.ToLower(name) {
	case "auto":
		return KVCacheDtypeAuto, nil
	case "f32", "fp32":
		return KVCacheDtypeF32, nil
	case "f16", "fp16":
		return KVCacheDtypeF16, nil
	case "bf16":
		return KVCacheDtypeBF16, nil
	case "int8":
		return KVCacheDtypeInt8, nil
	case "fp8_e4m3", "fp8":
		return KVCacheDtypeFP8E4M3, nil
	}
	return KVCacheDtypeAuto, &Error{Status: StatusInvalidArgument,
		Message: fmt.Sprintf("unknown KV cache dtype %q (auto, f32, f16, bf16, int8, fp8_e4m3)", name)}
}

// SamplingParams mirrors pvllm_sampling_params. Start from
// DefaultSamplingParams(): the zero value is not valid (MaxTokens, TopP and
// N are 0). The library validates every field and names the one it rejects
// in the error message ("sampling params: top_p must be in (0, 1], ...").
type SamplingParams struct {
	Temperature       float32 // 0 = greedy
	TopK              int     // 0 = off
	TopP              float32 // (0, 1]; 1 = off
	MinP              float32 // [0, 1]; 0 = off
	RepetitionPenalty float32 // > 0; 1 = off
	PresencePenalty   float32
	FrequencyPenalty  float32
	MaxTokens         int      // >= 1
	StopTokenIDs      []int32  // extra tokens that end generation
	Stop              []string // stop strings, not included in the output
	IgnoreEOS         bool
	Logprobs          int     // -1 none; 0 the chosen token; k: plus the top k (<= 20)
	Seed              *uint64 // nil = a random seed
	N                 int     // parallel samples

	// libpvllm 0.5. PromptLogprobs: -1 none; 0 each prompt token's logprob
	// (all but the first); k <= 20: plus the top k. They come with the
	// request's first event (Output.PromptLogprobs).
	PromptLogprobs int
	// Beam search with BeamWidth beams (1..10; 0 = off): the best N
	// hypotheses come back as samples, best first, each in one event with
	// its Score. Temperature must be 0 and the other shaping off.
	BeamWidth     int
	LengthPenalty float32 // a hypothesis scores its logprob sum / length^LengthPenalty (default 1)
	EarlyStopping EarlyStopping

	// Structured output (pvllm.h since 0.6): the generated text matches
	// Constraint (JSONSchema, JSONObject, Grammar, Regex or Choice; the
	// zero value is none). Each draw is limited to the tokens that can
	// continue a match and the text ends (FinishStop) once it is complete;
	// a text cut short by MaxTokens or a stop string is a prefix of a
	// match. Submit refuses a malformed constraint with StatusInvalidArgument
	// naming where it goes wrong, one that uses what pvllm does not
	// implement with StatusUnsupported naming it. Not with beam search.
	Constraint Constraint
}

// ConstraintKind mirrors pvllm_constraint_kind.
type ConstraintKind int32

// The constraint kinds of pvllm.h, with the same numbers.
const (
	ConstraintNone       ConstraintKind = 0
	ConstraintJSONSchema ConstraintKind = 1 // JSON valid against the schema in Text
	ConstraintJSONObject ConstraintKind = 2 // any JSON object
	ConstraintGrammar    ConstraintKind = 3 // the GBNF grammar in Text, from its root rule
	ConstraintRegex      ConstraintKind = 4 // the regular expression in Text, matched whole
	ConstraintChoice     ConstraintKind = 5 // exactly one of Choices
)

// Constraint is what the generated text must match (SamplingParams.
// Constraint). Build one with JSONSchema, JSONObject, Grammar, Regex or
// Choice; the zero value constrains nothing.
type Constraint struct {
	Kind ConstraintKind
	// The JSON schema, GBNF grammar or regular expression (UTF-8, no NUL
	// byte); unused by the other kinds.
	Text string
	// ConstraintChoice: the texts allowed, each non-empty.
	Choices []string
	// The JSON kinds' options (pvllm.h since 0.11, constraint_flags); the
	// zero value is compact JSON with the listed members only, in the order
	// the schema lists them. Submit refuses them on another kind with
	// StatusInvalidArgument, and with StatusUnsupported a library older than
	// 0.11, which would ignore them.
	JSON JSONOptions
}

// JSONOptions are how ConstraintJSONSchema and ConstraintJSONObject read
// JSON (pvllm.h's pvllm_constraint_flag).
type JSONOptions struct {
	// JSON's whitespace (space, tab, newline, carriage return) between
	// tokens, as in pretty-printed JSON; false: compact JSON.
	Whitespace bool
	// ConstraintJSONSchema: members the schema does not list may follow the
	// listed ones wherever its additionalProperties (or patternProperties)
	// allows them, as JSON Schema reads it; false: an object whose schema
	// lists properties gets only those. Any object takes any member
	// already, so ConstraintJSONObject is unchanged by it.
	UnlistedProperties bool
	// ConstraintJSONSchema: an object's members may come in any order, each
	// at most once and the required ones present, as JSON Schema reads
	// objects; false: in the order the schema lists them. Any object takes
	// its members in any order already, so ConstraintJSONObject is
	// unchanged by it.
	AnyOrder bool
}

// flags is pvllm_sampling_params.constraint_flags for o.
func (o JSONOptions) flags() uint32 {
	var f uint32
	if o.Whitespace {
		f |= 1 // PVLLM_CONSTRAINT_JSON_WHITESPACE
	}
	if o.UnlistedProperties {
		f |= 2 // PVLLM_CONSTRAINT_JSON_UNLISTED_PROPERTIES
	}
	if o.AnyOrder {
		f |= 4 // PVLLM_CONSTRAINT_JSON_ANY_ORDER
	}
	return f
}

// JSONSchema constrains the text to JSON that validates against schema, a
// JSON schema document (docs/structured-output.md lists the keywords pvllm
// implements); compact unless the result's JSON options say otherwise:
//
//	c := pvllm.JSONSchema(schema)
//	c.JSON = pvllm.JSONOptions{Whitespace: true}
func JSONSchema(schema string) Constraint {
	return Constraint{Kind: ConstraintJSONSchema, Text: schema}
}

// JSONObject constrains the text to any JSON object; compact unless the
// result's JSON options say otherwise.
func JSONObject() Constraint { return Constraint{Kind: ConstraintJSONObject} }

// Grammar constrains the text to a GBNF grammar (rules `name ::= ...`;
// the text is a `root`).
func Grammar(gbnf string) Constraint { return Constraint{Kind: ConstraintGrammar, Text: gbnf} }

// Regex constrains the whole text to match a regular expression.
func Regex(pattern string) Constraint { return Constraint{Kind: ConstraintRegex, Text: pattern} }

// Choice constrains the text to exactly one of choices.
func Choice(choices ...string) Constraint {
	return Constraint{Kind: ConstraintChoice, Choices: choices}
}

// EarlyStopping mirrors pvllm_early_stopping: when beam search stops, as
// Hugging Face's early_stopping False, True and "never".
type EarlyStopping int32

const (
	EarlyStoppingHeuristic EarlyStopping = 0
	EarlyStoppingTrue      EarlyStopping = 1
	EarlyStoppingNever     EarlyStopping = 2
)

// DefaultSamplingParams returns the library's defaults
// (pvllm_sampling_params_init): temperature 1, top_p 1, max_tokens 16, n 1,
// no logprobs.
func DefaultSamplingParams() SamplingParams { return defaultSamplingParams() }

// GreedySamplingParams returns the defaults with temperature 0 and the
// given token budget.
func GreedySamplingParams(maxTokens int) SamplingParams {
	p := defaultSamplingParams()
	p.Temperature = 0
	p.MaxTokens = maxTokens
	return p
}

// Request is one prompt and how to continue it. Exactly one of Prompt and
// PromptTokens is used: PromptTokens when it is non-nil (ids as given),
// otherwise Prompt (tokenized with the special tokens the tokenizer adds
// around a text, BOS for Llama-style tokenizers, unless NoAddSpecialTokens
// is set).
type Request struct {
	Prompt       string
	PromptTokens []int32
	Params       SamplingParams
	Priority     int32 // lower values are served first and preempted last

	// NoAddSpecialTokens tokenizes Prompt without adding the special tokens
	// the tokenizer puts around a text (pvllm_request.add_special_tokens =
	// 0, libpvllm 0.9; Hugging Face's add_special_tokens=False). Special
	// tokens written in the text still count. Set it for a prompt that holds
	// its own BOS, as one rendered by a chat template does (ChatRequest
	// sets it): otherwise the prompt starts with two. The zero value adds
	// them, as before 0.9. Ignored for PromptTokens. Submit refuses it as
	// StatusUnsupported with an older library, which would not read it.
	NoAddSpecialTokens bool
}

// FinishReason mirrors pvllm_finish_reason.
type FinishReason int32

// The finish reasons of pvllm.h, with the same numbers.
const (
	FinishNone   FinishReason = 0 // still generating
	FinishStop   FinishReason = 1 // EOS, a stop token or a stop string
	FinishLength FinishReason = 2 // max_tokens or the context length
	FinishAbort  FinishReason = 3 // aborted (context cancelled, Stream.Abort, Close)
	FinishError  FinishReason = 4 // see Output.Err
)

// String returns "", "stop", "length", "abort" or "error".
func (r FinishReason) String() string {
	switch r {
	case FinishNone:
		return ""
	case FinishStop:
		return "stop"
	case FinishLength:
		return "length"
	case FinishAbort:
		return "abort"
	case FinishError:
		return "error"
	}
	return "unknown"
}

// Logprob is one candidate token and its log-probability.
type Logprob struct {
	TokenID int32
	Logprob float32
}

// TokenLogprobs is the log-probability of one generated token under the raw
// model distribution, with the most likely alternatives, best first.
type TokenLogprobs struct {
	TokenID int32
	Logprob float32
	Top     []Logprob
}

// Output is one event: the new tokens of one sample of one request. Every
// sample ends with exactly one Output whose FinishReason is not FinishNone.
type Output struct {
	RequestID    uint64
	Index        int     // sample index, 0..n-1
	TokenIDs     []int32 // new tokens since the previous event
	Text         string  // their text; never a broken UTF-8 character
	FinishReason FinishReason
	Logprobs     []TokenLogprobs // one per token when requested, else nil
	// Err is set when FinishReason is FinishError (the library's message;
	// the event carries no status, so Status is StatusInternal), and is
	// ErrClosed when the engine was closed under the request.
	Err error
	// RequestFinished marks the request's last event: every sample has
	// finished, and the Stream's channel closes after it.
	RequestFinished bool
	// Sequence is the event's place among its request's events (all
	// samples): 0, 1, 2, ... in the order the engine made them; sorting
	// events that several goroutines took by it restores that order. 0 with
	// a library older than 0.4.
	Sequence uint64
	// On the request's first event when it asked for prompt logprobs: entry
	// i for prompt token i + 1 (libpvllm 0.5).
	PromptLogprobs []TokenLogprobs
	// Beam search: the hypothesis' score; 0 otherwise (libpvllm 0.5).
	Score float64
	// On the request's last event (RequestFinished): its timing and token
	// counts; nil on the others and with a library older than 0.5.
	Metrics *RequestMetrics
}

// RequestMetrics is a request's timing, in seconds from its submission,
// and its token counts (libpvllm 0.5).
type RequestMetrics struct {
	TimeQueued            float64 // to the first step that ran any of its tokens
	TimeToFirstToken      float64 // to the end of the step of its first token; 0 if none
	TimePerOutputToken    float64 // mean gap between its token steps after the first
	E2ELatency            float64 // to the end of its last step
	NumPromptTokens       int64
	NumPrefillTokens      int64 // prompt tokens computed, recomputation included
	NumCachedPromptTokens int64 // prompt tokens the prefix cache spared
	NumGeneratedTokens    int64 // over all its samples
}

// Stats is a snapshot of the engine's counters (pvllm_stats).
type Stats struct {
	NumRunning               int
	NumWaiting               int
	NumBlocksTotal           int
	NumBlocksUsed            int
	NumBlocksFree            int
	NumBlocksCached          int
	KVUtilization            float32 // used / total
	ReservedUnusedSlots      int64
	PrefixCacheHitRate       float32
	PrefixCacheHits          int64
	PrefixCacheQueries       int64
	NumPreemptions           int64
	NumPromptTokensProcessed int64
	NumGenerationTokens      int64
	NumCachedPromptTokens    int64
	NumSteps                 int64
	NumRequestsFinished      int64
	// libpvllm 0.5 (0 with an older library).
	NumPrefixCacheEvictions int64
	StepTimeP50Ms           float32 // over the latest 1024 steps that ran a batch
	StepTimeP99Ms           float32
	StepTimeMaxMs           float32
	NumPreemptionsBySwap    int64
	NumBlocksSwappedOut     int64
	NumBlocksSwappedIn      int64
	NumSwapBytes            int64 // moved both ways
	// NumKVTokensAttended (libpvllm 0.8; 0 with an older library): the
	// context positions attention read, over every step (each computed
	// sequence's whole context after its step, or the last sliding_window).
	NumKVTokensAttended int64
	// Speculative decoding (libpvllm 0.11; 0 with an older library): decode
	// steps that carried proposals, tokens proposed, tokens that stood.
	NumSpecDrafts         int64
	NumSpecProposedTokens int64
	NumSpecAcceptedTokens int64
}

// MemoryEstimate is what New(cfg) would need (pvllm_estimate_memory).
type MemoryEstimate struct {
	WeightBytes      uint64
	KVBytesPerBlock  uint64
	NumBlocks        int
	KVBytesTotal     uint64
	MaxTokensInCache int64
	SwapBytes        uint64 // the host swap space on the CPU (libpvllm 0.5)
}

// EstimateMemory reads the model's config and tensor table, loads nothing,
// and says what New(cfg) would allocate.
func EstimateMemory(cfg Config) (MemoryEstimate, error) { return estimateMemory(&cfg) }

// ModelConfig is a model's configuration as pvllm reads it.
type ModelConfig struct {
	Architecture          string
	Format                string // "huggingface", "llama2c" or "pvllm"
	HiddenSize            int
	IntermediateSize      int
	NumLayers             int
	NumHeads              int
	NumKVHeads            int
	HeadDim               int
	VocabSize             int
	MaxPositionEmbeddings int
	RMSNormEps            float32
	RopeTheta             float32
	TieWordEmbeddings     bool
	BOSTokenID            int32
	EOSTokenID            int32
	RopeType              RopeType
	RopeFactor            float32 // the scaling factor of RopeLinear, RopeLlama3 and RopeDynamic
	SlidingWindow         int     // a query attends the last SlidingWindow keys; 0 = all
	StopTokenIDs          []int32 // the ids besides EOSTokenID that end generation by default
}

// RopeType mirrors pvllm_rope_type: the model's RoPE scaling.
type RopeType int32

// The RoPE scalings of pvllm.h, with the same numbers.
const (
	RopeDefault RopeType = 0 // no scaling
	RopeLinear  RopeType = 1 // every frequency divided by RopeFactor
	RopeLlama3  RopeType = 2 // low frequencies divided, high kept
	RopeDynamic RopeType = 3 // NTK-aware: the base grows with the sequence
)

// MaxContextLength is the longest context an engine of this model serves
// when Config.MaxModelLen is 0: MaxPositionEmbeddings, stretched by
// RopeFactor under linear and dynamic scaling (pvllm.h, rope_factor).
func (c ModelConfig) MaxContextLength() int {
	if c.RopeType == RopeLinear || c.RopeType == RopeDynamic {
		return int(float64(c.MaxPositionEmbeddings) * float64(c.RopeFactor))
	}
	return c.MaxPositionEmbeddings
}

// InspectModel reads a model's configuration without loading its weights.
func InspectModel(path string) (ModelConfig, error) { return inspectModel(path) }
