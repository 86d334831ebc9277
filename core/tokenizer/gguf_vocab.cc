// Reading tokenizer.ggml.* into a GgufVocab.
#include "core/tokenizer/gguf_vocab.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <unordered_set>

#include "core/base/log.h"

namespace pvllm {
namespace {

constexpr char kModelKey[] = "tokenizer.ggml.model";
constexpr char kPreKey[] = "tokenizer.ggml.pre";
constexpr char kTokensKey[] = "tokenizer.ggml.tokens";
constexpr char kScoresKey[] = "tokenizer.ggml.scores";
constexpr char kTypesKey[] = "tokenizer.ggml.token_type";
constexpr char kMergesKey[] = "tokenizer.ggml.merges";

// Texts llama.cpp takes for control tokens whatever their stored type
// (end-of-generation and fill-in-the-middle markers), the end-of-turn ones
// first, in the order the end-of-turn token is looked for (llama.cpp takes
// whichever its hash map yields first; this takes the first listed).
const std::vector<std::string>& eot_texts() {
  static const std::vector<std::string> texts = {
      "<|eot_id|>",
      "<|im_end|>",
      "<|end|>",
      "<end_of_turn>",
      "<|endoftext|>",
      "<EOT>",
      "<\xEF\xBD\x9C"
      "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"};
  return texts;
}
const std::vector<std::string>& forced_control_texts() {
  static const std::vector<std::string> texts = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
      "<EOT>",
      // fill in the middle
      "<|fim_prefix|>", "<fim-prefix>",
      "<\xEF\xBD\x9C"
      "fim\xE2\x96\x81"
      "begin\xEF\xBD\x9C>",
      "<PRE>", "<|fim_suffix|>", "<fim-suffix>",
      "<\xEF\xBD\x9C"
      "fim\xE2\x96\x81"
      "hole\xEF\xBD\x9C>",
      "<SUF>", "<|fim_middle|>", "<fim-middle>",
      "<\xEF\xBD\x9C"
      "fim\xE2\x96\x81"
      "end\xEF\xBD\x9C>",
      "<MID>", "<|fim_pad|>", "<fim-pad>", "<PAD>", "<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
      "<REPO>", "<|file_sep|>"};
  return texts;
}

std::string key_error(const std::string& path, const std::string& key, const std::string& what) {
  return path + ": metadata key \"" + key + "\" " + what;
}

std::string element_error(const std::string& path, const std::string& key, size_t index,
                          const std::string& what) {
  return key_error(path, key + "[" + std::to_string(index) + "]", what);
}

// A key the tokenizer cannot do without: absent is CORRUPT_MODEL too.
Status required(Status st) {
  if (st.code() == StatusCode::kNotFound) return CorruptModel(st.message());
  return st;
}

Status read_model_kind(const gguf::Metadata& metadata, const std::string& path,
                       GgufVocab::Kind* kind) {
  if (metadata.find(kModelKey) == nullptr) {
    return NotFound(path + " carries no tokenizer (no \"" + std::string(kModelKey) + "\")");
  }
  std::string model;
  PVLLM_RETURN_IF_ERROR(metadata.get_string(kModelKey, &model));
  if (model == "llama") {
    *kind = GgufVocab::Kind::kSpm;
  } else if (model == "gpt2") {
    *kind = GgufVocab::Kind::kBpe;
  } else if (model == "none" || model == "no") {
    return NotFound(path + " carries no tokenizer (" + kModelKey + " = \"" + model + "\")");
  } else {
    return Unsupported(path + ": " + kModelKey + " = \"" + model +
                       "\" is not a tokenizer this build implements (it reads \"llama\" and "
                       "\"gpt2\")");
  }
  // llama.cpp strips the spaces after Phi-3's special tokens (named by the
  // model's name, not by any tokenizer key): not implemented.
  std::string name;
  if (metadata.find("general.name") != nullptr && metadata.get_string("general.name", &name).ok()) {
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
      return Unsupported(path + ": general.name \"" + name +
                         "\": llama.cpp strips the spaces after Phi-3's special tokens, which "
                         "this build does not implement");
    }
  }
  return Status::Ok();
}

