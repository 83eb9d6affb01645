// Fast-Slow RNN (Mujika, Meier, Steger, NIPS 2017) and the two comparison models of its
// Section 4.2, the sequential-LSTM and the (layer-normalised) stacked-LSTM. Every cell is a
// StepCell (step_cell.hpp): LSTM or GRU, with optional layer norm on each gate and on the cell
// state, and zoneout on its recurrent connections.
//
// FSRNN, K >= 2 fast cells F1..FK of size H_F sharing one fast state, one slow cell S of size H_S:
//   h^{F1}_t = f^{F1}(h^{FK}_{t-1}, x_t)
//   h^S_t    = f^S(h^S_{t-1}, m1_t * h^{F1}_t)
//   h^{F2}_t = f^{F2}(h^{F1}_t, m2_t * h^S_t)
//   h^{Fi}_t = f^{Fi}(h^{F(i-1)}_t)                3 <= i <= K   (no input term at all)
//   y_t      = h^{FK}_t
// For LSTM cells the state handed along is the pair (h, c). m1_t (H_F, B), m2_t (H_S, B):
// inverted-dropout masks on the two non-recurrent connections inside a step, fresh each step
// (the embedding and the output are dropped by the language model).
// State: h_fast, c_fast (H_F, B), h_slow, c_slow (H_S, B) (no c_* for GRU cells).
// Parameters: the cells' tensors with suffixes _f1 .. _fK and _s.
// Records: h_f1, c_f1, ..., h_s, c_s, each (H, N): every cell's state after each step; their
// record_grads are the whole gradients w.r.t. h_t and c_t (StepCell::dh_out, dc_out).
//
// SequentialRNN, K >= 1 cells of one size H connected one after another within a step:
//   h^1_t = f^1(h^K_{t-1}, x_t),   h^i_t = f^i(h^{i-1}_t) for 2 <= i <= K,   y_t = h^K_t
// (the FS-RNN's fast layer alone). State: h, c (H, B). Suffixes and records _l0 .. _l{K-1}.
//
// StackedRNN, L layers, cell l reading layer l-1's output at the same step:
//   h^l_t = f^l(h^l_{t-1}, m^l_t * h^{l-1}_t),   h^0_t = x_t,   y_t = h^L_t
// with dropout masks m^l between layers (m^1 = 1). Unlike RNNStack (rnn_stack.hpp) its cells
// take layer norm and zoneout. State, suffixes and records _l0 .. _l{L-1}.
//
// All three run each chunk's time loop (StackedRNN: each layer's) in one OpenMP region in which
// every thread owns a contiguous range of streams and runs every step and cell for them, with the
// step products on weights packed once per chunk (step_cell.hpp); masks are drawn before it, so
// results do not depend on the thread count. Reference kernels (reference_kernels(), gemm.hpp):
// the plain steps, Eigen's products over all streams.
#pragma once

#include "msrnn/cells/step_cell.hpp"

#include <memory>

namespace msrnn {

// Registered cores (options read by name, docs/models/fs_rnn.md):
//   fs_rnn:  hidden_sizes (H_F, H_S); fast_cells K (2); fast_cell, slow_cell "lstm" | "gru"
//            ("lstm", slow_cell defaults to fast_cell); layer_norm_gates (1); layer_norm_cell (1);
//            zoneout_c (0); zoneout_h (0); the model's dropout inside the step too.
//   sequential_lstm, stacked_lstm: hidden_sizes one per cell; cell "lstm" | "gru" ("lstm");
//            layer_norm_gates (0); layer_norm_cell (1); zoneout_c (0); zoneout_h (0).
//   all three: layer_norm_eps (1e-5), the layer norms' epsilon; bias_before_norm (0), a bias added
//            before each gate's layer norm (needs layer_norm_gates). The FS-RNN authors' code: 1e-3, 1.
// layer_norm_cell and zoneout_c act on LSTM cells only.

template <class S> class FSRNN : public Core<S> {
 public:
  // fast, slow: the cells' types, sizes and options (their E is set here). K fast cells.
  FSRNN(ParamSet<S>& ps, Index E, Index K, const CellSpec& fast, const CellSpec& slow, double dropout, Rng* rng);
  Index input_size() const override { return E_; }
  Index output_size() const override { return fast_.front()->hidden_size(); }
  void bind(ParamSet<S>& ps) override;
  void forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool train) override;
  void backward(MRef<S> dX, CRef<S> dY, CRef<S> X) override;
  std::vector<NamedState<S>> get_state() const override;
  void set_state(const std::vector<NamedState<S>>& state) override;
  void reset_state(Index B) override;
  std::vector<NamedState<S>> records() const override;
  std::vector<NamedState<S>> record_grads() const override;

