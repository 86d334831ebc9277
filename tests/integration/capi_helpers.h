// What the C ABI suites written against the raw pvllm.h share: owning
// pointers for engines and output batches, and taking an error's message.
#pragma once

#include <pvllm/pvllm.h>

#include <memory>
#include <string>

namespace pvllm::testing {

struct EngineDeleter {
  void operator()(pvllm_engine* e) const { pvllm_engine_destroy(e); }
};
using EnginePtr = std::unique_ptr<pvllm_engine, EngineDeleter>;

struct BatchDeleter {
  void operator()(pvllm_output_batch* b) const { pvllm_output_batch_free(b); }
};
using BatchPtr = std::unique_ptr<pvllm_output_batch, BatchDeleter>;

// The message of a failed call ("" for none), freeing the error.
inline std::string take_message(pvllm_error* error) {
  std::string message = error != nullptr ? pvllm_error_message(error) : "";
  pvllm_error_free(error);
  return message;
}

}  // namespace pvllm::testing
