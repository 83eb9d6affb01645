#include "msrnn/kernels/blocks.hpp"

#include "msrnn/kernels/gemm.hpp"

#include <cmath>
#include <limits>
#include <vector>

namespace msrnn {

template <class S> void embedding_forward(MRef<S> X, CRef<S> W, const std::int32_t* tokens) {
  for (Index n = 0; n < X.cols(); ++n) X.col(n) = W.col(tokens[n]);
}

template <class S> void embedding_backward(MRef<S> dW, CRef<S> dX, const std::int32_t* tokens) {
  for (Index n = 0; n < dX.cols(); ++n) dW.col(tokens[n]) += dX.col(n);
}

// The products split over the core's threads (gemm.hpp: parallel_slices), each slice one
// single-threaded Eigen product: columns of Y and dX, columns of dW (rows of X).
template <class S> void linear_forward(MRef<S> Y, CRef<S> W, CRef<S> b, CRef<S> X) {
  parallel_slices(X.cols(), 16, [&](Index c0, Index n) {
    auto y = Y.middleCols(c0, n);
    y.colwise() = b.col(0);
    y.noalias() += W * X.middleCols(c0, n);
  });
}

template <class S> void linear_backward_params(MRef<S> dW, MRef<S> db, CRef<S> dY, CRef<S> X) {
  parallel_slices(X.rows(), 16,
                  [&](Index r0, Index n) { dW.middleCols(r0, n).noalias() += dY * X.middleRows(r0, n).transpose(); });
  db.col(0) += dY.rowwise().sum();
}

template <class S> void linear_backward_input(MRef<S> dX, CRef<S> W, CRef<S> dY) {
  parallel_slices(dY.cols(), 16,
                  [&](Index c0, Index n) { dX.middleCols(c0, n).noalias() = W.transpose() * dY.middleCols(c0, n); });
}

template <class S>
void layer_norm_forward(MRef<S> Y, MRef<S> xhat, MRef<S> rstd, CRef<S> X, CRef<S> g, CRef<S> b, S eps) {
  const Index D = X.rows();
  for (Index n = 0; n < X.cols(); ++n) {
    const S mu = X.col(n).mean();
    const S var = (X.col(n).array() - mu).square().sum() / S(D);
    const S r = S(1) / std::sqrt(var + eps);
    rstd(0, n) = r;
    xhat.col(n) = (X.col(n).array() - mu) * r;
    Y.col(n) = g.col(0).cwiseProduct(xhat.col(n)) + b.col(0);
  }
}

template <class S>
void layer_norm_backward(MRef<S> dX, MRef<S> dg, MRef<S> db, CRef<S> dY, CRef<S> xhat, CRef<S> rstd, CRef<S> g) {
  const Index D = dY.rows();
  dg.col(0) += dY.cwiseProduct(xhat).rowwise().sum();
  db.col(0) += dY.rowwise().sum();
  for (Index n = 0; n < dY.cols(); ++n) {
    auto dxhat = (dY.col(n).array() * g.col(0).array()).eval();  // (D,)
    const S m1 = dxhat.sum() / S(D);
    const S m2 = (dxhat * xhat.col(n).array()).sum() / S(D);
    dX.col(n) = rstd(0, n) * (dxhat - m1 - xhat.col(n).array() * m2);
  }
}

template <class S> void dropout_mask(MRef<S> M, double p, Rng& rng) {
  MSRNN_CHECK(p >= 0.0 && p < 1.0, "dropout probability must be in [0, 1), got ", p);
  if (p == 0.0) {
    M.setOnes();
    return;
  }
  const S keep = S(1.0 / (1.0 - p));
  for (Index n = 0; n < M.cols(); ++n)
    for (Index i = 0; i < M.rows(); ++i) M(i, n) = rng.uniform() < p ? S(0) : keep;
}

template <class S> double softmax_xent_forward(MRef<S> P, CRef<S> Z, const std::int32_t* targets, double* nll) {
  const Index N = Z.cols();
  std::vector<double> own;
  if (!nll) {
    own.resize(N);
    nll = own.data();
  }
  // Columns on threads; the losses summed afterwards in column order (same result for any
  // thread count).
  parallel_slices(N, 16, [&](Index c0, Index m) {
    for (Index n = c0; n < c0 + m; ++n) {
      const S zmax = Z.col(n).maxCoeff();
      const S ztarget = Z(targets[n], n);  // read before P (which may alias Z) is written
      P.col(n) = (Z.col(n).array() - zmax).exp();
      const S sum = P.col(n).sum();
      // -log p_target = log(sum) - (z_target - zmax)
      nll[n] = double(std::log(sum)) - double(ztarget - zmax);
      P.col(n) /= sum;
    }
  });
  double loss = 0.0;
  for (Index n = 0; n < N; ++n) loss += nll[n];
  return loss;
}

template <class S> void softmax_xent_backward(MRef<S> dZ, CRef<S> P, const std::int32_t* targets, S scale) {
  parallel_slices(P.cols(), 16, [&](Index c0, Index m) {
    dZ.middleCols(c0, m) = P.middleCols(c0, m) * scale;
    for (Index n = c0; n < c0 + m; ++n) dZ(targets[n], n) -= scale;
  });
}

#define MSRNN_INSTANTIATE(S)                                                                           \
  template void embedding_forward<S>(MRef<S>, CRef<S>, const std::int32_t*);                           \
  template void embedding_backward<S>(MRef<S>, CRef<S>, const std::int32_t*);                          \
  template void linear_forward<S>(MRef<S>, CRef<S>, CRef<S>, CRef<S>);                                 \
  template void linear_backward_params<S>(MRef<S>, MRef<S>, CRef<S>, CRef<S>);                         \
  template void linear_backward_input<S>(MRef<S>, CRef<S>, CRef<S>);                                   \
  template void layer_norm_forward<S>(MRef<S>, MRef<S>, MRef<S>, CRef<S>, CRef<S>, CRef<S>, S);        \
  template void layer_norm_backward<S>(MRef<S>, MRef<S>, MRef<S>, CRef<S>, CRef<S>, CRef<S>, CRef<S>); \
  template void dropout_mask<S>(MRef<S>, double, Rng&);                                                \
  template double softmax_xent_forward<S>(MRef<S>, CRef<S>, const std::int32_t*, double*);             \
  template void softmax_xent_backward<S>(MRef<S>, CRef<S>, const std::int32_t*, S);
MSRNN_INSTANTIATE(float)
MSRNN_INSTANTIATE(double)
#undef MSRNN_INSTANTIATE

}  // namespace msrnn
