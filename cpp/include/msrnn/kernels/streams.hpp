// Execution the recurrent cores share: threads over streams, per-thread sums in a fixed order, and
// gathering the active columns of a step.
//
// Threads over streams. The B streams (batch columns) of a chunk are independent, so each OpenMP
// thread owns a contiguous range of them and runs every step and layer of the chunk on it; threads
// meet once, after packing the weights (each packs its share), and never per step. Every stream's
// recurrence is then computed the same way whatever the thread count; only sums over streams (a
// layer-norm gain's gradient, say) depend on how the streams were split, and those are summed in
// thread order (in_thread_order), so a given thread count always gives the same bits.
//
// Also here: splitting rows or columns of one product over the threads with single-threaded Eigen
// inside (parallel_slices; Eigen's own threading busy-waits, which collapses when the cores are
// shared), and the gather / scatter of the active columns of a (rows, B) step block into a dense
// (rows, k) block and back, which the cores that skip work (HM-LSTM COPY, VCRNN partial updates)
// use to keep their products dense.
#pragma once

#include "msrnn/model/common.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <utility>
#include <vector>

namespace msrnn {

// Units (or columns) [u0, u1) of R owned by thread k of n: contiguous, starting at multiples of
// `align`.
inline std::pair<Index, Index> thread_units(Index R, Index align, int k, int n) {
  const Index blocks = (R + align - 1) / align;
  const Index b0 = blocks * k / n, b1 = blocks * (k + 1) / n;
  return {std::min(R, b0 * align), std::min(R, b1 * align)};
}

inline int thread_id() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

inline int threads_in_team() {
#ifdef _OPENMP
  return omp_get_num_threads();
#else
  return 1;
#endif
}

// f(begin, count) on contiguous slices of [0, n) (multiples of `align` except the last), one per
// thread of the core's thread count, run in parallel. Eigen inside runs single-threaded.
template <class F> void parallel_slices(Index n, Index align, F&& f) {
  const int nt = std::max(1, std::min<int>(get_num_threads(), int((n + align - 1) / align)));
  if (nt == 1) {
    f(Index(0), n);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    const auto r = thread_units(n, align, thread_id(), threads_in_team());
    if (r.second > r.first) f(r.first, r.second - r.first);
  }
}

// Threads for the time loop over B streams: the core's thread count (at most one thread per
// stream) in the fast path, one with the reference kernels.
inline int stream_threads(Index B, bool fast) {
  return fast ? std::max(1, std::min<int>(get_num_threads(), int(B))) : 1;
}

// One parallel region of nt threads: pack(k, team) on every thread (each packs its share of the
// weights), a barrier, then body(j0, nb, k) on thread k's streams [j0, j0 + nb) of B, ranges
// starting at multiples of `align` (threads left without streams skip body). Returns, per thread,
// whether it owned streams (for in_thread_order). nt = 1 runs on the calling thread.
template <class Pack, class Body>
std::vector<char> over_streams(Index B, int nt, Index align, Pack&& pack, Body&& body) {
  std::vector<char> ran(std::max(nt, 1), 0);
  if (nt <= 1) {
    pack(0, 1);
    if (B > 0) body(Index(0), B, 0);
    ran[0] = B > 0;
    return ran;
  }
#pragma omp parallel num_threads(nt)
  {
    const int k = thread_id(), team = threads_in_team();
    pack(k, team);
#pragma omp barrier
    const auto cols = thread_units(B, align, k, team);
    if (cols.second > cols.first) {
      body(cols.first, cols.second - cols.first, k);
      ran[k] = 1;
    }
  }
  return ran;
}

// The same with nothing to pack.
template <class Body> std::vector<char> over_streams(Index B, int nt, Index align, Body&& body) {
  return over_streams(B, nt, align, [](int, int) {}, std::forward<Body>(body));
}

// add(k) for every thread k that owned streams, in thread order: per-thread partial sums
// (gradients of parameters shared by all streams) reduced in a fixed order.
template <class Add> void in_thread_order(const std::vector<char>& ran, Add&& add) {
  for (int k = 0; k < int(ran.size()); ++k)
    if (ran[k]) add(k);
}

// dst (rows, k) = the columns idx (k of them) of src (rows, B); with scale, column j is multiplied
// by w = scale[idx[j]] (by 1 - w with one_minus).
template <class S, class Dst, class Src>
void gather_columns(Dst&& dst, const Src& src, const std::vector<Index>& idx, const S* scale = nullptr,
                    bool one_minus = false) {
  for (size_t j = 0; j < idx.size(); ++j) {
    if (scale) {
      S w = scale[idx[j]];
      if (one_minus) w = S(1) - w;
      dst.col(j) = w * src.col(idx[j]);
    } else {
      dst.col(j) = src.col(idx[j]);
    }
  }
}

// The columns idx of dst (rows, B) = src (rows, k).
template <class Dst, class Src> void scatter_columns(Dst&& dst, const Src& src, const std::vector<Index>& idx) {
  for (size_t j = 0; j < idx.size(); ++j) dst.col(idx[j]) = src.col(j);
}

}  // namespace msrnn
