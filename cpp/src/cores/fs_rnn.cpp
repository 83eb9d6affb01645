#include "msrnn/cores/fs_rnn.hpp"

#include <cmath>
#include <set>

namespace msrnn {

namespace {

template <class S> void check_batch(const Mat<S>& h, Index B, const char* what) {
  MSRNN_CHECK(h.cols() == B, what, " state has batch size ", h.cols(), ", input has ", B);
}

template <class S> void add_state(std::vector<NamedState<S>>& out, const std::string& name, const Mat<S>& m) {
  if (m.rows() > 0) out.push_back({name, m});
}

}  // namespace

// ---- FSRNN ------------------------------------------------------------------------------------

template <class S>
FSRNN<S>::FSRNN(ParamSet<S>& ps, Index E, Index K, const CellSpec& fast, const CellSpec& slow, double dropout, Rng* rng)
    : E_(E), p_(dropout), rng_(rng), fast_name_("_fast"), slow_name_("_slow") {
  MSRNN_CHECK(E > 0, "FS-RNN input size must be positive, got ", E);
  MSRNN_CHECK(K >= 2, "an FS-RNN needs at least 2 fast cells, got ", K);
  MSRNN_CHECK(dropout >= 0.0 && dropout < 1.0, "dropout must be in [0, 1), got ", dropout);
  MSRNN_CHECK(rng != nullptr, "FS-RNN needs a random generator");
  for (Index i = 0; i < K; ++i) {
    CellSpec c = fast;
    c.E = i == 0 ? E : (i == 1 ? slow.H : 0);
    fast_suffix_.push_back(cat("_f", i + 1));
    fast_.push_back(std::make_unique<StepCell<S>>(ps, fast_suffix_.back(), c));
  }
  CellSpec s = slow;
  s.E = fast.H;
  slow_ = std::make_unique<StepCell<S>>(ps, "_s", s);
}

template <class S>
FSRNN<S>::FSRNN(ParamSet<S>& ps, Index E, Index K, const CellSpec& cell, Chain)
    : E_(E), fast_name_(""), slow_name_("") {
  MSRNN_CHECK(E > 0, "sequential RNN input size must be positive, got ", E);
  MSRNN_CHECK(K >= 1, "a sequential RNN needs at least 1 cell, got ", K);
  for (Index i = 0; i < K; ++i) {
    CellSpec c = cell;
    c.E = i == 0 ? E : 0;
    fast_suffix_.push_back(cat("_l", i));
    fast_.push_back(std::make_unique<StepCell<S>>(ps, fast_suffix_.back(), c));
  }
}

template <class S> std::vector<StepCell<S>*> FSRNN<S>::cells() const {
  std::vector<StepCell<S>*> all;
  for (const auto& c : fast_) all.push_back(c.get());
  if (has_slow()) all.push_back(slow_.get());
  return all;
}

template <class S> void FSRNN<S>::bind(ParamSet<S>& ps) {
  for (auto* c : cells()) c->bind(ps);
}

template <class S> void FSRNN<S>::reset_state(Index B) {
  const auto& f = *fast_.front();
  hf_.setZero(f.hidden_size(), B);
  cf_.setZero(f.has_c() ? f.hidden_size() : 0, B);
  if (has_slow()) {
    hs_.setZero(slow_->hidden_size(), B);
    cs_.setZero(slow_->has_c() ? slow_->hidden_size() : 0, B);
  }
}

template <class S> std::vector<NamedState<S>> FSRNN<S>::get_state() const {
  std::vector<NamedState<S>> out;
  add_state(out, "h" + fast_name_, hf_);
  add_state(out, "c" + fast_name_, cf_);
  if (has_slow()) {
    add_state(out, "h" + slow_name_, hs_);
    add_state(out, "c" + slow_name_, cs_);
  }
  return out;
}

template <class S> void FSRNN<S>::set_state(const std::vector<NamedState<S>>& state) {
  const Index B = state.empty() ? 0 : state.front().value.cols();
  const auto& f = *fast_.front();
  hf_ = find_state(state, "h" + fast_name_, f.hidden_size(), B);
  cf_ = f.has_c() ? find_state(state, "c" + fast_name_, f.hidden_size(), B) : Mat<S>(0, B);
  if (has_slow()) {
    hs_ = find_state(state, "h" + slow_name_, slow_->hidden_size(), B);
    cs_ = slow_->has_c() ? find_state(state, "c" + slow_name_, slow_->hidden_size(), B) : Mat<S>(0, B);
  }
}

// Chunks of fewer steps (generation, one step at a time) keep Eigen's products: packing the weights
// would cost more than it saves.
constexpr Index kPackMinSteps = 4;

template <class S> void FSRNN<S>::forward_streams(MRef<S> Y, Index j0, Index nb, Lane& lane, bool packed) {
  const Index T = T_, B = B_, K = static_cast<Index>(fast_.size()), HF = hf_.rows();
  const auto all = cells();
  lane.work.resize(all.size());
  for (size_t i = 0; i < all.size(); ++i) all[i]->start_work(lane.work[i], nb, false);
  auto& w = lane.work;
  auto hf = hf_.middleCols(j0, nb);  // (H_F, nb) this lane's fast state
  auto cf = cf_.middleCols(j0, nb);
  auto hs = has_slow() ? hs_.middleCols(j0, nb) : hs_.middleCols(0, 0);  // (H_S, nb)
  auto cs = has_slow() ? cs_.middleCols(j0, nb) : cs_.middleCols(0, 0);
  const Mat<S> none;
  for (Index t = 0; t < T; ++t) {
    fast_[0]->step(t, j0, nb, hf, cf, none, w[0], packed);
    Index i = 1;
    if (has_slow()) {
      lane.xs = hf;
      if (dropped_) lane.xs.array() *= m1_.middleCols(t * B + j0, nb).array();
      slow_->step(t, j0, nb, hs, cs, lane.xs, w[K], packed);
      lane.xf2 = hs;
      if (dropped_) lane.xf2.array() *= m2_.middleCols(t * B + j0, nb).array();
      fast_[1]->step(t, j0, nb, hf, cf, lane.xf2, w[1], packed);
      i = 2;
    }
    for (; i < K; ++i) fast_[i]->step(t, j0, nb, hf, cf, none, w[i], packed);
    Y.block(0, t * B + j0, HF, nb) = hf;
  }
}

template <class S> void FSRNN<S>::forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool train) {
  check_batch(hf_, B, has_slow() ? "FS-RNN" : "sequential RNN");
  const Index N = T * B;
  T_ = T;
  B_ = B;
  dropped_ = train && has_slow() && p_ > 0.0;
  if (dropped_) {
    m1_.resize(hf_.rows(), N);
    m2_.resize(hs_.rows(), N);
    dropout_mask<S>(m1_, p_, *rng_);
    dropout_mask<S>(m2_, p_, *rng_);
  }
  Rng unused(0);
  for (auto* c : cells()) c->begin(T, B, train, rng_ ? *rng_ : unused);
  fast_[0]->project_inputs(X);
  const bool fast = !reference_kernels(), packed = fast && T >= kPackMinSteps;
  if (packed)
    for (auto* c : cells()) c->pack_forward();
  const int nt = stream_threads(B, packed);
  if (int(lanes_.size()) < nt) lanes_.resize(nt);
  over_streams(B, nt, 1, [&](Index j0, Index nb, int k) { forward_streams(Y, j0, nb, lanes_[k], packed); });
}

