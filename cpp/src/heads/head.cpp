#include "msrnn/heads/head.hpp"

namespace msrnn {

void check_tokens(const std::int32_t* tokens, Index T, Index B, Index V, const char* what) {
  for (Index t = 0; t < T; ++t)
    for (Index b = 0; b < B; ++b) {
      const std::int32_t id = tokens[t * B + b];
      if (id < 0 || id >= V)
        throw std::out_of_range(
            cat(what, " id ", id, " at (stream ", b, ", step ", t, ") is outside the vocabulary [0, ", V, ")"));
    }
}

template <class S> void Head<S>::check_targets(const Targets<S>& targets, Index T, Index B) const {
  MSRNN_CHECK(targets.ids && !targets.values, "this model's targets are class ids, not real vectors");
  check_tokens(targets.ids, T, B, output_size(), "target");
}

template <class S>
void Head<S>::nll(double* nll, CRef<S> Y, const Targets<S>& targets, Index T, Index B, bool train) {
  p_.resize(output_size(), Y.cols());
  forward(p_, Y, T, B, train);
  softmax_xent_forward<S>(p_, p_, targets.ids, nll);
}

template <class S>
void Head<S>::nll_backward(MRef<S> dY, CRef<S> Y, const Targets<S>& targets, S scale, const double* weights) {
  softmax_xent_backward<S>(p_, p_, targets.ids, scale);  // p_ now holds dZ
  if (weights)
    for (Index n = 0; n < p_.cols(); ++n) p_.col(n) *= S(weights[n]);
  backward(dY, p_, Y);
}

template <class S> LinearHead<S>::LinearHead(ParamSet<S>& ps, Index I, Index V) : I_(I), V_(V) {
  W_.id = ps.add("decoder.weight", V, I, {"output", 0, ""});
  b_.id = ps.add("decoder.bias", V, 1, {"output", 0, ""});
}

template <class S> void LinearHead<S>::bind(ParamSet<S>& ps) {
  W_.bind(ps);
  b_.bind(ps);
}

template <class S> void LinearHead<S>::forward(MRef<S> Z, CRef<S> Y, Index, Index, bool) {
  linear_forward<S>(Z, W_.w, b_.w, Y);
}

template <class S> void LinearHead<S>::backward(MRef<S> dY, CRef<S> dZ, CRef<S> Y) {
  linear_backward_params<S>(W_.g, b_.g, dZ, Y);
  linear_backward_input<S>(dY, W_.w, dZ);
}

template class Head<float>;
template class Head<double>;
template class LinearHead<float>;
template class LinearHead<double>;

}  // namespace msrnn
