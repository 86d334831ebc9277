// IQ4_NL and IQ4_XS: codes index the non-uniform grid kIQ4Values. Each
// 32-value block's scale is searched over 15 candidates (x^2 weights) for
// the best least-squares fit; IQ4_XS then quantizes the 8 block scales of a
// super-block to 6 bits against one fp16 scale and picks the codes again.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/quant/quantize.h"
#include "core/quant/scale_search.h"

namespace pvllm::quant {
namespace {

// Candidate scales tried on each side of the first guess.
constexpr int kIQ4Tries = 7;

// The grid index whose level is nearest to v (the lower one on a tie),
// by bisection over the sorted levels.
int nearest_level(float v) {
  if (v <= kIQ4Values[0]) return 0;
  if (v >= kIQ4Values[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < kIQ4Values[mid]) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return v - kIQ4Values[hi - 1] < kIQ4Values[hi] - v ? hi - 1 : hi;
}

// The best scale for 32 values (0 for a group below kGroupMaxEps), codes
// in L when one was found.
float search_iq4_scale(const float* x, uint8_t* L) {
  float weight[32];
  for (int j = 0; j < 32; ++j) weight[j] = x[j] * x[j];
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) return 0.0f;
  const float first = static_cast<float>(kIQ4Values[0]);
  float d = -max / first;
  float id = 1.0f / d;
  float sumqx = 0.0f, sumq2 = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const int l = nearest_level(id * x[j]);
    L[j] = static_cast<uint8_t>(l);
    const float q = kIQ4Values[l];
    sumqx += weight[j] * q * x[j];
    sumq2 += weight[j] * q * q;
  }
  d = sumqx / sumq2;
  float best = d * sumqx;
  for (int t = -kIQ4Tries; t <= kIQ4Tries; ++t) {
    id = static_cast<float>(t + kIQ4Values[0]) / max;
    sumqx = sumq2 = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float q = kIQ4Values[nearest_level(id * x[j])];
      sumqx += weight[j] * q * x[j];
      sumq2 += weight[j] * q * q;
    }
    if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// Two codes a byte: element j low nibble, element j + 16 high (per 32).
void pack_iq4_codes(const uint8_t* L, int n, uint8_t* qs) {
  for (int i = 0; i < n / 32; ++i) {
    for (int j = 0; j < 16; ++j) {
      qs[16 * i + j] = static_cast<uint8_t>(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
    }
  }
}

}  // namespace

void quantize_blocks(const float* x, int64_t num_blocks, BlockIQ4_NL* y) {
  for (int64_t b = 0; b < num_blocks; ++b, x += 32) {
    uint8_t L[32];
    const float scale = search_iq4_scale(x, L);
    y[b].d = float_to_fp16(scale);
    // The codes again against the chosen (unrounded) scale.
    const float id = scale != 0.0f ? 1.0f / scale : 0.0f;
    for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(nearest_level(id * x[j]));
    pack_iq4_codes(L, 32, y[b].qs);
  }
}

void quantize_blocks(const float* x, int64_t num_blocks, BlockIQ4_XS* y) {
  for (int64_t b = 0; b < num_blocks; ++b, x += 256) {
    BlockIQ4_XS& out = y[b];
    uint8_t L[256];
    float scales[8];
    float max_scale = 0.0f, amax_scale = 0.0f;
    for (int s = 0; s < 8; ++s) {
      scales[s] = search_iq4_scale(x + 32 * s, L + 32 * s);
      const float abs_d = std::fabs(scales[s]);
      if (abs_d > amax_scale) {
        amax_scale = abs_d;
        max_scale = scales[s];
      }
    }
    out.scales_h = 0;
    const float d = -max_scale / 32.0f;  // -0 when every block is zero, as stored
    out.d = float_to_fp16(d);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int s = 0; s < 8; ++s) {
      int l = std::max(-32, std::min(31, nearest_int(id * scales[s])));
      // The codes against the 6-bit scale times the unrounded d.
      const float dl = d * static_cast<float>(l);
      const float idl = dl != 0.0f ? 1.0f / dl : 0.0f;
      for (int j = 32 * s; j < 32 * s + 32; ++j) {
        L[j] = static_cast<uint8_t>(nearest_level(idl * x[j]));
      }
      l += 32;
      if (s % 2 == 0) {
        out.scales_l[s / 2] = static_cast<uint8_t>(l & 0xF);
      } else {
        out.scales_l[s / 2] |= static_cast<uint8_t>((l & 0xF) << 4);
      }
      out.scales_h |= static_cast<uint16_t>((l >> 4) << (2 * s));
    }
    pack_iq4_codes(L, 256, out.qs);
  }
}

}  // namespace pvllm::quant
