package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"pvllm.dev/pvllm/pvllm"
)

// options are pvllm-server's command line. The engine options are spelled
// as the pvllm command spells them (--kv-cache-mb, --max-num-seqs, ...).
type options struct {
	model           string
	servedModelName string
	host            string
	port            int
	apiKey          string
	version         bool

	// chatTemplateFile (--chat-template) names a Jinja chat template that
	// renders every chat instead of the model's; chatTemplate is its text,
	// read at startup ("" = the model's).
	chatTemplateFile string
	chatTemplate     string

	// Protection.
	maxConcurrency    int
	maxQueue          int
	maxChoices        int
	maxCallTokens     int64
	maxBodyMB         int64
	readHeaderTimeout time.Duration
	readTimeout       time.Duration
	writeTimeout      time.Duration
	idleTimeout       time.Duration
	drainTimeout      time.Duration

	// The engine.
	device               string
	blockSize            int
	kvCacheMB            int64
	maxNumSeqs           int
	maxNumBatchedTokens  int
	maxModelLen          int
	threads              int
	noPrefixCaching      bool
	dtype                string
	gpuMemoryUtilization float64
	noCUDAGraphs         bool
	quantize             string // a scheme the weights are quantized by while loading; "" = none
	kvCacheDtype         string // what the KV cache stores (pvllm.ParseKVCacheDtype's names)
	speculative          string // speculative decoding: off or ngram
	speculativeTokens    int    // proposals per decode step
}

// apiKeyEnv names the environment variable that holds the API key, so that
// it need not appear on the command line (where ps shows it).
const apiKeyEnv = "PVLLM_API_KEY"

