// HM-LSTM (hm_lstm.hpp): the forward time loop (threads over streams, skipped COPY columns).
#include "msrnn/cores/hm_lstm.hpp"

#include <cmath>
#include <limits>

namespace msrnn {

template <class S> void HMLSTM<S>::forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool train) {
  const Index N = T * B, L = Index(layers_.size());
  MSRNN_CHECK(X.rows() == E_ && X.cols() == N, "HM-LSTM input has shape (", X.rows(), ", ", X.cols(), "), expected (",
              E_, ", ", N, ")");
  MSRNN_CHECK(layers_[0].h.cols() == B, "HM-LSTM state has batch size ", layers_[0].h.cols(), ", input has ", B);
  T_ = T;
  B_ = B;
  train_ = train;
  skip_ = skipping(train);
  blend_.resize(size_t(L));
  for (Index l = 0; l < L; ++l) blend_[size_t(l)] = opt_.blend[size_t(l)] || opt_.boundary == HMBoundary::Soft;
  const bool fast = !reference_kernels();
  forward_prepare(N, B, train);
  draw_uniforms(T, B);
  const int nt = stream_threads(B, fast);
  if (int(scratch_.size()) < nt) scratch_.resize(nt);
  if (!fast) {
    scratch_[0].reserve(layers_, B, B, opt_.layer_norm, false);
    for (Index t = 0; t < T; ++t)
      for (Index l = 0; l < L; ++l) layer_step_forward(l, t, 0, B, X, scratch_[0], false);
  } else {
    forward_packed(X, T, B, nt);
  }
  forward_rate_terms(N, train);
  Index row = 0;
  for (auto& layer : layers_) {
    Y.middleRows(row, layer.H) = layer.hs.rightCols(N);
    row += layer.H;
    layer.h = layer.hs.rightCols(B);
    layer.c = layer.cs.rightCols(B);
    layer.z = layer.zs.rightCols(B);
  }
}

// Before a forward over N = T B columns: the boundary rows of detector_below layers held at 0, each layer's cache
// sized (hs, cs (H, N + B), zs (1, N + B), zhat, znew (1, N), op (N); training: act (G, N), tanh_c (H, N), xhat
// (4H, N), rstd (1, 4N), computed (N)) and its carried state h^l, c^l, z^l put in block 0.
template <class S> void HMLSTM<S>::forward_prepare(Index N, Index B, bool train) {
  const Index L = Index(layers_.size());
  const S nan = std::numeric_limits<S>::quiet_NaN();
  for (Index l = 0; l < L; ++l) {  // detector_below: the boundary row's recurrent and top-down weights held at 0
    auto& layer = layers_[size_t(l)];
    if (!layer.detector || !opt_.detector_below[size_t(l)]) continue;
    layer.U.w.row(4 * layer.H).setZero();
    if (layer.Ht > 0) layer.Utd.w.row(4 * layer.H).setZero();
  }
  for (auto& layer : layers_) {
    layer.hs.resize(layer.H, N + B);
    layer.cs.resize(layer.H, N + B);
    layer.zs.resize(1, N + B);
    if (layer.detector) layer.zhat.setConstant(1, N, nan);
    layer.znew.resize(1, N);
    layer.op.assign(N, 0);
    if (train) {
      layer.act.resize(layer.G, N);
      layer.tanh_c.resize(layer.H, N);
      if (opt_.layer_norm) {
        layer.xhat.resize(4 * layer.H, N);
        layer.rstd.resize(1, 4 * N);  // entry q*N + n: 1/sigma of gate block q in column n
      }
      layer.computed.assign(N, 0);
    }
    layer.hs.leftCols(B) = layer.h;
    layer.cs.leftCols(B) = layer.c;
    layer.zs.leftCols(B) = layer.z;
  }
}

// Uniforms of Bernoulli boundaries (uniforms_ (T, L, B)), drawn in a fixed order whatever the threads and the path.
template <class S> void HMLSTM<S>::draw_uniforms(Index T, Index B) {
  const Index L = Index(layers_.size());
  uniforms_.clear();
  if (opt_.boundary == HMBoundary::Sample) {
    uniforms_.assign(size_t(T * L * B), 0.0);
    for (Index t = 0; t < T; ++t)
      for (Index l = 0; l < L; ++l)
        if (layers_[l].detector)
          for (Index b = 0; b < B; ++b) uniforms_[(t * L + l) * B + b] = rng_->uniform();
  }
}

