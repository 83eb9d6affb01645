#include "msrnn/kernels/gemm.hpp"

#include "msrnn/kernels/amx_bf16.hpp"

#include <atomic>
#include <cstring>
#include <type_traits>

namespace msrnn {

namespace {

std::atomic<bool> g_reference{false};

// SIMD width of this build (one module per instruction-set level).
#if defined(__AVX512F__)
constexpr int kVecBytes = 64;
constexpr int kNR = 8;  // columns per register block: 2 x 8 accumulators of 32 registers
#elif defined(__AVX__)
constexpr int kVecBytes = 32;
constexpr int kNR = 6;  // 2 x 6 accumulators of 16 registers
#else
constexpr int kVecBytes = 16;
constexpr int kNR = 6;
#endif

typedef float VecF __attribute__((vector_size(kVecBytes)));
typedef double VecD __attribute__((vector_size(kVecBytes)));
template <class S> struct Simd;
template <> struct Simd<float> { using V = VecF; };
template <> struct Simd<double> { using V = VecD; };

template <class S> constexpr Index kLanes = Index(kVecBytes / sizeof(S));
template <class S> constexpr Index kMR = 2 * kLanes<S>;  // rows per panel

// c += panel (MR, K) * X (K, NC). The panel is k-major: Ap[k*MR + r].
template <class S, int NC, class V>
inline __attribute__((always_inline)) void panel_times(V (&c0)[NC], V (&c1)[NC], const S* Ap, const S* X, Index ldx,
                                                       Index K) {
  constexpr Index L = kLanes<S>, MR = kMR<S>;
  const S* x[NC];
  for (int j = 0; j < NC; ++j) x[j] = X + j * ldx;
  for (Index k = 0; k < K; ++k) {
    V a0, a1;
    std::memcpy(&a0, Ap + k * MR, sizeof(V));
    std::memcpy(&a1, Ap + k * MR + L, sizeof(V));
    for (int j = 0; j < NC; ++j) {
      const S b = x[j][k];
      c0[j] += a0 * b;
      c1[j] += a1 * b;
    }
  }
}

// C (rows <= MR, NC) (=|+=) bias (MR) + panel (MR, K1 + K2) * [X1 (K1, NC); X2 (K2, NC)].
template <class S, int NC>
void kernel(S* C, Index ldc, const S* Ap, const S* bias, const S* X1, Index ldx1, Index K1, const S* X2, Index ldx2,
            Index K2, bool accumulate, Index rows) {
  using V = typename Simd<S>::V;
  constexpr Index L = kLanes<S>, MR = kMR<S>;
  V b0, b1;
  std::memcpy(&b0, bias, sizeof(V));
  std::memcpy(&b1, bias + L, sizeof(V));
  V c0[NC], c1[NC];
  for (int j = 0; j < NC; ++j) {
    c0[j] = b0;
    c1[j] = b1;
  }
  panel_times<S, NC>(c0, c1, Ap, X1, ldx1, K1);
  if (K2 > 0) panel_times<S, NC>(c0, c1, Ap + K1 * MR, X2, ldx2, K2);
  if (rows == MR) {
    for (int j = 0; j < NC; ++j) {
      S* cj = C + j * ldc;
      if (accumulate) {
        V t0, t1;
        std::memcpy(&t0, cj, sizeof(V));
        std::memcpy(&t1, cj + L, sizeof(V));
        c0[j] += t0;
        c1[j] += t1;
      }
      std::memcpy(cj, &c0[j], sizeof(V));
      std::memcpy(cj + L, &c1[j], sizeof(V));
    }
  } else {
    S tmp[MR];  // (MR,) one column of the block
    for (int j = 0; j < NC; ++j) {
      std::memcpy(tmp, &c0[j], sizeof(V));
      std::memcpy(tmp + L, &c1[j], sizeof(V));
      S* cj = C + j * ldc;
      for (Index r = 0; r < rows; ++r) cj[r] = accumulate ? cj[r] + tmp[r] : tmp[r];
    }
  }
}

// f(std::integral_constant<int, NC>{}) with NC = nc for nc < kNR, else kNR: a register block of nc
// columns, the width fixed at compile time.
static_assert(kNR <= 8, "with_cols dispatches at most 8 columns");
template <class F> inline void with_cols(Index nc, F&& f) {
  switch (nc) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    case 6: return f(std::integral_constant<int, 6>{});
    case 7: return f(std::integral_constant<int, 7>{});
    default: return f(std::integral_constant<int, kNR>{});
  }
}

template <class S>
void kernel_cols(S* C, Index ldc, const S* Ap, const S* bias, const S* X1, Index ldx1, Index K1, const S* X2,
                 Index ldx2, Index K2, bool acc, Index rows, Index nc) {
  with_cols(nc,
            [&](auto NC) { kernel<S, decltype(NC)::value>(C, ldc, Ap, bias, X1, ldx1, K1, X2, ldx2, K2, acc, rows); });
}

// The staircase kernel (PackedPanels::multiply_leading): columns c >= C0 of the register block take part
// in the depth steps [k0, depth[C0]), then column C0 drops out (depth non-decreasing over the block).
template <class S, int NC, int C0, class V>
inline __attribute__((always_inline)) void stair_from(V (&c0)[NC], V (&c1)[NC], const S* Ap, const S* const (&x)[NC],
                                                      const Index* depth, Index k0) {
  if constexpr (C0 < NC) {
    constexpr Index L = kLanes<S>, MR = kMR<S>;
    const Index k1 = depth[C0];
    for (Index k = k0; k < k1; ++k) {
      V a0, a1;
      std::memcpy(&a0, Ap + k * MR, sizeof(V));
      std::memcpy(&a1, Ap + k * MR + L, sizeof(V));
      for (int j = C0; j < NC; ++j) {
        const S b = x[j][k];
        c0[j] += a0 * b;
        c1[j] += a1 * b;
      }
    }
    stair_from<S, NC, C0 + 1>(c0, c1, Ap, x, depth, std::max(k0, k1));
  }
}

// C (rows <= MR, NC) (=|+=) panel[:, 0:q_j] X1[0:q_j, j] + panel[:, K1:K1 + q_j] X2[0:q_j, j], q = depth (NC).
template <class S, int NC>
void stair_kernel(S* C, Index ldc, const S* Ap, const S* X1, Index ldx1, Index K1, const S* X2, Index ldx2,
                  const Index* depth, bool accumulate, Index rows) {
  using V = typename Simd<S>::V;
  constexpr Index L = kLanes<S>, MR = kMR<S>;
  V c0[NC], c1[NC];
  for (int j = 0; j < NC; ++j) {
    c0[j] = V{};
    c1[j] = V{};
  }
  const S* x[NC];
  for (int j = 0; j < NC; ++j) x[j] = X1 + j * ldx1;
  stair_from<S, NC, 0>(c0, c1, Ap, x, depth, 0);
  if (X2) {
    for (int j = 0; j < NC; ++j) x[j] = X2 + j * ldx2;
    stair_from<S, NC, 0>(c0, c1, Ap + K1 * MR, x, depth, 0);
  }
  S tmp[MR];  // (MR,) one column of the block
  for (int j = 0; j < NC; ++j) {
    std::memcpy(tmp, &c0[j], sizeof(V));
    std::memcpy(tmp + L, &c1[j], sizeof(V));
    S* cj = C + j * ldc;
    for (Index r = 0; r < rows; ++r) cj[r] = accumulate ? cj[r] + tmp[r] : tmp[r];
  }
}

template <class S>
void stair_cols(S* C, Index ldc, const S* Ap, const S* X1, Index ldx1, Index K1, const S* X2, Index ldx2,
                const Index* depth, bool acc, Index rows, Index nc) {
  with_cols(nc, [&](auto NC) {
    stair_kernel<S, decltype(NC)::value>(C, ldc, Ap, X1, ldx1, K1, X2, ldx2, depth, acc, rows);
  });
}

}  // namespace

