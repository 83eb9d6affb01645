#include "msrnn/cells/step_cell.hpp"

#include <cmath>

#include "msrnn/cores/gru.hpp"
#include "msrnn/cores/lstm.hpp"

namespace msrnn {

namespace {

// Zoneout mask: 1 (take the new value) with probability 1 - z, else 0 (keep the previous one).
template <class S> void zoneout_mask(Mat<S>& M, double z, Rng& rng) {
  for (Index n = 0; n < M.cols(); ++n)
    for (Index i = 0; i < M.rows(); ++i) M(i, n) = rng.uniform() < z ? S(0) : S(1);
}

// y = m * y~ + (1 - m) * y_prev, m a mask block (training) or the scalar keep = 1 - z (evaluation).
template <class S, class Y, class Yt, class Yp, class M>
void zoneout_mix(Y&& y, const Yt& yt, const Yp& yp, const M& m) {
  y.array() = m.array() * yt.array() + (S(1) - m.array()) * yp.array();
}

// Zoneout backwards at the columns [col, col + nb): the gradient reaching the state after the step, dh, dc
// (H, nb), split between the new values h~_t, c~_t (dht, dct = m * d) and the kept previous ones (dh, dc <-
// (1 - m) * d, the direct path to h_{t-1}, c_{t-1}), m the zoneout mask (mask_h, mask_c (H, N), read only with
// zoneout: zh, zc); without zoneout all of it goes to the new values. c and its gradients only with has_c.
template <class S>
void zoneout_backward(Mat<S>& dht, Mat<S>& dct, MRef<S>& dh, MRef<S>& dc, const Mat<S>& mask_h, const Mat<S>& mask_c,
                      Index col, Index nb, bool zh, bool zc, bool has_c) {
  if (zh) {
    const auto m = mask_h.middleCols(col, nb).array();
    dht.array() = m * dh.array();
    dh.array() *= S(1) - m;  // the direct path to h_{t-1}
  } else {
    dht = dh;
    dh.setZero();
  }
  if (has_c) {
    if (zc) {
      const auto m = mask_c.middleCols(col, nb).array();
      dct.array() = m * dc.array();
      dc.array() *= S(1) - m;
    } else {
      dct = dc;
      dc.setZero();
    }
  }
}

}  // namespace

void check_cell_spec(const CellSpec& s, const std::string& what) {
  MSRNN_CHECK(s.type == CellType::LSTM || s.type == CellType::GRU, what, ": cell must be 'lstm' or 'gru'");
  MSRNN_CHECK(s.H > 0 && s.E >= 0, what, ": sizes must be positive, got input ", s.E, " hidden ", s.H);
  MSRNN_CHECK(s.zoneout_c >= 0.0 && s.zoneout_c < 1.0, what, ": zoneout_c must be in [0, 1), got ", s.zoneout_c);
  MSRNN_CHECK(s.zoneout_h >= 0.0 && s.zoneout_h < 1.0, what, ": zoneout_h must be in [0, 1), got ", s.zoneout_h);
  MSRNN_CHECK(s.ln_eps > 0.0 && std::isfinite(s.ln_eps), what, ": the layer-norm epsilon must be positive, got ",
              s.ln_eps);
  MSRNN_CHECK(!s.bias_before_norm || s.ln_gates, what,
              ": bias_before_norm adds a bias before the gate layer norm, which this cell does not have");
  if (s.type == CellType::GRU) {
    MSRNN_CHECK(!s.ln_cell, what, ": a GRU has no cell state to layer-normalise (layer_norm_cell)");
    MSRNN_CHECK(s.zoneout_c == 0.0, what, ": a GRU has no cell state for zoneout_c");
  }
}

template <class S>
StepCell<S>::StepCell(ParamSet<S>& ps, const std::string& suffix, const CellSpec& spec) : spec_(spec) {
  check_cell_spec(spec, "cell" + suffix);
  const Index GH = G() * spec.H;
  if (spec.E > 0) W_ih_.id = ps.add("weight_ih" + suffix, GH, spec.E, {"input", spec.H, suffix});
  W_hh_.id = ps.add("weight_hh" + suffix, GH, spec.H, {"recurrent", spec.H, suffix});
  if (!spec.ln_gates) {
    b_ih_.id = ps.add("bias_ih" + suffix, GH, 1, {"bias", spec.H, suffix});
    b_hh_.id = ps.add("bias_hh" + suffix, GH, 1, {"bias", spec.H, suffix});
  } else {
    g_gates_.id = ps.add("ln_gates_weight" + suffix, GH, 1, {"gain", spec.H, suffix});
    b_gates_.id = ps.add("ln_gates_bias" + suffix, GH, 1, {"shift", spec.H, suffix});
    if (spec.bias_before_norm) b_pre_.id = ps.add("bias" + suffix, GH, 1, {"bias", spec.H, suffix});
  }
  if (spec.ln_cell) {
    g_cell_.id = ps.add("ln_cell_weight" + suffix, spec.H, 1, {"gain", 0, suffix});
    b_cell_.id = ps.add("ln_cell_bias" + suffix, spec.H, 1, {"shift", 0, suffix});
  }
}

template <class S> void StepCell<S>::bind(ParamSet<S>& ps) {
  for (auto* p : {&W_ih_, &W_hh_, &b_ih_, &b_hh_, &g_gates_, &b_gates_, &g_cell_, &b_cell_, &b_pre_})
    if (p->id >= 0) p->bind(ps);
}

template <class S> void StepCell<S>::begin(Index T, Index B, bool train, Rng& rng) {
  const Index H = spec_.H, N = T * B, GH = G() * H, Hc = has_c() ? H : 0;
  T_ = T;
  B_ = B;
  train_ = train;
  projected_ = false;
  if (spec_.E > 0) x_.resize(spec_.E, N);
  act_.resize(GH, N);
  if (spec_.type == CellType::GRU) ah_.resize(GH, N);
  if (spec_.ln_gates) {
    xhat_.resize(GH, N);
    rstd_.resize(1, G() * N);
  }
  if (spec_.ln_cell) {
    chat_.resize(H, N);
    crstd_.resize(1, N);
  }
  if (has_c()) tanh_c_.resize(H, N);
  h_prev_.resize(H, N);
  h_out_.resize(H, N);
  c_prev_.resize(Hc, N);
  c_out_.resize(Hc, N);
  dh_out_.resize(H, 0);  // gradients of an earlier backward no longer apply
  dc_out_.resize(Hc, 0);
  if (train && spec_.zoneout_c > 0.0) {
    mask_c_.resize(H, N);
    zoneout_mask(mask_c_, spec_.zoneout_c, rng);
  }
  if (train && spec_.zoneout_h > 0.0) {
    mask_h_.resize(H, N);
    zoneout_mask(mask_h_, spec_.zoneout_h, rng);
  }
}

template <class S> void StepCell<S>::project_inputs(CRef<S> X) {
  MSRNN_CHECK(spec_.E > 0 && X.rows() == spec_.E && X.cols() == T_ * B_, "project_inputs: X has shape (", X.rows(),
              ", ", X.cols(), "), expected (", spec_.E, ", ", T_ * B_, ")");
  act_.noalias() = W_ih_.w * X;
  projected_ = true;
}

template <class S> void StepCell<S>::start_work(Work& w, Index nb, bool own_grads) const {
  const Index H = spec_.H, Hc = has_c() ? H : 0, GH = G() * H;
  w.nb = nb;
  w.own_grads = own_grads;
  w.ct.resize(Hc, nb);
  w.ht.resize(H, nb);
  w.tmp.resize(H, nb);
  w.dht.resize(H, nb);
  w.dct.resize(Hc, nb);
  w.zero.setZero(H, nb);
  if (own_grads && spec_.ln_gates) {
    w.dg_gates.setZero(GH, 1);
    w.db_gates.setZero(GH, 1);
  }
  if (own_grads && spec_.ln_cell) {
    w.dg_cell.setZero(H, 1);
    w.db_cell.setZero(H, 1);
  }
}

template <class S> void StepCell<S>::add_grads(const Work& w) {
  if (!w.own_grads) return;
  if (spec_.ln_gates) {
    g_gates_.g += w.dg_gates;
    b_gates_.g += w.db_gates;
  }
  if (spec_.ln_cell) {
    g_cell_.g += w.dg_cell;
    b_cell_.g += w.db_cell;
  }
}

template <class S> void StepCell<S>::pack_forward() {
  const Index H = spec_.H, E = spec_.E, GH = G() * H;
  fused_ = spec_.type == CellType::LSTM && E > 0 && !projected_;
  if (fused_) {
    Wp_.resize(4, H, E + H);
    Wp_.pack(W_ih_.w.data(), GH, 0, E, 0, H);
    Wp_.pack(W_hh_.w.data(), GH, E, H, 0, H);
  } else {
    Wp_.resize(G(), H, H);
    Wp_.pack(W_hh_.w.data(), GH, 0, H, 0, H);
  }
  if (spec_.type == CellType::GRU && E > 0 && !projected_) {
    Wxp_.resize(3, H, E);
    Wxp_.pack(W_ih_.w.data(), GH, 0, E, 0, H);
  }
}

template <class S> void StepCell<S>::pack_backward() {
  const Index H = spec_.H, E = spec_.E, GH = G() * H;
  WhT_.resize(1, H, GH);
  WhT_.pack_transposed(W_hh_.w.data(), GH, 0, GH, 0, H);
  if (E > 0) {
    WxT_.resize(1, E, GH);
    WxT_.pack_transposed(W_ih_.w.data(), GH, 0, GH, 0, E);
  }
}

template <class S> void StepCell<S>::step(Index t, MRef<S> h, MRef<S> c, CRef<S> x) {
  if (work_.nb != B_ || work_.own_grads) start_work(work_, B_, false);
  step(t, 0, B_, h, c, x, work_, false);
}

template <class S>
void StepCell<S>::step(Index t, Index j0, Index nb, MRef<S> h, MRef<S> c, CRef<S> x, Work& w, bool packed) {
  const Index E = spec_.E, col = t * B_ + j0;
  auto blk = [&](auto& M) { return M.middleCols(col, nb); };  // this step's columns of a (., N) buffer
  auto hp = blk(h_prev_);
  auto cp = blk(c_prev_);
  hp = h;
  cp = c;
  if (!projected_ && E > 0) blk(x_) = x;
  if (spec_.type == CellType::LSTM)
    lstm_step(t, j0, nb, w, packed);
  else
    gru_step(t, j0, nb, w, packed);
  zoneout_step(t, j0, nb, h, c, w);
}

// The LSTM's gates and candidate state at step t on streams [j0, j0 + nb), B = nb:
//   a_t = W_ih x_t + W_hh h_{t-1} [+ b_ih + b_hh]  (act_, (4H, B); the input term already there when projected)
//   ln_gates: a^k_t <- LN(a^k_t [+ b^k]) per gate block k = i, f, g, o
//   c~_t = f * c_{t-1} + i * g (w.ct), h~_t = o * tanh(c~_t) or o * tanh(LN(c~_t)) with ln_cell (w.ht)
template <class S> void StepCell<S>::lstm_step(Index t, Index j0, Index nb, Work& w, bool packed) {
  const Index H = spec_.H, E = spec_.E, GH = G() * H, B = nb, col = t * B_ + j0;
  auto blk = [&](auto& M) { return M.middleCols(col, nb); };  // this step's columns of a (., N) buffer
  auto a = blk(act_);                                         // (G*H, B): the input term, then the gate activations
  auto hp = blk(h_prev_);
  auto cp = blk(c_prev_);
  const S eps = S(spec_.ln_eps);
  if (packed) {
    if (fused_)
      Wp_.multiply(a.data(), GH, blk(x_).data(), E, E, hp.data(), H, nb, 0, H, false);
    else
      Wp_.multiply(a.data(), GH, hp.data(), H, nb, 0, H, projected_);
  } else {
    if (!projected_) {
      if (E > 0)
        a.noalias() = W_ih_.w * blk(x_);
      else
        a.setZero();
    }
    a.noalias() += W_hh_.w * hp;
  }
  if (!spec_.ln_gates) {
    a.colwise() += (b_ih_.w + b_hh_.w).col(0);
  } else {
    if (spec_.bias_before_norm) a.colwise() += b_pre_.w.col(0);
    auto rs = rstd_.middleCols(t * 4 * B_, 4 * B_);
    for (Index k = 0; k < 4; ++k)
      layer_norm_forward<S>(a.middleRows(k * H, H), blk(xhat_).middleRows(k * H, H), rs.middleCols(k * B_ + j0, B),
                            a.middleRows(k * H, H), g_gates_.w.middleRows(k * H, H), b_gates_.w.middleRows(k * H, H),
                            eps);
  }
  auto tc = blk(tanh_c_);
  lstm_pointwise_forward<S>(a, w.ct, tc, w.ht, cp);
  if (spec_.ln_cell) {
    // The gates and c~_t as in the plain cell; its tanh(c~_t) and h~_t are then replaced.
    layer_norm_forward<S>(w.tmp, blk(chat_), crstd_.middleCols(col, B), w.ct, g_cell_.w, b_cell_.w, eps);
    tc.array() = w.tmp.array().tanh();
    w.ht.array() = a.bottomRows(H).array() * tc.array();
  }
}

// The GRU's gates and candidate state at step t on streams [j0, j0 + nb), B = nb:
//   ax = W_ih x_t [+ b_ih | + b] (act_, (3H, B)),  ah = W_hh h_{t-1} [+ b_hh] (ah_, (3H, B))
//   r = sigm(ax_r + ah_r), z = sigm(ax_z + ah_z), n = tanh(ax_n + r * ah_n), h~_t = (1 - z) * n + z * h_{t-1} (w.ht)
// with ln_gates each gate normalised before its nonlinearity.
template <class S> void StepCell<S>::gru_step(Index t, Index j0, Index nb, Work& w, bool packed) {
  const Index H = spec_.H, E = spec_.E, GH = G() * H, B = nb, col = t * B_ + j0;
  auto blk = [&](auto& M) { return M.middleCols(col, nb); };  // this step's columns of a (., N) buffer
  auto a = blk(act_);                                         // (G*H, B): the input term, then the gate activations
  auto hp = blk(h_prev_);
  const S eps = S(spec_.ln_eps);
  auto ah = blk(ah_);
  if (!projected_) {
    if (E == 0)
      a.setZero();
    else if (packed)
      Wxp_.multiply(a.data(), GH, blk(x_).data(), E, nb, 0, H, false);
    else
      a.noalias() = W_ih_.w * blk(x_);
  }
  if (packed)
    Wp_.multiply(ah.data(), GH, hp.data(), H, nb, 0, H, false);
  else
    ah.noalias() = W_hh_.w * hp;
  if (!spec_.ln_gates) {
    a.colwise() += b_ih_.w.col(0);
    ah.colwise() += b_hh_.w.col(0);
    gru_pointwise_forward<S>(a, w.ht, ah, hp);
  } else {
    // Each gate normalised before its nonlinearity (gru_gates_forward calls ln(k) there).
    if (spec_.bias_before_norm) a.colwise() += b_pre_.w.col(0);
    auto rs = rstd_.middleCols(t * 3 * B_, 3 * B_);
    auto xh = blk(xhat_);
    auto ln = [&](Index k) {
      layer_norm_forward<S>(a.middleRows(k * H, H), xh.middleRows(k * H, H), rs.middleCols(k * B_ + j0, B),
                            a.middleRows(k * H, H), g_gates_.w.middleRows(k * H, H), b_gates_.w.middleRows(k * H, H),
                            eps);
    };
    gru_gates_forward<S>(a, w.ht, ah, hp, ln);
  }
}

// Zoneout, then the new state at step t on streams [j0, j0 + nb): c_t = m_c * c~_t + (1 - m_c) * c_{t-1} and
// h_t = m_h * h~_t + (1 - m_h) * h_{t-1} (masks in training, the keep probabilities 1 - z in evaluation),
// written into c, h (H, nb) and recorded in c_out_, h_out_.
template <class S> void StepCell<S>::zoneout_step(Index t, Index j0, Index nb, MRef<S>& h, MRef<S>& c, Work& w) {
  const Index col = t * B_ + j0;
  auto blk = [&](auto& M) { return M.middleCols(col, nb); };  // this step's columns of a (., N) buffer
  auto hp = blk(h_prev_);
  auto cp = blk(c_prev_);
  const bool masks = train_;
  if (has_c()) {
    if (spec_.zoneout_c == 0.0)
      c = w.ct;
    else if (masks)
      zoneout_mix<S>(c, w.ct, cp, blk(mask_c_));
    else
      c.array() = S(1 - spec_.zoneout_c) * w.ct.array() + S(spec_.zoneout_c) * cp.array();
    blk(c_out_) = c;
  }
  if (spec_.zoneout_h == 0.0)
    h = w.ht;
  else if (masks)
    zoneout_mix<S>(h, w.ht, hp, blk(mask_h_));
  else
    h.array() = S(1 - spec_.zoneout_h) * w.ht.array() + S(spec_.zoneout_h) * hp.array();
  blk(h_out_) = h;
}

template <class S> void StepCell<S>::begin_backward() {
  const Index H = spec_.H, N = T_ * B_;
  MSRNN_CHECK(train_, "backward needs a training-mode forward");
  da_.resize(G() * H, N);
  if (spec_.type == CellType::GRU) dah_.resize(3 * H, N);
  dh_out_.resize(H, N);
  dc_out_.resize(has_c() ? H : 0, N);
}

template <class S> void StepCell<S>::backward_step(Index t, MRef<S> dh, MRef<S> dc, MRef<S> dx) {
  if (t == T_ - 1) begin_backward();
  MSRNN_CHECK(dx.cols() == 0 || spec_.E > 0, "backward_step: the cell has no input");
  if (work_.nb != B_ || work_.own_grads) start_work(work_, B_, false);
  backward_step(t, 0, B_, dh, dc, dx, work_, false);
}

template <class S>
void StepCell<S>::backward_step(Index t, Index j0, Index nb, MRef<S> dh, MRef<S> dc, MRef<S> dx, Work& w, bool packed) {
  const Index H = spec_.H, B = nb, GH = G() * H, col = t * B_ + j0;
  auto blk = [&](auto& M) { return M.middleCols(col, nb); };  // this step's columns of a (., N) buffer
  // Where the layer-norm parameter gradients go.
  MRef<S> dg_gates = w.own_grads ? MRef<S>(w.dg_gates) : MRef<S>(g_gates_.g);
  MRef<S> db_gates = w.own_grads ? MRef<S>(w.db_gates) : MRef<S>(b_gates_.g);
  MRef<S> dg_cell = w.own_grads ? MRef<S>(w.dg_cell) : MRef<S>(g_cell_.g);
  MRef<S> db_cell = w.own_grads ? MRef<S>(w.db_cell) : MRef<S>(b_cell_.g);
  blk(dh_out_) = dh;
  auto& dht = w.dht;
  auto& dct = w.dct;
  auto& tmp = w.tmp;
  // Zoneout: split the gradient between the new value and the kept previous one.
  const bool zh = spec_.zoneout_h > 0.0, zc = has_c() && spec_.zoneout_c > 0.0;
  zoneout_backward<S>(dht, dct, dh, dc, mask_h_, mask_c_, col, nb, zh, zc, has_c());
  auto da = blk(da_);
  const auto a = blk(act_);
  const auto hp = blk(h_prev_);
  if (spec_.type == CellType::LSTM) {
    const auto cp = blk(c_prev_);
    const auto tc = blk(tanh_c_);
    if (!spec_.ln_cell) {
      blk(dc_out_).array() = dct.array() + dht.array() * a.bottomRows(H).array() * (S(1) - tc.array().square());
      lstm_pointwise_backward<S>(da, tmp, dht, dct, a, tc, cp);
    } else {
      const auto o = a.bottomRows(H).array();
      tmp.array() = dht.array() * o * (S(1) - tc.array().square());  // gradient of LN(c~_t)
      layer_norm_backward<S>(tmp, dg_cell, db_cell, tmp, blk(chat_), crstd_.middleCols(col, B), g_cell_.w);
      tmp += dct;  // the whole gradient reaching c~_t
      blk(dc_out_) = tmp;
      // The plain cell's backward with no gradient at its own output o * tanh(c~_t): the i, f, g
      // rows and f * dc~_t; the o rows follow from h~_t = o * tanh(LN(c~_t)).
      lstm_pointwise_backward<S>(da, tmp, w.zero, tmp, a, tc, cp);
      da.bottomRows(H).array() = dht.array() * tc.array() * o * (S(1) - o);
    }
    dc += tmp;
    if (spec_.ln_gates) {
      auto rs = rstd_.middleCols(t * 4 * B_, 4 * B_);
      for (Index k = 0; k < 4; ++k)
        layer_norm_backward<S>(da.middleRows(k * H, H), dg_gates.middleRows(k * H, H), db_gates.middleRows(k * H, H),
                               da.middleRows(k * H, H), blk(xhat_).middleRows(k * H, H), rs.middleCols(k * B_ + j0, B),
                               g_gates_.w.middleRows(k * H, H));
    }
    if (packed)
      WhT_.multiply(dh.data(), dh.outerStride(), da.data(), GH, nb, 0, H, true);
    else
      dh.noalias() += W_hh_.w.transpose() * da;
  } else {
    auto dah = blk(dah_);
    const auto ah = blk(ah_);
    if (!spec_.ln_gates) {
      gru_pointwise_backward<S>(da, dah, tmp, dht, a, ah, hp);
    } else {
      auto rs = rstd_.middleCols(t * 3 * B_, 3 * B_);
      auto xh = blk(xhat_);
      auto ln_back = [&](Index k) {
        layer_norm_backward<S>(da.middleRows(k * H, H), dg_gates.middleRows(k * H, H), db_gates.middleRows(k * H, H),
                               da.middleRows(k * H, H), xh.middleRows(k * H, H), rs.middleCols(k * B_ + j0, B),
                               g_gates_.w.middleRows(k * H, H));
      };
      gru_gates_backward<S>(da, dah, tmp, dht, a, ah, hp, ln_back);
    }
    dh += tmp;
    if (packed)
      WhT_.multiply(dh.data(), dh.outerStride(), dah.data(), GH, nb, 0, H, true);
    else
      dh.noalias() += W_hh_.w.transpose() * dah;
  }
  if (dx.cols() > 0) {
    if (packed)
      WxT_.multiply(dx.data(), dx.outerStride(), da.data(), GH, nb, 0, spec_.E, false);
    else
      dx.noalias() = W_ih_.w.transpose() * da;
  }
}

template <class S> void StepCell<S>::finish_backward(MRef<S> dX, CRef<S> X) {
  const Index N = T_ * B_;
  const bool gru = spec_.type == CellType::GRU;
  const Mat<S>& dah = gru ? dah_ : da_;  // gradient of the recurrent term
  W_hh_.g.noalias() += dah * h_prev_.leftCols(N).transpose();
  if (spec_.E > 0) {
    if (projected_) {
      MSRNN_CHECK(X.rows() == spec_.E && X.cols() == N, "finish_backward: X has shape (", X.rows(), ", ", X.cols(),
                  "), expected (", spec_.E, ", ", N, ")");
      W_ih_.g.noalias() += da_ * X.transpose();
      if (dX.cols() > 0) dX.noalias() = W_ih_.w.transpose() * da_;
    } else {
      W_ih_.g.noalias() += da_ * x_.transpose();
    }
  }
  if (!spec_.ln_gates) {
    b_ih_.g.col(0) += da_.rowwise().sum();
    b_hh_.g.col(0) += dah.rowwise().sum();
  } else if (spec_.bias_before_norm) {
    b_pre_.g.col(0) += da_.rowwise().sum();  // da_: the gradient before the layer norm (GRU: of ax)
  }
}

template class StepCell<float>;
template class StepCell<double>;

}  // namespace msrnn