template <class S>
void FSRNN<S>::backward_streams(CRef<S> dY, Index j0, Index nb, Lane& lane, bool own_grads, bool packed) {
  const Index T = T_, B = B_, K = static_cast<Index>(fast_.size()), HF = hf_.rows();
  const auto all = cells();
  lane.work.resize(all.size());
  for (size_t i = 0; i < all.size(); ++i) all[i]->start_work(lane.work[i], nb, own_grads);
  auto& w = lane.work;
  lane.dhf.setZero(HF, nb);
  lane.dcf.setZero(cf_.rows(), nb);
  if (has_slow()) {
    lane.dhs.setZero(hs_.rows(), nb);
    lane.dcs.setZero(cs_.rows(), nb);
    lane.dxs.resize(HF, nb);
    lane.dxf2.resize(hs_.rows(), nb);
  }
  Mat<S> none;
  const Index first_plain = has_slow() ? 2 : 1;  // fast cells without a slow input
  for (Index t = T - 1; t >= 0; --t) {
    lane.dhf += dY.block(0, t * B + j0, HF, nb);
    for (Index i = K - 1; i >= first_plain; --i)
      fast_[i]->backward_step(t, j0, nb, lane.dhf, lane.dcf, none, w[i], packed);
    if (has_slow()) {
      fast_[1]->backward_step(t, j0, nb, lane.dhf, lane.dcf, lane.dxf2, w[1], packed);
      if (dropped_) lane.dxf2.array() *= m2_.middleCols(t * B + j0, nb).array();
      lane.dhs += lane.dxf2;
      slow_->backward_step(t, j0, nb, lane.dhs, lane.dcs, lane.dxs, w[K], packed);
      if (dropped_) lane.dxs.array() *= m1_.middleCols(t * B + j0, nb).array();
      lane.dhf += lane.dxs;
    }
    fast_[0]->backward_step(t, j0, nb, lane.dhf, lane.dcf, none, w[0], packed);
  }
}

