/*
 * pvllm.hpp — C++ RAII over pvllm's C ABI (pvllm.h), the way llama.cpp ships
 * llama-cpp.h beside llama.h: a convenience on top of the C contract, never
 * instead of it. Header-only, C++17 or later. It calls nothing but pvllm_*
 * functions, adds no engine logic, and everything pvllm.h says about a call
 * (threading, what is copied, every status) holds for its wrapper here.
 *
 * Namespace pvllm::cxx, not pvllm: the library's own C++ code lives in
 * namespace pvllm (pvllm::Engine, pvllm::Status, pvllm::Output, ...). Those
 * symbols are hidden inside libpvllm.so, but a program that also compiles
 * the core from source (pvllm's own tests do) would otherwise see two
 * classes named pvllm::Engine. `namespace px = pvllm::cxx;` reads short.
 *
 * Two ways to use it:
 *
 *  - Throwing (Engine, ModelInfo and estimate_memory, with OutputBatch as
 *    what poll returns): a failed call throws pvllm::cxx::Error, which carries
 *    the call's pvllm_status and the message of its pvllm_error. The C ABI
 *    never throws; exceptions start here, as in onnxruntime's C++ API,
 *    because a failed create or submit is exceptional for a C++ caller and
 *    RAII cleans up on the way out. Only the wrappers throw, and only Error
 *    (or std::bad_alloc from the standard library).
 *
 *        pvllm_engine_params params = pvllm::cxx::defaults<pvllm_engine_params>();
 *        params.model_path = "stories260K.bin";
 *        pvllm::cxx::Engine engine(params);             // throws Error
 *        pvllm_sampling_params sampling = pvllm::cxx::defaults<pvllm_sampling_params>();
 *        engine.submit("Once upon a time", sampling);
 *        for (int32_t unfinished = 1; unfinished > 0;) {
 *          unfinished = engine.step();
 *          for (const pvllm_output& out : engine.poll()) {
 *            std::fwrite(out.text, 1, out.text_len, stdout);
 *          }
 *        }
 *
 *  - Not throwing: the C calls themselves with owning pointers (EnginePtr,
 *    ErrorPtr, OutputBatchPtr, ModelInfoPtr) filled through out_ptr(). This
 *    part compiles without exceptions (-fno-exceptions), where the throwing
 *    wrappers are left out. The wrappers adopt such pointers, so both styles
 *    mix.
 *
 *        pvllm::cxx::EnginePtr engine;
 *        pvllm::cxx::ErrorPtr error;
 *        if (pvllm_engine_create(&params, pvllm::cxx::out_ptr(engine),
 *                                pvllm::cxx::out_ptr(error)) != PVLLM_STATUS_OK) {
 *          std::fprintf(stderr, "%s\n", pvllm_error_message(error.get()));
 *        }
 *
 * Ownership: each owning type frees its handle exactly once, with the C
 * function that pvllm.h names for it, when it is destroyed or assigned over;
 * moving transfers the handle and leaves the source empty; none is
 * copyable. What a view returns (a pvllm_output&, a tensor's name) points
 * into the handle it came from and is valid until that handle is freed.
 */
#ifndef PVLLM_PVLLM_HPP_
#define PVLLM_PVLLM_HPP_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pvllm.h"

/* 1 when the throwing wrappers are available: the compiler has exceptions
 * on. Define it to 0 before including this header to leave them out. */
#ifndef PVLLM_CXX_EXCEPTIONS
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS) || defined(_CPPUNWIND)
#define PVLLM_CXX_EXCEPTIONS 1
#else
#define PVLLM_CXX_EXCEPTIONS 0
#endif
#endif

#if PVLLM_CXX_EXCEPTIONS
#include <stdexcept>
#endif

