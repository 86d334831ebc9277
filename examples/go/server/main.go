// Command server is an OpenAI-compatible HTTP service on pvllm:
//
//	POST /v1/completions   completions, streamed as server-sent events with "stream": true
//	GET  /v1/models        the served model
//	GET  /health           200 while the engine is up
//	GET  /metrics          Prometheus text format
//
// Usage:
//
//	server -model path/to/model [-addr 127.0.0.1:8000] [engine options]
//	curl localhost:8000/v1/completions -d '{"prompt": "Once upon a time", "max_tokens": 32}'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"pvllm.dev/pvllm/pvllm"
)

func main() {
	var (
		model       = flag.String("model", "", "model path: a Hugging Face folder or a llama2.c .bin (required)")
		name        = flag.String("served-model-name", "", "model name in the API (default: the model path's base name)")
		addr        = flag.String("addr", "127.0.0.1:8000", "listen address")
		device      = flag.String("device", "", `"cpu" or "auto"`)
		blockSize   = flag.Int("block-size", 0, "tokens per KV block (0 = library default)")
		kvMiB       = flag.Int64("kv-cache-mib", 0, "KV cache budget in MiB (0 = library default)")
		maxSeqs     = flag.Int("max-num-seqs", 0, "sequences running at once (0 = library default)")
		maxBatched  = flag.Int("max-num-batched-tokens", 0, "tokens per step (0 = library default)")
		maxModelLen = flag.Int("max-model-len", 0, "context length (0 = the model's)")
		threads     = flag.Int("threads", 0, "CPU threads (0 = all cores)")
		noPrefix    = flag.Bool("no-prefix-caching", false, "disable prefix caching")
	)
	flag.Parse()
	if *model == "" {
		fmt.Fprintln(os.Stderr, "server: -model is required")
		flag.Usage()
		os.Exit(2)
	}
	if *name == "" {
		*name = strings.TrimSuffix(filepath.Base(*model), ".bin")
	}
	eng, err := pvllm.New(pvllm.Config{
		ModelPath:            *model,
		Device:               *device,
		BlockSize:            *blockSize,
		KVCacheBytes:         *kvMiB << 20,
		MaxNumSeqs:           *maxSeqs,
		MaxNumBatchedTokens:  *maxBatched,
		MaxModelLen:          *maxModelLen,
		NumThreads:           *threads,
		DisablePrefixCaching: *noPrefix,
	})
	if err != nil {
		log.Fatalf("server: %v", err)
	}
	defer eng.Close()

	srv := &http.Server{Addr: *addr, Handler: newServer(eng, *name).handler(),
		ReadHeaderTimeout: 10 * time.Second}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-stop
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	log.Printf("pvllm %s serving %q on http://%s", pvllm.Version(), *name, *addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("server: %v", err)
	}
}
