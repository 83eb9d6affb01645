#include "msrnn/cores/vcrnn.hpp"

#include "msrnn/kernels/gemm.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace msrnn {

template <class S>
VCLayer<S>::VCLayer(ParamSet<S>& ps, VCUnit unit, Index E, Index D, const VCOptions& opt)
    : unit_(unit), G_(unit == VCUnit::GRU ? 3 : 1), D_(D), opt_(opt) {
  MSRNN_CHECK(D > 0, unit_name(), " hidden size must be positive, got ", D);
  MSRNN_CHECK(E == D, "the ", unit_name(), " masks x_t with the same e_t as h_{t-1}, so it reads inputs of the ",
              "hidden size: embed_size (or the encoder's output size) must equal the hidden size ", D, ", got ", E);
  const std::string l = "_l0";
  W_.id = ps.add("weight_ih" + l, G_ * D, D, {"input", D, l});
  U_.id = ps.add("weight_hh" + l, G_ * D, D, {"recurrent", D, l});
  b_.id = ps.add("bias" + l, G_ * D, 1, {"bias", D, l});
  v_.id = ps.add("sched_weight_ih" + l, 1, D, {"input", 0, l});
  u_.id = ps.add("sched_weight_hh" + l, 1, D, {"recurrent", 0, l});
  bm_.id = ps.add("sched_bias" + l, 1, 1, {"bias", 0, l});
}

template <class S> void VCLayer<S>::bind(ParamSet<S>& ps) {
  for (auto* p : {&W_, &U_, &b_, &v_, &u_, &bm_}) p->bind(ps);
}

template <class S> void VCLayer<S>::reset_state(Index B) { h_.setZero(D_, B); }

template <class S> std::vector<NamedState<S>> VCLayer<S>::get_state() const { return {{"h_l0", h_}}; }

template <class S> void VCLayer<S>::set_state(const std::vector<NamedState<S>>& state) {
  const Index B = state.empty() ? 0 : state.front().value.cols();
  h_ = find_state(state, "h_l0", D_, B);
}

template <class S> void VCLayer<S>::set_option(const std::string& name, double value) {
  if (name == "sharpness") {
    MSRNN_CHECK(std::isfinite(value) && value > 0.0, unit_name(), " sharpness (lambda) must be > 0, got ", value);
    opt_.sharpness = value;
  } else if (name == "eps") {
    MSRNN_CHECK(value > 0.0 && value < 0.5, unit_name(), " eps must be in (0, 0.5), got ", value);
    opt_.eps = value;
  } else if (name == "penalty_weight") {
    MSRNN_CHECK(std::isfinite(value) && value >= 0.0, unit_name(), " penalty_weight must be >= 0, got ", value);
    opt_.penalty_weight = value;
  } else if (name == "target") {
    MSRNN_CHECK(value >= 0.0 && value <= 1.0, unit_name(), " target (m_bar) must be in [0, 1], got ", value);
    opt_.target = value;
  } else if (name == "skip") {
    MSRNN_CHECK(value == 0.0 || value == 1.0, unit_name(), " option 'skip' must be 0 or 1, got ", value);
    opt_.skip = value != 0.0;
  } else {
    throw std::invalid_argument(cat("the ", unit_name(), " cannot change option '", name,
                                    "' after construction; changeable options are 'sharpness', 'eps', ",
                                    "'penalty_weight', 'target' and 'skip'"));
  }
}

template <class S> Index VCLayer<S>::mask_column(Index n, S m) {
  const S lam = S(opt_.sharpness), eps = S(opt_.eps), mD = m * S(D_);
  auto e = e_.col(n);  // rows [d, D) are left as they are (forward_scheduler zeroes [d, q))
  // With x_i = lambda (m D - o - i), Thres gives exactly 1 where x_i > logit(1 - eps) = L and exactly 0
  // where x_i < -L. Outside a margin of 0.05 (far above rounding) no exponential is needed:
  // units [0, i1) are 1 and units [i2, D) are 0; only [i1, i2) evaluate the sigmoid.
  const double L = std::log((1.0 - opt_.eps) / opt_.eps) + 0.05, c = double(mD) - double(opt_.mask_offset);
  const auto clampD = [&](double v) { return Index(std::min(std::max(v, 0.0), double(D_))); };
  const Index i1 = clampD(std::floor(c - L / opt_.sharpness) + 1.0), i2 = clampD(std::ceil(c + L / opt_.sharpness));
  e.head(i1).setOnes();
  Index d = i1, open = -1;
  for (Index i = i1; i < i2; ++i) {
    const S s = S(1) / (S(1) + std::exp(-lam * (mD - S(i + opt_.mask_offset))));
    if (s < eps) break;  // s decreases with i: every later unit is 0 as well
    e(i) = s > S(1) - eps ? S(1) : s;
    if (open < 0 && e(i) < S(1)) open = i;
    d = i + 1;
  }
  open_[n] = open < 0 ? d : open;
  return d;
}

template <class S> double VCLayer<S>::penalty_value(double m) const {
  const double x = m - opt_.target;
  switch (opt_.penalty) {
    case VCPenalty::L1: return std::abs(x);
    case VCPenalty::OneSided: return x > 0.0 ? x : 0.0;
    case VCPenalty::L2: return x * x;
  }
  return 0.0;
}

template <class S> double VCLayer<S>::penalty_slope(double m) const {
  const double x = m - opt_.target;
  switch (opt_.penalty) {
    case VCPenalty::L1: return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : 0.0);
    case VCPenalty::OneSided: return x > 0.0 ? 1.0 : 0.0;
    case VCPenalty::L2: return 2.0 * x;
  }
  return 0.0;
}

