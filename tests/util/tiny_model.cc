// Tiny random-weight Llama models in the Hugging Face and llama2.c formats.
// Both writers draw the same weights (in HF layout) from the same seed, so a
// test can load one model from either file.
#include "tests/util/tiny_model.h"

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

namespace pvllm::testing {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct NamedArray {
  std::string name;  // the Hugging Face tensor name
  std::vector<int64_t> shape;
  std::vector<float> values;  // row-major, f32
};

// Deterministic on every platform (std::normal_distribution is not).
class Normal {
 public:
  explicit Normal(uint64_t seed) : rng_(seed) {}
  float next(float mean, float std) {
    const double u1 = ((rng_() >> 11) + 1) * 0x1.0p-53;  // (0, 1]
    const double u2 = (rng_() >> 11) * 0x1.0p-53;        // [0, 1)
    return static_cast<float>(mean +
                              std * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
  }

 private:
  std::mt19937_64 rng_;
};

int32_t head_dim_of(const TinyModelSpec& s) { return tiny_head_dim(s); }

bool has_qkv_bias(const TinyModelSpec& s) { return s.arch == "qwen2" || s.attention_bias; }
bool has_qk_norm(const TinyModelSpec& s) { return s.arch == "qwen3"; }

// The model's weights in HF names and layout, in checkpoint order. Norm
// weights are centred on 1 so activations keep their scale.
std::vector<NamedArray> make_weights(const TinyModelSpec& s) {
  const int64_t vocab = tiny_vocab_size(s);
  const int64_t hidden = s.hidden_size;
  const int64_t inter = s.intermediate_size;
  const int64_t q_rows = int64_t{s.num_heads} * head_dim_of(s);
  const int64_t kv_rows = int64_t{s.num_kv_heads} * head_dim_of(s);
  Normal normal(s.seed);
  std::vector<NamedArray> out;
  auto add = [&](std::string name, std::vector<int64_t> shape, float mean) {
    NamedArray a{std::move(name), std::move(shape), {}};
    int64_t n = 1;
    for (int64_t d : a.shape) n *= d;
    a.values.resize(n);
    for (float& v : a.values) v = normal.next(mean, 0.2f);
    out.push_back(std::move(a));
  };
  add("model.embed_tokens.weight", {vocab, hidden}, 0.0f);
  for (int32_t i = 0; i < s.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", {hidden}, 1.0f);
    add(p + "self_attn.q_proj.weight", {q_rows, hidden}, 0.0f);
    add(p + "self_attn.k_proj.weight", {kv_rows, hidden}, 0.0f);
    add(p + "self_attn.v_proj.weight", {kv_rows, hidden}, 0.0f);
    add(p + "self_attn.o_proj.weight", {hidden, q_rows}, 0.0f);
    add(p + "post_attention_layernorm.weight", {hidden}, 1.0f);
    add(p + "mlp.gate_proj.weight", {inter, hidden}, 0.0f);
    add(p + "mlp.up_proj.weight", {inter, hidden}, 0.0f);
    add(p + "mlp.down_proj.weight", {hidden, inter}, 0.0f);
  }
  // The optional tensors come after every Llama tensor, so a variant that
  // adds them keeps the weights of the plain model of the same seed.
  for (int32_t i = 0; i < s.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".self_attn.";
    if (has_qkv_bias(s)) {
      add(p + "q_proj.bias", {q_rows}, 0.0f);
      add(p + "k_proj.bias", {kv_rows}, 0.0f);
      add(p + "v_proj.bias", {kv_rows}, 0.0f);
    }
    if (s.attention_bias) add(p + "o_proj.bias", {hidden}, 0.0f);
    if (has_qk_norm(s)) {
      add(p + "q_norm.weight", {head_dim_of(s)}, 1.0f);
      add(p + "k_norm.weight", {head_dim_of(s)}, 1.0f);
    }
  }
  add("model.norm.weight", {hidden}, 1.0f);
  // Drawn last, so tied and untied models share every other weight.
  if (!s.tie_word_embeddings) add("lm_head.weight", {vocab, hidden}, 0.0f);
  return out;
}

const NamedArray& find(const std::vector<NamedArray>& arrays, const std::string& name) {
  for (const NamedArray& a : arrays) {
    if (a.name == name) return a;
  }
  throw std::runtime_error("tiny model has no tensor " + name);
}

void write_file(const fs::path& path, const void* data, size_t size) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!f) throw std::runtime_error("cannot write " + path.string());
}

void write_text(const fs::path& path, const std::string& text) {
  write_file(path, text.data(), text.size());
}

