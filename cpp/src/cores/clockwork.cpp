#include "msrnn/cores/clockwork.hpp"

#include <limits>

#include "msrnn/kernels/blocks.hpp"

namespace msrnn {

template <class S>
ClockworkRNN<S>::ClockworkRNN(ParamSet<S>& ps, Index E, Index H, Index g, Index base)
    : E_(E), H_(H), g_(g), k_(g > 0 ? H / g : 0), base_(base) {
  MSRNN_CHECK(E > 0 && H > 0, "Clockwork RNN sizes must be positive, got input ", E, " hidden ", H);
  MSRNN_CHECK(g >= 1 && g <= H, "Clockwork RNN modules must be in [1, hidden size ", H, "], got ", g);
  MSRNN_CHECK(H % g == 0, "Clockwork RNN hidden size ", H, " must be a multiple of modules (", g, ")");
  MSRNN_CHECK(base >= 2, "Clockwork RNN base must be an integer >= 2, got ", base);
  W_ih_.id = ps.add("weight_ih_l0", H, E, {"input", H, "_l0"});
  W_hh_.id = ps.add("weight_hh_l0", H, H, {"recurrent", H, "_l0"});
  b_ih_.id = ps.add("bias_ih_l0", H, 1, {"bias", H, "_l0"});
  b_hh_.id = ps.add("bias_hh_l0", H, 1, {"bias", H, "_l0"});
}

template <class S> void ClockworkRNN<S>::bind(ParamSet<S>& ps) {
  for (auto* p : {&W_ih_, &W_hh_, &b_ih_, &b_hh_}) p->bind(ps);
}

template <class S> Index ClockworkRNN<S>::modules_running(long long t) const {
  Index m = 0;
  long long period = 1;  // T_i = base^i; saturates where base^i would overflow (then only t = 0 runs it)
  for (Index i = 0; i < g_ && t % period == 0; ++i) {
    ++m;
    period =
        period > std::numeric_limits<long long>::max() / base_ ? std::numeric_limits<long long>::max() : period * base_;
  }
  return m;
}

template <class S> void ClockworkRNN<S>::reset_state(Index B) {
  h_.setZero(H_, B);
  clock_ = 0;
}

template <class S> std::vector<NamedState<S>> ClockworkRNN<S>::get_state() const {
  return {{"h_l0", h_}, {"clock_l0", Mat<S>::Constant(1, h_.cols(), S(clock_))}};
}

template <class S> void ClockworkRNN<S>::set_state(const std::vector<NamedState<S>>& state) {
  const Index B = state.empty() ? 0 : state.front().value.cols();
  const Mat<S>& clock = find_state(state, "clock_l0", 1, B);
  const double t = B > 0 ? double(clock(0, 0)) : 0.0;
  MSRNN_CHECK(t >= 0 && t <= 9007199254740992.0 && t == double((long long)t),
              "Clockwork RNN state 'clock_l0' must hold a whole number of steps >= 0, got ", t);
  for (Index b = 1; b < B; ++b)
    MSRNN_CHECK(double(clock(0, b)) == t, "Clockwork RNN state 'clock_l0' must be the same for every stream, got ", t,
                " for stream 0 and ", double(clock(0, b)), " for stream ", b);
  h_ = find_state(state, "h_l0", H_, B);
  clock_ = (long long)t;
}

template <class S> void ClockworkRNN<S>::forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool /*train*/) {
  MSRNN_CHECK(h_.cols() == B, "Clockwork RNN state has batch size ", h_.cols(), ", input has ", B);
  const Index N = T * B, H = H_, k = k_;
  T_ = T;
  B_ = B;
  hs_.resize(H, N + B);
  hs_.leftCols(B) = h_;
  running_.resize(T);
  const Vec<S> bias = b_ih_.w.col(0) + b_hh_.w.col(0);  // (H)
  for (Index t = 0; t < T; ++t) {
    const Index m = modules_running(clock_ + t), r = m * k;  // rows 0..r-1 run
    running_[t] = m;
    auto prev = step_block(hs_, t, B);     // (H, B) h_{t-1}
    auto cur = step_block(hs_, t + 1, B);  // (H, B) h_t
    cur.bottomRows(H - r) = prev.bottomRows(H - r);
    auto a = cur.topRows(r);  // (r, B) a_t of the running modules, then h_t
    a.noalias() = W_ih_.w.topRows(r) * step_block(X, t, B);
    a.colwise() += bias.head(r);
    for (Index i = 0; i < m; ++i)  // module i reads modules i..g-1
      a.middleRows(i * k, k).noalias() += W_hh_.w.block(i * k, i * k, k, H - i * k) * prev.bottomRows(H - i * k);
    a.array() = a.array().tanh();
  }
  Y = hs_.rightCols(N);
  h_ = hs_.rightCols(B);
  clock_ += T;
}

