// A GGUF file's metadata into a ModelConfig (gguf_model.h): every key under
// the architecture's prefix honoured, held to its one implemented value, or
// refused by name.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/model/gguf_model.h"

namespace pvllm {

namespace {

struct GgufArch {
  const char* name;
  RopeStyle rope_style;
};

// ggml's rope modes: "normal" (adjacent pairs) for llama, "neox" (halves)
// for the Qwen models.
constexpr GgufArch kArchs[] = {
    {"llama", RopeStyle::kInterleaved},
    {"qwen2", RopeStyle::kRotateHalf},
    {"qwen3", RopeStyle::kRotateHalf},
};

// How pvllm treats a key under the architecture's prefix.
enum class KeyUse {
  kHonoured,  // read into the config below
  kMetadata,  // does not change the math
  kDefault,   // held to the one value pvllm implements (checked below)
};

struct KeyRule {
  const char* suffix;  // after "<arch>."
  KeyUse use;
};

// The same for the three architectures (llama.cpp reads these keys for each).
constexpr KeyRule kKeys[] = {
    {"vocab_size", KeyUse::kHonoured},
    {"context_length", KeyUse::kHonoured},
    {"embedding_length", KeyUse::kHonoured},
    {"block_count", KeyUse::kHonoured},
    {"feed_forward_length", KeyUse::kHonoured},
    {"attention.head_count", KeyUse::kHonoured},
    {"attention.head_count_kv", KeyUse::kHonoured},
    {"attention.key_length", KeyUse::kHonoured},
    {"attention.value_length", KeyUse::kHonoured},
    {"attention.layer_norm_rms_epsilon", KeyUse::kHonoured},
    {"attention.sliding_window", KeyUse::kHonoured},
    {"rope.dimension_count", KeyUse::kHonoured},
    {"rope.freq_base", KeyUse::kHonoured},
    {"rope.scaling.type", KeyUse::kHonoured},
    {"rope.scaling.factor", KeyUse::kHonoured},
    {"rope.scale_linear", KeyUse::kHonoured},
    {"rope.scaling.original_context_length", KeyUse::kHonoured},
    {"rope.scaling.finetuned", KeyUse::kMetadata},
    {"tensor_data_layout", KeyUse::kMetadata},
    {"rope.scaling.attn_factor", KeyUse::kDefault},
    {"expert_count", KeyUse::kDefault},
    {"expert_used_count", KeyUse::kDefault},
    {"expert_shared_count", KeyUse::kDefault},
    {"attention.causal", KeyUse::kDefault},
    {"use_parallel_residual", KeyUse::kDefault},
    {"logit_scale", KeyUse::kDefault},
    {"attn_logit_softcapping", KeyUse::kDefault},
    {"final_logit_softcapping", KeyUse::kDefault},
    {"embedding_scale", KeyUse::kDefault},
    {"residual_scale", KeyUse::kDefault},
    {"attention.scale", KeyUse::kDefault},
    {"attention.clamp_kqv", KeyUse::kDefault},
    {"attention.max_alibi_bias", KeyUse::kDefault},
    {"pooling_type", KeyUse::kDefault},
};

const KeyRule* find_rule(const std::string& suffix) {
  for (const KeyRule& r : kKeys) {
    if (suffix == r.suffix) return &r;
  }
  return nullptr;
}

// The key's value as a number, whatever its numeric type; false for a
// string, bool or array.
bool as_number(const gguf::Value& v, double* out) {
  using VT = gguf::ValueType;
  switch (v.type) {
    case VT::kU8:
    case VT::kU16:
    case VT::kU32:
    case VT::kU64:
      *out = static_cast<double>(v.u);
      return true;
    case VT::kI8:
    case VT::kI16:
    case VT::kI32:
    case VT::kI64:
      *out = static_cast<double>(v.i);
      return true;
    case VT::kF32:
    case VT::kF64:
      *out = v.f;
      return true;
    default:
      return false;
  }
}

std::string value_text(const gguf::Value& v) {
  double d = 0;
  if (as_number(v, &d)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", d);
    return buf;
  }
  if (v.type == gguf::ValueType::kBool) return v.u ? "true" : "false";
  if (v.type == gguf::ValueType::kString) return "\"" + v.string + "\"";
  if (v.type == gguf::ValueType::kArray) {
    return "an array of " + std::to_string(v.array.size) + " " +
           gguf::value_type_name(v.array.type);
  }
  return gguf::value_type_name(v.type);
}

class ConfigReader {
 public:
  ConfigReader(const gguf::File& file, std::string arch)
      : md_(file.metadata()), path_(file.parts.front().path), arch_(std::move(arch)) {}