template <class S> void FSRNN<S>::backward(MRef<S> dX, CRef<S> dY, CRef<S> X) {
  const Index T = T_, B = B_, N = T * B;
  const Index HF = hf_.rows();
  MSRNN_CHECK(dY.rows() == HF && dY.cols() == N, "FS-RNN backward: dY has shape (", dY.rows(), ", ", dY.cols(),
              "), expected (", HF, ", ", N, ")");
  const auto all = cells();
  for (auto* c : all) c->begin_backward();
  const bool fast = !reference_kernels(), packed = fast && T >= kPackMinSteps;
  if (packed)
    for (auto* c : all) c->pack_backward();
  const int nt = stream_threads(B, fast);
  if (int(lanes_.size()) < nt) lanes_.resize(nt);
  const bool own_grads = nt > 1;  // layer-norm parameter gradients summed over lanes below
  const auto ran = over_streams(B, nt, 1, [&](Index j0, Index nb, int k) {
    backward_streams(dY, j0, nb, lanes_[k], own_grads, packed);
  });
  if (own_grads)
    in_thread_order(ran, [&](int k) {
      for (size_t i = 0; i < all.size(); ++i) all[i]->add_grads(lanes_[k].work[i]);
    });
  Mat<S> none;
  fast_[0]->finish_backward(dX, X);
  const Mat<S> noX;
  for (auto* c : all)
    if (c != fast_[0].get()) c->finish_backward(none, noX);
}

template <class S> std::vector<NamedState<S>> FSRNN<S>::records() const {
  std::vector<NamedState<S>> out;
  auto add = [&](const StepCell<S>& c, const std::string& suffix) {
    add_state(out, "h" + suffix, c.h_out());
    add_state(out, "c" + suffix, c.c_out());
  };
  for (size_t i = 0; i < fast_.size(); ++i) add(*fast_[i], fast_suffix_[i]);
  if (has_slow()) add(*slow_, "_s");
  return out;
}

template <class S> std::vector<NamedState<S>> FSRNN<S>::record_grads() const {
  std::vector<NamedState<S>> out;
  auto add = [&](const StepCell<S>& c, const std::string& suffix) {
    MSRNN_CHECK(c.dh_out().cols() == c.h_out().cols(), "record gradients need a backward after the last forward");
    add_state(out, "h" + suffix, c.dh_out());
    add_state(out, "c" + suffix, c.dc_out());
  };
  for (size_t i = 0; i < fast_.size(); ++i) add(*fast_[i], fast_suffix_[i]);
  if (has_slow()) add(*slow_, "_s");
  return out;
}

// ---- StackedRNN -------------------------------------------------------------------------------

template <class S>
StackedRNN<S>::StackedRNN(ParamSet<S>& ps, Index E, const std::vector<Index>& hidden, const CellSpec& cell,
                          double dropout, Rng* rng)
    : E_(E), p_(dropout), rng_(rng) {
  MSRNN_CHECK(!hidden.empty(), "a stacked RNN needs at least one layer");
  MSRNN_CHECK(dropout >= 0.0 && dropout < 1.0, "dropout must be in [0, 1), got ", dropout);
  MSRNN_CHECK(rng != nullptr, "stacked RNN needs a random generator");
  Index in = E;
  for (size_t l = 0; l < hidden.size(); ++l) {
    CellSpec c = cell;
    c.E = in;
    c.H = hidden[l];
    cells_.push_back(std::make_unique<StepCell<S>>(ps, cat("_l", l), c));
    in = hidden[l];
  }
  const size_t L = cells_.size();
  h_.resize(L);
  c_.resize(L);
  in_.resize(L);
  mask_.resize(L);
  grad_.resize(L);
}

template <class S> void StackedRNN<S>::bind(ParamSet<S>& ps) {
  for (auto& c : cells_) c->bind(ps);
}

