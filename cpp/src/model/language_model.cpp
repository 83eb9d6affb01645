#include "msrnn/model/language_model.hpp"

#include "msrnn/heads/class_softmax.hpp"
#include "msrnn/heads/mdn.hpp"
#include "msrnn/heads/output_module.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <type_traits>

namespace msrnn {

namespace {
std::atomic<bool> g_input_tables{true};
}  // namespace

bool input_tables() { return g_input_tables.load(std::memory_order_relaxed); }
void set_input_tables(bool on) { g_input_tables.store(on); }

Precision precision_from_name(const std::string& name) {
  if (name == "float32") return Precision::Float32;
  if (name == "bfloat16") return Precision::BFloat16;
  if (name == "bfloat16-emulated") return Precision::BFloat16Emulated;
  throw std::invalid_argument(
      cat("unknown inference precision '", name, "'; expected 'float32', 'bfloat16' or 'bfloat16-emulated'"));
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::Float32: return "float32";
    case Precision::BFloat16: return "bfloat16";
    case Precision::BFloat16Emulated: return "bfloat16-emulated";
  }
  return "?";
}

// The core named by cfg.core, from the registry (each core registers itself, core.hpp).
template <class S> static std::unique_ptr<Core<S>> build_core(const ModelConfig& cfg, ParamSet<S>& ps, Rng* rng) {
  CoreOptions options(cfg.core, cfg.num_options, cfg.text_options);
  CoreArgs args;
  args.input_size = cfg.embed_size;
  args.hidden_sizes = cfg.hidden_sizes;
  args.dropout = cfg.dropout;
  args.rng = rng;
  args.options = &options;
  return make_core<S>(cfg.core, ps, args);
}

// The softmax head named by cfg.head ("linear", "class" or "gated") with V output rows, reading the core's output parts.
template <class S> static std::unique_ptr<Head<S>> make_softmax_head(const ModelConfig& cfg, ParamSet<S>& ps,
                                                                     const Core<S>& core, Index V) {
  if (cfg.head == "linear") {
    MSRNN_CHECK(cfg.head_size == 0, "the linear head has no hidden size; got head_size ", cfg.head_size);
    return std::make_unique<LinearHead<S>>(ps, core.output_size(), V);
  }
  if (cfg.head == "class") {
    MSRNN_CHECK(cfg.head_size == 0, "the class head has no hidden size; got head_size ", cfg.head_size);
    MSRNN_CHECK(!cfg.head_classes.empty(),
                "the class head needs head_classes (the class sizes; see "
                "multiscale_rnn.data.class_sizes)");
    return std::make_unique<ClassSoftmaxHead<S>>(ps, core.output_size(), V, cfg.head_classes);
  }
  if (cfg.head == "gated") return std::make_unique<GatedOutputHead<S>>(ps, core.output_parts(), cfg.head_size, V);
  throw std::invalid_argument(cat("unknown head '", cfg.head, "'; expected 'linear', 'gated', 'class' or 'mdn'"));
}

// The head named by cfg.head, reading the core's output parts. "mdn": the mixture density head on the
// gated output module (head_size > 0) or on a linear head, either giving its 6M + 1 raw parameters.
template <class S> static std::unique_ptr<Head<S>> make_head(const ModelConfig& cfg, ParamSet<S>& ps,
                                                             const Core<S>& core) {
  MSRNN_CHECK(cfg.head == "class" || cfg.head_classes.empty(),
              "head_classes is for head='class'; this model's head is '", cfg.head, "'");
  MSRNN_CHECK(cfg.head == "mdn" || cfg.mixtures == 0, "mixtures is for head='mdn'; this model's head is '", cfg.head,
              "'");
  if (cfg.head != "mdn") return make_softmax_head<S>(cfg, ps, core, cfg.vocab_size);
  MSRNN_CHECK(cfg.mixtures >= 1, "the mixture density head needs mixtures >= 1, got ", cfg.mixtures);
  ModelConfig inner = cfg;
  inner.head = cfg.head_size > 0 ? "gated" : "linear";
  return std::make_unique<MixtureDensityHead<S>>(make_softmax_head<S>(inner, ps, core, 6 * cfg.mixtures + 1),
                                                 cfg.mixtures);
}

// Throws std::invalid_argument naming the first NaN or infinity in values (D, T*B) by stream, step, feature.
template <class S> static void check_values(const S* values, Index D, Index T, Index B) {
  for (Index t = 0; t < T; ++t)
    for (Index b = 0; b < B; ++b)
      for (Index d = 0; d < D; ++d) {
        const S v = values[(t * B + b) * D + d];
        if (!std::isfinite(v))
          throw std::invalid_argument(
              cat("input value ", v, " at (stream ", b, ", step ", t, ", feature ", d, ") is not finite"));
      }
}