  std::string key(const char* suffix) const { return arch_ + "." + suffix; }

  Status unsupported(const std::string& k, const gguf::Value& v, const std::string& why) const {
    return Unsupported(path_ + ": metadata key " + k + " = " + value_text(v) + " is not supported" +
                       " for architecture " + arch_ + why);
  }

  // A count: any integer type, >= 1 (and within int32). NOT_FOUND-free:
  // `required` decides whether absence is an error.
  Status count(const char* suffix, bool required, int32_t* out) const {
    const std::string k = key(suffix);
    const gguf::Value* v = md_.find(k);
    if (v == nullptr) {
      if (!required) return Status::Ok();
      return CorruptModel(path_ + ": metadata key " + k + " is missing (architecture " + arch_ +
                          " needs it)");
    }
    if (v->type == gguf::ValueType::kArray) {
      return unsupported(k, *v, " (one value for every layer; per-layer values are not)");
    }
    uint64_t u = 0;
    PVLLM_RETURN_IF_ERROR(md_.get_uint(k, &u));
    if (u < 1 || u > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
      return CorruptModel(path_ + ": metadata key " + k + " = " + std::to_string(u) +
                          " is not a count from 1 to 2^31 - 1");
    }
    *out = static_cast<int32_t>(u);
    return Status::Ok();
  }

  // A positive finite float of any float type.
  Status positive(const char* suffix, bool required, float* out) const {
    const std::string k = key(suffix);
    const gguf::Value* v = md_.find(k);
    if (v == nullptr) {
      if (!required) return Status::Ok();
      return CorruptModel(path_ + ": metadata key " + k + " is missing (architecture " + arch_ +
                          " needs it)");
    }
    double d = 0;
    if (!as_number(*v, &d) || !(d > 0) || !std::isfinite(d) ||
        d > std::numeric_limits<float>::max()) {
      return CorruptModel(path_ + ": metadata key " + k + " = " + value_text(*v) +
                          " is not a positive number");
    }
    *out = static_cast<float>(d);
    return Status::Ok();
  }

  // Keys held to one value: absent, or equal to it.
  Status check_default(const std::string& suffix, const gguf::Value& v) const {
    const std::string k = key(suffix.c_str());
    double d = 0;
    const bool number = as_number(v, &d);
    if (suffix == "rope.scaling.attn_factor") {
      if (number && d == 1.0) return Status::Ok();
      return unsupported(k, v, " (only 1: attention logits are not rescaled)");
    }
    if (suffix == "attention.causal") {
      if (v.type == gguf::ValueType::kBool && v.u == 1) return Status::Ok();
      return unsupported(k, v, " (only true: a causal decoder)");
    }
    if (suffix == "use_parallel_residual") {
      if (v.type == gguf::ValueType::kBool && v.u == 0) return Status::Ok();
      return unsupported(k, v, " (only false: attention and MLP in sequence)");
    }
    if (suffix == "logit_scale" || suffix == "embedding_scale" || suffix == "residual_scale") {
      if (number && d == 1.0) return Status::Ok();
      return unsupported(k, v, " (only 1)");
    }
    if (suffix == "attention.scale") {
      return unsupported(k, v, " (attention is scaled by 1/sqrt(head dim))");
    }
    // Counts and caps whose only implemented value is 0 (none): experts,
    // soft-capping, kqv clamping, ALiBi, pooling.
    if (number && d == 0.0) return Status::Ok();
    if (suffix.rfind("expert", 0) == 0) {
      return unsupported(k, v, " (a mixture of experts; pvllm serves dense models)");
    }
    return unsupported(k, v, " (only 0: none)");
  }