namespace pvllm::cxx {

/* ------------------------------------------------------------------------
 * Owning pointers: one per handle the C ABI hands out, freed with its C
 * destructor (each accepts NULL, and unique_ptr never passes it one).
 * ------------------------------------------------------------------------ */

struct EngineDeleter {
  void operator()(pvllm_engine* engine) const noexcept { pvllm_engine_destroy(engine); }
};
struct ErrorDeleter {
  void operator()(pvllm_error* error) const noexcept { pvllm_error_free(error); }
};
struct OutputBatchDeleter {
  void operator()(pvllm_output_batch* batch) const noexcept { pvllm_output_batch_free(batch); }
};
struct ModelInfoDeleter {
  void operator()(pvllm_model_info* info) const noexcept { pvllm_model_info_free(info); }
};
struct TokenizerDeleter {
  void operator()(pvllm_tokenizer* tokenizer) const noexcept { pvllm_tokenizer_free(tokenizer); }
};

/* Destroying an EnginePtr must not race any other call on that engine
 * (pvllm_engine_destroy's rule). */
using EnginePtr = std::unique_ptr<pvllm_engine, EngineDeleter>;
using ErrorPtr = std::unique_ptr<pvllm_error, ErrorDeleter>;
/* Independent of the engine that filled it: it may outlive the engine. */
using OutputBatchPtr = std::unique_ptr<pvllm_output_batch, OutputBatchDeleter>;
using ModelInfoPtr = std::unique_ptr<pvllm_model_info, ModelInfoDeleter>;
using TokenizerPtr = std::unique_ptr<pvllm_tokenizer, TokenizerDeleter>;

/* The `T**` out-parameter of a C call, written into an owning pointer:
 * out_ptr(p) converts to T**, and when the full expression that holds the
 * call ends, p owns what the call stored there (its previous handle is
 * freed; NULL leaves p empty). Like C++23's std::out_ptr. Read p in the
 * next statement, not inside the same expression as the call. */
template <typename T, typename Deleter>
class OutPtr {
 public:
  explicit OutPtr(std::unique_ptr<T, Deleter>& owner) noexcept : owner_(owner) {}
  OutPtr(const OutPtr&) = delete;
  OutPtr& operator=(const OutPtr&) = delete;
  ~OutPtr() { owner_.reset(raw_); }

  operator T**() noexcept { return &raw_; }

 private:
  std::unique_ptr<T, Deleter>& owner_;
  T* raw_ = nullptr;
};

template <typename T, typename Deleter>
OutPtr<T, Deleter> out_ptr(std::unique_ptr<T, Deleter>& owner) noexcept {
  return OutPtr<T, Deleter>(owner);
}

/* ------------------------------------------------------------------------
 * Parameter structs: defaults<T>() is a T filled by its *_init with
 * sizeof(T), so struct_size matches the header this code was built with.
 * T is one of pvllm_engine_params, pvllm_sampling_params, pvllm_request,
 * pvllm_stats, pvllm_model_config, pvllm_memory_estimate,
 * pvllm_chat_template_params, pvllm_tokenizer_info. Pointer fields
 * (model_path, stop, ...) borrow: what they point to must live until the
 * call that reads the struct returns, which copies it.
 * ------------------------------------------------------------------------ */

namespace detail {
inline void init(pvllm_engine_params* p) noexcept { pvllm_engine_params_init(p, sizeof *p); }
inline void init(pvllm_sampling_params* p) noexcept { pvllm_sampling_params_init(p, sizeof *p); }
inline void init(pvllm_request* p) noexcept { pvllm_request_init(p, sizeof *p); }
inline void init(pvllm_stats* p) noexcept { pvllm_stats_init(p, sizeof *p); }
inline void init(pvllm_model_config* p) noexcept { pvllm_model_config_init(p, sizeof *p); }
inline void init(pvllm_memory_estimate* p) noexcept { pvllm_memory_estimate_init(p, sizeof *p); }
inline void init(pvllm_chat_template_params* p) noexcept {
  pvllm_chat_template_params_init(p, sizeof *p);
}
inline void init(pvllm_tokenizer_info* p) noexcept { pvllm_tokenizer_info_init(p, sizeof *p); }
}  // namespace detail

template <typename T>
T defaults() noexcept {
  T value{};
  detail::init(&value);
  return value;
}

/* ------------------------------------------------------------------------
 * Output batches: a view over pvllm_poll's result that owns it.
 * ------------------------------------------------------------------------ */

/* The events of one poll, in order. Every pvllm_output it yields, and every
 * pointer inside one (token_ids, text, logprobs, error_message), is valid
 * until the OutputBatch is destroyed or assigned over. In
 * `for (const pvllm_output& out : engine.poll())` the temporary batch lives
 * until the loop ends. An empty (default or moved-from) batch has no
 * events. */
class OutputBatch {
 public:
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = pvllm_output;
    using difference_type = std::ptrdiff_t;
    using pointer = const pvllm_output*;
    using reference = const pvllm_output&;

