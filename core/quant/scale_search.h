// The searches the K and IQ4 quantizers share: for a group of values, the
// integer codes and the scale (and min) that fit them best under a weighted
// error, trying a few candidate scales around the obvious one. They decide
// the codes ggml's quantizers write, so their arithmetic is ggml's, step
// for step (each float operation rounded where it is there).
#pragma once

#include <cstdint>
#include <cstring>

namespace pvllm::quant {

// Groups whose largest magnitude is below this quantize to zero.
inline constexpr float kGroupMaxEps = 1e-15f;

// The integer nearest to v, ties to even, for |v| <= 2^22 - 1 (the callers'
// range): the float sum v + 1.5 * 2^23 lands on an integer, whose bits are
// read back. Outside that range it returns what those bits say, as the
// reference does.
inline int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

// Symmetric codes in [-nmax, nmax - 1] for n values (stored as code + nmax
// in L), weighted by x^2, trying 18 scales around nmax / max|x|; returns the
// scale. (Q6_K's per-16 search.)
float search_symmetric(int n, int nmax, const float* x, int8_t* L);

// Q3_K's: codes in [-nmax, nmax - 1] (stored + nmax), refined element by
// element for up to 5 passes under x^2 weights; returns the scale.
float search_symmetric_refine(int n, int nmax, const float* x, int8_t* L);

// Codes in [0, nmax] with a min: x ~ scale * L - min. Weighted by `weights`
// (absolute error when use_mad, squared otherwise), trying nstep + 1
// scales from (nmax + rmin) / range in steps of rdelta. Returns the scale,
// the min (as a value >= 0 to subtract) in *the_min; Laux is scratch of n.
float search_with_min(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                      float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                      bool use_mad);

}  // namespace pvllm::quant
