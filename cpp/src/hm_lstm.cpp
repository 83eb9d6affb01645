#include "msrnn/hm_lstm.hpp"

#include <cmath>
#include <limits>

namespace msrnn {

namespace {

bool flag_option(const std::map<std::string, double>& num, const char* name, bool dflt) {
  auto it = num.find(name);
  if (it == num.end()) return dflt;
  MSRNN_CHECK(it->second == 0.0 || it->second == 1.0, "HM-LSTM option '", name, "' must be 0/1 (False/True), got ",
              it->second);
  return it->second != 0.0;
}

// dst (rows, k) = src columns idx (of a (rows, B) block), each scaled by scale(0, b) when given.
template <class S, class Src>
void gather(Mat<S>& dst, const Src& src, const std::vector<Index>& idx, const S* scale = nullptr, Index sstride = 1,
            bool one_minus = false) {
  dst.resize(src.rows(), Index(idx.size()));
  for (size_t j = 0; j < idx.size(); ++j) {
    if (scale) {
      S w = scale[idx[j] * sstride];
      if (one_minus) w = S(1) - w;
      dst.col(j) = w * src.col(idx[j]);
    } else {
      dst.col(j) = src.col(idx[j]);
    }
  }
}

template <class S, class Dst> void scatter(Dst&& dst, const Mat<S>& src, const std::vector<Index>& idx) {
  for (size_t j = 0; j < idx.size(); ++j) dst.col(idx[j]) = src.col(j);
}

template <class S> S hard_sigm(S x, S slope) { return std::min(S(1), std::max(S(0), (slope * x + S(1)) / S(2))); }

}  // namespace

HMLSTMOptions hm_lstm_options(const std::map<std::string, double>& num, const std::map<std::string, std::string>& text) {
  HMLSTMOptions o;
  static const char* known_num[] = {"slope", "top_boundary", "flush_cut", "layer_norm", "skip", "ln_eps"};
  static const char* known_text[] = {"boundary", "copy_z", "gradient"};
  for (const auto& kv : num) {
    bool ok = false;
    for (auto* k : known_num) ok |= kv.first == k;
    for (auto* k : known_text) MSRNN_CHECK(kv.first != k, "HM-LSTM option '", kv.first, "' must be a string");
    MSRNN_CHECK(ok, "unknown HM-LSTM option '", kv.first,
                "'; options are boundary, top_boundary, copy_z, flush_cut, gradient, slope, layer_norm, skip, ln_eps");
  }
  for (const auto& kv : text) {
    bool ok = false;
    for (auto* k : known_text) ok |= kv.first == k;
    MSRNN_CHECK(ok, "unknown HM-LSTM text option '", kv.first, "' (value '", kv.second,
                "'); text options are boundary, copy_z, gradient");
  }
  auto txt = [&](const char* name, const char* dflt) {
    auto it = text.find(name);
    return it == text.end() ? std::string(dflt) : it->second;
  };
  const std::string boundary = txt("boundary", "step");
  if (boundary == "step") o.boundary = HMBoundary::Step;
  else if (boundary == "sample") o.boundary = HMBoundary::Sample;
  else if (boundary == "soft") o.boundary = HMBoundary::Soft;
  else throw std::invalid_argument(cat("HM-LSTM boundary must be 'step', 'sample' or 'soft', got '", boundary, "'"));
  const std::string copy_z = txt("copy_z", "carry");
  MSRNN_CHECK(copy_z == "carry" || copy_z == "recompute", "HM-LSTM copy_z must be 'carry' or 'recompute', got '",
              copy_z, "'");
  o.copy_recompute = copy_z == "recompute";
  const bool soft = o.boundary == HMBoundary::Soft;
  const std::string gradient = txt("gradient", soft ? "blend" : "switch");
  MSRNN_CHECK(gradient == "switch" || gradient == "blend", "HM-LSTM gradient must be 'switch' or 'blend', got '",
              gradient, "'");
  MSRNN_CHECK(!(soft && gradient == "switch"),
              "HM-LSTM gradient 'switch' needs binary boundaries; with boundary 'soft' the cases of eq. 2 are blends, "
              "so gradient must be 'blend'");
  o.blend = gradient == "blend";
  o.top_boundary = flag_option(num, "top_boundary", false);
  o.flush_cut = flag_option(num, "flush_cut", false);
  o.layer_norm = flag_option(num, "layer_norm", false);
  o.skip = flag_option(num, "skip", true);
  if (num.count("slope")) o.slope = num.at("slope");
  MSRNN_CHECK(o.slope > 0.0 && std::isfinite(o.slope), "HM-LSTM slope must be positive and finite, got ", o.slope);
  if (num.count("ln_eps")) o.ln_eps = num.at("ln_eps");
  MSRNN_CHECK(o.ln_eps > 0.0, "HM-LSTM ln_eps must be positive, got ", o.ln_eps);
  return o;
}

template <class S>
void hm_pointwise_forward(MRef<S> act, MRef<S> c, MRef<S> tanh_c, MRef<S> h, CRef<S> cp, CRef<S> hp, CRef<S> zp,
                          CRef<S> zb, S slope) {
  const Index H = c.rows();
  auto i = act.topRows(H).array();
  auto f = act.middleRows(H, H).array();
  auto g = act.middleRows(2 * H, H).array();
  auto o = act.middleRows(3 * H, H).array();
  i = i.logistic();
  f = f.logistic();
  g = g.tanh();
  o = o.logistic();
  if (act.rows() > 4 * H)
    for (Index j = 0; j < act.cols(); ++j) act(4 * H, j) = hard_sigm(act(4 * H, j), slope);
  for (Index j = 0; j < c.cols(); ++j) {
    const S wC = (S(1) - zp(0, j)) * (S(1) - zb(0, j)), wU = (S(1) - zp(0, j)) * zb(0, j);
    c.col(j).array() = (S(1) - wC) * (i.col(j) * g.col(j)) + wU * (f.col(j) * cp.col(j).array()) + wC * cp.col(j).array();
    tanh_c.col(j).array() = c.col(j).array().tanh();
    h.col(j).array() = (S(1) - wC) * (o.col(j) * tanh_c.col(j).array()) + wC * hp.col(j).array();
  }
}

template <class S>
void hm_pointwise_backward(MRef<S> da, MRef<S> dcp, MRef<S> dhp, MRef<S> dwU, MRef<S> dwC, CRef<S> dh, CRef<S> dc,
                           CRef<S> act, CRef<S> tanh_c, CRef<S> c, CRef<S> cp, CRef<S> hp, CRef<S> zp, CRef<S> zb) {
  (void)c;
  const Index H = dh.rows();
  for (Index j = 0; j < dh.cols(); ++j) {
    const S wC = (S(1) - zp(0, j)) * (S(1) - zb(0, j)), wU = (S(1) - zp(0, j)) * zb(0, j), a1 = S(1) - wC;
    const auto i = act.col(j).segment(0, H).array();
    const auto f = act.col(j).segment(H, H).array();
    const auto g = act.col(j).segment(2 * H, H).array();
    const auto o = act.col(j).segment(3 * H, H).array();
    const auto tc = tanh_c.col(j).array();
    const auto dhj = dh.col(j).array();
    const auto cpj = cp.col(j).array();
    // Gradient reaching c_t in total (kept in dcp's memory until the end).
    auto dct = dcp.col(j).array();
    dct = dc.col(j).array() + a1 * dhj * o * (S(1) - tc.square());
    da.col(j).segment(0, H).array() = a1 * dct * g * i * (S(1) - i);
    da.col(j).segment(H, H).array() = wU * dct * cpj * f * (S(1) - f);
    da.col(j).segment(2 * H, H).array() = a1 * dct * i * (S(1) - g.square());
    da.col(j).segment(3 * H, H).array() = a1 * dhj * tc * o * (S(1) - o);
    dwC(0, j) = (dhj * (hp.col(j).array() - o * tc)).sum() + (dct * (cpj - i * g)).sum();
    dwU(0, j) = (dct * f * cpj).sum();
    dhp.col(j).array() = wC * dhj;
    dct *= wU * f + wC;
  }
}

template <class S>
HMLSTM<S>::HMLSTM(ParamSet<S>& ps, Index E, const std::vector<Index>& hidden, const HMLSTMOptions& opt, Rng* rng)
    : E_(E), out_size_(0), H_(hidden), opt_(opt), rng_(rng) {
  MSRNN_CHECK(E > 0, "HM-LSTM input size must be positive, got ", E);
  MSRNN_CHECK(!hidden.empty(), "HM-LSTM needs at least one layer");
  const size_t L = hidden.size();
  layers_.resize(L);
  for (size_t l = 0; l < L; ++l) {
    auto& y = layers_[l];
    MSRNN_CHECK(hidden[l] > 0, "HM-LSTM layer ", l, " size must be positive, got ", hidden[l]);
    y.H = hidden[l];
    y.Hb = l == 0 ? E : hidden[l - 1];
    y.Ht = l + 1 < L ? hidden[l + 1] : 0;
    y.detector = l + 1 < L || opt.top_boundary;
    y.G = 4 * y.H + (y.detector ? 1 : 0);
    const std::string sfx = cat("_l", l);
    y.W.id = ps.add("weight_ih" + sfx, y.G, y.Hb);
    y.U.id = ps.add("weight_hh" + sfx, y.G, y.H);
    if (y.Ht > 0) y.Utd.id = ps.add("weight_td" + sfx, y.G, y.Ht);
    y.b.id = ps.add("bias" + sfx, y.G, 1);
    if (opt.layer_norm) {
      y.ln_g.id = ps.add("ln_weight" + sfx, 4 * y.H, 1);
      y.ln_b.id = ps.add("ln_bias" + sfx, 4 * y.H, 1);
    }
    out_size_ += y.H;
  }
}

template <class S> void HMLSTM<S>::bind(ParamSet<S>& ps) {
  for (auto& y : layers_) {
    y.W.bind(ps);
    y.U.bind(ps);
    y.b.bind(ps);
    if (y.Ht > 0) y.Utd.bind(ps);
    if (opt_.layer_norm) {
      y.ln_g.bind(ps);
      y.ln_b.bind(ps);
    }
  }
}

template <class S> void HMLSTM<S>::reset_state(Index B) {
  for (auto& y : layers_) {
    y.h.setZero(y.H, B);
    y.c.setZero(y.H, B);
    y.z.setZero(1, B);
  }
  ones_.setOnes(1, B);
}

template <class S> std::vector<NamedState<S>> HMLSTM<S>::get_state() const {
  std::vector<NamedState<S>> out;
  for (size_t l = 0; l < layers_.size(); ++l) {
    out.push_back({cat("h_l", l), layers_[l].h});
    out.push_back({cat("c_l", l), layers_[l].c});
    out.push_back({cat("z_l", l), layers_[l].z});
  }
  return out;
}

template <class S> void HMLSTM<S>::set_state(const std::vector<NamedState<S>>& state) {
  const Index B = state.empty() ? 0 : state.front().value.cols();
  for (size_t l = 0; l < layers_.size(); ++l) {
    auto& y = layers_[l];
    const Mat<S>& z = find_state(state, cat("z_l", l), 1, B);
    for (Index b = 0; b < B; ++b) {
      const S v = z(0, b);
      if (opt_.boundary == HMBoundary::Soft)
        MSRNN_CHECK(v >= S(0) && v <= S(1), "state 'z_l", l, "' must lie in [0, 1], got ", v, " in stream ", b);
      else
        MSRNN_CHECK(v == S(0) || v == S(1), "state 'z_l", l, "' must be 0 or 1 with binary boundaries, got ", v,
                    " in stream ", b);
      MSRNN_CHECK(y.detector || v == S(0), "state 'z_l", l, "' must be 0: the top layer has no boundary detector");
    }
    find_state(state, cat("h_l", l), y.H, B);
    find_state(state, cat("c_l", l), y.H, B);
  }
  for (size_t l = 0; l < layers_.size(); ++l) {
    auto& y = layers_[l];
    y.h = find_state(state, cat("h_l", l), y.H, B);
    y.c = find_state(state, cat("c_l", l), y.H, B);
    y.z = find_state(state, cat("z_l", l), 1, B);
  }
  ones_.setOnes(1, B);
}

template <class S> void HMLSTM<S>::set_option(const std::string& name, double value) {
  if (name == "slope") {
    MSRNN_CHECK(value > 0.0 && std::isfinite(value), "HM-LSTM slope must be positive and finite, got ", value);
    opt_.slope = value;
  } else if (name == "skip") {
    MSRNN_CHECK(value == 0.0 || value == 1.0, "HM-LSTM option 'skip' must be 0 or 1, got ", value);
    opt_.skip = value != 0.0;
  } else {
    throw std::invalid_argument(cat("the HM-LSTM cannot change option '", name,
                                    "' after construction; changeable options are 'slope' and 'skip'"));
  }
}

template <class S> bool HMLSTM<S>::skipping(bool train) const {
  return opt_.skip && opt_.boundary != HMBoundary::Soft && (!train || !opt_.blend);
}

template <class S> void HMLSTM<S>::forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool train) {
  const Index N = T * B;
  MSRNN_CHECK(X.rows() == E_ && X.cols() == N, "HM-LSTM input has shape (", X.rows(), ", ", X.cols(), "), expected (",
              E_, ", ", N, ")");
  MSRNN_CHECK(layers_[0].h.cols() == B, "HM-LSTM state has batch size ", layers_[0].h.cols(), ", input has ", B);
  T_ = T;
  B_ = B;
  train_ = train;
  skip_ = skipping(train);
  const S nan = std::numeric_limits<S>::quiet_NaN();
  for (auto& y : layers_) {
    y.hs.resize(y.H, N + B);
    y.cs.resize(y.H, N + B);
    y.zs.resize(1, N + B);
    y.act.resize(y.G, N);
    if (y.detector) y.act.row(4 * y.H).setConstant(nan);
    y.tanh_c.resize(y.H, N);
    if (opt_.layer_norm) {
      y.xhat.resize(4 * y.H, N);
      y.rstd.resize(1, 4 * N);  // entry q*N + n: 1/sigma of gate block q in column n
    }
    y.znew.resize(1, N);
    y.op.assign(N, 0);
    y.computed.assign(N, 0);
    y.hs.leftCols(B) = y.h;
    y.cs.leftCols(B) = y.c;
    y.zs.leftCols(B) = y.z;
  }
  // Layer 1's bottom-up term for all steps at once (z^0 = 1, every column of layer 1 is computed).
  P0_.resize(layers_[0].G, N);
  linear_forward<S>(P0_, layers_[0].W.w, layers_[0].b.w, X);
  for (Index t = 0; t < T; ++t)
    for (size_t l = 0; l < layers_.size(); ++l) layer_step_forward(l, t, train, skip_);
  Index row = 0;
  for (auto& y : layers_) {
    Y.middleRows(row, y.H) = y.hs.rightCols(N);
    row += y.H;
    y.h = y.hs.rightCols(B);
    y.c = y.cs.rightCols(B);
    y.z = y.zs.rightCols(B);
  }
}