// The fast forward: [W U Utd] and b packed once per chunk (each thread its share of the panels; the boundary row
// apart in wz (K)), then threads over streams, each running every step and layer of its streams [j0, j0 + nb).
template <class S> void HMLSTM<S>::forward_packed(CRef<S> X, Index T, Index B, int nt) {
  const Index L = Index(layers_.size());
  for (auto& layer : layers_) {
    layer.Wp.resize(1, 4 * layer.H, layer.K);
    if (layer.detector) {  // the boundary row, kept apart so that it does not take a panel of its own
      const Index zr = 4 * layer.H;
      layer.wz.resize(layer.K);
      layer.wz.head(layer.Hb) = layer.W.w.row(zr).transpose();
      layer.wz.segment(layer.Hb, layer.H) = layer.U.w.row(zr).transpose();
      if (layer.Ht > 0) layer.wz.tail(layer.Ht) = layer.Utd.w.row(zr).transpose();
    }
  }
  const Index MR = PackedPanels<S>::panel_rows();
  auto pack = [&](int k, int team) {
    for (auto& layer : layers_) {  // this thread's panels of [W U Utd] and b
      const auto units = thread_units(4 * layer.H, MR, k, team);
      layer.Wp.pack(layer.W.w.data(), layer.G, 0, layer.Hb, units.first, units.second);
      layer.Wp.pack(layer.U.w.data(), layer.G, layer.Hb, layer.H, units.first, units.second);
      if (layer.Ht > 0)
        layer.Wp.pack(layer.Utd.w.data(), layer.G, layer.Hb + layer.H, layer.Ht, units.first, units.second);
      layer.Wp.set_bias(layer.b.w.data(), units.first, units.second);
    }
  };
  over_streams(B, nt, 1, pack, [&](Index j0, Index nb, int k) {
    Scratch& s = scratch_[k];
    s.reserve(layers_, nb, B, opt_.layer_norm, false);
    for (Index t = 0; t < T; ++t)
      for (Index l = 0; l < L; ++l) layer_step_forward(l, t, j0, nb, X, s, true);
  });
}

// The auxiliary terms of a forward over N columns.
template <class S> void HMLSTM<S>::forward_rate_terms(Index N, bool train) {
  const Index L = Index(layers_.size());
  // Boundary-rate term: lambda / N * (sum of z^l_t over detector layers, steps and streams); with padding
  // (Core::set_padding), sums and N over the columns that count.
  // Rate-target term: R_target from zbar^l (target_term()); set_batch_statistics may replace zbar^l before backward.
  // zbar_ is what the backward's rate gradient reads, so it is computed in training only.
  aux_ = 0.0;
  aux_target_ = 0.0;
  if (train) {
    counted_ = this->counted_columns(N);  // N without padding, once a forward (rate_gradient reads it per step)
    for (Index l = 0; l < L; ++l) {
      double sum = 0.0;
      if (layers_[l].detector) {
        const auto zs = layers_[l].zs.rightCols(N);  // (1, N)
        for (Index n = 0; n < N; ++n) sum += this->column_weight(n) * double(zs(0, n));
      }
      zbar_[l] = sum / counted_;
      if (layers_[l].detector) aux_ += opt_.rate_penalty * zbar_[l];
    }
    aux_target_ = target_term();
  }
}

// The boundary z^l_t from zhat^l_t = hard_sigm(s_z) (eq. 9): step, 1 if zhat > 1/2; sample, 1 if u < zhat (u the
// column's uniform, u (B) of this step and layer); soft, zhat itself.
template <class S> S HMLSTM<S>::boundary_of(S zhat, const double* u, Index b) const {
  switch (opt_.boundary) {
    case HMBoundary::Step: return zhat > S(0.5) ? S(1) : S(0);
    case HMBoundary::Sample: return S(u[b]) < zhat ? S(1) : S(0);
    default: return zhat;
  }
}

template <class S>
void HMLSTM<S>::layer_step_forward(size_t l, Index t, Index j0, Index nb, CRef<S> X, Scratch& s, bool fast) {
  auto& layer = layers_[l];
  const Index B = B_, L = Index(layers_.size());
  const S* zp = layer.zs.data() + t * B;                                         // (1, B) z^l_{t-1}
  const S* zb = l == 0 ? ones_.data() : layers_[l - 1].zs.data() + (t + 1) * B;  // (1, B) z^{l-1}_t
  const double* u =                                                              // (B) uniforms of this step and layer
      opt_.boundary == HMBoundary::Sample && layer.detector ? uniforms_.data() + (t * L + Index(l)) * B : nullptr;
  s.idx.clear();
  s.cidx.clear();
  for (Index b = j0; b < j0 + nb; ++b) {
    const int op = zp[b] > S(0.5) ? kFlush : (zb[b] > S(0.5) ? kUpdate : kCopy);
    layer.op[t * B + b] = static_cast<std::int8_t>(op);
    if (!skip_ || op != kCopy)
      s.idx.push_back(b);
    else
      s.cidx.push_back(b);
  }
  const Index k = Index(s.idx.size());
  if (k > 0) {
    step_preactivations(l, t, k, X, s, zp, zb, fast);
    if (opt_.layer_norm) step_layer_norm(l, t, k, s);
    step_update(l, t, k, s, zp, zb, u);
  }
  // COPY columns of the skipping path: (c, h) unchanged; z carried, or only its row recomputed.
  if (!s.cidx.empty()) step_copy(l, t, s, zp, u);
}

