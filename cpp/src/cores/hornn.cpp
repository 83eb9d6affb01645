#include "msrnn/cores/hornn.hpp"

#include <algorithm>
#include <cmath>

namespace msrnn {

namespace {

// Chunks of fewer steps (generation, one step at a time) keep Eigen's products: packing the weights
// would cost more than it saves.
constexpr Index kPackMinSteps = 4;

// Runs f(j0, nb, thread) over nt threads, each on its own contiguous range of the B streams.
template <class F> void over_streams(Index B, int nt, F&& f) {
  if (nt == 1) {
    f(Index(0), B, 0);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    const int k = thread_id();
    const auto cols = thread_units(B, 1, k, threads_in_team());
    if (cols.second > cols.first) f(cols.first, cols.second - cols.first, k);
  }
}

// Y = W X (+ b), split over the core's threads by columns.
template <class S> void input_product(MRef<S> Y, CRef<S> W, const Param<S>* b, CRef<S> X) {
  parallel_slices(X.cols(), 16, [&](Index c0, Index n) {
    auto y = Y.middleCols(c0, n);
    if (b)
      y.colwise() = b->w.col(0);
    else
      y.setZero();
    y.noalias() += W * X.middleCols(c0, n);
  });
}

// dW += dY X^T (db += the row sums of dY when b is given), split over the core's threads.
template <class S> void weight_grad(MRef<S> dW, Param<S>* b, CRef<S> dY, CRef<S> X) {
  parallel_slices(X.rows(), 16,
                  [&](Index r0, Index n) { dW.middleCols(r0, n).noalias() += dY * X.middleRows(r0, n).transpose(); });
  if (b) b->g.col(0) += dY.rowwise().sum();
}

template <class S> S sigm(S a) { return S(1) / (S(1) + std::exp(-a)); }

}  // namespace

template <class S>
HORNN<S>::HORNN(ParamSet<S>& ps, Index E, const std::vector<Index>& hidden, const HornnSpec& spec, double dropout,
                Rng* rng)
    : E_(E), K_(spec.order), spec_(spec) {
  MSRNN_CHECK(E > 0, "HORNN input size must be positive, got ", E);
  MSRNN_CHECK(!hidden.empty(), "a HORNN needs at least one layer");
  MSRNN_CHECK(spec.order >= 1 && spec.order <= 255, "HORNN order must be in [1, 255], got ", spec.order);
  MSRNN_CHECK(spec.alpha > 0.0 && spec.alpha <= 1.0, "HORNN alpha must be in (0, 1], got ", spec.alpha);
  MSRNN_CHECK(dropout >= 0.0 && dropout < 1.0, "dropout must be in [0, 1), got ", dropout);
  MSRNN_CHECK(dropout == 0.0 || hidden.size() == 1 || rng != nullptr, "HORNN dropout needs a random generator");
  const Index K = K_;
  const bool gated = spec.pooling == HornnPooling::Gated;
  Index in = E;
  layers_.resize(hidden.size());
  for (size_t l = 0; l < hidden.size(); ++l) {
    Layer& L = layers_[l];
    const Index H = hidden[l];
    MSRNN_CHECK(H > 0, "HORNN hidden sizes must be positive, got ", H, " for layer ", l);
    L.E = in;
    L.H = H;
    L.suffix = cat("_l", l);
    const std::string& sx = L.suffix;
    L.W_in.id = ps.add("weight_ih" + sx, H, in, {"input", H, sx});
    L.W_h.id = ps.add("weight_hh" + sx, K * H, H, {"recurrent", H, sx});
    if (spec.bias) L.b.id = ps.add("bias" + sx, H, 1, {"bias", H, sx});
    if (gated) {
      L.Wg_in.id = ps.add("gate_weight_ih" + sx, K * H, in, {"input", H, sx});
      L.Wg_h.id = ps.add("gate_weight_hh" + sx, K * H, H, {"recurrent", H, sx});
      if (spec.bias) L.bg.id = ps.add("gate_bias" + sx, K * H, 1, {"bias", H, sx});
    }
    in = H;
  }
  coef_.resize(K);
  for (Index n = 1; n <= K; ++n)
    coef_[n - 1] = spec.pooling == HornnPooling::Fofe ? S(std::pow(spec.alpha, double(n))) : S(1);
  links_ = std::make_unique<LayerLinks<S>>(hidden, dropout, rng);
}

template <class S> void HORNN<S>::bind(ParamSet<S>& ps) {
  for (auto& L : layers_)
    for (auto* p : {&L.W_in, &L.W_h, &L.b, &L.Wg_in, &L.Wg_h, &L.bg})
      if (p->id >= 0) p->bind(ps);
}

template <class S> void HORNN<S>::reset_state(Index B) {
  for (auto& L : layers_) L.lags.setZero(L.H, K_ * B);
}

template <class S> std::vector<NamedState<S>> HORNN<S>::get_state() const {
  std::vector<NamedState<S>> out;
  for (const auto& L : layers_) {
    const Index B = L.lags.cols() / K_;
    for (Index n = 1; n <= K_; ++n) out.push_back({cat("h", L.suffix, "_lag", n), L.lags.middleCols((K_ - n) * B, B)});
  }
  return out;
}

template <class S> void HORNN<S>::set_state(const std::vector<NamedState<S>>& state) {
  const Index B = state.empty() ? 0 : state.front().value.cols();
  std::vector<Mat<S>> lags(layers_.size());  // all checked before any is changed
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    lags[l].resize(L.H, K_ * B);
    for (Index n = 1; n <= K_; ++n)
      lags[l].middleCols((K_ - n) * B, B) = find_state(state, cat("h", L.suffix, "_lag", n), L.H, B);
  }
  for (size_t l = 0; l < layers_.size(); ++l) layers_[l].lags = std::move(lags[l]);
}

