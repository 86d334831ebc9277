package pvllm

// This file holds the cgo calls of engines and requests; chat.go,
// tokenizer.go, delivery.go (the output handler) and progress.go hold the
// rest.
//
// Errors: every fallible pvllm_* function takes a last `pvllm_error**`
// argument and hands back a new error object that holds the status and the
// message of *that* call. We read the message from that object and free it
// (takeError) before returning to Go code. A goroutine may run on a
// different OS thread for each cgo call, so a thread-local "last error"
// fetched by a second call could belong to another goroutine's failure; the
// out-parameter makes that impossible, and this package never reads any
// thread-local state.
//
// Pointers: Go memory passed to C never contains Go pointers. Strings are
// copied to C memory (C.CString + defer C.free); token buffers are plain
// []int32 whose first element's address is passed for the duration of one
// call; the library copies every input before it returns.

// The library is found through pkg-config (the pvllm.pc that `cmake
// --install`, the Debian package and vcpkg install): set PKG_CONFIG_PATH to
// its folder for a prefix pkg-config does not search.

/*
#cgo pkg-config: pvllm
#include <stdint.h>
#include <stdlib.h>
#include <pvllm/pvllm.h>

// Defined in progress.go with //export.
extern void pvllmGoProgress(float fraction, char* stage, uintptr_t handle);

static void pvllm_go_progress_trampoline(float fraction, const char* stage, void* user_data) {
  pvllmGoProgress(fraction, (char*)stage, (uintptr_t)user_data);
}

// Creates an engine, routing progress to the Go callback behind `handle`
// (a runtime/cgo.Handle; 0 = no callback). The handle travels as an integer
// so that Go never converts a uintptr to a pointer.
static pvllm_status pvllm_go_engine_create(pvllm_engine_params* params, uintptr_t handle,
                                           pvllm_engine** out_engine, pvllm_error** error) {
  if (handle != 0) {
    params->progress = pvllm_go_progress_trampoline;
    params->progress_user_data = (void*)handle;
  }
  return pvllm_engine_create(params, out_engine, error);
}

// Defined in delivery.go with //export.
extern void pvllmGoOutput(pvllm_output* output, uintptr_t handle);

// A request's on_output (pvllm.h since 0.5): hands each event to the Go
// Stream behind `user_data` (a runtime/cgo.Handle).
static void pvllm_go_output_trampoline(const pvllm_output* output, void* user_data) {
  pvllmGoOutput((pvllm_output*)output, (uintptr_t)user_data);
}

// Builds the pvllm_request on the C stack so that Go never holds a struct
// with a pointer into Go memory (the token ids live in a Go slice). With a
// handle the events go to pvllmGoOutput; without one (a library older than
// 0.5) they wait in the library for pvllm_wait / pvllm_poll_request on the
// id (per-request delivery).
static pvllm_status pvllm_go_submit(pvllm_engine* engine, const char* text, const int32_t* ids,
                                    size_t num_ids, const pvllm_sampling_params* sampling,
                                    int32_t priority, uint8_t add_special_tokens,
                                    uintptr_t handle, uint64_t* out_request_id,
                                    pvllm_error** error) {
  pvllm_request request;
  pvllm_request_init(&request, sizeof request);
  request.prompt_text = text;
  request.prompt_token_ids = ids;
  request.num_prompt_token_ids = num_ids;
  request.sampling = sampling;
  request.priority = priority;
  request.add_special_tokens = add_special_tokens;
  if (handle != 0) {
    request.on_output = pvllm_go_output_trampoline;
    request.on_output_user_data = (void*)handle;
  } else {
    request.delivery = PVLLM_DELIVERY_PER_REQUEST;
  }
  return pvllm_submit(engine, &request, out_request_id, error);
}
*/
import "C"

import (
	"runtime/cgo"
	"strconv"
	"strings"
	"unsafe"
)

// cEngine is the opaque engine handle, named for the files without cgo.
type cEngine = C.pvllm_engine

