// HM-LSTM (hm_lstm.hpp): the backward time loop and the weight gradients.
#include "msrnn/cores/hm_lstm.hpp"

#include <cmath>
#include <limits>

namespace msrnn {

namespace {

// f(begin, count) over slices of [0, n): on threads in the fast path (parallel_slices), else in one call.
template <class F> void on_slices(bool fast, Index n, Index align, F&& f) {
  if (fast)
    parallel_slices(n, align, f);
  else
    f(Index(0), n);
}

}  // namespace

template <class S> void HMLSTM<S>::backward(MRef<S> dX, CRef<S> dY, CRef<S> X) {
  const Index T = T_, B = B_, N = T * B, L = Index(layers_.size());
  MSRNN_CHECK(train_, "HM-LSTM backward needs a training-mode forward first");
  MSRNN_CHECK(dY.rows() == out_size_ && dY.cols() == N, "HM-LSTM backward: dY has shape (", dY.rows(), ", ", dY.cols(),
              "), expected (", out_size_, ", ", N, ")");
  const bool fast = !reference_kernels();
  for (auto& layer : layers_) {
    layer.dA.resize(layer.G, N);
    for (int i = 0; i < 2; ++i) {
      layer.dh[i].setZero(layer.H, B);
      layer.dc[i].setZero(layer.H, B);
      layer.dz[i].setZero(1, B);
    }
  }
  // Streams [j0, j0 + nb) through every step, last to first. At step t the gradients reaching step t are
  // dh[t % 2] (and dc, dz); those reaching step t-1 accumulate in dh[(t + 1) % 2].
  auto run = [&](Index j0, Index nb, Scratch& s) {
    s.reserve(layers_, nb, B, opt_.layer_norm, true);
    for (Index t = T - 1; t >= 0; --t) {
      Index row = 0;
      for (auto& layer : layers_) {
        const int cur = int(t % 2), prev = 1 - cur;
        layer.dh[prev].middleCols(j0, nb).setZero();
        layer.dc[prev].middleCols(j0, nb).setZero();
        layer.dz[prev].middleCols(j0, nb).setZero();
        layer.dh[cur].middleCols(j0, nb) += dY.block(row, t * B + j0, layer.H, nb);
        row += layer.H;
      }
      for (Index l = L - 1; l >= 0; --l) layer_step_backward(size_t(l), t, j0, nb, s, fast);
    }
  };
  const int nt = stream_threads(B, fast);
  if (int(scratch_.size()) < nt) scratch_.resize(nt);
  std::vector<char> ran(1, 1);  // threads that owned streams (their layer-norm gradients are summed below)
  if (!fast) {
    run(0, B, scratch_[0]);
  } else {
    for (auto& layer : layers_) {
      layer.Wcat.resize(layer.G, layer.K);
      layer.Wcat.leftCols(layer.Hb) = layer.W.w;
      layer.Wcat.middleCols(layer.Hb, layer.H) = layer.U.w;
      if (layer.Ht > 0) layer.Wcat.rightCols(layer.Ht) = layer.Utd.w;
      layer.WpT.resize(1, layer.K, layer.G);
    }
    const Index MR = PackedPanels<S>::panel_rows();
    auto pack = [&](int k, int team) {
      for (auto& layer : layers_) {  // rows u of [W U Utd]^T = columns u of [W U Utd]
        const auto units = thread_units(layer.K, MR, k, team);
        layer.WpT.pack_transposed(layer.Wcat.data(), layer.G, 0, layer.G, units.first, units.second);
      }
    };
    ran = over_streams(B, nt, 1, pack, [&](Index j0, Index nb, int k) { run(j0, nb, scratch_[k]); });
  }
  // Layer-norm parameter gradients, summed over threads in a fixed order.
  if (opt_.layer_norm)
    in_thread_order(ran, [&](int k) {
      for (Index l = 0; l < L; ++l) {
        layers_[l].ln_g.g += scratch_[k].dln_g[l];
        layers_[l].ln_b.g += scratch_[k].dln_b[l];
      }
    });
  for (Index l = 0; l < L; ++l) weight_gradients(size_t(l), X, fast);
  if (dX.cols() > 0)
    on_slices(fast, N, B, [&](Index c0, Index m) {
      dX.middleCols(c0, m).noalias() = layers_[0].W.w.transpose() * layers_[0].dA.middleCols(c0, m);
    });
}

// The weight gradients of layer l over all computed columns of the chunk, one product per matrix:
//   dW += dA [z^{l-1}_t h^{l-1}_t]^T,  dU += dA [r h^l_{t-1}]^T,  dUtd += dA [z^l_{t-1} h^{l+1}_{t-1}]^T,  db += dA 1
// and, for the COPY columns whose boundary row was recomputed, that row's dU_z, db_z.
template <class S> void HMLSTM<S>::weight_gradients(size_t l, CRef<S> X, bool fast) {
  const Index B = B_, N = T_ * B;
  auto& layer = layers_[l];
  const Index zr = 4 * layer.H;
  std::vector<Index> cols, zcols;  // computed columns; COPY columns whose boundary row was recomputed
  for (Index n = 0; n < N; ++n) {
    if (layer.computed[n])
      cols.push_back(n);
    else if (opt_.copy_recompute && layer.detector)
      zcols.push_back(n);
  }
  const Index m = Index(cols.size());
  if (m > 0) {
    Mat<S> dA(layer.G, m);   // (G, m)
    Mat<S> Xb(layer.Hb, m);  // (Hb, m) z^{l-1}_t h^{l-1}_t (x_t in layer 1)
    Mat<S> Hp(layer.H, m);   // (H, m) r h^l_{t-1}
    Mat<S> Ht(layer.Ht, m);  // (Ht, m) z^l_{t-1} h^{l+1}_{t-1}
    const Layer* below = l > 0 ? &layers_[l - 1] : nullptr;
    const Layer* above = layer.Ht > 0 ? &layers_[l + 1] : nullptr;
    on_slices(fast, m, 1, [&](Index c0, Index mc) {
      for (Index j = c0; j < c0 + mc; ++j) {
        const Index n = cols[j];
        dA.col(j) = layer.dA.col(n);
        if (below)
          Xb.col(j) = below->zs(0, n + B) * below->hs.col(n + B);
        else
          Xb.col(j) = X.col(n);
        Hp.col(j) = (opt_.flush_cut ? S(1) - layer.zs(0, n) : S(1)) * layer.hs.col(n);
        if (above) Ht.col(j) = layer.zs(0, n) * above->hs.col(n);
      }
    });
    on_slices(fast, layer.G, 16, [&](Index r0, Index mr) {
      const auto d = dA.middleRows(r0, mr);
      layer.W.g.middleRows(r0, mr).noalias() += d * Xb.transpose();
      layer.U.g.middleRows(r0, mr).noalias() += d * Hp.transpose();
      if (above) layer.Utd.g.middleRows(r0, mr).noalias() += d * Ht.transpose();
      layer.b.g.col(0).segment(r0, mr) += d.rowwise().sum();
    });
  }
  if (!zcols.empty()) {
    const Index mc = Index(zcols.size());
    Mat<S> dz(1, mc), Hp(layer.H, mc);  // (1, mc), (H, mc)
    for (Index j = 0; j < mc; ++j) {
      dz(0, j) = layer.dA(zr, zcols[j]);
      Hp.col(j) = layer.hs.col(zcols[j]);
    }
    layer.U.g.row(zr).noalias() += dz * Hp.transpose();
    layer.b.g(zr, 0) += dz.sum();
  }
  if (layer.detector && opt_.detector_below[size_t(l)]) {  // those weights are held at 0
    layer.U.g.row(zr).setZero();
    if (layer.Ht > 0) layer.Utd.g.row(zr).setZero();
  }
}

// Straight-through slope of zhat^l at column n: slope / 2 inside the linear part of the hard sigmoid, else 0.
template <class S> S HMLSTM<S>::zslope(const Layer& layer, Index n) const {
  const S half = S(opt_.slope) / S(2);
  const S zh = layer.zhat(0, n);
  return (zh > S(0) && zh < S(1)) ? half : S(0);
}

template <class S> void HMLSTM<S>::layer_step_backward(size_t l, Index t, Index j0, Index nb, Scratch& s, bool fast) {
  auto& layer = layers_[l];
  const Index B = B_;
  const S* zp = layer.zs.data() + t * B;
  const S* zb = l == 0 ? ones_.data() : layers_[l - 1].zs.data() + (t + 1) * B;
  step_boundary_backward(l, t, j0, nb, s, zp, zb);
  s.idx.clear();
  s.cidx.clear();
  for (Index b = j0; b < j0 + nb; ++b) (layer.computed[t * B + b] ? s.idx : s.cidx).push_back(b);
  const Index k = Index(s.idx.size());
  if (k > 0) {
    step_gates_backward(l, t, k, s, zp, zb);
    step_inputs_backward(l, t, k, s, zp, zb, fast);
  }
  // COPY columns of the skipping path (switch reading): identity for c and h.
  if (!s.cidx.empty()) step_copy_backward(l, t, s);
}

// The gradient of z^l_t at the streams [j0, j0 + nb), with the boundary-rate terms' (lambda + 2 mu (zbar^l - r_l)) / N
// added (detector layers), split into znew (s.dz_new (1, B)) and the carried z^l_{t-1} (dz at t-1, weight
// wC = (1 - z^l_{t-1}) (1 - z^{l-1}_t)), with the carry's gradient of w_C in s.dwCz (B).
template <class S>
void HMLSTM<S>::step_boundary_backward(size_t l, Index t, Index j0, Index nb, Scratch& s, const S* zp, const S* zb) {
  auto& layer = layers_[l];
  const Index B = B_;
  const int cur = int(t % 2), prev = 1 - cur;
  Mat<S>& dz_cur = layer.dz[cur];    // (1, B) at step t
  Mat<S>& dz_prev = layer.dz[prev];  // (1, B) at step t-1
  // The boundary-rate terms add (lambda + 2 mu (zbar^l - r_l)) / N to the gradient of every z^l_t of a detector layer.
  const S grate = S(rate_gradient(l));
  if (grate != S(0))
    for (Index b = j0; b < j0 + nb; ++b) dz_cur(0, b) += grate * S(this->column_weight(t * B + b));
  // Gradient of z^l_t split into znew (s.dz_new) and the carried z^l_{t-1}.
  for (Index b = j0; b < j0 + nb; ++b) {
    const Index n = t * B + b;
    const S dz = dz_cur(0, b);
    s.dwCz[b] = S(0);
    if (!layer.detector) {
      s.dz_new(0, b) = S(0);
    } else if (opt_.copy_recompute) {
      s.dz_new(0, b) = dz;
    } else {
      const S wC = (S(1) - zp[b]) * (S(1) - zb[b]);
      s.dz_new(0, b) = (S(1) - wC) * dz;
      dz_prev(0, b) += wC * dz;
      s.dwCz[b] = dz * (zp[b] - layer.znew(0, n));
    }
  }
}

// The gates backwards at the k computed columns s.idx (eq. 2-3, 9): the forward's cache gathered, then
// hm_pointwise_backward (da (4H, k), the direct dc^l_{t-1}, dh^l_{t-1} (H, k), dw_U, dw_C (1, k) into s), the
// boundary row da_z = dznew * zslope, the layer norm backwards (its gain and shift gradients into s.dln_g, s.dln_b),
// and da scattered into layer.dA.
template <class S> void HMLSTM<S>::step_gates_backward(size_t l, Index t, Index k, Scratch& s, const S* zp,
                                                       const S* zb) {
  auto& layer = layers_[l];
  const Index B = B_, H = layer.H, zr = 4 * H;
  auto hp = step_block(layer.hs, t, B);
  auto cp = step_block(layer.cs, t, B);
  const int cur = int(t % 2);
  Mat<S>&dh_cur = layer.dh[cur], &dc_cur = layer.dc[cur];  // (H, B), (H, B) at step t
  auto dh_k = s.dh_k.topLeftCorner(H, k), dc_k = s.dc_k.topLeftCorner(H, k);
  auto act_saved_k = s.act_saved_k.topLeftCorner(layer.G, k);
  auto tanh_c_k = s.tanh_c_saved_k.topLeftCorner(H, k), c_k = s.c_saved_k.topLeftCorner(H, k);
  gather_columns<S>(dh_k, dh_cur, s.idx);
  gather_columns<S>(dc_k, dc_cur, s.idx);
  gather_columns<S>(act_saved_k, step_block(layer.act, t, B), s.idx);
  gather_columns<S>(tanh_c_k, step_block(layer.tanh_c, t, B), s.idx);
  gather_columns<S>(c_k, step_block(layer.cs, t + 1, B), s.idx);
  gather_previous(s, cp, hp, zp, zb);
  auto da_k = s.da_k.topLeftCorner(layer.G, k);
  auto dc_prev_k = s.dc_prev_k.topLeftCorner(H, k), dh_prev_k = s.dh_prev_k.topLeftCorner(H, k);
  hm_pointwise_backward<S>(da_k.topRows(4 * H), dc_prev_k, dh_prev_k, s.dwU_k.leftCols(k), s.dwC_k.leftCols(k), dh_k,
                           dc_k, act_saved_k, tanh_c_k, c_k, s.c_prev_k.topLeftCorner(H, k),
                           s.h_prev_k.topLeftCorner(H, k), s.z_prev_k.leftCols(k), s.z_below_k.leftCols(k));
  if (layer.detector)
    for (Index j = 0; j < k; ++j) da_k(zr, j) = s.dz_new(0, s.idx[j]) * zslope(layer, t * B + s.idx[j]);
  if (opt_.layer_norm) {
    auto xhat_k = s.xhat_k.topLeftCorner(4 * H, k);
    auto rstd_k = s.rstd_k.leftCols(4 * k);
    gather_columns<S>(xhat_k, step_block(layer.xhat, t, B), s.idx);
    for (Index q = 0; q < 4; ++q)
      for (Index j = 0; j < k; ++j) rstd_k(0, q * k + j) = layer.rstd(0, q * T_ * B + t * B + s.idx[j]);
    for (Index q = 0; q < 4; ++q)
      layer_norm_backward<S>(da_k.middleRows(q * H, H), s.dln_g[l].middleRows(q * H, H),
                             s.dln_b[l].middleRows(q * H, H), da_k.middleRows(q * H, H), xhat_k.middleRows(q * H, H),
                             rstd_k.middleCols(q * k, k), layer.ln_g.w.middleRows(q * H, H));
  }
  scatter_columns(step_block(layer.dA, t, B), da_k, s.idx);
}

// The step's inputs backwards at the k computed columns (eq. 4-7): p (K, k) = [W U Utd]^T da into h^{l-1}_t and
// z^{l-1}_t (the bottom-up term), h^l_{t-1} (with r = 1 - z^l_{t-1} under flush_cut) and c^l_{t-1}, h^{l+1}_{t-1}
// and z^l_{t-1} (the top-down term), and the operation weights w_U, w_C into z^l_{t-1} and z^{l-1}_t (blend).
template <class S>
void HMLSTM<S>::step_inputs_backward(size_t l, Index t, Index k, Scratch& s, const S* zp, const S* zb, bool fast) {
  auto& layer = layers_[l];
  const Index B = B_, H = layer.H, Hb = layer.Hb;
  auto hp = step_block(layer.hs, t, B);
  Layer* below = l > 0 ? &layers_[l - 1] : nullptr;
  Layer* above = layer.Ht > 0 ? &layers_[l + 1] : nullptr;  // the top-down term's source
  const int cur = int(t % 2), prev = 1 - cur;
  Mat<S>&dh_prev = layer.dh[prev], &dc_prev = layer.dc[prev],
  &dz_prev = layer.dz[prev];  // (H, B), (H, B), (1, B) at t-1
  auto da_k = s.da_k.topLeftCorner(layer.G, k);
  auto dc_prev_k = s.dc_prev_k.topLeftCorner(H, k), dh_prev_k = s.dh_prev_k.topLeftCorner(H, k);
  // p (K, k) = [W U Utd]^T da: rows [0, Hb) reach the layer below, [Hb, Hb + H) this layer at t-1,
  // [Hb + H, K) the layer above at t-1 (the bottom rows of layer 1 are left to dX over the chunk).
  auto gp = s.dx_k.topLeftCorner(layer.K, k);
  if (fast) {
    const Index MR = PackedPanels<S>::panel_rows(), r0 = below ? 0 : Hb / MR * MR;
    layer.WpT.multiply(s.dx_k.data(), s.dx_k.rows(), s.da_k.data(), s.da_k.rows(), k, r0, layer.K, false);
  } else {
    if (below) gp.topRows(Hb).noalias() = layer.W.w.transpose() * da_k;
    gp.middleRows(Hb, H).noalias() = layer.U.w.transpose() * da_k;
    if (above) gp.bottomRows(layer.Ht).noalias() = layer.Utd.w.transpose() * da_k;
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
    dh_prev.col(b) += r * p + dh_prev_k.col(j);
    if (opt_.flush_cut) dz_prev(0, b) -= hp.col(b).dot(p);
    dc_prev.col(b) = dc_prev_k.col(j);
  }
  // Into the layer above at step t-1 through the top-down term, and z^l_{t-1} gating it.
  if (above) {
    for (Index j = 0; j < k; ++j) {
      const Index b = s.idx[j];
      const auto p = gp.col(j).tail(layer.Ht);
      above->dh[prev].col(b) += zp[b] * p;
      dz_prev(0, b) += above->hs.col(t * B + b).dot(p);
    }
  }
  // The operation weights w_U = (1 - zp) zb, w_C = (1 - zp)(1 - zb) (blend reading only): into zp = z^l_{t-1}
  // when z^l reads blend, into zb = z^{l-1}_t when z^{l-1} does.
  const bool own = blend_[l], into_below = below && blend_[l - 1];
  if (own || into_below) {
    for (Index j = 0; j < k; ++j) {
      const Index b = s.idx[j];
      const S dwU = s.dwU_k(0, j), dwC = s.dwC_k(0, j) + s.dwCz[b];
      if (own) dz_prev(0, b) += -zb[b] * dwU - (S(1) - zb[b]) * dwC;
      if (into_below) below->dz[cur](0, b) += (S(1) - zp[b]) * (dwU - dwC);
    }
  }
}

// The COPY columns s.cidx backwards (switch reading): identity for c^l and h^l, and with copy_recompute the
// recomputed boundary row s_z = U_z h^l_{t-1} + zp (Utd_z h^{l+1}_{t-1}) + zb (W_z h^{l-1}_t) + b_z into dA, h^l_{t-1}
// and, through its gated terms, z^l_{t-1} and z^{l-1}_t.
template <class S> void HMLSTM<S>::step_copy_backward(size_t l, Index t, Scratch& s) {
  auto& layer = layers_[l];
  const Index B = B_, zr = 4 * layer.H;
  auto hp = step_block(layer.hs, t, B);
  Layer* below = l > 0 ? &layers_[l - 1] : nullptr;
  Layer* above = layer.Ht > 0 ? &layers_[l + 1] : nullptr;  // the top-down term's source
  const int cur = int(t % 2), prev = 1 - cur;
  Mat<S>&dh_cur = layer.dh[cur], &dc_cur = layer.dc[cur];                                 // (H, B), (H, B) at step t
  Mat<S>&dh_prev = layer.dh[prev], &dc_prev = layer.dc[prev], &dz_prev = layer.dz[prev];  // the same at step t-1
  for (Index b : s.cidx) {
    dh_prev.col(b) += dh_cur.col(b);
    dc_prev.col(b) = dc_cur.col(b);
  }
  if (opt_.copy_recompute && layer.detector) {
    // Only the boundary row was computed: s_z = U_z h^l_{t-1} + zp (Utd_z h^{l+1}_{t-1}) + zb (W_z h^{l-1}_t) + b_z
    // with zp = zb = 0; the gated terms still pass gradient to zp and zb.
    for (Index b : s.cidx) {
      const Index n = t * B + b;
      const S da = s.dz_new(0, b) * zslope(layer, n);
      layer.dA(zr, n) = da;
      if (da == S(0)) continue;
      dh_prev.col(b) += da * layer.U.w.row(zr).transpose();
      if (opt_.flush_cut) dz_prev(0, b) -= da * layer.U.w.row(zr).dot(hp.col(b));
      if (above) dz_prev(0, b) += da * layer.Utd.w.row(zr).dot(above->hs.col(n));
      if (below) below->dz[cur](0, b) += da * layer.W.w.row(zr).dot(below->hs.col(n + B));
    }
  }
}

#define MSRNN_INSTANTIATE(S)                                    \
  template void HMLSTM<S>::backward(MRef<S>, CRef<S>, CRef<S>); \
  template void HMLSTM<S>::layer_step_backward(size_t, Index, Index, Index, Scratch&, bool);
MSRNN_INSTANTIATE(float)
MSRNN_INSTANTIATE(double)
#undef MSRNN_INSTANTIATE

}  // namespace msrnn
