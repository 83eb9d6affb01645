// HM-LSTM (hm_lstm.hpp): options, construction, state, records and step scratch; the pointwise kernels,
// the forward and the backward time loops are in hm_lstm_pointwise.cpp, hm_lstm_forward.cpp and
// hm_lstm_backward.cpp.
#include "msrnn/cores/hm_lstm.hpp"

#include <cmath>
#include <limits>

namespace msrnn {

namespace {
// A gradient reading (option `name`, "blend" or "blend_l{l}"): 0 "switch" or 1 "blend"; soft boundaries need blend.
bool check_blend(const std::string& name, double value, HMBoundary boundary) {
  MSRNN_CHECK(value == 0.0 || value == 1.0, "HM-LSTM option '", name,
              "' must be 0 (gradient 'switch') or 1 ('blend'), got ", value);
  MSRNN_CHECK(value == 1.0 || boundary != HMBoundary::Soft,
              "HM-LSTM gradient 'switch' needs binary boundaries; with "
              "boundary 'soft' the cases of eq. 2 are blends, so ",
              name, " must be 1 ('blend')");
  return value != 0.0;
}

// The layer l of a per-layer option name prefix + "l" (e.g. "rate_target_l1" with prefix "rate_target_l"),
// or -1 when `name` is not one of them for a model of L layers.
long layer_of(const std::string& name, const std::string& prefix, size_t L) {
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size() || name.size() > prefix.size() + 6 ||
      name.find_first_not_of("0123456789", prefix.size()) != std::string::npos)
    return -1;
  const unsigned long l = std::stoul(name.substr(prefix.size()));
  return l < L ? long(l) : -1;
}
}  // namespace

// The hm_lstm core's options (hm_lstm.hpp, HMLSTMOptions). The defaults are the word recipe
// (docs/models/hm_lstm.md); the Python family derives its depth's recipe from them.
CoreSchema hm_lstm_schema() {
  return {
      opt::choice("boundary", "step", {"step", "sample", "soft"},
                  "z from zhat: 'step' (eq. 9), 'sample' (Bernoulli) or 'soft' (z = zhat)"),
      opt::choice("copy_z", "carry", {"carry", "recompute"}, "z on COPY: 'carry' (the paper's) or 'recompute'"),
      opt::choice("gradient", "blend", {"switch", "blend"}, "every boundary's reading (blend_l{l} per layer)"),
      opt::per_layer(opt::flag("blend", true, "layer l's boundary read as a blend (1) or a switch (0)"), 1.0),
      opt::per_layer(opt::flag("detector_below", false, "layer l's boundary row reads only the layer below"), 0.0),
      opt::flag("top_boundary", false, "a boundary detector in the top layer too (it can FLUSH)"),
      opt::flag("flush_cut", true, "the recurrent term cut on FLUSH (the hard reset of the slides)"),
      opt::flag("top_down", true, "the top-down term of eq. 5 (False: none, and no weight_td)"),
      opt::flag("layer_norm", false, "layer normalisation of each gate block of s^l_t"),
      opt::flag("skip", true, "no matrix work on COPY columns (False: the plain masked path)"),
      opt::number("slope", 1.0, opt::above(0.0), "a of the hard sigmoid (annealed through set_option)"),
      opt::number("ln_eps", 1e-5, opt::above(0.0), "epsilon of the layer norms"),
      opt::number("rate_penalty", 0.0, opt::at_least(0.0), "lambda of the boundary-rate term lambda * zbar"),
      opt::number("rate_weight", 5.0, opt::at_least(0.0),
                  "mu of the rate-target term mu * e_l^2 (e_l: zbar^l - r_l beyond the slack)"),
      opt::per_layer(opt::number("rate_slack_below", 0.0, opt::at_least(0.0),
                                 "s_-^l: zbar^l down to r_l - s_-^l costs nothing (1: r_l is a ceiling)"),
                     0.0),
      opt::per_layer(opt::number("rate_slack_above", 0.0, opt::at_least(0.0),
                                 "s_+^l: zbar^l up to r_l + s_+^l costs nothing (1: r_l is a floor)"),
                     0.0),
      opt::per_layer(opt::number("rate_target", 0.18, opt::closed(0.0, 1.0),
                                 "r_l, layer l's boundary rate aimed at (negative: none)"),
                     -1.0, /*negative_is_none=*/true),
  };
}

