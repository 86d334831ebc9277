// Status: the result of every fallible operation in the core. Expected
// failures (bad input, corrupt files, no KV blocks) are values, never
// exceptions; the C ABI maps StatusCode one to one onto pvllm_status.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace pvllm {

// Values are pinned: they equal the public pvllm_status values.
enum class StatusCode : int32_t {
  kOk = 0,
  kInvalidArgument = 1,  // a parameter is out of range or NULL
  kNotFound = 2,         // a file, tensor or request does not exist
  kIoError = 3,          // the OS refused to open, read or map a file
  kCorruptModel = 4,     // a model file is truncated, malformed or inconsistent
  kUnsupported = 5,      // valid input that this build cannot serve
  kOutOfMemory = 6,      // host or device memory, or the KV pool, is exhausted
  kInternal = 7,         // a broken invariant caught at the boundary
  kTokenizerError = 8,   // the tokenizer failed to load or encode
  kBufferTooSmall = 9,   // an output buffer cannot hold the result
  kTimeout = 10,         // a wait ended before what it waited for happened
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
inline Status NotFound(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status IoError(std::string m) { return Status(StatusCode::kIoError, std::move(m)); }
inline Status CorruptModel(std::string m) {
  return Status(StatusCode::kCorruptModel, std::move(m));
}
inline Status Unsupported(std::string m) { return Status(StatusCode::kUnsupported, std::move(m)); }
inline Status OutOfMemory(std::string m) { return Status(StatusCode::kOutOfMemory, std::move(m)); }
inline Status Internal(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }

}  // namespace pvllm

// Returns early from the enclosing function when `expr` is not ok.
#define PVLLM_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::pvllm::Status _pvllm_status = (expr);        \
    if (!_pvllm_status.ok()) return _pvllm_status; \
  } while (0)