// takeError turns the status and error object of one call into a Go error
// and frees the object. It must be given the object that the same call
// wrote; see the comment at the top of this file.
func takeError(st C.pvllm_status, cerr *C.pvllm_error) error {
	defer C.pvllm_error_free(cerr)
	if st == C.PVLLM_STATUS_OK {
		return nil
	}
	e := &Error{Status: Status(st)}
	if cerr != nil {
		e.Message = C.GoString(C.pvllm_error_message(cerr))
	}
	return e
}

func statusString(s Status) string {
	return C.GoString(C.pvllm_status_to_string(C.pvllm_status(s)))
}

func cBool(b bool) C.uint8_t {
	if b {
		return 1
	}
	return 0
}

// --- versions ---------------------------------------------------------------

// BuiltABIVersion is PVLLM_ABI_VERSION of the header this package was
// compiled against; New refuses a library with another ABI version.
const BuiltABIVersion = uint32(C.PVLLM_ABI_VERSION)

// Version returns the loaded library's version, "MAJOR.MINOR.PATCH".
func Version() string { return C.GoString(C.pvllm_version()) }

// VersionNumber returns the loaded library's MAJOR*10000 + MINOR*100 + PATCH.
func VersionNumber() uint32 { return uint32(C.pvllm_version_number()) }

// ABIVersion returns the loaded library's ABI version.
func ABIVersion() uint32 { return uint32(C.pvllm_abi_version()) }

// --- engine params ----------------------------------------------------------

// cEngineParams fills p from cfg; zero fields keep the library's defaults.
// The returned function frees the C strings.
func cEngineParams(cfg *Config, p *C.pvllm_engine_params) (free func()) {
	C.pvllm_engine_params_init(p, C.size_t(C.sizeof_pvllm_engine_params))
	var strs []*C.char
	cstr := func(s string) *C.char {
		c := C.CString(s)
		strs = append(strs, c)
		return c
	}
	if cfg.ModelPath != "" {
		p.model_path = cstr(cfg.ModelPath)
	}
	if cfg.RandomWeights != "" {
		p.random_weights = cstr(cfg.RandomWeights)
	}
	if cfg.Device != "" {
		p.device = cstr(cfg.Device)
	}
	if cfg.BlockSize != 0 {
		p.block_size = C.int32_t(cfg.BlockSize)
	}
	if cfg.KVCacheBytes != 0 {
		p.kv_cache_bytes = C.int64_t(cfg.KVCacheBytes)
	}
	if cfg.NumKVBlocks != 0 {
		p.num_kv_blocks = C.int32_t(cfg.NumKVBlocks)
	}
	if cfg.MaxNumSeqs != 0 {
		p.max_num_seqs = C.int32_t(cfg.MaxNumSeqs)
	}
	if cfg.MaxNumBatchedTokens != 0 {
		p.max_num_batched_tokens = C.int32_t(cfg.MaxNumBatchedTokens)
	}
	if cfg.MaxModelLen != 0 {
		p.max_model_len = C.int32_t(cfg.MaxModelLen)
	}
	if cfg.DisablePrefixCaching {
		p.enable_prefix_caching = 0
	}
	if cfg.NumThreads != 0 {
		p.num_threads = C.int32_t(cfg.NumThreads)
	}
	p.kv_allocator = C.int32_t(cfg.KVAllocator)
	if cfg.GPUMemoryUtilization != 0 {
		p.gpu_memory_utilization = C.float(cfg.GPUMemoryUtilization)
	}
	p.dtype = C.int32_t(cfg.DType)
	if cfg.DisableCUDAGraphs {
		p.enable_cuda_graphs = 0
	}
	p.preemption_mode = C.int32_t(cfg.PreemptionMode)
	p.swap_space_bytes = C.int64_t(cfg.SwapSpaceBytes)
	p.model_checksums = C.int64_t(cfg.ModelChecksums)
	if cfg.Quantize != "" {
		p.quantize = cstr(cfg.Quantize)
	}
	p.kv_cache_dtype = C.int32_t(cfg.KVCacheDtype)
	if cfg.Speculative != "" {
		p.speculative = cstr(cfg.Speculative)
	}
	if cfg.SpeculativeTokens != 0 {
		p.speculative_tokens = C.int32_t(cfg.SpeculativeTokens)
	}
	if cfg.NgramMin != 0 {
		p.ngram_min = C.int32_t(cfg.NgramMin)
	}
	if cfg.NgramMax != 0 {
		p.ngram_max = C.int32_t(cfg.NgramMax)
	}
	p.speculative_max_running = C.int32_t(cfg.SpeculativeMaxRunning)
	return func() {
		for _, s := range strs {
			C.free(unsafe.Pointer(s))
		}
	}
}