std::vector<unsigned char> encode(const std::vector<float>& values, DType dtype) {
  std::vector<unsigned char> bytes(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(&bytes[i * 4], &values[i], 4);
    } else {
      const uint16_t h = dtype == DType::kF16 ? float_to_fp16(values[i]) : float_to_bf16(values[i]);
      std::memcpy(&bytes[i * 2], &h, 2);
    }
  }
  return bytes;
}

// One safetensors file: header padded with spaces to 8 bytes, then the
// tensors' bytes in the given order.
uint64_t write_safetensors(const fs::path& path, const std::vector<const NamedArray*>& arrays,
                           DType dtype) {
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::string data;
  for (const NamedArray* a : arrays) {
    const std::vector<unsigned char> bytes = encode(a->values, dtype);
    header[a->name] = {{"dtype", dtype_name(dtype)},
                       {"shape", a->shape},
                       {"data_offsets", {data.size(), data.size() + bytes.size()}}};
    data.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  const uint64_t len = text.size();
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  file += text;
  file += data;
  write_file(path, file.data(), file.size());
  return data.size();
}

// RoPE scaling as transformers writes it ("rope_type" and its keys); null
// for none.
json rope_scaling_json(const RopeScaling& rs) {
  switch (rs.type) {
    case RopeScaling::Type::kNone:
      return nullptr;
    case RopeScaling::Type::kLinear:
      return {{"rope_type", "linear"}, {"factor", rs.factor}};
    case RopeScaling::Type::kDynamic:
      return {{"rope_type", "dynamic"}, {"factor", rs.factor}};
    case RopeScaling::Type::kLlama3:
      return {{"rope_type", "llama3"},
              {"factor", rs.factor},
              {"low_freq_factor", rs.low_freq_factor},
              {"high_freq_factor", rs.high_freq_factor},
              {"original_max_position_embeddings", rs.original_max_position_embeddings}};
  }
  return nullptr;
}

json id_or_list(const std::vector<int32_t>& ids) {
  if (ids.size() == 1) return ids[0];
  return ids;
}

json config_json(const TinyModelSpec& s) {
  const char* torch_dtype = s.dtype == DType::kF32   ? "float32"
                            : s.dtype == DType::kF16 ? "float16"
                                                     : "bfloat16";
  const char* class_name = s.arch == "mistral" ? "MistralForCausalLM"
                           : s.arch == "qwen2" ? "Qwen2ForCausalLM"
                           : s.arch == "qwen3" ? "Qwen3ForCausalLM"
                                               : "LlamaForCausalLM";
  json c = {{"architectures", {class_name}},
            {"model_type", s.arch},
            {"hidden_size", s.hidden_size},
            {"intermediate_size", s.intermediate_size},
            {"num_hidden_layers", s.num_layers},
            {"num_attention_heads", s.num_heads},
            {"num_key_value_heads", s.num_kv_heads},
            {"head_dim", head_dim_of(s)},
            {"vocab_size", tiny_vocab_size(s)},
            {"max_position_embeddings", s.max_position_embeddings},
            {"rms_norm_eps", 1e-5},
            {"hidden_act", "silu"},
            {"tie_word_embeddings", s.tie_word_embeddings},
            {"bos_token_id", 1},
            {"eos_token_id", id_or_list(s.eos_ids)},
            {"initializer_range", 0.02},
            {"use_cache", true},
            {"attention_dropout", 0.0}};
  if (s.v5_config) {
    json rope = rope_scaling_json(s.rope_scaling);
    if (rope.is_null()) rope = {{"rope_type", "default"}};
    rope["rope_theta"] = s.rope_theta;
    c["rope_parameters"] = rope;
    c["dtype"] = torch_dtype;
  } else {
    c["rope_theta"] = s.rope_theta;
    c["rope_scaling"] = rope_scaling_json(s.rope_scaling);
    c["torch_dtype"] = torch_dtype;
  }
  if (s.arch == "llama") {
    c["attention_bias"] = s.attention_bias;
    c["mlp_bias"] = false;
    c["pretraining_tp"] = 1;
  } else if (s.arch == "mistral") {
    c["sliding_window"] = s.sliding_window > 0 ? json(s.sliding_window) : json(nullptr);
  } else {  // qwen2, qwen3: a window that is off, as their releases ship it
    if (s.arch == "qwen3") c["attention_bias"] = s.attention_bias;
    c["use_sliding_window"] = false;
    c["sliding_window"] = 4096;
    c["max_window_layers"] = s.num_layers;
  }
  return c;
}

void copy_tokenizer(const fs::path& dir) {
  fs::copy_file(tiny_tokenizer_path(), dir / "tokenizer.model",
                fs::copy_options::overwrite_existing);
}

// HF q/k rows pair (j, j + hd/2) within a head; llama2.c rows pair (2j, 2j+1):
// llama2.c row h*hd + 2*j + t holds HF row h*hd + t*(hd/2) + j.
std::vector<float> hf_to_interleaved(const NamedArray& a, int32_t head_dim) {
  const int64_t cols = a.shape[1];
  const int64_t num_heads = a.shape[0] / head_dim;
  std::vector<float> out(a.values.size());
  for (int64_t h = 0; h < num_heads; ++h) {
    for (int64_t j = 0; j < head_dim / 2; ++j) {
      for (int64_t t = 0; t < 2; ++t) {
        const int64_t dst = h * head_dim + 2 * j + t;
        const int64_t src = h * head_dim + t * (head_dim / 2) + j;
        std::memcpy(&out[dst * cols], &a.values[src * cols], cols * sizeof(float));
      }
    }
  }
  return out;
}

}  // namespace

