#include "msrnn/lstm.hpp"

namespace msrnn {

template <class S> void lstm_pointwise_forward(MRef<S> act, MRef<S> c, MRef<S> tanh_c, MRef<S> h, CRef<S> c_prev) {
  const Index H = c.rows();
  auto i = act.topRows(H).array();
  auto f = act.middleRows(H, H).array();
  auto g = act.middleRows(2 * H, H).array();
  auto o = act.bottomRows(H).array();
  i = i.logistic();
  f = f.logistic();
  g = g.tanh();
  o = o.logistic();
  c.array() = f * c_prev.array() + i * g;
  tanh_c.array() = c.array().tanh();
  h.array() = o * tanh_c.array();
}

template <class S>
void lstm_pointwise_backward(MRef<S> da, MRef<S> dc_prev, CRef<S> dh, CRef<S> dc, CRef<S> act, CRef<S> tanh_c,
                             CRef<S> c_prev) {
  const Index H = dh.rows();
  const auto i = act.topRows(H).array();
  const auto f = act.middleRows(H, H).array();
  const auto g = act.middleRows(2 * H, H).array();
  const auto o = act.bottomRows(H).array();
  // dc_t in total: from step t+1 and through h_t = o * tanh(c_t). Kept in dc_prev's memory.
  dc_prev.array() = dc.array() + dh.array() * o * (S(1) - tanh_c.array().square());
  da.topRows(H).array() = dc_prev.array() * g * i * (S(1) - i);
  da.middleRows(H, H).array() = dc_prev.array() * c_prev.array() * f * (S(1) - f);
  da.middleRows(2 * H, H).array() = dc_prev.array() * i * (S(1) - g.square());
  da.bottomRows(H).array() = dh.array() * tanh_c.array() * o * (S(1) - o);
  dc_prev.array() *= f;
}

template <class S>
LSTMLayer<S>::LSTMLayer(ParamSet<S>& ps, const std::string& suffix, Index E, Index H) : E_(E), H_(H), suffix_(suffix) {
  MSRNN_CHECK(E > 0 && H > 0, "LSTM sizes must be positive, got input ", E, " hidden ", H);
  W_ih_.id = ps.add("weight_ih" + suffix, 4 * H, E);
  W_hh_.id = ps.add("weight_hh" + suffix, 4 * H, H);
  b_ih_.id = ps.add("bias_ih" + suffix, 4 * H, 1);
  b_hh_.id = ps.add("bias_hh" + suffix, 4 * H, 1);
}

template <class S> void LSTMLayer<S>::bind(ParamSet<S>& ps) {
  for (auto* p : {&W_ih_, &W_hh_, &b_ih_, &b_hh_}) p->bind(ps);
}

template <class S> void LSTMLayer<S>::reset_state(Index B) {
  h_.setZero(H_, B);
  c_.setZero(H_, B);
}

template <class S> std::vector<NamedState<S>> LSTMLayer<S>::get_state() const {
  return {{"h" + suffix_, h_}, {"c" + suffix_, c_}};
}

template <class S> void LSTMLayer<S>::set_state(const std::vector<NamedState<S>>& state) {
  const Index B = state.empty() ? 0 : state.front().value.cols();
  h_ = find_state(state, "h" + suffix_, H_, B);
  c_ = find_state(state, "c" + suffix_, H_, B);
}

template <class S> void LSTMLayer<S>::forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool /*train*/) {
  MSRNN_CHECK(h_.cols() == B, "LSTM state has batch size ", h_.cols(), ", input has ", B);
  const Index N = T * B;
  T_ = T;
  B_ = B;
  act_.resize(4 * H_, N);
  hs_.resize(H_, N + B);
  cs_.resize(H_, N + B);
  tanh_c_.resize(H_, N);
  // Input projection of all T steps in one product, both biases added once.
  act_.noalias() = W_ih_.w * X;
  act_.colwise() += (b_ih_.w + b_hh_.w).col(0);
  hs_.leftCols(B) = h_;
  cs_.leftCols(B) = c_;
  for (Index t = 0; t < T; ++t) {
    auto a = step_block(act_, t, B);
    a.noalias() += W_hh_.w * step_block(hs_, t, B);
    lstm_pointwise_forward<S>(a, step_block(cs_, t + 1, B), step_block(tanh_c_, t, B), step_block(hs_, t + 1, B),
                              step_block(cs_, t, B));
  }
  Y = hs_.rightCols(N);
  h_ = hs_.rightCols(B);
  c_ = cs_.rightCols(B);
}

template <class S> void LSTMLayer<S>::backward(MRef<S> dX, CRef<S> dY, CRef<S> X) {
  const Index T = T_, B = B_, N = T * B;
  MSRNN_CHECK(dY.rows() == H_ && dY.cols() == N, "LSTM backward: dY has shape (", dY.rows(), ", ", dY.cols(),
              "), expected (", H_, ", ", N, ")");
  da_.resize(4 * H_, N);
  Mat<S> dh = Mat<S>::Zero(H_, B);  // (H, B) gradient reaching h_t from step t+1
  Mat<S> dc = Mat<S>::Zero(H_, B);  // (H, B) gradient reaching c_t from step t+1
  Mat<S> dc_prev(H_, B);            // (H, B)
  for (Index t = T - 1; t >= 0; --t) {
    dh += step_block(dY, t, B);
    auto da = step_block(da_, t, B);
    lstm_pointwise_backward<S>(da, dc_prev, dh, dc, step_block(act_, t, B), step_block(tanh_c_, t, B),
                               step_block(cs_, t, B));
    dc.swap(dc_prev);
    if (t > 0) dh.noalias() = W_hh_.w.transpose() * da;
  }
  // Weight gradients of all steps in one product each.
  W_hh_.g.noalias() += da_ * hs_.leftCols(N).transpose();
  W_ih_.g.noalias() += da_ * X.transpose();
  const Vec<S> db = da_.rowwise().sum();
  b_ih_.g.col(0) += db;
  b_hh_.g.col(0) += db;
  if (dX.cols() > 0) dX.noalias() = W_ih_.w.transpose() * da_;
}

#define MSRNN_INSTANTIATE(S)                                                                                \
  template void lstm_pointwise_forward<S>(MRef<S>, MRef<S>, MRef<S>, MRef<S>, CRef<S>);                    \
  template void lstm_pointwise_backward<S>(MRef<S>, MRef<S>, CRef<S>, CRef<S>, CRef<S>, CRef<S>, CRef<S>); \
  template class LSTMLayer<S>;
MSRNN_INSTANTIATE(float)
MSRNN_INSTANTIATE(double)
#undef MSRNN_INSTANTIATE

}  // namespace msrnn