// checkConfigVersion refuses what the loaded library would not read.
func checkConfigVersion(cfg *Config) error {
	// An older library would ignore quantize and serve the weights as stored.
	if cfg.Quantize != "" && VersionNumber() < versionQuantize {
		return &Error{Status: StatusUnsupported, Message: "config: Quantize: libpvllm " +
			Version() + " is older than 0.10"}
	}
	// An older library would ignore kv_cache_dtype and store the backend's own.
	if cfg.KVCacheDtype != KVCacheDtypeAuto && VersionNumber() < versionKVCacheDtype {
		return &Error{Status: StatusUnsupported, Message: "config: KVCacheDtype: libpvllm " +
			Version() + " is older than 0.11"}
	}
	// An older library would ignore speculative and decode one token a step.
	if cfg.Speculative != "" && cfg.Speculative != "off" && VersionNumber() < versionSpeculative {
		return &Error{Status: StatusUnsupported, Message: "config: Speculative: libpvllm " +
			Version() + " is older than 0.11"}
	}
	return nil
}

func engineCreate(cfg *Config) (*C.pvllm_engine, error) {
	if err := checkConfigVersion(cfg); err != nil {
		return nil, err
	}
	var p C.pvllm_engine_params
	free := cEngineParams(cfg, &p)
	defer free()
	var handle C.uintptr_t
	var prog *progressState
	if cfg.Progress != nil {
		prog = &progressState{fn: cfg.Progress}
		h := cgo.NewHandle(prog)
		defer h.Delete()
		handle = C.uintptr_t(h)
	}
	var h *C.pvllm_engine
	var cerr *C.pvllm_error
	st := C.pvllm_go_engine_create(&p, handle, &h, &cerr)
	err := takeError(st, cerr)
	if prog != nil && prog.panicked {
		C.pvllm_engine_destroy(h)
		panic(prog.panicValue)
	}
	if err != nil {
		return nil, err
	}
	return h, nil
}

func engineDestroy(h *C.pvllm_engine) { C.pvllm_engine_destroy(h) }

func estimateMemory(cfg *Config) (MemoryEstimate, error) {
	if err := checkConfigVersion(cfg); err != nil {
		return MemoryEstimate{}, err
	}
	var p C.pvllm_engine_params
	free := cEngineParams(cfg, &p)
	defer free()
	var est C.pvllm_memory_estimate
	C.pvllm_memory_estimate_init(&est, C.size_t(unsafe.Sizeof(est)))
	var cerr *C.pvllm_error
	if err := takeError(C.pvllm_estimate_memory(&p, &est, &cerr), cerr); err != nil {
		return MemoryEstimate{}, err
	}
	return MemoryEstimate{
		WeightBytes:      uint64(est.weight_bytes),
		KVBytesPerBlock:  uint64(est.kv_bytes_per_block),
		NumBlocks:        int(est.num_blocks),
		KVBytesTotal:     uint64(est.kv_bytes_total),
		MaxTokensInCache: int64(est.max_tokens_in_cache),
		SwapBytes:        uint64(est.swap_bytes),
	}, nil
}

