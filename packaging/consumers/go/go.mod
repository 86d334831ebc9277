module pvllm.example/consumer

go 1.19

require pvllm.dev/pvllm v0.11.0

// scripts/sdk_package_check.sh points this at a copy of bindings/go; a
// user's go.mod needs no replace once the module is published.
replace pvllm.dev/pvllm => ../pvllm-go