template <class S> void StackedRNN<S>::reset_state(Index B) {
  for (size_t l = 0; l < cells_.size(); ++l) {
    h_[l].setZero(cells_[l]->hidden_size(), B);
    c_[l].setZero(cells_[l]->has_c() ? cells_[l]->hidden_size() : 0, B);
  }
}

template <class S> std::vector<NamedState<S>> StackedRNN<S>::get_state() const {
  std::vector<NamedState<S>> out;
  for (size_t l = 0; l < cells_.size(); ++l) {
    add_state(out, cat("h_l", l), h_[l]);
    add_state(out, cat("c_l", l), c_[l]);
  }
  return out;
}

template <class S> void StackedRNN<S>::set_state(const std::vector<NamedState<S>>& state) {
  const Index B = state.empty() ? 0 : state.front().value.cols();
  for (size_t l = 0; l < cells_.size(); ++l) {
    const Index H = cells_[l]->hidden_size();
    h_[l] = find_state(state, cat("h_l", l), H, B);
    c_[l] = cells_[l]->has_c() ? find_state(state, cat("c_l", l), H, B) : Mat<S>(0, B);
  }
}

template <class S> void StackedRNN<S>::forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool train) {
  check_batch(h_[0], B, "stacked RNN");
  const Index N = T * B;
  T_ = T;
  B_ = B;
  dropped_ = train && p_ > 0.0;
  const Mat<S> none;
  for (size_t l = 0; l < cells_.size(); ++l) {
    auto& cell = *cells_[l];
    if (l > 0 && dropped_) {
      mask_[l].resize(cells_[l - 1]->hidden_size(), N);
      dropout_mask<S>(mask_[l], p_, *rng_);
      in_[l] = cells_[l - 1]->h_out().cwiseProduct(mask_[l]);
    }
    cell.begin(T, B, train, *rng_);
    if (l == 0)
      cell.project_inputs(X);
    else
      cell.project_inputs(dropped_ ? in_[l] : cells_[l - 1]->h_out());
    // This layer's time loop with threads over streams (as in FSRNN::forward).
    const bool fast = !reference_kernels(), packed = fast && T >= kPackMinSteps;
    if (packed) cell.pack_forward();
    const int nt = stream_threads(B, fast);
    if (int(work_.size()) < nt) work_.resize(nt);
    auto& h = h_[l];
    auto& c = c_[l];
    over_streams(B, nt, 1, [&](Index j0, Index nb, int k) {
      cell.start_work(work_[k], nb, false);
      auto hb = h.middleCols(j0, nb);  // (H, nb)
      auto cb = c.middleCols(j0, nb);  // (H, nb), or (0, nb) for a cell without c (GRU, Elman)
      for (Index t = 0; t < T; ++t) cell.step(t, j0, nb, hb, cb, none, work_[k], packed);
    });
  }
  Y = cells_.back()->h_out();
}

template <class S> void StackedRNN<S>::backward(MRef<S> dX, CRef<S> dY, CRef<S> X) {
  const Index T = T_, B = B_, L = static_cast<Index>(cells_.size());
  Mat<S> none;
  for (Index l = L - 1; l >= 0; --l) {
    auto& cell = *cells_[l];
    const CRefV<S> dy = (l == L - 1) ? CRefV<S>(dY) : CRefV<S>(grad_[l]);
    MSRNN_CHECK(dy.rows() == cell.hidden_size() && dy.cols() == T * B, "stacked RNN backward: dY has shape (",
                dy.rows(), ", ", dy.cols(), "), expected (", cell.hidden_size(), ", ", T * B, ")");
    // This layer's backward time loop with threads over streams (as in FSRNN::backward).
    cell.begin_backward();
    const bool fast = !reference_kernels(), packed = fast && T >= kPackMinSteps;
    if (packed) cell.pack_backward();
    const int nt = stream_threads(B, fast);
    if (int(work_.size()) < nt) work_.resize(nt);
    const bool own_grads = nt > 1;  // layer-norm parameter gradients summed over threads below
    const Index H = cell.hidden_size(), Hc = cell.has_c() ? H : 0;
    const auto ran = over_streams(B, nt, 1, [&](Index j0, Index nb, int k) {
      cell.start_work(work_[k], nb, own_grads);
      Mat<S> dh = Mat<S>::Zero(H, nb);   // (H, nb) gradient reaching the state after step t
      Mat<S> dc = Mat<S>::Zero(Hc, nb);  // (H or 0, nb)
      for (Index t = T - 1; t >= 0; --t) {
        dh += dy.block(0, t * B + j0, H, nb);
        cell.backward_step(t, j0, nb, dh, dc, none, work_[k], packed);
      }
    });
    if (own_grads) in_thread_order(ran, [&](int k) { cell.add_grads(work_[k]); });
    if (l == 0) {
      cell.finish_backward(dX, X);
    } else {
      grad_[l - 1].resize(cells_[l - 1]->hidden_size(), T * B);
      cell.finish_backward(grad_[l - 1], dropped_ ? in_[l] : cells_[l - 1]->h_out());
      if (dropped_) grad_[l - 1].array() *= mask_[l].array();
    }
  }
}

