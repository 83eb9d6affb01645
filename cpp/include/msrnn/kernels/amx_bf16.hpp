// bfloat16 matrix products for inference: the same step product as PackedPanels (gemm.hpp),
//   C (M, N) = b + A [X1; X2]          A (M, K) rounded to bfloat16 once, X1 (K1, N) and X2 (K - K1, N)
//                                      rounded to bfloat16 at every call, b (M) and C in float32,
// with the products accumulated in float32. Rounding is to nearest, ties to even (as VCVTNE2PS2BF16
// does), with denormals flushed to (signed) zero; NaN stays NaN.
//
// One packing, two multiply kernels (Bf16Kernel):
//   Amx         _tile_dpbf16ps on AMX tiles (this file's source, amx_bf16.cpp);
//   Avx512Bf16  VDPBF16PS on zmm registers (avx512_bf16.hpp / .cpp), for CPUs with AVX512-BF16 but
//               no AMX (AMD Zen 4 and later, Intel Cooper Lake);
//   Avx512Bf16Model  the same loops as Avx512Bf16 with a portable model of VDPBF16PS: any CPU, for tests.
// Emulated (PackedPanels holding rounded weights, gemm.hpp) is the plain reference of all three.
//
// The packed A: "VNNI" pairs in 1 KiB tiles, tile[k2][2n + p] = A[n][2 k2 + p] (16 depth pairs,
// 16 units x 2), one 64-byte row = one AMX tile row = one zmm register; M is padded to a multiple
// of 32 (two unit tiles per register block) and K to a multiple of 32, both with zeros. The tiles
// of one unit tile follow each other in depth order, so its row k2 of depth pair q = 16 kb + k2 is
// at tiles() + (unit tile * Kp / 2 + q) * 32.
// The converted X: one row of Kp bf16 per batch column j, [x1_j; x2_j] then zeros (scratch (Np, Kp),
// Np = N rounded up to 16, rows N.. zero): an AMX X tile row, and for VDPBF16PS the 32-bit pair
// (x[2q], x[2q + 1]) it broadcasts.
// AMX computes C transposed, C^T = [X1; X2]^T A^T, so that a tile row (16 float32) is 16
// consecutive units of one batch column of C (column-major (M, N)); VDPBF16PS likewise accumulates
// 16 consecutive units of one column in a zmm.
//
// This header and its sources use no Eigen and no inline code shared with the rest of the core: they
// are the only code compiled for AMX / AVX512-BF16 (function attributes, in the x86-64-v4 module
// only), so no copy of a shared inline function can carry those instructions into code that runs on
// other CPUs. Before any such instruction runs, the *_unavailable_reason() functions check CPUID and
// the OS-enabled state (XCR0) and, for AMX, ask Linux for the tile-data permission.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace msrnn {

enum class Bf16Kernel { Amx, Avx512Bf16, Avx512Bf16Model, Emulated };
const char* bf16_kernel_name(Bf16Kernel k);  // "amx", "avx512-bf16", "avx512-bf16-model", "emulated"

// Why the AMX kernel cannot run in this process (the missing CPUID flag, OS state or core module),
// or nullptr when it can. The first call asks the kernel for permission to use tile data (once per
// process).
const char* amx_bf16_unavailable_reason();
// The same for the AVX512-BF16 kernel (avx512_bf16.hpp; both checks are in amx_bf16.cpp).
const char* avx512_bf16_unavailable_reason();

// The kernel of inference_precision "bfloat16": AMX where it runs, else AVX512-BF16 where it runs,
// else none: then bf16_unavailable_reason() is a sentence naming both reasons, and bf16_kernel()
// throws std::runtime_error with it. With set_bf16_model_kernel(true) (tests), the portable model
// of the AVX512-BF16 kernel instead, on any CPU.
const char* bf16_unavailable_reason();
Bf16Kernel bf16_kernel();
void set_bf16_model_kernel(bool on);
bool bf16_model_kernel();

// dst[i] = src[i] rounded to bfloat16 (and back to float32); dst may equal src. The plain
// rounding used by the emulated path; matches the kernels' conversion bit for bit.
void round_to_bf16(float* dst, const float* src, std::ptrdiff_t n);

class Bf16Matrix {
 public:
  using Idx = std::ptrdiff_t;
  static constexpr Idx kTile = 16;  // units (rows of A) per tile; pack() row ranges start at multiples of it
  // Batch columns per register block of `kernel`: the column alignment of a thread's share.
  static Idx block_cols(Bf16Kernel kernel);
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
  // (X2 unused when K1 = K). scratch: scratch_size(N) elements owned by the calling thread. With
  // Amx, loads the tile configuration on the calling thread and releases the tiles before
  // returning. Only call with a kernel whose reason is nullptr (any CPU for Avx512Bf16Model);
  // not with Emulated.
  void multiply(float* C, Idx ldc, const float* X1, Idx ldx1, Idx K1, const float* X2, Idx ldx2, Idx N,
                std::uint16_t* scratch, Bf16Kernel kernel) const;
  Idx rows() const { return M_; }
  Idx depth() const { return K_; }
  Idx padded_depth() const { return Kp_; }
  const std::uint16_t* tiles() const { return w_.data(); }  // (Mp/16, Kp/32, 16 x 32) the packed A
  const float* bias() const { return bias_.data(); }        // (Mp) b, zero-padded

 private:
  Idx M_ = 0, K_ = 0, Mp_ = 0, Kp_ = 0;  // Mp_ = M padded to 32, Kp_ = K padded to 32
  std::vector<std::uint16_t> w_;         // (Mp/16 unit tiles, Kp/32 depth tiles, 16 x 32) bf16 tiles of A
  std::vector<float> bias_;              // (Mp) b, zero-padded
  // scratch (Np, Kp) = bf16 of [X1; X2]^T as described above.
  void convert(std::uint16_t* scratch, const float* X1, Idx ldx1, Idx K1, const float* X2, Idx ldx2, Idx N) const;
  void multiply_amx(float* C, Idx ldc, Idx N, const std::uint16_t* scratch) const;
};

}  // namespace msrnn