void edit_hf_config(const std::string& dir, const json& set) {
  json c = json::parse(std::ifstream(dir + "/config.json"));
  for (const auto& [key, value] : set.items()) {
    if (value.is_null()) {
      c.erase(key);
    } else {
      c[key] = value;
    }
  }
  write_text(fs::path(dir) / "config.json", c.dump(2));
}

int32_t tiny_vocab_size(const TinyModelSpec& s) {
  return s.vocab_size > 0 ? s.vocab_size : tiny_tokenizer_vocab_size();
}

int32_t tiny_head_dim(const TinyModelSpec& s) {
  return s.head_dim > 0 ? s.head_dim : s.hidden_size / s.num_heads;
}

const std::vector<std::string>& tiny_arch_names() {
  static const std::vector<std::string> names = {"llama2",       "llama3",        "llama3-v5",
                                                 "llama-linear", "llama-dynamic", "llama-bias",
                                                 "mistral",      "qwen2",         "qwen3"};
  return names;
}

TinyModelSpec tiny_arch_spec(const std::string& name) {
  TinyModelSpec s;
  s.hidden_size = 32;
  s.intermediate_size = 48;
  s.num_layers = 2;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.max_position_embeddings = 256;
  s.tie_word_embeddings = false;
  const auto& names = tiny_arch_names();
  // Different weights per variant (by its place in the list).
  s.seed =
      1000 + static_cast<uint64_t>(std::find(names.begin(), names.end(), name) - names.begin());
  if (name == "llama2") {
    s.num_kv_heads = 4;
  } else if (name == "llama3" || name == "llama3-v5") {
    s.seed = 1003;  // the same model in both spellings
    s.rope_theta = 500000.0f;
    s.rope_scaling.type = RopeScaling::Type::kLlama3;
    s.rope_scaling.factor = 8.0f;
    s.rope_scaling.low_freq_factor = 1.0f;
    s.rope_scaling.high_freq_factor = 4.0f;
    s.rope_scaling.original_max_position_embeddings = 32;
    s.eos_ids = {2, 5};
    s.generation_eos_ids = {2, 5, 7};
    s.v5_config = name == "llama3-v5";
  } else if (name == "llama-linear") {
    s.rope_scaling.type = RopeScaling::Type::kLinear;
    s.rope_scaling.factor = 4.0f;
  } else if (name == "llama-dynamic") {
    s.max_position_embeddings = 16;
    s.rope_scaling.type = RopeScaling::Type::kDynamic;
    s.rope_scaling.factor = 2.0f;
    s.rope_scaling.original_max_position_embeddings = 16;
  } else if (name == "llama-bias") {
    s.attention_bias = true;
  } else if (name == "mistral") {
    s.arch = "mistral";
    s.sliding_window = 8;
  } else if (name == "qwen2") {
    s.arch = "qwen2";
    s.tie_word_embeddings = true;
    s.rope_theta = 1000000.0f;
  } else if (name == "qwen3") {
    s.arch = "qwen3";
    s.head_dim = 16;  // 4 heads of 16 over a hidden size of 32
    s.tie_word_embeddings = true;
    s.rope_theta = 1000000.0f;
  } else {
    throw std::invalid_argument("no tiny model named " + name);
  }
  return s;
}

namespace {

// The folders make_temp_dir made in this process, removed when it exits
// (normally: a test that crashes leaves its folder for inspection).
class TempDirs {
 public:
  void add(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mu_);
    dirs_.push_back(dir);
  }
  ~TempDirs() {
    for (const std::string& dir : dirs_) {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  }

 private:
  std::mutex mu_;
  std::vector<std::string> dirs_;
};

TempDirs& temp_dirs() {
  static TempDirs dirs;
  return dirs;
}

}  // namespace

std::string make_temp_dir(const std::string& prefix) {
  std::string pattern = (fs::temp_directory_path() / (prefix + "XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp failed for " + pattern);
  }
  temp_dirs().add(pattern);
  return pattern;
}

