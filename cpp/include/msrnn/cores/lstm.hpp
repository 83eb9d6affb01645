// LSTM, with PyTorch's gate order (i, f, g, o) and parameter names, so weights copy across:
//   a_t = W_ih x_t + b_ih + W_hh h_{t-1} + b_hh                      (4H, B)
//   i = sigm(a_i)  f = sigm(a_f)  g = tanh(a_g)  o = sigm(a_o)
//   c_t = f * c_{t-1} + i * g
//   h_t = o * tanh(c_t)
#pragma once

#include "msrnn/cores/core.hpp"
#include "msrnn/kernels/amx_bf16.hpp"
#include "msrnn/kernels/gemm.hpp"

namespace msrnn {

// Gate nonlinearities and cell update of one step. act (4H, B): in, the pre-activations a_t;
// out, [i; f; g; o]. c, tanh_c, h (H, B) out; c_prev (H, B) in.
template <class S> void lstm_pointwise_forward(MRef<S> act, MRef<S> c, MRef<S> tanh_c, MRef<S> h, CRef<S> c_prev);
// da (4H, B) out: gradient of the pre-activations. dc_prev (H, B) out. dh, dc (H, B) in: gradients
// arriving at h_t and (from step t+1) at c_t. act, tanh_c, c_prev as stored by forward.
template <class S>
void lstm_pointwise_backward(MRef<S> da, MRef<S> dc_prev, CRef<S> dh, CRef<S> dc, CRef<S> act, CRef<S> tanh_c,
                             CRef<S> c_prev);

// The same two kernels on a slice of units, the gate blocks given separately: i, f, g, o (and
// di, df, dg, do_) are (h, B) views of rows [k*H + u0, k*H + u1) of act (da); the others are the
// (h, B) rows [u0, u1) of the (H, B) buffers. Each thread of a time loop runs them on its units.
template <class S>
void lstm_gates_forward(MRef<S> i, MRef<S> f, MRef<S> g, MRef<S> o, MRef<S> c, MRef<S> tanh_c, MRef<S> h,
                        CRef<S> c_prev);
// Evaluation: the same step in two passes that keep neither the gate activations (the
// pre-activations i, f, g, o are only read) nor tanh(c_t).
template <class S>
void lstm_gates_forward_eval(CRef<S> i, CRef<S> f, CRef<S> g, CRef<S> o, MRef<S> c, MRef<S> h, CRef<S> c_prev);
template <class S>
void lstm_gates_backward(MRef<S> di, MRef<S> df, MRef<S> dg, MRef<S> do_, MRef<S> dc_prev, CRef<S> dh, CRef<S> dc,
                         CRef<S> i, CRef<S> f, CRef<S> g, CRef<S> o, CRef<S> tanh_c, CRef<S> c_prev);

// One LSTM layer over a chunk. Parameters (suffix e.g. "_l0"): weight_ih (4H, E), weight_hh (4H, H),
// bias_ih (4H), bias_hh (4H). State: h, c (H, B).
// In evaluation with a bfloat16 inference precision (float32 layers only), the step product is
//   a_t = (b_ih + b_hh) + bf16([W_ih W_hh]) bf16([x_t; h_{t-1}])     accumulated in float32
// with bf16() rounding to nearest even; the weights are rounded and packed at every forward call
// (so parameter changes are always seen), the gates and the state stay float32.
template <class S> class LSTMLayer : public Core<S> {
 public:
  LSTMLayer(ParamSet<S>& ps, const std::string& suffix, Index E, Index H);
  Index input_size() const override { return E_; }
  Index output_size() const override { return H_; }
  void bind(ParamSet<S>& ps) override;
  void forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool train) override;
  void backward(MRef<S> dX, CRef<S> dY, CRef<S> X) override;
  // Evaluation from token ids (Core::forward_tokens): with the table, built once per call,
  //   P = b_ih + b_hh + W_ih Emb                 (4H, V)
  //   a_t = P[:, token_t] + W_hh h_{t-1}         replacing W_ih x_t + b_ih + b_hh
  // the step product shrinks from depth E + H to H. With a bfloat16 precision the table is
  // b + bf16(W_ih) bf16(Emb) in float32, so the arithmetic stays that of forward on bf16 inputs.
  // Taken when input_tables() is on, the table pays (input_tables_pay(V, T*B)) and the fast
  // kernels are selected (or a bfloat16 precision is); else false.
  bool forward_tokens(MRef<S> Y, CRef<S> Emb, const std::int32_t* tokens, Index T, Index B) override;
  std::vector<NamedState<S>> get_state() const override;
  void set_state(const std::vector<NamedState<S>>& state) override;
  void reset_state(Index B) override;
  void set_inference_precision(Precision p) override;

 private:
  Index E_, H_, T_ = 0, B_ = 0;
  bool trained_ = false;  // the last forward ran in training mode and kept what backward needs
  std::string suffix_;
  Param<S> W_ih_, W_hh_, b_ih_, b_hh_;
  Mat<S> h_, c_;    // (H, B) carried state
  Mat<S> act_;      // (4H, N) gate activations [i; f; g; o]; (4H, B), one step, in evaluation
  Mat<S> hs_, cs_;  // (H, N + B) h and c; block 0 is the state before the chunk. Evaluation
                    // (fast path): hs_ unused (h goes to Y), cs_ (H, 2B) c_{t-1} and c_t in turn
  Mat<S> tanh_c_;   // (H, N); (H, B) in evaluation
  Mat<S> da_;       // (4H, N) backward: gradient of the pre-activations
  // Fast path (see gemm.hpp): weights packed once per chunk, each thread owns a slice of units.
  Vec<S> b_sum_;                              // (4H) b_ih + b_hh
  PackedPanels<S> W_p_;                       // [W_ih W_hh] (4H, E + H) in panels, bias b_ih + b_hh, for
                                              // act_t = b + W_ih x_t + W_hh h_{t-1}
  PackedPanels<S> W_hh_tp_;                   // W_hh^T (H, 4H) in panels, for dh_{t-1} = W_hh^T da_t
  Mat<S> dh_, dc_;                            // (H, B) backward: gradients reaching h_t and c_t
  Precision precision_ = Precision::Float32;  // of evaluation-mode forwards
  Bf16Matrix W_bf16_;                         // [W_ih W_hh] (4H, E + H) in bf16 tiles, bias b_ih + b_hh (BFloat16)
  Mat<S> P_;                                  // (4H, V) per-token input table (forward_tokens)
  Mat<S> W_ih_r_, Emb_r_;                     // (4H, E), (E, V) bfloat16-rounded copies for a bfloat16 table
  // forward's body; with a table P (4H, V) and tokens (N), X is unused and the step reads P.
  void run(MRef<S> Y, CRef<S> X, const Mat<S>* P, const std::int32_t* tokens, Index T, Index B, bool train);
  void forward_reference(MRef<S> Y, CRef<S> X, Index T, Index B);
  void backward_reference(MRef<S> dX, CRef<S> dY, CRef<S> X);
};

}  // namespace msrnn
