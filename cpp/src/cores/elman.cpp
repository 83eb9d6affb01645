#include "msrnn/cores/elman.hpp"

namespace msrnn {

template <class S>
ElmanLayer<S>::ElmanLayer(ParamSet<S>& ps, const std::string& suffix, Index E, Index H)
    : E_(E), H_(H), suffix_(suffix) {
  MSRNN_CHECK(E > 0 && H > 0, "Elman RNN sizes must be positive, got input ", E, " hidden ", H);
  W_ih_.id = ps.add("weight_ih" + suffix, H, E, {"input", H, suffix});
  W_hh_.id = ps.add("weight_hh" + suffix, H, H, {"recurrent", H, suffix});
  b_ih_.id = ps.add("bias_ih" + suffix, H, 1, {"bias", H, suffix});
  b_hh_.id = ps.add("bias_hh" + suffix, H, 1, {"bias", H, suffix});
}

template <class S> void ElmanLayer<S>::bind(ParamSet<S>& ps) {
  for (auto* p : {&W_ih_, &W_hh_, &b_ih_, &b_hh_}) p->bind(ps);
}

template <class S> void ElmanLayer<S>::reset_state(Index B) { h_.setZero(H_, B); }

template <class S> std::vector<NamedState<S>> ElmanLayer<S>::get_state() const { return {{"h" + suffix_, h_}}; }

template <class S> void ElmanLayer<S>::set_state(const std::vector<NamedState<S>>& state) {
  const Index B = state.empty() ? 0 : state.front().value.cols();
  h_ = find_state(state, "h" + suffix_, H_, B);
}

template <class S> void ElmanLayer<S>::forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool /*train*/) {
  MSRNN_CHECK(h_.cols() == B, "Elman RNN state has batch size ", h_.cols(), ", input has ", B);
  const Index N = T * B;
  T_ = T;
  B_ = B;
  hs_.resize(H_, N + B);
  auto pre = hs_.rightCols(N);  // (H, N) pre-activations, turned into h_t step by step
  pre.noalias() = W_ih_.w * X;
  pre.colwise() += (b_ih_.w + b_hh_.w).col(0);
  hs_.leftCols(B) = h_;
  for (Index t = 0; t < T; ++t) {
    auto a = step_block(hs_, t + 1, B);
    a.noalias() += W_hh_.w * step_block(hs_, t, B);
    a.array() = a.array().tanh();
  }
  Y = hs_.rightCols(N);
  h_ = hs_.rightCols(B);
}

template <class S> void ElmanLayer<S>::backward(MRef<S> dX, CRef<S> dY, CRef<S> X) {
  const Index T = T_, B = B_, N = T * B;
  MSRNN_CHECK(dY.rows() == H_ && dY.cols() == N, "Elman RNN backward: dY has shape (", dY.rows(), ", ", dY.cols(),
              "), expected (", H_, ", ", N, ")");
  da_.resize(H_, N);
  Mat<S> dh = Mat<S>::Zero(H_, B);  // (H, B) gradient reaching h_t from step t+1
  for (Index t = T - 1; t >= 0; --t) {
    dh += step_block(dY, t, B);
    auto da = step_block(da_, t, B);
    da.array() = dh.array() * (S(1) - step_block(hs_, t + 1, B).array().square());
    if (t > 0) dh.noalias() = W_hh_.w.transpose() * da;
  }
  linear_backward_params<S>(W_hh_.g, b_hh_.g, da_, hs_.leftCols(N));
  linear_backward_params<S>(W_ih_.g, b_ih_.g, da_, X);
  if (dX.cols() > 0) linear_backward_input<S>(dX, W_ih_.w, da_);
}

template class ElmanLayer<float>;
template class ElmanLayer<double>;

}  // namespace msrnn