func inspectModel(path string) (ModelConfig, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var info *C.pvllm_model_info
	var cerr *C.pvllm_error
	if err := takeError(C.pvllm_model_inspect(cpath, &info, &cerr), cerr); err != nil {
		return ModelConfig{}, err
	}
	defer C.pvllm_model_info_free(info)
	var c C.pvllm_model_config
	C.pvllm_model_config_init(&c, C.size_t(unsafe.Sizeof(c)))
	if err := takeError(C.pvllm_model_info_config(info, &c, &cerr), cerr); err != nil {
		return ModelConfig{}, err
	}
	return ModelConfig{
		Architecture:          C.GoString(&c.architecture[0]),
		Format:                C.GoString(&c.format[0]),
		HiddenSize:            int(c.hidden_size),
		IntermediateSize:      int(c.intermediate_size),
		NumLayers:             int(c.num_layers),
		NumHeads:              int(c.num_heads),
		NumKVHeads:            int(c.num_kv_heads),
		HeadDim:               int(c.head_dim),
		VocabSize:             int(c.vocab_size),
		MaxPositionEmbeddings: int(c.max_position_embeddings),
		RMSNormEps:            float32(c.rms_norm_eps),
		RopeTheta:             float32(c.rope_theta),
		TieWordEmbeddings:     c.tie_word_embeddings != 0,
		BOSTokenID:            int32(c.bos_token_id),
		EOSTokenID:            int32(c.eos_token_id),
		RopeType:              RopeType(c.rope_type),
		RopeFactor:            float32(c.rope_factor),
		SlidingWindow:         int(c.sliding_window),
		StopTokenIDs:          stopTokenIDs(&c),
	}, nil
}

func stopTokenIDs(c *C.pvllm_model_config) []int32 {
	n := int(c.num_stop_token_ids)
	if n > len(c.stop_token_ids) {
		n = len(c.stop_token_ids)
	}
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(c.stop_token_ids[i])
	}
	return ids
}

// --- requests ---------------------------------------------------------------

func defaultSamplingParams() SamplingParams {
	var c C.pvllm_sampling_params
	C.pvllm_sampling_params_init(&c, C.size_t(unsafe.Sizeof(c)))
	return SamplingParams{
		Temperature:       float32(c.temperature),
		TopK:              int(c.top_k),
		TopP:              float32(c.top_p),
		MinP:              float32(c.min_p),
		RepetitionPenalty: float32(c.repetition_penalty),
		PresencePenalty:   float32(c.presence_penalty),
		FrequencyPenalty:  float32(c.frequency_penalty),
		MaxTokens:         int(c.max_tokens),
		IgnoreEOS:         c.ignore_eos != 0,
		Logprobs:          int(c.logprobs),
		N:                 int(c.n),
		PromptLogprobs:    int(c.prompt_logprobs),
		BeamWidth:         int(c.beam_width),
		LengthPenalty:     float32(c.length_penalty),
		EarlyStopping:     EarlyStopping(c.early_stopping),
	}
}

// Library versions (pvllm_version_number) that added what this package
// uses when it is there.
const (
	versionOutputHandlers   = 500  // pvllm_request.on_output
	versionConstraints      = 600  // pvllm_sampling_params.constraint_kind
	versionAddSpecialTokens = 900  // pvllm_request.add_special_tokens
	versionChatTemplateText = 900  // pvllm_chat_template_params.chat_template
	versionTokenizers       = 900  // pvllm_tokenizer_*
	versionQuantize         = 1000 // pvllm_engine_params.quantize
	versionKVCacheDtype     = 1100 // pvllm_engine_params.kv_cache_dtype
	versionConstraintFlags  = 1100 // pvllm_sampling_params.constraint_flags
	versionSpeculative      = 1100 // pvllm_engine_params.speculative
)

