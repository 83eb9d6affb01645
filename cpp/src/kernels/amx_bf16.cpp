// bfloat16 step products (see amx_bf16.hpp): the packing and conversion shared by the kernels, the
// AMX kernel, the CPU checks of both hardware kernels and the choice between them. Intrinsics and
// plain loops only; every function that executes AMX or AVX512-BF16 instructions carries its own
// target attribute, and only the x86-64-v4 module defines MSRNN_AMX (the other modules compile the
// portable parts and report that they have no AMX or AVX512-BF16 kernel).
#include "msrnn/kernels/amx_bf16.hpp"

#include "msrnn/kernels/avx512_bf16.hpp"

#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#define MSRNN_X86
#include <cpuid.h>
#endif
#if defined(MSRNN_AMX)
#include <immintrin.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif

#define MSRNN_STRINGIFY2(x) #x
#define MSRNN_STRINGIFY(x) MSRNN_STRINGIFY2(x)

namespace msrnn {

namespace {

using Idx = std::ptrdiff_t;
constexpr Idx kT = 16;                // rows of a tile: units of A, batch columns of X and C
constexpr Idx kKB = 32;               // bf16 per tile row: depth per tile
constexpr Idx kTileElems = kT * kKB;  // bf16 per A or X tile (1 KiB)

Idx round_up(Idx n, Idx m) { return (n + m - 1) / m * m; }
Idx min_idx(Idx a, Idx b) { return a < b ? a : b; }

// float32 -> bfloat16 bits, round to nearest even; denormals flush to signed zero; NaN stays NaN.
std::uint16_t bf16_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  if ((u & 0x7f800000u) == 0) return std::uint16_t((u >> 16) & 0x8000u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return std::uint16_t(u >> 16);
}

std::atomic<bool> g_bf16_model{false};  // set_bf16_model_kernel

#if defined(MSRNN_X86)
// The OS has enabled XSAVE and the register states `mask` of XCR0.
bool os_enabled(unsigned mask) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return false;
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & mask) == mask;
}

// Why this CPU (and OS) cannot run VDPBF16PS on zmm registers, or nullptr.
const char* avx512_bf16_cpu_reason() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & bit_AVX512F))
    return "the CPU has no AVX-512 (CPUID.(EAX=7,ECX=0):EBX bit 16, AVX512F, absent)";
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d) || !(a & bit_AVX512BF16))
    return "the CPU has no AVX512-BF16 (CPUID.(EAX=7,ECX=1):EAX bit 5 absent)";
  if (!os_enabled(0xe6u)) return "the OS has not enabled the AVX-512 register state (XCR0 bits 1-2 and 5-7)";
  return nullptr;
}

// Why this CPU (and OS) cannot run the AMX kernel, or nullptr (before the tile-data permission).
const char* amx_cpu_reason() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & bit_AMX_TILE) || !(d & bit_AMX_BF16))
    return "the CPU has no AMX-BF16 (CPUID.(EAX=7,ECX=0):EDX bit 22 AMX-BF16 / bit 24 AMX-TILE absent)";
  if (const char* why = avx512_bf16_cpu_reason()) return why;  // the conversions use AVX512-BF16
  if (!os_enabled(0x60000u)) return "the OS has not enabled the AMX tile state (XCR0 bits 17-18)";
  return nullptr;
}
#endif

// Why the AMX kernel (amx) or the AVX512-BF16 one cannot run: `cpu`, the CPU check's reason, when
// there is one; else the module's reason when this module lacks the kernel; else nullptr.
const char* module_reason(const char* cpu, bool amx) {
  if (cpu) return cpu;
#if defined(MSRNN_AMX)
  (void)amx;
  return nullptr;
#else
  return amx ? "this module of the core (" MSRNN_STRINGIFY(MSRNN_MODULE_NAME) ") was built without the AMX kernel "
               "(it is only in the x86-64 AVX-512 variant, _core_avx512)"
             : "this module of the core (" MSRNN_STRINGIFY(MSRNN_MODULE_NAME) ") was built without the AVX512-BF16 "
               "kernel (it is only in the x86-64 AVX-512 variant, _core_avx512)";
#endif
}

const char* check_avx512_bf16() {
#if defined(MSRNN_X86)
  return module_reason(avx512_bf16_cpu_reason(), false);
#else
  return "AVX512-BF16 is an x86-64 feature; this CPU is not x86-64";
#endif
}

const char* tile_permission();

const char* check_amx() {
#if defined(MSRNN_X86)
  if (const char* why = module_reason(amx_cpu_reason(), true)) return why;
  return tile_permission();
#else
  return "AMX is an x86-64 feature; this CPU is not x86-64";
#endif
}

