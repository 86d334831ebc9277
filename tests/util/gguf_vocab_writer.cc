// tokenizer.json -> tokenizer.ggml.* keys, as convert_hf_to_gguf.py writes them.
#include "tests/util/gguf_vocab_writer.h"

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

namespace pvllm::testing {
namespace {

using nlohmann::json;

// gguf-py's token types.
enum : int32_t { kNormal = 1, kControl = 3, kUserDefined = 4 };

Status read_json(const std::string& path, json* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  *out = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) return InvalidArgument(path + " is not JSON");
  return Status::Ok();
}

// convert_hf_to_gguf.py's does_token_look_special.
bool looks_special(const std::string& token) {
  if (token == "<pad>" || token == "<mask>" || token == "<2mass>" || token == "[@BOS@]") {
    return true;
  }
  return token.size() >= 4 && token.compare(0, 2, "<|") == 0 &&
         token.compare(token.size() - 2, 2, "|>") == 0;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

// The merges as "left right" lines (pairs joined as SpecialVocab joins them).
std::vector<std::string> merge_lines(const json& merges) {
  std::vector<std::string> lines;
  for (const json& m : merges) {
    if (m.is_string()) {
      lines.push_back(m.get<std::string>());
    } else {
      // SpecialVocab writes a space inside a pair's token as U+0120.
      lines.push_back(replace_all(m[0].get<std::string>(), " ", "\xC4\xA0") + " " +
                      replace_all(m[1].get<std::string>(), " ", "\xC4\xA0"));
    }
  }
  return lines;
}

// A special token's text in tokenizer_config.json: "x" or {"content": "x"}.
std::string config_token(const json& config, const std::string& key) {
  if (!config.contains(key)) return "";
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return "";
}

void add_hyperparameters(GgufWriter* w) {
  w->add_string("general.architecture", "llama");
  w->add_string("general.name", "vocab");
  w->add_u32("llama.block_count", 1);
  w->add_u32("llama.context_length", 8192);
  w->add_u32("llama.embedding_length", 64);
  w->add_u32("llama.feed_forward_length", 128);
  w->add_u32("llama.attention.head_count", 8);
  w->add_u32("llama.attention.head_count_kv", 8);
  w->add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w->add_u32("general.file_type", 1);
}

}  // namespace

Status make_hf_vocab_gguf(const std::string& folder, const std::string& pre, GgufWriter* w) {
  json tokenizer, config = json::object();
  PVLLM_RETURN_IF_ERROR(read_json(folder + "/tokenizer.json", &tokenizer));
  if (Status st = read_json(folder + "/tokenizer_config.json", &config);
      !st.ok() && st.code() != StatusCode::kNotFound) {
    return st;
  }
  const json& model = tokenizer["model"];
  std::map<int64_t, std::pair<std::string, int32_t>> by_id;  // id -> token, type
  for (const auto& [token, id] : model["vocab"].items())
    by_id[id.get<int64_t>()] = {token, kNormal};
  for (const json& added : tokenizer["added_tokens"]) {
    std::string token = added["content"].get<std::string>();
    int32_t type = kControl;
    if (!added.value("special", false) && !looks_special(token)) {
      token = replace_all(token, "\xE2\x96\x81", " ");
      type = kUserDefined;
    }
    by_id[added["id"].get<int64_t>()] = {token, type};
  }
  const int64_t num_tokens = by_id.empty() ? 0 : by_id.rbegin()->first + 1;
  std::vector<std::string> tokens(num_tokens);
  std::vector<int32_t> types(num_tokens, 5);  // unused, as the converter pads holes
  for (int64_t id = 0; id < num_tokens; ++id) tokens[id] = "[PAD" + std::to_string(id) + "]";
  for (const auto& [id, entry] : by_id) {
    tokens[id] = entry.first;
    types[id] = entry.second;
  }

  add_hyperparameters(w);
  w->add_string("tokenizer.ggml.model", "gpt2");
  w->add_string("tokenizer.ggml.pre", pre);
  w->add_string_array("tokenizer.ggml.tokens", tokens);
  w->add_array("tokenizer.ggml.token_type", gguf::ValueType::kI32, types);
  w->add_string_array("tokenizer.ggml.merges", merge_lines(model["merges"]));
  // SpecialVocab: each of bos, eos, unk, sep, pad, cls, mask that
  // tokenizer_config.json names and tokenizer.json's added tokens hold.
  const std::vector<std::pair<std::string, std::string>> kinds = {
      {"bos", "bos"},     {"eos", "eos"}, {"unk", "unknown"}, {"sep", "seperator"},
      {"pad", "padding"}, {"cls", "cls"}, {"mask", "mask"}};
  for (const auto& [kind, key] : kinds) {
    const std::string text = config_token(config, kind + "_token");
    if (text.empty()) continue;
    for (const json& added : tokenizer["added_tokens"]) {
      if (added["content"] == text) {
        w->add_u32("tokenizer.ggml." + key + "_token_id", added["id"].get<uint32_t>());
        break;
      }
    }
  }
  for (const char* kind : {"bos", "eos"}) {
    const std::string key = std::string("add_") + kind + "_token";
    if (config.contains(key) && config[key].is_boolean()) {
      w->add_bool("tokenizer.ggml." + key, config[key].get<bool>());
    }
  }
  if (config.contains("chat_template") && config["chat_template"].is_string()) {
    w->add_string("tokenizer.chat_template", config["chat_template"].get<std::string>());
  }
  return Status::Ok();
}

}  // namespace pvllm::testing