HMLSTMOptions hm_lstm_options(CoreOptions& opts, Index L) {
  HMLSTMOptions o;
  const std::string boundary = opts.choice("boundary");
  o.boundary = boundary == "step" ? HMBoundary::Step : boundary == "sample" ? HMBoundary::Sample : HMBoundary::Soft;
  o.copy_recompute = opts.choice("copy_z") == "recompute";
  const bool blend = opts.choice("gradient") == "blend";
  o.blend.assign(size_t(L), blend);
  o.detector_below.assign(size_t(L), 0);
  for (Index l = 0; l < L; ++l) {
    // a reading given for layer l, else the one of `gradient`
    const bool b = opts.given(cat("blend_l", l)) ? opts.flag("blend", l) : blend;
    o.blend[size_t(l)] = check_blend(cat("blend_l", l), b ? 1.0 : 0.0, o.boundary);
    o.detector_below[size_t(l)] = opts.flag("detector_below", l);
  }
  o.top_boundary = opts.flag("top_boundary");
  o.flush_cut = opts.flag("flush_cut");
  o.top_down = opts.flag("top_down");
  o.layer_norm = opts.flag("layer_norm");
  o.skip = opts.flag("skip");
  o.slope = opts.number("slope");
  o.ln_eps = opts.number("ln_eps");
  o.rate_penalty = opts.number("rate_penalty");
  o.rate_weight = opts.number("rate_weight");
  o.rate_target.assign(size_t(L), -1.0);
  o.rate_slack_below.assign(size_t(L), 0.0);
  o.rate_slack_above.assign(size_t(L), 0.0);
  for (Index l = 0; l < L; ++l) {
    o.rate_target[size_t(l)] = opts.number("rate_target", l);
    o.rate_slack_below[size_t(l)] = opts.number("rate_slack_below", l);
    o.rate_slack_above[size_t(l)] = opts.number("rate_slack_above", l);
  }
  opts.finish();
  return o;
}

namespace {
template <class S> std::unique_ptr<Core<S>> make_hm_lstm(ParamSet<S>& ps, const CoreArgs& a) {
  return std::make_unique<HMLSTM<S>>(ps, a.input_size, a.hidden_sizes,
                                     hm_lstm_options(*a.options, Index(a.hidden_sizes.size())), a.rng);
}
}  // namespace
MSRNN_REGISTER_CORE("hm_lstm", make_hm_lstm, hm_lstm_schema());
template <class S>
HMLSTM<S>::HMLSTM(ParamSet<S>& ps, Index E, const std::vector<Index>& hidden, const HMLSTMOptions& opt, Rng* rng)
    : E_(E), out_size_(0), H_(hidden), opt_(opt), rng_(rng) {
  MSRNN_CHECK(E > 0, "HM-LSTM input size must be positive, got ", E);
  MSRNN_CHECK(!hidden.empty(), "HM-LSTM needs at least one layer");
  const size_t L = hidden.size();
  opt_.rate_target.resize(L, -1.0);
  opt_.rate_slack_below.resize(L, 0.0);
  opt_.rate_slack_above.resize(L, 0.0);
  opt_.blend.resize(L, 1);
  opt_.detector_below.resize(L, 0);
  zbar_.assign(L, 0.0);
  layers_.resize(L);
  for (size_t l = 0; l < L; ++l) {
    auto& layer = layers_[l];
    MSRNN_CHECK(hidden[l] > 0, "HM-LSTM layer ", l, " size must be positive, got ", hidden[l]);
    layer.H = hidden[l];
    layer.Hb = l == 0 ? E : hidden[l - 1];
    layer.Ht = l + 1 < L && opt.top_down ? hidden[l + 1] : 0;  // (0: no top-down term)
    layer.detector = l + 1 < L || opt.top_boundary;
    layer.G = 4 * layer.H + (layer.detector ? 1 : 0);
    layer.K = layer.Hb + layer.H + layer.Ht;
    const std::string sfx = cat("_l", l);
    layer.W.id = ps.add("weight_ih" + sfx, layer.G, layer.Hb, {"input", layer.H, sfx});
    layer.U.id = ps.add("weight_hh" + sfx, layer.G, layer.H, {"recurrent", layer.H, sfx});
    if (layer.Ht > 0) layer.Utd.id = ps.add("weight_td" + sfx, layer.G, layer.Ht, {"recurrent", layer.H, sfx});
    layer.b.id = ps.add("bias" + sfx, layer.G, 1, {"bias", layer.H, sfx});
    if (opt.layer_norm) {
      layer.ln_g.id = ps.add("ln_weight" + sfx, 4 * layer.H, 1, {"gain", layer.H, sfx});
      layer.ln_b.id = ps.add("ln_bias" + sfx, 4 * layer.H, 1, {"shift", layer.H, sfx});
    }
    out_size_ += layer.H;
  }
}

template <class S> void HMLSTM<S>::bind(ParamSet<S>& ps) {
  for (auto& layer : layers_) {
    layer.W.bind(ps);
    layer.U.bind(ps);
    layer.b.bind(ps);
    if (layer.Ht > 0) layer.Utd.bind(ps);
    if (opt_.layer_norm) {
      layer.ln_g.bind(ps);
      layer.ln_b.bind(ps);
    }
  }
}

