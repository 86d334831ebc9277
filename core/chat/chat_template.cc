// ChatTemplates: loading from a model folder, and rendering a request.
#include "core/chat/chat_template.h"

#include <filesystem>
#include <utility>

#include "core/base/file_bytes.h"
#include "core/chat/json_value.h"
#include "core/model/gguf_file.h"
#include "core/model/model_files.h"
#include "core/model/pvllm_file.h"

namespace pvllm::chat {
namespace {

namespace fs = std::filesystem;

Status parse_json(const char* text, const char* what, nlohmann::ordered_json* out) {
  *out = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) return InvalidArgument(std::string(what) + " is not valid JSON");
  return Status::Ok();
}

// A special token as tokenizer_config.json writes it: "<s>", or an added
// token object {"content": "<s>", ...}; null when absent.
nlohmann::ordered_json token_text(const nlohmann::ordered_json& v) {
  if (v.is_string()) return v;
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"];
  return nullptr;
}

}  // namespace

Status parse_chat_request(const char* messages_json, const char* tools_json, const char* extra_json,
                          ChatRequest* out) {
  if (messages_json == nullptr) return InvalidArgument("messages_json is NULL");
  PVLLM_RETURN_IF_ERROR(parse_json(messages_json, "messages_json", &out->messages));
  if (!out->messages.is_array()) return InvalidArgument("messages_json must be a JSON array");
  for (size_t i = 0; i < out->messages.size(); ++i) {
    if (!out->messages[i].is_object()) {
      return InvalidArgument("messages_json[" + std::to_string(i) + "] must be a JSON object");
    }
  }
  out->tools = nullptr;
  if (tools_json != nullptr) {
    PVLLM_RETURN_IF_ERROR(parse_json(tools_json, "tools_json", &out->tools));
    if (!out->tools.is_array() && !out->tools.is_null()) {
      return InvalidArgument("tools_json must be a JSON array or null");
    }
  }
  out->extra_context = nullptr;
  if (extra_json != nullptr) {
    PVLLM_RETURN_IF_ERROR(parse_json(extra_json, "extra_context_json", &out->extra_context));
    if (!out->extra_context.is_object() && !out->extra_context.is_null()) {
      return InvalidArgument("extra_context_json must be a JSON object or null");
    }
  }
  return Status::Ok();
}

void ChatTemplates::add(const std::string& name, std::string source) {
  Entry e;
  e.source = std::move(source);
  std::unique_ptr<Template> parsed;
  e.parse_status = Template::parse(e.source, &parsed);
  e.parsed = std::move(parsed);
  templates_[name] = std::move(e);
}

Status ChatTemplates::load(const std::string& model_path, ChatTemplates* out) {
  ModelFiles files;
  const Status resolved = resolve_model_files(model_path, &files);
  std::error_code ec;
  if (!resolved.ok()) {
    // A folder with nothing pvllm reads holds no templates: an empty set.
    if (resolved.code() != StatusCode::kNotFound || !fs::is_directory(model_path, ec)) {
      return resolved;
    }
    files.folder = model_path;
  }
  if (files.kind == ModelFiles::Kind::kGguf) return from_gguf(files.weights, out);
  if (files.kind == ModelFiles::Kind::kPvllm) {
    pvllm_format::FileHeader header;
    PVLLM_RETURN_IF_ERROR(pvllm_format::read_header(files.weights, &header));
    if (header.tokenizer.kind == EmbeddedTokenizer::Kind::kGguf) {
      gguf::Metadata metadata;
      PVLLM_RETURN_IF_ERROR(gguf::parse_metadata(
          header.tokenizer.data, model_path + "'s GGUF tokenizer metadata", &metadata));
      return from_gguf_metadata(metadata, model_path, out);
    }
    return from_texts(model_path, header.tokenizer.config_json,
                      header.tokenizer.chat_template_jinja, out);
  }
  const fs::path folder(files.folder);
  std::string config_text, jinja_text;
  const fs::path config_path = folder / "tokenizer_config.json";
  if (fs::exists(config_path, ec))
    PVLLM_RETURN_IF_ERROR(read_file_bytes(config_path.string(), &config_text));
  const fs::path jinja_path = folder / "chat_template.jinja";
  if (fs::exists(jinja_path, ec))
    PVLLM_RETURN_IF_ERROR(read_file_bytes(jinja_path.string(), &jinja_text));
  return from_texts(folder.string(), config_text, jinja_text, out);
}

