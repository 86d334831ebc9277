package main

import (
	"testing"

	"pvllm.dev/pvllm/pvllm"
)

// --dtype names each pvllm_dtype, in any case; anything else is refused.
func TestDtypeNames(t *testing.T) {
	for name, want := range map[string]pvllm.DType{
		"auto": pvllm.DTypeAuto, "bf16": pvllm.DTypeBF16, "BFloat16": pvllm.DTypeBF16,
		"fp16": pvllm.DTypeFP16, "half": pvllm.DTypeFP16, "fp32": pvllm.DTypeFP32,
		"Float32": pvllm.DTypeFP32,
	} {
		o := options{dtype: name}
		if got, err := o.dtypeValue(); err != nil || got != want {
			t.Errorf("--dtype %s: %v, %v; want %v", name, got, err, want)
		}
	}
	for _, name := range []string{"fp8", "", "f32x"} {
		o := options{dtype: name}
		if _, err := o.dtypeValue(); err == nil {
			t.Errorf("--dtype %q accepted", name)
		}
	}
}
