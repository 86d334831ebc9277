// Random Q8_0, Q4_0 and Q4_K weights as a GGUF file stores them, for the
// quantized matmul tests (quant_layout_test.cc on the CPU,
// quant_matmul_test.cc on the GPU).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/base/tensor.h"
#include "core/quant/block_formats.h"

namespace pvllm::cuda_test {

// rows x cols weights of type t: per block random bytes, or one extreme
// byte everywhere (0x00, 0xFF, 0x80, 0x7F: Q8_0's codes 0, -1, -128, 127,
// the nibbles 0 and 15, the largest 6-bit scales and mins), then the fp16
// scale fields (d; Q4_K also dmin) set anew. `extreme` scales are also 0,
// subnormal or near the largest half (for the bit-exact CPU checks);
// otherwise they are 2^-10 .. 2^-4, so products stay far from overflow.
// Q4_K's d and dmin stay positive, as ggml writes them.
inline std::vector<uint8_t> random_quant_weights(DType t, int64_t rows, int64_t cols,
                                                 std::mt19937& rng, bool extreme) {
  std::vector<uint8_t> bytes(static_cast<size_t>(rows) * dtype_row_bytes(t, cols));
  const size_t block = dtype_block_bytes(t);
  const int num_scales = t == DType::kQ4_K ? 2 : 1;  // d (and dmin) lead every block
  const uint8_t fill[] = {0x00, 0xFF, 0x80, 0x7F};
  std::uniform_real_distribution<float> mag(-10.0f, -4.0f);
  for (size_t off = 0; off < bytes.size(); off += block) {
    const uint32_t kind = rng() % 8;
    for (size_t i = 0; i < block; ++i) {
      bytes[off + i] = kind < 4 ? fill[kind] : static_cast<uint8_t>(rng());
    }
    for (int s = 0; s < num_scales; ++s) {
      uint16_t h = float_to_fp16(std::exp2(mag(rng)));
      if (extreme) {
        const uint32_t pick = rng() % 6;
        if (pick == 0) h = 0;
        if (pick == 1) h = static_cast<uint16_t>(1 + rng() % 1023);        // subnormal
        if (pick == 2) h = static_cast<uint16_t>(0x7800 + rng() % 0x3FF);  // 32768 .. 65504
      }
      if (t != DType::kQ4_K && (rng() & 1)) h = static_cast<uint16_t>(h | 0x8000);
      std::memcpy(&bytes[off + 2 * s], &h, 2);
    }
  }
  return bytes;
}

}  // namespace pvllm::cuda_test