std::string write_tiny_hf_model(const std::string& dir, const TinyModelSpec& spec, int num_shards) {
  const std::vector<NamedArray> weights = make_weights(spec);
  write_text(fs::path(dir) / "config.json", config_json(spec).dump(2));
  if (!spec.generation_eos_ids.empty()) {
    const json gen = {{"bos_token_id", 1},
                      {"eos_token_id", id_or_list(spec.generation_eos_ids)},
                      {"do_sample", false}};
    write_text(fs::path(dir) / "generation_config.json", gen.dump(2));
  }
  copy_tokenizer(dir);
  if (num_shards <= 1) {
    std::vector<const NamedArray*> all;
    for (const NamedArray& a : weights) all.push_back(&a);
    write_safetensors(fs::path(dir) / "model.safetensors", all, spec.dtype);
    return dir;
  }
  // Contiguous runs of tensors per shard, named as transformers names them.
  json weight_map = json::object();
  uint64_t total_size = 0;
  for (int k = 0; k < num_shards; ++k) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", k + 1, num_shards);
    std::vector<const NamedArray*> shard;
    for (size_t i = 0; i < weights.size(); ++i) {
      if (static_cast<int>(i * num_shards / weights.size()) != k) continue;
      shard.push_back(&weights[i]);
      weight_map[weights[i].name] = name;
    }
    total_size += write_safetensors(fs::path(dir) / name, shard, spec.dtype);
  }
  const json index = {{"metadata", {{"total_size", total_size}}}, {"weight_map", weight_map}};
  write_text(fs::path(dir) / "model.safetensors.index.json", index.dump(2));
  return dir;
}

std::string write_tiny_llama2c_model(const std::string& dir, const TinyModelSpec& spec) {
  if (spec.arch != "llama" || spec.attention_bias ||
      tiny_head_dim(spec) * spec.num_heads != spec.hidden_size) {
    throw std::invalid_argument("a llama2.c checkpoint holds only a plain Llama model");
  }
  const std::vector<NamedArray> weights = make_weights(spec);
  const int32_t hd = head_dim_of(spec);
  const int32_t vocab = tiny_tokenizer_vocab_size();
  // A negative vocab size tells llama2.c the classifier follows the weights.
  const int32_t header[7] = {spec.hidden_size,
                             spec.intermediate_size,
                             spec.num_layers,
                             spec.num_heads,
                             spec.num_kv_heads,
                             spec.tie_word_embeddings ? vocab : -vocab,
                             spec.max_position_embeddings};
  std::vector<float> body;
  auto put = [&](const std::vector<float>& v) { body.insert(body.end(), v.begin(), v.end()); };
  auto put_layers = [&](const std::string& suffix, bool permute) {
    for (int32_t i = 0; i < spec.num_layers; ++i) {
      const NamedArray& a = find(weights, "model.layers." + std::to_string(i) + "." + suffix);
      put(permute ? hf_to_interleaved(a, hd) : a.values);
    }
  };
  put(find(weights, "model.embed_tokens.weight").values);
  put_layers("input_layernorm.weight", false);
  put_layers("self_attn.q_proj.weight", true);
  put_layers("self_attn.k_proj.weight", true);
  put_layers("self_attn.v_proj.weight", false);
  put_layers("self_attn.o_proj.weight", false);
  put_layers("post_attention_layernorm.weight", false);
  put_layers("mlp.gate_proj.weight", false);  // w1
  put_layers("mlp.down_proj.weight", false);  // w2
  put_layers("mlp.up_proj.weight", false);    // w3
  put(find(weights, "model.norm.weight").values);
  // The legacy export's precomputed RoPE table: [seq_len, hd/2] cos, then sin.
  for (int pass = 0; pass < 2; ++pass) {
    for (int32_t pos = 0; pos < spec.max_position_embeddings; ++pos) {
      for (int32_t i = 0; i < hd / 2; ++i) {
        const double angle = pos / std::pow(static_cast<double>(spec.rope_theta), 2.0 * i / hd);
        body.push_back(static_cast<float>(pass == 0 ? std::cos(angle) : std::sin(angle)));
      }
    }
  }
  if (!spec.tie_word_embeddings) put(find(weights, "lm_head.weight").values);

  std::string file(reinterpret_cast<const char*>(header), sizeof(header));
  file.append(reinterpret_cast<const char*>(body.data()), body.size() * sizeof(float));
  const fs::path bin = fs::path(dir) / "model.bin";
  write_file(bin, file.data(), file.size());
  copy_tokenizer(dir);
  return bin.string();
}

}  // namespace pvllm::testing
