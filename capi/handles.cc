// The error objects guard() hands out.
#include "capi/handles.h"

namespace pvllm::capi {

// Hands a failed status to the caller as a new error object; sets *error to
// NULL on success. When even the error cannot be allocated, *error stays
// NULL and only the status tells what happened.
pvllm_status deliver(const Status& status, pvllm_error** error) {
  const auto code = static_cast<pvllm_status>(status.code());
  if (error == nullptr) return code;
  *error = nullptr;
  if (status.ok()) return code;
  try {
    auto made = std::make_unique<pvllm_error>();
    made->status = code;
    made->message = status.message();
    *error = publish_handle(std::move(made));
  } catch (...) {
    *error = nullptr;
  }
  return code;
}

}  // namespace pvllm::capi
