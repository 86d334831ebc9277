#include "tests/util/dense_reference.h"

#include <algorithm>
#include <cmath>

namespace pvllm::testing {

namespace {

double at(const Tensor& t, int64_t i) { return load_as_float(t.dtype, t.data, i); }

// y = W x (+ b), W [out, in].
std::vector<double> linear(const std::vector<double>& x, const Tensor& w, const Tensor& b) {
  const int64_t out = w.shape[0], in = w.shape[1];
  std::vector<double> y(out, 0.0);
  for (int64_t o = 0; o < out; ++o) {
    double acc = 0.0;
    for (int64_t i = 0; i < in; ++i) acc += at(w, o * in + i) * x[i];
    y[o] = acc + (b.empty() ? 0.0 : at(b, o));
  }
  return y;
}

// RMSNorm of each `dim`-sized piece of x with weight g [dim].
void rmsnorm(std::vector<double>* x, const Tensor& g, int64_t dim, double eps) {
  for (size_t r = 0; r < x->size() / dim; ++r) {
    double* v = x->data() + r * dim;
    double ss = 0.0;
    for (int64_t i = 0; i < dim; ++i) ss += v[i] * v[i];
    const double inv = 1.0 / std::sqrt(ss / dim + eps);
    for (int64_t i = 0; i < dim; ++i) v[i] = v[i] * inv * at(g, i);
  }
}

}  // namespace

DenseReference::DenseReference(const Model& model)
    : m_(model), k_(model.config.num_layers), v_(model.config.num_layers) {}

// transformers' modeling_rope_utils, computed here in double.
std::vector<double> DenseReference::inv_freq(int64_t seq_len) const {
  const ModelConfig& c = m_.config;
  const RopeScaling& s = c.rope_scaling;
  const double dim = c.head_dim;
  double base = c.rope_theta;
  if (s.type == RopeScaling::Type::kDynamic && seq_len > s.original_max_position_embeddings) {
    const double orig = s.original_max_position_embeddings;
    base *= std::pow(s.factor * seq_len / orig - (s.factor - 1.0), dim / (dim - 2.0));
  }
  std::vector<double> f(c.head_dim / 2);
  for (size_t i = 0; i < f.size(); ++i) {
    f[i] = 1.0 / std::pow(base, 2.0 * i / dim);
    if (s.type == RopeScaling::Type::kLinear) f[i] /= s.factor;
    if (s.type == RopeScaling::Type::kLlama3) {
      const double orig = s.original_max_position_embeddings;
      const double wavelen = 2.0 * M_PI / f[i];
      if (wavelen > orig / s.low_freq_factor) {
        f[i] /= s.factor;
      } else if (wavelen >= orig / s.high_freq_factor) {
        const double smooth =
            (orig / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f[i] = (1.0 - smooth) * f[i] / s.factor + smooth * f[i];
      }
    }
  }
  return f;
}

std::vector<double> DenseReference::step(const std::vector<int32_t>& ids) {
  const ModelConfig& c = m_.config;
  const int64_t n = ids.size(), h = c.hidden_size, hd = c.head_dim, half = hd / 2;
  const int64_t nh = c.num_heads, nkv = c.num_kv_heads;
  const int32_t start = length_;
  // The rotation of this step's rows: the frequencies for the length the
  // sequence reaches in this step (only dynamic scaling depends on it).
  const std::vector<double> freq = inv_freq(start + n);
  auto rope = [&](std::vector<double>* x, int64_t heads, int64_t pos) {
    for (int64_t hh = 0; hh < heads; ++hh) {
      double* v = x->data() + hh * hd;
      for (int64_t j = 0; j < half; ++j) {  // rotate-half pairs (j, j + hd/2)
        const double a = pos * freq[j], x0 = v[j], x1 = v[j + half];
        v[j] = x0 * std::cos(a) - x1 * std::sin(a);
        v[j + half] = x1 * std::cos(a) + x0 * std::sin(a);
      }
    }
  };
  std::vector<std::vector<double>> x(n, std::vector<double>(h));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < h; ++i) x[r][i] = at(m_.weights.embed, ids[r] * h + i);
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& lw = m_.weights.layers[l];
    std::vector<std::vector<double>> q(n);
    for (int64_t r = 0; r < n; ++r) {
      std::vector<double> xn = x[r];
      rmsnorm(&xn, lw.attn_norm, h, c.rms_norm_eps);
      q[r] = linear(xn, lw.wq, lw.bq);
      std::vector<double> k = linear(xn, lw.wk, lw.bk);
      if (c.qk_norm) {
        rmsnorm(&q[r], lw.q_norm, hd, c.rms_norm_eps);
        rmsnorm(&k, lw.k_norm, hd, c.rms_norm_eps);
      }
      rope(&q[r], nh, start + r);
      rope(&k, nkv, start + r);
      k_[l].push_back(k);
      v_[l].push_back(linear(xn, lw.wv, lw.bv));
    }
    for (int64_t r = 0; r < n; ++r) {
      const int64_t pos = start + r;
      const int64_t first =
          c.sliding_window > 0 ? std::max<int64_t>(0, pos - c.sliding_window + 1) : 0;
      std::vector<double> att(nh * hd, 0.0);
      for (int64_t hh = 0; hh < nh; ++hh) {
        const int64_t kvh = hh / (nh / nkv);
        std::vector<double> s;
        for (int64_t t = first; t <= pos; ++t) {
          double d = 0.0;
          for (int64_t i = 0; i < hd; ++i) d += q[r][hh * hd + i] * k_[l][t][kvh * hd + i];
          s.push_back(d / std::sqrt(double(hd)));
        }
        const double mx = *std::max_element(s.begin(), s.end());
        double sum = 0.0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t t = first; t <= pos; ++t)
          for (int64_t i = 0; i < hd; ++i)
            att[hh * hd + i] += s[t - first] / sum * v_[l][t][kvh * hd + i];
      }
      const std::vector<double> o = linear(att, lw.wo, lw.bo);
      for (int64_t i = 0; i < h; ++i) x[r][i] += o[i];
      std::vector<double> xn = x[r];
      rmsnorm(&xn, lw.ffn_norm, h, c.rms_norm_eps);
      std::vector<double> g = linear(xn, lw.w_gate, Tensor());
      const std::vector<double> u = linear(xn, lw.w_up, Tensor());
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      const std::vector<double> d = linear(g, lw.w_down, Tensor());
      for (int64_t i = 0; i < h; ++i) x[r][i] += d[i];
    }
  }
  std::vector<double> logits;
  for (int64_t r = 0; r < n; ++r) {
    rmsnorm(&x[r], m_.weights.final_norm, h, c.rms_norm_eps);
    const std::vector<double> y = linear(x[r], m_.weights.lm_head, Tensor());
    logits.insert(logits.end(), y.begin(), y.end());
  }
  length_ += static_cast<int32_t>(n);
  return logits;
}

}  // namespace pvllm::testing