template <class S> void HMLSTM<S>::gather_previous(CRef<S> cp, CRef<S> hp, const S* zp, const S* zb) {
  const Index k = static_cast<Index>(idx_.size());
  gather(gcp_, cp, idx_);
  gather(ghp_, hp, idx_);
  gzp_.resize(1, k);
  gzb_.resize(1, k);
  for (Index j = 0; j < k; ++j) {
    gzp_(0, j) = zp[idx_[j]];
    gzb_(0, j) = zb[idx_[j]];
  }
}

template <class S> void HMLSTM<S>::layer_step_forward(size_t l, Index t, bool /*train*/, bool skip) {
  auto& y = layers_[l];
  const Index B = B_, H = y.H, zr = 4 * H;
  const bool top = l + 1 == layers_.size();
  const S slope = S(opt_.slope);
  const S* zp = y.zs.data() + t * B;                                // (1, B) z^l_{t-1}
  const S* zb = l == 0 ? ones_.data() : layers_[l - 1].zs.data() + (t + 1) * B;  // (1, B) z^{l-1}_t
  auto hp = step_block(y.hs, t, B);                                 // (H, B) h^l_{t-1}
  auto cp = step_block(y.cs, t, B);                                 // (H, B) c^l_{t-1}
  // Uniforms for Bernoulli boundaries: one per column whatever the path, so both paths draw alike.
  std::vector<double> u;
  if (opt_.boundary == HMBoundary::Sample && y.detector) {
    u.resize(B);
    for (auto& v : u) v = rng_->uniform();
  }
  auto bound = [&](S zhat, Index b) -> S {
    switch (opt_.boundary) {
      case HMBoundary::Step: return zhat > S(0.5) ? S(1) : S(0);
      case HMBoundary::Sample: return S(u[b]) < zhat ? S(1) : S(0);
      default: return zhat;
    }
  };
  idx_.clear();
  cidx_.clear();
  for (Index b = 0; b < B; ++b) {
    const int op = zp[b] > S(0.5) ? kFlush : (zb[b] > S(0.5) ? kUpdate : kCopy);
    y.op[t * B + b] = static_cast<std::int8_t>(op);
    if (!skip || op != kCopy) idx_.push_back(b);
    else cidx_.push_back(b);
  }
  const Index k = Index(idx_.size());
  if (k > 0) {
    // s (G, k) = W (zb h^{l-1}_t) + U (r h^l_{t-1}) + Utd (zp h^{l+1}_{t-1}) + b
    if (l == 0) {
      gather(gs_, step_block(P0_, t, B), idx_);
    } else {
      gather(gb_, step_block(layers_[l - 1].hs, t + 1, B), idx_, zb);
      gs_.resize(y.G, k);
      linear_forward<S>(gs_, y.W.w, y.b.w, gb_);
    }
    gather(gp_, hp, idx_, opt_.flush_cut ? zp : nullptr, 1, /*one_minus=*/true);
    gs_.noalias() += y.U.w * gp_;
    if (!top) {
      gather(gt_, step_block(layers_[l + 1].hs, t, B), idx_, zp);
      gs_.noalias() += y.Utd.w * gt_;
    }
    if (opt_.layer_norm) {
      gx_.resize(4 * H, k);
      grs_.resize(1, 4 * k);  // block q of k columns: 1/sigma of gate block q
      for (Index q = 0; q < 4; ++q)
        layer_norm_forward<S>(gs_.middleRows(q * H, H), gx_.middleRows(q * H, H), grs_.middleCols(q * k, k),
                              gs_.middleRows(q * H, H), y.ln_g.w.middleRows(q * H, H), y.ln_b.w.middleRows(q * H, H),
                              S(opt_.ln_eps));
      scatter<S>(step_block(y.xhat, t, B), gx_, idx_);
      for (Index q = 0; q < 4; ++q)
        for (Index j = 0; j < k; ++j) y.rstd(0, q * T_ * B + t * B + idx_[j]) = grs_(0, q * k + j);
    }
    gather_previous(cp, hp, zp, zb);
    gc_.resize(H, k);
    gtc_.resize(H, k);
    gh_.resize(H, k);
    hm_pointwise_forward<S>(gs_, gc_, gtc_, gh_, gcp_, ghp_, gzp_, gzb_, slope);
    scatter<S>(step_block(y.act, t, B), gs_, idx_);
    scatter<S>(step_block(y.cs, t + 1, B), gc_, idx_);
    scatter<S>(step_block(y.tanh_c, t, B), gtc_, idx_);
    scatter<S>(step_block(y.hs, t + 1, B), gh_, idx_);
    for (Index j = 0; j < k; ++j) {
      const Index b = idx_[j], n = t * B + b;
      y.computed[n] = 1;
      const S wC = (S(1) - zp[b]) * (S(1) - zb[b]);
      const S zn = y.detector ? bound(gs_(zr, j), b) : S(0);
      y.znew(0, n) = zn;
      y.zs(0, n + B) = opt_.copy_recompute ? zn : (S(1) - wC) * zn + wC * zp[b];
    }
  }
  // COPY columns of the skipping path: (c, h) unchanged; z carried, or only its row recomputed.
  if (!cidx_.empty()) {
    for (Index b : cidx_) {
      const Index n = t * B + b;
      y.hs.col(n + B) = hp.col(b);
      y.cs.col(n + B) = cp.col(b);
      y.zs(0, n + B) = zp[b];
      y.znew(0, n) = zp[b];
    }
    if (opt_.copy_recompute && y.detector) {
      // zp = 0 and zb = 0 here: s_z = U_z h^l_{t-1} + b_z.
      gather(ghp_, hp, cidx_);
      gzn_.noalias() = y.U.w.row(zr) * ghp_;
      for (size_t j = 0; j < cidx_.size(); ++j) {
        const Index b = cidx_[j], n = t * B + b;
        const S zhat = hard_sigm(gzn_(0, j) + y.b.w(zr, 0), slope);
        y.act(zr, n) = zhat;
        const S zn = bound(zhat, b);
        y.znew(0, n) = zn;
        y.zs(0, n + B) = zn;
      }
    }
  }
}