bool reference_kernels() { return g_reference.load(std::memory_order_relaxed); }
void set_reference_kernels(bool on) { g_reference.store(on); }

template <class S> Index PackedPanels<S>::panel_rows() { return kMR<S>; }
template <class S> Index PackedPanels<S>::block_cols() { return kNR; }

template <class S> void PackedPanels<S>::resize(Index G, Index R, Index K) {
  MSRNN_CHECK(G > 0 && R > 0 && K > 0, "packed matrix needs positive sizes, got ", G, " x ", R, " x ", K);
  G_ = G;
  R_ = R;
  K_ = K;
  P_ = (R + kMR<S> - 1) / kMR<S>;
  data_.resize(kMR<S> * K, G * P_);
  bias_.setZero(kMR<S>, G * P_);
}

template <class S> void PackedPanels<S>::pack(const S* Ak, Index lda, Index k0, Index kn, Index u0, Index u1) {
  constexpr Index MR = kMR<S>;
  for (Index g = 0; g < G_; ++g)
    for (Index q = u0 / MR; q * MR < u1; ++q) {
      S* dst = data_.col(g * P_ + q).data() + k0 * MR;  // (MR * kn) k-major
      const Index r0 = q * MR, rows = std::min(MR, R_ - r0);
      for (Index k = 0; k < kn; ++k) {
        const S* src = Ak + (g * R_ + r0) + k * lda;
        Index r = 0;
        for (; r < rows; ++r) dst[k * MR + r] = src[r];
        for (; r < MR; ++r) dst[k * MR + r] = S(0);
      }
    }
}

