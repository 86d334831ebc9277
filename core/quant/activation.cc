#include "core/quant/activation.h"

#include <cfloat>
#include <cmath>

#include "core/base/check.h"

namespace pvllm::quant {
namespace {

// The scale of k values and their codes, as activation.h defines them.
float quantize_int8(const float* x, int k, int8_t* q) {
  float amax = 0.0f;
  for (int i = 0; i < k; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  if (d < FLT_MIN) {
    for (int i = 0; i < k; ++i) q[i] = 0;
    return 0.0f;
  }
  for (int i = 0; i < k; ++i) q[i] = static_cast<int8_t>(std::nearbyint(x[i] / d));
  return d;
}

template <typename Block>
void quantize_blocks(const float* x, int64_t n, int64_t block, void* dst) {
  auto* out = static_cast<Block*>(dst);
  for (int64_t b = 0; b < n / block; ++b) quantize_activation_block(x + b * block, &out[b]);
}

}  // namespace

ActivationKind activation_kind(DType weight) {
  switch (weight) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL:
      return ActivationKind::kQ8x32;
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_XS:
      return ActivationKind::kQ8x256;
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      break;
  }
  return ActivationKind::kNone;
}

int64_t activation_block_elems(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::kQ8x32:
      return 32;
    case ActivationKind::kQ8x256:
      return 256;
    case ActivationKind::kNone:
      break;
  }
  return 0;
}

size_t activation_row_bytes(ActivationKind kind, int64_t n) {
  const int64_t block = activation_block_elems(kind);
  if (block == 0 || n < 0 || n % block != 0) return 0;
  const size_t bytes = kind == ActivationKind::kQ8x32 ? sizeof(BlockQ8x32) : sizeof(BlockQ8x256);
  return static_cast<size_t>(n / block) * bytes;
}

void quantize_activation_block(const float* x, BlockQ8x32* out) {
  out->d = quantize_int8(x, 32, out->qs);
  int32_t sum = 0;
  for (int i = 0; i < 32; ++i) sum += out->qs[i];
  out->sum = sum;
}

void quantize_activation_block(const float* x, BlockQ8x256* out) {
  out->d = quantize_int8(x, 256, out->qs);
  for (int s = 0; s < 16; ++s) {
    int sum = 0;
    for (int i = 16 * s; i < 16 * s + 16; ++i) sum += out->qs[i];
    out->bsums[s] = static_cast<int16_t>(sum);
  }
}

void quantize_activation_row(ActivationKind kind, const float* x, int64_t n, void* dst) {
  const int64_t block = activation_block_elems(kind);
  PVLLM_CHECK(block > 0 && n >= 0 && n % block == 0,
              "quantize_activation_row: no activation blocks, or n not a whole number of them");
  if (kind == ActivationKind::kQ8x32) {
    quantize_blocks<BlockQ8x32>(x, n, block, dst);
  } else {
    quantize_blocks<BlockQ8x256>(x, n, block, dst);
  }
}

void dequantize_activation_row(ActivationKind kind, const void* src, int64_t n, float* out) {
  const int64_t block = activation_block_elems(kind);
  PVLLM_CHECK(block > 0 && n >= 0 && n % block == 0,
              "dequantize_activation_row: no activation blocks, or n not a whole number of them");
  for (int64_t b = 0; b < n / block; ++b) {
    if (kind == ActivationKind::kQ8x32) {
      const auto& a = static_cast<const BlockQ8x32*>(src)[b];
      for (int i = 0; i < 32; ++i) out[32 * b + i] = a.d * static_cast<float>(a.qs[i]);
    } else {
      const auto& a = static_cast<const BlockQ8x256*>(src)[b];
      for (int i = 0; i < 256; ++i) out[256 * b + i] = a.d * static_cast<float>(a.qs[i]);
    }
  }
}

}  // namespace pvllm::quant
