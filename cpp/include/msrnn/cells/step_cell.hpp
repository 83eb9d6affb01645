// A recurrent cell advanced one time step at a time, for cores whose cells interleave within a step
// (FS-RNN, sequential-LSTM: fs_rnn.hpp) and for the layer-normalised stacked-LSTM. LSTM or GRU,
// with optional layer normalisation on each gate and on the cell state, and zoneout.
//
// LSTM (PyTorch's gate order i, f, g, o; the x_t term is absent when E = 0):
//   a_t = W_ih x_t + W_hh h_{t-1} [+ b_ih + b_hh]                                   (4H, B)
//   ln_gates:  a^k_t <- LN(a^k_t [+ b^k]; gamma_k, beta_k) for each gate block k = i, f, g, o separately
//   i = sigm(a_i)  f = sigm(a_f)  g = tanh(a_g)  o = sigm(a_o)
//   c~_t = f * c_{t-1} + i * g
//   h~_t = o * tanh(LN(c~_t; gamma_c, beta_c))   with ln_cell,   else  o * tanh(c~_t)
// GRU (PyTorch's gate order r, z, n):
//   ax = W_ih x_t [+ b_ih | + b],  ah = W_hh h_{t-1} [+ b_hh]                       (3H, B) each
//   r = sigm(LN_r(ax_r + ah_r))   z = sigm(LN_z(ax_z + ah_z))   n = tanh(LN_n(ax_n + r * ah_n))
//   h~_t = (1 - z) * n + z * h_{t-1}             (each LN_k is the identity without ln_gates)
// LN(x; gamma, beta) = gamma * (x - mean(x)) / sqrt(var(x) + eps) + beta over the H units, eps = ln_eps
// (1e-5 by default, PyTorch's; the FS-RNN authors' code uses 1e-3), for the gates and the cell alike.
// With ln_gates the biases b_ih, b_hh are left out: the shifts beta take their place; with
// bias_before_norm a bias b (G*H) is added before each gate's layer norm (the FS-RNN authors' code),
// LSTM: to the whole pre-activation, GRU: to the input term ax.
// Zoneout on the recurrent connections, z_c and z_h the probabilities of keeping the previous value:
//   training:   c_t = m_c * c~_t + (1 - m_c) * c_{t-1},   m_c ~ Bernoulli(1 - z_c)  per unit, stream, step
//               h_t = m_h * h~_t + (1 - m_h) * h_{t-1},   m_h ~ Bernoulli(1 - z_h)
//   evaluation: m_c = 1 - z_c, m_h = 1 - z_h (the expected value)
//
// Parameters (suffix e.g. "_f1"; G = 4 for LSTM, 3 for GRU): weight_ih (G*H, E) when E > 0,
// weight_hh (G*H, H); without ln_gates bias_ih, bias_hh (G*H); with ln_gates ln_gates_weight,
// ln_gates_bias (G*H: gamma and beta of each gate block in gate order), and with bias_before_norm
// bias (G*H: b, role "bias"); with ln_cell (LSTM)
// ln_cell_weight, ln_cell_bias (H).
//
// Use over a chunk: begin(T, B, ...); optionally project_inputs(X) when every x_t is known before
// the time loop; step(t, ...) for t = 0..T-1; then backward_step(t, ...) for t = T-1..0 and
// finish_backward(...), which adds the weight gradients of all steps in one product each.
//
// Threads over streams: the streams (batch columns) of a chunk are independent, so a core may run
// every step of a contiguous column range [j0, j0 + nb) on one thread, calling the column-range
// step() / backward_step() with that thread's own Work. With `packed` the step products use the
// weights packed once per chunk (pack_forward / pack_backward, PackedPanels in gemm.hpp), an LSTM
// cell with a per-step input computing [W_ih W_hh] [x_t; h_{t-1}] in one pass; otherwise Eigen's
// products as in the plain step(). The results do not depend on the column split.
#pragma once