template <class S> void ClockworkRNN<S>::backward(MRef<S> dX, CRef<S> dY, CRef<S> X) {
  const Index T = T_, B = B_, N = T * B, H = H_, k = k_;
  MSRNN_CHECK(dY.rows() == H && dY.cols() == N, "Clockwork RNN backward: dY has shape (", dY.rows(), ", ", dY.cols(),
              "), expected (", H, ", ", N, ")");
  da_.resize(H, N);
  Mat<S> dh = Mat<S>::Zero(H, B);  // (H, B) gradient reaching h_t from later steps
  for (Index t = T - 1; t >= 0; --t) {
    const Index m = running_[t], r = m * k;
    dh += step_block(dY, t, B);
    auto da = step_block(da_, t, B);  // (H, B)
    da.topRows(r).array() = dh.topRows(r).array() * (S(1) - step_block(hs_, t + 1, B).topRows(r).array().square());
    da.bottomRows(H - r).setZero();
    // h_{t-1} reaches h_t through the copy of the idle modules and through W_H of the running ones.
    dh.topRows(r).setZero();
    for (Index i = 0; i < m; ++i)
      dh.bottomRows(H - i * k).noalias() +=
          W_hh_.w.block(i * k, i * k, k, H - i * k).transpose() * da.middleRows(i * k, k);
  }
  // Weight gradients over the whole chunk; W_H only on its blocks at and above the diagonal.
  const auto h_prev = hs_.leftCols(N);  // (H, N) h_{t-1} of every column
  for (Index i = 0; i < g_; ++i)
    W_hh_.g.block(i * k, i * k, k, H - i * k).noalias() +=
        da_.middleRows(i * k, k) * h_prev.bottomRows(H - i * k).transpose();
  b_hh_.g.col(0) += da_.rowwise().sum();
  linear_backward_params<S>(W_ih_.g, b_ih_.g, da_, X);
  if (dX.cols() > 0) linear_backward_input<S>(dX, W_ih_.w, da_);
}

template <class S> std::vector<NamedState<S>> ClockworkRNN<S>::records() const {
  Mat<S> m(1, T_ * B_);  // (1, N)
  for (Index t = 0; t < T_; ++t) m.middleCols(t * B_, B_).setConstant(S(running_[t]));
  return {{"modules_run", m}};
}

template class ClockworkRNN<float>;
template class ClockworkRNN<double>;

namespace {
// "clockwork": one layer; its options:
CoreSchema clockwork_schema() {
  return {
      opt::count("modules", 4, 1, "g, the number of modules"),
      opt::count("base", 2, 2, "module i runs every base**i steps"),
  };
}

template <class S> std::unique_ptr<Core<S>> make_clockwork(ParamSet<S>& ps, const CoreArgs& a) {
  CoreOptions& o = *a.options;
  const Index g = o.count("modules");
  const Index base = o.count("base");
  o.finish();
  MSRNN_CHECK(a.hidden_sizes.size() == 1, "Clockwork RNN has one layer (its modules are the hierarchy), got ",
              a.hidden_sizes.size(), " hidden sizes");
  return std::make_unique<ClockworkRNN<S>>(ps, a.input_size, a.hidden_sizes[0], g, base);
}
}  // namespace
MSRNN_REGISTER_CORE("clockwork", make_clockwork, clockwork_schema());

}  // namespace msrnn