template <class S>
void PackedPanels<S>::pack_transposed(const S* Akt, Index ldat, Index k0, Index kn, Index u0, Index u1) {
  constexpr Index MR = kMR<S>;
  for (Index g = 0; g < G_; ++g)
    for (Index q = u0 / MR; q * MR < u1; ++q) {
      S* dst = data_.col(g * P_ + q).data() + k0 * MR;  // (MR * kn) k-major
      const Index r0 = q * MR, rows = std::min(MR, R_ - r0);
      for (Index r = 0; r < MR; ++r) {
        if (r < rows) {
          const S* src = Akt + (g * R_ + r0 + r) * ldat;  // column of Akt = row of Ak
          for (Index k = 0; k < kn; ++k) dst[k * MR + r] = src[k];
        } else {
          for (Index k = 0; k < kn; ++k) dst[k * MR + r] = S(0);
        }
      }
    }
}

template <class S> void PackedPanels<S>::set_bias(const S* b, Index u0, Index u1) {
  constexpr Index MR = kMR<S>;
  for (Index g = 0; g < G_; ++g)
    for (Index q = u0 / MR; q * MR < u1; ++q)
      for (Index r = 0; r < MR; ++r) bias_(r, g * P_ + q) = q * MR + r < R_ ? b[g * R_ + q * MR + r] : S(0);
}

template <class S> void PackedPanels<S>::round_to_bfloat16(Index u0, Index u1) {
  constexpr Index MR = kMR<S>;
  MSRNN_CHECK((std::is_same<S, float>::value), "bfloat16 rounding applies to float32 panels only");
  if constexpr (std::is_same<S, float>::value)
    for (Index g = 0; g < G_; ++g)
      for (Index q = u0 / MR; q * MR < u1; ++q)
        round_to_bf16(data_.col(g * P_ + q).data(), data_.col(g * P_ + q).data(), data_.rows());
}

template <class S>
void PackedPanels<S>::multiply(S* C, Index ldc, const S* X1, Index ldx1, Index K1, const S* X2, Index ldx2, Index N,
                               Index u0, Index u1, bool accumulate) const {
  constexpr Index MR = kMR<S>;
  if (u1 <= u0) return;
  MSRNN_CHECK(K1 >= 0 && K1 <= K_ && (K1 == K_ || X2), "packed product: split ", K1, " of depth ", K_);
  for (Index g = 0; g < G_; ++g)
    for (Index q = u0 / MR; q * MR < u1; ++q) {
      const S* panel = data_.col(g * P_ + q).data();
      const S* bias = bias_.col(g * P_ + q).data();
      const Index r0 = q * MR, rows = std::min(MR, u1 - r0);
      S* c = C + g * R_ + r0;
      for (Index j = 0; j < N; j += kNR)
        kernel_cols<S>(c + j * ldc, ldc, panel, bias, X1 + j * ldx1, ldx1, K1, X2 ? X2 + j * ldx2 : nullptr, ldx2,
                       K_ - K1, accumulate, rows, std::min<Index>(kNR, N - j));
    }
}

