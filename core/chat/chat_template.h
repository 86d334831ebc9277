// ChatTemplates: a model's chat templates and the special tokens they read,
// loaded from its folder, and how a conversation becomes a prompt.
//
// Where they come from, as transformers reads them: tokenizer_config.json's
// "chat_template" (one string, the "default" template, or a list of
// {"name", "template"}), overridden by a chat_template.jinja file beside
// it; bos_token, eos_token, unk_token and pad_token from
// tokenizer_config.json (a string or {"content": ...}). The folder is the
// model path itself, or the folder holding it for a single-file model
// (a llama2.c .bin); a .pvllm file carries both texts in its header; a
// GGUF file its templates and special token ids in its metadata
// (gguf_chat_template.cc).
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/chat/template.h"

namespace pvllm::gguf {
class Metadata;
}

namespace pvllm::chat {

struct ChatRequest {
  // An OpenAI-style array of messages ({"role", "content", ...}).
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  // The tools' JSON schemas (an array), or null for none.
  nlohmann::ordered_json tools;
  // More variables for the template (an object, or null), e.g.
  // {"enable_thinking": false}; they may override the special tokens.
  nlohmann::ordered_json extra_context;
  bool add_generation_prompt = true;
  // "" = "tool_use" when tools are given and the model has one, else
  // "default".
  std::string template_name;
};

// Parses the JSON texts of a request (tools_json and extra_json may be
// null): INVALID_ARGUMENT naming the part that is malformed or of the
// wrong type.
Status parse_chat_request(const char* messages_json, const char* tools_json, const char* extra_json,
                          ChatRequest* out);

class ChatTemplates {
 public:
  // Reads the model's templates. A folder without any template loads as an
  // empty set (apply then says NOT_FOUND); a malformed tokenizer_config.json
  // is CORRUPT_MODEL; a missing path is NOT_FOUND.
  // A .pvllm file gives the texts it carries.
  static Status load(const std::string& model_path, ChatTemplates* out);
  // From tokenizer_config.json's text and chat_template.jinja's (either may
  // be empty); `origin` (the folder or file) is named in errors.
  static Status from_texts(const std::string& origin, std::string_view config_text,
                           std::string_view jinja_text, ChatTemplates* out);
  // From a GGUF file's metadata (any part of a split one): the template
  // tokenizer.chat_template ("default") and the named ones
  // (tokenizer.chat_templates lists the names, tokenizer.chat_template.NAME
  // holds each), bos_token, eos_token, unk_token and pad_token as the texts
  // of the tokens tokenizer.ggml.*_token_id name. A file without templates
  // is an empty set; a key of the wrong type, a listed name without its
  // template or an id outside tokenizer.ggml.tokens is CORRUPT_MODEL.
  static Status from_gguf(const std::string& path, ChatTemplates* out);
  // The same from metadata already read (a .pvllm file's GGUF tokenizer);
  // `origin` is named in errors.
  static Status from_gguf_metadata(const gguf::Metadata& metadata, const std::string& origin,
                                   ChatTemplates* out);

  // Sets bos_token and eos_token where tokenizer_config.json names none, as
  // transformers takes them from the tokenizer itself (a model that ships
  // only tokenizer.model). Empty texts are not set.
  void set_missing_special_tokens(const std::string& bos, const std::string& eos);

  // A copy with `source` as its only template ("default"), keeping the
  // model's special tokens: a template given by the caller in place of the
  // model's. A template that does not parse fails at apply, as the model's.
  ChatTemplates with_template(std::string source) const;

  bool empty() const { return templates_.empty(); }
  std::vector<std::string> names() const;
  // The special tokens' texts; "" when the model has none.
  std::string bos_token() const;
  std::string eos_token() const;

  // Renders the conversation. NOT_FOUND when the model has no template (or
  // none of that name); the template's statuses otherwise (template.h).
  Status apply(const ChatRequest& request, std::string* out) const;

 private:
  struct Entry {
    std::string source;
    std::shared_ptr<const Template> parsed;  // null when parsing failed
    Status parse_status;
  };
  void add(const std::string& name, std::string source);

  std::string origin_;
  std::map<std::string, Entry> templates_;
  nlohmann::ordered_json special_tokens_ = nlohmann::ordered_json::object();  // name -> text
};

}  // namespace pvllm::chat