    Iterator() noexcept = default;
    Iterator(const pvllm_output_batch* batch, size_t index) noexcept
        : batch_(batch), index_(index) {}

    reference operator*() const noexcept { return *pvllm_output_batch_get(batch_, index_); }
    pointer operator->() const noexcept { return pvllm_output_batch_get(batch_, index_); }
    Iterator& operator++() noexcept {
      ++index_;
      return *this;
    }
    Iterator operator++(int) noexcept {
      Iterator before = *this;
      ++index_;
      return before;
    }
    friend bool operator==(const Iterator& a, const Iterator& b) noexcept {
      return a.batch_ == b.batch_ && a.index_ == b.index_;
    }
    friend bool operator!=(const Iterator& a, const Iterator& b) noexcept { return !(a == b); }

   private:
    const pvllm_output_batch* batch_ = nullptr;
    size_t index_ = 0;
  };
  using iterator = Iterator;
  using const_iterator = Iterator;

  OutputBatch() noexcept = default;
  explicit OutputBatch(OutputBatchPtr batch) noexcept : batch_(std::move(batch)) {}

  size_t size() const noexcept { return pvllm_output_batch_size(batch_.get()); }
  bool empty() const noexcept { return size() == 0; }
  /* Event i; i must be below size(). */
  const pvllm_output& operator[](size_t i) const noexcept {
    return *pvllm_output_batch_get(batch_.get(), i);
  }
  Iterator begin() const noexcept { return Iterator(batch_.get(), 0); }
  Iterator end() const noexcept { return Iterator(batch_.get(), size()); }

  pvllm_output_batch* get() const noexcept { return batch_.get(); }

 private:
  OutputBatchPtr batch_;
};

#if PVLLM_CXX_EXCEPTIONS

/* ------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------ */

/* What the throwing wrappers throw: the failed call's status and message.
 * what() is the library's message (the status name when the library could
 * not allocate one). */
class Error : public std::runtime_error {
 public:
  Error(pvllm_status status, const std::string& message)
      : std::runtime_error(message.empty() ? pvllm_status_to_string(status) : message),
        status_(status) {}

  pvllm_status status() const noexcept { return status_; }
  /* "PVLLM_STATUS_NOT_FOUND", ...; never NULL. */
  const char* status_name() const noexcept { return pvllm_status_to_string(status_); }

 private:
  pvllm_status status_;
};

namespace detail {
/* Takes the error a C call returned; throws Error unless status is OK.
 * Keep the status in a variable first: in check(pvllm_x(..., &error), error)
 * the second argument may be read before the call runs. */
inline void check(pvllm_status status, pvllm_error* error) {
  const ErrorPtr owned(error);
  if (status != PVLLM_STATUS_OK) throw Error(status, pvllm_error_message(owned.get()));
}

/* The text a C call writes into a caller's buffer (text, capacity, *len,
 * error): starts with room for `guess` bytes and grows once when the call
 * answers BUFFER_TOO_SMALL with the length it needs. */
template <typename Call>
std::string fill_text(size_t guess, Call call) {
  std::string text(guess, '\0');
  for (;;) {
    size_t len = 0;
    pvllm_error* error = nullptr;
    const pvllm_status status = call(text.data(), text.size() + 1, &len, &error);
    if (status == PVLLM_STATUS_BUFFER_TOO_SMALL && len > text.size()) {
      pvllm_error_free(error);
      text.resize(len);
      continue;
    }
    check(status, error);
    text.resize(len);
    return text;
  }
}

/* The ids a C call writes into a caller's array (ids, capacity, *num_ids,
 * error), grown once when the call answers BUFFER_TOO_SMALL. */
template <typename Call>
std::vector<int32_t> fill_ids(size_t guess, Call call) {
  std::vector<int32_t> ids(guess);
  for (;;) {
    size_t num_ids = 0;
    pvllm_error* error = nullptr;
    const pvllm_status status = call(ids.data(), ids.size(), &num_ids, &error);
    if (status == PVLLM_STATUS_BUFFER_TOO_SMALL && num_ids > ids.size()) {
      pvllm_error_free(error);
      ids.resize(num_ids);
      continue;
    }
    check(status, error);
    ids.resize(num_ids);
    return ids;
  }
}
}  // namespace detail

/* ------------------------------------------------------------------------
 * Engine
 * ------------------------------------------------------------------------ */

