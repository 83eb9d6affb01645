// Optimisers and gradient clipping over one flat parameter buffer w (P,) and its gradient g (P,).
// Element-wise loops run on OpenMP threads; reductions sum fixed-size blocks in a fixed order, so
// results are bit-identical for any thread count.
#pragma once

#include "msrnn/model/common.hpp"

namespace msrnn {

// Both steps read g once: with clip > 0 each element is first clamped to [-clip, clip] (the same
// result as clip_by_value before the step, without a pass of its own over g; g is left as it was).
//
// Adam (Kingma & Ba), bias-corrected, with L2 weight decay added to the gradient:
//   g' = clamp(g) + wd * w;  m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2
//   w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)          t = step, counted from 1
template <class S>
void adam_step(S* w, const S* g, S* m, S* v, Index P, long long step, double lr, double beta1, double beta2, double eps,
               double weight_decay, double clip = 0.0);

// SGD with momentum and L2 weight decay (PyTorch's rule):
//   g' = clamp(g) + wd * w;  buf = momentum * buf + g' (buf = g' at the first step);  w -= lr * buf
// With momentum = 0, buf is not touched and may be null.
template <class S>
void sgd_step(S* w, const S* g, S* buf, Index P, long long step, double lr, double momentum, double weight_decay,
              double clip = 0.0);

// sqrt(sum g^2), in double.
template <class S> double global_norm(const S* g, Index P);
// Scale g so its global norm is at most max_norm; returns the norm before clipping.
template <class S> double clip_by_norm(S* g, Index P, double max_norm);
// Clamp every element of g to [-clip, clip].
template <class S> void clip_by_value(S* g, Index P, double clip);
// True if every element is finite.
template <class S> bool all_finite(const S* x, Index P);

}  // namespace msrnn