template <class S> std::vector<NamedState<S>> HORNN<S>::records() const {
  std::vector<NamedState<S>> out;
  const Index N = T_ * B_;
  for (const auto& L : layers_)
    if (L.hist.cols() >= N && N > 0) out.push_back({cat("h", L.suffix), L.hist.rightCols(N)});
  return out;
}

template <class S> std::vector<NamedState<S>> HORNN<S>::record_grads() const {
  std::vector<NamedState<S>> out;
  const Index N = T_ * B_;
  for (const auto& L : layers_) {
    MSRNN_CHECK(L.dH.cols() == N && N > 0, "HORNN record gradients need a backward after the last forward");
    out.push_back({cat("h", L.suffix), L.dH});
  }
  return out;
}

template <class S> void HORNN<S>::forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool train) {
  MSRNN_CHECK(layers_[0].lags.cols() == K_ * B, "HORNN state has batch size ", layers_[0].lags.cols() / K_,
              ", input has ", B);
  MSRNN_CHECK(X.rows() == E_ && X.cols() == T * B, "HORNN input has shape (", X.rows(), ", ", X.cols(), "), expected (",
              E_, ", ", T * B, ")");
  const Index N = T * B;
  T_ = T;
  B_ = B;
  fast_ = !reference_kernels();
  links_->forward(0, Y, X, N, train, [&](size_t l, MRef<S> y, CRef<S> x) { forward_layer(layers_[l], y, x, train); });
}

template <class S> void HORNN<S>::products(Layer& L, Index s, Index j0, Index nb, bool packed) {
  const Index M = L.M(), c = s * B_ + j0;
  if (packed)
    L.Wp.multiply(L.P.data() + c * M, M, L.hist.data() + c * L.H, L.H, nb, 0, L.H, false);
  else
    L.P.block(0, c, M, nb).noalias() = L.Wcat * L.hist.block(0, c, L.H, nb);
}

