// ModelConfig checks and the RoPE frequency table every backend shares.
#include "core/model/model_config.h"

#include <algorithm>
#include <cmath>

namespace pvllm {

namespace {

Status bad(const std::string& what) { return InvalidArgument("model config: " + what); }

}  // namespace

Status ModelConfig::validate() const {
  if (hidden_size <= 0) return bad("hidden_size must be positive");
  if (intermediate_size <= 0) return bad("intermediate_size must be positive");
  if (num_layers <= 0) return bad("num_layers must be positive");
  if (num_heads <= 0) return bad("num_heads must be positive");
  if (num_kv_heads <= 0) return bad("num_kv_heads must be positive");
  if (num_heads % num_kv_heads != 0) {
    return bad("num_heads (" + std::to_string(num_heads) + ") is not a multiple of num_kv_heads (" +
               std::to_string(num_kv_heads) + ")");
  }
  // RoPE rotates pairs of dimensions, so a head needs an even size.
  if (head_dim <= 0 || head_dim % 2 != 0) {
    return bad("head_dim must be positive and even, got " + std::to_string(head_dim));
  }
  if (vocab_size <= 0) return bad("vocab_size must be positive");
  if (max_position_embeddings <= 0) return bad("max_position_embeddings must be positive");
  if (!(rms_norm_eps > 0.0f)) return bad("rms_norm_eps must be positive");
  if (!(rope_theta > 0.0f)) return bad("rope_theta must be positive");
  if (rope_scaling.type != RopeScaling::Type::kNone && !(rope_scaling.factor > 0.0f)) {
    return bad("rope_scaling.factor must be positive");
  }
  if (rope_scaling.type == RopeScaling::Type::kDynamic) {
    if (rope_scaling.original_max_position_embeddings <= 0) {
      return bad("rope_scaling.original_max_position_embeddings must be positive");
    }
    if (head_dim <= 2) return bad("dynamic rope scaling needs head_dim > 2");
  }
  if (sliding_window < 0) return bad("sliding_window must be positive (or 0 for none)");
  if (rope_scaling.type == RopeScaling::Type::kLlama3) {
    // The smoothing interpolates between the two; equal factors divide by zero.
    if (!(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor) ||
        !(rope_scaling.low_freq_factor > 0.0f)) {
      return bad("rope_scaling needs 0 < low_freq_factor < high_freq_factor");
    }
    if (rope_scaling.original_max_position_embeddings <= 0) {
      return bad("rope_scaling.original_max_position_embeddings must be positive");
    }
  }
  if (!rope_freq_factors.empty()) {
    if (static_cast<int64_t>(rope_freq_factors.size()) != head_dim / 2) {
      return bad("rope_freq_factors has " + std::to_string(rope_freq_factors.size()) +
                 " values, head_dim / 2 is " + std::to_string(head_dim / 2));
    }
    for (float f : rope_freq_factors) {
      if (!(f > 0.0f) || !std::isfinite(f)) return bad("a rope frequency factor is not positive");
    }
  }
  if (bos_token_id >= vocab_size) return bad("bos_token_id is outside the vocabulary");
  if (eos_token_id >= vocab_size) return bad("eos_token_id is outside the vocabulary");
  for (int32_t id : extra_stop_token_ids) {
    if (id < 0 || id >= vocab_size) return bad("a stop token id is outside the vocabulary");
  }
  return Status::Ok();
}

int64_t max_context_length(const ModelConfig& config) {
  const RopeScaling& s = config.rope_scaling;
  if (s.type == RopeScaling::Type::kLinear || s.type == RopeScaling::Type::kDynamic) {
    return static_cast<int64_t>(std::floor(config.max_position_embeddings * double{s.factor}));
  }
  return config.max_position_embeddings;
}

double weight_flops_per_token(const ModelConfig& c) {
  const double hidden = c.hidden_size;
  const double attn = static_cast<double>(c.num_heads + c.num_kv_heads * 2) * c.head_dim * hidden +
                      static_cast<double>(c.num_heads) * c.head_dim * hidden;
  const double mlp = 3.0 * hidden * c.intermediate_size;
  return 2.0 * (c.num_layers * (attn + mlp) + static_cast<double>(c.vocab_size) * hidden);
}

bool rope_depends_on_length(const ModelConfig& config) {
  return config.rope_scaling.type == RopeScaling::Type::kDynamic;
}

std::vector<float> rope_inv_freq(const ModelConfig& config, int64_t seq_len) {
  const int32_t num_pairs = config.head_dim / 2;
  const RopeScaling& s = config.rope_scaling;
  double base = config.rope_theta;
  if (s.type == RopeScaling::Type::kDynamic) {
    // transformers' _compute_dynamic_ntk_parameters: the base grows once the
    // sequence outgrows the original context, and never shrinks below it.
    const double original = s.original_max_position_embeddings;
    const double len = std::max(static_cast<double>(seq_len), original);
    const double dim = config.head_dim;
    base *= std::pow(s.factor * len / original - (s.factor - 1.0), dim / (dim - 2.0));
  }
  std::vector<float> inv_freq(num_pairs);
  for (int32_t i = 0; i < num_pairs; ++i) {
    // Computed in double and rounded once, so backends share the closest float.
    double f = 1.0 / std::pow(base, 2.0 * i / static_cast<double>(config.head_dim));
    if (s.type == RopeScaling::Type::kLinear) {
      f /= s.factor;
    } else if (s.type == RopeScaling::Type::kLlama3) {
      // transformers' _compute_llama3_parameters: leave high frequencies,
      // divide low frequencies by factor, blend linearly in between.
      const double old_context_len = s.original_max_position_embeddings;
      const double low_freq_wavelen = old_context_len / s.low_freq_factor;
      const double high_freq_wavelen = old_context_len / s.high_freq_factor;
      const double wavelen = 2.0 * M_PI / f;
      if (wavelen > low_freq_wavelen) {
        f /= s.factor;
      } else if (!(wavelen < high_freq_wavelen)) {
        const double smooth = (old_context_len / wavelen - s.low_freq_factor) /
                              (s.high_freq_factor - s.low_freq_factor);
        f = (1.0 - smooth) * f / s.factor + smooth * f;
      }
    }
    if (!config.rope_freq_factors.empty()) f /= config.rope_freq_factors[i];
    inv_freq[i] = static_cast<float>(f);
  }
  return inv_freq;
}

}  // namespace pvllm
