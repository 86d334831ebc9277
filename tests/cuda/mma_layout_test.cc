// The index functions of kernels/cuda/common/mma_layout.h, which the mma
// prefill kernel addresses shared memory and reads its accumulators
// through, against emulations of ldmatrix.x4 (here) and mma.sync m16n8k16
// (mma_emulation.h) written from the PTX ISA's fragment tables. One warp's Q K^T and
// P V over a 16-row tile and 64 keys, as the kernel walks them, must equal
// the plain products. Runs on the CPU: no GPU needed.
#include "kernels/cuda/common/mma_layout.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/cuda/mma_emulation.h"

namespace pvllm {
namespace {

namespace layout = mma_layout;

constexpr int kLanes = mma_emulation::kLanes;
constexpr int kRows = 16;  // one warp's query rows
constexpr int kKeys = 64;  // one key tile

using mma_emulation::Accum;
using mma_emulation::BFrag;
using mma_emulation::mma;
using mma_emulation::Reg;
using Regs4 = mma_emulation::AFrag;                         // ldmatrix.x4 / A fragment
using Addresses = std::array<std::pair<int, int>, kLanes>;  // (row, column) per lane

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lane i addresses row
// i % 8 of matrix i / 8 (8 consecutive elements); register m of lane l
// receives, from matrix m, row l / 4, elements 2 (l % 4) and 2 (l % 4) + 1,
// or with .trans column l / 4, rows 2 (l % 4) and 2 (l % 4) + 1.
Regs4 ldmatrix_x4(const std::vector<float>& smem, int stride, const Addresses& addr, bool trans) {
  Regs4 out{};
  for (int m = 0; m < 4; ++m) {
    float mat[8][8];
    for (int r = 0; r < 8; ++r) {
      const auto [row, col] = addr[8 * m + r];
      for (int c = 0; c < 8; ++c) mat[r][c] = smem[row * stride + col + c];
    }
    for (int l = 0; l < kLanes; ++l) {
      for (int h = 0; h < 2; ++h) {
        out[l][m][h] = trans ? mat[2 * (l % 4) + h][l / 4] : mat[l / 4][2 * (l % 4) + h];
      }
    }
  }
  return out;
}

// Registers lo and hi of every lane of an ldmatrix.x4 result, as a B fragment.
BFrag b_pair(const Regs4& r, int lo) {
  BFrag b{};
  for (int l = 0; l < kLanes; ++l) b[l] = {r[l][lo], r[l][lo + 1]};
  return b;
}

std::vector<float> random_matrix(int rows, int cols, int stride, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> m(static_cast<size_t>(rows) * stride, NAN);  // padding is never read
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) m[r * stride + c] = dist(rng);
  }
  return m;
}

class MmaLayoutTest : public testing::TestWithParam<int> {};

