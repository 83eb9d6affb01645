#include "msrnn/kernels/optim.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace msrnn {

namespace {
constexpr Index kBlock = 1 << 14;  // reduction block: partial sums per block, added in order
}

// g[i], clamped to [-clip, clip] when clip > 0 (clip = 0: g[i] untouched, NaN included).
template <class S> struct Clamp {
  explicit Clamp(double clip) : on(clip > 0.0), c(S(clip)) {
    MSRNN_CHECK(clip >= 0.0 && !std::isnan(clip), "clip value must be positive (or 0: off), got ", clip);
  }
  S operator()(S g) const { return on ? std::min(c, std::max(-c, g)) : g; }
  bool on;
  S c;
};

template <class S>
void adam_step(S* w, const S* g, S* m, S* v, Index P, long long step, double lr, double beta1, double beta2, double eps,
               double weight_decay, double clip) {
  MSRNN_CHECK(step >= 1, "Adam step count starts at 1, got ", step);
  const double c1 = 1.0 - std::pow(beta1, double(step));
  const double c2 = 1.0 - std::pow(beta2, double(step));
  const S a = S(lr / c1), b1 = S(beta1), b2 = S(beta2), wd = S(weight_decay), e = S(eps);
  const Clamp<S> clamp(clip);
  const S rc2 = S(1.0 / std::sqrt(c2));
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < P; ++i) {
    const S gi = clamp(g[i]) + wd * w[i];
    m[i] = b1 * m[i] + (S(1) - b1) * gi;
    v[i] = b2 * v[i] + (S(1) - b2) * gi * gi;
    w[i] -= a * m[i] / (std::sqrt(v[i]) * rc2 + e);
  }
}

template <class S>
void sgd_step(S* w, const S* g, S* buf, Index P, long long step, double lr, double momentum, double weight_decay,
              double clip) {
  const S l = S(lr), mu = S(momentum), wd = S(weight_decay);
  const Clamp<S> clamp(clip);
  auto grad = [&](Index i) { return clamp(g[i]) + wd * w[i]; };
  if (mu == S(0)) {
#pragma omp parallel for schedule(static)
    for (Index i = 0; i < P; ++i) w[i] -= l * grad(i);
  } else if (step <= 1) {
#pragma omp parallel for schedule(static)
    for (Index i = 0; i < P; ++i) w[i] -= l * (buf[i] = grad(i));
  } else {
#pragma omp parallel for schedule(static)
    for (Index i = 0; i < P; ++i) w[i] -= l * (buf[i] = mu * buf[i] + grad(i));
  }
}

template <class S> double global_norm(const S* g, Index P) {
  const Index nb = (P + kBlock - 1) / kBlock;
  std::vector<double> part(nb, 0.0);
#pragma omp parallel for schedule(static)
  for (Index k = 0; k < nb; ++k) {
    double s = 0.0;
    for (Index i = k * kBlock; i < std::min(P, (k + 1) * kBlock); ++i) s += double(g[i]) * double(g[i]);
    part[k] = s;
  }
  double total = 0.0;
  for (double s : part) total += s;
  return std::sqrt(total);
}

template <class S> double clip_by_norm(S* g, Index P, double max_norm) {
  MSRNN_CHECK(max_norm > 0.0, "clip norm must be positive, got ", max_norm);
  const double norm = global_norm(g, P);
  if (norm > max_norm) {
    const S scale = S(max_norm / (norm + 1e-6));
#pragma omp parallel for schedule(static)
    for (Index i = 0; i < P; ++i) g[i] *= scale;
  }
  return norm;
}

template <class S> void clip_by_value(S* g, Index P, double clip) {
  MSRNN_CHECK(clip > 0.0, "clip value must be positive, got ", clip);
  const Clamp<S> clamp(clip);
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < P; ++i) g[i] = clamp(g[i]);
}

template <class S> bool all_finite(const S* x, Index P) {
  bool ok = true;
#pragma omp parallel for schedule(static) reduction(&& : ok)
  for (Index i = 0; i < P; ++i) ok = ok && std::isfinite(x[i]);
  return ok;
}

#define MSRNN_INSTANTIATE(S)                                                                                          \
  template void adam_step<S>(S*, const S*, S*, S*, Index, long long, double, double, double, double, double, double); \
  template void sgd_step<S>(S*, const S*, S*, Index, long long, double, double, double, double);                      \
  template double global_norm<S>(const S*, Index);                                                                    \
  template double clip_by_norm<S>(S*, Index, double);                                                                 \
  template void clip_by_value<S>(S*, Index, double);                                                                  \
  template bool all_finite<S>(const S*, Index);
MSRNN_INSTANTIATE(float)
MSRNN_INSTANTIATE(double)
#undef MSRNN_INSTANTIATE

}  // namespace msrnn
