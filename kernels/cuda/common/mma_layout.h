// Where each lane's data sits in the warp-level tensor-core operations of
// common/mma.cuh (ldmatrix.x4 and mma.sync m16n8k16), as constexpr index
// functions: the kernels address shared memory and read accumulators
// through them, and a CPU test (tests/cuda/mma_layout_test.cc) runs them
// against an emulation of the two instructions written from the PTX ISA's
// fragment tables, so an indexing mistake shows without a GPU. Plain C++
// (nvcc's --expt-relaxed-constexpr lets device code call them).
#pragma once

namespace pvllm::mma_layout {

// ldmatrix.x4: lane i gives the address of row i % 8 of matrix i / 8, and
// register j of each lane receives matrix j.

// A (16 x 16, row-major in shared memory): the four matrices are the
// registers a[0..3] of the A fragment: rows +0 / +8 (matrix & 1), columns
// +0 / +8 (matrix >> 1). The row and column this lane addresses, relative
// to the tile.
constexpr int a_ldsm_row(int lane) { return ((lane / 8) & 1) * 8 + lane % 8; }
constexpr int a_ldsm_col(int lane) { return ((lane / 8) >> 1) * 8; }

// B of two 8-wide n tiles from a matrix stored n-major ([n][k], K in
// Q K^T), non-transposing ldmatrix: matrices (n +0, k +0), (n +0, k +8),
// (n +8, k +0), (n +8, k +8), so registers 0, 1 are the first n tile's
// b0, b1 and registers 2, 3 the second's. The n row and k column this lane
// addresses.
constexpr int bn_ldsm_row(int lane) { return ((lane / 8) >> 1) * 8 + lane % 8; }
constexpr int bn_ldsm_col(int lane) { return ((lane / 8) & 1) * 8; }

// B of two 8-wide n tiles from a matrix stored k-major ([k][n], V in P V),
// transposing ldmatrix: matrices (k +0, n +0), (k +8, n +0), (k +0, n +8),
// (k +8, n +8), registers as above. The k row and n column this lane
// addresses.
constexpr int bk_ldsm_row(int lane) { return ((lane / 8) & 1) * 8 + lane % 8; }
constexpr int bk_ldsm_col(int lane) { return ((lane / 8) >> 1) * 8; }

// Element e (0..3) of a lane's 16 x 8 fp32 C / D fragment: its row and
// column in the tile.
constexpr int c_row(int lane, int e) { return lane / 4 + (e / 2) * 8; }
constexpr int c_col(int lane, int e) { return (lane % 4) * 2 + (e & 1); }

// A 16 x 16 A fragment made of two adjacent 16 x 8 C fragments (P of a
// 16-key step from the scores of two 8-key tiles): register r packs
// elements a_elem(r) and a_elem(r) + 1 of C tile a_tile(r) (0 or 1).
constexpr int a_tile(int r) { return r / 2; }
constexpr int a_elem(int r) { return (r & 1) * 2; }

}  // namespace pvllm::mma_layout