Status read_tokens(const gguf::Metadata& metadata, const std::string& path, GgufVocab* out) {
  PVLLM_RETURN_IF_ERROR(required(metadata.get_string_array(kTokensKey, &out->tokens)));
  if (out->tokens.empty()) return CorruptModel(key_error(path, kTokensKey, "is empty"));
  if (out->tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return CorruptModel(key_error(path, kTokensKey, "holds more tokens than int32 ids reach"));
  }
  std::unordered_set<std::string> seen;
  seen.reserve(out->tokens.size());
  for (size_t id = 0; id < out->tokens.size(); ++id) {
    // llama.cpp's name for an empty token.
    if (out->tokens[id].empty()) out->tokens[id] = "[EMPTY_" + std::to_string(id) + "]";
    if (!seen.insert(out->tokens[id]).second) {
      return CorruptModel(key_error(
          path, kTokensKey,
          "lists \"" + out->tokens[id] + "\" twice (again at index " + std::to_string(id) + ")"));
    }
  }
  return Status::Ok();
}

Status read_scores_and_types(const gguf::Metadata& metadata, const std::string& path,
                             GgufVocab* out) {
  const size_t n = out->tokens.size();
  out->scores.assign(n, 0.0f);
  if (metadata.find(kScoresKey) != nullptr) {
    PVLLM_RETURN_IF_ERROR(metadata.get_f32_array(kScoresKey, &out->scores));
    if (out->scores.size() != n) {
      return CorruptModel(key_error(path, kScoresKey,
                                    "has " + std::to_string(out->scores.size()) + " entries for " +
                                        std::to_string(n) + " tokens"));
    }
  }
  out->types.assign(n, GgufTokenType::kNormal);
  if (metadata.find(kTypesKey) != nullptr) {
    std::vector<int64_t> types;
    PVLLM_RETURN_IF_ERROR(metadata.get_int_array(kTypesKey, &types));
    if (types.size() != n) {
      return CorruptModel(key_error(
          path, kTypesKey,
          "has " + std::to_string(types.size()) + " entries for " + std::to_string(n) + " tokens"));
    }
    for (size_t id = 0; id < n; ++id) {
      if (types[id] < 0 || types[id] > static_cast<int64_t>(GgufTokenType::kByte)) {
        return CorruptModel(
            element_error(path, kTypesKey, id,
                          "is " + std::to_string(types[id]) + ", not a token type (0 to 6)"));
      }
      out->types[id] = static_cast<GgufTokenType>(types[id]);
    }
  }
  for (const std::string& text : forced_control_texts()) {
    const auto it = std::find(out->tokens.begin(), out->tokens.end(), text);
    if (it != out->tokens.end()) out->types[it - out->tokens.begin()] = GgufTokenType::kControl;
  }
  return Status::Ok();
}

Status read_merges(const gguf::Metadata& metadata, const std::string& path, GgufVocab* out) {
  std::vector<std::string> lines;
  PVLLM_RETURN_IF_ERROR(required(metadata.get_string_array(kMergesKey, &lines)));
  out->merges.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    // As llama.cpp splits: at the first space after the first byte.
    const size_t space = lines[i].empty() ? std::string::npos : lines[i].find(' ', 1);
    if (space == std::string::npos) {
      return CorruptModel(element_error(
          path, kMergesKey, i, "(\"" + lines[i] + "\") is not two tokens separated by a space"));
    }
    out->merges.emplace_back(lines[i].substr(0, space), lines[i].substr(space + 1));
  }
  return Status::Ok();
}

// A special token id: absent leaves `*id` (the default); 0xFFFFFFFF (-1 as
// u32, how converters write "none") and -1 leave it too, as llama.cpp
// does; anything else out of range is CORRUPT_MODEL.
Status read_special_id(const gguf::Metadata& metadata, const std::string& path,
                       const std::string& key, int32_t num_tokens, int32_t* id) {
  const gguf::Value* value = metadata.find(key);
  if (value == nullptr) return Status::Ok();
  std::string shown;
  bool in_range = false;
  switch (value->type) {
    case gguf::ValueType::kU8:
    case gguf::ValueType::kU16:
    case gguf::ValueType::kU32:
    case gguf::ValueType::kU64:
      if (value->u == std::numeric_limits<uint32_t>::max()) return Status::Ok();
      in_range = value->u < static_cast<uint64_t>(num_tokens);
      if (in_range) *id = static_cast<int32_t>(value->u);
      shown = std::to_string(value->u);
      break;
    case gguf::ValueType::kI8:
    case gguf::ValueType::kI16:
    case gguf::ValueType::kI32:
    case gguf::ValueType::kI64:
      if (value->i == -1) return Status::Ok();
      in_range = value->i >= 0 && value->i < num_tokens;
      if (in_range) *id = static_cast<int32_t>(value->i);
      shown = std::to_string(value->i);
      break;
    default:
      return CorruptModel(key_error(
          path, key,
          std::string("has type ") + gguf::value_type_name(value->type) + ", not an integer"));
  }
  if (!in_range) {
    return CorruptModel(key_error(
        path, key, "is " + shown + ", not a token id (below " + std::to_string(num_tokens) + ")"));
  }
  return Status::Ok();
}

