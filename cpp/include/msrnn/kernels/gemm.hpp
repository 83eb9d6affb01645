// Matrix products for recurrent time loops, where the same weight matrix A (M, K) multiplies a
// new (K, N) block at every step:
//   C[rows, :] (=|+=) b[rows] + A[rows, :] X                         C (M, N), X (K, N), N small (B)
// X may come in two parts stacked on top of each other, X = [X1; X2] (K1 + K2 rows), so an LSTM
// step computes b + [W_ih W_hh] [x_t; h_{t-1}] in one pass.
// Eigen repacks A at every call; PackedPanels packs it once per chunk into panels of
// panel_rows() rows (k-major inside a panel), and a register-blocked kernel multiplies the panels
// by X directly. Rows come in G groups of R rows (the gates of an LSTM: G = 4, R = H), and each
// group is padded to whole panels, so a thread can own the same units u in [u0, u1) of every gate.
//
// Splitting work over the core's threads (parallel_slices, thread_units, over_streams) is in
// streams.hpp.
#pragma once

#include "msrnn/kernels/amx_bf16.hpp"
#include "msrnn/kernels/streams.hpp"
#include "msrnn/model/common.hpp"

#include <algorithm>

namespace msrnn {

// True while reference (plain, unoptimised) kernels are selected; for tests of the fast paths.
bool reference_kernels();
void set_reference_kernels(bool on);

template <class S> class PackedPanels {
 public:
  // Rows per panel of this build's kernel (two SIMD vectors), and columns of X per register block.
  static Index panel_rows();
  static Index block_cols();
  // Allocate for A (M = G * R, K); call once (single-threaded) before packing.
  void resize(Index G, Index R, Index K);
  // Pack columns [k0, k0 + kn) of A, for the panels holding units [u0, u1) of every group, from
  // Ak (M, kn), column-major with leading dimension lda. Threads may pack disjoint unit ranges
  // concurrently.
  void pack(const S* Ak, Index lda, Index k0, Index kn, Index u0, Index u1);
  // The same from Akt (kn, M) = Ak^T, column-major with leading dimension ldat.
  void pack_transposed(const S* Akt, Index ldat, Index k0, Index kn, Index u0, Index u1);
  // The bias b (M) added by multiply (zero unless set), for units [u0, u1).
  void set_bias(const S* b, Index u0, Index u1);
  // Round the packed A of units [u0, u1) to bfloat16 (round_to_bf16, amx_bf16.hpp), leaving the
  // bias as it is: the emulated bfloat16 inference path. float only.
  void round_to_bfloat16(Index u0, Index u1);
  // For every group g and unit u in [u0, u1), every column j < N:
  //   C[g*R + u, j] = (accumulate ? C[g*R + u, j] : 0) + sum_k A[g*R + u, k] X[k, j]
  // C (G*R, N) with leading dimension ldc; X (K, N) with leading dimension ldx.
  // u0 must be a multiple of panel_rows() (or equal R); u1 <= R.
  void multiply(S* C, Index ldc, const S* X, Index ldx, Index N, Index u0, Index u1, bool accumulate) const {
    multiply(C, ldc, X, ldx, K_, nullptr, 0, N, u0, u1, accumulate);
  }
  // The same with b added and X = [X1; X2]: X1 (K1, N) and X2 (K - K1, N), leading dimensions
  // ldx1 and ldx2.
  void multiply(S* C, Index ldc, const S* X1, Index ldx1, Index K1, const S* X2, Index ldx2, Index N, Index u0,
                Index u1, bool accumulate) const;
  // Leading square blocks of a staircase (one group, G = 1): for every column j < N,
  //   C[0:q_j, j] (=|+=) A[0:q_j, 0:q_j] X1[0:q_j, j] + (X2 ? A[0:q_j, K1:K1 + q_j] X2[0:q_j, j] : 0)
  // with q (N) non-decreasing, 0 <= q_j <= min(R, K1) (and <= K - K1 with X2). Each panel of rows
  // runs over the columns that reach it, in register blocks whose columns drop out of the depth loop
  // as their q ends, so a column does exactly its own block's multiplications and every panel is read
  // once per block of block_cols() columns. Rows [q_j, min(R, ceil(q_j / MR) MR)) of column j are
  // written too (partial sums: ignore them); rows beyond are not touched.
  void multiply_leading(S* C, Index ldc, const S* X1, Index ldx1, Index K1, const S* X2, Index ldx2, const Index* q,
                        Index N, bool accumulate) const;
  Index groups() const { return G_; }
  Index group_rows() const { return R_; }
  Index depth() const { return K_; }

 private:
  Index G_ = 0, R_ = 0, K_ = 0, P_ = 0;  // P_ panels per group
  Mat<S> data_;                          // (panel_rows() * K, G * P) one column per panel
  Mat<S> bias_;                          // (panel_rows(), G * P)
};

// The LSTM layer's bfloat16 step product on its own, for tests: C (M, N) = b + A [X1; X2] with A (M, K)
// and X = [X1; X2] (K, N) split after row K1 (all column-major, float32), through one of the kernels
// of Bf16Matrix (amx_bf16.hpp; std::runtime_error naming the reason when it cannot run here) or the
// emulated one (PackedPanels holding the rounded A, times the rounded X).
void bf16_step_product(float* C, const float* A, const float* b, const float* X, Index M, Index K, Index K1, Index N,
                       Bf16Kernel kernel);

}  // namespace msrnn
