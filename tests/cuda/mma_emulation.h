// An emulation of mma.sync.aligned.m16n8k16.row.col.f32 on the CPU, written
// from the PTX ISA's fragment tables: the tests that check the kernels'
// fragment indexing (mma_layout_test.cc, quant_layout_test.cc) run their
// lanes' registers through it and compare with plain products.
#pragma once

#include <array>

namespace pvllm::mma_emulation {

constexpr int kLanes = 32;

// A 32-bit register of two 16-bit elements, kept as floats: [0] is the
// element in the lower half.
using Reg = std::array<float, 2>;
using AFrag = std::array<std::array<Reg, 4>, kLanes>;    // A fragment (also ldmatrix.x4)
using BFrag = std::array<std::array<Reg, 2>, kLanes>;    // B fragment
using Accum = std::array<std::array<float, 4>, kLanes>;  // C / D fragment

// mma.sync.aligned.m16n8k16.row.col.f32: the fragment tables of the PTX
// ISA, with groupID = lane / 4 and threadID_in_group = lane % 4:
//   A element i (0..7; register i / 2): row groupID for i in {0, 1, 4, 5},
//     else groupID + 8; column 2 threadID_in_group + (i & 1), plus 8 for
//     i >= 4.
//   B element i (0..3; register i / 2): row 2 threadID_in_group + (i & 1),
//     plus 8 for i >= 2; column groupID.
//   C element i (0..3): row groupID, plus 8 for i >= 2; column
//     2 threadID_in_group + (i & 1).
inline void mma(Accum& c, const AFrag& a, const BFrag& b) {
  float A[16][16] = {};
  float B[16][8] = {};
  for (int l = 0; l < kLanes; ++l) {
    const int g = l / 4;
    const int t = l % 4;
    for (int i = 0; i < 8; ++i) {
      const int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
      const int col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
      A[row][col] = a[l][i / 2][i % 2];
    }
    for (int i = 0; i < 4; ++i) B[2 * t + (i & 1) + (i >= 2 ? 8 : 0)][g] = b[l][i / 2][i % 2];
  }
  for (int l = 0; l < kLanes; ++l) {
    for (int i = 0; i < 4; ++i) {
      const int row = l / 4 + (i >= 2 ? 8 : 0);
      const int col = 2 * (l % 4) + (i & 1);
      float d = 0.0f;
      for (int k = 0; k < 16; ++k) d += A[row][k] * B[k][col];
      c[l][i] += d;
    }
  }
}

}  // namespace pvllm::mma_emulation
