// The K super-blocks (256 values): each sub-block gets its own scale (and
// min) from a search (scale_search.h), those are quantized against one
// fp16 super-block scale, and the codes are then recomputed against the
// scales as stored.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/quant/quantize.h"
#include "core/quant/scale_search.h"

namespace pvllm::quant {
namespace {

inline int clamp_code(int v, int lo, int hi) { return std::max(lo, std::min(hi, v)); }
inline float to_f(int v) { return static_cast<float>(v); }

// Q2_K's and Q3_K's 2-bit packing: element e to bits 2 * ((e % 128) / 32)
// of byte 32 * (e / 128) + e % 32.
void pack_two_bits(const uint8_t* codes, uint8_t* qs) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* c = codes + 128 * h;
    for (int l = 0; l < 32; ++l) {
      qs[32 * h + l] =
          static_cast<uint8_t>(c[l] | (c[l + 32] << 2) | (c[l + 64] << 4) | (c[l + 96] << 6));
    }
  }
}

// Q4_K's and Q5_K's 6-bit scales and mins into their 12 bytes (k_scale_min
// reads them back).
void pack_scales_mins(const uint8_t* ls, const uint8_t* lm, uint8_t* scales) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scales[j] = ls[j];
      scales[j + 4] = lm[j];
    } else {
      scales[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      scales[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

// Q4_K and Q5_K: sub-blocks of 32 with a scale and a min searched under the
// weights sqrt(mean x^2) + |x|; returns the codes (0..nmax) in L and fills
// d, dmin, scales.
template <typename Block>
void quantize_k_with_min(const float* x, int nmax, float rmin, int nstep, Block* y, uint8_t* L) {
  float scales[8], mins[8], weights[32];
  uint8_t Laux[32];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = search_with_min(32, nmax, xs, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f,
                                nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    // Through uint8_t first: a negative result wraps, then clamps to 63.
    ls[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    lm[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
  }
  pack_scales_mins(ls, lm, y->scales);
  y->d = float_to_fp16(max_scale / 63.0f);
  y->dmin = float_to_fp16(max_min / 63.0f);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    k_scale_min(j, y->scales, &sc, &m);
    const float d = fp16_to_float(y->d) * to_f(sc);
    if (d == 0.0f) continue;
    const float dm = fp16_to_float(y->dmin) * to_f(m);
    for (int i = 32 * j; i < 32 * j + 32; ++i) {
      L[i] = static_cast<uint8_t>(clamp_code(nearest_int((x[i] + dm) / d), 0, nmax));
    }
  }
}

}  // namespace

void quantize_blocks(const float* x, int64_t num_blocks, BlockQ2_K* y) {
  constexpr float kScaleLevels = 15.0f;
  for (int64_t b = 0; b < num_blocks; ++b, x += 256) {
    BlockQ2_K& out = y[b];
    uint8_t L[256], Laux[16];
    float weights[16], scales[16], mins[16];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = search_with_min(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f,
                                  0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0.0f) {
      const float iscale = kScaleLevels / max_scale;
      for (int j = 0; j < 16; ++j)
        out.scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      out.d = float_to_fp16(max_scale / kScaleLevels);
    } else {
      for (int j = 0; j < 16; ++j) out.scales[j] = 0;
      out.d = float_to_fp16(0.0f);
    }
    if (max_min > 0.0f) {
      const float iscale = kScaleLevels / max_min;
      for (int j = 0; j < 16; ++j) {
        out.scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
      }
      out.dmin = float_to_fp16(max_min / kScaleLevels);
    } else {
      out.dmin = float_to_fp16(0.0f);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = fp16_to_float(out.d) * to_f(out.scales[j] & 0xF);
      if (d == 0.0f) continue;
      const float dm = fp16_to_float(out.dmin) * to_f(out.scales[j] >> 4);
      for (int i = 16 * j; i < 16 * j + 16; ++i) {
        L[i] = static_cast<uint8_t>(clamp_code(nearest_int((x[i] + dm) / d), 0, 3));
      }
    }
    pack_two_bits(L, out.qs);
  }
}

void quantize_blocks(const float* x, int64_t num_blocks, BlockQ3_K* y) {
  for (int64_t b = 0; b < num_blocks; ++b, x += 256) {
    BlockQ3_K& out = y[b];
    int8_t L[256];
    float scales[16];
    float max_scale = 0.0f, amax = 0.0f;
    for (int j = 0; j < 16; ++j) {
      scales[j] = search_symmetric_refine(16, 4, x + 16 * j, L + 16 * j);
      const float scale = std::fabs(scales[j]);
      if (scale > amax) {
        amax = scale;
        max_scale = scales[j];
      }
    }
    std::memset(out.scales, 0, 12);
    if (max_scale != 0.0f) {
      const float iscale = -32.0f / max_scale;
      for (int j = 0; j < 16; ++j) {
        // Through int8_t first, as the stored code is computed.
        int l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
        l = clamp_code(l, -32, 31) + 32;
        if (j < 8) {
          out.scales[j] = static_cast<uint8_t>(l & 0xF);
        } else {
          out.scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
        }
        out.scales[8 + j % 4] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
      }
      out.d = float_to_fp16(1.0f / iscale);
    } else {
      out.d = float_to_fp16(0.0f);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = fp16_to_float(out.d) * to_f(q3k_scale(j, out.scales) - 32);
      if (d == 0.0f) continue;
      for (int i = 16 * j; i < 16 * j + 16; ++i) {
        L[i] = static_cast<int8_t>(clamp_code(nearest_int(x[i] / d), -4, 3) + 4);
      }
    }
    // Codes 0..7: bit 2 to hmask (element e: bit e / 32 of byte e % 32), the
    // low two bits packed as Q2_K's.
    std::memset(out.hmask, 0, 32);
    uint8_t low[256];
    for (int e = 0; e < 256; ++e) {
      if (L[e] > 3) out.hmask[e % 32] |= static_cast<uint8_t>(1 << (e / 32));
      low[e] = static_cast<uint8_t>(L[e] & 3);
    }
    pack_two_bits(low, out.qs);
  }
}

void quantize_blocks(const float* x, int64_t num_blocks, BlockQ4_K* y) {
  for (int64_t b = 0; b < num_blocks; ++b, x += 256) {
    uint8_t L[256];
    quantize_k_with_min(x, 15, -1.0f, 20, &y[b], L);
    for (int p = 0; p < 4; ++p) {
      for (int l = 0; l < 32; ++l) {
        y[b].qs[32 * p + l] = static_cast<uint8_t>(L[64 * p + l] | (L[64 * p + l + 32] << 4));
      }
    }
  }
}

void quantize_blocks(const float* x, int64_t num_blocks, BlockQ5_K* y) {
  for (int64_t b = 0; b < num_blocks; ++b, x += 256) {
    uint8_t L[256];
    quantize_k_with_min(x, 31, -0.5f, 15, &y[b], L);
    std::memset(y[b].qh, 0, 32);
    for (int e = 0; e < 256; ++e) {
      if (L[e] > 15) y[b].qh[e % 32] |= static_cast<uint8_t>(1 << (e / 32));
    }
    for (int p = 0; p < 4; ++p) {
      for (int l = 0; l < 32; ++l) {
        y[b].qs[32 * p + l] =
            static_cast<uint8_t>((L[64 * p + l] & 0xF) | ((L[64 * p + l + 32] & 0xF) << 4));
      }
    }
  }
}

void quantize_blocks(const float* x, int64_t num_blocks, BlockQ6_K* y) {
  for (int64_t b = 0; b < num_blocks; ++b, x += 256) {
    BlockQ6_K& out = y[b];
    int8_t L[256];
    float scales[16];
    float max_scale = 0.0f, max_abs_scale = 0.0f;
    for (int j = 0; j < 16; ++j) {
      scales[j] = search_symmetric(16, 32, x + 16 * j, L + 16 * j);
      const float abs_scale = std::fabs(scales[j]);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scales[j];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&out, 0, sizeof out);
      continue;
    }
    const float iscale = -128.0f / max_scale;
    out.d = float_to_fp16(1.0f / iscale);
    for (int j = 0; j < 16; ++j) {
      out.scales[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j])));
    }
    for (int j = 0; j < 16; ++j) {
      const float d = fp16_to_float(out.d) * to_f(out.scales[j]);
      if (d == 0.0f) continue;
      for (int i = 16 * j; i < 16 * j + 16; ++i) {
        L[i] = static_cast<int8_t>(clamp_code(nearest_int(x[i] / d), -32, 31) + 32);
      }
    }
    // Codes 0..63 (block_formats.h): low nibbles to ql, high 2 bits to qh.
    for (int h = 0; h < 2; ++h) {
      const int8_t* c = L + 128 * h;
      uint8_t* ql = out.ql + 64 * h;
      uint8_t* qh = out.qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((c[l] & 0xF) | ((c[l + 64] & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((c[l + 32] & 0xF) | ((c[l + 96] & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((c[l] >> 4) | ((c[l + 32] >> 4) << 2) |
                                     ((c[l + 64] >> 4) << 4) | ((c[l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace pvllm::quant
