// Mixture density head (Graves 2013, "Generating Sequences With Recurrent Neural Networks", eq. 17-26),
// a head any core can use, for pen strokes: the target of step t is x_{t+1} = (x1, x2, x3), a pen offset
// (x1, x2) and the end-of-stroke bit x3 in {0, 1}. An inner head (linear, or the HM-LSTM's gated output
// module) maps the core's output Y (I, N) to the raw parameters Z (6M + 1, N), rows
//   [e^ (1); pi^ (M); mu1^ (M); mu2^ (M); sigma1^ (M); sigma2^ (M); rho^ (M)]     (M mixture components)
// and the head turns them into a distribution:
//   e     = 1 / (1 + exp(e^))                            eq. 19: end-of-stroke probability (the paper's sign)
//   pi_j  = exp(pi^_j) / sum_j' exp(pi^_j')              eq. 20
//   mu_j  = mu^_j,  sigma_j = exp(sigma^_j),  rho_j = tanh(rho^_j)     eq. 21-23
//   Pr(x) = sum_j pi_j N(x1, x2 | mu_j, sigma_j, rho_j) * (e if x3 = 1 else 1 - e)   eq. 23
//   N(x | mu, sigma, rho) = exp(-Q / (2 (1 - rho^2))) / (2 pi sigma1 sigma2 sqrt(1 - rho^2)),
//   Q = d1^2 + d2^2 - 2 rho d1 d2,  d_i = (x_i - mu_i) / sigma_i                   eq. 24-25
// The loss of a step is nll = -log Pr(x) (eq. 26), its mixture sum taken as a log-sum-exp of
// log pi_j + log N_j, with log(1 - rho^2) = -2 log cosh(rho^) and the Bernoulli term as -softplus, so
// that neither underflows. Gradients (Graves eq. 27-32), with gamma_j = pi_j N_j / sum_j' pi_j' N_j'
// and C = 1 / (1 - rho^2):
//   d/de^ = x3 - e,  d/dpi^_j = pi_j - gamma_j,
//   d/dmu1^ = -gamma C (d1 - rho d2) / sigma1,  d/dsigma1^ = -gamma (C d1 (d1 - rho d2) - 1)  (2 alike)
//   d/drho^ = -gamma (d1 d2 + rho (1 - C Q)).
#pragma once

#include "msrnn/heads/head.hpp"

#include <memory>
#include <vector>

namespace msrnn {

// The distribution of one column of raw parameters z (6M + 1), with sampling's temperature tau and
// Graves' bias b (section 5.4: sigma = exp(sigma^ - b), pi = softmax(pi^ (1 + b))); tau scales
// pi^ and e^ by 1 / tau and sigma by sqrt(tau) (as sketch-rnn does). tau = 1, b = 0: the model's own.
struct MixtureColumn {
  double e = 0.0;                                 // end-of-stroke probability
  std::vector<double> pi, mu1, mu2, s1, s2, rho;  // (M) each
};
template <class S>
MixtureColumn mixture_column(const S* z, Index M, double temperature = 1.0, double bias = 0.0);

// -log Pr(x | z) of one column (z (6M + 1), x (3)); with dz (6M + 1) given, writes d nll / d z there.
// The plain version, one column at a time: the reference of mixture_nll_columns.
template <class S> double mixture_nll(S* dz, const S* z, const S* x, Index M);
// The same for nb columns at once, vectorised across them in double precision: nll (nb) out, dz (6M + 1, nb)
// out when not null, z (6M + 1, nb) and x (3, nb) in, all column-major.
template <class S> void mixture_nll_columns(double* nll, S* dz, const S* z, const S* x, Index M, Index nb);

template <class S> class MixtureDensityHead : public Head<S> {
 public:
  static constexpr Index kTargetSize = 3;  // (x1, x2, x3)
  // inner: a head whose output_size() is 6M + 1.
  MixtureDensityHead(std::unique_ptr<Head<S>> inner, Index M);
  Index input_size() const override { return inner_->input_size(); }
  Index output_size() const override { return 6 * M_ + 1; }
  Index target_size() const override { return kTargetSize; }
  Index mixtures() const { return M_; }
  void bind(ParamSet<S>& ps) override { inner_->bind(ps); }
  // Z (6M + 1, N): the raw parameters.
  void forward(MRef<S> Z, CRef<S> Y, Index T, Index B, bool train) override { inner_->forward(Z, Y, T, B, train); }
  void backward(MRef<S> dY, CRef<S> dZ, CRef<S> Y) override { inner_->backward(dY, dZ, Y); }
  std::vector<NamedState<S>> records() const override { return inner_->records(); }
  void check_targets(const Targets<S>& targets, Index T, Index B) const override;
  void nll(double* nll, CRef<S> Y, const Targets<S>& targets, Index T, Index B, bool train) override;
  void nll_backward(MRef<S> dY, CRef<S> Y, const Targets<S>& targets, S scale, const double* weights) override;

 private:
  std::unique_ptr<Head<S>> inner_;
  Index M_;
  Mat<S> z_;   // (6M + 1, N) raw parameters of the last nll
  Mat<S> dz_;  // (6M + 1, N) d nll_n / d z_n of the last training nll, then the loss's dZ
};

// The mixture density head on a linear head of its own parameters (decoder.weight (6M + 1, I), decoder.bias
// (6M + 1)), without a core: what benchmarks time against the same head written plainly in PyTorch.
template <class S> class MixtureHeadAlone {
 public:
  MixtureHeadAlone(Index I, Index M);
  ParamSet<S>& params() { return ps_; }
  // The mean nll over the N columns of Y (I, N) against targets X (3, N); dY (I, N) out (overwritten);
  // parameter gradients accumulated.
  double loss_and_grad(MRef<S> dY, CRef<S> Y, const S* X);

 private:
  ParamSet<S> ps_;
  std::unique_ptr<MixtureDensityHead<S>> head_;
  std::vector<double> nll_;  // (N)
};

}  // namespace msrnn
