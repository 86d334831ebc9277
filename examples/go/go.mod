module pvllm.dev/examples

go 1.19

require pvllm.dev/pvllm v0.0.0

replace pvllm.dev/pvllm => ../../bindings/go