template <class S> void HMLSTM<S>::backward(MRef<S> dX, CRef<S> dY, CRef<S> X) {
  const Index T = T_, B = B_, N = T * B;
  MSRNN_CHECK(train_, "HM-LSTM backward needs a training-mode forward first");
  MSRNN_CHECK(dY.rows() == out_size_ && dY.cols() == N, "HM-LSTM backward: dY has shape (", dY.rows(), ", ", dY.cols(),
              "), expected (", out_size_, ", ", N, ")");
  for (auto& y : layers_) {
    y.dA.setZero(y.G, N);
    y.dh_prev.setZero(y.H, B);
    y.dc_prev.setZero(y.H, B);
    y.dz_prev.setZero(1, B);
    y.dh_cur.setZero(y.H, B);
    y.dc_cur.setZero(y.H, B);
    y.dz_cur.setZero(1, B);
  }
  for (Index t = T - 1; t >= 0; --t) {
    Index row = 0;
    for (auto& y : layers_) {
      y.dh_cur.swap(y.dh_prev);
      y.dc_cur.swap(y.dc_prev);
      y.dz_cur.swap(y.dz_prev);
      y.dh_prev.setZero();
      y.dc_prev.setZero();
      y.dz_prev.setZero();
      y.dh_cur += dY.block(row, t * B, y.H, B);
      row += y.H;
    }
    for (size_t l = layers_.size(); l-- > 0;) layer_step_backward(l, t);
  }
  // Weight gradients over all computed columns of the chunk, one product per matrix.
  const size_t L = layers_.size();
  for (size_t l = 0; l < L; ++l) {
    auto& y = layers_[l];
    const Index zr = 4 * y.H;
    std::vector<Index> cols, zcols;  // computed columns; COPY columns whose boundary row was recomputed
    for (Index n = 0; n < N; ++n) {
      if (y.computed[n]) cols.push_back(n);
      else if (opt_.copy_recompute && y.detector) zcols.push_back(n);
    }
    const Index m = Index(cols.size());
    if (m > 0) {
      Mat<S> dA(y.G, m);  // (G, m)
      gather(dA, y.dA, cols);
      if (l == 0) {
        Mat<S> Xg;  // (E, m)
        gather(Xg, X, cols);
        y.W.g.noalias() += dA * Xg.transpose();
      } else {
        Mat<S> Hb(y.Hb, m);  // (Hb, m) z^{l-1}_t h^{l-1}_t
        const auto& below = layers_[l - 1];
        for (Index j = 0; j < m; ++j) Hb.col(j) = below.zs(0, cols[j] + B) * below.hs.col(cols[j] + B);
        y.W.g.noalias() += dA * Hb.transpose();
      }
      Mat<S> Hp(y.H, m);  // (H, m) r h^l_{t-1}
      for (Index j = 0; j < m; ++j)
        Hp.col(j) = (opt_.flush_cut ? S(1) - y.zs(0, cols[j]) : S(1)) * y.hs.col(cols[j]);
      y.U.g.noalias() += dA * Hp.transpose();
      if (y.Ht > 0) {
        Mat<S> Ht(y.Ht, m);  // (Ht, m) z^l_{t-1} h^{l+1}_{t-1}
        const auto& above = layers_[l + 1];
        for (Index j = 0; j < m; ++j) Ht.col(j) = y.zs(0, cols[j]) * above.hs.col(cols[j]);
        y.Utd.g.noalias() += dA * Ht.transpose();
      }
      y.b.g.col(0) += dA.rowwise().sum();
    }
    if (!zcols.empty()) {
      const Index mc = Index(zcols.size());
      Mat<S> dz(1, mc), Hp(y.H, mc);  // (1, mc), (H, mc)
      for (Index j = 0; j < mc; ++j) {
        dz(0, j) = y.dA(zr, zcols[j]);
        Hp.col(j) = y.hs.col(zcols[j]);
      }
      y.U.g.row(zr).noalias() += dz * Hp.transpose();
      y.b.g(zr, 0) += dz.sum();
    }
  }
  if (dX.cols() > 0) dX.noalias() = layers_[0].W.w.transpose() * layers_[0].dA;
}