template <class S> void VCLayer<S>::group_step(Work& w, Index n0, Index nb) const {
  w.order.resize(nb);
  std::iota(w.order.begin(), w.order.end(), Index(0));
  std::stable_sort(w.order.begin(), w.order.end(), [&](Index a, Index b) { return q_[n0 + a] < q_[n0 + b]; });
  w.levels.clear();
  w.first = nb;
  for (Index k = nb - 1; k >= 0 && q_[n0 + w.order[k]] > 0; --k) w.first = k;
  for (Index k = w.first; k < nb; ++k) {
    const Index q = q_[n0 + w.order[k]];
    if (w.levels.empty() || w.levels.back()[0] != q) w.levels.push_back({q, k});
  }
  w.qs.resize(nb - w.first);
  for (Index k = w.first; k < nb; ++k) w.qs[k - w.first] = q_[n0 + w.order[k]];
}

namespace {

// Out[0:q_k, k] (= or +=) A[0:q_k, 0:q_k] In[0:q_k, k] for the columns k in [first, B) of a step, sorted by
// q ascending, with levels = (q, first column with that q). Block (row band r, column band s) of A, bands
// cut at the levels' q, is needed by the columns of level >= max(r, s), a suffix of the columns: each level
// does its row band (r = l, s <= l) and its column band (r < l, s = l) in one product each over every
// column that needs it, so every entry of A is read once per call and the products stay wide.
template <class AT, class InT, class OutT>
void stair_product(const AT& A, const InT& In, OutT& Out, const std::vector<std::array<Index, 2>>& levels, Index B,
                   bool accumulate) {
  Index b0 = 0;
  for (const auto& lv : levels) {
    const Index b = lv[0], f = lv[1], w = b - b0, n = B - f;
    auto band = Out.block(b0, f, w, n);
    if (accumulate)
      band.noalias() += A.block(b0, 0, w, b) * In.block(0, f, b, n);
    else
      band.noalias() = A.block(b0, 0, w, b) * In.block(0, f, b, n);
    if (b0 > 0) Out.block(0, f, b0, n).noalias() += A.block(0, b0, b0, w) * In.block(b0, f, w, n);
    b0 = b;
  }
}

// time (kVCPhases, N): each phase's seconds s of one step split over the columns [n0, n0 + nb) that ran it.
template <class S> void add_step_time(Mat<S>& time, const double (&s)[kVCPhases], Index n0, Index nb) {
  for (Index j = 0; j < nb; ++j)
    for (int p = 0; p < kVCPhases; ++p)
      if (s[p] != 0.0) time(p, n0 + j) += S(s[p] / double(nb));
}

}  // namespace

// Wall-clock time of consecutive phases: mark(acc) adds the time since the last mark to acc.
template <class S> struct VCLayer<S>::PhaseClock {
  using Clock = std::chrono::steady_clock;
  Clock::time_point t0 = Clock::now();
  void mark(double& acc) {
    const auto t = Clock::now();
    acc += std::chrono::duration<double>(t - t0).count();
    t0 = t;
  }
};

// The penalty of a forward from pen, the sum over the columns of f(m_t - m_bar) (of m_t with penalty_on_mean):
// aux_, and mean_m_ (mbar_N) with penalty_on_mean; both 0 after an evaluation pass.
template <class S> void VCLayer<S>::set_penalty(double pen, Index N, bool train) {
  const double counted = this->counted_columns(N);  // the columns without padding
  mean_m_ = train && opt_.penalty_on_mean ? pen / counted : 0.0;
  if (!train)
    aux_ = 0.0;
  else
    aux_ = opt_.penalty_weight * (opt_.penalty_on_mean ? penalty_value(mean_m_) : pen / counted);
}

template <class S> void VCLayer<S>::forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool train) {
  MSRNN_CHECK(X.rows() == D_ && X.cols() == T * B, unit_name(), " input has shape (", X.rows(), ", ", X.cols(),
              "), expected (", D_, ", ", T * B, ")");
  run(Y, X, nullptr, T, B, train);
}

template <class S>
bool VCLayer<S>::forward_tokens(MRef<S> Y, CRef<S> Emb, const std::int32_t* tokens, Index T, Index B) {
  if (!input_tables() || !input_tables_pay(Emb.cols(), T * B) || reference_kernels()) return false;
  MSRNN_CHECK(Emb.rows() == D_, unit_name(), " input table: embedding has ", Emb.rows(), " rows, expected ", D_);
  run(Y, Emb, tokens, T, B, /*train=*/false);
  return true;
}