func parseOptions(args []string, errOut io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("pvllm-server", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprintf(errOut, "pvllm-server: an OpenAI-compatible HTTP server for pvllm\n\n"+
			"Usage: pvllm-server --model PATH [options]\n\nOptions:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.model, "model", "", "Model folder (Hugging Face) or llama2.c .bin (required)")
	fs.StringVar(&o.servedModelName, "served-model-name", "",
		"The model's name in the API (default: the model path's base name)")
	fs.StringVar(&o.host, "host", "127.0.0.1", "Address to listen on (0.0.0.0: every interface)")
	fs.IntVar(&o.port, "port", 8000, "TCP port to listen on (0: any free port, logged at start)")
	fs.StringVar(&o.apiKey, "api-key", "", "Require 'Authorization: Bearer KEY' on /v1/*, "+
		"/tokenize and /detokenize (default: $"+apiKeyEnv+"; none: no key)")
	fs.BoolVar(&o.version, "version", false, "Print the versions and exit")
	fs.StringVar(&o.chatTemplateFile, "chat-template", "", "A Jinja chat template file that "+
		"renders every chat (/v1/chat/completions, /tokenize with messages) instead of the "+
		"model's; needed for a model that ships none")

	fs.IntVar(&o.maxConcurrency, "max-concurrency", 256, "Generation calls served at once")
	fs.IntVar(&o.maxQueue, "max-queue", 1024,
		"Generation calls waiting for a slot; more get 429 with Retry-After")
	fs.IntVar(&o.maxChoices, "max-choices", 64, "Choices one call may ask for (prompts x n)")
	fs.Int64Var(&o.maxCallTokens, "max-call-tokens", 1<<20,
		"Tokens one call may hold: its prompts plus n x max_tokens for each")
	fs.Int64Var(&o.maxBodyMB, "max-body-mb", 8, "Largest request body in MiB; larger gets 413")
	fs.DurationVar(&o.readHeaderTimeout, "read-header-timeout", 10*time.Second,
		"Time a client has to send a request's headers")
	fs.DurationVar(&o.readTimeout, "read-timeout", 30*time.Second,
		"Time a client has to send a request's body")
	fs.DurationVar(&o.writeTimeout, "write-timeout", 30*time.Second,
		"Time one write to a client may wait on it (a stream is many writes); "+
			"a client that stops reading is cut off and its requests aborted")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", 120*time.Second,
		"Time a keep-alive connection may wait for its next request")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 60*time.Second,
		"On SIGTERM or SIGINT: time the requests in flight have to finish before "+
			"they are aborted")

	fs.StringVar(&o.device, "device", "auto", "Device: auto, cpu, cuda or cuda:N")
	fs.IntVar(&o.blockSize, "block-size", 16, "Tokens per KV-cache block (a power of two, 8..256)")
	fs.Int64Var(&o.kvCacheMB, "kv-cache-mb", 256, "Memory for the KV cache on the CPU, in MiB")
	fs.IntVar(&o.maxNumSeqs, "max-num-seqs", 256, "Sequences the engine runs at once")
	fs.IntVar(&o.maxNumBatchedTokens, "max-num-batched-tokens", 2048,
		"Tokens fed to the model per step (long prompts are prefilled in chunks)")
	fs.IntVar(&o.maxModelLen, "max-model-len", 0, "Context length in tokens; 0 = the model's")
	fs.IntVar(&o.threads, "threads", 0, "CPU threads; 0 = the CPUs this process may use")
	fs.BoolVar(&o.noPrefixCaching, "no-prefix-caching", false,
		"Do not reuse the KV cache of shared prompt prefixes")
	fs.StringVar(&o.dtype, "dtype", "auto", "CUDA: weights and activations, auto, bf16, fp16 or fp32")
	fs.Float64Var(&o.gpuMemoryUtilization, "gpu-memory-utilization", 0.9,
		"CUDA: the share of free GPU memory the KV cache may take")
	fs.BoolVar(&o.noCUDAGraphs, "no-cuda-graphs", false, "CUDA: do not replay decode steps as graphs")
	fs.StringVar(&o.quantize, "quantize", "",
		"Quantize the weight matrices while loading, as llama-quantize would: q8_0, q4_0, q4_1, "+
			"q5_0, q5_1, iq4_nl, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_xs, q4_k_m or q5_k_m "+
			"(quantized weights run on the CPU); empty = as stored")
	fs.StringVar(&o.kvCacheDtype, "kv-cache-dtype", "auto",
		"What the KV cache stores: auto (f32 on the CPU, --dtype on CUDA), f32, f16, bf16, "+
			"int8 or fp8_e4m3 (CUDA only); the 8-bit types keep one fp16 scale per token and kv head")
	fs.StringVar(&o.speculative, "speculative", "off",
		"Speculative decoding: off, or ngram (prompt lookup; greedy output is the same, sampled "+
			"output keeps its distribution)")
	fs.IntVar(&o.speculativeTokens, "speculative-tokens", 4, "Proposals verified per decode step (1..16)")

	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (options start with --)", fs.Arg(0))
	}
	if o.apiKey == "" {
		o.apiKey = os.Getenv(apiKeyEnv)
	}
	if o.version {
		return o, nil
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	return o, o.readChatTemplate()
}

// readChatTemplate reads --chat-template's file once, at startup, so that a
// missing or unreadable file stops the server before it serves rather than
// failing every chat.
func (o *options) readChatTemplate() error {
	if o.chatTemplateFile == "" {
		return nil
	}
	text, err := os.ReadFile(o.chatTemplateFile)
	if err != nil {
		return fmt.Errorf("--chat-template: %v", err)
	}
	if strings.TrimSpace(string(text)) == "" {
		return fmt.Errorf("--chat-template: %s is empty", o.chatTemplateFile)
	}
	o.chatTemplate = string(text)
	return nil
}