template <class S> void HMLSTM<S>::layer_step_backward(size_t l, Index t) {
  auto& y = layers_[l];
  const Index B = B_, H = y.H, zr = 4 * H;
  const bool top = l + 1 == layers_.size();
  const S slope = S(opt_.slope), half = slope / S(2);
  const S* zp = y.zs.data() + t * B;
  const S* zb = l == 0 ? ones_.data() : layers_[l - 1].zs.data() + (t + 1) * B;
  auto hp = step_block(y.hs, t, B);
  auto cp = step_block(y.cs, t, B);
  Layer* below = l > 0 ? &layers_[l - 1] : nullptr;
  Layer* above = top ? nullptr : &layers_[l + 1];
  // Straight-through slope of zhat at a column (0 outside the linear part of the hard sigmoid).
  auto zslope = [&](Index n) -> S {
    const S zh = y.act(zr, n);
    return (zh > S(0) && zh < S(1)) ? half : S(0);
  };
  // Gradient of z^l_t split into znew and the carried z^l_{t-1}.
  gdz_.resize(1, B);                      // (1, B) gradient of znew
  std::vector<S> dwCz(B, S(0));           // gradient of w_C through the carry (blend)
  for (Index b = 0; b < B; ++b) {
    const Index n = t * B + b;
    const S dz = y.dz_cur(0, b);
    if (!y.detector) {
      gdz_(0, b) = S(0);
    } else if (opt_.copy_recompute) {
      gdz_(0, b) = dz;
    } else {
      const S wC = (S(1) - zp[b]) * (S(1) - zb[b]);
      gdz_(0, b) = (S(1) - wC) * dz;
      y.dz_prev(0, b) += wC * dz;
      dwCz[b] = dz * (zp[b] - y.znew(0, n));
    }
  }
  idx_.clear();
  cidx_.clear();
  for (Index b = 0; b < B; ++b) (y.computed[t * B + b] ? idx_ : cidx_).push_back(b);
  const Index k = Index(idx_.size());
  if (k > 0) {
    gather(gdh_, y.dh_cur, idx_);
    gather(gdc_, y.dc_cur, idx_);
    Mat<S> gact, gtc, gc;  // (G, k), (H, k), (H, k)
    gather(gact, step_block(y.act, t, B), idx_);
    gather(gtc, step_block(y.tanh_c, t, B), idx_);
    gather(gc, step_block(y.cs, t + 1, B), idx_);
    gather_previous(cp, hp, zp, zb);
    gda_.resize(y.G, k);
    gdcp_.resize(H, k);
    gdhp_.resize(H, k);
    gdwU_.resize(1, k);
    gdwC_.resize(1, k);
    hm_pointwise_backward<S>(gda_.topRows(4 * H), gdcp_, gdhp_, gdwU_, gdwC_, gdh_, gdc_, gact, gtc, gc, gcp_, ghp_,
                             gzp_, gzb_);
    if (y.detector)
      for (Index j = 0; j < k; ++j) gda_(zr, j) = gdz_(0, idx_[j]) * zslope(t * B + idx_[j]);
    if (opt_.layer_norm) {
      gather(gx_, step_block(y.xhat, t, B), idx_);
      grs_.resize(1, 4 * k);
      for (Index q = 0; q < 4; ++q)
        for (Index j = 0; j < k; ++j) grs_(0, q * k + j) = y.rstd(0, q * T_ * B + t * B + idx_[j]);
      for (Index q = 0; q < 4; ++q)
        layer_norm_backward<S>(gda_.middleRows(q * H, H), y.ln_g.g.middleRows(q * H, H), y.ln_b.g.middleRows(q * H, H),
                               gda_.middleRows(q * H, H), gx_.middleRows(q * H, H), grs_.middleCols(q * k, k),
                               y.ln_g.w.middleRows(q * H, H));
    }
    scatter<S>(step_block(y.dA, t, B), gda_, idx_);
    // Into the layer below at step t: h^{l-1}_t through the z-gated bottom-up term, and z^{l-1}_t.
    if (below) {
      gprod_.noalias() = y.W.w.transpose() * gda_;  // (Hb, k)
      for (Index j = 0; j < k; ++j) {
        const Index b = idx_[j];
        below->dh_cur.col(b) += zb[b] * gprod_.col(j);
        below->dz_cur(0, b) += below->hs.col((t + 1) * B + b).dot(gprod_.col(j));
      }
    }
    // Into this layer at step t-1: h through the recurrent term (and r = 1 - zp with flush_cut).
    gprod_.noalias() = y.U.w.transpose() * gda_;  // (H, k)
    for (Index j = 0; j < k; ++j) {
      const Index b = idx_[j];
      const S r = opt_.flush_cut ? S(1) - zp[b] : S(1);
      y.dh_prev.col(b) += r * gprod_.col(j) + gdhp_.col(j);
      if (opt_.flush_cut) y.dz_prev(0, b) -= hp.col(b).dot(gprod_.col(j));
      y.dc_prev.col(b) = gdcp_.col(j);
    }
    // Into the layer above at step t-1 through the top-down term, and z^l_{t-1} gating it.
    if (above) {
      gprod_.noalias() = y.Utd.w.transpose() * gda_;  // (Ht, k)
      for (Index j = 0; j < k; ++j) {
        const Index b = idx_[j];
        above->dh_prev.col(b) += zp[b] * gprod_.col(j);
        y.dz_prev(0, b) += above->hs.col(t * B + b).dot(gprod_.col(j));
      }
    }
    // The operation weights w_U = (1 - zp) zb, w_C = (1 - zp)(1 - zb) (blend reading only).
    if (opt_.blend || opt_.boundary == HMBoundary::Soft) {
      for (Index j = 0; j < k; ++j) {
        const Index b = idx_[j];
        const S dwU = gdwU_(0, j), dwC = gdwC_(0, j) + dwCz[b];
        y.dz_prev(0, b) += -zb[b] * dwU - (S(1) - zb[b]) * dwC;
        if (below) below->dz_cur(0, b) += (S(1) - zp[b]) * (dwU - dwC);
      }
    }
  }
  // COPY columns of the skipping path (switch reading): identity for c and h.
  if (!cidx_.empty()) {
    for (Index b : cidx_) {
      y.dh_prev.col(b) += y.dh_cur.col(b);
      y.dc_prev.col(b) = y.dc_cur.col(b);
    }
    if (opt_.copy_recompute && y.detector) {
      // Only the boundary row was computed: s_z = U_z h^l_{t-1} + zp (Utd_z h^{l+1}_{t-1}) + zb (W_z h^{l-1}_t) + b_z
      // with zp = zb = 0; the gated terms still pass gradient to zp and zb.
      for (Index b : cidx_) {
        const Index n = t * B + b;
        const S da = gdz_(0, b) * zslope(n);
        y.dA(zr, n) = da;
        if (da == S(0)) continue;
        y.dh_prev.col(b) += da * y.U.w.row(zr).transpose();
        if (opt_.flush_cut) y.dz_prev(0, b) -= da * y.U.w.row(zr).dot(hp.col(b));
        if (above) y.dz_prev(0, b) += da * y.Utd.w.row(zr).dot(above->hs.col(n));
        if (below) below->dz_cur(0, b) += da * y.W.w.row(zr).dot(below->hs.col(n + B));
      }
    }
  }
}

