// Higher order RNN (Soltani & Jiang, "Higher Order Recurrent Neural Networks", 2016), L stacked
// layers. Layer l of order K (the paper's N) reads x_t (the layer below's h_t, or the input) and
// its own K previous states through K weighted paths, combined by a pooling function:
//   p_{t,n} = W_hn h_{t-n}                                            (H, B), n = 1..K
//   plain  (eq. 3):  h_t = f(W_in x_t + b + sum_n p_{t,n})
//   max    (eq. 4):  h_t = f(W_in x_t + b + max_n p_{t,n})            element-wise; ties: lowest n
//   fofe   (eq. 5):  h_t = f(W_in x_t + b + sum_n alpha^n p_{t,n})    0 < alpha < 1
//   gated  (eq. 6-7): r_{t,n} = sigm(W1n^g x_t + W2n^g h_{t-n} + b^g_n)
//                    h_t = f(W_in x_t + b + sum_n r_{t,n} * p_{t,n})
// f: "sigmoid" (the paper's), "tanh" or "relu". The biases b, b^g_n are absent from the paper's
// equations; option bias = 0 drops them. Dropout (the model's) acts between layers, by RNNStack's LayerLinks.
//
// Parameters of layer l (suffix _l<l>):
//   weight_ih (H, E_l)       W_in                                   role input
//   weight_hh (K H, H)       [W_h1; ...; W_hK], one (H, H) block per lag   role recurrent, unit H
//   bias (H)                 b (with bias = 1)                      role bias
//   gated pooling only:
//   gate_weight_ih (K H, E_l)  [W1_1^g; ...; W1_K^g]                role input, unit H
//   gate_weight_hh (K H, H)    [W2_1^g; ...; W2_K^g]                role recurrent, unit H
//   gate_bias (K H)            [b^g_1; ...; b^g_K] (with bias = 1)  role bias, unit H
// State of layer l: h_l<l>_lag<n> (H, B) for n = 1..K, the state n steps before the next step.
// Records of layer l: h_l<l> (H, N), h_t of every step of the last forward; record_grads: h_l<l>
// (H, N), after the backward the whole gradient dL/dh_t that reached h_t within the chunk (through
// the output or the layer above, and through the K paths of every later step that reads it).
//
// Schedule ("fully unfolded", the paper's Section 3.1). The input terms of all T steps are one
// product per chunk. Every product on a state involves one h_s only, so as soon as h_s is known the
// core computes every product it will ever feed, in one stacked product
//   P_s = [W_h1; ...; W_hK (; W2_1^g; ...; W2_K^g)] h_s                  (K H or 2 K H, B)
// and step t reads block n of P_{t-n} (the carried lags' products are one product at the start of
// the chunk). Backward mirrors it: block n of D_s, the gradient of P_s, is written by step s+n,
// so dh_s = dy_s + Wcat^T D_s is one product per step, and the recurrent weights' gradient is one
// product D Hist^T over the chunk's whole history buffer. In the fast path each thread owns a
// contiguous range of streams and runs the whole time loop for them, with the stacked weights
// packed once per chunk (gemm.hpp). Reference kernels (reference_kernels()): one stream of control,
// K separate Eigen products W_hn h_{t-n} per step, per-step weight-gradient products.
#pragma once

#include "msrnn/cores/core.hpp"
#include "msrnn/cores/rnn_stack.hpp"
#include "msrnn/kernels/gemm.hpp"

#include <cstdint>
#include <memory>

