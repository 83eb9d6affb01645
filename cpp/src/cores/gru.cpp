#include "msrnn/cores/gru.hpp"

namespace msrnn {

template <class S> void gru_pointwise_forward(MRef<S> act, MRef<S> h, CRef<S> ah, CRef<S> h_prev) {
  gru_gates_forward<S>(act, h, ah, h_prev, [](Index) {});
}

template <class S>
void gru_pointwise_backward(MRef<S> dax, MRef<S> dah, MRef<S> dh_prev, CRef<S> dh, CRef<S> act, CRef<S> ah,
                            CRef<S> h_prev) {
  gru_gates_backward<S>(dax, dah, dh_prev, dh, act, ah, h_prev, [](Index) {});
}

template <class S>
GRULayer<S>::GRULayer(ParamSet<S>& ps, const std::string& suffix, Index E, Index H) : E_(E), H_(H), suffix_(suffix) {
  MSRNN_CHECK(E > 0 && H > 0, "GRU sizes must be positive, got input ", E, " hidden ", H);
  W_ih_.id = ps.add("weight_ih" + suffix, 3 * H, E, {"input", H, suffix});
  W_hh_.id = ps.add("weight_hh" + suffix, 3 * H, H, {"recurrent", H, suffix});
  b_ih_.id = ps.add("bias_ih" + suffix, 3 * H, 1, {"bias", H, suffix});
  b_hh_.id = ps.add("bias_hh" + suffix, 3 * H, 1, {"bias", H, suffix});
}

template <class S> void GRULayer<S>::bind(ParamSet<S>& ps) {
  for (auto* p : {&W_ih_, &W_hh_, &b_ih_, &b_hh_}) p->bind(ps);
}

template <class S> void GRULayer<S>::reset_state(Index B) { h_.setZero(H_, B); }

template <class S> std::vector<NamedState<S>> GRULayer<S>::get_state() const { return {{"h" + suffix_, h_}}; }

template <class S> void GRULayer<S>::set_state(const std::vector<NamedState<S>>& state) {
  const Index B = state.empty() ? 0 : state.front().value.cols();
  h_ = find_state(state, "h" + suffix_, H_, B);
}

template <class S> void GRULayer<S>::forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool /*train*/) {
  MSRNN_CHECK(h_.cols() == B, "GRU state has batch size ", h_.cols(), ", input has ", B);
  const Index N = T * B;
  T_ = T;
  B_ = B;
  act_.resize(3 * H_, N);
  ah_.resize(3 * H_, N);
  hs_.resize(H_, N + B);
  linear_forward<S>(act_, W_ih_.w, b_ih_.w, X);
  hs_.leftCols(B) = h_;
  for (Index t = 0; t < T; ++t) {
    auto ah = step_block(ah_, t, B);
    linear_forward<S>(ah, W_hh_.w, b_hh_.w, step_block(hs_, t, B));
    gru_pointwise_forward<S>(step_block(act_, t, B), step_block(hs_, t + 1, B), ah, step_block(hs_, t, B));
  }
  Y = hs_.rightCols(N);
  h_ = hs_.rightCols(B);
}

template <class S> void GRULayer<S>::backward(MRef<S> dX, CRef<S> dY, CRef<S> X) {
  const Index T = T_, B = B_, N = T * B;
  MSRNN_CHECK(dY.rows() == H_ && dY.cols() == N, "GRU backward: dY has shape (", dY.rows(), ", ", dY.cols(),
              "), expected (", H_, ", ", N, ")");
  dax_.resize(3 * H_, N);
  dah_.resize(3 * H_, N);
  Mat<S> dh = Mat<S>::Zero(H_, B);  // (H, B) gradient reaching h_t from step t+1
  Mat<S> dh_prev(H_, B);            // (H, B)
  for (Index t = T - 1; t >= 0; --t) {
    dh += step_block(dY, t, B);
    auto dah = step_block(dah_, t, B);
    gru_pointwise_backward<S>(step_block(dax_, t, B), dah, dh_prev, dh, step_block(act_, t, B), step_block(ah_, t, B),
                              step_block(hs_, t, B));
    if (t > 0) {
      dh = dh_prev;
      dh.noalias() += W_hh_.w.transpose() * dah;
    }
  }
  linear_backward_params<S>(W_hh_.g, b_hh_.g, dah_, hs_.leftCols(N));
  linear_backward_params<S>(W_ih_.g, b_ih_.g, dax_, X);
  if (dX.cols() > 0) linear_backward_input<S>(dX, W_ih_.w, dax_);
}

#define MSRNN_INSTANTIATE(S)                                                                              \
  template void gru_pointwise_forward<S>(MRef<S>, MRef<S>, CRef<S>, CRef<S>);                             \
  template void gru_pointwise_backward<S>(MRef<S>, MRef<S>, MRef<S>, CRef<S>, CRef<S>, CRef<S>, CRef<S>); \
  template class GRULayer<S>;
MSRNN_INSTANTIATE(float)
MSRNN_INSTANTIATE(double)
#undef MSRNN_INSTANTIATE

}  // namespace msrnn
