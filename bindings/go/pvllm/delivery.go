package pvllm

// A file with //export may only declare C functions in its preamble, so the
// output handler lives apart from capi.go, which defines the trampoline
// that pvllm_request.on_output points at.

/*
#include <stdint.h>
#include <pvllm/pvllm.h>
*/
import "C"

import "runtime/cgo"

// pvllmGoOutput is every request's output handler (pvllm.h since 0.5). The
// library calls it on the thread inside pvllm_step, with the step waiting
// for it:
// it copies the event into Go memory, queues it on its Stream and returns,
// never blocking (Stream.deliver), so a slow reader never holds up the
// engine. `handle` is the cgo.Handle of the Stream; it stays valid until
// the Stream has taken the request's last event, after which the library
// calls no more.
//
//export pvllmGoOutput
func pvllmGoOutput(output *C.pvllm_output, handle C.uintptr_t) {
	s := cgo.Handle(handle).Value().(*Stream)
	s.deliver(goOutput(output))
}
