// Command pvllm-server is an OpenAI-compatible HTTP server on pvllm:
//
//	POST /v1/chat/completions   chat through the model's chat template
//	POST /v1/completions        completions of text or token prompts
//	GET  /v1/models[/{id}]      the served model
//	POST /tokenize, /detokenize vLLM's shapes
//	GET  /health                200 while serving, 503 while draining
//	GET  /metrics               Prometheus
//	GET  /                      a chat page
//
// Usage:
//
//	pvllm-server --model path/to/model [--host 127.0.0.1] [--port 8000] [options]
//
// docs/server.md has every option, endpoint and field.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"pvllm.dev/pvllm/pvllm"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, nil))
}

// run is the whole command; it returns the exit status: 0 after a clean
// drain, 1 when the model or the address fails, 2 for bad options. A value
// sent on stop (or SIGTERM / SIGINT) begins the drain.
func run(args []string, stdout, stderr io.Writer, stop <-chan struct{}) int {
	opts, err := parseOptions(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "pvllm-server: %v\n", err)
		return 2
	}
	if opts.version {
		fmt.Fprintf(stdout, "pvllm-server on libpvllm %s (ABI %d)\n", pvllm.Version(),
			pvllm.ABIVersion())
		return 0
	}
	log := newLogger(stderr)
	mc, err := pvllm.InspectModel(opts.model)
	if err != nil {
		log.error("the model cannot be read", map[string]string{"model": opts.model,
			"error": err.Error()})
		return 1
	}
	if err := checkChatTemplate(opts); err != nil {
		log.error("the chat template cannot be rendered", map[string]string{
			"chat_template": opts.chatTemplateFile, "error": err.Error()})
		return 1
	}
	info := modelInfo{maxModelLen: mc.MaxContextLength(), vocabSize: mc.VocabSize}
	if opts.maxModelLen > 0 {
		info.maxModelLen = opts.maxModelLen
	}
	start := time.Now()
	eng, err := pvllm.New(opts.engineConfig())
	if err != nil {
		log.error("the engine cannot start", map[string]string{"model": opts.model,
			"error": err.Error()})
		return 1
	}
	defer eng.Close()
	ln, err := net.Listen("tcp", opts.address())
	if err != nil {
		log.error("cannot listen", map[string]string{"address": opts.address(), "error": err.Error()})
		return 1
	}
	s := newServer(eng, opts, info, log)
	hs := s.httpServer()
	log.info("serving", map[string]interface{}{
		"address": ln.Addr().String(), "model": s.model, "model_path": opts.model,
		"version": pvllm.Version(), "max_model_len": info.maxModelLen, "device": opts.device,
		"kv_cache_dtype": opts.engineConfig().KVCacheDtype.String(), "api_key": opts.apiKey != "",
		"chat_template": opts.chatTemplateFile, "load_seconds": time.Since(start).Seconds(),
	})
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(signals)
	select {
	case err := <-served:
		log.error("the server stopped", map[string]string{"error": err.Error()})
		return 1
	case sig := <-signals:
		log.info("draining", map[string]string{"signal": sig.String(),
			"timeout": opts.drainTimeout.String()})
	case <-stop:
		log.info("draining", map[string]string{"timeout": opts.drainTimeout.String()})
	}
	return drain(s, hs, opts.drainTimeout, log)
}

// checkChatTemplate renders --chat-template's template over a one-message
// chat with the model's tokenizer (milliseconds, before the weights load),
// so that a template pvllm cannot parse or render stops the server at
// startup instead of failing every chat. A template that refuses this chat
// (raise_exception) may still accept real ones: only StatusUnsupported
// counts.
func checkChatTemplate(opts *options) error {
	if opts.chatTemplate == "" {
		return nil
	}
	tok, err := pvllm.OpenTokenizer(opts.model)
	if err != nil {
		return nil // the engine says what is wrong with the model
	}
	defer tok.Close()
	_, err = tok.ApplyChatTemplate(`[{"role": "user", "content": "Hi"}]`,
		&pvllm.ChatTemplateOptions{ChatTemplate: opts.chatTemplate})
	if errors.Is(err, pvllm.StatusUnsupported) {
		return err
	}
	return nil
}

// httpServer is the HTTP server of s, with its timeouts.
func (s *server) httpServer() *http.Server {
	return &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: s.opts.readHeaderTimeout,
		IdleTimeout:       s.opts.idleTimeout,
		MaxHeaderBytes:    1 << 20,
		// The body's read timeout and each write's timeout are set per
		// request on the connection (readBody, responseRecorder): the
		// server-wide ReadTimeout and WriteTimeout would also cut off
		// streams that simply last long.
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
}

// drain stops taking connections and lets the requests in flight finish
// for up to timeout; then it closes what is left (their clients see the
// connection end and their requests are aborted) and the engine.
func drain(s *server, hs *http.Server, timeout time.Duration, log *logger) int {
	atomic.StoreInt32(&s.draining, 1)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	aborted := false
	if err := hs.Shutdown(ctx); err != nil {
		aborted = true
		hs.Close()
	}
	s.eng.Close()
	log.info("stopped", map[string]bool{"aborted_requests_in_flight": aborted})
	return 0
}