// submit queues req. With a non-zero handle (a cgo.Handle of the request's
// Stream) the library hands each event to pvllmGoOutput as the step makes
// it; with 0 the events wait in the library for wait and pollRequest on the
// id (per-request delivery). Stop strings and stop token ids are copied
// into C memory because the sampling struct that points at them is itself
// passed to C.
func submit(h *C.pvllm_engine, req *Request, handle cgo.Handle) (uint64, error) {
	// An older library would not read add_special_tokens and would add a
	// second BOS to a prompt that holds its own.
	if req.NoAddSpecialTokens && req.PromptTokens == nil && VersionNumber() < versionAddSpecialTokens {
		return 0, &Error{Status: StatusUnsupported, Message: "request: NoAddSpecialTokens: " +
			"libpvllm " + Version() + " is older than 0.9"}
	}
	sp := &req.Params
	ints := []struct {
		name string
		v    int
	}{{"top_k", sp.TopK}, {"max_tokens", sp.MaxTokens}, {"logprobs", sp.Logprobs}, {"n", sp.N},
		{"prompt_logprobs", sp.PromptLogprobs}, {"beam_width", sp.BeamWidth}}
	for _, f := range ints {
		if int(int32(f.v)) != f.v {
			return 0, &Error{Status: StatusInvalidArgument,
				Message: "sampling params: " + f.name + " does not fit in 32 bits"}
		}
	}
	var c C.pvllm_sampling_params
	C.pvllm_sampling_params_init(&c, C.size_t(unsafe.Sizeof(c)))
	c.temperature = C.float(sp.Temperature)
	c.top_k = C.int32_t(sp.TopK)
	c.top_p = C.float(sp.TopP)
	c.min_p = C.float(sp.MinP)
	c.repetition_penalty = C.float(sp.RepetitionPenalty)
	c.presence_penalty = C.float(sp.PresencePenalty)
	c.frequency_penalty = C.float(sp.FrequencyPenalty)
	c.max_tokens = C.int32_t(sp.MaxTokens)
	c.ignore_eos = cBool(sp.IgnoreEOS)
	c.logprobs = C.int32_t(sp.Logprobs)
	c.n = C.int32_t(sp.N)
	c.prompt_logprobs = C.int64_t(sp.PromptLogprobs)
	c.beam_width = C.int32_t(sp.BeamWidth)
	c.length_penalty = C.float(sp.LengthPenalty)
	c.early_stopping = C.int32_t(sp.EarlyStopping)
	if sp.Seed != nil {
		c.has_seed = 1
		c.seed = C.uint64_t(*sp.Seed)
	}
	if n := len(sp.StopTokenIDs); n > 0 {
		buf := (*C.int32_t)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(C.int32_t(0)))))
		defer C.free(unsafe.Pointer(buf))
		dst := unsafe.Slice(buf, n)
		for i, id := range sp.StopTokenIDs {
			dst[i] = C.int32_t(id)
		}
		c.stop_token_ids = buf
		c.num_stop_token_ids = C.size_t(n)
	}
	if n := len(sp.Stop); n > 0 {
		arr := (**C.char)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))
		defer C.free(unsafe.Pointer(arr))
		dst := unsafe.Slice(arr, n)
		for i, s := range sp.Stop {
			dst[i] = C.CString(s)
			defer C.free(unsafe.Pointer(dst[i]))
		}
		c.stop = arr
		c.num_stop = C.size_t(n)
	}
	if err := cConstraint(&sp.Constraint, &c); err != nil {
		return 0, err
	}
	defer freeConstraint(&c)

	var text *C.char
	if req.PromptTokens == nil {
		text = C.CString(req.Prompt)
		defer C.free(unsafe.Pointer(text))
	}
	var ids *C.int32_t
	if len(req.PromptTokens) > 0 {
		ids = (*C.int32_t)(unsafe.Pointer(&req.PromptTokens[0]))
	}
	var id C.uint64_t
	var cerr *C.pvllm_error
	st := C.pvllm_go_submit(h, text, ids, C.size_t(len(req.PromptTokens)), &c,
		C.int32_t(req.Priority), cBool(!req.NoAddSpecialTokens), C.uintptr_t(handle), &id, &cerr)
	if err := takeError(st, cerr); err != nil {
		return 0, err
	}
	return uint64(id), nil
}

