// The C ABI's entry points for tokenizers: the engine's (pvllm_tokenize,
// pvllm_detokenize, pvllm_apply_chat_template) and pvllm_tokenizer, a
// model's tokenizer and chat templates without its weights.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "capi/conversions.h"
#include "capi/handles.h"
#include "capi/struct_versions.h"
#include "core/model/model_files.h"
#include "pvllm/pvllm.h"

using namespace pvllm::capi;  // NOLINT(google-build-using-namespace): this file implements it

namespace {

// What pvllm_tokenize and pvllm_tokenizer_encode share: `tokenizer` may be
// NULL (an engine without one, a handle of chat templates alone), which is
// TOKENIZER_ERROR saying `no_tokenizer`.
Status encode_into(const pvllm::Tokenizer* tokenizer, const char* text, uint8_t add_special,
                   int32_t* ids, size_t capacity, size_t* out_num_ids, const char* no_tokenizer) {
  if (text == nullptr) return null_argument("text");
  if (out_num_ids == nullptr) return null_argument("out_num_ids");
  if (ids == nullptr && capacity > 0) return invalid("ids is NULL but capacity is > 0");
  if (tokenizer == nullptr) return pvllm::Status(pvllm::StatusCode::kTokenizerError, no_tokenizer);
  std::vector<int32_t> encoded;
  PVLLM_RETURN_IF_ERROR(tokenizer->encode(text, add_special != 0, &encoded));
  *out_num_ids = encoded.size();
  if (encoded.size() > capacity) {
    return pvllm::Status(pvllm::StatusCode::kBufferTooSmall,
                         "ids needs " + std::to_string(encoded.size()) + " entries, capacity is " +
                             std::to_string(capacity));
  }
  std::copy(encoded.begin(), encoded.end(), ids);
  return Status::Ok();
}

// What pvllm_detokenize and pvllm_tokenizer_decode share.
Status decode_into(const pvllm::Tokenizer* tokenizer, const int32_t* ids, size_t num_ids,
                   char* text, size_t capacity, size_t* out_len, const char* no_tokenizer) {
  if (ids == nullptr && num_ids > 0) return invalid("ids is NULL but num_ids is > 0");
  if (text == nullptr && capacity > 0) return invalid("text is NULL but capacity is > 0");
  if (out_len == nullptr) return null_argument("out_len");
  if (tokenizer == nullptr) return pvllm::Status(pvllm::StatusCode::kTokenizerError, no_tokenizer);
  std::vector<int32_t> input(ids, ids + num_ids);
  for (size_t i = 0; i < input.size(); ++i) {
    if (!tokenizer->is_valid_id(input[i])) {
      return invalid("ids[" + std::to_string(i) + "] = " + std::to_string(input[i]) +
                     " is outside the vocabulary [0, " + std::to_string(tokenizer->vocab_size()) +
                     ")");
    }
  }
  std::string decoded;
  PVLLM_RETURN_IF_ERROR(tokenizer->decode(input, &decoded));
  return copy_text(std::move(decoded), text, capacity, out_len);
}

// What pvllm_apply_chat_template and pvllm_tokenizer_apply_chat_template
// share: `loaded` says whether the model's templates could be read.
Status render_chat_template(const pvllm::chat::ChatTemplates& templates, const Status& loaded,
                            const pvllm_chat_template_params* params, char* text, size_t capacity,
                            size_t* out_len) {
  if (params == nullptr) return null_argument("params");
  if (out_len == nullptr) return null_argument("out_len");
  if (text == nullptr && capacity > 0) return invalid("text is NULL but capacity is > 0");
  PVLLM_RETURN_IF_ERROR(check_struct_size(params, "params"));
  const pvllm_chat_template_params p = read_struct(params, default_chat_template_params());
  pvllm::chat::ChatRequest request;
  PVLLM_RETURN_IF_ERROR(pvllm::chat::parse_chat_request(p.messages_json, p.tools_json,
                                                        p.extra_context_json, &request));
  request.add_generation_prompt = p.add_generation_prompt != 0;
  if (p.template_name != nullptr) request.template_name = p.template_name;
  PVLLM_RETURN_IF_ERROR(loaded);
  std::string rendered;
  if (p.chat_template != nullptr) {
    if (p.chat_template[0] == '\0') return invalid("params->chat_template is empty");
    request.template_name.clear();
    PVLLM_RETURN_IF_ERROR(templates.with_template(p.chat_template).apply(request, &rendered));
  } else {
    PVLLM_RETURN_IF_ERROR(templates.apply(request, &rendered));
  }
  return copy_text(std::move(rendered), text, capacity, out_len);
}

}  // namespace

extern "C" {

/* ---------------------------------------------------------------- tokenizer */

pvllm_status pvllm_tokenize(pvllm_engine* engine, const char* text, uint8_t add_bos, int32_t* ids,
                            size_t capacity, size_t* out_num_ids, pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_num_ids != nullptr) *out_num_ids = 0;
    PVLLM_RETURN_IF_ERROR(check_engine(engine));
    return encode_into(engine->engine->tokenizer(), text, add_bos, ids, capacity, out_num_ids,
                       "the engine has no tokenizer");
  });
}

pvllm_status pvllm_detokenize(pvllm_engine* engine, const int32_t* ids, size_t num_ids, char* text,
                              size_t capacity, size_t* out_len, pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_len != nullptr) *out_len = 0;
    PVLLM_RETURN_IF_ERROR(check_engine(engine));
    return decode_into(engine->engine->tokenizer(), ids, num_ids, text, capacity, out_len,
                       "the engine has no tokenizer");
  });
}