// The pre-activations of the k computed columns s.idx of layer l at step t (eq. 4-7):
//   x (K, k) = [zb h^{l-1}_t; r h^l_{t-1}; zp h^{l+1}_{t-1}]   (h^0_t = x_t, z^0_t = 1)    s.x_k
//   s (G, k) = b + [W U Utd] x                                                           s.act_k
// fast: the packed product, the boundary row by wz; else Eigen products. zp z^l_{t-1}, zb z^{l-1}_t (1, B).
template <class S>
void HMLSTM<S>::step_preactivations(size_t l, Index t, Index k, CRef<S> X, Scratch& s, const S* zp, const S* zb,
                                    bool fast) {
  auto& layer = layers_[l];
  const Index B = B_, H = layer.H, Hb = layer.Hb, zr = 4 * H;
  auto hp = step_block(layer.hs, t, B);  // (H, B) h^l_{t-1}
  // x (K, k) = [zb h^{l-1}_t; r h^l_{t-1}; zp h^{l+1}_{t-1}]   (h^0_t = x_t, z^0_t = 1)
  if (l == 0)
    gather_columns<S>(s.x_k.block(0, 0, Hb, k), step_block(X, t, B), s.idx);
  else
    gather_columns<S>(s.x_k.block(0, 0, Hb, k), step_block(layers_[l - 1].hs, t + 1, B), s.idx, zb);
  gather_columns<S>(s.x_k.block(Hb, 0, H, k), hp, s.idx, opt_.flush_cut ? zp : nullptr, /*one_minus=*/true);
  if (layer.Ht > 0)
    gather_columns<S>(s.x_k.block(Hb + H, 0, layer.Ht, k), step_block(layers_[l + 1].hs, t, B), s.idx, zp);
  // s (G, k) = b + [W U Utd] x
  auto act_k = s.act_k.topLeftCorner(layer.G, k);
  if (fast) {
    layer.Wp.multiply(s.act_k.data(), s.act_k.rows(), s.x_k.data(), s.x_k.rows(), k, 0, 4 * H, false);
    if (layer.detector)
      for (Index j = 0; j < k; ++j) act_k(zr, j) = layer.b.w(zr, 0) + layer.wz.dot(s.x_k.col(j).head(layer.K));
  } else {
    act_k.noalias() = layer.W.w * s.x_k.block(0, 0, Hb, k);
    act_k.noalias() += layer.U.w * s.x_k.block(Hb, 0, H, k);
    if (layer.Ht > 0) act_k.noalias() += layer.Utd.w * s.x_k.block(Hb + H, 0, layer.Ht, k);
    act_k.colwise() += layer.b.w.col(0);
  }
}

// Layer norm of each gate block q = i, f, g, o of the k computed columns (a = LN(s) = gamma_q xhat + beta_q) in
// s.act_k, with xhat (4H, k) and 1/sigma (1, 4k) in s.xhat_k, s.rstd_k; a training forward keeps both (xhat, rstd).
template <class S> void HMLSTM<S>::step_layer_norm(size_t l, Index t, Index k, Scratch& s) {
  auto& layer = layers_[l];
  const Index B = B_, H = layer.H;
  auto act_k = s.act_k.topLeftCorner(layer.G, k);
  auto rstd_k = s.rstd_k.leftCols(4 * k);  // block q of k columns: 1/sigma of gate block q
  for (Index q = 0; q < 4; ++q)
    layer_norm_forward<S>(act_k.middleRows(q * H, H), s.xhat_k.block(q * H, 0, H, k), rstd_k.middleCols(q * k, k),
                          act_k.middleRows(q * H, H), layer.ln_g.w.middleRows(q * H, H),
                          layer.ln_b.w.middleRows(q * H, H), S(opt_.ln_eps));
  if (train_) {
    scatter_columns(step_block(layer.xhat, t, B), s.xhat_k.topLeftCorner(4 * H, k), s.idx);
    for (Index q = 0; q < 4; ++q)
      for (Index j = 0; j < k; ++j) layer.rstd(0, q * T_ * B + t * B + s.idx[j]) = rstd_k(0, q * k + j);
  }
}

