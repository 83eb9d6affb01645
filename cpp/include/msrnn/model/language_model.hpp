// A language model: encoder -> recurrent core -> head -> softmax cross-entropy (or, with the mixture
// density head, the negative log-likelihood of real-valued targets: pen strokes, mdn.hpp).
// The head is chosen by name (ModelConfig::head) and reads the core's output parts.
//   x_t = E[:, token_t]                    token embedding: embedding.weight, NumPy (V, E)
//   x_t = W_enc u_t + b_enc                or, for real-valued inputs u_t (D,) (input_size D > 0),
//                                          a linear encoder: encoder.weight (E, D), encoder.bias (E)
//   y_t = core(m_x * x_t)                  the core's parameters and state
//   z_t = head(m_y * y_t)                  logits (V, B)
//   loss = mean over B*T of -log softmax(z_t)[target_t]   computed by the head (Head::nll), which
//                                          may skip forming z_t (the class softmax does)
// m_x, m_y: inverted-dropout masks on the embedding and on the core's output (training only).
// Tokens are step-major: n = t*B + b.
#pragma once

#include "msrnn/cores/core.hpp"
#include "msrnn/heads/head.hpp"

#include <functional>
#include <map>
#include <memory>
#include <vector>

namespace msrnn {

struct ModelConfig {
  std::string core = "lstm";        // a registered core's name (core.hpp, core_names())
  std::string head = "linear";      // "linear" (LinearHead), "gated" (GatedOutputHead, eq. 11-12),
                                    // "class" (ClassSoftmaxHead over head_classes) or "mdn"
                                    // (MixtureDensityHead on a linear head, or on the gated module
                                    // when head_size > 0)
  Index head_size = 0;              // the head's hidden size (gated: output embedding He); 0 for linear
  std::vector<Index> head_classes;  // the class head's class sizes over consecutive ids; empty otherwise
  Index mixtures = 0;               // M of the mixture density head; 0 otherwise
  Index vocab_size = 0;             // V (output classes; 0 for the mixture density head reading vectors)
  Index input_size = 0;             // D: 0 reads token ids; D > 0 reads real vectors (linear encoder)
  Index embed_size = 0;             // E
  std::vector<Index> hidden_sizes;  // H of each layer
  double dropout = 0.0;             // on every non-recurrent connection
  std::uint64_t seed = 0;           // the model's random generator (dropout, sampling)
  // Core-specific options by name (numbers and words); each core reads its own through CoreOptions
  // and rejects others.
  std::map<std::string, double> num_options;
  std::map<std::string, std::string> text_options;
};

// What a model reads over a chunk: token ids or real vectors, both step-major (n = t*B + b).
template <class S> struct Inputs {
  const std::int32_t* tokens = nullptr;  // (N) ids, for the embedding encoder
  const S* values = nullptr;             // (D, N) real vectors, for the linear encoder
};

// Changes a core's batch statistics in place (LanguageModel::loss_and_grad).
using StatisticsReducer = std::function<void(std::vector<double>& values)>;

template <class S> class LanguageModel {
 public:
  explicit LanguageModel(const ModelConfig& cfg);
  const ModelConfig& config() const { return cfg_; }
  ParamSet<S>& params() { return ps_; }
  Rng& rng() { return rng_; }
  Core<S>& core() { return *core_; }
  Index vocab_size() const { return cfg_.vocab_size; }
  Index output_size() const { return head_->output_size(); }  // rows of forward's output (V, or 6M + 1)
  Index target_size() const { return head_->target_size(); }  // 0: class ids; D: real targets (D, N)

  Index input_size() const { return cfg_.input_size; }

  // logits (output_size(), T*B) out.
  void forward(MRef<S> logits, const Inputs<S>& in, Index T, Index B, bool train);
  // Training-mode forward, cross-entropy and backward; accumulates gradients; returns the mean
  // cross-entropy (nats). The gradient also holds the core's auxiliary terms (aux_losses()).
  // With weights (T*B, step-major, finite, >= 0, not all 0) the loss is sum_n w_n nll_n / sum_n w_n,
  // e.g. the loss of the last step alone for the gradient analyses.
  // reduce: when given and the core has batch statistics (Core::batch_statistics), called between the
  // forward and the backward with their values, which it may change (data-parallel training: the
  // mean over all ranks' columns); the core's terms and gradients then follow the changed values.
  // padding (T*B, step-major, 0 or 1; separate sequences padded to one length): the columns marked 0
  // count in neither the loss (weights default to padding) nor the core's auxiliary terms.
  double loss_and_grad(const Inputs<S>& in, const Targets<S>& targets, Index T, Index B,
                       const double* weights = nullptr, const StatisticsReducer& reduce = nullptr,
                       const double* padding = nullptr);
  // Evaluation-mode mean loss, no gradients. If `per_token` is given (T*B), it receives each -log p.
  double loss(const Inputs<S>& in, const Targets<S>& targets, Index T, Index B, double* per_token = nullptr);
  // The same for token ids (T*B).
  void forward(MRef<S> logits, const std::int32_t* tokens, Index T, Index B, bool train) {
    forward(logits, Inputs<S>{tokens, nullptr}, T, B, train);
  }
  double loss_and_grad(const std::int32_t* tokens, const std::int32_t* targets, Index T, Index B,
                       const double* weights = nullptr, const StatisticsReducer& reduce = nullptr) {
    return loss_and_grad(Inputs<S>{tokens, nullptr}, Targets<S>{targets, nullptr}, T, B, weights, reduce);
  }
  double loss(const std::int32_t* tokens, const std::int32_t* targets, Index T, Index B, double* per_token = nullptr) {
    return loss(Inputs<S>{tokens, nullptr}, Targets<S>{targets, nullptr}, T, B, per_token);
  }

  std::vector<NamedState<S>> get_state() const { return core_->get_state(); }
  // Replaces the carried state, all or nothing: every entry of the core must be given, once, with the
  // core's size and one batch size, and no other entry (std::invalid_argument naming it otherwise).
  void set_state(const std::vector<NamedState<S>>& s);
  void reset_state(Index B) { core_->reset_state(B); }
  // Arithmetic of evaluation-mode forward passes (forward with train = false, loss); training is
  // never affected. Anything but Float32 needs a float32 model with an LSTM core ("lstm"), and
  // BFloat16 a CPU with AMX-BF16 whose tile state Linux grants: otherwise std::invalid_argument or
  // std::runtime_error says why, and the precision stays as it was.
  void set_inference_precision(Precision p);
  Precision inference_precision() const { return precision_; }
  // Change a core option between chunks (e.g. the HM-LSTM slope); unknown names throw.
  void set_option(const std::string& name, double value) { core_->set_option(name, value); }
  // What the last forward recorded for introspection (boundaries, norms, gates), by name.
  std::vector<NamedState<S>> records() const;
  // After loss_and_grad: the core's auxiliary loss terms (Core::aux_losses), by name. The gradient
  // loss_and_grad accumulated is that of its returned cross-entropy plus their sum.
  std::vector<std::pair<std::string, double>> aux_losses() const { return core_->aux_losses(); }
  // After a training forward: the core's batch statistics (Core::batch_statistics), by name.
  std::vector<std::pair<std::string, double>> batch_statistics() const { return core_->batch_statistics(); }
  // After loss_and_grad: the gradient w.r.t. each recorded state (Core::record_grads).
  std::vector<NamedState<S>> record_grads() const;

 private:
  void run_body(const Inputs<S>& in, Index T, Index B, bool train);  // encoder, core, output dropout: fills y_ (yin_)
  void run_core(const Inputs<S>& in, Index T, Index B, bool train);  // encoder, input dropout, core: fills y_

  ModelConfig cfg_;
  ParamSet<S> ps_;
  Rng rng_;
  int emb_id_ = -1;                    // embedding.weight (E, V), when reading tokens
  int enc_w_id_ = -1, enc_b_id_ = -1;  // encoder.weight (E, D), encoder.bias (E, 1), when reading vectors
  std::unique_ptr<Core<S>> core_;
  std::unique_ptr<Head<S>> head_;
  bool dropped_ = false;
  Precision precision_ = Precision::Float32;
  Mat<S> x_, xin_, mx_;      // (E, N) encoded inputs, masked, mask
  Mat<S> y_, yin_, my_;      // (O, N) core output, masked output, mask
  std::vector<double> nll_;  // (N) -log p(target) of each token, from the head's loss
  Mat<S> dy_, dx_;           // (O, N), (E, N) backward
};

}  // namespace msrnn
