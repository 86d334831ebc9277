module pvllm.dev/pvllm/cmd/pvllm-server

go 1.19

require (
	github.com/prometheus/client_golang v1.14.0
	pvllm.dev/pvllm v0.11.0
)

// In this repository the SDK is the checkout's.
replace pvllm.dev/pvllm => ../..