template <class S> LanguageModel<S>::LanguageModel(const ModelConfig& cfg) : cfg_(cfg), rng_(cfg.seed) {
  MSRNN_CHECK(cfg.vocab_size > 0 || (cfg.head == "mdn" && cfg.input_size > 0 && cfg.vocab_size == 0),
              "vocab_size must be positive, got ", cfg.vocab_size,
              " (only a mixture density head reading real vectors has none)");
  MSRNN_CHECK(cfg.embed_size > 0, "embed_size must be positive, got ", cfg.embed_size);
  MSRNN_CHECK(!cfg.hidden_sizes.empty(), "hidden_sizes must name at least one layer");
  for (Index h : cfg.hidden_sizes) MSRNN_CHECK(h > 0, "hidden sizes must be positive, got ", h);
  MSRNN_CHECK(cfg.dropout >= 0.0 && cfg.dropout < 1.0, "dropout must be in [0, 1), got ", cfg.dropout);
  MSRNN_CHECK(cfg.input_size >= 0, "input_size must be 0 (tokens) or positive, got ", cfg.input_size);
  if (cfg.input_size == 0) {
    emb_id_ =
        ps_.add("embedding.weight", cfg.embed_size, cfg.vocab_size, {"embedding", 0, ""}, /*numpy_transposed=*/true);
  } else {
    enc_w_id_ = ps_.add("encoder.weight", cfg.embed_size, cfg.input_size, {"embedding", 0, ""});
    enc_b_id_ = ps_.add("encoder.bias", cfg.embed_size, 1, {"embedding", 0, ""});
  }
  core_ = build_core<S>(cfg, ps_, &rng_);
  head_ = make_head<S>(cfg, ps_, *core_);
  ps_.finalize();
  core_->bind(ps_);
  head_->bind(ps_);
  core_->reset_state(1);
}

template <class S> void LanguageModel<S>::run_body(const Inputs<S>& in, Index T, Index B, bool train) {
  MSRNN_CHECK(T > 0 && B > 0, "a chunk needs at least one step and one stream, got T=", T, " B=", B);
  const Index N = T * B;
  dropped_ = train && cfg_.dropout > 0.0;
  if (cfg_.input_size == 0) {
    MSRNN_CHECK(in.tokens && !in.values, "this model reads token ids, not real vectors");
    check_tokens(in.tokens, T, B, cfg_.vocab_size, "token");
  }
  y_.resize(core_->output_size(), N);
  // Evaluation from token ids: the core may take the embedding as a per-token table of its first
  // input term (Core::forward_tokens); x_ is then not formed (backward needs a training forward).
  if (cfg_.input_size == 0 && !train && core_->forward_tokens(y_, ps_.value(emb_id_), in.tokens, T, B)) {
    x_.resize(cfg_.embed_size, 0);
  } else {
    run_core(in, T, B, train);
  }
  if (dropped_) {
    my_.resize(y_.rows(), N);
    dropout_mask<S>(my_, cfg_.dropout, rng_);
    yin_ = y_.cwiseProduct(my_);
  }
}

template <class S> void LanguageModel<S>::run_core(const Inputs<S>& in, Index T, Index B, bool train) {
  const Index N = T * B;
  x_.resize(cfg_.embed_size, N);
  if (cfg_.input_size == 0) {
    embedding_forward<S>(x_, ps_.value(emb_id_), in.tokens);
  } else {
    MSRNN_CHECK(in.values && !in.tokens, "this model reads real vectors of size ", cfg_.input_size, ", not token ids");
    check_values(in.values, cfg_.input_size, T, B);
    linear_forward<S>(x_, ps_.value(enc_w_id_), ps_.value(enc_b_id_), CMatMap<S>(in.values, cfg_.input_size, N));
  }
  if (dropped_) {
    mx_.resize(x_.rows(), N);
    dropout_mask<S>(mx_, cfg_.dropout, rng_);
    xin_ = x_.cwiseProduct(mx_);
  }
  core_->forward(y_, dropped_ ? xin_ : x_, T, B, train);
}

template <class S> void LanguageModel<S>::forward(MRef<S> logits, const Inputs<S>& in, Index T, Index B, bool train) {
  core_->set_padding(nullptr, 0);  // none left from a loss_and_grad that threw
  run_body(in, T, B, train);
  head_->forward(logits, dropped_ ? yin_ : y_, T, B, train);
}

