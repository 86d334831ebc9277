// The layout of the quantized matmul kernels (kernels/cuda/common/
// quant_layout.h, quant_repack.cc, quant_matmul.cu) walked on the CPU as
// the kernels walk it: each lane's 16-byte chunk loads, the per-element
// dequantization of the GEMV kernel (which must give core/quant's values
// bit for bit), the B fragments of the tensor-core kernel built from codes
// with magic exponents (which must be the codes exactly), and one warp's
// products over whole rows through an emulation of mma.sync m16n8k16
// (mma_emulation.h), which must equal the plain product. No GPU needed.
#include "kernels/cuda/common/quant_layout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/base/tensor.h"
#include "core/quant/block_formats.h"
#include "core/quant/dequantize.h"
#include "kernels/cuda/common/mma_layout.h"
#include "kernels/cuda/quant_repack.h"
#include "tests/cuda/mma_emulation.h"
#include "tests/cuda/quant_weights_util.h"

namespace pvllm {
namespace {

namespace ql = quant_layout;
using mma_emulation::Accum;
using mma_emulation::AFrag;
using mma_emulation::BFrag;
using mma_emulation::kLanes;

int bits_of(DType t) { return t == DType::kQ8_0 ? 8 : 4; }

uint32_t read_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

float fp16_at(const std::vector<uint8_t>& bytes, int64_t i) {
  uint16_t h;
  std::memcpy(&h, &bytes[static_cast<size_t>(i) * 2], 2);
  return fp16_to_float(h);
}

// The kernels' load_chunk: lane `lane`'s words of chunk `chunk` of row group g.
std::array<uint32_t, 4> lane_words(const QuantRepacked& w, int64_t g, int64_t chunk, int lane) {
  const int bits = bits_of(w.dtype);
  const int64_t nb = w.k / ql::kBlockElems;
  const int width = ql::chunk_width(bits, nb, chunk);
  const uint8_t* base =
      w.codes.data() + (g * nb + chunk * ql::chunk_blocks(bits)) * ql::tile_bytes(bits);
  std::array<uint32_t, 4> words{};
  if (width == ql::chunk_blocks(bits)) {
    for (int i = 0; i < 4; ++i) words[i] = read_u32(base + ql::kChunkBytes * lane + 4 * i);
    return words;
  }
  for (int t = 0; t < width; ++t) {
    const uint8_t* unit = base + (width * lane + t) * ql::lane_bytes(bits);
    for (int i = 0; i < ql::lane_bytes(bits) / 4; ++i) {
      words[ql::lane_bytes(bits) / 4 * t + i] = read_u32(unit + 4 * i);
    }
  }
  return words;
}

// Q4_K's header of (row, super-block): d, dmin and the scale words.
struct KHeader {
  float d;
  float dmin;
  uint32_t s[3];
};
KHeader k_header(const QuantRepacked& w, int64_t row, int64_t sb) {
  const uint8_t* h = &w.scales[static_cast<size_t>((row * (w.k / 256) + sb) * 16)];
  KHeader out;
  uint16_t d, dmin;
  std::memcpy(&d, h, 2);
  std::memcpy(&dmin, h + 2, 2);
  out.d = fp16_to_float(d);
  out.dmin = fp16_to_float(dmin);
  for (int i = 0; i < 3; ++i) out.s[i] = read_u32(h + 4 + 4 * i);
  return out;
}

// Sub-block b's (d * sc, dmin * m), as the kernels' k_scale.
std::pair<float, float> k_factors(const QuantRepacked& w, int64_t row, int64_t b) {
  const KHeader h = k_header(w, row, b / 8);
  const int j = static_cast<int>(b % 8);
  return {ql::mul_rn(h.d, static_cast<float>(ql::q4k_scale(h.s, j))),
          ql::mul_rn(h.dmin, static_cast<float>(ql::q4k_min(h.s, j)))};
}

// Element e of block t of a lane's chunk words, dequantized as the GEMV does.
float gemv_value(const QuantRepacked& w, const std::array<uint32_t, 4>& words, int64_t row,
                 int64_t b, int t, int e) {
  const int64_t nb = w.k / ql::kBlockElems;
  switch (w.dtype) {
    case DType::kQ8_0:
      return ql::q8_0_value((words[2 * t + e / 4] >> (8 * (e % 4))) & 0xFF,
                            fp16_at(w.scales, row * nb + b));
    case DType::kQ4_0:
      return ql::q4_0_value(ql::code4(words[t], e), fp16_at(w.scales, row * nb + b));
    default: {
      const auto [d_sc, dmin_m] = k_factors(w, row, b);
      return ql::q4_k_value(ql::code4(words[t], e), d_sc, dmin_m);
    }
  }
}

struct Shape {
  DType dtype;
  int64_t n;
  int64_t k;
};

std::string shape_name(const testing::TestParamInfo<Shape>& info) {
  return std::string(dtype_name(info.param.dtype)) + "_n" + std::to_string(info.param.n) + "_k" +
         std::to_string(info.param.k);
}

// k = 224 leaves a narrower last chunk (7 blocks: chunks of 2 or 4); Q4_K's
// rows are whole chunks always (8 sub-blocks per super-block).
const Shape kShapes[] = {{DType::kQ8_0, 24, 224}, {DType::kQ8_0, 8, 64},   {DType::kQ4_0, 24, 224},
                         {DType::kQ4_0, 16, 96},  {DType::kQ4_K, 24, 512}, {DType::kQ4_K, 8, 256}};

class QuantLayoutTest : public testing::TestWithParam<Shape> {
 protected:
  void repack(bool extreme) {
    const Shape& s = GetParam();
    std::mt19937 rng(static_cast<uint32_t>(s.n * 1000 + s.k + static_cast<int>(s.dtype)));
    file_ = cuda_test::random_quant_weights(s.dtype, s.n, s.k, rng, extreme);
    ASSERT_TRUE(quant_repack(s.dtype, file_.data(), s.n, s.k, &w_).ok());
    dequantized_.resize(static_cast<size_t>(s.n * s.k));
    quant::dequantize_row(s.dtype, file_.data(), s.n * s.k, dequantized_.data());
  }