// The vector conversions to bf16 can run: this module has them and the CPU has AVX512-BF16.
bool vector_bf16() {
#if defined(MSRNN_AMX)
  static const bool ok = avx512_bf16_cpu_reason() == nullptr;
  return ok;
#else
  return false;
#endif
}

// d[i] = bf16(s[i]) for i < n, with the vector conversion (only when vector_bf16()).
void convert_piece_vector(std::uint16_t* d, const float* s, Idx n);

// One tile row from 16 rows of two depth columns: row[2n] = bf16(a0[n]), row[2n + 1] = bf16(a1[n]),
// with the vector conversion (only when vector_bf16()).
void pack_pair_vector(std::uint16_t* row, const float* a0, const float* a1);

// d[i] = bf16(s[i]) for i < n.
void convert_piece(std::uint16_t* d, const float* s, Idx n) {
  if (vector_bf16()) return convert_piece_vector(d, s, n);
  for (Idx i = 0; i < n; ++i) d[i] = bf16_bits(s[i]);
}

}  // namespace

const char* bf16_kernel_name(Bf16Kernel k) {
  switch (k) {
    case Bf16Kernel::Amx: return "amx";
    case Bf16Kernel::Avx512Bf16: return "avx512-bf16";
    case Bf16Kernel::Avx512Bf16Model: return "avx512-bf16-model";
    case Bf16Kernel::Emulated: return "emulated";
  }
  return "?";
}

const char* amx_bf16_unavailable_reason() {
  static const char* reason = check_amx();  // once per process (the permission is per process)
  return reason;
}

const char* avx512_bf16_unavailable_reason() {
  static const char* reason = check_avx512_bf16();
  return reason;
}

const char* bf16_unavailable_reason() {
  if (bf16_model_kernel() || !amx_bf16_unavailable_reason() || !avx512_bf16_unavailable_reason()) return nullptr;
  static const std::string both =
      std::string(
          "no bfloat16 kernel can run here: AMX (Intel Xeon Sapphire Rapids and "
          "later): ") +
      amx_bf16_unavailable_reason() +
      "; AVX512-BF16 (AMD Zen 4 and later, Intel Cooper Lake): " + avx512_bf16_unavailable_reason();
  return both.c_str();
}

Bf16Kernel bf16_kernel() {
  if (bf16_model_kernel()) return Bf16Kernel::Avx512Bf16Model;
  if (!amx_bf16_unavailable_reason()) return Bf16Kernel::Amx;
  if (!avx512_bf16_unavailable_reason()) return Bf16Kernel::Avx512Bf16;
  throw std::runtime_error(bf16_unavailable_reason());
}

void set_bf16_model_kernel(bool on) { g_bf16_model.store(on); }
bool bf16_model_kernel() { return g_bf16_model.load(std::memory_order_relaxed); }

void round_to_bf16(float* dst, const float* src, std::ptrdiff_t n) {
  for (Idx i = 0; i < n; ++i) {
    const std::uint32_t u = std::uint32_t(bf16_bits(src[i])) << 16;
    std::memcpy(dst + i, &u, sizeof(u));
  }
}

Idx Bf16Matrix::block_cols(Bf16Kernel kernel) { return kernel == Bf16Kernel::Amx ? kT : kDpbf16Columns; }

void Bf16Matrix::resize(Idx M, Idx K) {
  M_ = M;
  K_ = K;
  Mp_ = round_up(M, 2 * kT);
  Kp_ = round_up(K, kKB);
  w_.assign(static_cast<size_t>(Mp_ * Kp_), 0);
  bias_.assign(static_cast<size_t>(Mp_), 0.0f);
}

void Bf16Matrix::pack(const float* Ak, Idx lda, Idx k0, Idx kn, Idx r0, Idx r1) {
  const Idx nK = Kp_ / kKB;
  const bool vec = vector_bf16();
  for (Idx t0 = r0; t0 < r1; t0 += kT) {  // one unit tile at a time: its tiles are contiguous
    const Idx ut = t0 / kT, rows = min_idx(kT, r1 - t0);
    std::uint16_t* tiles = w_.data() + ut * nK * kTileElems;  // (nK, 16 x 32)
    Idx k = 0;
    while (k < kn) {
      const Idx kk = k0 + k, kb = kk / kKB, k2 = (kk % kKB) / 2, p = kk % 2;
      const bool pair = p == 0 && k + 1 < kn;                   // depth kk and kk + 1 fill one tile row
      const float* a0 = Ak + k * lda + t0;                      // rows t0.. of column kk of A
      std::uint16_t* row = tiles + kb * kTileElems + k2 * kKB;  // tile row k2 (32 bf16)
      if (pair && rows == kT && vec)
        pack_pair_vector(row, a0, a0 + lda);
      else
        for (Idx n = 0; n < rows; ++n) {
          row[2 * n + p] = bf16_bits(a0[n]);
          if (pair) row[2 * n + 1] = bf16_bits(a0[lda + n]);
        }
      k += pair ? 2 : 1;
    }
  }
}

