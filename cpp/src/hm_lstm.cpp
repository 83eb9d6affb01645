#include "msrnn/hm_lstm.hpp"

#include <cmath>
#include <limits>

namespace msrnn {

namespace {

// dst (rows, k) = src columns idx (of a (rows, B) block), each scaled by w = scale[idx[j]] (or 1 - w) when given.
template <class S, class Src>
void gather(MRef<S> dst, const Src& src, const std::vector<Index>& idx, const S* scale = nullptr,
            bool one_minus = false) {
  for (size_t j = 0; j < idx.size(); ++j) {
    if (scale) {
      S w = scale[idx[j]];
      if (one_minus) w = S(1) - w;
      dst.col(j) = w * src.col(idx[j]);
    } else {
      dst.col(j) = src.col(idx[j]);
    }
  }
}

// dst columns idx (of a (rows, B) block) = src (rows, k).
template <class Dst, class Src> void scatter(Dst&& dst, const Src& src, const std::vector<Index>& idx) {
  for (size_t j = 0; j < idx.size(); ++j) dst.col(idx[j]) = src.col(j);
}

template <class S> S hard_sigm(S x, S slope) { return std::min(S(1), std::max(S(0), (slope * x + S(1)) / S(2))); }

}  // namespace

HMLSTMOptions hm_lstm_options(CoreOptions& opts) {
  HMLSTMOptions o;
  const std::string boundary = opts.choice("boundary", "step", {"step", "sample", "soft"});
  o.boundary = boundary == "step" ? HMBoundary::Step : boundary == "sample" ? HMBoundary::Sample : HMBoundary::Soft;
  o.copy_recompute = opts.choice("copy_z", "carry", {"carry", "recompute"}) == "recompute";
  const bool soft = o.boundary == HMBoundary::Soft;
  const std::string gradient = opts.choice("gradient", soft ? "blend" : "switch", {"switch", "blend"});
  MSRNN_CHECK(!(soft && gradient == "switch"),
              "HM-LSTM gradient 'switch' needs binary boundaries; with boundary 'soft' the cases of eq. 2 are blends, "
              "so gradient must be 'blend'");
  o.blend = gradient == "blend";
  o.top_boundary = opts.flag("top_boundary", false);
  o.flush_cut = opts.flag("flush_cut", false);
  o.layer_norm = opts.flag("layer_norm", false);
  o.skip = opts.flag("skip", true);
  o.slope = opts.number("slope", 1.0);
  MSRNN_CHECK(o.slope > 0.0, "HM-LSTM slope must be positive and finite, got ", o.slope);
  o.ln_eps = opts.number("ln_eps", 1e-5);
  MSRNN_CHECK(o.ln_eps > 0.0, "HM-LSTM ln_eps must be positive, got ", o.ln_eps);
  opts.finish();
  return o;
}

namespace {
template <class S> std::unique_ptr<Core<S>> make_hm_lstm(ParamSet<S>& ps, const CoreArgs& a) {
  return std::make_unique<HMLSTM<S>>(ps, a.input_size, a.hidden_sizes, hm_lstm_options(*a.options), a.rng);
}
}  // namespace
MSRNN_REGISTER_CORE("hm_lstm", make_hm_lstm);

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
    y.K = y.Hb + y.H + y.Ht;
    const std::string sfx = cat("_l", l);
    y.W.id = ps.add("weight_ih" + sfx, y.G, y.Hb, {"input", y.H, sfx});
    y.U.id = ps.add("weight_hh" + sfx, y.G, y.H, {"recurrent", y.H, sfx});
    if (y.Ht > 0) y.Utd.id = ps.add("weight_td" + sfx, y.G, y.Ht, {"recurrent", y.H, sfx});
    y.b.id = ps.add("bias" + sfx, y.G, 1, {"bias", y.H, sfx});
    if (opt.layer_norm) {
      y.ln_g.id = ps.add("ln_weight" + sfx, 4 * y.H, 1, {"gain", y.H, sfx});
      y.ln_b.id = ps.add("ln_bias" + sfx, 4 * y.H, 1, {"shift", y.H, sfx});
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

// Rows of every scratch buffer are padded to 16 elements, so that every column starts at the same
// alignment: Eigen's vectorised nonlinearities then treat a column alike wherever it sits in the buffer,
// and a stream's results do not depend on which other columns share its step (thread count, skipping).
template <class S>
void HMLSTM<S>::Scratch::reserve(const std::vector<Layer>& layers, Index nb, Index B, bool layer_norm, bool backward) {
  auto pad = [](Index n) { return (n + 15) / 16 * 16; };
  Index K = 0, G = 0, H = 0;
  for (const auto& y : layers) {
    K = std::max(K, pad(y.K));
    G = std::max(G, pad(y.G));
    H = std::max(H, pad(y.H));
  }
  idx.reserve(B);
  cidx.reserve(B);
  gx.resize(K, nb);
  gs.resize(G, nb);
  for (auto* m : {&gc, &gtc, &gh, &gcp, &ghp}) m->resize(H, nb);
  for (auto* m : {&gzp, &gzb}) m->resize(1, nb);
  if (layer_norm) {
    gxh.resize(4 * H, nb);
    grs.resize(1, 4 * nb);
  }
  if (!backward) return;
  for (auto* m : {&gdh, &gdc, &gdcp, &gdhp, &gtcb, &gcb}) m->resize(H, nb);
  for (auto* m : {&gdwU, &gdwC}) m->resize(1, nb);
  gdz.resize(1, B);
  dwCz.assign(B, S(0));
  gda.resize(G, nb);
  gact.resize(G, nb);
  gprod.resize(K, nb);
  dln_g.resize(layers.size());
  dln_b.resize(layers.size());
  if (layer_norm)
    for (size_t l = 0; l < layers.size(); ++l) {
      dln_g[l].setZero(4 * layers[l].H, 1);
      dln_b[l].setZero(4 * layers[l].H, 1);
    }
}

template <class S> int HMLSTM<S>::stream_threads(Index B, bool fast) const {
  return fast ? std::max(1, std::min<int>(get_num_threads(), int(B))) : 1;
}

template <class S> void HMLSTM<S>::forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool train) {
  const Index N = T * B, L = Index(layers_.size());
  MSRNN_CHECK(X.rows() == E_ && X.cols() == N, "HM-LSTM input has shape (", X.rows(), ", ", X.cols(), "), expected (",
              E_, ", ", N, ")");
  MSRNN_CHECK(layers_[0].h.cols() == B, "HM-LSTM state has batch size ", layers_[0].h.cols(), ", input has ", B);
  T_ = T;
  B_ = B;
  train_ = train;
  skip_ = skipping(train);
  const bool fast = !reference_kernels();
  const S nan = std::numeric_limits<S>::quiet_NaN();
  for (auto& y : layers_) {
    y.hs.resize(y.H, N + B);
    y.cs.resize(y.H, N + B);
    y.zs.resize(1, N + B);
    if (y.detector) y.zhat.setConstant(1, N, nan);
    y.znew.resize(1, N);
    y.op.assign(N, 0);
    if (train) {
      y.act.resize(y.G, N);
      y.tanh_c.resize(y.H, N);
      if (opt_.layer_norm) {
        y.xhat.resize(4 * y.H, N);
        y.rstd.resize(1, 4 * N);  // entry q*N + n: 1/sigma of gate block q in column n
      }
      y.computed.assign(N, 0);
    }
    y.hs.leftCols(B) = y.h;
    y.cs.leftCols(B) = y.c;
    y.zs.leftCols(B) = y.z;
  }
  // Uniforms of Bernoulli boundaries, drawn in a fixed order whatever the threads and the path.
  uniforms_.clear();
  if (opt_.boundary == HMBoundary::Sample) {
    uniforms_.assign(size_t(T * L * B), 0.0);
    for (Index t = 0; t < T; ++t)
      for (Index l = 0; l < L; ++l)
        if (layers_[l].detector)
          for (Index b = 0; b < B; ++b) uniforms_[(t * L + l) * B + b] = rng_->uniform();
  }
  const int nt = stream_threads(B, fast);
  if (int(scratch_.size()) < nt) scratch_.resize(nt);
  if (!fast) {
    scratch_[0].reserve(layers_, B, B, opt_.layer_norm, false);
    for (Index t = 0; t < T; ++t)
      for (Index l = 0; l < L; ++l) layer_step_forward(l, t, 0, B, X, scratch_[0], false);
  } else {
    for (auto& y : layers_) {
      y.Wp.resize(1, 4 * y.H, y.K);
      if (y.detector) {  // the boundary row, kept apart so that it does not take a panel of its own
        const Index zr = 4 * y.H;
        y.wz.resize(y.K);
        y.wz.head(y.Hb) = y.W.w.row(zr).transpose();
        y.wz.segment(y.Hb, y.H) = y.U.w.row(zr).transpose();
        if (y.Ht > 0) y.wz.tail(y.Ht) = y.Utd.w.row(zr).transpose();
      }
    }
    const Index MR = PackedPanels<S>::panel_rows();
#pragma omp parallel num_threads(nt)
    {
      const int k = thread_id(), team = threads_in_team();
      for (auto& y : layers_) {  // this thread's panels of [W U Utd] and b
        const auto units = thread_units(4 * y.H, MR, k, team);
        y.Wp.pack(y.W.w.data(), y.G, 0, y.Hb, units.first, units.second);
        y.Wp.pack(y.U.w.data(), y.G, y.Hb, y.H, units.first, units.second);
        if (y.Ht > 0) y.Wp.pack(y.Utd.w.data(), y.G, y.Hb + y.H, y.Ht, units.first, units.second);
        y.Wp.set_bias(y.b.w.data(), units.first, units.second);
      }
#pragma omp barrier
      const auto cols = thread_units(B, 1, k, team);  // this thread's streams
      const Index j0 = cols.first, nb = cols.second - cols.first;
      if (nb > 0) {
        Scratch& s = scratch_[k];
        s.reserve(layers_, nb, B, opt_.layer_norm, false);
        for (Index t = 0; t < T; ++t)
          for (Index l = 0; l < L; ++l) layer_step_forward(l, t, j0, nb, X, s, true);
      }
    }
  }
  Index row = 0;
  for (auto& y : layers_) {
    Y.middleRows(row, y.H) = y.hs.rightCols(N);
    row += y.H;
    y.h = y.hs.rightCols(B);
    y.c = y.cs.rightCols(B);
    y.z = y.zs.rightCols(B);
  }
}

template <class S>
void HMLSTM<S>::gather_previous(Scratch& s, CRef<S> cp, CRef<S> hp, const S* zp, const S* zb) const {
  const Index k = static_cast<Index>(s.idx.size()), H = cp.rows();
  gather<S>(s.gcp.topLeftCorner(H, k), cp, s.idx);
  gather<S>(s.ghp.topLeftCorner(H, k), hp, s.idx);
  for (Index j = 0; j < k; ++j) {
    s.gzp(0, j) = zp[s.idx[j]];
    s.gzb(0, j) = zb[s.idx[j]];
  }
}

template <class S>
void HMLSTM<S>::layer_step_forward(size_t l, Index t, Index j0, Index nb, CRef<S> X, Scratch& s, bool fast) {
  auto& y = layers_[l];
  const Index B = B_, H = y.H, Hb = y.Hb, zr = 4 * H, L = Index(layers_.size());
  const bool top = l + 1 == layers_.size(), train = train_;
  const S slope = S(opt_.slope);
  const S* zp = y.zs.data() + t * B;                                // (1, B) z^l_{t-1}
  const S* zb = l == 0 ? ones_.data() : layers_[l - 1].zs.data() + (t + 1) * B;  // (1, B) z^{l-1}_t
  auto hp = step_block(y.hs, t, B);                                 // (H, B) h^l_{t-1}
  auto cp = step_block(y.cs, t, B);                                 // (H, B) c^l_{t-1}
  const double* u =                                                 // (B) uniforms of this step and layer
      opt_.boundary == HMBoundary::Sample && y.detector ? uniforms_.data() + (t * L + Index(l)) * B : nullptr;
  auto bound = [&](S zhat, Index b) -> S {
    switch (opt_.boundary) {
      case HMBoundary::Step: return zhat > S(0.5) ? S(1) : S(0);
      case HMBoundary::Sample: return S(u[b]) < zhat ? S(1) : S(0);
      default: return zhat;
    }
  };
  s.idx.clear();
  s.cidx.clear();
  for (Index b = j0; b < j0 + nb; ++b) {
    const int op = zp[b] > S(0.5) ? kFlush : (zb[b] > S(0.5) ? kUpdate : kCopy);
    y.op[t * B + b] = static_cast<std::int8_t>(op);
    if (!skip_ || op != kCopy) s.idx.push_back(b);
    else s.cidx.push_back(b);
  }
  const Index k = Index(s.idx.size());
  if (k > 0) {
    // x (K, k) = [zb h^{l-1}_t; r h^l_{t-1}; zp h^{l+1}_{t-1}]   (h^0_t = x_t, z^0_t = 1)
    if (l == 0) gather<S>(s.gx.block(0, 0, Hb, k), step_block(X, t, B), s.idx);
    else gather<S>(s.gx.block(0, 0, Hb, k), step_block(layers_[l - 1].hs, t + 1, B), s.idx, zb);
    gather<S>(s.gx.block(Hb, 0, H, k), hp, s.idx, opt_.flush_cut ? zp : nullptr, /*one_minus=*/true);
    if (!top) gather<S>(s.gx.block(Hb + H, 0, y.Ht, k), step_block(layers_[l + 1].hs, t, B), s.idx, zp);
    // s (G, k) = b + [W U Utd] x
    auto gs = s.gs.topLeftCorner(y.G, k);
    if (fast) {
      y.Wp.multiply(s.gs.data(), s.gs.rows(), s.gx.data(), s.gx.rows(), k, 0, 4 * H, false);
      if (y.detector)
        for (Index j = 0; j < k; ++j) gs(zr, j) = y.b.w(zr, 0) + y.wz.dot(s.gx.col(j).head(y.K));
    } else {
      gs.noalias() = y.W.w * s.gx.block(0, 0, Hb, k);
      gs.noalias() += y.U.w * s.gx.block(Hb, 0, H, k);
      if (!top) gs.noalias() += y.Utd.w * s.gx.block(Hb + H, 0, y.Ht, k);
      gs.colwise() += y.b.w.col(0);
    }
    if (opt_.layer_norm) {
      auto grs = s.grs.leftCols(4 * k);  // block q of k columns: 1/sigma of gate block q
      for (Index q = 0; q < 4; ++q)
        layer_norm_forward<S>(gs.middleRows(q * H, H), s.gxh.block(q * H, 0, H, k), grs.middleCols(q * k, k),
                              gs.middleRows(q * H, H), y.ln_g.w.middleRows(q * H, H), y.ln_b.w.middleRows(q * H, H),
                              S(opt_.ln_eps));
      if (train) {
        scatter(step_block(y.xhat, t, B), s.gxh.topLeftCorner(4 * H, k), s.idx);
        for (Index q = 0; q < 4; ++q)
          for (Index j = 0; j < k; ++j) y.rstd(0, q * T_ * B + t * B + s.idx[j]) = grs(0, q * k + j);
      }
    }
    gather_previous(s, cp, hp, zp, zb);
    auto gc = s.gc.topLeftCorner(H, k), gtc = s.gtc.topLeftCorner(H, k), gh = s.gh.topLeftCorner(H, k);
    hm_pointwise_forward<S>(gs, gc, gtc, gh, s.gcp.topLeftCorner(H, k), s.ghp.topLeftCorner(H, k),
                            s.gzp.leftCols(k), s.gzb.leftCols(k), slope);
    scatter(step_block(y.cs, t + 1, B), gc, s.idx);
    scatter(step_block(y.hs, t + 1, B), gh, s.idx);
    if (train) {
      scatter(step_block(y.act, t, B), gs, s.idx);
      scatter(step_block(y.tanh_c, t, B), gtc, s.idx);
    }
    for (Index j = 0; j < k; ++j) {
      const Index b = s.idx[j], n = t * B + b;
      if (train) y.computed[n] = 1;
      const S wC = (S(1) - zp[b]) * (S(1) - zb[b]);
      S zn = S(0);
      if (y.detector) {
        y.zhat(0, n) = gs(zr, j);
        zn = bound(gs(zr, j), b);
      }
      y.znew(0, n) = zn;
      y.zs(0, n + B) = opt_.copy_recompute ? zn : (S(1) - wC) * zn + wC * zp[b];
    }
  }
  // COPY columns of the skipping path: (c, h) unchanged; z carried, or only its row recomputed.
  if (!s.cidx.empty()) {
    for (Index b : s.cidx) {
      const Index n = t * B + b;
      y.hs.col(n + B) = hp.col(b);
      y.cs.col(n + B) = cp.col(b);
      y.zs(0, n + B) = zp[b];
      y.znew(0, n) = zp[b];
    }
    if (opt_.copy_recompute && y.detector) {
      // zp = 0 and zb = 0 here: s_z = U_z h^l_{t-1} + b_z (one dot product per column, so that a
      // column's value does not depend on the others).
      for (Index b : s.cidx) {
        const Index n = t * B + b;
        const S zhat = hard_sigm(y.U.w.row(zr).dot(hp.col(b)) + y.b.w(zr, 0), slope);
        y.zhat(0, n) = zhat;
        const S zn = bound(zhat, b);
        y.znew(0, n) = zn;
        y.zs(0, n + B) = zn;
      }
    }
  }
}

template <class S> void HMLSTM<S>::backward(MRef<S> dX, CRef<S> dY, CRef<S> X) {
  const Index T = T_, B = B_, N = T * B, L = Index(layers_.size());
  MSRNN_CHECK(train_, "HM-LSTM backward needs a training-mode forward first");
  MSRNN_CHECK(dY.rows() == out_size_ && dY.cols() == N, "HM-LSTM backward: dY has shape (", dY.rows(), ", ", dY.cols(),
              "), expected (", out_size_, ", ", N, ")");
  const bool fast = !reference_kernels();
  for (auto& y : layers_) {
    y.dA.resize(y.G, N);
    for (int i = 0; i < 2; ++i) {
      y.dh[i].setZero(y.H, B);
      y.dc[i].setZero(y.H, B);
      y.dz[i].setZero(1, B);
    }
  }
  // Streams [j0, j0 + nb) through every step, last to first. At step t the gradients reaching step t are
  // dh[t % 2] (and dc, dz); those reaching step t-1 accumulate in dh[(t + 1) % 2].
  auto run = [&](Index j0, Index nb, Scratch& s) {
    s.reserve(layers_, nb, B, opt_.layer_norm, true);
    for (Index t = T - 1; t >= 0; --t) {
      Index row = 0;
      for (auto& y : layers_) {
        const int cur = int(t % 2), prev = 1 - cur;
        y.dh[prev].middleCols(j0, nb).setZero();
        y.dc[prev].middleCols(j0, nb).setZero();
        y.dz[prev].middleCols(j0, nb).setZero();
        y.dh[cur].middleCols(j0, nb) += dY.block(row, t * B + j0, y.H, nb);
        row += y.H;
      }
      for (Index l = L - 1; l >= 0; --l) layer_step_backward(size_t(l), t, j0, nb, s, fast);
    }
  };
  const int nt = stream_threads(B, fast);
  if (int(scratch_.size()) < nt) scratch_.resize(nt);
  std::vector<char> ran(nt, 0);  // threads that owned streams (their layer-norm gradients are summed below)
  if (!fast) {
    run(0, B, scratch_[0]);
    ran[0] = 1;
  } else {
    for (auto& y : layers_) {
      y.Wcat.resize(y.G, y.K);
      y.Wcat.leftCols(y.Hb) = y.W.w;
      y.Wcat.middleCols(y.Hb, y.H) = y.U.w;
      if (y.Ht > 0) y.Wcat.rightCols(y.Ht) = y.Utd.w;
      y.WpT.resize(1, y.K, y.G);
    }
    const Index MR = PackedPanels<S>::panel_rows();
#pragma omp parallel num_threads(nt)
    {
      const int k = thread_id(), team = threads_in_team();
      for (auto& y : layers_) {  // rows u of [W U Utd]^T = columns u of [W U Utd]
        const auto units = thread_units(y.K, MR, k, team);
        y.WpT.pack_transposed(y.Wcat.data(), y.G, 0, y.G, units.first, units.second);
      }
#pragma omp barrier
      const auto cols = thread_units(B, 1, k, team);
      if (cols.second > cols.first) {
        run(cols.first, cols.second - cols.first, scratch_[k]);
        ran[k] = 1;
      }
    }
  }
  // Layer-norm parameter gradients, summed over threads in a fixed order.
  if (opt_.layer_norm)
    for (int k = 0; k < nt; ++k)
      if (ran[k])
        for (Index l = 0; l < L; ++l) {
          layers_[l].ln_g.g += scratch_[k].dln_g[l];
          layers_[l].ln_b.g += scratch_[k].dln_b[l];
        }
  // f(begin, count) over slices of [0, n): on threads in the fast path.
  auto slices = [&](Index n, Index align, auto&& f) {
    if (fast) parallel_slices(n, align, f);
    else f(Index(0), n);
  };
  // Weight gradients over all computed columns of the chunk, one product per matrix.
  for (Index l = 0; l < L; ++l) {
    auto& y = layers_[l];
    const Index zr = 4 * y.H;
    std::vector<Index> cols, zcols;  // computed columns; COPY columns whose boundary row was recomputed
    for (Index n = 0; n < N; ++n) {
      if (y.computed[n]) cols.push_back(n);
      else if (opt_.copy_recompute && y.detector) zcols.push_back(n);
    }
    const Index m = Index(cols.size());
    if (m > 0) {
      Mat<S> dA(y.G, m);    // (G, m)
      Mat<S> Xb(y.Hb, m);   // (Hb, m) z^{l-1}_t h^{l-1}_t (x_t in layer 1)
      Mat<S> Hp(y.H, m);    // (H, m) r h^l_{t-1}
      Mat<S> Ht(y.Ht, m);   // (Ht, m) z^l_{t-1} h^{l+1}_{t-1}
      const Layer* below = l > 0 ? &layers_[l - 1] : nullptr;
      const Layer* above = y.Ht > 0 ? &layers_[l + 1] : nullptr;
      slices(m, 1, [&](Index c0, Index mc) {
        for (Index j = c0; j < c0 + mc; ++j) {
          const Index n = cols[j];
          dA.col(j) = y.dA.col(n);
          if (below) Xb.col(j) = below->zs(0, n + B) * below->hs.col(n + B);
          else Xb.col(j) = X.col(n);
          Hp.col(j) = (opt_.flush_cut ? S(1) - y.zs(0, n) : S(1)) * y.hs.col(n);
          if (above) Ht.col(j) = y.zs(0, n) * above->hs.col(n);
        }
      });
      slices(y.G, 16, [&](Index r0, Index mr) {
        const auto d = dA.middleRows(r0, mr);
        y.W.g.middleRows(r0, mr).noalias() += d * Xb.transpose();
        y.U.g.middleRows(r0, mr).noalias() += d * Hp.transpose();
        if (above) y.Utd.g.middleRows(r0, mr).noalias() += d * Ht.transpose();
        y.b.g.col(0).segment(r0, mr) += d.rowwise().sum();
      });
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
  if (dX.cols() > 0)
    slices(N, B, [&](Index c0, Index m) {
      dX.middleCols(c0, m).noalias() = layers_[0].W.w.transpose() * layers_[0].dA.middleCols(c0, m);
    });
}

template <class S> void HMLSTM<S>::layer_step_backward(size_t l, Index t, Index j0, Index nb, Scratch& s, bool fast) {
  auto& y = layers_[l];
  const Index B = B_, H = y.H, Hb = y.Hb, zr = 4 * H;
  const bool top = l + 1 == layers_.size();
  const S slope = S(opt_.slope), half = slope / S(2);
  const S* zp = y.zs.data() + t * B;
  const S* zb = l == 0 ? ones_.data() : layers_[l - 1].zs.data() + (t + 1) * B;
  auto hp = step_block(y.hs, t, B);
  auto cp = step_block(y.cs, t, B);
  Layer* below = l > 0 ? &layers_[l - 1] : nullptr;
  Layer* above = top ? nullptr : &layers_[l + 1];
  const int cur = int(t % 2), prev = 1 - cur;
  Mat<S>&dh_cur = y.dh[cur], &dc_cur = y.dc[cur], &dz_cur = y.dz[cur];       // (H, B), (H, B), (1, B) at step t
  Mat<S>&dh_prev = y.dh[prev], &dc_prev = y.dc[prev], &dz_prev = y.dz[prev];  // the same at step t-1
  // Straight-through slope of zhat at a column (0 outside the linear part of the hard sigmoid).
  auto zslope = [&](Index n) -> S {
    const S zh = y.zhat(0, n);
    return (zh > S(0) && zh < S(1)) ? half : S(0);
  };
  // Gradient of z^l_t split into znew (s.gdz) and the carried z^l_{t-1}.
  for (Index b = j0; b < j0 + nb; ++b) {
    const Index n = t * B + b;
    const S dz = dz_cur(0, b);
    s.dwCz[b] = S(0);
    if (!y.detector) {
      s.gdz(0, b) = S(0);
    } else if (opt_.copy_recompute) {
      s.gdz(0, b) = dz;
    } else {
      const S wC = (S(1) - zp[b]) * (S(1) - zb[b]);
      s.gdz(0, b) = (S(1) - wC) * dz;
      dz_prev(0, b) += wC * dz;
      s.dwCz[b] = dz * (zp[b] - y.znew(0, n));
    }
  }
  s.idx.clear();
  s.cidx.clear();
  for (Index b = j0; b < j0 + nb; ++b) (y.computed[t * B + b] ? s.idx : s.cidx).push_back(b);
  const Index k = Index(s.idx.size());
  if (k > 0) {
    auto gdh = s.gdh.topLeftCorner(H, k), gdc = s.gdc.topLeftCorner(H, k);
    auto gact = s.gact.topLeftCorner(y.G, k);
    auto gtc = s.gtcb.topLeftCorner(H, k), gc = s.gcb.topLeftCorner(H, k);
    gather<S>(gdh, dh_cur, s.idx);
    gather<S>(gdc, dc_cur, s.idx);
    gather<S>(gact, step_block(y.act, t, B), s.idx);
    gather<S>(gtc, step_block(y.tanh_c, t, B), s.idx);
    gather<S>(gc, step_block(y.cs, t + 1, B), s.idx);
    gather_previous(s, cp, hp, zp, zb);
    auto gda = s.gda.topLeftCorner(y.G, k);
    auto gdcp = s.gdcp.topLeftCorner(H, k), gdhp = s.gdhp.topLeftCorner(H, k);
    hm_pointwise_backward<S>(gda.topRows(4 * H), gdcp, gdhp, s.gdwU.leftCols(k), s.gdwC.leftCols(k), gdh, gdc, gact,
                             gtc, gc, s.gcp.topLeftCorner(H, k), s.ghp.topLeftCorner(H, k), s.gzp.leftCols(k),
                             s.gzb.leftCols(k));
    if (y.detector)
      for (Index j = 0; j < k; ++j) gda(zr, j) = s.gdz(0, s.idx[j]) * zslope(t * B + s.idx[j]);
    if (opt_.layer_norm) {
      auto gxh = s.gxh.topLeftCorner(4 * H, k);
      auto grs = s.grs.leftCols(4 * k);
      gather<S>(gxh, step_block(y.xhat, t, B), s.idx);
      for (Index q = 0; q < 4; ++q)
        for (Index j = 0; j < k; ++j) grs(0, q * k + j) = y.rstd(0, q * T_ * B + t * B + s.idx[j]);
      for (Index q = 0; q < 4; ++q)
        layer_norm_backward<S>(gda.middleRows(q * H, H), s.dln_g[l].middleRows(q * H, H),
                               s.dln_b[l].middleRows(q * H, H), gda.middleRows(q * H, H), gxh.middleRows(q * H, H),
                               grs.middleCols(q * k, k), y.ln_g.w.middleRows(q * H, H));
    }
    scatter(step_block(y.dA, t, B), gda, s.idx);
    // p (K, k) = [W U Utd]^T da: rows [0, Hb) reach the layer below, [Hb, Hb + H) this layer at t-1,
    // [Hb + H, K) the layer above at t-1 (the bottom rows of layer 1 are left to dX over the chunk).
    auto gp = s.gprod.topLeftCorner(y.K, k);
    if (fast) {
      const Index MR = PackedPanels<S>::panel_rows(), r0 = below ? 0 : Hb / MR * MR;
      y.WpT.multiply(s.gprod.data(), s.gprod.rows(), s.gda.data(), s.gda.rows(), k, r0, y.K, false);
    } else {
      if (below) gp.topRows(Hb).noalias() = y.W.w.transpose() * gda;
      gp.middleRows(Hb, H).noalias() = y.U.w.transpose() * gda;
      if (above) gp.bottomRows(y.Ht).noalias() = y.Utd.w.transpose() * gda;
    }
    // Into the layer below at step t: h^{l-1}_t through the z-gated bottom-up term, and z^{l-1}_t.
    if (below) {
      for (Index j = 0; j < k; ++j) {
        const Index b = s.idx[j];
        const auto p = gp.col(j).head(Hb);
        below->dh[cur].col(b) += zb[b] * p;
        below->dz[cur](0, b) += below->hs.col((t + 1) * B + b).dot(p);
      }
    }
    // Into this layer at step t-1: h through the recurrent term (and r = 1 - zp with flush_cut).
    for (Index j = 0; j < k; ++j) {
      const Index b = s.idx[j];
      const auto p = gp.col(j).segment(Hb, H);
      const S r = opt_.flush_cut ? S(1) - zp[b] : S(1);
      dh_prev.col(b) += r * p + gdhp.col(j);
      if (opt_.flush_cut) dz_prev(0, b) -= hp.col(b).dot(p);
      dc_prev.col(b) = gdcp.col(j);
    }
    // Into the layer above at step t-1 through the top-down term, and z^l_{t-1} gating it.
    if (above) {
      for (Index j = 0; j < k; ++j) {
        const Index b = s.idx[j];
        const auto p = gp.col(j).tail(y.Ht);
        above->dh[prev].col(b) += zp[b] * p;
        dz_prev(0, b) += above->hs.col(t * B + b).dot(p);
      }
    }
    // The operation weights w_U = (1 - zp) zb, w_C = (1 - zp)(1 - zb) (blend reading only).
    if (opt_.blend || opt_.boundary == HMBoundary::Soft) {
      for (Index j = 0; j < k; ++j) {
        const Index b = s.idx[j];
        const S dwU = s.gdwU(0, j), dwC = s.gdwC(0, j) + s.dwCz[b];
        dz_prev(0, b) += -zb[b] * dwU - (S(1) - zb[b]) * dwC;
        if (below) below->dz[cur](0, b) += (S(1) - zp[b]) * (dwU - dwC);
      }
    }
  }
  // COPY columns of the skipping path (switch reading): identity for c and h.
  if (!s.cidx.empty()) {
    for (Index b : s.cidx) {
      dh_prev.col(b) += dh_cur.col(b);
      dc_prev.col(b) = dc_cur.col(b);
    }
    if (opt_.copy_recompute && y.detector) {
      // Only the boundary row was computed: s_z = U_z h^l_{t-1} + zp (Utd_z h^{l+1}_{t-1}) + zb (W_z h^{l-1}_t) + b_z
      // with zp = zb = 0; the gated terms still pass gradient to zp and zb.
      for (Index b : s.cidx) {
        const Index n = t * B + b;
        const S da = s.gdz(0, b) * zslope(n);
        y.dA(zr, n) = da;
        if (da == S(0)) continue;
        dh_prev.col(b) += da * y.U.w.row(zr).transpose();
        if (opt_.flush_cut) dz_prev(0, b) -= da * y.U.w.row(zr).dot(hp.col(b));
        if (above) dz_prev(0, b) += da * y.Utd.w.row(zr).dot(above->hs.col(n));
        if (below) below->dz[cur](0, b) += da * y.W.w.row(zr).dot(below->hs.col(n + B));
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
    if (y.detector) zhat = y.zhat;
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
