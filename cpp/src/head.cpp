#include "msrnn/head.hpp"

namespace msrnn {

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

template class LinearHead<float>;
template class LinearHead<double>;

}  // namespace msrnn