template <class S>
void PackedPanels<S>::multiply_leading(S* C, Index ldc, const S* X1, Index ldx1, Index K1, const S* X2, Index ldx2,
                                       const Index* q, Index N, bool accumulate) const {
  constexpr Index MR = kMR<S>;
  if (N <= 0) return;
  MSRNN_CHECK(G_ == 1, "leading-block product: one group expected, got ", G_);
  MSRNN_CHECK(K1 >= 0 && K1 <= K_, "leading-block product: split ", K1, " of depth ", K_);
  for (Index j = 0; j < N; ++j)
    MSRNN_CHECK(q[j] >= 0 && q[j] <= std::min(R_, K1) && (!X2 || q[j] <= K_ - K1) && (j == 0 || q[j] >= q[j - 1]),
                "leading-block product: block ", q[j], " of column ", j, " out of range or not sorted");
  Index f = 0;  // first column whose block reaches the panel
  for (Index p = 0; p < P_; ++p) {
    const Index r0 = p * MR;
    while (f < N && q[f] <= r0) ++f;
    if (f == N) break;
    const S* panel = data_.col(p).data();
    const Index rows = std::min(MR, R_ - r0);
    // Register blocks aligned at the last column: the partial block (if any) holds the smallest blocks.
    for (Index j = f, nc = (N - f) % kNR ? (N - f) % kNR : kNR; j < N; j += nc, nc = kNR)
      stair_cols<S>(C + r0 + j * ldc, ldc, panel, X1 + j * ldx1, ldx1, K1, X2 ? X2 + j * ldx2 : nullptr, ldx2, q + j,
                    accumulate, rows, nc);
  }
}

template class PackedPanels<float>;
template class PackedPanels<double>;

void bf16_step_product(float* C, const float* A, const float* b, const float* X, Index M, Index K, Index K1, Index N,
                       Bf16Kernel kernel) {
  MSRNN_CHECK(M > 0 && K > 0 && N > 0 && K1 >= 0 && K1 <= K, "bfloat16 step product: sizes M=", M, " K=", K, " K1=", K1,
              " N=", N);
  if (kernel != Bf16Kernel::Emulated) {
    const char* why = kernel == Bf16Kernel::Amx          ? amx_bf16_unavailable_reason()
                      : kernel == Bf16Kernel::Avx512Bf16 ? avx512_bf16_unavailable_reason()
                                                         : nullptr;  // the model runs anywhere
    if (why) throw std::runtime_error(why);
    Bf16Matrix W;
    W.resize(M, K);
    W.pack(A, M, 0, K1, 0, M);
    W.pack(A + K1 * M, M, K1, K - K1, 0, M);
    W.set_bias(b, 0, M);
    std::vector<std::uint16_t> scratch(static_cast<size_t>(W.scratch_size(N)));  // (N rounded up to 16, Kp) bf16
    W.multiply(C, M, X, K, K1, X + K1, K, N, scratch.data(), kernel);
    return;
  }
  PackedPanels<float> W;  // the emulated path: the rounded A in panels, times the rounded X
  W.resize(1, M, K);
  W.pack(A, M, 0, K, 0, M);
  W.set_bias(b, 0, M);
  W.round_to_bfloat16(0, M);
  std::vector<float> Xr(static_cast<size_t>(K * N));  // (K, N)
  round_to_bf16(Xr.data(), X, K * N);
  W.multiply(C, M, Xr.data(), K, K, nullptr, 0, N, 0, M, false);
}

}  // namespace msrnn