// The update of the k computed columns (eq. 2-3, 8-9): gates, c^l_t, h^l_t (hm_pointwise_forward) scattered into
// cs, hs (and act, tanh_c in training), then zhat^l_t, z^l_t (boundary_of) and the z carried after it,
// z = zn, or (1 - wC) zn + wC z^l_{t-1} with wC = (1 - z^l_{t-1}) (1 - z^{l-1}_t) (COPY) when carried.
template <class S>
void HMLSTM<S>::step_update(size_t l, Index t, Index k, Scratch& s, const S* zp, const S* zb, const double* u) {
  auto& layer = layers_[l];
  const Index B = B_, H = layer.H, zr = 4 * H;
  const bool train = train_;
  const S slope = S(opt_.slope);
  auto hp = step_block(layer.hs, t, B);  // (H, B) h^l_{t-1}
  auto cp = step_block(layer.cs, t, B);  // (H, B) c^l_{t-1}
  auto act_k = s.act_k.topLeftCorner(layer.G, k);
  gather_previous(s, cp, hp, zp, zb);
  auto c_k = s.c_k.topLeftCorner(H, k), tanh_c_k = s.tanh_c_k.topLeftCorner(H, k), h_k = s.h_k.topLeftCorner(H, k);
  hm_pointwise_forward<S>(act_k, c_k, tanh_c_k, h_k, s.c_prev_k.topLeftCorner(H, k), s.h_prev_k.topLeftCorner(H, k),
                          s.z_prev_k.leftCols(k), s.z_below_k.leftCols(k), slope);
  scatter_columns(step_block(layer.cs, t + 1, B), c_k, s.idx);
  scatter_columns(step_block(layer.hs, t + 1, B), h_k, s.idx);
  if (train) {
    scatter_columns(step_block(layer.act, t, B), act_k, s.idx);
    scatter_columns(step_block(layer.tanh_c, t, B), tanh_c_k, s.idx);
  }
  for (Index j = 0; j < k; ++j) {
    const Index b = s.idx[j], n = t * B + b;
    if (train) layer.computed[n] = 1;
    const S wC = (S(1) - zp[b]) * (S(1) - zb[b]);
    S zn = S(0);
    if (layer.detector) {
      layer.zhat(0, n) = act_k(zr, j);
      zn = boundary_of(act_k(zr, j), u, b);
    }
    layer.znew(0, n) = zn;
    layer.zs(0, n + B) = opt_.copy_recompute ? zn : (S(1) - wC) * zn + wC * zp[b];
  }
}

// The COPY columns s.cidx of the skipping path: (c^l, h^l) unchanged; z^l carried, or only its row recomputed
// (copy_recompute: zhat = hard_sigm(U_z h^l_{t-1} + b_z)).
template <class S> void HMLSTM<S>::step_copy(size_t l, Index t, Scratch& s, const S* zp, const double* u) {
  auto& layer = layers_[l];
  const Index B = B_, zr = 4 * layer.H;
  const S slope = S(opt_.slope);
  auto hp = step_block(layer.hs, t, B);  // (H, B) h^l_{t-1}
  auto cp = step_block(layer.cs, t, B);  // (H, B) c^l_{t-1}
  for (Index b : s.cidx) {
    const Index n = t * B + b;
    layer.hs.col(n + B) = hp.col(b);
    layer.cs.col(n + B) = cp.col(b);
    layer.zs(0, n + B) = zp[b];
    layer.znew(0, n) = zp[b];
  }
  if (opt_.copy_recompute && layer.detector) {
    // zp = 0 and zb = 0 here: s_z = U_z h^l_{t-1} + b_z (one dot product per column, so that a
    // column's value does not depend on the others).
    for (Index b : s.cidx) {
      const Index n = t * B + b;
      const S zhat = hard_sigm(layer.U.w.row(zr).dot(hp.col(b)) + layer.b.w(zr, 0), slope);
      layer.zhat(0, n) = zhat;
      const S zn = boundary_of(zhat, u, b);
      layer.znew(0, n) = zn;
      layer.zs(0, n + B) = zn;
    }
  }
}

#define MSRNN_INSTANTIATE(S)                                              \
  template void HMLSTM<S>::forward(MRef<S>, CRef<S>, Index, Index, bool); \
  template void HMLSTM<S>::layer_step_forward(size_t, Index, Index, Index, CRef<S>, Scratch&, bool);
MSRNN_INSTANTIATE(float)
MSRNN_INSTANTIATE(double)
#undef MSRNN_INSTANTIATE

}  // namespace msrnn