// cConstraint sets c's constraint fields (pvllm.h since 0.6) from k, in C
// memory that freeConstraint releases. Go strings may hold NUL bytes, which
// a C string would silently cut: such a text is refused here.
func cConstraint(k *Constraint, c *C.pvllm_sampling_params) error {
	// The library refuses options on a kind they do not apply to; an older
	// one would ignore them.
	if flags := k.JSON.flags(); flags != 0 {
		if VersionNumber() < versionConstraintFlags {
			return &Error{Status: StatusUnsupported, Message: "sampling params: constraint: " +
				"JSON options: libpvllm " + Version() + " is older than 0.11"}
		}
		c.constraint_flags = C.uint32_t(flags)
	}
	if k.Kind == ConstraintNone {
		return nil
	}
	// A library older than 0.6 would not read the fields: the text would
	// come back unconstrained.
	if VersionNumber() < versionConstraints {
		return &Error{Status: StatusUnsupported,
			Message: "sampling params: constraint: libpvllm " + Version() + " is older than 0.6"}
	}
	hasNUL := func(s string) bool { return strings.IndexByte(s, 0) >= 0 }
	c.constraint_kind = C.int32_t(k.Kind)
	switch k.Kind {
	case ConstraintJSONSchema, ConstraintGrammar, ConstraintRegex:
		if hasNUL(k.Text) {
			return &Error{Status: StatusInvalidArgument,
				Message: "sampling params: constraint: the text holds a NUL byte"}
		}
		c.constraint = C.CString(k.Text)
	case ConstraintChoice:
		for i, s := range k.Choices {
			if hasNUL(s) {
				return &Error{Status: StatusInvalidArgument, Message: "sampling params: " +
					"constraint: choice " + strconv.Itoa(i) + " holds a NUL byte"}
			}
		}
		if n := len(k.Choices); n > 0 {
			arr := (**C.char)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))
			dst := unsafe.Slice(arr, n)
			for i, s := range k.Choices {
				dst[i] = C.CString(s)
			}
			c.choices = arr
			c.num_choices = C.size_t(n)
		}
	}
	return nil
}

// freeConstraint frees what cConstraint allocated.
func freeConstraint(c *C.pvllm_sampling_params) {
	if c.constraint != nil {
		C.free(unsafe.Pointer(c.constraint))
		c.constraint = nil
	}
	if c.choices != nil {
		for _, s := range unsafe.Slice(c.choices, int(c.num_choices)) {
			C.free(unsafe.Pointer(s))
		}
		C.free(unsafe.Pointer(c.choices))
		c.choices = nil
	}
}

func abort(h *C.pvllm_engine, id uint64) error {
	var cerr *C.pvllm_error
	return takeError(C.pvllm_abort(h, C.uint64_t(id), &cerr), cerr)
}

// step runs one scheduler iteration and returns the number of unfinished
// requests.
func step(h *C.pvllm_engine) (int, error) {
	var n C.int32_t
	var cerr *C.pvllm_error
	err := takeError(C.pvllm_step(h, &n, &cerr), cerr)
	return int(n), err
}

// wait blocks until request id has events to take (or its last event was
// taken elsewhere meanwhile), up to timeoutMs; ready is false on a timeout.
// The goroutine holds its OS thread while the library blocks: only for
// libraries older than 0.5, which have no output handlers.
func wait(h *C.pvllm_engine, id uint64, timeoutMs int32) (ready bool, err error) {
	// No error object for a timeout: it is the common outcome.
	var cerr *C.pvllm_error
	st := C.pvllm_wait(h, C.uint64_t(id), C.int32_t(timeoutMs), &cerr)
	if st == C.PVLLM_STATUS_TIMEOUT {
		C.pvllm_error_free(cerr)
		return false, nil
	}
	if err := takeError(st, cerr); err != nil {
		return false, err
	}
	return true, nil
}

// pollRequest takes request id's pending events and copies them into Go
// memory.
func pollRequest(h *C.pvllm_engine, id uint64) ([]Output, error) {
	var batch *C.pvllm_output_batch
	var cerr *C.pvllm_error
	if err := takeError(C.pvllm_poll_request(h, C.uint64_t(id), 0, &batch, &cerr), cerr); err != nil {
		return nil, err
	}
	defer C.pvllm_output_batch_free(batch)
	n := int(C.pvllm_output_batch_size(batch))
	if n == 0 {
		return nil, nil
	}
	outs := make([]Output, n)
	for i := range outs {
		outs[i] = goOutput(C.pvllm_output_batch_get(batch, C.size_t(i)))
	}
	return outs, nil
}