template <class S> void HORNN<S>::forward_layer(Layer& L, MRef<S> Y, CRef<S> X, bool /*train*/) {
  const Index T = T_, B = B_, K = K_, H = L.H, N = T * B, KB = K * B, KH = K * H;
  const bool gated = spec_.pooling == HornnPooling::Gated;
  const Index M = gated ? 2 * KH : KH;
  L.A.resize(H, N);
  input_product<S>(L.A, L.W_in.w, spec_.bias ? &L.b : nullptr, X);
  if (gated) {
    L.R.resize(KH, N);
    input_product<S>(L.R, L.Wg_in.w, spec_.bias ? &L.bg : nullptr, X);
  }
  if (spec_.pooling == HornnPooling::Max) L.win.resize(H, N);
  L.hist.resize(H, (T + K) * B);
  L.hist.leftCols(KB) = L.lags;
  L.P.resize(M, (T + K) * B);
  L.Wcat.resize(M, H);
  L.Wcat.topRows(KH) = L.W_h.w;
  if (gated) L.Wcat.bottomRows(KH) = L.Wg_h.w;
  if (fast_) {
    const bool packed = T >= kPackMinSteps;
    if (packed) {
      L.Wp.resize(M / H, H, H);
      L.Wp.pack(L.Wcat.data(), M, 0, H, 0, H);
    }
    // The products of the carried lags (only the blocks later steps read are needed; all are cheap).
    parallel_slices(KB, 16,
                    [&](Index c0, Index n) { L.P.middleCols(c0, n).noalias() = L.Wcat * L.hist.middleCols(c0, n); });
    const int nt = std::max(1, std::min<int>(get_num_threads(), int(B)));
    over_streams(B, nt, [&](Index j0, Index nb, int) {
      for (Index t = 0; t < T; ++t) {
        step_forward(L, t, j0, nb);
        if (t + 1 < T) products(L, t + K, j0, nb, packed);
      }
    });
  } else {
    for (Index t = 0; t < T; ++t) {
      const Index s = t + K;
      for (Index n = 1; n <= K; ++n) {
        const auto h = step_block(L.hist, s - n, B);
        L.P.block((n - 1) * H, (s - n) * B, H, B).noalias() = L.W_h.w.middleRows((n - 1) * H, H) * h;
        if (gated) L.P.block(KH + (n - 1) * H, (s - n) * B, H, B).noalias() = L.Wg_h.w.middleRows((n - 1) * H, H) * h;
      }
      step_forward(L, t, 0, B);
    }
  }
  Y = L.hist.rightCols(N);
  L.lags = L.hist.rightCols(KB);
  L.dH.resize(H, 0);  // no gradients for this forward yet
}

template <class S> void HORNN<S>::step_forward(Layer& L, Index t, Index j0, Index nb) {
  const Index B = B_, K = K_, H = L.H, KH = K * H, s = t + K, c = t * B + j0;
  auto a = L.A.block(0, c, H, nb);                                                       // (H, nb)
  auto path = [&](Index n) { return L.P.block((n - 1) * H, (s - n) * B + j0, H, nb); };  // p_{t,n}
  switch (spec_.pooling) {
    case HornnPooling::Plain:
      for (Index n = 1; n <= K; ++n) a += path(n);
      break;
    case HornnPooling::Fofe:
      for (Index n = 1; n <= K; ++n) a += coef_[n - 1] * path(n);
      break;
    case HornnPooling::Max:
      for (Index j = 0; j < nb; ++j)
        for (Index i = 0; i < H; ++i) {
          S best = L.P(i, (s - 1) * B + j0 + j);  // p_{t,1}
          std::uint8_t w = 0;
          for (Index n = 2; n <= K; ++n) {
            const S v = L.P((n - 1) * H + i, (s - n) * B + j0 + j);
            if (v > best) {  // strict: on ties the lowest n keeps the win
              best = v;
              w = std::uint8_t(n - 1);
            }
          }
          a(i, j) += best;
          L.win(i, c + j) = w;
        }
      break;
    case HornnPooling::Gated:
      for (Index n = 1; n <= K; ++n) {
        auto r = L.R.block((n - 1) * H, c, H, nb);
        const auto q = L.P.block(KH + (n - 1) * H, (s - n) * B + j0, H, nb);  // W2n^g h_{t-n}
        r = (r + q).unaryExpr([](S v) { return sigm(v); });
        a.array() += r.array() * path(n).array();
      }
      break;
  }
  auto h = L.hist.block(0, s * B + j0, H, nb);
  switch (spec_.activation) {
    case HornnActivation::Sigmoid: h = a.unaryExpr([](S v) { return sigm(v); }); break;
    case HornnActivation::Tanh: h = a.array().tanh().matrix(); break;
    case HornnActivation::ReLU: h = a.cwiseMax(S(0)); break;
  }
}

