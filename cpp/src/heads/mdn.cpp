#include "msrnn/heads/mdn.hpp"

#include "msrnn/kernels/gemm.hpp"

#include <algorithm>
#include <cmath>

namespace msrnn {

namespace {

constexpr double kLog2Pi = 1.8378770664093453;  // log(2 pi)

// log(1 + exp(a)) without overflow.
double softplus(double a) { return a > 0.0 ? a + std::log1p(std::exp(-a)) : std::log1p(std::exp(a)); }

// log cosh(a) without overflow: |a| + log(1 + exp(-2|a|)) - log 2.
double log_cosh(double a) {
  const double m = std::fabs(a);
  return m + std::log1p(std::exp(-2.0 * m)) - 0.6931471805599453;
}

}  // namespace

template <class S> MixtureColumn mixture_column(const S* z, Index M, double temperature, double bias) {
  MSRNN_CHECK(temperature > 0.0 && std::isfinite(temperature), "temperature must be positive, got ", temperature);
  MSRNN_CHECK(bias >= 0.0 && std::isfinite(bias), "bias must be >= 0, got ", bias);
  MixtureColumn c;
  c.e = 1.0 / (1.0 + std::exp(double(z[0]) / temperature));
  c.pi.resize(M);
  c.mu1.resize(M);
  c.mu2.resize(M);
  c.s1.resize(M);
  c.s2.resize(M);
  c.rho.resize(M);
  double top = -INFINITY;
  for (Index j = 0; j < M; ++j) {
    c.pi[j] = double(z[1 + j]) * (1.0 + bias) / temperature;
    top = std::max(top, c.pi[j]);
  }
  double sum = 0.0;
  for (Index j = 0; j < M; ++j) sum += (c.pi[j] = std::exp(c.pi[j] - top));
  const double widen = std::sqrt(temperature);
  for (Index j = 0; j < M; ++j) {
    c.pi[j] /= sum;
    c.mu1[j] = double(z[1 + M + j]);
    c.mu2[j] = double(z[1 + 2 * M + j]);
    c.s1[j] = std::exp(double(z[1 + 3 * M + j]) - bias) * widen;
    c.s2[j] = std::exp(double(z[1 + 4 * M + j]) - bias) * widen;
    c.rho[j] = std::tanh(double(z[1 + 5 * M + j]));
  }
  return c;
}

template <class S> double mixture_nll(S* dz, const S* z, const S* x, Index M) {
  const double x1 = double(x[0]), x2 = double(x[1]), x3 = double(x[2]);
  // log pi_j = pi^_j - log sum exp pi^ ; log N_j from the header's formula; a_j = log pi_j + log N_j
  double pmax = -INFINITY;
  for (Index j = 0; j < M; ++j) pmax = std::max(pmax, double(z[1 + j]));
  double psum = 0.0;
  for (Index j = 0; j < M; ++j) psum += std::exp(double(z[1 + j]) - pmax);
  const double log_z = pmax + std::log(psum);
  constexpr Index kStack = 64;  // mixtures held on the stack; more take the heap
  double stack[4 * kStack];
  std::vector<double> heap(M > kStack ? 4 * M : 0);
  double* a = M > kStack ? heap.data() : stack;         // (M) log pi_j + log N_j
  double *d1 = a + M, *d2 = a + 2 * M, *q = a + 3 * M;  // (M) each: d1_j, d2_j, Q_j
  double amax = -INFINITY;
  for (Index j = 0; j < M; ++j) {
    const double ls1 = double(z[1 + 3 * M + j]), ls2 = double(z[1 + 4 * M + j]), rh = double(z[1 + 5 * M + j]);
    const double rho = std::tanh(rh);
    const double log_1mr2 = -2.0 * log_cosh(rh);  // log(1 - rho^2)
    d1[j] = (x1 - double(z[1 + M + j])) * std::exp(-ls1);
    d2[j] = (x2 - double(z[1 + 2 * M + j])) * std::exp(-ls2);
    q[j] = d1[j] * d1[j] + d2[j] * d2[j] - 2.0 * rho * d1[j] * d2[j];
    a[j] = double(z[1 + j]) - log_z - kLog2Pi - ls1 - ls2 - 0.5 * log_1mr2 - 0.5 * q[j] * std::exp(-log_1mr2);
    amax = std::max(amax, a[j]);
  }
  double asum = 0.0;
  for (Index j = 0; j < M; ++j) asum += std::exp(a[j] - amax);
  const double log_mix = amax + std::log(asum);
  // -log e = softplus(e^), -log(1 - e) = softplus(-e^)
  const double e_hat = double(z[0]);
  const double nll = -log_mix + (x3 > 0.5 ? softplus(e_hat) : softplus(-e_hat));
  if (dz) {
    dz[0] = S(x3 - 1.0 / (1.0 + std::exp(e_hat)));
    for (Index j = 0; j < M; ++j) {
      const double g = std::exp(a[j] - log_mix);  // gamma_j
      const double pi = std::exp(double(z[1 + j]) - log_z);
      const double rho = std::tanh(double(z[1 + 5 * M + j]));
      const double C = std::exp(2.0 * log_cosh(double(z[1 + 5 * M + j])));  // 1 / (1 - rho^2)
      const double e1 = d1[j] - rho * d2[j], e2 = d2[j] - rho * d1[j];
      dz[1 + j] = S(pi - g);
      dz[1 + M + j] = S(-g * C * e1 * std::exp(-double(z[1 + 3 * M + j])));
      dz[1 + 2 * M + j] = S(-g * C * e2 * std::exp(-double(z[1 + 4 * M + j])));
      dz[1 + 3 * M + j] = S(-g * (C * d1[j] * e1 - 1.0));
      dz[1 + 4 * M + j] = S(-g * (C * d2[j] * e2 - 1.0));
      dz[1 + 5 * M + j] = S(-g * (d1[j] * d2[j] + rho * (1.0 - C * q[j])));
    }
  }
  return nll;
}

namespace {

using ArrD = Eigen::Array<double, Eigen::Dynamic, Eigen::Dynamic>;  // (rows, nb)
using RowD = Eigen::Array<double, 1, Eigen::Dynamic>;               // (1, nb)

// log cosh(a) elementwise: |a| + log(1 + exp(-2|a|)) - log 2.
ArrD log_cosh_of(const ArrD& a) { return a.abs() + (-2.0 * a.abs()).exp().log1p() - 0.6931471805599453; }
// log(1 + exp(a)) elementwise, without overflow.
RowD softplus_of(const RowD& a) { return a.max(0.0) + (-a.abs()).exp().log1p(); }
// The log-sum-exp of each column of a (rows, nb).
RowD logsumexp_cols(const ArrD& a) {
  const RowD top = a.colwise().maxCoeff();
  return top + (a.rowwise() - top).exp().colwise().sum().log();
}

}  // namespace

template <class S> void mixture_nll_columns(double* nll, S* dz, const S* z, const S* x, Index M, Index nb) {
  const Index R = 6 * M + 1;
  const ArrD Z = Eigen::Map<const Mat<S>>(z, R, nb).template cast<double>().array();  // (R, nb)
  const ArrD X = Eigen::Map<const Mat<S>>(x, 3, nb).template cast<double>().array();  // (3, nb)
  const ArrD P = Z.middleRows(1, M), LS1 = Z.middleRows(1 + 3 * M, M), LS2 = Z.middleRows(1 + 4 * M, M);
  const ArrD RH = Z.middleRows(1 + 5 * M, M);
  const RowD log_z = logsumexp_cols(P);                                     // log sum_j exp(pi^_j)
  const ArrD rho = RH.tanh(), log_1mr2 = -2.0 * log_cosh_of(RH);            // (M, nb)
  const ArrD inv_s1 = (-LS1).exp(), inv_s2 = (-LS2).exp();                  // 1 / sigma
  const ArrD D1 = (Z.middleRows(1 + M, M).rowwise() - X.row(0)) * -inv_s1;  // (x1 - mu1) / sigma1
  const ArrD D2 = (Z.middleRows(1 + 2 * M, M).rowwise() - X.row(1)) * -inv_s2;
  const ArrD Q = D1 * D1 + D2 * D2 - 2.0 * rho * D1 * D2;
  const ArrD C = (-log_1mr2).exp();                                                           // 1 / (1 - rho^2)
  const ArrD A = (P.rowwise() - log_z) - kLog2Pi - LS1 - LS2 - 0.5 * log_1mr2 - 0.5 * Q * C;  // log pi_j N_j
  const RowD log_mix = logsumexp_cols(A);
  const RowD e_hat = Z.row(0), pen = X.row(2);
  const RowD nll_row = -log_mix + (pen > 0.5).select(softplus_of(e_hat), softplus_of(-e_hat));
  Eigen::Map<Eigen::Matrix<double, 1, Eigen::Dynamic>>(nll, nb) = nll_row.matrix();
  if (!dz) return;
  Eigen::Map<Mat<S>> dZ(dz, R, nb);
  const ArrD G = (A.rowwise() - log_mix).exp();  // gamma_j
  const ArrD E1 = D1 - rho * D2, E2 = D2 - rho * D1;
  dZ.row(0) = (pen - 1.0 / (1.0 + e_hat.exp())).template cast<S>().matrix();
  dZ.middleRows(1, M) = ((P.rowwise() - log_z).exp() - G).template cast<S>().matrix();
  dZ.middleRows(1 + M, M) = (-G * C * E1 * inv_s1).template cast<S>().matrix();
  dZ.middleRows(1 + 2 * M, M) = (-G * C * E2 * inv_s2).template cast<S>().matrix();
  dZ.middleRows(1 + 3 * M, M) = (-G * (C * D1 * E1 - 1.0)).template cast<S>().matrix();
  dZ.middleRows(1 + 4 * M, M) = (-G * (C * D2 * E2 - 1.0)).template cast<S>().matrix();
  dZ.middleRows(1 + 5 * M, M) = (-G * (D1 * D2 + rho * (1.0 - C * Q))).template cast<S>().matrix();
}

template <class S>
MixtureDensityHead<S>::MixtureDensityHead(std::unique_ptr<Head<S>> inner, Index M) : inner_(std::move(inner)), M_(M) {
  MSRNN_CHECK(M >= 1, "the mixture density head needs at least one mixture component, got ", M);
  MSRNN_CHECK(inner_->output_size() == 6 * M + 1,
              "the mixture density head's inner head must give 6M + 1 = ", 6 * M + 1, " rows, gives ",
              inner_->output_size());
}

template <class S> void MixtureDensityHead<S>::check_targets(const Targets<S>& targets, Index T, Index B) const {
  MSRNN_CHECK(targets.values && !targets.ids,
              "the mixture density head's targets are real vectors (x1, x2, x3), not class ids");
  for (Index t = 0; t < T; ++t)
    for (Index b = 0; b < B; ++b) {
      const S* x = targets.values + (t * B + b) * kTargetSize;
      for (Index d = 0; d < 2; ++d)
        if (!std::isfinite(x[d]))
          throw std::invalid_argument(
              cat("target value ", x[d], " at (stream ", b, ", step ", t, ", feature ", d, ") is not finite"));
      if (!(x[2] == S(0) || x[2] == S(1)))
        throw std::invalid_argument(
            cat("target pen bit ", x[2], " at (stream ", b, ", step ", t, ", feature 2) must be 0 or 1"));
    }
}

template <class S>
void MixtureDensityHead<S>::nll(double* nll, CRef<S> Y, const Targets<S>& targets, Index T, Index B, bool train) {
  const Index N = Y.cols(), R = output_size();
  z_.resize(R, N);
  inner_->forward(z_, Y, T, B, train);
  if (train) dz_.resize(R, N);
  const bool plain = reference_kernels();  // the column-by-column version (the reference)
  parallel_slices(N, 16, [&](Index c0, Index m) {
    if (!plain) {
      for (Index k = c0; k < c0 + m; k += 64) {  // blocks of 64 columns: the arrays stay in cache
        const Index nb = std::min<Index>(64, c0 + m - k);
        mixture_nll_columns<S>(nll + k, train ? dz_.col(k).data() : nullptr, z_.col(k).data(),
                               targets.values + k * kTargetSize, M_, nb);
      }
      return;
    }
    for (Index n = c0; n < c0 + m; ++n)
      nll[n] =
          mixture_nll<S>(train ? dz_.col(n).data() : nullptr, z_.col(n).data(), targets.values + n * kTargetSize, M_);
  });
}

template <class S>
void MixtureDensityHead<S>::nll_backward(MRef<S> dY, CRef<S> Y, const Targets<S>&, S scale, const double* weights) {
  const Index N = Y.cols();
  MSRNN_CHECK(dz_.cols() == N, "nll_backward needs a preceding training nll over the same ", N, " columns");
  for (Index n = 0; n < N; ++n) dz_.col(n) *= weights ? S(double(scale) * weights[n]) : scale;
  inner_->backward(dY, dz_, Y);
  dz_.resize(dz_.rows(), 0);  // one backward per nll
}

template <class S> MixtureHeadAlone<S>::MixtureHeadAlone(Index I, Index M) {
  MSRNN_CHECK(I >= 1 && M >= 1, "the head needs an input size and mixtures >= 1, got ", I, " and ", M);
  head_ = std::make_unique<MixtureDensityHead<S>>(std::make_unique<LinearHead<S>>(ps_, I, 6 * M + 1), M);
  ps_.finalize();
  head_->bind(ps_);
}

template <class S> double MixtureHeadAlone<S>::loss_and_grad(MRef<S> dY, CRef<S> Y, const S* X) {
  const Index N = Y.cols();
  const Targets<S> targets{nullptr, X};
  head_->check_targets(targets, N, 1);
  nll_.resize(N);
  head_->nll(nll_.data(), Y, targets, N, 1, /*train=*/true);
  double loss = 0.0;
  for (double v : nll_) loss += v;
  head_->nll_backward(dY, Y, targets, S(1.0 / double(N)), nullptr);
  return loss / double(N);
}

template MixtureColumn mixture_column<float>(const float*, Index, double, double);
template MixtureColumn mixture_column<double>(const double*, Index, double, double);
template double mixture_nll<float>(float*, const float*, const float*, Index);
template double mixture_nll<double>(double*, const double*, const double*, Index);
template void mixture_nll_columns<float>(double*, float*, const float*, const float*, Index, Index);
template void mixture_nll_columns<double>(double*, double*, const double*, const double*, Index, Index);
template class MixtureDensityHead<float>;
template class MixtureDensityHead<double>;
template class MixtureHeadAlone<float>;
template class MixtureHeadAlone<double>;

}  // namespace msrnn
