// What the C ABI's entry points share: the handle types behind pvllm.h's
// opaque pointers, their registries of live handles and the checks made on
// them, and guard(), which every entry point runs its body through so that
// no C++ exception crosses the boundary (std::bad_alloc becomes
// OUT_OF_MEMORY, anything else INTERNAL). Failures reach the caller as a
// pvllm_error object through the last out parameter, never through
// thread-local state, so the message belongs to the call that failed.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "capi/handle_registry.h"
#include "core/base/status.h"
#include "core/chat/chat_template.h"
#include "core/engine/engine.h"
#include "core/model/model.h"
#include "core/tokenizer/tokenizer.h"
#include "pvllm/pvllm.h"

// Every handle starts with a magic value (see capi/handle_registry.h) and
// is known to its kind's registry from creation until destruction.
struct pvllm_error {
  static constexpr uint64_t kMagic = 0x7076657272303031ULL;
  pvllm::HandleMagic magic{kMagic};
  pvllm_status status;
  std::string message;
};

struct pvllm_engine {
  static constexpr uint64_t kMagic = 0x7076656e67303031ULL;
  pvllm::HandleMagic magic{kMagic};
  std::unique_ptr<pvllm::Engine> engine;
  // The model folder's chat templates, read at create; a folder that could
  // not be read keeps the reason, for pvllm_apply_chat_template to report.
  pvllm::chat::ChatTemplates chat_templates;
  pvllm::Status chat_templates_status;
};

// Owns every byte its pvllm_output entries point to. The backing vectors
// are filled completely before any pointer into them is taken, so the
// pointers stay valid until the batch is freed.
struct pvllm_output_batch {
  static constexpr uint64_t kMagic = 0x7076626174303031ULL;
  pvllm::HandleMagic magic{kMagic};
  std::vector<pvllm::Output> events;
  std::vector<pvllm_output> outputs;           // [events.size()]
  std::vector<pvllm_token_logprobs> logprobs;  // all events' tokens, concatenated
  std::vector<pvllm_logprob> top;              // all tokens' alternatives, concatenated
};

// A model's tokenizer and chat templates without its weights; the strings
// pvllm_tokenizer_get_info hands out live here.
struct pvllm_tokenizer {
  static constexpr uint64_t kMagic = 0x7076746f6b303031ULL;
  pvllm::HandleMagic magic{kMagic};
  std::unique_ptr<pvllm::Tokenizer> tokenizer;
  pvllm::chat::ChatTemplates chat_templates;
  pvllm::Status chat_templates_status;
  std::string kind;
  std::string source;
  std::string bos_token;
  std::string eos_token;
};

struct pvllm_model_info {
  static constexpr uint64_t kMagic = 0x7076696e66303031ULL;
  pvllm::HandleMagic magic{kMagic};
  pvllm::ModelSummary summary;
};

namespace pvllm::capi {

using pvllm::Status;

inline Status invalid(std::string message) { return pvllm::InvalidArgument(std::move(message)); }

inline Status null_argument(const char* name) { return invalid(std::string(name) + " is NULL"); }

// The process-wide registries of live handles, never destroyed (a handle
// may outlive static destruction).
template <typename T>
pvllm::HandleRegistry<T>& registry() {
  static auto* live = new pvllm::HandleRegistry<T>();
  return *live;
}

// Takes ownership of a new handle: registers it and hands it out.
template <typename T>
T* publish_handle(std::unique_ptr<T> handle) {
  registry<T>().add(handle.get());
  return handle.release();
}

// Deletes a live handle; NULL, a second release and a foreign pointer do
// nothing.
template <typename T>
void release_handle(T* handle) {
  if (handle == nullptr || !registry<T>().remove(handle)) return;
  try {
    delete handle;
  } catch (...) {
    // A destructor that throws is a bug in the core; swallow it rather than
    // let it cross the ABI.
  }
}

// OK for a live handle; INVALID_ARGUMENT naming `name` for NULL, and for a
// destroyed, freed or foreign pointer.
template <typename T>
Status check_handle(const T* handle, const char* name, const char* type) {
  if (handle == nullptr) return null_argument(name);
  if (!registry<T>().is_live(handle)) {
    return invalid(std::string(name) + " is not a live " + type +
                   " (already destroyed or freed, or not a handle of that kind)");
  }
  return Status::Ok();
}

inline Status check_engine(const pvllm_engine* engine) {
  return check_handle(engine, "engine", "pvllm_engine");
}

// check_engine, and that request_id is not another engine's.
inline Status check_engine_and_request(const pvllm_engine* engine, uint64_t request_id) {
  PVLLM_RETURN_IF_ERROR(check_engine(engine));
  if (engine->engine->is_other_engines_request_id(request_id)) {
    return invalid("request_id " + std::to_string(request_id) +
                   " was returned by another engine's pvllm_submit");
  }
  return Status::Ok();
}

inline Status check_tokenizer(const pvllm_tokenizer* tokenizer) {
  return check_handle(tokenizer, "tokenizer", "pvllm_tokenizer");
}

inline Status check_info(const pvllm_model_info* info) {
  return check_handle(info, "info", "pvllm_model_info");
}

// Hands a failed status to the caller as a new error object; sets *error to
// NULL on success. When even the error cannot be allocated, *error stays
// NULL and only the status tells what happened.
pvllm_status deliver(const Status& status, pvllm_error** error);

// Runs `body` (returning Status) and turns whatever it throws into a status.
template <typename Body>
pvllm_status guard(pvllm_error** error, Body&& body) noexcept {
  if (error != nullptr) *error = nullptr;
  try {
    return deliver(body(), error);
  } catch (const std::bad_alloc&) {
    return deliver(pvllm::OutOfMemory("out of memory"), error);
  } catch (const std::exception& e) {
    return deliver(pvllm::Internal(std::string("internal error: ") + e.what()), error);
  } catch (...) {
    return deliver(pvllm::Internal("internal error: unknown exception"), error);
  }
}

}  // namespace pvllm::capi
