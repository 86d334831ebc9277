module pvllm.dev/pvllm

go 1.19