#include "msrnn/cores/core.hpp"
#include "msrnn/cores/rnn_stack.hpp"
#include "msrnn/kernels/gemm.hpp"

namespace msrnn {

struct CellSpec {
  CellType type = CellType::LSTM;  // LSTM or GRU
  Index E = 0;                     // input size; 0: the cell has no input term at all
  Index H = 0;                     // hidden size
  bool ln_gates = false;           // layer norm on each gate's pre-activation
  bool ln_cell = false;            // layer norm on the cell state before the output tanh (LSTM only)
  bool bias_before_norm = false;   // with ln_gates: a bias b added before the gate layer norm
  double ln_eps = 1e-5;            // the layer norms' epsilon (> 0)
  double zoneout_c = 0.0;          // probability of keeping c_{t-1} (LSTM only)
  double zoneout_h = 0.0;          // probability of keeping h_{t-1}
};

// Throws naming `what` when a spec is inconsistent (GRU with ln_cell or zoneout_c, bias_before_norm
// without ln_gates, bad sizes, probabilities or epsilon).
void check_cell_spec(const CellSpec& spec, const std::string& what);

template <class S> class StepCell {
 public:
  StepCell(ParamSet<S>& ps, const std::string& suffix, const CellSpec& spec);
  const CellSpec& spec() const { return spec_; }
  bool has_c() const { return spec_.type == CellType::LSTM; }
  Index hidden_size() const { return spec_.H; }
  Index input_size() const { return spec_.E; }
  void bind(ParamSet<S>& ps);

  // Sizes the cache for T steps of B streams and, when training with zoneout, draws this chunk's
  // masks from rng (m_c before m_h).
  void begin(Index T, Index B, bool train, Rng& rng);
  // The input term of all T steps in one product: X (E, N). Then step() ignores its x argument.
  void project_inputs(CRef<S> X);
  // Step t. h (H, B), c (H, B; 0 rows for GRU): in, the state before the step; out, after it.
  // x (E, B): the input of step t (unused after project_inputs or when E = 0).
  void step(Index t, MRef<S> h, MRef<S> c, CRef<S> x);
  // Backward of step t, called for t = T-1 down to 0. dh, dc (H, B): in, the whole gradient
  // reaching the state after step t; out, the gradient reaching the state before it. dx (E, B)
  // out (overwritten): the gradient w.r.t. x_t; pass a 0-column matrix to skip (projected cells
  // get dX from finish_backward instead).
  void backward_step(Index t, MRef<S> dh, MRef<S> dc, MRef<S> dx);
  // Weight gradients of all steps (accumulated). X (E, N): the chunk's inputs when projected
  // (ignored otherwise: the cell kept its own copy). dX (E, N) out: W_ih^T da of all steps when
  // projected and dX has columns.
  void finish_backward(MRef<S> dX, CRef<S> X);

  // The state after each step of the last forward, (H, N), and after backward the whole gradient
  // of the loss with respect to it, (H, N): dh_out w.r.t. h_t from all its uses; dc_out w.r.t. the
  // cell state computed at step t, c~_t, from all its uses (the output h~_t and the next step),
  // which is the gradient w.r.t. c_t of h_t = o * tanh(c_t) when zoneout is off (with zoneout the
  // recorded c_t mixes c~_t and c_{t-1}). c and dc have 0 rows for GRU.
  const Mat<S>& h_out() const { return h_out_; }
  const Mat<S>& c_out() const { return c_out_; }
  const Mat<S>& dh_out() const { return dh_out_; }
  const Mat<S>& dc_out() const { return dc_out_; }

  // Per-thread temporaries of the column-range steps, for nb streams.
  struct Work {
    Index nb = 0;
    bool own_grads = false;     // layer-norm parameter gradients go to dg_*/db_* (else to the parameters)
    Mat<S> ct, ht, tmp;         // (H or 0, nb), (H, nb), (H, nb) forward step temporaries
    Mat<S> dht, dct, zero;      // (H, nb), (H or 0, nb), (H, nb) backward step temporaries
    Mat<S> dg_gates, db_gates;  // (G*H, 1) with own_grads and ln_gates
    Mat<S> dg_cell, db_cell;    // (H, 1) with own_grads and ln_cell
  };
  // Sizes w for nb streams; own_grads: keep layer-norm gradients in w (zeroed) for add_grads.
  void start_work(Work& w, Index nb, bool own_grads) const;
  // Adds the layer-norm parameter gradients kept in w (own_grads) to the parameters.
  void add_grads(const Work& w);
  // Pack the weights for packed forward steps (after project_inputs, if any) or backward steps.
  void pack_forward();
  void pack_backward();
  // Sizes the backward buffers; call once (single-threaded) before the column-range backward steps.
  void begin_backward();
  // step() and backward_step() on streams [j0, j0 + nb): h, c, x, dh, dc, dx have nb columns.
  void step(Index t, Index j0, Index nb, MRef<S> h, MRef<S> c, CRef<S> x, Work& w, bool packed);
  void backward_step(Index t, Index j0, Index nb, MRef<S> dh, MRef<S> dc, MRef<S> dx, Work& w, bool packed);

 private:
  Index G() const { return spec_.type == CellType::LSTM ? 4 : 3; }
  // The named steps of step() on streams [j0, j0 + nb) (step_cell.cpp, with the equations): the LSTM's or the GRU's
  // gates into act_ and w.ct, w.ht, then zoneout into the new state h, c (H, nb).
  void lstm_step(Index t, Index j0, Index nb, Work& w, bool packed);
  void gru_step(Index t, Index j0, Index nb, Work& w, bool packed);
  void zoneout_step(Index t, Index j0, Index nb, MRef<S>& h, MRef<S>& c, Work& w);

  CellSpec spec_;
  Index T_ = 0, B_ = 0;
  bool train_ = false, projected_ = false;
  Param<S> W_ih_, W_hh_, b_ih_, b_hh_, g_gates_, b_gates_, g_cell_, b_cell_;
  Param<S> b_pre_;          // (G*H, 1) bias_before_norm: b, added before the gate layer norm
  Mat<S> x_;                // (E, N) inputs of each step (when not projected)
  Mat<S> act_;              // (G*H, N) pre-activations (input term first), then gate activations
  Mat<S> ah_;               // (3H, N) GRU: W_hh h_{t-1} [+ b_hh]
  Mat<S> xhat_;             // (G*H, N) ln_gates: normalised gate pre-activations
  Mat<S> rstd_;             // (1, G*N) ln_gates: 1/sigma; step t, gate k at column t*G*B + k*B
  Mat<S> chat_;             // (H, N) ln_cell: normalised c~_t
  Mat<S> crstd_;            // (1, N) ln_cell
  Mat<S> tanh_c_;           // (H, N) LSTM: tanh(LN(c~_t)) or tanh(c~_t)
  Mat<S> h_prev_, c_prev_;  // (H, N) state before each step
  Mat<S> h_out_, c_out_;    // (H, N) state after each step
  Mat<S> mask_h_, mask_c_;  // (H, N) zoneout masks (training with zoneout)
  Mat<S> da_;               // (G*H, N) backward: gradient of the pre-activations (GRU: of ax)
  Mat<S> dah_;              // (3H, N) GRU backward: gradient of ah
  Mat<S> dh_out_, dc_out_;  // (H, N) gradient reaching the state after each step
  Work work_;               // temporaries of the plain step() / backward_step() over all B streams
  PackedPanels<S> Wp_;      // forward: W_hh (G*H, H), or [W_ih W_hh] (4H, E + H) for an LSTM with per-step x
  PackedPanels<S> Wxp_;     // forward, GRU with per-step x: W_ih (3H, E)
  PackedPanels<S> WhT_;     // backward: W_hh^T (H, G*H)
  PackedPanels<S> WxT_;     // backward, E > 0: W_ih^T (E, G*H)
  bool fused_ = false;      // Wp_ holds [W_ih W_hh]
};

}  // namespace msrnn