func (o *options) validate() error {
	positive := []struct {
		name  string
		value int64
	}{
		{"--max-concurrency", int64(o.maxConcurrency)}, {"--max-choices", int64(o.maxChoices)},
		{"--max-call-tokens", o.maxCallTokens}, {"--max-body-mb", o.maxBodyMB},
		{"--kv-cache-mb", o.kvCacheMB}, {"--max-num-seqs", int64(o.maxNumSeqs)},
		{"--max-num-batched-tokens", int64(o.maxNumBatchedTokens)},
	}
	for _, p := range positive {
		if p.value < 1 {
			return fmt.Errorf("%s must be at least 1, got %d", p.name, p.value)
		}
	}
	switch {
	case o.model == "":
		return fmt.Errorf("--model is required")
	case o.maxQueue < 0:
		return fmt.Errorf("--max-queue must be at least 0, got %d", o.maxQueue)
	case o.port < 0 || o.port > 65535:
		return fmt.Errorf("--port must be in 0..65535, got %d", o.port)
	case o.maxBodyMB > 1<<20:
		return fmt.Errorf("--max-body-mb must be at most %d, got %d", 1<<20, o.maxBodyMB)
	case o.kvCacheMB > 1<<40:
		return fmt.Errorf("--kv-cache-mb must be at most %d, got %d", int64(1)<<40, o.kvCacheMB)
	case o.maxModelLen < 0 || o.threads < 0:
		return fmt.Errorf("--max-model-len and --threads must be at least 0")
	}
	for _, d := range []struct {
		name  string
		value time.Duration
	}{{"--read-header-timeout", o.readHeaderTimeout}, {"--read-timeout", o.readTimeout},
		{"--write-timeout", o.writeTimeout}, {"--idle-timeout", o.idleTimeout},
		{"--drain-timeout", o.drainTimeout}} {
		if d.value < 0 {
			return fmt.Errorf("%s must not be negative, got %s", d.name, d.value)
		}
	}
	if _, err := o.dtypeValue(); err != nil {
		return err
	}
	if _, err := o.kvCacheDtypeValue(); err != nil {
		return err
	}
	return nil
}

// kvCacheDtypeValue is --kv-cache-dtype read by the SDK's parser. Whether
// the device serves it is the engine's to say, at startup.
func (o *options) kvCacheDtypeValue() (pvllm.KVCacheDtype, error) {
	d, err := pvllm.ParseKVCacheDtype(o.kvCacheDtype)
	if err != nil {
		return 0, fmt.Errorf("--kv-cache-dtype must be auto, f32, f16, bf16, int8 or fp8_e4m3, got %q",
			o.kvCacheDtype)
	}
	return d, nil
}

func (o *options) dtypeValue() (pvllm.DType, error) {
	switch strings.ToLower(o.dtype) {
	case "auto":
		return pvllm.DTypeAuto, nil
	case "bf16", "bfloat16":
		return pvllm.DTypeBF16, nil
	case "fp16", "float16", "half":
		return pvllm.DTypeFP16, nil
	case "fp32", "float32":
		return pvllm.DTypeFP32, nil
	}
	return 0, fmt.Errorf("--dtype must be auto, bf16, fp16 or fp32, got %q", o.dtype)
}

// engineConfig is the engine the options describe.
func (o *options) engineConfig() pvllm.Config {
	dtype, _ := o.dtypeValue()
	kvCacheDtype, _ := o.kvCacheDtypeValue()
	return pvllm.Config{
		ModelPath:            o.model,
		Device:               o.device,
		BlockSize:            o.blockSize,
		KVCacheBytes:         o.kvCacheMB << 20,
		MaxNumSeqs:           o.maxNumSeqs,
		MaxNumBatchedTokens:  o.maxNumBatchedTokens,
		MaxModelLen:          o.maxModelLen,
		NumThreads:           o.threads,
		DisablePrefixCaching: o.noPrefixCaching,
		DType:                dtype,
		GPUMemoryUtilization: float32(o.gpuMemoryUtilization),
		DisableCUDAGraphs:    o.noCUDAGraphs,
		Quantize:             o.quantize,
		KVCacheDtype:         kvCacheDtype,
		Speculative:          o.speculative,
		SpeculativeTokens:    o.speculativeTokens,
	}
}

func (o *options) servedName() string {
	if o.servedModelName != "" {
		return o.servedModelName
	}
	return strings.TrimSuffix(filepath.Base(filepath.Clean(o.model)), ".bin")
}

func (o *options) address() string { return net.JoinHostPort(o.host, strconv.Itoa(o.port)) }

func (o *options) maxBodyBytes() int64 { return o.maxBodyMB << 20 }

// formatBytes says a byte count the way the limits are set.
func formatBytes(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