/* Owns one pvllm_engine. The threading rules are pvllm.h's: submit, abort,
 * poll, stats, tokenize, detokenize and apply_chat_template may be called
 * from any thread, also while another thread is inside step; step is
 * serialised; destruction or assignment must not race any other call. Calling a method of an empty
 * Engine throws INVALID_ARGUMENT, as the C call does for NULL. */
class Engine {
 public:
  /* Holds no engine (assign one later). */
  Engine() noexcept = default;
  /* Adopts an engine made by pvllm_engine_create. */
  explicit Engine(EnginePtr engine) noexcept : engine_(std::move(engine)) {}
  /* pvllm_engine_create: loads the model and allocates the KV pool. */
  explicit Engine(const pvllm_engine_params& params) {
    pvllm_engine* engine = nullptr;
    pvllm_error* error = nullptr;
    const pvllm_status status = pvllm_engine_create(&params, &engine, &error);
    engine_.reset(engine);
    detail::check(status, error);
  }

  /* pvllm_submit; returns the request id (never 0). */
  uint64_t submit(const pvllm_request& request) {
    uint64_t id = 0;
    pvllm_error* error = nullptr;
    const pvllm_status status = pvllm_submit(engine_.get(), &request, &id, &error);
    detail::check(status, error);
    return id;
  }
  /* A text prompt (tokenized with the tokenizer's special tokens, BOS) with
   * these sampling parameters. */
  uint64_t submit(const std::string& prompt_text, const pvllm_sampling_params& sampling) {
    pvllm_request request = defaults<pvllm_request>();
    request.prompt_text = prompt_text.c_str();
    request.sampling = &sampling;
    return submit(request);
  }
  /* A prompt of token ids, used as given. */
  uint64_t submit(const std::vector<int32_t>& prompt_token_ids,
                  const pvllm_sampling_params& sampling) {
    pvllm_request request = defaults<pvllm_request>();
    request.prompt_token_ids = prompt_token_ids.data();
    request.num_prompt_token_ids = prompt_token_ids.size();
    request.sampling = &sampling;
    return submit(request);
  }

  /* pvllm_step; returns the number of requests not yet finished. */
  int32_t step() {
    int32_t num_unfinished = 0;
    pvllm_error* error = nullptr;
    const pvllm_status status = pvllm_step(engine_.get(), &num_unfinished, &error);
    detail::check(status, error);
    return num_unfinished;
  }

  /* pvllm_poll: up to max_events pending events (0 = all), maybe none. */
  OutputBatch poll(size_t max_events = 0) {
    pvllm_output_batch* batch = nullptr;
    pvllm_error* error = nullptr;
    const pvllm_status status = pvllm_poll(engine_.get(), max_events, &batch, &error);
    OutputBatch owned{OutputBatchPtr(batch)};
    detail::check(status, error);
    return owned;
  }

  /* pvllm_abort. Returns false when the id is unknown or the request has
   * already finished (NOT_FOUND, which races with finishing are expected
   * to hit); throws for any other failure. */
  bool abort(uint64_t request_id) {
    pvllm_error* error = nullptr;
    const pvllm_status status = pvllm_abort(engine_.get(), request_id, &error);
    if (status == PVLLM_STATUS_NOT_FOUND) {
      pvllm_error_free(error);
      return false;
    }
    detail::check(status, error);
    return true;
  }

  /* pvllm_poll_request (since 0.2): up to max_events (0 = all) of one
   * request's events. An empty batch when it has none yet; throws NOT_FOUND
   * once the request is over and every event taken (or it was detached). */
  OutputBatch poll_request(uint64_t request_id, size_t max_events = 0) {
    pvllm_output_batch* batch = nullptr;
    pvllm_error* error = nullptr;
    const pvllm_status status =
        pvllm_poll_request(engine_.get(), request_id, max_events, &batch, &error);
    OutputBatch owned{OutputBatchPtr(batch)};
    detail::check(status, error);
    return owned;
  }

  /* pvllm_wait (since 0.2): blocks until request_id has an event to take or
   * is over (true), or timeout_ms passes (false; PVLLM_WAIT_INFINITE never
   * times out). Throws NOT_FOUND for an unknown, detached or fully taken
   * request, and for any other failure. */
  bool wait(uint64_t request_id, int32_t timeout_ms = PVLLM_WAIT_INFINITE) {
    pvllm_error* error = nullptr;
    const pvllm_status status = pvllm_wait(engine_.get(), request_id, timeout_ms, &error);
    if (status == PVLLM_STATUS_TIMEOUT) {
      pvllm_error_free(error);
      return false;
    }
    detail::check(status, error);
    return true;
  }

