package pvllm

// A file with //export may only declare C functions in its preamble, so the
// progress callback lives apart from capi.go, which defines the trampoline.

// #include <stdint.h>
import "C"

import "runtime/cgo"

// progressState is what the cgo.Handle passed as the callback's user data
// points at. A panic in the user's callback must not unwind through C++
// frames, so it is caught here and re-raised once pvllm_engine_create has
// returned.
type progressState struct {
	fn         func(fraction float32, stage string)
	panicked   bool
	panicValue interface{}
}

//export pvllmGoProgress
func pvllmGoProgress(fraction C.float, stage *C.char, handle C.uintptr_t) {
	p := cgo.Handle(handle).Value().(*progressState)
	if p.panicked {
		return
	}
	defer func() {
		if v := recover(); v != nil {
			p.panicked, p.panicValue = true, v
		}
	}()
	p.fn(float32(fraction), C.GoString(stage))
}
