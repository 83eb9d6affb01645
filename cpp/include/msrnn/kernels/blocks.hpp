// Building blocks that are not recurrent: embedding, linear map, layer normalisation, dropout,
// softmax cross-entropy. Each is a forward/backward pair; backward accumulates (+=) into
// parameter gradients and overwrites (=) input gradients.
#pragma once

#include "msrnn/model/common.hpp"

namespace msrnn {

template <class S> using MRef = Eigen::Ref<Mat<S>>;
template <class S> using CRefV = Eigen::Ref<const Mat<S>>;  // a read-only view held by value
template <class S> using CRef = const CRefV<S>&;

// ---- Embedding: x_n = W[:, token_n].   W (E, V), X (E, N), tokens (N)
template <class S> void embedding_forward(MRef<S> X, CRef<S> W, const std::int32_t* tokens);
// dW[:, token_n] += dX[:, n]
template <class S> void embedding_backward(MRef<S> dW, CRef<S> dX, const std::int32_t* tokens);

// ---- Linear: Y = W X + b.   W (O, I), b (O, 1), X (I, N), Y (O, N)
template <class S> void linear_forward(MRef<S> Y, CRef<S> W, CRef<S> b, CRef<S> X);
// dW += dY X^T, db += sum_n dY[:, n]
template <class S> void linear_backward_params(MRef<S> dW, MRef<S> db, CRef<S> dY, CRef<S> X);
// dX = W^T dY
template <class S> void linear_backward_input(MRef<S> dX, CRef<S> W, CRef<S> dY);

// ---- Layer normalisation over the D rows of each column:
//   mu = mean(x), sigma = sqrt(var(x) + eps), xhat = (x - mu) / sigma, y = g * xhat + b
// X, Y, xhat (D, N); rstd = 1/sigma (1, N); g, b (D, 1). Y may alias X.
template <class S> void layer_norm_forward(MRef<S> Y, MRef<S> xhat, MRef<S> rstd, CRef<S> X, CRef<S> g, CRef<S> b,
                                           S eps);
// dxhat = g * dY; dX = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)); dg += sum dY*xhat; db += sum dY.
// dX may alias dY.
template <class S> void layer_norm_backward(MRef<S> dX, MRef<S> dg, MRef<S> db, CRef<S> dY, CRef<S> xhat, CRef<S> rstd,
                                            CRef<S> g);

// ---- Dropout (inverted): m = 1/(1-p) with probability 1-p, else 0; y = m * x; dx = m * dy.
// M (D, N). p = 0 gives a mask of ones.
template <class S> void dropout_mask(MRef<S> M, double p, Rng& rng);

// ---- Softmax cross-entropy over the V rows of each column.
// Z (V, N) logits in, P (V, N) probabilities out (may alias Z). Returns sum_n -log P[target_n, n];
// if nll (N) is given, it receives each -log P[target_n, n].
template <class S>
double softmax_xent_forward(MRef<S> P, CRef<S> Z, const std::int32_t* targets, double* nll = nullptr);
// dZ = scale * (P - onehot(target)). dZ may alias P.
template <class S> void softmax_xent_backward(MRef<S> dZ, CRef<S> P, const std::int32_t* targets, S scale);

}  // namespace msrnn