  /* pvllm_detach (since 0.2): its events are no longer delivered. Returns
   * false (NOT_FOUND) when the id is unknown or already over. */
  bool detach(uint64_t request_id) {
    pvllm_error* error = nullptr;
    const pvllm_status status = pvllm_detach(engine_.get(), request_id, &error);
    if (status == PVLLM_STATUS_NOT_FOUND) {
      pvllm_error_free(error);
      return false;
    }
    detail::check(status, error);
    return true;
  }

  /* pvllm_get_stats: a snapshot taken after the latest step. */
  pvllm_stats stats() const {
    pvllm_stats stats = defaults<pvllm_stats>();
    pvllm_error* error = nullptr;
    const pvllm_status status = pvllm_get_stats(engine_.get(), &stats, &error);
    detail::check(status, error);
    return stats;
  }

  /* pvllm_tokenize, sizing the buffer through its BUFFER_TOO_SMALL
   * protocol. */
  std::vector<int32_t> tokenize(const std::string& text, bool add_bos = true) const {
    // Usually enough: at most a token per byte.
    return detail::fill_ids(
        text.size() + 2, [&](int32_t* ids, size_t capacity, size_t* num_ids, pvllm_error** error) {
          return pvllm_tokenize(engine_.get(), text.c_str(), add_bos ? 1 : 0, ids, capacity,
                                num_ids, error);
        });
  }

  /* pvllm_detokenize, likewise. */
  std::string detokenize(const int32_t* ids, size_t num_ids) const {
    // A typical 4 bytes a token, + the NUL.
    return detail::fill_text(
        num_ids * 4, [&](char* text, size_t capacity, size_t* len, pvllm_error** error) {
          return pvllm_detokenize(engine_.get(), ids, num_ids, text, capacity, len, error);
        });
  }
  std::string detokenize(const std::vector<int32_t>& ids) const {
    return detokenize(ids.data(), ids.size());
  }

  /* pvllm_apply_chat_template (since 0.3): the prompt text the model's chat
   * template makes of params' conversation, sizing the buffer through its
   * BUFFER_TOO_SMALL protocol. */
  std::string apply_chat_template(const pvllm_chat_template_params& params) const {
    return detail::fill_text(
        256, [&](char* text, size_t capacity, size_t* len, pvllm_error** error) {
          return pvllm_apply_chat_template(engine_.get(), &params, text, capacity, len, error);
        });
  }
  /* The same for a JSON array of messages with the other parameters'
   * defaults. */
  std::string apply_chat_template(const std::string& messages_json,
                                  bool add_generation_prompt = true) const {
    pvllm_chat_template_params params = defaults<pvllm_chat_template_params>();
    params.messages_json = messages_json.c_str();
    params.add_generation_prompt = add_generation_prompt ? 1 : 0;
    return apply_chat_template(params);
  }

  /* The handle, for C calls (this Engine keeps owning it). */
  pvllm_engine* get() const noexcept { return engine_.get(); }
  explicit operator bool() const noexcept { return engine_ != nullptr; }

 private:
  EnginePtr engine_;
};

/* ------------------------------------------------------------------------
 * Models: inspection and memory estimates (no engine needed)
 * ------------------------------------------------------------------------ */

/* Owns one pvllm_model_info: a model's config and tensor table. */
class ModelInfo {
 public:
  ModelInfo() noexcept = default;
  explicit ModelInfo(ModelInfoPtr info) noexcept : info_(std::move(info)) {}

  /* pvllm_model_inspect: reads the files without loading weights. */
  static ModelInfo inspect(const std::string& model_path) {
    pvllm_model_info* info = nullptr;
    pvllm_error* error = nullptr;
    const pvllm_status status = pvllm_model_inspect(model_path.c_str(), &info, &error);
    ModelInfo owned{ModelInfoPtr(info)};
    detail::check(status, error);
    return owned;
  }
  /* pvllm_model_inspect_random: a random-weights shape ("tiny", ...). */
  static ModelInfo inspect_random(const std::string& shape) {
    pvllm_model_info* info = nullptr;
    pvllm_error* error = nullptr;
    const pvllm_status status = pvllm_model_inspect_random(shape.c_str(), &info, &error);
    ModelInfo owned{ModelInfoPtr(info)};
    detail::check(status, error);
    return owned;
  }

