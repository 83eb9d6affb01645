// The bfloat16 step product (amx_bf16.hpp) with VDPBF16PS, for CPUs with AVX512-BF16 but no AMX
// (AMD Zen 4 and later, Intel Cooper Lake). It multiplies Bf16Matrix's packed A (no packing of its
// own): one zmm holds the accumulators of 16 units of one batch column, and per depth pair q
//   acc += dpbf16(row q of the unit tile, broadcast 32-bit pair (x[2q], x[2q + 1]) of the column)
// with register blocks of two unit tiles (32 units) x kColumns batch columns, the accumulators
// starting from the bias. Depth runs over the pairs of K (K rounded up to even, the pad zero).
//
// VDPBF16PS, as the Intel SDM gives it: for each of the 16 float32 lanes i, with make_fp32 the
// exact widening of a bfloat16,
//   acc[i] = acc[i] + make_fp32(a[2i + 1]) * make_fp32(x[1])      (first the odd element)
//   acc[i] = acc[i] + make_fp32(a[2i])     * make_fp32(x[0])      (then the even one)
// each an FP32 fused multiply-add rounded to nearest even, with input denormals (a, x and acc)
// read as zero and output denormals flushed to zero; MXCSR is neither read nor written.
//
// The loop logic (blocking, padding, tails in M, N and K, the K1 split, the bias) is one template
// over an "ops" policy with two instances: the intrinsic one (VDPBF16PS, zmm loads and masked
// stores; AVX-512 module only, behind avx512_bf16_unavailable_reason()) and a portable model that
// does the above on arrays of 16 floats (std::fma, explicit denormal flushing). The model runs on
// any CPU and the tests hold it to the emulated reference, so on hardware only the few intrinsic
// lines are new.
//
// What may differ from the emulated path (PackedPanels on the rounded operands, float32 FMAs in its
// own summation order): the summation order (pairs in depth order, odd before even, against the
// panel kernel's order), one rounding per product-add in both; and denormals: VDPBF16PS flushes
// denormal partial sums to zero where the float32 kernel keeps them. Either changes a result by a
// few float32 rounding errors of the sum of |terms| (a flushed denormal is below 2^-126), which is
// what the tests' tolerances allow (1e-6 of the sum of |terms| for one product, 1e-5 relative for
// one model step; the float32 order can flip a bfloat16 rounding of h later in a chunk, so chunks
// agree to 1e-3). A CPU whose VDPBF16PS rounds differently from the SDM's description (for example
// one rounding per pair) stays within the same bounds.
#pragma once

#include <cstddef>
#include <cstdint>

namespace msrnn {

class Bf16Matrix;

// C (M, N) with leading dimension ldc = b + A X, with A and b from W and X as the bf16 rows of xs
// (N rows of W.padded_depth(), Bf16Matrix's converted X). model = false: VDPBF16PS (only when
// avx512_bf16_unavailable_reason() is nullptr); true: the portable model (any CPU).
void dpbf16_multiply(const Bf16Matrix& W, float* C, std::ptrdiff_t ldc, const std::uint16_t* xs, std::ptrdiff_t N,
                     bool model);

// Batch columns per register block.
constexpr std::ptrdiff_t kDpbf16Columns = 4;

}  // namespace msrnn