template <class S> std::vector<NamedState<S>> HMLSTM<S>::records() const {
  std::vector<NamedState<S>> out;
  const Index N = T_ * B_;
  if (N == 0) return out;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const auto& y = layers_[l];
    Mat<S> op(1, N), zhat(1, N);
    for (Index n = 0; n < N; ++n) op(0, n) = S(y.op[n]);
    if (y.detector) zhat = y.act.row(4 * y.H);
    else zhat.setZero();
    out.push_back({cat("z_l", l), y.zs.rightCols(N)});
    out.push_back({cat("zhat_l", l), zhat});
    out.push_back({cat("znew_l", l), y.znew});
    out.push_back({cat("op_l", l), op});
    out.push_back({cat("hnorm_l", l), y.hs.rightCols(N).colwise().norm()});
  }
  return out;
}

#define MSRNN_INSTANTIATE(S)                                                                                    \
  template void hm_pointwise_forward<S>(MRef<S>, MRef<S>, MRef<S>, MRef<S>, CRef<S>, CRef<S>, CRef<S>, CRef<S>, \
                                        S);                                                                     \
  template void hm_pointwise_backward<S>(MRef<S>, MRef<S>, MRef<S>, MRef<S>, MRef<S>, CRef<S>, CRef<S>, CRef<S>, \
                                         CRef<S>, CRef<S>, CRef<S>, CRef<S>, CRef<S>, CRef<S>);                  \
  template class HMLSTM<S>;
MSRNN_INSTANTIATE(float)
MSRNN_INSTANTIATE(double)
#undef MSRNN_INSTANTIATE

}  // namespace msrnn