pvllm_status pvllm_tokenizer_open(const char* model_path, pvllm_tokenizer** out_tokenizer,
                                  pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_tokenizer == nullptr) return null_argument("out_tokenizer");
    *out_tokenizer = nullptr;
    if (model_path == nullptr) return null_argument("model_path");
    auto handle = std::make_unique<pvllm_tokenizer>();
    pvllm::ModelFiles files;
    PVLLM_RETURN_IF_ERROR(pvllm::resolve_model_files(model_path, &files));
    handle->chat_templates_status =
        pvllm::chat::ChatTemplates::load(model_path, &handle->chat_templates);
    const bool chat_only = files.kind == pvllm::ModelFiles::Kind::kTokenizerOnly &&
                           files.tokenizer.empty() && handle->chat_templates_status.ok();
    if (!chat_only) {
      PVLLM_RETURN_IF_ERROR(pvllm::Tokenizer::load(model_path, &handle->tokenizer));
      handle->source =
          files.kind == pvllm::ModelFiles::Kind::kPvllm ? files.weights : files.tokenizer;
      handle->kind = handle->tokenizer->kind();
    }
    fill_special_tokens(handle->tokenizer.get(), &handle->chat_templates);
    handle->bos_token = handle->chat_templates.bos_token();
    handle->eos_token = handle->chat_templates.eos_token();
    *out_tokenizer = publish_handle(std::move(handle));
    return Status::Ok();
  });
}

void pvllm_tokenizer_free(pvllm_tokenizer* tokenizer) { release_handle(tokenizer); }

pvllm_status pvllm_tokenizer_encode(const pvllm_tokenizer* tokenizer, const char* text,
                                    uint8_t add_special_tokens, int32_t* ids, size_t capacity,
                                    size_t* out_num_ids, pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_num_ids != nullptr) *out_num_ids = 0;
    PVLLM_RETURN_IF_ERROR(check_tokenizer(tokenizer));
    return encode_into(tokenizer->tokenizer.get(), text, add_special_tokens, ids, capacity,
                       out_num_ids, "the tokenizer handle holds chat templates only");
  });
}

pvllm_status pvllm_tokenizer_decode(const pvllm_tokenizer* tokenizer, const int32_t* ids,
                                    size_t num_ids, char* text, size_t capacity, size_t* out_len,
                                    pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_len != nullptr) *out_len = 0;
    PVLLM_RETURN_IF_ERROR(check_tokenizer(tokenizer));
    return decode_into(tokenizer->tokenizer.get(), ids, num_ids, text, capacity, out_len,
                       "the tokenizer handle holds chat templates only");
  });
}

pvllm_status pvllm_tokenizer_apply_chat_template(const pvllm_tokenizer* tokenizer,
                                                 const pvllm_chat_template_params* params,
                                                 char* text, size_t capacity, size_t* out_len,
                                                 pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_len != nullptr) *out_len = 0;
    PVLLM_RETURN_IF_ERROR(check_tokenizer(tokenizer));
    return render_chat_template(tokenizer->chat_templates, tokenizer->chat_templates_status, params,
                                text, capacity, out_len);
  });
}

void pvllm_tokenizer_info_init(pvllm_tokenizer_info* info, size_t struct_size) {
  init_struct(info, struct_size, default_tokenizer_info());
}

pvllm_status pvllm_tokenizer_get_info(const pvllm_tokenizer* tokenizer,
                                      pvllm_tokenizer_info* out_info, pvllm_error** error) {
  return guard(error, [&]() -> Status {
    PVLLM_RETURN_IF_ERROR(check_tokenizer(tokenizer));
    if (out_info == nullptr) return null_argument("out_info");
    PVLLM_RETURN_IF_ERROR(check_struct_size(out_info, "out_info"));
    pvllm_tokenizer_info info = default_tokenizer_info();
    info.bos_token = tokenizer->bos_token.c_str();
    info.eos_token = tokenizer->eos_token.c_str();
    info.kind = tokenizer->kind.c_str();
    info.source = tokenizer->source.c_str();
    if (const pvllm::Tokenizer* t = tokenizer->tokenizer.get(); t != nullptr) {
      info.vocab_size = t->vocab_size();
      info.bos_id = t->bos_id();
      info.eos_id = t->eos_id();
      std::vector<int32_t> probe;
      info.adds_bos = t->bos_id() >= 0 && t->encode("a", true, &probe).ok() && !probe.empty() &&
                              probe.front() == t->bos_id()
                          ? 1
                          : 0;
    }
    info.has_chat_template =
        tokenizer->chat_templates_status.ok() && !tokenizer->chat_templates.empty() ? 1 : 0;
    write_struct(out_info, info);
    return Status::Ok();
  });
}

/* ---------------------------------------------------------------- chat templates */

void pvllm_chat_template_params_init(pvllm_chat_template_params* params, size_t struct_size) {
  init_struct(params, struct_size, default_chat_template_params());
}

pvllm_status pvllm_apply_chat_template(pvllm_engine* engine,
                                       const pvllm_chat_template_params* params, char* text,
                                       size_t capacity, size_t* out_len, pvllm_error** error) {
  return guard(error, [&]() -> Status {
    if (out_len != nullptr) *out_len = 0;
    PVLLM_RETURN_IF_ERROR(check_engine(engine));
    return render_chat_template(engine->chat_templates, engine->chat_templates_status, params, text,
                                capacity, out_len);
  });
}

}  // extern "C"
