// The C view of output events: a pvllm_output_batch built from polled
// events, and the output handler that builds one event for a request's
// on_output callback.
#pragma once

#include "capi/handles.h"

namespace pvllm::capi {

// Builds the C view of the batch's events (batch->outputs and the arrays
// they point into).
void build_batch(pvllm_output_batch* batch);

pvllm::OutputHandler output_handler(pvllm_output_callback fn, void* user_data);

}  // namespace pvllm::capi