 protected:
  // The sequential chain: no slow cell; names use `state_fast` for the state and _l0.. suffixes.
  struct Chain {};
  FSRNN(ParamSet<S>& ps, Index E, Index K, const CellSpec& cell, Chain);

 private:
  bool has_slow() const { return slow_ != nullptr; }
  std::vector<StepCell<S>*> cells() const;  // fast cells in order, then the slow cell

  Index E_;
  double p_ = 0.0;
  Rng* rng_ = nullptr;
  std::string fast_name_, slow_name_;     // state names: "fast"/"slow", or "" for the chain
  std::vector<std::string> fast_suffix_;  // "_f1".. or "_l0"..
  std::vector<std::unique_ptr<StepCell<S>>> fast_;
  std::unique_ptr<StepCell<S>> slow_;
  Mat<S> hf_, cf_, hs_, cs_;  // (H_F, B), (H_F, B), (H_S, B), (H_S, B) carried state
  Index T_ = 0, B_ = 0;
  bool dropped_ = false;  // dropout masks in use in the last forward
  Mat<S> m1_, m2_;        // (H_F, N), (H_S, N) dropout masks
  // One thread's streams [j0, j0 + nb): the cells' temporaries and the step inputs and gradients.
  struct Lane {
    std::vector<typename StepCell<S>::Work> work;  // one per cell, in cells() order
    Mat<S> xs, xf2;                                // (H_F, nb), (H_S, nb) step inputs of S and F2
    Mat<S> dhf, dcf, dhs, dcs;  // (H_F, nb), (H_F or 0, nb), (H_S, nb), (H_S or 0, nb) state gradients
    Mat<S> dxs, dxf2;           // (H_F, nb), (H_S, nb) gradients w.r.t. the inputs of S and F2
  };
  std::vector<Lane> lanes_;  // one per thread
  void forward_streams(MRef<S> Y, Index j0, Index nb, Lane& lane, bool packed);
  void backward_streams(CRef<S> dY, Index j0, Index nb, Lane& lane, bool own_grads, bool packed);
};

template <class S> class SequentialRNN : public FSRNN<S> {
 public:
  SequentialRNN(ParamSet<S>& ps, Index E, Index K, const CellSpec& cell)
      : FSRNN<S>(ps, E, K, cell, typename FSRNN<S>::Chain{}) {}
};

template <class S> class StackedRNN : public Core<S> {
 public:
  // One cell per entry of `hidden` (its H); `cell` gives type and options.
  StackedRNN(ParamSet<S>& ps, Index E, const std::vector<Index>& hidden, const CellSpec& cell, double dropout,
             Rng* rng);
  Index input_size() const override { return E_; }
  Index output_size() const override { return cells_.back()->hidden_size(); }
  void bind(ParamSet<S>& ps) override;
  void forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool train) override;
  void backward(MRef<S> dX, CRef<S> dY, CRef<S> X) override;
  std::vector<NamedState<S>> get_state() const override;
  void set_state(const std::vector<NamedState<S>>& state) override;
  void reset_state(Index B) override;
  std::vector<NamedState<S>> records() const override;
  std::vector<NamedState<S>> record_grads() const override;

 private:
  Index E_;
  double p_;
  Rng* rng_;
  Index T_ = 0, B_ = 0;
  bool dropped_ = false;
  std::vector<std::unique_ptr<StepCell<S>>> cells_;
  std::vector<Mat<S>> h_, c_;                     // h_[l], c_[l] (H_l, B) carried state
  std::vector<Mat<S>> in_;                        // in_[l] (H_{l-1}, N): masked input of layer l >= 1 (with dropout)
  std::vector<Mat<S>> mask_;                      // mask_[l] (H_{l-1}, N)
  std::vector<Mat<S>> grad_;                      // grad_[l] (H_l, N): backward, gradient reaching layer l's output
  std::vector<typename StepCell<S>::Work> work_;  // one per thread (threads over streams)
};

}  // namespace msrnn
