#include "msrnn/cores/lstm.hpp"

#include <algorithm>
#include <type_traits>

namespace msrnn {

template <class S>
void lstm_gates_forward(MRef<S> i, MRef<S> f, MRef<S> g, MRef<S> o, MRef<S> c, MRef<S> tanh_c, MRef<S> h,
                        CRef<S> c_prev) {
  i = i.array().logistic().matrix();
  f = f.array().logistic().matrix();
  g = g.array().tanh().matrix();
  o = o.array().logistic().matrix();
  c.array() = f.array() * c_prev.array() + i.array() * g.array();
  tanh_c.array() = c.array().tanh();
  h.array() = o.array() * tanh_c.array();
}

template <class S>
void lstm_gates_forward_eval(CRef<S> i, CRef<S> f, CRef<S> g, CRef<S> o, MRef<S> c, MRef<S> h, CRef<S> c_prev) {
  c.array() = f.array().logistic() * c_prev.array() + i.array().logistic() * g.array().tanh();
  h.array() = o.array().logistic() * c.array().tanh();
}

template <class S> void lstm_pointwise_forward(MRef<S> act, MRef<S> c, MRef<S> tanh_c, MRef<S> h, CRef<S> c_prev) {
  const Index H = c.rows();
  lstm_gates_forward<S>(act.topRows(H), act.middleRows(H, H), act.middleRows(2 * H, H), act.bottomRows(H), c, tanh_c, h,
                        c_prev);
}

// dc_prev may alias dc.
template <class S>
void lstm_gates_backward(MRef<S> di, MRef<S> df, MRef<S> dg, MRef<S> do_, MRef<S> dc_prev, CRef<S> dh, CRef<S> dc,
                         CRef<S> i_, CRef<S> f_, CRef<S> g_, CRef<S> o_, CRef<S> tanh_c, CRef<S> c_prev) {
  const auto i = i_.array(), f = f_.array(), g = g_.array(), o = o_.array();
  // dc_t in total: from step t+1 and through h_t = o * tanh(c_t). Kept in dc_prev's memory.
  dc_prev.array() = dc.array() + dh.array() * o * (S(1) - tanh_c.array().square());
  di.array() = dc_prev.array() * g * i * (S(1) - i);
  df.array() = dc_prev.array() * c_prev.array() * f * (S(1) - f);
  dg.array() = dc_prev.array() * i * (S(1) - g.square());
  do_.array() = dh.array() * tanh_c.array() * o * (S(1) - o);
  dc_prev.array() *= f;
}

template <class S>
void lstm_pointwise_backward(MRef<S> da, MRef<S> dc_prev, CRef<S> dh, CRef<S> dc, CRef<S> act, CRef<S> tanh_c,
                             CRef<S> c_prev) {
  const Index H = dh.rows();
  lstm_gates_backward<S>(da.topRows(H), da.middleRows(H, H), da.middleRows(2 * H, H), da.bottomRows(H), dc_prev, dh, dc,
                         act.topRows(H), act.middleRows(H, H), act.middleRows(2 * H, H), act.bottomRows(H), tanh_c,
                         c_prev);
}

template <class S>
LSTMLayer<S>::LSTMLayer(ParamSet<S>& ps, const std::string& suffix, Index E, Index H) : E_(E), H_(H), suffix_(suffix) {
  MSRNN_CHECK(E > 0 && H > 0, "LSTM sizes must be positive, got input ", E, " hidden ", H);
  W_ih_.id = ps.add("weight_ih" + suffix, 4 * H, E, {"input", H, suffix});
  W_hh_.id = ps.add("weight_hh" + suffix, 4 * H, H, {"recurrent", H, suffix});
  b_ih_.id = ps.add("bias_ih" + suffix, 4 * H, 1, {"bias", H, suffix});
  b_hh_.id = ps.add("bias_hh" + suffix, 4 * H, 1, {"bias", H, suffix});
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

// The plain versions: Eigen products, one step after another (Eigen's own threads, if any).
template <class S> void LSTMLayer<S>::forward_reference(MRef<S> Y, CRef<S> X, Index T, Index B) {
  const Index N = T * B;
  hs_.resize(H_, N + B);
  cs_.resize(H_, N + B);
  act_.resize(4 * H_, N);
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

template <class S> void LSTMLayer<S>::backward_reference(MRef<S> dX, CRef<S> dY, CRef<S> X) {
  const Index T = T_, B = B_, N = T * B;
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
  linear_backward_params<S>(W_hh_.g, b_hh_.g, da_, hs_.leftCols(N));
  linear_backward_params<S>(W_ih_.g, b_ih_.g, da_, X);
  if (dX.cols() > 0) linear_backward_input<S>(dX, W_ih_.w, da_);
}

template <class S> void LSTMLayer<S>::set_inference_precision(Precision p) {
  MSRNN_CHECK((p == Precision::Float32 || std::is_same<S, float>::value), precision_name(p),
              " inference needs a float32 model; this one is float64");
  if (p == Precision::BFloat16)
    if (const char* why = bf16_unavailable_reason())  // also asks Linux for the tile state
      throw std::runtime_error(cat("inference precision 'bfloat16': ", why,
                                   ". 'bfloat16-emulated' gives the same arithmetic on any CPU (slower than float32)"));
  precision_ = p;
}

// The fast versions: the weights packed once per chunk (gemm.hpp), one OpenMP region per time
// loop in which each thread runs its own batch columns (streams) [j0, j0 + nb) through every step.
// Streams are independent, so threads meet only once per chunk, after packing: no barrier per
// step, which also keeps the loop fast when other processes share the cores. The products over
// all steps split over threads by rows or columns.
// In evaluation with a bfloat16 precision the step product changes (see lstm.hpp): through
// Bf16Matrix with the kernel bf16_kernel(), AMX or AVX512-BF16 (BFloat16), or with the float32
// panels holding rounded weights and a per-thread copy of [x_t; h_{t-1}] rounded to bfloat16
// (BFloat16Emulated). The reference-kernel switch does not apply to these (the emulated path is
// the reference of both kernels).
template <class S> void LSTMLayer<S>::forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool train) {
  MSRNN_CHECK(h_.cols() == B, "LSTM state has batch size ", h_.cols(), ", input has ", B);
  run(Y, X, nullptr, nullptr, T, B, train);
}

template <class S>
bool LSTMLayer<S>::forward_tokens(MRef<S> Y, CRef<S> Emb, const std::int32_t* tokens, Index T, Index B) {
  const Index V = Emb.cols();
  if (!input_tables() || !input_tables_pay(V, T * B)) return false;
  if (reference_kernels() && precision_ == Precision::Float32) return false;
  MSRNN_CHECK(Emb.rows() == E_, "LSTM input table: embedding has ", Emb.rows(), " rows, expected ", E_);
  MSRNN_CHECK(h_.cols() == B, "LSTM state has batch size ", h_.cols(), ", input has ", B);
  P_.resize(4 * H_, V);
  b_sum_ = b_ih_.w.col(0) + b_hh_.w.col(0);
  // P (4H, V) = b + W Ex, rows split over threads.
  auto table = [&](CRef<S> W, CRef<S> Ex) {
    parallel_slices(4 * H_, 16, [&](Index r0, Index m) {
      P_.middleRows(r0, m).noalias() = W.middleRows(r0, m) * Ex;
      P_.middleRows(r0, m).colwise() += b_sum_.segment(r0, m);
    });
  };
  if (precision_ == Precision::Float32) {
    table(W_ih_.w, Emb);
  } else if constexpr (std::is_same<S, float>::value) {  // b + bf16(W_ih) bf16(Emb), in float32
    W_ih_r_.resize(4 * H_, E_);
    Emb_r_ = Emb;
    round_to_bf16(W_ih_r_.data(), W_ih_.w.data(), W_ih_r_.size());
    round_to_bf16(Emb_r_.data(), Emb_r_.data(), Emb_r_.size());
    table(W_ih_r_, Emb_r_);
  }
  run(Y, Emb, &P_, tokens, T, B, /*train=*/false);
  return true;
}

template <class S>
void LSTMLayer<S>::run(MRef<S> Y, CRef<S> X, const Mat<S>* P, const std::int32_t* tokens, Index T, Index B,
                       bool train) {
  const Index H = H_, E = E_, N = T * B;
  T_ = T;
  B_ = B;
  trained_ = train;
  const Precision prec = train ? Precision::Float32 : precision_;
  if (!P && reference_kernels() && prec == Precision::Float32) return forward_reference(Y, X, T, B);
  const bool bf16 = prec == Precision::BFloat16, emulated = prec == Precision::BFloat16Emulated;
  const Bf16Kernel kernel = bf16 ? bf16_kernel() : Bf16Kernel::Emulated;  // bf16: AMX or AVX512-BF16
  // With a table the packed product is W_hh alone, without bias (P holds b + W_ih x_t).
  const Index Kx = P ? 0 : E;  // depth of the input part of the step product
  // Training keeps every step for backward: gates in act_ and tanh_c_, h and c in hs_ and cs_
  // (block t = the state before step t). Evaluation keeps one step of gates, writes h_t straight
  // into Y and keeps c in two blocks of cs_ used in turn (c_{t-1} in block t % 2).
  const Index keep = train ? B : 0;  // column stride of act_ and tanh_c_ per step
  act_.resize(4 * H, train ? N : B);
  tanh_c_.resize(H, train ? N : 0);
  b_sum_ = b_ih_.w.col(0) + b_hh_.w.col(0);
  if (train) {
    hs_.resize(H, N + B);
    hs_.leftCols(B) = h_;
  }
  cs_.resize(H, train ? N + B : 2 * B);
  cs_.leftCols(B) = c_;
  const Index ldy = Y.outerStride();
  const Index MR = PackedPanels<S>::panel_rows();
  const Index NR =
      bf16 ? Bf16Matrix::block_cols(kernel) : PackedPanels<S>::block_cols();  // column alignment per thread
  if (bf16)
    W_bf16_.resize(4 * H, Kx + H);
  else
    W_p_.resize(4, H, Kx + H);
  const int nt = get_num_threads();
  auto pack = [&](int k, int team) {
    if constexpr (std::is_same<S, float>::value) {
      if (bf16) {  // this thread's unit tiles of all 4H rows
        const auto rows = thread_units(4 * H, Bf16Matrix::kTile, k, team);
        if (!P) W_bf16_.pack(W_ih_.w.data(), 4 * H, 0, E, rows.first, rows.second);
        W_bf16_.pack(W_hh_.w.data(), 4 * H, Kx, H, rows.first, rows.second);
        if (!P) W_bf16_.set_bias(b_sum_.data(), rows.first, rows.second);
      }
    }
    if (!bf16) {
      const auto units = thread_units(H, MR, k, team);  // packing: this thread's panels
      if (!P) W_p_.pack(W_ih_.w.data(), 4 * H, 0, E, units.first, units.second);
      W_p_.pack(W_hh_.w.data(), 4 * H, Kx, H, units.first, units.second);
      if (!P) W_p_.set_bias(b_sum_.data(), units.first, units.second);
      if (emulated) W_p_.round_to_bfloat16(units.first, units.second);
    }
  };
  over_streams(B, nt, NR, pack, [&](Index j0, Index nb, int) {
    std::vector<std::uint16_t> xb(bf16 ? W_bf16_.scratch_size(nb) : 0);  // bf16: [x_t; h_{t-1}] in bf16, rows
    Mat<S> xr(emulated ? Kx + H : 0, nb);                                // (Kx + H, nb) emulated: the same, rounded
    for (Index t = 0; t < T; ++t) {
      // act_t = b + W_ih x_t + W_hh h_{t-1} on this thread's columns, then the gates.
      const Index a0 = t * keep + j0, n0 = t * B + j0;  // first column in act_ / tanh_c_, in X / hs_ / cs_
      S* act = act_.data() + a0 * 4 * H;
      const S* x = P ? nullptr : X.data() + n0 * X.outerStride();
      // h_{t-1} (H, nb) with leading dimension ldh; h_t, c_{t-1}, c_t (H, nb)
      const S* h = train ? hs_.data() + n0 * H : t == 0 ? h_.data() + j0 * H : Y.data() + (n0 - B) * ldy;
      const Index ldh = train || t == 0 ? H : ldy;
      S* h_new = train ? hs_.data() + (n0 + B) * H : Y.data() + n0 * ldy;
      const Index ldh_new = train ? H : ldy;
      const S* c_prev = cs_.data() + (train ? n0 : (t % 2) * B + j0) * H;
      S* c_new = cs_.data() + (train ? n0 + B : ((t + 1) % 2) * B + j0) * H;
      if constexpr (std::is_same<S, float>::value) {
        if (bf16) {
          if (P)
            W_bf16_.multiply(act, 4 * H, h, ldh, H, nullptr, 0, nb, xb.data(), kernel);
          else
            W_bf16_.multiply(act, 4 * H, x, X.outerStride(), E, h, ldh, nb, xb.data(), kernel);
        }
        if (emulated) {
          for (Index j = 0; j < nb; ++j) {
            if (!P) round_to_bf16(xr.col(j).data(), x + j * X.outerStride(), E);
            round_to_bf16(xr.col(j).data() + Kx, h + j * ldh, H);
          }
          W_p_.multiply(act, 4 * H, xr.data(), Kx + H, Kx + H, nullptr, 0, nb, 0, H, false);
        }
      }
      if (prec == Precision::Float32) {
        if (P)
          W_p_.multiply(act, 4 * H, h, ldh, nb, 0, H, false);
        else
          W_p_.multiply(act, 4 * H, x, X.outerStride(), E, h, ldh, nb, 0, H, false);
      }
      if (P)  // a_t += P[:, token_t], the input term and both biases
        for (Index j = 0; j < nb; ++j) act_.col(a0 + j) += P->col(tokens[n0 + j]);
      auto gate = [&](Index g) { return act_.block(g * H, a0, H, nb); };
      using Strided = Eigen::Map<Mat<S>, 0, Eigen::OuterStride<>>;
      const Strided h_t(h_new, H, nb, Eigen::OuterStride<>(ldh_new));
      if (train)
        lstm_gates_forward<S>(gate(0), gate(1), gate(2), gate(3), MatMap<S>(c_new, H, nb), tanh_c_.middleCols(a0, nb),
                              h_t, CMatMap<S>(c_prev, H, nb));
      else
        lstm_gates_forward_eval<S>(gate(0), gate(1), gate(2), gate(3), MatMap<S>(c_new, H, nb), h_t,
                                   CMatMap<S>(c_prev, H, nb));
    }
  });
  if (train) {
    Y = hs_.rightCols(N);
    h_ = hs_.rightCols(B);
    c_ = cs_.rightCols(B);
  } else {
    h_ = Y.rightCols(B);
    c_ = cs_.middleCols((T % 2) * B, B);
  }
}

template <class S> void LSTMLayer<S>::backward(MRef<S> dX, CRef<S> dY, CRef<S> X) {
  const Index T = T_, B = B_, H = H_, N = T * B;
  MSRNN_CHECK(trained_ && act_.cols() == N, "LSTM backward needs a training-mode forward first");
  MSRNN_CHECK(dY.rows() == H && dY.cols() == N, "LSTM backward: dY has shape (", dY.rows(), ", ", dY.cols(),
              "), expected (", H, ", ", N, ")");
  da_.resize(4 * H, N);
  if (reference_kernels()) return backward_reference(dX, dY, X);
  const Index MR = PackedPanels<S>::panel_rows(), NR = PackedPanels<S>::block_cols();
  W_hh_tp_.resize(1, H, 4 * H);
  dh_.resize(H, B);
  dc_.resize(H, B);
  auto pack = [&](int k, int team) {
    const auto units = thread_units(H, MR, k, team);  // packing: rows u of W_hh^T = columns u of W_hh
    W_hh_tp_.pack_transposed(W_hh_.w.data(), 4 * H, 0, 4 * H, units.first, units.second);
  };
  over_streams(B, get_num_threads(), NR, pack, [&](Index j0, Index nb, int) {
    auto dh = dh_.middleCols(j0, nb);  // (H, nb) gradient reaching h_t
    auto dc = dc_.middleCols(j0, nb);  // (H, nb) gradient reaching c_t; becomes that of c_{t-1}
    dc.setZero();
    for (Index t = T - 1; t >= 0; --t) {
      const Index n0 = t * B + j0;  // first column of this thread in step t
      // dh_t = W_hh^T da_{t+1} + dY_t
      if (t + 1 < T)
        W_hh_tp_.multiply(dh_.data() + j0 * H, H, da_.data() + (n0 + B) * 4 * H, 4 * H, nb, 0, H, false);
      else
        dh.setZero();
      dh += dY.middleCols(n0, nb);
      auto gate = [&](Mat<S>& m, Index g) { return m.block(g * H, n0, H, nb); };
      lstm_gates_backward<S>(gate(da_, 0), gate(da_, 1), gate(da_, 2), gate(da_, 3), dc, dh, dc, gate(act_, 0),
                             gate(act_, 1), gate(act_, 2), gate(act_, 3), tanh_c_.middleCols(n0, nb),
                             cs_.middleCols(n0, nb));
    }
  });
  // Weight gradients of all steps in one product each, rows split over threads.
  parallel_slices(4 * H, 16, [&](Index r0, Index m) {
    auto da = da_.middleRows(r0, m);
    W_hh_.g.middleRows(r0, m).noalias() += da * hs_.leftCols(N).transpose();
    W_ih_.g.middleRows(r0, m).noalias() += da * X.transpose();
    const Vec<S> db = da.rowwise().sum();
    b_ih_.g.col(0).segment(r0, m) += db;
    b_hh_.g.col(0).segment(r0, m) += db;
  });
  if (dX.cols() > 0)
    parallel_slices(N, B, [&](Index c0, Index m) {
      dX.middleCols(c0, m).noalias() = W_ih_.w.transpose() * da_.middleCols(c0, m);
    });
}

#define MSRNN_INSTANTIATE(S)                                                                                   \
  template void lstm_pointwise_forward<S>(MRef<S>, MRef<S>, MRef<S>, MRef<S>, CRef<S>);                        \
  template void lstm_pointwise_backward<S>(MRef<S>, MRef<S>, CRef<S>, CRef<S>, CRef<S>, CRef<S>, CRef<S>);     \
  template void lstm_gates_forward<S>(MRef<S>, MRef<S>, MRef<S>, MRef<S>, MRef<S>, MRef<S>, MRef<S>, CRef<S>); \
  template void lstm_gates_forward_eval<S>(CRef<S>, CRef<S>, CRef<S>, CRef<S>, MRef<S>, MRef<S>, CRef<S>);     \
  template void lstm_gates_backward<S>(MRef<S>, MRef<S>, MRef<S>, MRef<S>, MRef<S>, CRef<S>, CRef<S>, CRef<S>, \
                                       CRef<S>, CRef<S>, CRef<S>, CRef<S>, CRef<S>);                           \
  template class LSTMLayer<S>;
MSRNN_INSTANTIATE(float)
MSRNN_INSTANTIATE(double)
#undef MSRNN_INSTANTIATE

}  // namespace msrnn
