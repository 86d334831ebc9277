// Tiny random-weight Llama models in the Hugging Face and llama2.c formats.
// Both writers draw the same weights (in HF layout) from the same seed, so a
// test can load one model from either file.
#include "tests/util/tiny_model.h"

#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
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

int32_t head_dim_of(const TinyModelSpec& s) { return s.hidden_size / s.num_heads; }

// The model's weights in HF names and layout, in checkpoint order. Norm
// weights are centred on 1 so activations keep their scale.
std::vector<NamedArray> make_weights(const TinyModelSpec& s) {
  const int64_t vocab = tiny_tokenizer_vocab_size();
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

json config_json(const TinyModelSpec& s) {
  json rope_scaling = nullptr;
  const RopeScaling& rs = s.rope_scaling;
  if (rs.type == RopeScaling::Type::kLinear) {
    rope_scaling = {{"type", "linear"}, {"factor", rs.factor}};
  } else if (rs.type == RopeScaling::Type::kLlama3) {
    rope_scaling = {{"rope_type", "llama3"},
                    {"factor", rs.factor},
                    {"low_freq_factor", rs.low_freq_factor},
                    {"high_freq_factor", rs.high_freq_factor},
                    {"original_max_position_embeddings", rs.original_max_position_embeddings}};
  }
  const char* torch_dtype = s.dtype == DType::kF32   ? "float32"
                            : s.dtype == DType::kF16 ? "float16"
                                                     : "bfloat16";
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"hidden_size", s.hidden_size},
          {"intermediate_size", s.intermediate_size},
          {"num_hidden_layers", s.num_layers},
          {"num_attention_heads", s.num_heads},
          {"num_key_value_heads", s.num_kv_heads},
          {"head_dim", head_dim_of(s)},
          {"vocab_size", tiny_tokenizer_vocab_size()},
          {"max_position_embeddings", s.max_position_embeddings},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", s.rope_theta},
          {"rope_scaling", rope_scaling},
          {"hidden_act", "silu"},
          {"tie_word_embeddings", s.tie_word_embeddings},
          {"bos_token_id", 1},
          {"eos_token_id", 2},
          {"torch_dtype", torch_dtype}};
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

std::string make_temp_dir(const std::string& prefix) {
  std::string pattern = (fs::temp_directory_path() / (prefix + "XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp failed for " + pattern);
  }
  return pattern;
}

std::string write_tiny_hf_model(const std::string& dir, const TinyModelSpec& spec, int num_shards) {
  const std::vector<NamedArray> weights = make_weights(spec);
  write_text(fs::path(dir) / "config.json", config_json(spec).dump(2));
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
