// A Go program that uses pvllm the way a Go user does: it imports the
// pvllm.dev/pvllm module (resolved by a replace directive to a copy of the
// module, as a module proxy would deliver it) and finds libpvllm through
// pkg-config, from an installed prefix. Prints the greedy continuation of a
// prompt. Usage: consumer MODEL_PATH PROMPT
package main

import (
	"context"
	"fmt"
	"os"

	"pvllm.dev/pvllm/pvllm"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: consumer MODEL_PATH PROMPT")
		os.Exit(2)
	}
	eng, err := pvllm.New(pvllm.Config{ModelPath: os.Args[1], KVCacheBytes: 16 << 20})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pvllm:", err)
		os.Exit(1)
	}
	defer eng.Close()
	res, err := eng.Generate(context.Background(), os.Args[2], pvllm.GreedySamplingParams(24))
	if err != nil {
		fmt.Fprintln(os.Stderr, "pvllm:", err)
		os.Exit(1)
	}
	fmt.Println(os.Args[2] + res.Text())
	fmt.Fprintln(os.Stderr, "pvllm", pvllm.Version())
}