void Bf16Matrix::set_bias(const float* b, Idx r0, Idx r1) {
  for (Idx r = r0; r < r1; ++r) bias_[r] = b[r];
}

Idx Bf16Matrix::scratch_size(Idx N) const { return round_up(N, kT) * Kp_; }

void Bf16Matrix::convert(std::uint16_t* scratch, const float* X1, Idx ldx1, Idx K1, const float* X2, Idx ldx2,
                         Idx N) const {
  const Idx Np = round_up(N, kT);
  for (Idx j = 0; j < N; ++j) {
    std::uint16_t* dst = scratch + j * Kp_;  // (Kp) row j: [x1_j (K1); x2_j (K - K1)], zero-padded
    convert_piece(dst, X1 + j * ldx1, K1);
    if (K_ > K1) convert_piece(dst + K1, X2 + j * ldx2, K_ - K1);
    for (Idx k = K_; k < Kp_; ++k) dst[k] = 0;
  }
  std::memset(scratch + N * Kp_, 0, sizeof(std::uint16_t) * static_cast<size_t>((Np - N) * Kp_));
}

void Bf16Matrix::multiply(float* C, Idx ldc, const float* X1, Idx ldx1, Idx K1, const float* X2, Idx ldx2, Idx N,
                          std::uint16_t* scratch, Bf16Kernel kernel) const {
  if (kernel == Bf16Kernel::Emulated) throw std::logic_error("Bf16Matrix::multiply has no emulated kernel");
  if (N <= 0 || M_ <= 0) return;
  convert(scratch, X1, ldx1, K1, X2, ldx2, N);
  if (kernel == Bf16Kernel::Amx)
    multiply_amx(C, ldc, N, scratch);
  else
    dpbf16_multiply(*this, C, ldc, scratch, N, kernel == Bf16Kernel::Avx512Bf16Model);
}

#if !defined(MSRNN_AMX)

// Never reached: callers check the reasons first, which are non-null here.
void Bf16Matrix::multiply_amx(float*, Idx, Idx, const std::uint16_t*) const {}

namespace {
const char* tile_permission() { return nullptr; }  // not reached: module_reason() refused first
void convert_piece_vector(std::uint16_t*, const float*, Idx) {}
void pack_pair_vector(std::uint16_t*, const float*, const float*) {}
}  // namespace

#else

namespace {

const char* tile_permission() {
#if defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0)
    return "Linux refused the AMX tile-data permission (arch_prctl ARCH_REQ_XCOMP_PERM)";
  return nullptr;
#else
  return "AMX needs Linux's tile-data permission request; this is not Linux";
#endif
}

__attribute__((target("avx512bf16"))) void convert_piece_vector(std::uint16_t* d, const float* s, Idx n) {
  Idx i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(s + i)));
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm256_mask_storeu_epi16(d + i, m, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, s + i)));
  }
}

__attribute__((target("avx512bf16"))) void pack_pair_vector(std::uint16_t* row, const float* a0, const float* a1) {
  alignas(64) static const std::uint16_t interleave[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                           21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                           11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i v = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(a1), _mm512_loadu_ps(a0));  // [a0; a1] in bf16
  _mm512_storeu_si512(row, _mm512_permutexvar_epi16(_mm512_load_si512(interleave), v));
}

// The 64-byte tile configuration (palette 1): 8 tiles of 16 rows x 64 bytes.
struct TileConfig {
  std::uint8_t palette_id;
  std::uint8_t start_row;
  std::uint8_t reserved[14];
  std::uint16_t colsb[16];
  std::uint8_t rows[16];
};

__attribute__((target("amx-tile"))) void load_tile_config() {
  alignas(64) TileConfig cfg;
  std::memset(&cfg, 0, sizeof(cfg));
  cfg.palette_id = 1;
  for (int i = 0; i < 8; ++i) {
    cfg.rows[i] = kT;
    cfg.colsb[i] = 64;
  }
  // GCC 12's _tile_loadconfig tells the compiler it reads only 8 bytes, so the stores above could
  // be dropped; this asm names the whole 64-byte configuration as its input.
  __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
}

__attribute__((target("amx-tile"))) void release_tiles() { _tile_release(); }