template <class S> void HMLSTM<S>::reset_state(Index B) {
  for (auto& layer : layers_) {
    layer.h.setZero(layer.H, B);
    layer.c.setZero(layer.H, B);
    layer.z.setZero(1, B);
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
    auto& layer = layers_[l];
    const Mat<S>& z = find_state(state, cat("z_l", l), 1, B);
    for (Index b = 0; b < B; ++b) {
      const S v = z(0, b);
      if (opt_.boundary == HMBoundary::Soft)
        MSRNN_CHECK(v >= S(0) && v <= S(1), "state 'z_l", l, "' must lie in [0, 1], got ", v, " in stream ", b);
      else
        MSRNN_CHECK(v == S(0) || v == S(1), "state 'z_l", l, "' must be 0 or 1 with binary boundaries, got ", v,
                    " in stream ", b);
      MSRNN_CHECK(layer.detector || v == S(0), "state 'z_l", l, "' must be 0: the top layer has no boundary detector");
    }
    find_state(state, cat("h_l", l), layer.H, B);
    find_state(state, cat("c_l", l), layer.H, B);
  }
  for (size_t l = 0; l < layers_.size(); ++l) {
    auto& layer = layers_[l];
    layer.h = find_state(state, cat("h_l", l), layer.H, B);
    layer.c = find_state(state, cat("c_l", l), layer.H, B);
    layer.z = find_state(state, cat("z_l", l), 1, B);
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
  } else if (name == "blend") {
    std::fill(opt_.blend.begin(), opt_.blend.end(), char(check_blend(name, value, opt_.boundary)));
  } else if (const long l = layer_of(name, "blend_l", layers_.size()); l >= 0) {
    opt_.blend[size_t(l)] = check_blend(name, value, opt_.boundary);
  } else if (name == "rate_penalty") {
    MSRNN_CHECK(value >= 0.0 && std::isfinite(value), "HM-LSTM rate_penalty must be >= 0 and finite, got ", value);
    opt_.rate_penalty = value;
  } else if (name == "rate_weight") {
    MSRNN_CHECK(value >= 0.0 && std::isfinite(value), "HM-LSTM rate_weight must be >= 0 and finite, got ", value);
    opt_.rate_weight = value;
  } else if (const long l = layer_of(name, "rate_target_l", layers_.size()); l >= 0) {
    MSRNN_CHECK(std::isfinite(value) && value <= 1.0, "HM-LSTM ", name,
                " must lie in [0, 1] (or be negative: no target), got ", value);
    opt_.rate_target[size_t(l)] = value;
  } else {
    throw std::invalid_argument(
        cat("the HM-LSTM cannot change option '", name,
            "' after construction; changeable options are 'slope', 'skip', 'blend', 'blend_l0' .. 'blend_l",
            layers_.size() - 1,
            "', "
            "'rate_penalty', 'rate_weight' and 'rate_target_l0' .. 'rate_target_l",
            layers_.size() - 1, "'"));
  }
}

template <class S> std::vector<std::pair<std::string, double>> HMLSTM<S>::aux_losses() const {
  std::vector<std::pair<std::string, double>> out;
  if (opt_.rate_penalty != 0.0) out.push_back({"boundary_rate", aux_});
  if (has_rate_target()) out.push_back({"boundary_target", aux_target_});
  return out;
}

template <class S> bool HMLSTM<S>::has_rate_target() const {
  for (size_t l = 0; l < layers_.size(); ++l)
    if (has_target(l)) return true;
  return false;
}

template <class S> bool HMLSTM<S>::has_target(size_t l) const {
  return layers_[l].detector && opt_.rate_weight != 0.0 && opt_.rate_target[l] >= 0.0;
}

template <class S> double HMLSTM<S>::target_excess(size_t l) const {
  const double d = zbar_[l] - opt_.rate_target[l];
  const double above = opt_.rate_slack_above[l], below = opt_.rate_slack_below[l];
  return d > above ? d - above : d < -below ? d + below : 0.0;
}

template <class S> double HMLSTM<S>::target_term() const {
  double R = 0.0;
  for (size_t l = 0; l < layers_.size(); ++l)
    if (has_target(l)) {
      const double e = target_excess(l);
      R += opt_.rate_weight * e * e;
    }
  return R;
}

template <class S> std::vector<std::pair<std::string, double>> HMLSTM<S>::batch_statistics() const {
  std::vector<std::pair<std::string, double>> out;
  if (!train_) return out;
  for (size_t l = 0; l < layers_.size(); ++l)
    if (has_target(l)) out.push_back({cat("zbar_l", l), zbar_[l]});
  return out;
}