  std::vector<uint8_t> file_;
  QuantRepacked w_;
  std::vector<float> dequantized_;  // [n, k], core/quant's values
};

TEST_P(QuantLayoutTest, RepackKeepsTheFilesBytes) {
  repack(true);
  EXPECT_EQ(w_.codes.size() + w_.scales.size(), file_.size());
}

// Every (lane, chunk, block, element) the GEMV visits, dequantized its way,
// lands on a distinct weight and equals core/quant's value bit for bit
// (zero, subnormal and near-largest scales among them).
TEST_P(QuantLayoutTest, GemvWalkDequantizesAsCoreQuant) {
  repack(true);
  const int bits = bits_of(w_.dtype);
  const int64_t nb = w_.k / ql::kBlockElems;
  const int64_t num_chunks = (nb + ql::chunk_blocks(bits) - 1) / ql::chunk_blocks(bits);
  std::vector<int> visits(dequantized_.size(), 0);
  for (int64_t g = 0; g < w_.n / ql::kGroupRows; ++g) {
    for (int64_t chunk = 0; chunk < num_chunks; ++chunk) {
      for (int lane = 0; lane < kLanes; ++lane) {
        const std::array<uint32_t, 4> words = lane_words(w_, g, chunk, lane);
        const int64_t row = g * ql::kGroupRows + lane / 4;
        for (int t = 0; t < ql::chunk_width(bits, nb, chunk); ++t) {
          const int64_t b = chunk * ql::chunk_blocks(bits) + t;
          for (int e = 0; e < 8; ++e) {
            const int64_t col = b * ql::kBlockElems + ql::a_col(lane) + e;
            const size_t i = static_cast<size_t>(row * w_.k + col);
            ++visits[i];
            const float got = gemv_value(w_, words, row, b, t, e);
            ASSERT_EQ(std::memcmp(&got, &dequantized_[i], 4), 0)
                << "row " << row << " col " << col << ": " << got << " vs " << dequantized_[i];
          }
        }
      }
    }
  }
  for (size_t i = 0; i < visits.size(); ++i) ASSERT_EQ(visits[i], 1) << "weight " << i;
}

// The repack's own placement (unit_offset, lane_of, elem_of) agrees with
// the lanes' loads: the code of every weight read back through them is the
// one core/quant unpacks.
TEST_P(QuantLayoutTest, UnitOffsetsAddressEveryCode) {
  repack(false);
  const int bits = bits_of(w_.dtype);
  const int64_t nb = w_.k / ql::kBlockElems;
  for (int64_t row = 0; row < w_.n; ++row) {
    for (int64_t col = 0; col < w_.k; ++col) {
      const int kk = static_cast<int>(col % ql::kBlockElems);
      const int lane = ql::lane_of(static_cast<int>(row % 8), kk);
      const uint8_t* unit =
          w_.codes.data() + ql::unit_offset(bits, nb, row / 8, col / ql::kBlockElems, lane);
      const std::array<uint32_t, 4> words =
          lane_words(w_, row / 8, col / ql::kBlockElems / ql::chunk_blocks(bits), lane);
      const int t = static_cast<int>(col / ql::kBlockElems % ql::chunk_blocks(bits));
      uint32_t unit_words[2] = {read_u32(unit), bits == 8 ? read_u32(unit + 4) : 0};
      const int e = ql::elem_of(kk);
      if (bits == 8) {
        ASSERT_EQ(ql::code8(unit_words, e), ql::code8(&words[2 * t], e)) << row << " " << col;
      } else {
        ASSERT_EQ(ql::code4(unit_words[0], e), ql::code4(words[t], e)) << row << " " << col;
      }
    }
  }
}

// The tensor-core kernel's walk for one warp: a 16-row m tile of x (bf16
// values) times each 8-row group of W, its B fragments made of codes, each
// block's product folded in with the scales of the accumulator's columns
// (and Q4_K's row sums), must equal x W^T computed plainly in double.
TEST_P(QuantLayoutTest, WarpMmaWalkEqualsPlainProduct) {
  repack(false);
  constexpr int kRows = 16;
  const int bits = bits_of(w_.dtype);
  const int64_t nb = w_.k / ql::kBlockElems;
  const int64_t num_chunks = (nb + ql::chunk_blocks(bits) - 1) / ql::chunk_blocks(bits);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(kRows * w_.k));
  for (float& v : x) v = bf16_to_float(float_to_bf16(u(rng)));