  const gguf::Metadata& md_;
  std::string path_;
  std::string arch_;
};

Status read_rope(const ConfigReader& r, ModelConfig* c) {
  const gguf::Metadata& md = r.md_;
  PVLLM_RETURN_IF_ERROR(r.positive("rope.freq_base", false, &c->rope_theta));
  int32_t rope_dims = c->head_dim;
  PVLLM_RETURN_IF_ERROR(r.count("rope.dimension_count", false, &rope_dims));
  if (rope_dims != c->head_dim) {
    return r.unsupported(r.key("rope.dimension_count"), *md.find(r.key("rope.dimension_count")),
                         " (only the head dimension, " + std::to_string(c->head_dim) +
                             ": RoPE over the whole head)");
  }
  std::string type = "none";
  const std::string type_key = r.key("rope.scaling.type");
  if (md.find(type_key) != nullptr) PVLLM_RETURN_IF_ERROR(md.get_string(type_key, &type));
  float factor = 1.0f;
  PVLLM_RETURN_IF_ERROR(r.positive("rope.scaling.factor", false, &factor));
  float linear = 1.0f;  // the older key for linear scaling
  PVLLM_RETURN_IF_ERROR(r.positive("rope.scale_linear", false, &linear));
  if (type == "none") {
    // llama.cpp reads a factor only with a scaling type; scale_linear alone
    // is the older files' linear scaling.
    if (linear != 1.0f) {
      c->rope_scaling.type = RopeScaling::Type::kLinear;
      c->rope_scaling.factor = linear;
    }
  } else if (type == "linear") {
    c->rope_scaling.type = factor == 1.0f ? RopeScaling::Type::kNone : RopeScaling::Type::kLinear;
    c->rope_scaling.factor = factor;
  } else {
    return r.unsupported(type_key, *md.find(type_key), " (supported: none, linear)");
  }
  int32_t original = 0;
  PVLLM_RETURN_IF_ERROR(r.count("rope.scaling.original_context_length", false, &original));
  if (original > 0) c->rope_scaling.original_max_position_embeddings = original;
  return Status::Ok();
}

Status read_token_ids(const gguf::Metadata& md, ModelConfig* c) {
  // llama.cpp's defaults for a "llama" vocabulary; overridden by the keys.
  auto id = [&](const char* k, int32_t* out) -> Status {
    if (md.find(k) == nullptr) return Status::Ok();
    uint64_t u = 0;
    PVLLM_RETURN_IF_ERROR(md.get_uint(k, &u));
    // gguf-py writes 2^32 - 1 for "none".
    *out = u > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()) ? -1
                                                                          : static_cast<int32_t>(u);
    return Status::Ok();
  };
  PVLLM_RETURN_IF_ERROR(id("tokenizer.ggml.bos_token_id", &c->bos_token_id));
  PVLLM_RETURN_IF_ERROR(id("tokenizer.ggml.eos_token_id", &c->eos_token_id));
  auto add_stop = [&](int32_t extra) {
    if (extra >= 0 && extra != c->eos_token_id &&
        std::find(c->extra_stop_token_ids.begin(), c->extra_stop_token_ids.end(), extra) ==
            c->extra_stop_token_ids.end()) {
      c->extra_stop_token_ids.push_back(extra);
    }
  };
  for (const char* k : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    int32_t extra = -1;
    PVLLM_RETURN_IF_ERROR(id(k, &extra));
    add_stop(extra);
  }
  // Generation also ends at the tokens llama.cpp ends it at by their text
  // (end of turn, end of message), whatever the keys say.
  if (const gguf::Value* tokens = md.find("tokenizer.ggml.tokens");
      tokens != nullptr && tokens->type == gguf::ValueType::kArray &&
      tokens->array.type == gguf::ValueType::kString) {
    const auto& texts = tokens->array.strings;
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string& t = texts[i];
      if (t == "<|eot_id|>" || t == "<|im_end|>" || t == "<|end|>" || t == "<end_of_turn>" ||
          t == "<|endoftext|>" || t == "<|eom_id|>" || t == "<EOT>") {
        add_stop(static_cast<int32_t>(i));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

const char* gguf_served_architectures() { return "llama, qwen2, qwen3"; }

bool dtype_of_ggml(ggml::Type type, DType* out) {
  using T = ggml::Type;
  switch (type) {
    case T::kF32:
      *out = DType::kF32;
      return true;
    case T::kF16:
      *out = DType::kF16;
      return true;
    case T::kBF16:
      *out = DType::kBF16;
      return true;
    case T::kQ8_0:
      *out = DType::kQ8_0;
      return true;
    case T::kQ4_0:
      *out = DType::kQ4_0;
      return true;
    case T::kQ4_1:
      *out = DType::kQ4_1;
      return true;
    case T::kQ5_0:
      *out = DType::kQ5_0;
      return true;
    case T::kQ5_1:
      *out = DType::kQ5_1;
      return true;
    case T::kQ2_K:
      *out = DType::kQ2_K;
      return true;
    case T::kQ3_K:
      *out = DType::kQ3_K;
      return true;
    case T::kQ4_K:
      *out = DType::kQ4_K;
      return true;
    case T::kQ5_K:
      *out = DType::kQ5_K;
      return true;
    case T::kQ6_K:
      *out = DType::kQ6_K;
      return true;
    case T::kIQ4_NL:
      *out = DType::kIQ4_NL;
      return true;
    case T::kIQ4_XS:
      *out = DType::kIQ4_XS;
      return true;
    default:
      return false;
  }
}

Status gguf_model_config(const gguf::File& file, ModelConfig* out) {
  const gguf::Metadata& md = file.metadata();
  const std::string& path = file.parts.front().path;
  std::string arch_name;
  if (md.find("general.architecture") == nullptr) {
    return CorruptModel(path + ": metadata key general.architecture is missing");
  }
  PVLLM_RETURN_IF_ERROR(md.get_string("general.architecture", &arch_name));
  const GgufArch* arch = nullptr;
  for (const GgufArch& a : kArchs) {
    if (arch_name == a.name) arch = &a;
  }
  if (arch == nullptr) {
    return Unsupported(path + ": general.architecture is \"" + arch_name +
                       "\"; pvllm serves GGUF architectures " + gguf_served_architectures());
  }
  if (const gguf::Value* type = md.find("general.type");
      type != nullptr && !(type->type == gguf::ValueType::kString && type->string == "model")) {
    return Unsupported(path + ": general.type is " + value_text(*type) +
                       "; pvllm serves models (not adapters or other GGUF contents)");
  }
  ConfigReader r(file, arch_name);
  // Every key under the prefix, classified first: one pvllm does not know
  // is refused before anything is read.
  const std::string prefix = arch_name + ".";
  for (const gguf::KeyValue& kv : md.entries()) {
    if (kv.key.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string suffix = kv.key.substr(prefix.size());
    const KeyRule* rule = find_rule(suffix);
    if (rule == nullptr) {
      return Unsupported(path + ": metadata key " + kv.key + " (" + value_text(kv.value) +
                         ") is not one pvllm implements for architecture " + arch_name +
                         "; it may change the model's math");
    }
    if (rule->use == KeyUse::kDefault) PVLLM_RETURN_IF_ERROR(r.check_default(suffix, kv.value));
  }

  ModelConfig c;
  c.architecture = arch_name;
  c.rope_style = arch->rope_style;
  c.qk_norm = arch_name == "qwen3";
  c.qkv_bias = arch_name == "qwen2";
  PVLLM_RETURN_IF_ERROR(r.count("embedding_length", true, &c.hidden_size));
  PVLLM_RETURN_IF_ERROR(r.count("feed_forward_length", true, &c.intermediate_size));
  PVLLM_RETURN_IF_ERROR(r.count("block_count", true, &c.num_layers));
  PVLLM_RETURN_IF_ERROR(r.count("context_length", true, &c.max_position_embeddings));
  PVLLM_RETURN_IF_ERROR(r.count("attention.head_count", true, &c.num_heads));
  c.num_kv_heads = c.num_heads;
  PVLLM_RETURN_IF_ERROR(r.count("attention.head_count_kv", false, &c.num_kv_heads));
  if (c.hidden_size % c.num_heads == 0) c.head_dim = c.hidden_size / c.num_heads;
  PVLLM_RETURN_IF_ERROR(r.count("attention.key_length", c.head_dim == 0, &c.head_dim));
  int32_t value_length = c.head_dim;
  PVLLM_RETURN_IF_ERROR(r.count("attention.value_length", false, &value_length));
  if (value_length != c.head_dim) {
    return r.unsupported(r.key("attention.value_length"), *md.find(r.key("attention.value_length")),
                         " (only the key length, " + std::to_string(c.head_dim) + ")");
  }
  PVLLM_RETURN_IF_ERROR(r.positive("attention.layer_norm_rms_epsilon", true, &c.rms_norm_eps));
  PVLLM_RETURN_IF_ERROR(r.count("attention.sliding_window", false, &c.sliding_window));
  PVLLM_RETURN_IF_ERROR(read_rope(r, &c));
  PVLLM_RETURN_IF_ERROR(r.count("vocab_size", false, &c.vocab_size));
  if (c.vocab_size == 0) {
    if (const gguf::Value* tokens = md.find("tokenizer.ggml.tokens");
        tokens != nullptr && tokens->type == gguf::ValueType::kArray &&
        tokens->array.size <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
      c.vocab_size = static_cast<int32_t>(tokens->array.size);
    }
  }
  PVLLM_RETURN_IF_ERROR(read_token_ids(md, &c));
  *out = std::move(c);
  return Status::Ok();
}

}  // namespace pvllm