namespace msrnn {

enum class HornnPooling { Plain, Max, Fofe, Gated };
enum class HornnActivation { Sigmoid, Tanh, ReLU };

// Registered core "hornn" (options read by name, docs/models/hornn.md): order K (3, >= 1, <= 255);
// pooling "plain" | "max" | "fofe" | "gated" ("plain"); alpha (0.6, in (0, 1]; fofe only; 1 makes
// fofe the plain HORNN and is refused by the Python class); activation "sigmoid" | "tanh" | "relu"
// ("sigmoid"); bias (1).
struct HornnSpec {
  Index order = 3;
  HornnPooling pooling = HornnPooling::Plain;
  double alpha = 0.6;
  HornnActivation activation = HornnActivation::Sigmoid;
  bool bias = true;
};

template <class S> class HORNN : public Core<S> {
 public:
  HORNN(ParamSet<S>& ps, Index E, const std::vector<Index>& hidden, const HornnSpec& spec, double dropout, Rng* rng);
  Index input_size() const override { return E_; }
  Index output_size() const override { return layers_.back().H; }
  void bind(ParamSet<S>& ps) override;
  void forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool train) override;
  void backward(MRef<S> dX, CRef<S> dY, CRef<S> X) override;
  std::vector<NamedState<S>> get_state() const override;
  void set_state(const std::vector<NamedState<S>>& state) override;
  void reset_state(Index B) override;
  std::vector<NamedState<S>> records() const override;
  std::vector<NamedState<S>> record_grads() const override;

 private:
  struct Layer {
    Index E = 0, H = 0;
    std::string suffix;
    Param<S> W_in, W_h, b, Wg_in, Wg_h, bg;
    Mat<S> lags;  // (H, K B) carried state: block K - n is h_{-n} (lag n)
    Mat<S> Wcat;  // (M, H) [W_h; Wg_h] (gated; M = 2 K H), else W_h copied (M = K H)
    Mat<S> A;     // (H, N) pre-activations a_t
    Mat<S> R;     // (K H, N) gated: gate pre-activations of the input, then the gates r_{t,n}
    Mat<S> hist;  // (H, (T + K) B) block s is h_{s-K}: the carried lags, then h_0 .. h_{T-1}
    Mat<S> P;     // (M, (T + K) B) block s: the products of h_{s-K} (P_s above)
    Eigen::Matrix<std::uint8_t, Eigen::Dynamic, Eigen::Dynamic> win;  // (H, N) max: winning lag n - 1
    Mat<S> D;                                                         // (M, (T + K) B) backward: gradient of P
    Mat<S> dA;                                                        // (H, N) backward: gradient of a_t
    Mat<S> dR;     // (K H, N) backward, gated: gradient of the gate pre-activations
    Mat<S> dhist;  // (H, (T + K) B) backward, reference kernels: gradient reaching each h_s
    Mat<S> dH;     // (H, N) backward: dL/dh_t, the whole gradient reaching h_t (record_grads); (H, 0) after a forward
    PackedPanels<S> Wp;   // Wcat packed (M/H groups of H rows, depth H)
    PackedPanels<S> WTp;  // Wcat^T packed (1 group of H rows, depth M)
    Index M() const { return Wcat.rows(); }
  };

  void forward_layer(Layer& L, MRef<S> Y, CRef<S> X, bool train);
  void backward_layer(Layer& L, MRef<S> dX, CRef<S> dY, CRef<S> X);
  // Step t of streams [j0, j0 + nb): pooling of the products in P, activation, into hist.
  void step_forward(Layer& L, Index t, Index j0, Index nb);
  // Step t backward for streams [j0, j0 + nb): dh (H, nb) in; writes dA, D (and dR).
  void step_backward(Layer& L, Index t, Index j0, Index nb, const Mat<S>& dh);
  // P's K (or 2K) blocks of h_s for streams [j0, j0 + nb), by one product (packed or Eigen).
  void products(Layer& L, Index s, Index j0, Index nb, bool packed);

  Index E_, K_;
  HornnSpec spec_;
  Index T_ = 0, B_ = 0;
  bool fast_ = true;  // fast schedule of the last forward (false: reference kernels)
  std::vector<Layer> layers_;
  std::vector<S> coef_;                   // (K) path weights: alpha^n (fofe) or 1
  std::unique_ptr<LayerLinks<S>> links_;  // between-layer buffers and dropout (rnn_stack.hpp)
  std::vector<Mat<S>> dh_;                // dh_[k] (H, nb): thread k's step gradient
};

}  // namespace msrnn