// goOutput copies one event into Go memory: the C one lives only as long as
// its batch, or the output handler's call.
func goOutput(o *C.pvllm_output) Output {
	var out Output
	out.RequestID = uint64(o.request_id)
	out.Index = int(o.sample_index)
	out.FinishReason = FinishReason(o.finish_reason)
	if o.num_token_ids > 0 {
		src := unsafe.Slice(o.token_ids, int(o.num_token_ids))
		out.TokenIDs = make([]int32, len(src))
		for j, t := range src {
			out.TokenIDs[j] = int32(t)
		}
	}
	out.Text = C.GoStringN(o.text, C.int(o.text_len))
	out.RequestFinished = o.request_finished != 0
	// Fields appended since 0.1 are read only when the library that made
	// the event filled them (its struct_size covers them).
	has := func(offset, size uintptr) bool { return uintptr(o.struct_size) >= offset+size }
	if has(unsafe.Offsetof(o.sequence), unsafe.Sizeof(o.sequence)) {
		out.Sequence = uint64(o.sequence)
	}
	if o.logprobs != nil && o.num_token_ids > 0 {
		out.Logprobs = copyLogprobs(o.logprobs, int(o.num_token_ids))
	}
	if has(unsafe.Offsetof(o.score), unsafe.Sizeof(o.score)) {
		if o.prompt_logprobs != nil && o.num_prompt_logprobs > 0 {
			out.PromptLogprobs = copyLogprobs(o.prompt_logprobs, int(o.num_prompt_logprobs))
		}
		out.Score = float64(o.score)
		if out.RequestFinished {
			out.Metrics = &RequestMetrics{
				TimeQueued:            float64(o.time_queued),
				TimeToFirstToken:      float64(o.time_to_first_token),
				TimePerOutputToken:    float64(o.time_per_output_token),
				E2ELatency:            float64(o.e2e_latency),
				NumPromptTokens:       int64(o.num_prompt_tokens),
				NumPrefillTokens:      int64(o.num_prefill_tokens),
				NumCachedPromptTokens: int64(o.num_cached_prompt_tokens),
				NumGeneratedTokens:    int64(o.num_generated_tokens),
			}
		}
	}
	if out.FinishReason == FinishError {
		out.Err = &Error{Status: StatusInternal, Message: C.GoString(o.error_message)}
	}
	return out
}

// copyLogprobs copies n C token logprobs into Go memory.
func copyLogprobs(p *C.pvllm_token_logprobs, n int) []TokenLogprobs {
	src := unsafe.Slice(p, n)
	out := make([]TokenLogprobs, n)
	for j := range src {
		lp := &out[j]
		lp.TokenID = int32(src[j].token_id)
		lp.Logprob = float32(src[j].logprob)
		if src[j].num_top > 0 {
			top := unsafe.Slice(src[j].top, int(src[j].num_top))
			lp.Top = make([]Logprob, len(top))
			for k := range top {
				lp.Top[k] = Logprob{TokenID: int32(top[k].token_id), Logprob: float32(top[k].logprob)}
			}
		}
	}
	return out
}