// Tile numbers: C(a, b) = tile 2a + b for batch tile a and unit tile b; X(a) = 4 + a; A(b) = 6 + b.
#define MSRNN_STORE_C(t, a, b)                                                                       \
  do {                                                                                               \
    const Idx rows = min_idx(kT, N - j0 - (a) * kT), cols = min_idx(kT, M - u0 - (b) * kT);          \
    if (rows > 0 && cols > 0) {                                                                      \
      float* c = C + (j0 + (a) * kT) * ldc + u0 + (b) * kT;                                          \
      if (rows == kT && cols == kT) {                                                                \
        _tile_stored(t, c, ldc * Idx(sizeof(float)));                                                \
      } else {                                                                                       \
        _tile_stored(t, tmp, kT * Idx(sizeof(float)));                                               \
        for (Idx r = 0; r < rows; ++r) std::memcpy(c + r * ldc, tmp + r * kT, sizeof(float) * cols); \
      }                                                                                              \
    }                                                                                                \
  } while (0)

// One register block: units [u0, u0 + 32) x batch columns [j0, j0 + 16 NA) of C over the whole depth.
// xs: (16 NA, Kp) bf16 rows of X^T; w0, w1: the nK depth tiles of unit tiles u0/16 and u0/16 + 1;
// bias: (32) the block's bias.
template <int NA>
__attribute__((target("amx-tile,amx-bf16"))) void block(float* C, Idx ldc, Idx M, Idx N, Idx u0, Idx j0,
                                                        const std::uint16_t* xs, Idx Kp, const std::uint16_t* w0,
                                                        const std::uint16_t* w1, const float* bias) {
  alignas(64) float tmp[kT * kT];  // (16, 16) one C tile, for partial stores
  const Idx nK = Kp / kKB, sx = Kp * Idx(sizeof(std::uint16_t));
  _tile_loadd(0, bias, 0);  // stride 0: every row (batch column) starts from the bias
  _tile_loadd(1, bias + kT, 0);
  if (NA == 2) {
    _tile_loadd(2, bias, 0);
    _tile_loadd(3, bias + kT, 0);
  }
  for (Idx kb = 0; kb < nK; ++kb) {
    {  // the next depth tiles of A into L1 (a tile load that misses L1 stalls the tile unit);
       // past the last one these are the next unit pair's first tiles (prefetches never fault)
      const char* p0 = reinterpret_cast<const char*>(w0 + (kb + 1) * kTileElems);
      const char* p1 = reinterpret_cast<const char*>(w1 + (kb + 1) * kTileElems);
      for (int l = 0; l < int(kTileElems * sizeof(std::uint16_t)); l += 64) {
        _mm_prefetch(p0 + l, _MM_HINT_T0);
        _mm_prefetch(p1 + l, _MM_HINT_T0);
      }
    }
    _tile_loadd(4, xs + kb * kKB, sx);
    _tile_loadd(6, w0 + kb * kTileElems, 64);
    _tile_loadd(7, w1 + kb * kTileElems, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if (NA == 2) {
      _tile_loadd(5, xs + kT * Kp + kb * kKB, sx);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  MSRNN_STORE_C(0, 0, 0);
  MSRNN_STORE_C(1, 0, 1);
  if (NA == 2) {
    MSRNN_STORE_C(2, 1, 0);
    MSRNN_STORE_C(3, 1, 1);
  }
}
#undef MSRNN_STORE_C

}  // namespace

void Bf16Matrix::multiply_amx(float* C, Idx ldc, Idx N, const std::uint16_t* scratch) const {
  const Idx Np = round_up(N, kT), nK = Kp_ / kKB;
  // GCC's tile loads do not declare that they read memory: keep the conversion's stores before them.
  __asm__ volatile("" : : : "memory");
  load_tile_config();
  // Unit pairs outer: the packed A streams past once per call (from L2 / L3), each of its tiles
  // used by every batch column pair while in L1.
  for (Idx u0 = 0; u0 < Mp_; u0 += 2 * kT) {
    const std::uint16_t* w0 = w_.data() + (u0 / kT) * nK * kTileElems;
    const std::uint16_t* w1 = w0 + nK * kTileElems;
    const float* b = bias_.data() + u0;
    Idx j0 = 0;
    for (; j0 + 2 * kT <= Np; j0 += 2 * kT) block<2>(C, ldc, M_, N, u0, j0, scratch + j0 * Kp_, Kp_, w0, w1, b);
    if (j0 < Np) block<1>(C, ldc, M_, N, u0, j0, scratch + j0 * Kp_, Kp_, w0, w1, b);
  }
  release_tiles();
}

#endif

}  // namespace msrnn