template <class S> void HMLSTM<S>::set_batch_statistics(const std::vector<double>& values) {
  const auto stats = batch_statistics();
  MSRNN_CHECK(values.size() == stats.size(), "the HM-LSTM has ", stats.size(),
              " batch statistics now (zbar of each layer with a rate target, after a training forward), got ",
              values.size(), " values");
  size_t k = 0;
  for (size_t l = 0; l < layers_.size(); ++l)
    if (has_target(l)) zbar_[l] = values[k++];
  aux_target_ = target_term();
}

template <class S> double HMLSTM<S>::rate_gradient(size_t l) const {
  const auto& layer = layers_[l];
  if (!layer.detector) return 0.0;
  double g = opt_.rate_penalty;
  if (has_target(l)) g += 2.0 * opt_.rate_weight * target_excess(l);  // zbar_: this chunk's, or the batch's
  return g / counted_;                                                // over this chunk's T B columns (without padding)
}

template <class S> bool HMLSTM<S>::skipping(bool train) const {
  const bool any_blend = std::find(opt_.blend.begin(), opt_.blend.end(), char(1)) != opt_.blend.end();
  return opt_.skip && opt_.boundary != HMBoundary::Soft && (!train || !any_blend);
}

// Rows of every scratch buffer are padded to 16 elements, so that every column starts at the same
// alignment: Eigen's vectorised nonlinearities then treat a column alike wherever it sits in the buffer,
// and a stream's results do not depend on which other columns share its step (thread count, skipping).
template <class S>
void HMLSTM<S>::Scratch::reserve(const std::vector<Layer>& layers, Index nb, Index B, bool layer_norm, bool backward) {
  auto pad = [](Index n) { return (n + 15) / 16 * 16; };
  Index K = 0, G = 0, H = 0;
  for (const auto& layer : layers) {
    K = std::max(K, pad(layer.K));
    G = std::max(G, pad(layer.G));
    H = std::max(H, pad(layer.H));
  }
  idx.reserve(B);
  cidx.reserve(B);
  x_k.resize(K, nb);
  act_k.resize(G, nb);
  for (auto* m : {&c_k, &tanh_c_k, &h_k, &c_prev_k, &h_prev_k}) m->resize(H, nb);
  for (auto* m : {&z_prev_k, &z_below_k}) m->resize(1, nb);
  if (layer_norm) {
    xhat_k.resize(4 * H, nb);
    rstd_k.resize(1, 4 * nb);
  }
  if (!backward) return;
  for (auto* m : {&dh_k, &dc_k, &dc_prev_k, &dh_prev_k, &tanh_c_saved_k, &c_saved_k}) m->resize(H, nb);
  for (auto* m : {&dwU_k, &dwC_k}) m->resize(1, nb);
  dz_new.resize(1, B);
  dwCz.assign(B, S(0));
  da_k.resize(G, nb);
  act_saved_k.resize(G, nb);
  dx_k.resize(K, nb);
  dln_g.resize(layers.size());
  dln_b.resize(layers.size());
  if (layer_norm)
    for (size_t l = 0; l < layers.size(); ++l) {
      dln_g[l].setZero(4 * layers[l].H, 1);
      dln_b[l].setZero(4 * layers[l].H, 1);
    }
}

template <class S>
void HMLSTM<S>::gather_previous(Scratch& s, CRef<S> cp, CRef<S> hp, const S* zp, const S* zb) const {
  const Index k = static_cast<Index>(s.idx.size()), H = cp.rows();
  gather_columns<S>(s.c_prev_k.topLeftCorner(H, k), cp, s.idx);
  gather_columns<S>(s.h_prev_k.topLeftCorner(H, k), hp, s.idx);
  for (Index j = 0; j < k; ++j) {
    s.z_prev_k(0, j) = zp[s.idx[j]];
    s.z_below_k(0, j) = zb[s.idx[j]];
  }
}

template <class S> std::vector<NamedState<S>> HMLSTM<S>::records() const {
  std::vector<NamedState<S>> out;
  const Index N = T_ * B_;
  if (N == 0) return out;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const auto& layer = layers_[l];
    Mat<S> op(1, N), zhat(1, N);
    for (Index n = 0; n < N; ++n) op(0, n) = S(layer.op[n]);
    if (layer.detector)
      zhat = layer.zhat;
    else
      zhat.setZero();
    out.push_back({cat("z_l", l), layer.zs.rightCols(N)});
    out.push_back({cat("zhat_l", l), zhat});
    out.push_back({cat("znew_l", l), layer.znew});
    out.push_back({cat("op_l", l), op});
    out.push_back({cat("hnorm_l", l), layer.hs.rightCols(N).colwise().norm()});
  }
  return out;
}

template class HMLSTM<float>;
template class HMLSTM<double>;

}  // namespace msrnn