// The kernel's steps 2 and 4 for one warp: S = Q K^T with Q's fragments
// loaded once, then O = P V with P taken from S's accumulators as they lie.
TEST_P(MmaLayoutTest, WarpProductsEqualPlainProducts) {
  const int head_dim = GetParam();
  const int stride = head_dim + 8;  // the kernel's padded rows
  std::mt19937 rng(head_dim);
  const std::vector<float> q = random_matrix(kRows, head_dim, stride, rng);
  const std::vector<float> k = random_matrix(kKeys, head_dim, stride, rng);
  const std::vector<float> v = random_matrix(kKeys, head_dim, stride, rng);

  std::vector<Regs4> q_frag(head_dim / 16);
  for (int kk = 0; kk < head_dim / 16; ++kk) {
    Addresses addr;
    for (int l = 0; l < kLanes; ++l) {
      addr[l] = {layout::a_ldsm_row(l), kk * 16 + layout::a_ldsm_col(l)};
    }
    q_frag[kk] = ldmatrix_x4(q, stride, addr, false);
  }
  std::vector<Accum> s(kKeys / 8, Accum{});
  for (int nk = 0; nk < kKeys / 16; ++nk) {
    for (int kk = 0; kk < head_dim / 16; ++kk) {
      Addresses addr;
      for (int l = 0; l < kLanes; ++l) {
        addr[l] = {nk * 16 + layout::bn_ldsm_row(l), kk * 16 + layout::bn_ldsm_col(l)};
      }
      const Regs4 b = ldmatrix_x4(k, stride, addr, false);
      mma(s[2 * nk], q_frag[kk], b_pair(b, 0));
      mma(s[2 * nk + 1], q_frag[kk], b_pair(b, 2));
    }
  }
  std::vector<float> p(kRows * kKeys, NAN);  // S as the lanes hold it, row-major
  for (int j = 0; j < kKeys / 8; ++j) {
    for (int l = 0; l < kLanes; ++l) {
      for (int e = 0; e < 4; ++e) {
        const int row = layout::c_row(l, e);
        const int key = 8 * j + layout::c_col(l, e);
        float want = 0.0f;
        for (int d = 0; d < head_dim; ++d) want += q[row * stride + d] * k[key * stride + d];
        ASSERT_NEAR(s[j][l][e], want, 1e-4f) << "S row " << row << " key " << key;
        p[row * kKeys + key] = s[j][l][e];
      }
    }
  }

  std::vector<Accum> o(head_dim / 8, Accum{});
  for (int kk = 0; kk < kKeys / 16; ++kk) {
    Regs4 a{};
    for (int l = 0; l < kLanes; ++l) {
      for (int r = 0; r < 4; ++r) {
        const Accum& c = s[2 * kk + layout::a_tile(r)];
        a[l][r] = {c[l][layout::a_elem(r)], c[l][layout::a_elem(r) + 1]};
      }
    }
    for (int np = 0; np < head_dim / 16; ++np) {
      Addresses addr;
      for (int l = 0; l < kLanes; ++l) {
        addr[l] = {kk * 16 + layout::bk_ldsm_row(l), np * 16 + layout::bk_ldsm_col(l)};
      }
      const Regs4 b = ldmatrix_x4(v, stride, addr, true);
      mma(o[2 * np], a, b_pair(b, 0));
      mma(o[2 * np + 1], a, b_pair(b, 2));
    }
  }
  for (int j = 0; j < head_dim / 8; ++j) {
    for (int l = 0; l < kLanes; ++l) {
      for (int e = 0; e < 4; ++e) {
        const int row = layout::c_row(l, e);
        const int col = 8 * j + layout::c_col(l, e);
        float want = 0.0f;
        for (int key = 0; key < kKeys; ++key) want += p[row * kKeys + key] * v[key * stride + col];
        ASSERT_NEAR(o[j][l][e], want, 1e-3f) << "O row " << row << " column " << col;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(HeadDims, MmaLayoutTest, testing::Values(64, 128),
                         [](const testing::TestParamInfo<int>& info) {
                           return "d" + std::to_string(info.param);
                         });

// Every element of a 16 x 8 C tile belongs to exactly one (lane, element),
// and the lanes that share a row are lane ^ 1 and lane ^ 2: the kernel's
// row max and row sum shuffles (xor 1, then xor 2) reduce over exactly them.
TEST(MmaLayout, CTileIsCoveredOnceAndRowsShareAQuad) {
  std::set<std::pair<int, int>> seen;
  for (int l = 0; l < kLanes; ++l) {
    for (int e = 0; e < 4; ++e) {
      EXPECT_TRUE(seen.insert({layout::c_row(l, e), layout::c_col(l, e)}).second) << l << " " << e;
      EXPECT_EQ(layout::c_row(l ^ 1, e), layout::c_row(l, e));
      EXPECT_EQ(layout::c_row(l ^ 2, e), layout::c_row(l, e));
      EXPECT_EQ(layout::c_row(l, e), layout::c_row(l, e & 2));  // elements 0, 1 and 2, 3 pair up
    }
    for (int x = 4; x < kLanes; x *= 2) EXPECT_NE(layout::c_row(l ^ x, 0), layout::c_row(l, 0));
  }
  EXPECT_EQ(seen.size(), 16u * 8u);
}

// Each lane's ldmatrix address starts a 16-byte row inside the tile.
TEST(MmaLayout, LdmatrixAddressesAreWholeRowsInsideTheTile) {
  for (int l = 0; l < kLanes; ++l) {
    for (int col : {layout::a_ldsm_col(l), layout::bn_ldsm_col(l), layout::bk_ldsm_col(l)}) {
      EXPECT_TRUE(col == 0 || col == 8) << l;
    }
    for (int row : {layout::a_ldsm_row(l), layout::bn_ldsm_row(l), layout::bk_ldsm_row(l)}) {
      EXPECT_GE(row, 0);
      EXPECT_LT(row, 16);
    }
  }
}

}  // namespace
}  // namespace pvllm
