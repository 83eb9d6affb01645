#include "msrnn/step_cell.hpp"

#include "msrnn/gru.hpp"
#include "msrnn/lstm.hpp"

namespace msrnn {

namespace {

constexpr double kLayerNormEps = 1e-5;

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

}  // namespace

void check_cell_spec(const CellSpec& s, const std::string& what) {
  MSRNN_CHECK(s.type == CellType::LSTM || s.type == CellType::GRU, what, ": cell must be 'lstm' or 'gru'");
  MSRNN_CHECK(s.H > 0 && s.E >= 0, what, ": sizes must be positive, got input ", s.E, " hidden ", s.H);
  MSRNN_CHECK(s.zoneout_c >= 0.0 && s.zoneout_c < 1.0, what, ": zoneout_c must be in [0, 1), got ", s.zoneout_c);
  MSRNN_CHECK(s.zoneout_h >= 0.0 && s.zoneout_h < 1.0, what, ": zoneout_h must be in [0, 1), got ", s.zoneout_h);
  if (s.type == CellType::GRU) {
    MSRNN_CHECK(!s.ln_cell, what, ": a GRU has no cell state to layer-normalise (layer_norm_cell)");
    MSRNN_CHECK(s.zoneout_c == 0.0, what, ": a GRU has no cell state for zoneout_c");
  }
}

template <class S>
StepCell<S>::StepCell(ParamSet<S>& ps, const std::string& suffix, const CellSpec& spec) : spec_(spec) {
  check_cell_spec(spec, "cell" + suffix);
  const Index GH = G() * spec.H;
  if (spec.E > 0) W_ih_.id = ps.add("weight_ih" + suffix, GH, spec.E);
  W_hh_.id = ps.add("weight_hh" + suffix, GH, spec.H);
  if (!spec.ln_gates) {
    b_ih_.id = ps.add("bias_ih" + suffix, GH, 1);
    b_hh_.id = ps.add("bias_hh" + suffix, GH, 1);
  } else {
    g_gates_.id = ps.add("ln_gates_weight" + suffix, GH, 1);
    b_gates_.id = ps.add("ln_gates_bias" + suffix, GH, 1);
  }
  if (spec.ln_cell) {
    g_cell_.id = ps.add("ln_cell_weight" + suffix, spec.H, 1);
    b_cell_.id = ps.add("ln_cell_bias" + suffix, spec.H, 1);
  }
}

template <class S> void StepCell<S>::bind(ParamSet<S>& ps) {
  for (auto* p : {&W_ih_, &W_hh_, &b_ih_, &b_hh_, &g_gates_, &b_gates_, &g_cell_, &b_cell_})
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
  ct_.resize(Hc, B);
  ht_.resize(H, B);
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

template <class S> void StepCell<S>::step(Index t, MRef<S> h, MRef<S> c, CRef<S> x) {
  const Index H = spec_.H, B = B_;
  auto a = step_block(act_, t, B);  // (G*H, B): the input term, then the gate activations
  auto hp = step_block(h_prev_, t, B);
  auto cp = step_block(c_prev_, t, B);
  hp = h;
  cp = c;
  if (!projected_) {
    if (spec_.E > 0) {
      step_block(x_, t, B) = x;
      a.noalias() = W_ih_.w * x;
    } else {
      a.setZero();
    }
  }
  const S eps = S(kLayerNormEps);
  if (spec_.type == CellType::LSTM) {
    a.noalias() += W_hh_.w * hp;
    if (!spec_.ln_gates) {
      a.colwise() += (b_ih_.w + b_hh_.w).col(0);
    } else {
      auto rs = rstd_.middleCols(t * 4 * B, 4 * B);
      for (Index k = 0; k < 4; ++k)
        layer_norm_forward<S>(a.middleRows(k * H, H), step_block(xhat_, t, B).middleRows(k * H, H),
                              rs.middleCols(k * B, B), a.middleRows(k * H, H), g_gates_.w.middleRows(k * H, H),
                              b_gates_.w.middleRows(k * H, H), eps);
    }
    auto tc = step_block(tanh_c_, t, B);
    if (!spec_.ln_cell) {
      lstm_pointwise_forward<S>(a, ct_, tc, ht_, cp);
    } else {
      // The gates and c~_t as in the plain cell; its tanh(c~_t) and h~_t are then replaced.
      lstm_pointwise_forward<S>(a, ct_, tc, ht_, cp);
      tmp_.resize(H, B);
      layer_norm_forward<S>(tmp_, step_block(chat_, t, B), crstd_.middleCols(t * B, B), ct_, g_cell_.w, b_cell_.w, eps);
      tc.array() = tmp_.array().tanh();
      ht_.array() = a.bottomRows(H).array() * tc.array();
    }
  } else {
    auto ah = step_block(ah_, t, B);
    ah.noalias() = W_hh_.w * hp;
    if (!spec_.ln_gates) {
      a.colwise() += b_ih_.w.col(0);
      ah.colwise() += b_hh_.w.col(0);
      gru_pointwise_forward<S>(a, ht_, ah, hp);
    } else {
      // Gates in order, each normalised before its nonlinearity; n needs r first.
      auto rs = rstd_.middleCols(t * 3 * B, 3 * B);
      auto xh = step_block(xhat_, t, B);
      auto ln = [&](Index k) {
        layer_norm_forward<S>(a.middleRows(k * H, H), xh.middleRows(k * H, H), rs.middleCols(k * B, B),
                              a.middleRows(k * H, H), g_gates_.w.middleRows(k * H, H), b_gates_.w.middleRows(k * H, H),
                              eps);
      };
      auto r = a.topRows(H).array();
      auto z = a.middleRows(H, H).array();
      auto n = a.bottomRows(H).array();
      r += ah.topRows(H).array();
      ln(0);
      r = r.logistic();
      z += ah.middleRows(H, H).array();
      ln(1);
      z = z.logistic();
      n += r * ah.bottomRows(H).array();
      ln(2);
      n = n.tanh();
      ht_.array() = (S(1) - z) * n + z * hp.array();
    }
  }
  // Zoneout, then the new state.
  const bool masks = train_;
  if (has_c()) {
    if (spec_.zoneout_c == 0.0)
      c = ct_;
    else if (masks)
      zoneout_mix<S>(c, ct_, cp, step_block(mask_c_, t, B));
    else
      c.array() = S(1 - spec_.zoneout_c) * ct_.array() + S(spec_.zoneout_c) * cp.array();
    step_block(c_out_, t, B) = c;
  }
  if (spec_.zoneout_h == 0.0)
    h = ht_;
  else if (masks)
    zoneout_mix<S>(h, ht_, hp, step_block(mask_h_, t, B));
  else
    h.array() = S(1 - spec_.zoneout_h) * ht_.array() + S(spec_.zoneout_h) * hp.array();
  step_block(h_out_, t, B) = h;
}

template <class S> void StepCell<S>::backward_step(Index t, MRef<S> dh, MRef<S> dc, MRef<S> dx) {
  const Index H = spec_.H, B = B_, N = T_ * B_;
  MSRNN_CHECK(train_, "backward needs a training-mode forward");
  if (t == T_ - 1) {
    da_.resize(G() * H, N);
    if (spec_.type == CellType::GRU) dah_.resize(3 * H, N);
    dh_out_.resize(H, N);
    dc_out_.resize(has_c() ? H : 0, N);
    dht_.resize(H, B);
    dct_.resize(has_c() ? H : 0, B);
    tmp_.resize(H, B);
  }
  step_block(dh_out_, t, B) = dh;
  // Zoneout: split the gradient between the new value and the kept previous one.
  const bool zh = spec_.zoneout_h > 0.0, zc = has_c() && spec_.zoneout_c > 0.0;
  if (zh) {
    const auto m = step_block(mask_h_, t, B).array();
    dht_.array() = m * dh.array();
    dh.array() *= S(1) - m;  // the direct path to h_{t-1}
  } else {
    dht_ = dh;
    dh.setZero();
  }
  if (has_c()) {
    if (zc) {
      const auto m = step_block(mask_c_, t, B).array();
      dct_.array() = m * dc.array();
      dc.array() *= S(1) - m;
    } else {
      dct_ = dc;
      dc.setZero();
    }
  }
  auto da = step_block(da_, t, B);
  const auto a = step_block(act_, t, B);
  const auto hp = step_block(h_prev_, t, B);
  if (spec_.type == CellType::LSTM) {
    const auto cp = step_block(c_prev_, t, B);
    const auto tc = step_block(tanh_c_, t, B);
    if (!spec_.ln_cell) {
      step_block(dc_out_, t, B).array() =
          dct_.array() + dht_.array() * a.bottomRows(H).array() * (S(1) - tc.array().square());
      lstm_pointwise_backward<S>(da, tmp_, dht_, dct_, a, tc, cp);
    } else {
      const auto o = a.bottomRows(H).array();
      tmp_.array() = dht_.array() * o * (S(1) - tc.array().square());  // gradient of LN(c~_t)
      layer_norm_backward<S>(tmp_, g_cell_.g, b_cell_.g, tmp_, step_block(chat_, t, B), crstd_.middleCols(t * B, B),
                             g_cell_.w);
      tmp_ += dct_;  // the whole gradient reaching c~_t
      step_block(dc_out_, t, B) = tmp_;
      // The plain cell's backward with no gradient at its own output o * tanh(c~_t): the i, f, g
      // rows and f * dc~_t; the o rows follow from h~_t = o * tanh(LN(c~_t)).
      zero_.setZero(H, B);
      lstm_pointwise_backward<S>(da, tmp_, zero_, tmp_, a, tc, cp);
      da.bottomRows(H).array() = dht_.array() * tc.array() * o * (S(1) - o);
    }
    dc += tmp_;
    if (spec_.ln_gates) {
      auto rs = rstd_.middleCols(t * 4 * B, 4 * B);
      for (Index k = 0; k < 4; ++k)
        layer_norm_backward<S>(da.middleRows(k * H, H), g_gates_.g.middleRows(k * H, H),
                               b_gates_.g.middleRows(k * H, H), da.middleRows(k * H, H),
                               step_block(xhat_, t, B).middleRows(k * H, H), rs.middleCols(k * B, B),
                               g_gates_.w.middleRows(k * H, H));
    }
    dh.noalias() += W_hh_.w.transpose() * da;
  } else {
    auto dah = step_block(dah_, t, B);
    const auto ah = step_block(ah_, t, B);
    if (!spec_.ln_gates) {
      gru_pointwise_backward<S>(da, dah, tmp_, dht_, a, ah, hp);
    } else {
      const auto r = a.topRows(H).array();
      const auto z = a.middleRows(H, H).array();
      const auto n = a.bottomRows(H).array();
      auto rs = rstd_.middleCols(t * 3 * B, 3 * B);
      auto xh = step_block(xhat_, t, B);
      auto ln_back = [&](Index k) {
        layer_norm_backward<S>(da.middleRows(k * H, H), g_gates_.g.middleRows(k * H, H),
                               b_gates_.g.middleRows(k * H, H), da.middleRows(k * H, H), xh.middleRows(k * H, H),
                               rs.middleCols(k * B, B), g_gates_.w.middleRows(k * H, H));
      };
      auto dn = da.bottomRows(H).array();
      dn = dht_.array() * (S(1) - z) * (S(1) - n.square());
      ln_back(2);                                                            // d(ax_n + r * ah_n)
      dah.bottomRows(H).array() = dn * r;
      da.topRows(H).array() = dn * ah.bottomRows(H).array() * r * (S(1) - r);  // through r
      ln_back(0);
      da.middleRows(H, H).array() = dht_.array() * (hp.array() - n) * z * (S(1) - z);
      ln_back(1);
      dah.topRows(2 * H) = da.topRows(2 * H);
      tmp_.array() = dht_.array() * z;
    }
    dh += tmp_;
    dh.noalias() += W_hh_.w.transpose() * dah;
  }
  if (dx.cols() > 0) {
    MSRNN_CHECK(spec_.E > 0, "backward_step: the cell has no input");
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
  }
}

template class StepCell<float>;
template class StepCell<double>;

}  // namespace msrnn