template <class S> void HORNN<S>::backward(MRef<S> dX, CRef<S> dY, CRef<S> X) {
  links_->backward(dX, dY, X,
                   [&](size_t l, MRef<S> dx, CRef<S> dy, CRef<S> x) { backward_layer(layers_[l], dx, dy, x); });
}

template <class S> void HORNN<S>::backward_layer(Layer& L, MRef<S> dX, CRef<S> dY, CRef<S> X) {
  const Index T = T_, B = B_, K = K_, H = L.H, N = T * B, KH = K * H, M = L.M();
  const bool gated = spec_.pooling == HornnPooling::Gated;
  MSRNN_CHECK(dY.rows() == H && dY.cols() == N, "HORNN backward: dY has shape (", dY.rows(), ", ", dY.cols(),
              "), expected (", H, ", ", N, ")");
  L.D.setZero(M, (T + K) * B);
  L.dA.resize(H, N);
  L.dH.resize(H, N);
  if (gated) L.dR.resize(KH, N);
  if (fast_) {
    const bool packed = T >= kPackMinSteps;
    if (packed) {
      L.WTp.resize(1, H, M);
      L.WTp.pack_transposed(L.Wcat.data(), M, 0, M, 0, H);
    }
    const int nt = std::max(1, std::min<int>(get_num_threads(), int(B)));
    if (int(dh_.size()) < nt) dh_.resize(nt);
    over_streams(B, nt, [&](Index j0, Index nb, int k) {
      Mat<S>& dh = dh_[k];  // (H, nb)
      for (Index t = T - 1; t >= 0; --t) {
        const Index c = (t + K) * B + j0;
        dh = dY.block(0, t * B + j0, H, nb);
        if (t + 1 < T) {  // D_s is complete: every step that reads h_s came later
          if (packed)
            L.WTp.multiply(dh.data(), H, L.D.data() + c * M, M, nb, 0, H, true);
          else
            dh.noalias() += L.Wcat.transpose() * L.D.block(0, c, M, nb);
        }
        L.dH.block(0, t * B + j0, H, nb) = dh;
        step_backward(L, t, j0, nb, dh);
      }
    });
    // Recurrent weights: one product over the chunk's history (h_{T-1} fed no product here).
    const Index cols = (T + K - 1) * B;
    weight_grad<S>(L.W_h.g, nullptr, L.D.topLeftCorner(KH, cols), L.hist.leftCols(cols));
    if (gated) weight_grad<S>(L.Wg_h.g, nullptr, L.D.bottomLeftCorner(KH, cols), L.hist.leftCols(cols));
  } else {
    L.dhist.setZero(H, (T + K) * B);
    Mat<S> dh(H, B);
    for (Index t = T - 1; t >= 0; --t) {
      const Index s = t + K;
      dh = step_block(dY, t, B) + step_block(L.dhist, s, B);
      step_block(L.dH, t, B) = dh;
      step_backward(L, t, 0, B, dh);
      for (Index n = 1; n <= K; ++n) {
        const auto h = step_block(L.hist, s - n, B);
        for (Index part = 0; part < (gated ? 2 : 1); ++part) {
          const auto Dn = L.D.block(part * KH + (n - 1) * H, (s - n) * B, H, B);
          auto W = (part ? L.Wg_h : L.W_h).w.middleRows((n - 1) * H, H);
          (part ? L.Wg_h : L.W_h).g.middleRows((n - 1) * H, H).noalias() += Dn * h.transpose();
          if (s - n >= K) step_block(L.dhist, s - n, B).noalias() += W.transpose() * Dn;
        }
      }
    }
  }
  weight_grad<S>(L.W_in.g, spec_.bias ? &L.b : nullptr, L.dA, X);
  if (gated) weight_grad<S>(L.Wg_in.g, spec_.bias ? &L.bg : nullptr, L.dR, X);
  if (dX.cols() > 0) {
    parallel_slices(N, 16, [&](Index c0, Index n) {
      auto dx = dX.middleCols(c0, n);
      dx.noalias() = L.W_in.w.transpose() * L.dA.middleCols(c0, n);
      if (gated) dx.noalias() += L.Wg_in.w.transpose() * L.dR.middleCols(c0, n);
    });
  }
}