template <class S>
void VCLayer<S>::run(MRef<S> Y, CRef<S> X, const std::int32_t* tokens, Index T, Index B, bool train) {
  MSRNN_CHECK(h_.cols() == B, unit_name(), " state has batch size ", h_.cols(), ", input has ", B);
  const Index N = T * B, D = D_;
  T_ = T;
  B_ = B;
  if (train) {
    hs_.resize(D, N + B);
    hs_.leftCols(B) = h_;
  }
  // h_{t-1} and h_t of the columns [n0, n0 + nb) of a step: training keeps every h_{t-1} in hs_ (the backward
  // reads them); inference writes h_t straight into Y, h_{-1} being the carried state h_.
  using StepMap = Eigen::Map<Mat<S>, 0, Eigen::OuterStride<>>;
  S* const y = Y.data();
  const Index ldy = Y.outerStride();
  const auto h_prev = [&](Index t, Index j0, Index nb) {
    if (train) return StepMap(hs_.data() + (t * B + j0) * D, D, nb, Eigen::OuterStride<>(D));
    if (t == 0) return StepMap(h_.data() + j0 * D, D, nb, Eigen::OuterStride<>(D));
    return StepMap(y + ((t - 1) * B + j0) * ldy, D, nb, Eigen::OuterStride<>(ldy));
  };
  const auto h_next = [&](Index t, Index j0, Index nb) {
    if (train) return StepMap(hs_.data() + ((t + 1) * B + j0) * D, D, nb, Eigen::OuterStride<>(D));
    return StepMap(y + (t * B + j0) * ldy, D, nb, Eigen::OuterStride<>(ldy));
  };
  e_.resize(D, N);  // rows [0, q) of each column written by the scheduler; rows >= q are never read
  m_.resize(1, N);
  g_.resize(G_ * D, N);
  d_.assign(N, 0);
  q_.assign(N, 0);
  open_.assign(N, 0);
  time_.setZero(kVCPhases, N);
  vx_.resize(1, N);
  if (!reference_kernels()) scheduler_input_term(X, tokens);
  // x_t of global column n: column n of X, or with tokens the embedding's column of token n
  const auto x_col = [&](Index n) { return X.col(tokens ? Index(tokens[n]) : n).data(); };
  const int nt = stream_threads(B, !reference_kernels());
  work_.resize(nt);
  const bool packed = packed_path();
  if (packed) UW_p_.resize(1, D, 2 * D);
  packed_ext_.store(0);  // nothing packed yet: the steps pack what they reach (extend_packing)
  // Threads over streams: thread k runs every step of its streams [j0, j0 + nb); column j of a step block
  // below is stream j0 + j, global column n = t B + j0 + j.
  const auto ran = over_streams(B, nt, 1, [&](Index j0, Index nb, int k) {
    Work& w = work_[k];
    for (auto* M : {&w.hb, &w.xb, &w.a[0], &w.a[1], &w.a[2], &w.rh}) M->resize(D, nb);
    w.pm.resize(1, nb);
    w.pen = 0.0;
    for (Index t = 0; t < T; ++t) {
      PhaseClock clk;
      double sec[kVCPhases] = {};
      const Index n0 = t * B + j0;
      auto Hp = h_prev(t, j0, nb);                                                              // h_{t-1} (D, nb)
      auto Hn = h_next(t, j0, nb);                                                              // h_t (D, nb)
      if (reference_kernels()) vx_.middleCols(n0, nb).noalias() = v_.w * X.middleCols(n0, nb);  // plain: per step
      forward_scheduler(w, Hp, n0, nb);
      clk.mark(sec[kFwdScheduler]);
      if (packed && !w.qs.empty()) {
        extend_packing(w.qs.back());
        clk.mark(sec[kFwdPack]);  // (with any wait for another thread's extension)
      }
      forward_operands(w, Hp, Hn, x_col, n0, nb);
      clk.mark(sec[kFwdOperands]);
      if (unit_ == VCUnit::Elman)
        forward_elman(w, Hp, Hn, n0, nb, packed, clk, sec);
      else
        forward_gru(w, Hp, Hn, n0, nb, clk, sec);
      add_step_time(time_, sec, n0, nb);
    }
  });
  double pen = 0.0;
  in_thread_order(ran, [&](int k) { pen += work_[k].pen; });
  if (train) {
    Y = hs_.rightCols(N);
    h_ = hs_.rightCols(B);
  } else if (T > 0) {
    h_ = Y.rightCols(B);
  }
  trained_ = train;
  set_penalty(pen, N, train);
}

// The scheduler's input term of every column of the chunk, v . x_t into vx_ (1, N), before the steps (the plain
// path computes it at each step): one pass over X (D, N), or with tokens the table v Emb (1, V) read per column.
// Its time goes to the scheduler's row of time_.
template <class S> void VCLayer<S>::scheduler_input_term(CRef<S> X, const std::int32_t* tokens) {
  PhaseClock clk;
  double sec = 0.0;
  const Index N = vx_.cols();
  if (tokens) {
    const Mat<S> vE = v_.w * X;  // (1, V) v . Emb
    for (Index n = 0; n < N; ++n) vx_(0, n) = vE(0, tokens[n]);
  } else {
    vx_.noalias() = v_.w * X;
  }
  clk.mark(sec);
  time_.row(kFwdScheduler).setConstant(S(sec / double(std::max<Index>(N, 1))));
}

// The scheduler of one step (eq. 7-8): m_t = sigm(u . h_{t-1} + v . x_t + b_m) of each column, its mask e_t
// (mask_column), d_t and q (d_t rounded up to the block), the penalty f(m_t - m_bar) summed into w.pen, and the
// columns grouped by q (group_step). Hp h_{t-1} (D, nb); v . x_t from vx_.
template <class S>
template <class HP>
void VCLayer<S>::forward_scheduler(Work& w, const HP& Hp, Index n0, Index nb) {
  const Index D = D_;
  w.pm.noalias() = u_.w * Hp;
  w.pm += vx_.middleCols(n0, nb);
  for (Index j = 0; j < nb; ++j) {
    const Index n = n0 + j;
    const S m = S(1) / (S(1) + std::exp(-(w.pm(0, j) + bm_.w(0, 0))));
    m_(0, n) = m;
    d_[n] = mask_column(n, m);
    q_[n] = opt_.skip ? std::min(D, (d_[n] + opt_.block - 1) / opt_.block * opt_.block) : D;
    e_.col(n).segment(d_[n], q_[n] - d_[n]).setZero();  // the rows the products read past d_t
    w.pen += this->column_weight(n) * (opt_.penalty_on_mean ? double(m) : penalty_value(double(m)));
  }
  group_step(w, n0, nb);
}

