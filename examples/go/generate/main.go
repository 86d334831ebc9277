// Command generate streams the continuation of one prompt to stdout as it
// is generated.
//
//	generate -model path/to/model -prompt "Once upon a time" -max-tokens 64
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"

	"pvllm.dev/pvllm/pvllm"
)

func main() {
	model := flag.String("model", "", "model path: a Hugging Face folder or a llama2.c .bin (required)")
	prompt := flag.String("prompt", "Once upon a time", "prompt text")
	maxTokens := flag.Int("max-tokens", 64, "tokens to generate at most")
	temperature := flag.Float64("temperature", 0, "sampling temperature (0 = greedy)")
	topP := flag.Float64("top-p", 1, "nucleus sampling threshold")
	seed := flag.Int64("seed", -1, "sampling seed (-1 = random)")
	threads := flag.Int("threads", 0, "CPU threads (0 = all cores)")
	flag.Parse()
	if *model == "" {
		fmt.Fprintln(os.Stderr, "generate: -model is required")
		flag.Usage()
		os.Exit(2)
	}

	eng, err := pvllm.New(pvllm.Config{ModelPath: *model, NumThreads: *threads})
	if err != nil {
		log.Fatalf("generate: %v", err)
	}
	defer eng.Close()

	params := pvllm.DefaultSamplingParams()
	params.MaxTokens = *maxTokens
	params.Temperature = float32(*temperature)
	params.TopP = float32(*topP)
	if *seed >= 0 {
		s := uint64(*seed)
		params.Seed = &s
	}

	// Ctrl-C cancels the context, which aborts the request.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	stream, err := eng.Submit(ctx, pvllm.Request{Prompt: *prompt, Params: params})
	if err != nil {
		log.Fatalf("generate: %v", err)
	}
	fmt.Print(*prompt)
	numTokens := 0
	var finish pvllm.FinishReason
	for out := range stream.Events() {
		fmt.Print(out.Text)
		numTokens += len(out.TokenIDs)
		if out.FinishReason != pvllm.FinishNone {
			finish = out.FinishReason
			if out.Err != nil {
				log.Printf("generate: %v", out.Err)
			}
		}
	}
	fmt.Println()
	fmt.Fprintf(os.Stderr, "[%d tokens, finish: %s]\n", numTokens, finish)
	if finish == pvllm.FinishError {
		os.Exit(1)
	}
}