template <class S>
double LanguageModel<S>::loss_and_grad(const Inputs<S>& in, const Targets<S>& targets, Index T, Index B,
                                       const double* weights, const StatisticsReducer& reduce, const double* padding) {
  head_->check_targets(targets, T, B);
  const Index N = T * B;
  if (padding) {
    for (Index n = 0; n < N; ++n)
      MSRNN_CHECK(padding[n] == 0.0 || padding[n] == 1.0, "padding ", padding[n], " at (stream ", n % B, ", step ",
                  n / B, ") must be 0 or 1");
    if (!weights) weights = padding;
  }
  core_->set_padding(padding, N);
  double wsum = double(N);
  if (weights) {
    wsum = 0.0;
    for (Index n = 0; n < N; ++n) {
      MSRNN_CHECK(std::isfinite(weights[n]) && weights[n] >= 0.0, "loss weight ", weights[n], " at (stream ", n % B,
                  ", step ", n / B, ") must be finite and non-negative");
      wsum += weights[n];
    }
    MSRNN_CHECK(wsum > 0.0, "loss weights must not all be zero");
  }
  run_body(in, T, B, /*train=*/true);
  if (reduce) {  // the statistics of nonlinear auxiliary terms, reduced (e.g. over ranks) before backward
    const auto stats = core_->batch_statistics();
    if (!stats.empty()) {
      std::vector<double> values(stats.size());  // (K)
      for (size_t k = 0; k < stats.size(); ++k) values[k] = stats[k].second;
      reduce(values);
      MSRNN_CHECK(values.size() == stats.size(), "the reducer must leave ", stats.size(), " batch statistics, left ",
                  values.size());
      for (size_t k = 0; k < stats.size(); ++k)
        MSRNN_CHECK(std::isfinite(values[k]), "the reducer left batch statistic '", stats[k].first, "' at ", values[k],
                    ", not a finite number");
      core_->set_batch_statistics(values);
    }
  }
  CRefV<S> y = dropped_ ? yin_ : y_;
  nll_.resize(N);
  head_->nll(nll_.data(), y, targets, T, B, /*train=*/true);
  double loss = 0.0;
  dy_.resize(y_.rows(), N);
  if (!weights) {
    for (Index n = 0; n < N; ++n) loss += nll_[n];
    loss /= double(N);
    head_->nll_backward(dy_, y, targets, S(1.0 / double(N)), nullptr);
  } else {
    std::vector<double> w(N);
    for (Index n = 0; n < N; ++n) {
      w[n] = weights[n] / wsum;
      loss += weights[n] * nll_[n];
    }
    loss /= wsum;
    head_->nll_backward(dy_, y, targets, S(1), w.data());
  }
  if (dropped_) dy_.array() *= my_.array();
  dx_.resize(x_.rows(), N);
  core_->backward(dx_, dy_, dropped_ ? xin_ : x_);
  if (dropped_) dx_.array() *= mx_.array();
  core_->set_padding(nullptr, 0);
  if (cfg_.input_size == 0)
    embedding_backward<S>(ps_.grad(emb_id_), dx_, in.tokens);
  else
    linear_backward_params<S>(ps_.grad(enc_w_id_), ps_.grad(enc_b_id_), dx_, CMatMap<S>(in.values, cfg_.input_size, N));
  return loss;
}

template <class S>
double LanguageModel<S>::loss(const Inputs<S>& in, const Targets<S>& targets, Index T, Index B, double* per_token) {
  head_->check_targets(targets, T, B);
  run_body(in, T, B, /*train=*/false);
  const Index N = T * B;
  nll_.resize(N);
  head_->nll(nll_.data(), y_, targets, T, B, /*train=*/false);
  double loss = 0.0;
  for (Index n = 0; n < N; ++n) loss += nll_[n];
  if (per_token) std::copy(nll_.begin(), nll_.end(), per_token);
  return loss / double(N);
}

template <class S> void LanguageModel<S>::set_inference_precision(Precision p) {
  if (p != Precision::Float32) {
    MSRNN_CHECK((std::is_same<S, float>::value), precision_name(p),
                " inference needs a float32 model; this one is float64");
  }
  core_->set_inference_precision(p);  // cores without the path refuse; LSTM layers check that AMX can run
  precision_ = p;
}

template <class S> std::vector<NamedState<S>> LanguageModel<S>::record_grads() const { return core_->record_grads(); }

template <class S> std::vector<NamedState<S>> LanguageModel<S>::records() const {
  auto all = core_->records();
  for (auto& r : head_->records()) all.push_back(std::move(r));
  return all;
}

template <class S> void LanguageModel<S>::set_state(const std::vector<NamedState<S>>& s) {
  const std::vector<NamedState<S>> own = core_->get_state();  // the core's entries: names and sizes (rows)
  std::string names;
  for (const auto& o : own) names += (names.empty() ? "" : ", ") + o.name;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto it = std::find_if(own.begin(), own.end(), [&](const NamedState<S>& o) { return o.name == s[i].name; });
    MSRNN_CHECK(it != own.end(), "state entry '", s[i].name, "' is not one of this model's (", names, ")");
    MSRNN_CHECK(it->value.rows() == s[i].value.rows() && s[i].value.cols() == s[0].value.cols(), "state '", s[i].name,
                "' has shape (batch ", s[i].value.cols(), ", ", s[i].value.rows(), "), expected (batch ",
                s[0].value.cols(), ", ", it->value.rows(), ")");
    for (std::size_t j = 0; j < i; ++j)
      MSRNN_CHECK(s[j].name != s[i].name, "state entry '", s[i].name, "' is given twice");
  }
  for (const auto& o : own)
    MSRNN_CHECK(std::any_of(s.begin(), s.end(), [&](const NamedState<S>& g) { return g.name == o.name; }),
                "state entry '", o.name, "' is missing");
  core_->set_state(s);
}

template class LanguageModel<float>;
template class LanguageModel<double>;

}  // namespace msrnn