  pvllm_model_config config() const {
    pvllm_model_config config = defaults<pvllm_model_config>();
    pvllm_error* error = nullptr;
    const pvllm_status status = pvllm_model_info_config(info_.get(), &config, &error);
    detail::check(status, error);
    return config;
  }
  size_t num_tensors() const noexcept { return pvllm_model_info_num_tensors(info_.get()); }
  /* Tensor i; its name and dtype are valid until this ModelInfo is
   * destroyed or assigned over. */
  pvllm_tensor_info tensor(size_t index) const {
    pvllm_tensor_info tensor{};
    pvllm_error* error = nullptr;
    const pvllm_status status = pvllm_model_info_tensor(info_.get(), index, &tensor, &error);
    detail::check(status, error);
    return tensor;
  }

  pvllm_model_info* get() const noexcept { return info_.get(); }
  explicit operator bool() const noexcept { return info_ != nullptr; }

 private:
  ModelInfoPtr info_;
};

/* Owns one pvllm_tokenizer (since 0.9): a model's tokenizer and chat
 * templates without its weights. Immutable: any thread may use it. */
class Tokenizer {
 public:
  Tokenizer() noexcept = default;
  explicit Tokenizer(TokenizerPtr tokenizer) noexcept : tokenizer_(std::move(tokenizer)) {}

  /* pvllm_tokenizer_open: any path an engine takes, or a tokenizer file. */
  static Tokenizer open(const std::string& model_path) {
    pvllm_tokenizer* tokenizer = nullptr;
    pvllm_error* error = nullptr;
    const pvllm_status status = pvllm_tokenizer_open(model_path.c_str(), &tokenizer, &error);
    Tokenizer owned{TokenizerPtr(tokenizer)};
    detail::check(status, error);
    return owned;
  }

  /* pvllm_tokenizer_encode. */
  std::vector<int32_t> encode(const std::string& text, bool add_special_tokens = true) const {
    return detail::fill_ids(
        text.size() + 2, [&](int32_t* ids, size_t capacity, size_t* num_ids, pvllm_error** error) {
          return pvllm_tokenizer_encode(tokenizer_.get(), text.c_str(), add_special_tokens ? 1 : 0,
                                        ids, capacity, num_ids, error);
        });
  }
  /* pvllm_tokenizer_decode. */
  std::string decode(const std::vector<int32_t>& ids) const {
    return detail::fill_text(
        ids.size() * 4, [&](char* text, size_t capacity, size_t* len, pvllm_error** error) {
          return pvllm_tokenizer_decode(tokenizer_.get(), ids.data(), ids.size(), text, capacity,
                                        len, error);
        });
  }
  /* pvllm_tokenizer_apply_chat_template. */
  std::string apply_chat_template(const pvllm_chat_template_params& params) const {
    return detail::fill_text(256,
                             [&](char* text, size_t capacity, size_t* len, pvllm_error** error) {
                               return pvllm_tokenizer_apply_chat_template(
                                   tokenizer_.get(), &params, text, capacity, len, error);
                             });
  }
  /* pvllm_tokenizer_get_info; its strings live as long as this Tokenizer. */
  pvllm_tokenizer_info info() const {
    pvllm_tokenizer_info info = defaults<pvllm_tokenizer_info>();
    pvllm_error* error = nullptr;
    const pvllm_status status = pvllm_tokenizer_get_info(tokenizer_.get(), &info, &error);
    detail::check(status, error);
    return info;
  }

  pvllm_tokenizer* get() const noexcept { return tokenizer_.get(); }
  explicit operator bool() const noexcept { return tokenizer_ != nullptr; }

 private:
  TokenizerPtr tokenizer_;
};

/* pvllm_estimate_memory: what Engine(params) would need. */
inline pvllm_memory_estimate estimate_memory(const pvllm_engine_params& params) {
  pvllm_memory_estimate estimate = defaults<pvllm_memory_estimate>();
  pvllm_error* error = nullptr;
  const pvllm_status status = pvllm_estimate_memory(&params, &estimate, &error);
  detail::check(status, error);
  return estimate;
}

#endif /* PVLLM_CXX_EXCEPTIONS */

}  // namespace pvllm::cxx

#endif /* PVLLM_PVLLM_HPP_ */
