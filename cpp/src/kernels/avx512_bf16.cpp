// The VDPBF16PS step product and its portable model (see avx512_bf16.hpp). One loop template over
// an ops policy: ModelOps (plain C++, every module) and Avx512Ops (intrinsics, x86-64-v4 module
// only, MSRNN_AMX). The only AVX512-BF16 instruction is in Avx512Ops::dot, which carries its own
// target attribute; the function running the loops with Avx512Ops carries it too and is flattened,
// so the whole loop nest is compiled into it (and nowhere else) with VDPBF16PS inlined.
#include "msrnn/kernels/avx512_bf16.hpp"

#include "msrnn/kernels/amx_bf16.hpp"

#include <cmath>
#include <cstring>

#if defined(MSRNN_AMX)
#include <immintrin.h>
#endif

namespace msrnn {

namespace {

using Idx = std::ptrdiff_t;
constexpr Idx kU = 16;               // units per tile: float32 lanes of one accumulator
constexpr Idx kRow = 2 * kU;         // bf16 per packed row: 16 units x a depth pair
constexpr Idx kNB = kDpbf16Columns;  // batch columns per register block

// x with a denormal read as (signed) zero: VDPBF16PS's treatment of its inputs and outputs.
float flush_denormal(float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; }

float widen(std::uint16_t h) {  // bfloat16 bits -> float32 (exact)
  const std::uint32_t u = std::uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// The portable model of the instruction semantics, on arrays of 16 float32.
struct ModelOps {
  struct Acc { float v[kU]; };
  using Row = const std::uint16_t*;   // 32 bf16: unit n's pair at [2n, 2n + 1]
  using Pair = const std::uint16_t*;  // 2 bf16: (x[2q], x[2q + 1])
  static Acc load(const float* p) {
    Acc a;
    std::memcpy(a.v, p, sizeof(a.v));
    return a;
  }
  static Row row(const std::uint16_t* p) { return p; }
  static Pair pair(const std::uint16_t* p) { return p; }
  // VDPBF16PS lane by lane: the odd element's product-add, then the even one's, each fused and
  // rounded to nearest even, denormal inputs read as zero and denormal results flushed.
  static Acc dot(Acc acc, Row a, Pair x) {
    const float x0 = flush_denormal(widen(x[0])), x1 = flush_denormal(widen(x[1]));
    for (Idx n = 0; n < kU; ++n) {
      float s = flush_denormal(acc.v[n]);
      s = flush_denormal(std::fma(flush_denormal(widen(a[2 * n + 1])), x1, s));
      acc.v[n] = flush_denormal(std::fma(flush_denormal(widen(a[2 * n])), x0, s));
    }
    return acc;
  }
  static void store(float* c, const Acc& acc, Idx n) { std::memcpy(c, acc.v, sizeof(float) * static_cast<size_t>(n)); }
};

// One register block: units [u0, u0 + 32) of C (the unit tiles whose packed rows start at w0 and
// w1) x NB batch columns (C columns c, c + ldc, ...; their bf16 rows xs (NB, Kp)), over depth pairs
// [0, nq); the first `units` units are stored. bias: (32) the block's bias.
template <class Ops, int NB>
void block(float* c, Idx ldc, Idx units, const std::uint16_t* xs, Idx Kp, Idx nq, const std::uint16_t* w0,
           const std::uint16_t* w1, const float* bias) {
  typename Ops::Acc acc[NB][2];  // (NB columns, 2 unit tiles) accumulators of 16 units
  for (int b = 0; b < NB; ++b) {
    acc[b][0] = Ops::load(bias);
    acc[b][1] = Ops::load(bias + kU);
  }
  for (Idx q = 0; q < nq; ++q) {
    const auto a0 = Ops::row(w0 + q * kRow), a1 = Ops::row(w1 + q * kRow);
    for (int b = 0; b < NB; ++b) {
      const auto x = Ops::pair(xs + b * Kp + 2 * q);
      acc[b][0] = Ops::dot(acc[b][0], a0, x);
      acc[b][1] = Ops::dot(acc[b][1], a1, x);
    }
  }
  const Idx n0 = units < kU ? units : kU, n1 = units - n0;
  for (int b = 0; b < NB; ++b) {
    Ops::store(c + b * ldc, acc[b][0], n0);
    if (n1 > 0) Ops::store(c + b * ldc + kU, acc[b][1], n1);
  }
}

// All of C: unit pairs outer (each pair's packed rows, Kp x 64 bytes, stay in L1 / L2 while every
// column block uses them), column blocks of NB inner, the last block narrower.
template <class Ops> void multiply_all(const Bf16Matrix& W, float* C, Idx ldc, const std::uint16_t* xs, Idx N) {
  const Idx M = W.rows(), Kp = W.padded_depth(), nq = (W.depth() + 1) / 2;  // depth pairs of K
  const Idx tile = Kp / 2 * kRow;                                           // bf16 of one unit tile's rows
  for (Idx u0 = 0; u0 < M; u0 += 2 * kU) {
    const std::uint16_t* w0 = W.tiles() + (u0 / kU) * tile;
    const std::uint16_t *w1 = w0 + tile, *x = xs;
    const float* b = W.bias() + u0;
    const Idx units = M - u0 < 2 * kU ? M - u0 : 2 * kU;
    float* c = C + u0;
    Idx j = 0;
    for (; j + kNB <= N; j += kNB) block<Ops, kNB>(c + j * ldc, ldc, units, x + j * Kp, Kp, nq, w0, w1, b);
    switch (N - j) {
      case 3: block<Ops, 3>(c + j * ldc, ldc, units, x + j * Kp, Kp, nq, w0, w1, b); break;
      case 2: block<Ops, 2>(c + j * ldc, ldc, units, x + j * Kp, Kp, nq, w0, w1, b); break;
      case 1: block<Ops, 1>(c + j * ldc, ldc, units, x + j * Kp, Kp, nq, w0, w1, b); break;
      default: break;
    }
  }
}
static_assert(kNB == 4, "multiply_all's tail cases are written for blocks of 4 columns");

#if defined(MSRNN_AMX)
// The instruction itself: zmm loads and masked stores (AVX-512 F, this module's baseline) and
// VDPBF16PS (AVX512-BF16, its own attribute).
struct Avx512Ops {
  using Acc = __m512;
  using Row = __m512i;
  using Pair = __m512i;
  static Acc load(const float* p) { return _mm512_loadu_ps(p); }
  static Row row(const std::uint16_t* p) { return _mm512_loadu_si512(p); }
  static Pair pair(const std::uint16_t* p) {
    std::int32_t v;
    std::memcpy(&v, p, sizeof(v));
    return _mm512_set1_epi32(v);
  }
  __attribute__((target("avx512bf16"))) static Acc dot(Acc acc, Row a, Pair x) {
    return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)x);
  }
  static void store(float* c, Acc acc, Idx n) {
    if (n == kU)
      _mm512_storeu_ps(c, acc);
    else
      _mm512_mask_storeu_ps(c, __mmask16((1u << n) - 1), acc);
  }
};

__attribute__((target("avx512bf16"), flatten)) void multiply_avx512(const Bf16Matrix& W, float* C, Idx ldc,
                                                                    const std::uint16_t* xs, Idx N) {
  multiply_all<Avx512Ops>(W, C, ldc, xs, N);
}
#endif

}  // namespace

void dpbf16_multiply(const Bf16Matrix& W, float* C, Idx ldc, const std::uint16_t* xs, Idx N, bool model) {
#if defined(MSRNN_AMX)
  if (!model) return multiply_avx512(W, C, ldc, xs, N);
#else
  (void)model;  // only the model can be asked for here (avx512_bf16_unavailable_reason() refuses the other)
#endif
  multiply_all<ModelOps>(W, C, ldc, xs, N);
}

}  // namespace msrnn
