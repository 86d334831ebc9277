// ChatTemplates from a GGUF file's metadata, as llama.cpp's converter
// (gguf-py's SpecialVocab) writes them.
#include <utility>

#include "core/chat/chat_template.h"
#include "core/model/gguf_file.h"

namespace pvllm::chat {
namespace {

constexpr char kTemplateKey[] = "tokenizer.chat_template";
constexpr char kTemplateNamesKey[] = "tokenizer.chat_templates";
constexpr char kTokensKey[] = "tokenizer.ggml.tokens";

// The text of the token `id_key` names, "" when the key is absent or says
// none (-1, or 0xFFFFFFFF as a u32).
Status special_token_text(const gguf::Metadata& metadata, const std::string& path,
                          const std::string& id_key, std::string* text) {
  text->clear();
  if (metadata.find(id_key) == nullptr) return Status::Ok();
  const gguf::Value& value = *metadata.find(id_key);
  if (value.type == gguf::ValueType::kI32 && value.i == -1) return Status::Ok();
  uint64_t id = 0;
  PVLLM_RETURN_IF_ERROR(metadata.get_uint(id_key, &id));
  if (id == 0xFFFFFFFFu) return Status::Ok();
  const gguf::Array* tokens = nullptr;
  const Status st = metadata.get_array(kTokensKey, gguf::ValueType::kString, &tokens);
  if (!st.ok()) return CorruptModel(st.message());
  if (id >= tokens->strings.size()) {
    return CorruptModel(path + ": metadata key \"" + id_key + "\" is " + std::to_string(id) +
                        ", outside the " + std::to_string(tokens->strings.size()) + " tokens");
  }
  *text = tokens->strings[id];
  return Status::Ok();
}

}  // namespace

Status ChatTemplates::from_gguf(const std::string& path, ChatTemplates* out) {
  gguf::File file;
  PVLLM_RETURN_IF_ERROR(gguf::open(path, &file));
  return from_gguf_metadata(file.metadata(), path, out);
}

Status ChatTemplates::from_gguf_metadata(const gguf::Metadata& metadata, const std::string& path,
                                         ChatTemplates* out) {
  ChatTemplates set;
  set.origin_ = path;
  if (metadata.find(kTemplateKey) != nullptr) {
    std::string source;
    PVLLM_RETURN_IF_ERROR(metadata.get_string(kTemplateKey, &source));
    set.add("default", std::move(source));
  }
  if (metadata.find(kTemplateNamesKey) != nullptr) {
    std::vector<std::string> names;
    PVLLM_RETURN_IF_ERROR(metadata.get_string_array(kTemplateNamesKey, &names));
    for (const std::string& name : names) {
      const std::string key = std::string(kTemplateKey) + "." + name;
      std::string source;
      const Status st = metadata.get_string(key, &source);
      if (st.code() == StatusCode::kNotFound) return CorruptModel(st.message());
      PVLLM_RETURN_IF_ERROR(st);
      set.add(name, std::move(source));
    }
  }
  const std::pair<const char*, const char*> tokens[] = {
      {"bos_token", "tokenizer.ggml.bos_token_id"},
      {"eos_token", "tokenizer.ggml.eos_token_id"},
      {"unk_token", "tokenizer.ggml.unknown_token_id"},
      {"pad_token", "tokenizer.ggml.padding_token_id"}};
  for (const auto& [name, key] : tokens) {
    std::string text;
    PVLLM_RETURN_IF_ERROR(special_token_text(metadata, path, key, &text));
    if (!text.empty()) set.special_tokens_[name] = text;
  }
  *out = std::move(set);
  return Status::Ok();
}

}  // namespace pvllm::chat