  for (int64_t g = 0; g < w_.n / ql::kGroupRows; ++g) {
    Accum acc{};
    for (int64_t chunk = 0; chunk < num_chunks; ++chunk) {
      std::array<std::array<uint32_t, 4>, kLanes> words;
      for (int lane = 0; lane < kLanes; ++lane) words[lane] = lane_words(w_, g, chunk, lane);
      for (int t = 0; t < ql::chunk_width(bits, nb, chunk); ++t) {
        const int64_t b = chunk * ql::chunk_blocks(bits) + t;
        const int64_t k0 = b * ql::kBlockElems;
        Accum prod{};
        for (int s = 0; s < 2; ++s) {
          AFrag a{};
          BFrag bf{};
          for (int lane = 0; lane < kLanes; ++lane) {
            for (int r = 0; r < 4; ++r) {
              const int row = ql::a_row(lane, r);
              const int64_t col = k0 + ql::a_col(lane) + 2 * ql::a_pair(s, r);
              a[lane][r] = {x[row * w_.k + col], x[row * w_.k + col + 1]};
            }
            for (int j = 0; j < 2; ++j) {
              const int pair = ql::b_pair(s, j);
              int code[2];
              for (int h = 0; h < 2; ++h) {
                const int e = 2 * pair + h;
                code[h] = bits == 8
                              ? ql::code8(&words[lane][2 * t], e)
                              : ql::code4(words[lane][t], e) - (w_.dtype == DType::kQ4_0 ? 8 : 0);
              }
              bf[lane][j] = {static_cast<float>(code[0]), static_cast<float>(code[1])};
            }
          }
          mma_emulation::mma(prod, a, bf);
        }
        for (int lane = 0; lane < kLanes; ++lane) {
          // Q4_K: the sums of x over the block of the lane's two rows, each
          // lane adding its 8 elements, then its quad's (lane ^ 1, lane ^ 2).
          float row_sum[2] = {0.0f, 0.0f};
          for (int q = 0; q < 4; ++q) {
            const int other = (lane & ~3) | q;
            for (int h = 0; h < 2; ++h) {
              for (int e = 0; e < 8; ++e) {
                row_sum[h] += x[ql::a_row(other, h) * w_.k + k0 + ql::a_col(other) + e];
              }
            }
          }
          for (int e = 0; e < 4; ++e) {
            const int64_t col = g * ql::kGroupRows + mma_layout::c_col(lane, e);
            if (w_.dtype == DType::kQ4_K) {
              const auto [d_sc, dmin_m] = k_factors(w_, col, b);
              acc[lane][e] += d_sc * prod[lane][e] - dmin_m * row_sum[e / 2];
            } else {
              acc[lane][e] += fp16_at(w_.scales, col * nb + b) * prod[lane][e];
            }
          }
        }
      }
    }
    for (int lane = 0; lane < kLanes; ++lane) {
      for (int e = 0; e < 4; ++e) {
        const int row = mma_layout::c_row(lane, e);
        const int64_t col = g * ql::kGroupRows + mma_layout::c_col(lane, e);
        double want = 0.0;
        double magnitude = 0.0;
        for (int64_t i = 0; i < w_.k; ++i) {
          const double p = static_cast<double>(x[row * w_.k + i]) * dequantized_[col * w_.k + i];
          want += p;
          magnitude += std::fabs(p);
        }
        // fp32 sums of exact products over k terms: well inside 1e-5 of the
        // magnitude; a misplaced element is off by a whole product.
        ASSERT_NEAR(acc[lane][e], want, 1e-5 * magnitude + 1e-30)
            << "row " << row << " col " << col;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, QuantLayoutTest, testing::ValuesIn(kShapes), shape_name);

// Sub-block scales and mins from the repacked header's words equal
// core/quant's k_scale_min for every sub-block of random scale bytes.
TEST(QuantLayout, Q4KScalesAndMinsMatchCoreQuant) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 2000; ++trial) {
    uint8_t bytes[12];
    for (uint8_t& v : bytes) v = static_cast<uint8_t>(rng());
    uint32_t words[3];
    std::memcpy(words, bytes, 12);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      quant::k_scale_min(j, bytes, &sc, &m);
      ASSERT_EQ(ql::q4k_scale(words, j), sc) << j;
      ASSERT_EQ(ql::q4k_min(words, j), m) << j;
    }
  }
}

// The B fragment registers made with magic exponents hold every code
// exactly: 4-bit pairs in fp16 and bf16, 8-bit pairs in fp16 (bf16 goes
// through small_uint_to_float).
TEST(QuantLayout, MagicFragmentsHoldTheCodes) {
  for (uint32_t lo = 0; lo < 16; ++lo) {
    for (uint32_t hi = 0; hi < 16; ++hi) {
      for (int i = 0; i < 4; ++i) {
        const uint32_t word = (lo << (4 * i)) | (hi << (16 + 4 * i));
        const uint32_t f16 = ql::q4_pair_bits(word, i, ql::kF16Magic);
        EXPECT_EQ(fp16_to_float(static_cast<uint16_t>(f16)) - 1024.0f, static_cast<float>(lo));
        EXPECT_EQ(fp16_to_float(static_cast<uint16_t>(f16 >> 16)) - 1024.0f,
                  static_cast<float>(hi));
        const uint32_t bf16 = ql::q4_pair_bits(word, i, ql::kBF16Magic);
        EXPECT_EQ(bf16_to_float(static_cast<uint16_t>(bf16)) - 128.0f, static_cast<float>(lo));
        EXPECT_EQ(bf16_to_float(static_cast<uint16_t>(bf16 >> 16)) - 128.0f,
                  static_cast<float>(hi));
      }
    }
  }
  for (uint32_t byte = 0; byte < 256; ++byte) {
    const float code = static_cast<float>(static_cast<int8_t>(byte));
    for (int p = 0; p < 2; ++p) {
      const uint32_t word = (byte << (16 * p)) | ((255 - byte) << (16 * p + 8));
      const uint32_t f16 = ql::q8_pair_bits_f16(word, p);
      EXPECT_EQ(fp16_to_float(static_cast<uint16_t>(f16)) - 1152.0f, code);
      EXPECT_EQ(fp16_to_float(static_cast<uint16_t>(f16 >> 16)) - 1152.0f,
                static_cast<float>(static_cast<int8_t>(255 - byte)));
    }
    const float via_float = ql::small_uint_to_float(byte ^ 0x80u) - 128.0f;
    EXPECT_EQ(via_float, code);
    EXPECT_EQ(bf16_to_float(float_to_bf16(via_float)), code);  // exact in bf16
  }
}

}  // namespace
}  // namespace pvllm