Status read_flag(const gguf::Metadata& metadata, const std::string& key, bool* flag) {
  if (metadata.find(key) == nullptr) return Status::Ok();
  return metadata.get_bool(key, flag);
}

// llama.cpp's defaults for the kind, before the keys are read.
void set_defaults(GgufVocab* v) {
  const auto in_range = [v](int32_t id) { return id < v->num_tokens() ? id : -1; };
  if (v->kind == GgufVocab::Kind::kSpm) {
    v->bos_id = in_range(1);
    v->eos_id = in_range(2);
    v->unk_id = in_range(0);
    v->add_bos = true;
    v->add_space_prefix = true;
  } else {
    // Yes, 11 for both: llama.cpp's defaults for a "gpt2" vocabulary.
    v->bos_id = in_range(11);
    v->eos_id = in_range(11);
    v->add_bos = v->pre_type.add_bos;
    v->add_space_prefix = false;
  }
  v->add_eos = false;
}

Status read_special_tokens(const gguf::Metadata& metadata, const std::string& path, GgufVocab* v) {
  const int32_t n = v->num_tokens();
  PVLLM_RETURN_IF_ERROR(
      read_special_id(metadata, path, "tokenizer.ggml.bos_token_id", n, &v->bos_id));
  PVLLM_RETURN_IF_ERROR(
      read_special_id(metadata, path, "tokenizer.ggml.eos_token_id", n, &v->eos_id));
  PVLLM_RETURN_IF_ERROR(
      read_special_id(metadata, path, "tokenizer.ggml.eot_token_id", n, &v->eot_id));
  PVLLM_RETURN_IF_ERROR(
      read_special_id(metadata, path, "tokenizer.ggml.unknown_token_id", n, &v->unk_id));
  PVLLM_RETURN_IF_ERROR(
      read_special_id(metadata, path, "tokenizer.ggml.padding_token_id", n, &v->pad_id));
  if (v->eot_id < 0) {
    for (const std::string& text : eot_texts()) {
      const auto it = std::find(v->tokens.begin(), v->tokens.end(), text);
      if (it != v->tokens.end()) {
        v->eot_id = static_cast<int32_t>(it - v->tokens.begin());
        v->types[v->eot_id] = GgufTokenType::kControl;
        break;
      }
    }
  }
  PVLLM_RETURN_IF_ERROR(read_flag(metadata, "tokenizer.ggml.add_bos_token", &v->add_bos));
  PVLLM_RETURN_IF_ERROR(read_flag(metadata, "tokenizer.ggml.add_eos_token", &v->add_eos));
  if (v->kind == GgufVocab::Kind::kSpm) {
    PVLLM_RETURN_IF_ERROR(
        read_flag(metadata, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix));
  }
  if (v->add_bos && v->bos_id < 0) {
    return CorruptModel(path +
                        ": the tokenizer adds a BOS token but has none "
                        "(tokenizer.ggml.bos_token_id)");
  }
  if (v->add_eos && v->eos_id < 0) {
    return CorruptModel(path +
                        ": the tokenizer adds an EOS token but has none "
                        "(tokenizer.ggml.eos_token_id)");
  }
  return Status::Ok();
}

}  // namespace

Status read_gguf_vocab(const gguf::Metadata& metadata, const std::string& path, GgufVocab* out) {
  GgufVocab v;
  PVLLM_RETURN_IF_ERROR(read_model_kind(metadata, path, &v.kind));
  if (v.kind == GgufVocab::Kind::kBpe) {
    if (metadata.find(kPreKey) != nullptr) {
      PVLLM_RETURN_IF_ERROR(metadata.get_string(kPreKey, &v.pre));
    } else {
      log_warning(path + ": no " + kPreKey + "; using llama.cpp's \"default\" pre-tokenizer");
    }
    const Status st = find_gguf_pre_type(v.pre, &v.pre_type);
    if (!st.ok()) return Status(st.code(), path + ": " + st.message());
  }
  PVLLM_RETURN_IF_ERROR(read_tokens(metadata, path, &v));
  PVLLM_RETURN_IF_ERROR(read_scores_and_types(metadata, path, &v));
  if (v.kind == GgufVocab::Kind::kBpe) PVLLM_RETURN_IF_ERROR(read_merges(metadata, path, &v));
  set_defaults(&v);
  PVLLM_RETURN_IF_ERROR(read_special_tokens(metadata, path, &v));
  *out = std::move(v);
  return Status::Ok();
}

}  // namespace pvllm