// The masked operands of one step (eq. 12), h_bar = e_t . h_{t-1} and x_bar = e_t . x_t, into w.hb, w.xb in
// sorted order, and h_t = h_{t-1} on the units i >= q of each column (the rows < q are written by the update).
// Hp h_{t-1} (D, nb), Hn h_t (D, nb), x_col(n) the data of x_t (D) of global column n.
template <class S>
template <class HP, class HN, class XC>
void VCLayer<S>::forward_operands(Work& w, const HP& Hp, HN& Hn, const XC& x_col, Index n0, Index nb) {
  const Index D = D_;
  // Units i >= q of a column keep h_{t-1} (the rows < q are written by the update below).
  for (Index k = 0; k < w.first; ++k) Hn.col(w.order[k]) = Hp.col(w.order[k]);
  // Operands in sorted order: column k of w.hb, w.xb, w.a, w.rh is column w.order[k] (k >= w.first).
  for (Index k = w.first; k < nb; ++k) {
    const Index j = w.order[k], n = n0 + j, q = q_[n];
    Hn.col(j).tail(D - q) = Hp.col(j).tail(D - q);
    w.hb.col(k).head(q) = e_.col(n).head(q).cwiseProduct(Hp.col(j).head(q));
    w.xb.col(k).head(q) = e_.col(n).head(q).cwiseProduct(CVecMap<S>(x_col(n), q));
  }
}

// The VCRNN's update of one step (eq. 13) on the leading q rows of each column:
//   a = U h_bar + V x_bar (w.a[0], (D, nb)),  g = tanh(a + b) (g_),  h_t = e_t . g + (1 - e_t) . h_{t-1} (Hn)
template <class S>
template <class HP, class HN>
void VCLayer<S>::forward_elman(Work& w, const HP& Hp, HN& Hn, Index n0, Index nb, bool packed, PhaseClock& clk,
                               double (&sec)[kVCPhases]) {
  const Index D = D_;
  if (packed) {
    const Index f = std::min(w.first, nb - 1);  // (nb - f columns; none when w.first = nb)
    UW_p_.multiply_leading(w.a[0].col(f).data(), D, w.hb.col(f).data(), D, D, w.xb.col(f).data(), D, w.qs.data(),
                           Index(w.qs.size()), false);
  } else {
    stair_product(lead(U_.w, 0, D), w.hb, w.a[0], w.levels, nb, false);
    stair_product(lead(W_.w, 0, D), w.xb, w.a[0], w.levels, nb, true);
  }
  clk.mark(sec[kFwdProducts]);
  for (Index k = w.first; k < nb; ++k) {
    const Index j = w.order[k], n = n0 + j, q = q_[n];
    auto g = g_.col(n).head(q);
    g = (w.a[0].col(k).head(q) + b_.w.col(0).head(q)).array().tanh().matrix();
    const auto e = e_.col(n).head(q).array();
    Hn.col(j).head(q) = (e * g.array() + (S(1) - e) * Hp.col(j).head(q).array()).matrix();
  }
  clk.mark(sec[kFwdPointwise]);
}

// The VCGRU's update of one step (eq. 14-17) on the leading q rows of each column, gates [r; z; n] in g_:
//   r = sigm(U_r h_bar + V_r x_bar + b_r),  z = e_t . sigm(U_z h_bar + V_z x_bar + b_z)    (w.a[0], w.a[1])
//   h~ = tanh(U_n (r . h_bar) + V_n x_bar + b_n)                                           (w.rh, w.a[2])
//   h_t = z . h~ + (1 - z) . h_{t-1}                                                       (Hn)
template <class S>
template <class HP, class HN>
void VCLayer<S>::forward_gru(Work& w, const HP& Hp, HN& Hn, Index n0, Index nb, PhaseClock& clk,
                             double (&sec)[kVCPhases]) {
  const Index D = D_;
  for (Index gate = 0; gate < 2; ++gate) {
    stair_product(lead(U_.w, gate, D), w.hb, w.a[gate], w.levels, nb, false);
    stair_product(lead(W_.w, gate, D), w.xb, w.a[gate], w.levels, nb, true);
  }
  clk.mark(sec[kFwdProducts]);
  for (Index k = w.first; k < nb; ++k) {
    const Index n = n0 + w.order[k], q = q_[n];
    auto r = g_.col(n).segment(0, q);
    r = ((-(w.a[0].col(k).head(q) + b_.w.col(0).segment(0, q))).array().exp() + S(1)).inverse().matrix();
    g_.col(n).segment(D, q) =
        ((-(w.a[1].col(k).head(q) + b_.w.col(0).segment(D, q))).array().exp() + S(1)).inverse().matrix();
    w.rh.col(k).head(q) = r.cwiseProduct(w.hb.col(k).head(q));
  }
  clk.mark(sec[kFwdPointwise]);
  stair_product(lead(U_.w, 2, D), w.rh, w.a[2], w.levels, nb, false);
  stair_product(lead(W_.w, 2, D), w.xb, w.a[2], w.levels, nb, true);
  clk.mark(sec[kFwdProducts]);
  for (Index k = w.first; k < nb; ++k) {
    const Index j = w.order[k], n = n0 + j, q = q_[n];
    auto nn = g_.col(n).segment(2 * D, q);
    nn = (w.a[2].col(k).head(q) + b_.w.col(0).segment(2 * D, q)).array().tanh().matrix();
    const auto z = e_.col(n).head(q).array() * g_.col(n).segment(D, q).array();
    Hn.col(j).head(q) = (z * nn.array() + (S(1) - z) * Hp.col(j).head(q).array()).matrix();
  }
  clk.mark(sec[kFwdPointwise]);
}

