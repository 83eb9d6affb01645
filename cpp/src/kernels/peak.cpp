// The arithmetic peak of this core module (peak.hpp).
#include "msrnn/kernels/peak.hpp"

#include "msrnn/kernels/streams.hpp"

#include <vector>

#if defined(__AVX512F__) || defined(__FMA__) || defined(__SSE2__)
#include <immintrin.h>
#endif

namespace msrnn {

namespace {

// Independent accumulators: enough to cover the multiply-add latency on every issuing port (4 cycles
// x 2 ports on current x86 cores) and few enough to stay in registers (16 ymm / xmm without AVX-512).
constexpr int kChains = 12;

#if defined(__AVX512F__)
using Vec = __m512;
constexpr int kWidth = 16;
constexpr bool kFused = true;
inline Vec splat(float x) { return _mm512_set1_ps(x); }
inline Vec madd(Vec x, Vec a, Vec c) { return _mm512_fmadd_ps(x, a, c); }
inline void store(float* p, Vec x) { _mm512_storeu_ps(p, x); }
inline Vec load(const float* p) { return _mm512_loadu_ps(p); }
#elif defined(__FMA__)
using Vec = __m256;
constexpr int kWidth = 8;
constexpr bool kFused = true;
inline Vec splat(float x) { return _mm256_set1_ps(x); }
inline Vec madd(Vec x, Vec a, Vec c) { return _mm256_fmadd_ps(x, a, c); }
inline void store(float* p, Vec x) { _mm256_storeu_ps(p, x); }
inline Vec load(const float* p) { return _mm256_loadu_ps(p); }
#elif defined(__SSE2__)
using Vec = __m128;
constexpr int kWidth = 4;
constexpr bool kFused = false;
inline Vec splat(float x) { return _mm_set1_ps(x); }
inline Vec madd(Vec x, Vec a, Vec c) { return _mm_add_ps(_mm_mul_ps(x, a), c); }
inline void store(float* p, Vec x) { _mm_storeu_ps(p, x); }
inline Vec load(const float* p) { return _mm_loadu_ps(p); }
#else
struct Vec { float v; };
constexpr int kWidth = 1;
constexpr bool kFused = false;
inline Vec splat(float x) { return {x}; }
inline Vec madd(Vec x, Vec a, Vec c) { return {x.v * a.v + c.v}; }
inline void store(float* p, Vec x) { *p = x.v; }
inline Vec load(const float* p) { return {*p}; }
#endif

constexpr int kLanes = kChains * kWidth;

// One thread's rounds; the sum of its lanes after the last.
double run_chains(std::int64_t iterations, float a, float c) {
  float start[kLanes];  // (kLanes) x_0 of each lane
  for (int l = 0; l < kLanes; ++l) start[l] = 0.001f * float(l);
  Vec x[kChains];
  for (int j = 0; j < kChains; ++j) x[j] = load(start + j * kWidth);
  const Vec va = splat(a), vc = splat(c);
  for (std::int64_t n = 0; n < iterations; ++n)
    for (int j = 0; j < kChains; ++j) x[j] = madd(x[j], va, vc);
  float out[kLanes];  // (kLanes) x_iterations of each lane
  for (int j = 0; j < kChains; ++j) store(out + j * kWidth, x[j]);
  double sum = 0;
  for (int l = 0; l < kLanes; ++l) sum += out[l];
  return sum;
}

}  // namespace

PeakRun multiply_add_peak(std::int64_t iterations, float a, float c) {
  const int nt = std::max(1, get_num_threads());
  std::vector<double> sums(nt, 0.0);  // (threads) each thread's lane sum
  int team = 1;                       // the threads the runtime gave
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
#endif
  {
    if (thread_id() == 0) team = threads_in_team();
    sums[thread_id()] = run_chains(iterations, a, c);
  }
  PeakRun r;
  for (double s : sums) r.checksum += s;  // thread order: the same bits for a given thread count
  r.threads = team;
  r.lanes = kLanes;
  r.vector_floats = kWidth;
  r.fused = kFused;
  r.flops = 2.0 * double(iterations) * kLanes * team;
  return r;
}

}  // namespace msrnn