Status ChatTemplates::from_texts(const std::string& origin, std::string_view config_text,
                                 std::string_view jinja_text, ChatTemplates* out) {
  ChatTemplates set;
  set.origin_ = origin;
  const std::string config_name = origin + "'s tokenizer_config.json";
  if (!config_text.empty()) {
    const nlohmann::ordered_json config =
        nlohmann::ordered_json::parse(config_text.begin(), config_text.end(), nullptr, false);
    if (config.is_discarded() || !config.is_object()) {
      return CorruptModel(config_name + " is not a JSON object");
    }
    for (const char* token : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
      if (!config.contains(token)) continue;
      const nlohmann::ordered_json t = token_text(config[token]);
      if (!t.is_null()) set.special_tokens_[token] = t;
    }
    if (config.contains("chat_template")) {
      const nlohmann::ordered_json& ct = config["chat_template"];
      if (ct.is_string()) {
        set.add("default", ct.get<std::string>());
      } else if (ct.is_array()) {
        for (const auto& item : ct) {
          if (!item.is_object() || !item.contains("name") || !item["name"].is_string() ||
              !item.contains("template") || !item["template"].is_string()) {
            return CorruptModel(
                config_name +
                ": chat_template list entries must be {\"name\", \"template\"} strings");
          }
          set.add(item["name"].get<std::string>(), item["template"].get<std::string>());
        }
      } else if (!ct.is_null()) {
        return CorruptModel(config_name + ": chat_template must be a string or a list");
      }
    }
  }
  if (!jinja_text.empty()) set.add("default", std::string(jinja_text));
  *out = std::move(set);
  return Status::Ok();
}

void ChatTemplates::set_missing_special_tokens(const std::string& bos, const std::string& eos) {
  if (!bos.empty() && !special_tokens_.contains("bos_token")) special_tokens_["bos_token"] = bos;
  if (!eos.empty() && !special_tokens_.contains("eos_token")) special_tokens_["eos_token"] = eos;
}

ChatTemplates ChatTemplates::with_template(std::string source) const {
  ChatTemplates set;
  set.origin_ = "the chat template given";
  set.special_tokens_ = special_tokens_;
  set.add("default", std::move(source));
  return set;
}

std::vector<std::string> ChatTemplates::names() const {
  std::vector<std::string> names;
  for (const auto& [name, unused] : templates_) names.push_back(name);
  return names;
}

std::string ChatTemplates::bos_token() const { return special_tokens_.value("bos_token", ""); }
std::string ChatTemplates::eos_token() const { return special_tokens_.value("eos_token", ""); }

Status ChatTemplates::apply(const ChatRequest& request, std::string* out) const {
  if (templates_.empty()) {
    return NotFound("the model has no chat template (no chat_template in " + origin_ +
                    "'s tokenizer_config.json and no chat_template.jinja)");
  }
  std::string name = request.template_name;
  if (name.empty()) {
    const bool has_tools = !request.tools.is_null();
    name = has_tools && templates_.count("tool_use") ? "tool_use" : "default";
  }
  const auto it = templates_.find(name);
  if (it == templates_.end()) {
    std::string known;
    for (const auto& [n, unused] : templates_) known += (known.empty() ? "" : ", ") + n;
    return NotFound("the model has no chat template named '" + name + "' (it has: " + known + ")");
  }
  if (!it->second.parsed) return it->second.parse_status;
  if (!request.messages.is_array()) return InvalidArgument("messages must be a JSON array");

  // What transformers passes: the special tokens that are set, the extra
  // variables over them, then messages, tools and add_generation_prompt.
  nlohmann::ordered_json context = special_tokens_;
  if (request.extra_context.is_object()) {
    for (auto e = request.extra_context.begin(); e != request.extra_context.end(); ++e) {
      if (e.key() == "messages" || e.key() == "tools" || e.key() == "add_generation_prompt") {
        return InvalidArgument("extra context variable '" + e.key() +
                               "' would replace a parameter of its own");
      }
      context[e.key()] = e.value();
    }
  }
  context["messages"] = request.messages;
  context["tools"] = request.tools;
  context["add_generation_prompt"] = request.add_generation_prompt;
  return it->second.parsed->render(context, out);
}

}  // namespace pvllm::chat