template <class S> void VCLayer<S>::extend_packing(Index q) {
  if (q <= packed_ext_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(pack_mutex_);
  const Index old = packed_ext_.load(std::memory_order_relaxed);
  if (q <= old) return;
  const Index MR = PackedPanels<S>::panel_rows(), D = D_;
  const Index ext = std::min(D, (q + MR - 1) / MR * MR);  // old is a multiple of MR (or 0)
  const Index ldu = U_.w.outerStride(), ldw = W_.w.outerStride();
  if (old > 0) {  // the packed panels: depths [old, ext) of U and of W
    UW_p_.pack(U_.w.data() + old * ldu, ldu, old, ext - old, 0, old);
    UW_p_.pack(W_.w.data() + old * ldw, ldw, D + old, ext - old, 0, old);
  }
  UW_p_.pack(U_.w.data(), ldu, 0, ext, old, ext);  // new panels: depths [0, ext) and [D, D + ext)
  UW_p_.pack(W_.w.data(), ldw, D, ext, old, ext);
  packed_ext_.store(ext, std::memory_order_release);
}

template <class S> void VCLayer<S>::backward(MRef<S> dX, CRef<S> dY, CRef<S> X) {
  const Index T = T_, B = B_, N = T * B, D = D_;
  MSRNN_CHECK(dY.rows() == D && dY.cols() == N, unit_name(), " backward: dY has shape (", dY.rows(), ", ", dY.cols(),
              "), expected (", D, ", ", N, ")");
  MSRNN_CHECK(trained_, unit_name(), " backward needs a training forward first");
  const bool want_dx = dX.cols() > 0;
  const S lamD = S(opt_.sharpness * double(D));
  const S pw = S(opt_.penalty_weight / this->counted_columns(N));
  da_.resize(G_ * D, N);
  pms_.resize(1, N);
  time_.bottomRows(kVCPhases - kBwdScheduler).setZero();
  const int nt = stream_threads(B, !reference_kernels());
  work_.resize(nt);
  const bool packed = packed_path();
  const Index MR = PackedPanels<S>::panel_rows();
  if (packed) {
    Ut_p_.resize(1, D, D);
    Wt_p_.resize(1, D, D);
  }
  // Only the leading (qmax, qmax) blocks are ever read: qmax = the largest q of the chunk, rounded up to panels.
  const Index qmax = q_.empty() ? 0 : *std::max_element(q_.begin(), q_.end());
  const Index ext = std::min(D, (qmax + MR - 1) / MR * MR);
  const auto pack = [&](int k, int team) {  // this thread's panels of U^T and W^T
    work_[k].pack_s = 0.0;
    if (!packed || ext == 0) return;
    PhaseClock clk;
    const auto units = thread_units(ext, MR, k, team);
    Ut_p_.pack_transposed(U_.w.data(), U_.w.outerStride(), 0, ext, units.first, units.second);
    Wt_p_.pack_transposed(W_.w.data(), W_.w.outerStride(), 0, ext, units.first, units.second);
    clk.mark(work_[k].pack_s);
  };
  // Threads over streams as in the forward: thread k runs its streams [j0, j0 + nb) backwards through the
  // chunk and keeps its own sums of the scheduler's gradients, added in thread order.
  const auto ran = over_streams(B, nt, 1, pack, [&](Index j0, Index nb, int k) {
    Work& w = work_[k];
    backward_work(w, nb);
    auto &dh = w.dh, &dhp = w.dhp;
    for (Index t = T - 1; t >= 0; --t) {
      PhaseClock clk;
      double sec[kVCPhases] = {};
      const Index n0 = t * B + j0;
      dh += dY.middleCols(n0, nb);
      const auto Hp = hs_.middleCols(n0, nb);
      const auto Xt = X.middleCols(n0, nb);
      MRef<S> dxt = want_dx ? MRef<S>(dX.middleCols(n0, nb)) : MRef<S>(w.dxl);
      dxt.setZero();
      dhp = dh;  // units i >= q of a column pass their gradient straight to h_{t-1}
      w.pm.setZero();
      group_step(w, n0, nb);
      backward_operands(w, Hp, n0, nb);
      clk.mark(sec[kBwdOperands]);
      if (unit_ == VCUnit::Elman)
        backward_elman(w, Hp, n0, nb, packed, clk, sec);
      else
        backward_gru(w, Hp, n0, nb, clk, sec);
      backward_mask(w, Hp, Xt, dxt, n0, nb, lamD);
      clk.mark(sec[kBwdPointwise]);
      backward_scheduler(w, Hp, Xt, dxt, n0, nb, pw);
      dh.swap(dhp);
      clk.mark(sec[kBwdScheduler]);
      add_step_time(time_, sec, n0, nb);
    }
  });
  in_thread_order(ran, [&](int k) {
    u_.g += work_[k].gu;
    v_.g += work_[k].gv;
    bm_.g(0, 0) += work_[k].gb;
  });
  PhaseClock clk;
  double pack_s = 0.0, grads_s = 0.0, sched_s = 0.0;
  for (int k = 0; k < nt; ++k) pack_s += work_[k].pack_s;
  if (!reference_kernels()) scheduler_weight_grads(X);
  clk.mark(sched_s);
  accumulate_weight_grads(X);
  clk.mark(grads_s);
  const double perN = 1.0 / double(std::max<Index>(N, 1));
  time_.row(kBwdScheduler).array() += S(sched_s * perN);
  time_.row(kBwdPack).setConstant(S(pack_s * perN));
  time_.row(kBwdWeightGrads).setConstant(S(grads_s * perN));
}

// The gradients of the scheduler's weights over the whole chunk (eq. 7), from the gradients of its
// pre-activations pms_ (1, N): dL/du = pms_ H^T with H the (D, N) h_{t-1} of every column, dL/dv = pms_ X^T,
// one product each per chunk (the plain path sums them per step, backward_scheduler).
template <class S> void VCLayer<S>::scheduler_weight_grads(CRef<S> X) {
  const Index N = T_ * B_;
  u_.g.noalias() += pms_ * hs_.leftCols(N).transpose();
  v_.g.noalias() += pms_ * X.transpose();
}

// A thread's backward buffers for its nb streams, and its sums of the scheduler's gradients set to zero.
template <class S> void VCLayer<S>::backward_work(Work& w, Index nb) {
  const Index D = D_;
  for (auto* M : {&w.hb, &w.xb, &w.a[0], &w.a[1], &w.a[2], &w.rh, &w.dhb, &w.de, &w.dhbar, &w.dxbar}) M->resize(D, nb);
  w.dh.setZero(D, nb);  // gradient reaching h_t
  w.dhp.resize(D, nb);  // gradient reaching h_{t-1}
  w.dxl.resize(D, nb);  // gradient reaching x_t (when dX is not wanted)
  w.pm.resize(1, nb);   // gradient of the scheduler pre-activations
  w.gu.setZero(1, D);
  w.gv.setZero(1, D);
  w.gb = S(0);
}

// The backward operands of one step in sorted order (column k is stream w.order[k]): dL/dh_t of the leading q
// rows into w.dhb, and for the VCGRU h_bar = e_t . h_{t-1} again into w.hb. Hp h_{t-1} (D, nb).
template <class S>
template <class HP>
void VCLayer<S>::backward_operands(Work& w, const HP& Hp, Index n0, Index nb) {
  // Sorted order as in the forward: column k of the work buffers is stream w.order[k].
  for (Index k = w.first; k < nb; ++k) {
    const Index j = w.order[k], n = n0 + j, q = q_[n];
    if (unit_ == VCUnit::GRU) w.hb.col(k).head(q) = e_.col(n).head(q).cwiseProduct(Hp.col(j).head(q));
    w.dhb.col(k).head(q) = w.dh.col(j).head(q);
  }
}

// The VCRNN's update backwards (eq. 13) on the leading q rows, dy = dL/dh_t:
//   da = e_t . dy . (1 - g^2) (w.a[0], da_),  dL/dh_{t-1} = (1 - e_t) . dy (w.dhp),
//   dL/de = dy . (g - h_{t-1}) on the open units (w.de),  dL/dh_bar = U^T da (w.dhbar), dL/dx_bar = V^T da (w.dxbar)
template <class S>
template <class HP>
void VCLayer<S>::backward_elman(Work& w, const HP& Hp, Index n0, Index nb, bool packed, PhaseClock& clk,
                                double (&sec)[kVCPhases]) {
  const Index D = D_;
  auto& da = w.a[0];
  auto& dhp = w.dhp;
  for (Index k = w.first; k < nb; ++k) {
    const Index j = w.order[k], n = n0 + j, q = q_[n];
    const auto g = g_.col(n).head(q).array();
    const auto e = e_.col(n).head(q).array();
    const auto dy = w.dhb.col(k).head(q).array();
    da.col(k).head(q) = (e * dy * (S(1) - g * g)).matrix();
    da_.col(n).head(q) = da.col(k).head(q);
    dhp.col(j).head(q) = ((S(1) - e) * dy).matrix();
    // dL/de of the update, dy (g - h_{t-1}), is needed on the open units only (below)
    const Index o = open_[n], c = d_[n] - open_[n];
    w.de.col(k).segment(o, c) =
        (w.dhb.col(k).segment(o, c).array() * (g_.col(n).segment(o, c).array() - Hp.col(j).segment(o, c).array()))
            .matrix();
  }
  clk.mark(sec[kBwdPointwise]);
  if (packed) {
    const Index f = std::min(w.first, nb - 1), c = Index(w.qs.size());  // c = nb - w.first columns
    Ut_p_.multiply_leading(w.dhbar.col(f).data(), D, da.col(f).data(), D, D, nullptr, 0, w.qs.data(), c, false);
    Wt_p_.multiply_leading(w.dxbar.col(f).data(), D, da.col(f).data(), D, D, nullptr, 0, w.qs.data(), c, false);
  } else {
    stair_product(lead(U_.w, 0, D).transpose(), da, w.dhbar, w.levels, nb, false);
    stair_product(lead(W_.w, 0, D).transpose(), da, w.dxbar, w.levels, nb, false);
  }
  clk.mark(sec[kBwdProducts]);
}

// The VCGRU's update backwards (eq. 14-17) on the leading q rows, dy = dL/dh_t, gates [r; z; n] (g_):
//   dz = dy . (h~ - h_{t-1}),  da_n = dy . z . (1 - h~^2),  da_z = dz . e_t . z' (1 - z'),  dL/de = dz . z'
//   dL/dh_{t-1} = (1 - z) . dy,  dL/d(r . h_bar) = U_n^T da_n (w.rh),  da_r = dL/d(r . h_bar) . h_bar . r (1 - r)
//   dL/dh_bar = r . dL/d(r . h_bar) + U_r^T da_r + U_z^T da_z,  dL/dx_bar = V^T [da_r; da_z; da_n]
// with z = e_t . z', z' = sigm(a_z); da_r, da_z, da_n in w.a[0..2] and da_.
template <class S>
template <class HP>
void VCLayer<S>::backward_gru(Work& w, const HP& Hp, Index n0, Index nb, PhaseClock& clk, double (&sec)[kVCPhases]) {
  const Index D = D_;
  auto &dar = w.a[0], &daz = w.a[1], &dan = w.a[2];
  auto& dhp = w.dhp;
  for (Index k = w.first; k < nb; ++k) {
    const Index j = w.order[k], n = n0 + j, q = q_[n];
    const auto e = e_.col(n).head(q).array();
    const auto zs = g_.col(n).segment(D, q).array();
    const auto nn = g_.col(n).segment(2 * D, q).array();
    const auto dy = w.dhb.col(k).head(q).array();
    const auto dz = (dy * (nn - Hp.col(j).head(q).array())).eval();
    dan.col(k).head(q) = (dy * e * zs * (S(1) - nn * nn)).matrix();
    daz.col(k).head(q) = (dz * e * zs * (S(1) - zs)).matrix();
    w.de.col(k).head(q) = (dz * zs).matrix();
    dhp.col(j).head(q) = ((S(1) - e * zs) * dy).matrix();
    da_.col(n).segment(D, q) = daz.col(k).head(q);
    da_.col(n).segment(2 * D, q) = dan.col(k).head(q);
  }
  clk.mark(sec[kBwdPointwise]);
  stair_product(lead(U_.w, 2, D).transpose(), dan, w.rh, w.levels, nb, false);  // gradient of r . h_bar
  clk.mark(sec[kBwdProducts]);
  for (Index k = w.first; k < nb; ++k) {
    const Index n = n0 + w.order[k], q = q_[n];
    const auto r = g_.col(n).segment(0, q).array();
    const auto drh = w.rh.col(k).head(q).array();
    dar.col(k).head(q) = (drh * w.hb.col(k).head(q).array() * r * (S(1) - r)).matrix();
    w.dhbar.col(k).head(q) = (drh * r).matrix();
    da_.col(n).segment(0, q) = dar.col(k).head(q);
  }
  clk.mark(sec[kBwdPointwise]);
  stair_product(lead(U_.w, 0, D).transpose(), dar, w.dhbar, w.levels, nb, true);
  stair_product(lead(U_.w, 1, D).transpose(), daz, w.dhbar, w.levels, nb, true);
  stair_product(lead(W_.w, 0, D).transpose(), dar, w.dxbar, w.levels, nb, false);
  stair_product(lead(W_.w, 1, D).transpose(), daz, w.dxbar, w.levels, nb, true);
  stair_product(lead(W_.w, 2, D).transpose(), dan, w.dxbar, w.levels, nb, true);
  clk.mark(sec[kBwdProducts]);
}

// The masks backwards (eq. 12, 8): dL/dh_{t-1} += e_t . dL/dh_bar (w.dhp), dL/dx_t = e_t . dL/dx_bar (dxt), and
// the gradient reaching m_t through e_t, lambda D sum_i dL/de_i e_i (1 - e_i) over the open units, into w.pm.
// Hp h_{t-1} (D, nb), Xt x_t (D, nb), dxt (D, nb).
template <class S>
template <class HP, class XT>
void VCLayer<S>::backward_mask(Work& w, const HP& Hp, const XT& Xt, MRef<S>& dxt, Index n0, Index nb, S lamD) {
  auto& dhp = w.dhp;
  for (Index k = w.first; k < nb; ++k) {
    const Index j = w.order[k], n = n0 + j, q = q_[n];
    const auto e = e_.col(n).head(q).array();
    dhp.col(j).head(q).array() += e * w.dhbar.col(k).head(q).array();
    dxt.col(j).head(q) = (e * w.dxbar.col(k).head(q).array()).matrix();
    // de_i/dm = lambda D e_i (1 - e_i) where Thres left the sigmoid (0 < e_i < 1), else 0: the sum runs
    // over the open units [open, d) only, with dL/de_i = (the update's) + dL/dh_bar_i h_i + dL/dx_bar_i x_i
    const Index o = open_[n], c = d_[n] - open_[n];
    const auto eo = e_.col(n).segment(o, c).array();
    const auto de =
        (w.de.col(k).segment(o, c).array() + w.dhbar.col(k).segment(o, c).array() * Hp.col(j).segment(o, c).array() +
         w.dxbar.col(k).segment(o, c).array() * Xt.col(j).segment(o, c).array())
            .eval();
    const auto open = (eo > S(0) && eo < S(1)).template cast<S>();
    w.pm(0, j) = lamD * (de * eo * (S(1) - eo) * open).sum();
  }
}

// The scheduler backwards (eq. 7): the gradient of its pre-activation, (dL/dm_t + w/N f'(m_t - m_bar)) m_t (1 - m_t)
// (w.pm, (1, nb)), into dL/dh_{t-1} (u^T, w.dhp), dL/dx_t (v^T, dxt) and this thread's sums for u, v, b_m.
template <class S>
template <class HP, class XT>
void VCLayer<S>::backward_scheduler(Work& w, const HP& Hp, const XT& Xt, MRef<S>& dxt, Index n0, Index nb, S pw) {
  for (Index j = 0; j < nb; ++j) {
    const S m = m_(0, n0 + j);
    const double f1 = penalty_slope(opt_.penalty_on_mean ? mean_m_ : double(m));  // f' at this column, or the batch's
    const S slope = pw * S(this->column_weight(n0 + j) * f1);                     // 0 on padding
    w.pm(0, j) = (w.pm(0, j) + slope) * m * (S(1) - m);
  }
  w.dhp.noalias() += u_.w.transpose() * w.pm;
  dxt.noalias() += v_.w.transpose() * w.pm;
  if (reference_kernels()) {  // the plain path: the gradients of u and v at each step
    w.gu.noalias() += w.pm * Hp.transpose();
    w.gv.noalias() += w.pm * Xt.transpose();
  } else {
    pms_.middleCols(n0, nb) = w.pm;  // for scheduler_weight_grads
  }
  w.gb += w.pm.sum();
}

template <class S> void VCLayer<S>::accumulate_weight_grads(CRef<S> X) {
  const Index N = T_ * B_, D = D_;
  std::vector<Index> cols(N);
  std::iota(cols.begin(), cols.end(), Index(0));
  std::stable_sort(cols.begin(), cols.end(), [&](Index a, Index b) { return q_[a] < q_[b]; });
  Mat<S> HB, XB, DA, RH;  // (q, count) gathered h_bar, x_bar, pre-activation gradients, r . h_bar
  for (Index k = 0; k < N;) {
    const Index q = q_[cols[k]];
    Index k1 = k;
    while (k1 < N && q_[cols[k1]] == q) ++k1;
    const Index c = k1 - k;
    if (q > 0) {
      HB.resize(q, c);
      XB.resize(q, c);
      DA.resize(q, c);
      for (Index i = 0; i < c; ++i) {
        const Index n = cols[k + i];
        HB.col(i) = e_.col(n).head(q).cwiseProduct(hs_.col(n).head(q));
        XB.col(i) = e_.col(n).head(q).cwiseProduct(X.col(n).head(q));
      }
      for (Index gate = 0; gate < G_; ++gate) {
        for (Index i = 0; i < c; ++i) DA.col(i) = da_.col(cols[k + i]).segment(gate * D, q);
        const bool reset = unit_ == VCUnit::GRU && gate == 2;
        if (reset) {
          RH.resize(q, c);
          for (Index i = 0; i < c; ++i) RH.col(i) = g_.col(cols[k + i]).segment(0, q).cwiseProduct(HB.col(i));
        }
        U_.g.block(gate * D, 0, q, q).noalias() += DA * (reset ? RH : HB).transpose();
        W_.g.block(gate * D, 0, q, q).noalias() += DA * XB.transpose();
        b_.g.col(0).segment(gate * D, q) += DA.rowwise().sum();
      }
    }
    k = k1;
  }
}

template <class S> std::vector<NamedState<S>> VCLayer<S>::records() const {
  const Index N = Index(d_.size());
  Mat<S> d(1, N);
  Mat<S> e(D_, N);  // (D, N) e_t, with the zeros of rows >= q that forward leaves unwritten
  for (Index n = 0; n < N; ++n) {
    d(0, n) = S(d_[n]);
    e.col(n).head(q_[n]) = e_.col(n).head(q_[n]);
    e.col(n).tail(D_ - q_[n]).setZero();
  }
  return {{"m", m_}, {"d", d}, {"e", e}, {"time", time_}};
}

template <class S> std::vector<std::pair<std::string, double>> VCLayer<S>::aux_losses() const {
  if (!trained_) return {};
  return {{"vc_penalty", aux_}};
}

template <class S> std::vector<std::pair<std::string, double>> VCLayer<S>::batch_statistics() const {
  if (!trained_ || !opt_.penalty_on_mean) return {};
  return {{"mean_m", mean_m_}};
}

template <class S> void VCLayer<S>::set_batch_statistics(const std::vector<double>& values) {
  const size_t want = batch_statistics().size();
  MSRNN_CHECK(values.size() == want, "the ", unit_name(), " has ", want,
              " batch statistics now (the mean m_t with penalty_scope 'batch', after a training forward), got ",
              values.size(), " values");
  if (want == 0) return;
  mean_m_ = values[0];
  aux_ = opt_.penalty_weight * penalty_value(mean_m_);
}

template class VCLayer<float>;
template class VCLayer<double>;

namespace {

// The vcrnn and vcgru cores' options (vcrnn.hpp, VCOptions).
CoreSchema vc_schema() {
  return {
      opt::number("sharpness", 1.0, opt::above(0.0), "lambda of the mask (annealed: sharpness_schedule())"),
      opt::number("eps", 0.01, opt::open(0.0, 0.5), "Thres_eps: mask values above 1 - eps become 1, below eps 0"),
      opt::choice("mask_index", "zero", {"zero", "one"},
                  "i = 0..D-1 (m = 1 updates every unit) or i = 1..D (eq. 8 literally)"),
      opt::choice("penalty", "l1", {"l1", "one_sided", "l2"}, "f of the penalty on m_t"),
      opt::choice("penalty_scope", "step", {"step", "batch"},
                  "f on every m_t ('step', the paper's 'at all time') or on the batch's mean m_t ('batch')"),
      opt::number("penalty_weight", 1.0, opt::at_least(0.0), "w of the penalty"),
      opt::number("target", 0.3, opt::closed(0.0, 1.0), "m_bar of the penalty"),
      opt::flag("skip", true, "compute only the leading d_t x d_t blocks (False: masked full path)"),
      opt::count("block", 16, 1, "d_t is rounded up to a multiple of this to group the streams of a step"),
  };
}

template <class S> std::unique_ptr<Core<S>> make_vc(ParamSet<S>& ps, const CoreArgs& a, VCUnit unit) {
  const char* name = unit == VCUnit::GRU ? "VCGRU" : "VCRNN";
  CoreOptions& o = *a.options;
  VCOptions opt;
  opt.sharpness = o.number("sharpness");
  opt.eps = o.number("eps");
  opt.mask_offset = o.choice("mask_index") == "one" ? 1 : 0;
  const std::string pen = o.choice("penalty");
  opt.penalty = pen == "l1" ? VCPenalty::L1 : (pen == "l2" ? VCPenalty::L2 : VCPenalty::OneSided);
  opt.penalty_on_mean = o.choice("penalty_scope") == "batch";
  opt.penalty_weight = o.number("penalty_weight");
  opt.target = o.number("target");
  opt.skip = o.flag("skip");
  opt.block = o.count("block");
  o.finish();
  MSRNN_CHECK(a.hidden_sizes.size() == 1, "the ", name, " has one layer: hidden_sizes must hold one size, got ",
              a.hidden_sizes.size());
  return std::make_unique<VCLayer<S>>(ps, unit, a.input_size, a.hidden_sizes[0], opt);
}

template <class S> std::unique_ptr<Core<S>> make_vcrnn(ParamSet<S>& ps, const CoreArgs& a) {
  return make_vc<S>(ps, a, VCUnit::Elman);
}
template <class S> std::unique_ptr<Core<S>> make_vcgru(ParamSet<S>& ps, const CoreArgs& a) {
  return make_vc<S>(ps, a, VCUnit::GRU);
}

}  // namespace

MSRNN_REGISTER_CORE("vcrnn", make_vcrnn, vc_schema());
MSRNN_REGISTER_CORE("vcgru", make_vcgru, vc_schema());

}  // namespace msrnn
