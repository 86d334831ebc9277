// Command concurrent submits many requests at once from as many goroutines
// and prints each result and the engine's statistics: the engine batches
// them continuously.
//
//	concurrent -model path/to/model -requests 32 -max-tokens 32
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"pvllm.dev/pvllm/pvllm"
)

func main() {
	model := flag.String("model", "", "model path: a Hugging Face folder or a llama2.c .bin (required)")
	numRequests := flag.Int("requests", 32, "requests to submit at once")
	maxTokens := flag.Int("max-tokens", 32, "tokens per request at most")
	temperature := flag.Float64("temperature", 0.8, "sampling temperature (0 = greedy)")
	threads := flag.Int("threads", 0, "CPU threads (0 = all cores)")
	flag.Parse()
	if *model == "" {
		fmt.Fprintln(os.Stderr, "concurrent: -model is required")
		flag.Usage()
		os.Exit(2)
	}

	eng, err := pvllm.New(pvllm.Config{ModelPath: *model, NumThreads: *threads})
	if err != nil {
		log.Fatalf("concurrent: %v", err)
	}
	defer eng.Close()

	prompts := []string{"Once upon a time", "The little dog", "One day, a girl", "The sun was"}
	results := make([]*pvllm.Result, *numRequests)
	errs := make([]error, *numRequests)
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < *numRequests; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			params := pvllm.DefaultSamplingParams()
			params.MaxTokens = *maxTokens
			params.Temperature = float32(*temperature)
			seed := uint64(i)
			params.Seed = &seed
			results[i], errs[i] = eng.Generate(context.Background(), prompts[i%len(prompts)], params)
		}(i)
	}
	wg.Wait()
	elapsed := time.Since(start)

	failed, numTokens := 0, 0
	for i, res := range results {
		if errs[i] != nil {
			failed++
			fmt.Printf("%3d  error: %v\n", i, errs[i])
			continue
		}
		s := res.Samples[0]
		numTokens += len(s.TokenIDs)
		fmt.Printf("%3d  [%s, %d tokens] %s%s\n", i, s.FinishReason, len(s.TokenIDs),
			prompts[i%len(prompts)], s.Text)
	}
	st, err := eng.Stats()
	if err != nil {
		log.Fatalf("concurrent: %v", err)
	}
	fmt.Printf("\n%d requests, %d tokens in %.2fs (%.0f tokens/s); %d steps, %d preemptions, prefix cache %d/%d blocks\n",
		*numRequests, numTokens, elapsed.Seconds(), float64(numTokens)/elapsed.Seconds(),
		st.NumSteps, st.NumPreemptions, st.PrefixCacheHits, st.PrefixCacheQueries)
	if failed > 0 {
		os.Exit(1)
	}
}