template <class S> std::vector<NamedState<S>> StackedRNN<S>::records() const {
  std::vector<NamedState<S>> out;
  for (size_t l = 0; l < cells_.size(); ++l) {
    add_state(out, cat("h_l", l), cells_[l]->h_out());
    add_state(out, cat("c_l", l), cells_[l]->c_out());
  }
  return out;
}

template <class S> std::vector<NamedState<S>> StackedRNN<S>::record_grads() const {
  std::vector<NamedState<S>> out;
  for (size_t l = 0; l < cells_.size(); ++l) {
    const auto& c = *cells_[l];
    MSRNN_CHECK(c.dh_out().cols() == c.h_out().cols(), "record gradients need a backward after the last forward");
    add_state(out, cat("h_l", l), c.dh_out());
    add_state(out, cat("c_l", l), c.dc_out());
  }
  return out;
}

// ---- construction from the core's options ------------------------------------------------------

namespace {

// The options every cell of these cores shares, in each core's table after its own.
void add_cell_options(CoreSchema& s, bool ln_gates_default) {
  s.push_back(opt::flag("layer_norm_gates", ln_gates_default, "layer norm on each gate block's pre-activation"));
  s.push_back(opt::flag("layer_norm_cell", true, "layer norm on the cell state inside tanh (LSTM cells)"));
  s.push_back(opt::number("zoneout_c", 0.0, {0.0, 1.0, false, true},
                          "zoneout probability of keeping the previous cell state (LSTM cells)"));
  s.push_back(opt::number("zoneout_h", 0.0, {0.0, 1.0, false, true}, "zoneout probability of keeping the previous h"));
  s.push_back(opt::number("layer_norm_eps", 1e-5, opt::open(0.0, 1.0),
                          "epsilon of every layer norm (the authors' code: 1e-3)"));
  s.push_back(
      opt::flag("bias_before_norm", false, "a trainable bias before each gate's layer norm (the authors' code: True)"));
}

CoreSchema fs_rnn_schema() {
  CoreSchema s = {
      opt::count("fast_cells", 2, 2, "K, the number of fast cells"),
      opt::choice("fast_cell", "lstm", {"lstm", "gru"}, "the fast cells' type"),
      opt::choice("slow_cell", "lstm", {"lstm", "gru"}, "the slow cell's type (default: the fast cells')"),
  };
  add_cell_options(s, /*ln_gates_default=*/true);
  return s;
}

// sequential_lstm and stacked_lstm
CoreSchema chain_schema() {
  CoreSchema s = {opt::choice("cell", "lstm", {"lstm", "gru"}, "the cells' type")};
  add_cell_options(s, /*ln_gates_default=*/false);
  return s;
}

// The options every cell of these cores shares. layer_norm_cell and zoneout_c act on LSTM cells
// (a GRU has no cell state); giving them to a model without LSTM cells is an error.
struct SharedCellOptions {
  bool ln_gates, ln_cell, bias_before_norm;
  double zoneout_c, zoneout_h, ln_eps;
};

SharedCellOptions read_cell_options(CoreOptions& o, bool any_lstm) {
  SharedCellOptions r;
  r.ln_gates = o.flag("layer_norm_gates");
  const bool cell_given = o.given("layer_norm_cell");
  r.ln_cell = o.flag("layer_norm_cell");
  r.zoneout_c = o.number("zoneout_c");
  r.zoneout_h = o.number("zoneout_h");
  r.ln_eps = o.number("layer_norm_eps");
  r.bias_before_norm = o.flag("bias_before_norm");
  MSRNN_CHECK(!r.bias_before_norm || r.ln_gates,
              "option 'bias_before_norm' adds a bias before the gate layer norm; this ", o.core(),
              " has none (layer_norm_gates = 0)");
  MSRNN_CHECK(any_lstm || !(cell_given && r.ln_cell), "option 'layer_norm_cell' acts on LSTM cell states; this ",
              o.core(), " has GRU cells only");
  MSRNN_CHECK(any_lstm || r.zoneout_c == 0.0, "option 'zoneout_c' acts on LSTM cell states; this ", o.core(),
              " has GRU cells only");
  return r;
}

CellSpec cell_spec(const SharedCellOptions& r, CellType type, Index H) {
  CellSpec s;
  s.type = type;
  s.H = H;
  const bool lstm = type == CellType::LSTM;
  s.ln_gates = r.ln_gates;
  s.ln_cell = r.ln_cell && lstm;
  s.zoneout_c = lstm ? r.zoneout_c : 0.0;
  s.zoneout_h = r.zoneout_h;
  s.bias_before_norm = r.bias_before_norm;
  s.ln_eps = r.ln_eps;
  return s;
}

//   fs_rnn:  hidden_sizes (H_F, H_S); fast_cells K (2); fast_cell, slow_cell "lstm" | "gru"
//            ("lstm", slow_cell defaults to fast_cell); layer_norm_gates (1); layer_norm_cell (1);
//            zoneout_c (0); zoneout_h (0); layer_norm_eps (1e-5); bias_before_norm (0); the model's
//            dropout inside the step too.
template <class S> std::unique_ptr<Core<S>> make_fs_rnn(ParamSet<S>& ps, const CoreArgs& a) {
  CoreOptions& o = *a.options;
  const auto& H = a.hidden_sizes;
  MSRNN_CHECK(H.size() == 2, "fs_rnn takes hidden_sizes = (fast size, slow size), got ", H.size(), " sizes");
  const Index K = o.count("fast_cells");
  const std::string fast_name = o.choice("fast_cell");
  const CellType ft = cell_type_from_name(fast_name);
  const CellType st = cell_type_from_name(o.choice("slow_cell", fast_name));
  const SharedCellOptions r = read_cell_options(o, ft == CellType::LSTM || st == CellType::LSTM);
  o.finish();
  return std::make_unique<FSRNN<S>>(ps, a.input_size, K, cell_spec(r, ft, H[0]), cell_spec(r, st, H[1]), a.dropout,
                                    a.rng);
}

//   sequential_lstm, stacked_lstm: hidden_sizes one per cell; cell "lstm" | "gru" ("lstm");
//            layer_norm_gates (0); layer_norm_cell (1); zoneout_c (0); zoneout_h (0);
//            layer_norm_eps (1e-5); bias_before_norm (0).
template <class S> std::unique_ptr<Core<S>> make_sequential_lstm(ParamSet<S>& ps, const CoreArgs& a) {
  CoreOptions& o = *a.options;
  const auto& H = a.hidden_sizes;
  const CellType type = cell_type_from_name(o.choice("cell"));
  const SharedCellOptions r = read_cell_options(o, type == CellType::LSTM);
  o.finish();
  for (Index h : H)
    MSRNN_CHECK(h == H.front(), "the cells of a sequential RNN share one state, so hidden sizes must be equal, got ",
                H.front(), " and ", h);
  return std::make_unique<SequentialRNN<S>>(ps, a.input_size, static_cast<Index>(H.size()),
                                            cell_spec(r, type, H.front()));
}

template <class S> std::unique_ptr<Core<S>> make_stacked_lstm(ParamSet<S>& ps, const CoreArgs& a) {
  CoreOptions& o = *a.options;
  const CellType type = cell_type_from_name(o.choice("cell"));
  const SharedCellOptions r = read_cell_options(o, type == CellType::LSTM);
  o.finish();
  return std::make_unique<StackedRNN<S>>(ps, a.input_size, a.hidden_sizes, cell_spec(r, type, a.hidden_sizes.front()),
                                         a.dropout, a.rng);
}

}  // namespace

MSRNN_REGISTER_CORE("fs_rnn", make_fs_rnn, fs_rnn_schema());
MSRNN_REGISTER_CORE("sequential_lstm", make_sequential_lstm, chain_schema());
MSRNN_REGISTER_CORE("stacked_lstm", make_stacked_lstm, chain_schema());

template class FSRNN<float>;
template class FSRNN<double>;
template class SequentialRNN<float>;
template class SequentialRNN<double>;
template class StackedRNN<float>;
template class StackedRNN<double>;

}  // namespace msrnn
