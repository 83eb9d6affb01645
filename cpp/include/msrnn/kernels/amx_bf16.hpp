// bfloat16 matrix products on AMX tiles, for inference: the same step product as PackedPanels
// (gemm.hpp),
//   C (M, N) = b + A [X1; X2]          A (M, K) rounded to bfloat16 once, X1 (K1, N) and X2 (K - K1, N)
//                                      rounded to bfloat16 at every call, b (M) and C in float32,
// with the products accumulated in float32 by _tile_dpbf16ps. Rounding is to nearest, ties to
// even (as VCVTNE2PS2BF16 does), with denormals flushed to (signed) zero; NaN stays NaN.
//
// The tile layout: C is computed transposed, C^T = [X1; X2]^T A^T, so that a tile row (16 float32)
// is 16 consecutive units of one batch column of C (C is column-major (M, N)):
//   C tile  (16 batch columns, 16 units)  float32
//   X tile  (16 batch columns, 32 depth)  bfloat16, one row per batch column: X in bf16, row-major
//   A tile  (16 depth pairs, 16 units x 2) bfloat16, "VNNI" pairs: tile[k2][2n + p] = A[n][2 k2 + p]
// A is packed once into contiguous 1 KiB tiles; M is padded to a multiple of 32 (two unit tiles per
// register block) and K to a multiple of 32, both with zeros.
//
// This header and its source use no Eigen and no inline code shared with the rest of the core: the
// source is the only code compiled for AMX / AVX512-BF16 (function attributes, in the x86-64-v4
// module only), so no copy of a shared inline function can carry those instructions into code
// that runs on other CPUs. Before any tile instruction runs, amx_bf16_unavailable_reason() checks
// CPUID, the OS-enabled state (XCR0) and asks Linux for the tile-data permission.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace msrnn {

// Why the AMX kernel cannot run in this process, or nullptr when it can. The first call asks the
// kernel for permission to use tile data (once per process).
const char* amx_bf16_unavailable_reason();

// dst[i] = src[i] rounded to bfloat16 (and back to float32); dst may equal src. The plain
// rounding used by the emulated path; matches the AMX kernel's conversion bit for bit.
void round_to_bf16(float* dst, const float* src, std::ptrdiff_t n);

class AmxBf16Matrix {
 public:
  using Idx = std::ptrdiff_t;
  static constexpr Idx kTile = 16;  // units (rows of A) per tile; pack() row ranges start at multiples of it
  // Allocate for A (M, K); call once (single-threaded) before packing.
  void resize(Idx M, Idx K);
  // Pack rows [r0, r1) of columns [k0, k0 + kn) of A from Ak (M, kn), column-major with leading
  // dimension lda. r0 a multiple of kTile; threads may pack disjoint row ranges concurrently.
  void pack(const float* Ak, Idx lda, Idx k0, Idx kn, Idx r0, Idx r1);
  // The bias b (M), for rows [r0, r1).
  void set_bias(const float* b, Idx r0, Idx r1);
  // bf16 elements of scratch that multiply() needs for N columns.
  Idx scratch_size(Idx N) const;
  // C (M, N) with leading dimension ldc = b + A [X1; X2]; X1 (K1, N) ld ldx1, X2 (K - K1, N) ld ldx2
  // (X2 unused when K1 = K). scratch: scratch_size(N) elements owned by the calling thread. Loads
  // the tile configuration on the calling thread and releases the tiles before returning.
  // Only call when amx_bf16_unavailable_reason() is nullptr.
  void multiply(float* C, Idx ldc, const float* X1, Idx ldx1, Idx K1, const float* X2, Idx ldx2, Idx N,
                std::uint16_t* scratch) const;
  Idx rows() const { return M_; }
  Idx depth() const { return K_; }

 private:
  Idx M_ = 0, K_ = 0, Mp_ = 0, Kp_ = 0;  // Mp_ = M padded to 32, Kp_ = K padded to 32
  std::vector<std::uint16_t> w_;         // (Mp/16 unit tiles, Kp/32 depth tiles, 16 x 32) bf16 tiles of A
  std::vector<float> bias_;              // (Mp) b, zero-padded
};

}  // namespace msrnn