template <class S> void HORNN<S>::step_backward(Layer& L, Index t, Index j0, Index nb, const Mat<S>& dh) {
  const Index B = B_, K = K_, H = L.H, KH = K * H, s = t + K, c = t * B + j0;
  const auto h = L.hist.block(0, s * B + j0, H, nb);
  auto da = L.dA.block(0, c, H, nb);
  switch (spec_.activation) {
    case HornnActivation::Sigmoid: da.array() = dh.array() * h.array() * (S(1) - h.array()); break;
    case HornnActivation::Tanh: da.array() = dh.array() * (S(1) - h.array().square()); break;
    case HornnActivation::ReLU: da.array() = (h.array() > S(0)).select(dh.array(), S(0)); break;
  }
  auto dpath = [&](Index n) { return L.D.block((n - 1) * H, (s - n) * B + j0, H, nb); };  // dL/dp_{t,n}
  switch (spec_.pooling) {
    case HornnPooling::Plain:
      for (Index n = 1; n <= K; ++n) dpath(n) = da;
      break;
    case HornnPooling::Fofe:
      for (Index n = 1; n <= K; ++n) dpath(n) = coef_[n - 1] * da;
      break;
    case HornnPooling::Max:
      for (Index n = 1; n <= K; ++n) {
        auto d = dpath(n);
        for (Index j = 0; j < nb; ++j)
          for (Index i = 0; i < H; ++i) d(i, j) = L.win(i, c + j) == n - 1 ? da(i, j) : S(0);
      }
      break;
    case HornnPooling::Gated:
      for (Index n = 1; n <= K; ++n) {
        const auto r = L.R.block((n - 1) * H, c, H, nb);
        const auto p = L.P.block((n - 1) * H, (s - n) * B + j0, H, nb);
        auto dg = L.dR.block((n - 1) * H, c, H, nb);
        dg.array() = da.array() * p.array() * r.array() * (S(1) - r.array());
        L.D.block(KH + (n - 1) * H, (s - n) * B + j0, H, nb) = dg;
        dpath(n).array() = r.array() * da.array();
      }
      break;
  }
}

template class HORNN<float>;
template class HORNN<double>;

namespace {
// The hornn core's options (hornn.hpp, HornnSpec).
CoreSchema hornn_schema() {
  return {
      opt::count("order", 3, 1, "N, the number of previous states each layer reads (at most 255)"),
      opt::choice("pooling", "plain", {"plain", "max", "fofe", "gated"}, "how the N paths combine (eq. 3-7)"),
      opt::number("alpha", 0.6, opt::open(0.0, 1.0), "FOFE's forgetting factor (fofe pooling only)"),
      opt::choice("activation", "sigmoid", {"sigmoid", "tanh", "relu"}, "f, the hidden activation"),
      opt::flag("bias", true, "biases b (and the gates' b^g_n), absent from the paper's equations"),
  };
}

template <class S> std::unique_ptr<Core<S>> make_hornn(ParamSet<S>& ps, const CoreArgs& a) {
  CoreOptions& o = *a.options;
  HornnSpec spec;
  spec.order = o.count("order");
  MSRNN_CHECK(spec.order <= 255, "the hornn option 'order' must be at most 255, got ", spec.order);
  const std::string pooling = o.choice("pooling");
  spec.pooling = pooling == "max"     ? HornnPooling::Max
                 : pooling == "fofe"  ? HornnPooling::Fofe
                 : pooling == "gated" ? HornnPooling::Gated
                                      : HornnPooling::Plain;
  MSRNN_CHECK(spec.pooling == HornnPooling::Fofe || !o.given("alpha"),
              "the hornn option 'alpha' applies to pooling 'fofe' only, got pooling '", pooling, "'");
  if (spec.pooling == HornnPooling::Fofe) spec.alpha = o.number("alpha");
  const std::string act = o.choice("activation");
  spec.activation = act == "tanh"   ? HornnActivation::Tanh
                    : act == "relu" ? HornnActivation::ReLU
                                    : HornnActivation::Sigmoid;
  spec.bias = o.flag("bias");
  o.finish();
  return std::make_unique<HORNN<S>>(ps, a.input_size, a.hidden_sizes, spec, a.dropout, a.rng);
}
}  // namespace
MSRNN_REGISTER_CORE("hornn", make_hornn, hornn_schema());

}  // namespace msrnn