func getStats(h *C.pvllm_engine) (Stats, error) {
	var s C.pvllm_stats
	C.pvllm_stats_init(&s, C.size_t(unsafe.Sizeof(s)))
	var cerr *C.pvllm_error
	if err := takeError(C.pvllm_get_stats(h, &s, &cerr), cerr); err != nil {
		return Stats{}, err
	}
	return Stats{
		NumRunning:               int(s.num_running),
		NumWaiting:               int(s.num_waiting),
		NumBlocksTotal:           int(s.num_blocks_total),
		NumBlocksUsed:            int(s.num_blocks_used),
		NumBlocksFree:            int(s.num_blocks_free),
		NumBlocksCached:          int(s.num_blocks_cached),
		KVUtilization:            float32(s.kv_utilization),
		ReservedUnusedSlots:      int64(s.reserved_unused_slots),
		PrefixCacheHitRate:       float32(s.prefix_cache_hit_rate),
		PrefixCacheHits:          int64(s.prefix_cache_hits),
		PrefixCacheQueries:       int64(s.prefix_cache_queries),
		NumPreemptions:           int64(s.num_preemptions),
		NumPromptTokensProcessed: int64(s.num_prompt_tokens_processed),
		NumGenerationTokens:      int64(s.num_generation_tokens),
		NumCachedPromptTokens:    int64(s.num_cached_prompt_tokens),
		NumSteps:                 int64(s.num_steps),
		NumRequestsFinished:      int64(s.num_requests_finished),
		NumPrefixCacheEvictions:  int64(s.num_prefix_cache_evictions),
		StepTimeP50Ms:            float32(s.step_time_p50_ms),
		StepTimeP99Ms:            float32(s.step_time_p99_ms),
		StepTimeMaxMs:            float32(s.step_time_max_ms),
		NumPreemptionsBySwap:     int64(s.num_preemptions_by_swap),
		NumBlocksSwappedOut:      int64(s.num_blocks_swapped_out),
		NumBlocksSwappedIn:       int64(s.num_blocks_swapped_in),
		NumSwapBytes:             int64(s.num_swap_bytes),
		NumKVTokensAttended:      int64(s.num_kv_tokens_attended),
		NumSpecDrafts:            int64(s.num_spec_drafts),
		NumSpecProposedTokens:    int64(s.num_spec_proposed_tokens),
		NumSpecAcceptedTokens:    int64(s.num_spec_accepted_tokens),
	}, nil
}

// --- tokenizer --------------------------------------------------------------

func tokenize(h *C.pvllm_engine, text string, addBOS bool) ([]int32, error) {
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))
	return readIDs(len(text)+2, func(ids *C.int32_t, capacity C.size_t, n *C.size_t, cerr **C.pvllm_error) C.pvllm_status {
		return C.pvllm_tokenize(h, ctext, cBool(addBOS), ids, capacity, n, cerr)
	})
}

func detokenize(h *C.pvllm_engine, ids []int32) (string, error) {
	if len(ids) == 0 {
		return "", nil
	}
	return readText(8*len(ids)+16, func(buf *C.char, capacity C.size_t, n *C.size_t, cerr **C.pvllm_error) C.pvllm_status {
		return C.pvllm_detokenize(h, (*C.int32_t)(unsafe.Pointer(&ids[0])), C.size_t(len(ids)), buf, capacity, n, cerr)
	})
}

// readIDs runs a C call that encodes into an id buffer (ids, capacity, n,
// cerr), starting with room for guess ids and growing once when the call
// answers BUFFER_TOO_SMALL with the count it needs.
func readIDs(guess int, call func(ids *C.int32_t, capacity C.size_t, n *C.size_t, cerr **C.pvllm_error) C.pvllm_status) ([]int32, error) {
	ids := make([]int32, guess)
	for {
		var n C.size_t
		var cerr *C.pvllm_error
		st := call((*C.int32_t)(unsafe.Pointer(&ids[0])), C.size_t(len(ids)), &n, &cerr)
		if st == C.PVLLM_STATUS_BUFFER_TOO_SMALL && int(n) > len(ids) {
			C.pvllm_error_free(cerr)
			ids = make([]int32, int(n))
			continue
		}
		if err := takeError(st, cerr); err != nil {
			return nil, err
		}
		return ids[:int(n)], nil
	}
}

// readText runs a C call that writes text into a buffer (buf, capacity, n,
// cerr), starting with guess bytes and growing once when the call answers
// BUFFER_TOO_SMALL with the length it needs.
func readText(guess int, call func(buf *C.char, capacity C.size_t, n *C.size_t, cerr **C.pvllm_error) C.pvllm_status) (string, error) {
	buf := make([]byte, guess)
	for {
		var n C.size_t
		var cerr *C.pvllm_error
		st := call((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &n, &cerr)
		if st == C.PVLLM_STATUS_BUFFER_TOO_SMALL && int(n)+1 > len(buf) {
			C.pvllm_error_free(cerr)
			buf = make([]byte, int(n)+1)
			continue
		}
		if err := takeError(st, cerr); err != nil {
			return "", err
		}
		return string(buf[:int(n)]), nil
	}
}
