// Hierarchical multiscale LSTM (Chung, Ahn & Bengio, ICLR 2017, eq. 1-9).
//
// Layers l = 1..L (suffix _l0 .. _l{L-1} in names), sizes H_l; h^0_t = x_t (E rows), z^0_t = 1.
// Each layer keeps h^l, c^l (H_l, B) and its boundary state z^l (1, B). At step t, bottom to top:
//
//   s^l_t = r * U^l_l h^l_{t-1} + z^l_{t-1} U^l_{l+1} h^{l+1}_{t-1} + z^{l-1}_t W^l_{l-1} h^{l-1}_t + b^l   (eq. 4-7)
//           r = 1 - z^l_{t-1} (flush_cut, the default: the hard reset of the slides) or r = 1 (paper, eq. 5);
//           no top-down term in the top layer, nor in any layer with top_down off (beyond the paper: layer l
//           then restarts after a boundary from z^{l-1}_t W h^{l-1}_t alone when flush_cut is on).
//   a = s with each gate block (i, f, g, o) layer-normalised when layer_norm is on (LN(x) = gamma*xhat + beta,
//       per block of H rows, after the bias; the boundary row is never normalised).
//   i, f, o = sigm(a_i, a_f, a_o),  g = tanh(a_g),  zhat = hard_sigm(a_z) = clamp((slope * a_z + 1) / 2, 0, 1)
//   Gate order (i, f, g, o, z) as PyTorch's LSTM, then the boundary row: G_l = 4 H_l + 1 rows
//   (4 H_L in the top layer unless top_boundary is on; its z^L is then always 0).
//
//   The operation (eq. 2-3) from zp = z^l_{t-1} and zb = z^{l-1}_t, written as weights
//     w_F = zp, w_U = (1 - zp) zb, w_C = (1 - zp)(1 - zb)          (FLUSH, UPDATE, COPY; they sum to 1)
//   c^l_t = (1 - w_C) i*g + w_U f*c^l_{t-1} + w_C c^l_{t-1}
//   h^l_t = (1 - w_C) o*tanh(c^l_t) + w_C h^l_{t-1}
//   which for binary z is exactly the three cases: FLUSH c = i*g, UPDATE c = f*c + i*g, COPY (c, h) unchanged.
//
//   Boundary (eq. 8-9): znew = [zhat > 1/2] (boundary "step"), ~ Bernoulli(zhat) ("sample"), or zhat ("soft").
//   z^l_t = (1 - w_C) znew + w_C z^l_{t-1}  (copy_z "carry": COPY keeps z, paper) or znew (copy_z "recompute").
//
// Boundary-rate term (option rate_penalty = lambda, beyond the paper; 0 = off): the objective gains
//   R = lambda / (T B) * sum_{l with a detector} sum_{t, b} z^l_t(b)
// (the fraction of steps with a boundary, per layer, summed over layers; reported by aux_losses() as
// "boundary_rate"). Its gradient lambda / (T B) enters dz^l_t and follows z's own gradient paths (straight-
// through in step/sample modes), so every column pays for a boundary and the detector keeps the useful ones.
//
// Rate-target term (options rate_target_l{l} = r_l, rate_weight = mu, rate_slack_below_l{l} = s_-,
// rate_slack_above_l{l} = s_+, per layer; beyond the paper): the objective gains
//   R_target = mu * sum_{l with a detector and r_l >= 0} e_l^2,   zbar^l = 1 / (T B) sum_{t, b} z^l_t(b),
//   e_l = zbar^l - r_l - s_+ above r_l + s_+,  zbar^l - r_l + s_- below r_l - s_-,  0 between
// ("boundary_target"; with s_- = s_+ = 0, the default, e_l = zbar^l - r_l), whose gradient 2 mu e_l / (T B) enters
// dz^l_t like R's. s_+ = 1 makes r_l a floor (only too few boundaries cost), s_- = 1 a ceiling. Data parallelism:
// R is a mean over the columns, so the ranks' terms and gradients, weighted by their shares of the columns,
// add up to the whole batch's. R_target squares a mean, so they do not: zbar^l is a batch statistic
// (batch_statistics(): "zbar_l{l}" of every layer with a target, after a training forward), and
// set_batch_statistics() replaces it with the whole batch's zbar^l before backward; R_target and its
// gradient 2 mu e_l / (T B) on this chunk's T B columns are then computed from that value.
//
// Gradients. dznew/dzhat = 1 (straight-through in step and sample modes, exact in soft), dzhat/da_z = slope/2
// inside (0, 1) and 0 outside. The choice of operation:
//   gradient "switch" (the paper's reading): w_F, w_U, w_C are a switch with no gradient; z is reached only
//     through the z-gated terms (top-down, bottom-up, the flush cut) and the carried z. COPY columns then need
//     no gate values in forward or backward, so they do no matrix work at all.
//   gradient "blend" (the default, and the only reading in soft mode): the weights are differentiated as written above, which
//     needs the gates of every column (COPY ones too) during training.
//   The reading can differ per boundary (options blend_l{l}, beyond the paper): z^l_t then gets the blend
//   gradient through the weights of layers l and l+1 (where it is zp and zb) only when blend_l{l} is 1.
//   Training skips COPY columns only when every layer reads "switch".
//
// Detector input (options detector_below_l{l}, beyond the paper; 0 = the paper): with 1, layer l's boundary row
// reads only the layer below, s_z = z^{l-1}_t W_z h^{l-1}_t + b_z: its recurrent and top-down weights (row 4H
// of U and Utd) are held at zero (set to zero at every forward, and given no gradient).
//
// Skipped work (option skip = 1, default): in step/sample modes, in inference always and in training under
// "switch", the active (UPDATE/FLUSH) columns of each layer and step are gathered, multiplied and scattered
// back; COPY columns only copy. skip = 0 forces the plain masked path, which computes every column and lets
// the weights select; tests hold the two equal.
//
// Execution. Streams (batch columns) are independent, so each OpenMP thread owns a contiguous range of
// columns and runs all steps and layers of the chunk for them (threads meet only after packing the
// weights, and not at all per step); each stream's recurrence is computed the same way whatever the
// thread count (sums over streams, as in the weight gradients, are split differently). A layer's step is one
// product s = b + [W U Utd] [zb h^{l-1}_t; r h^l_{t-1}; zp h^{l+1}_{t-1}] with the gathered inputs stacked
// in one (K, k) buffer, K = Hb + H + Ht, and [W U Utd] packed once per chunk (PackedPanels, gemm.hpp);
// backward multiplies by [W U Utd]^T packed the same way. Bernoulli boundaries draw their uniforms before
// the threads start (one per column, step and detector layer, step-major). An evaluation forward keeps
// only what the state and the records need (no gate, tanh(c) or layer-norm caches). With
// set_reference_kernels(true) the plain version runs instead: one stream of control, Eigen products.
//
// Output Y (sum_l H_l, N) = [h^1_t; ...; h^L_t], so a head can read every layer (output_parts()).
// State: h_l{l}, c_l{l} (H_l, B), z_l{l} (1, B). Records (each (1, N)): z_l{l}, zhat_l{l} (NaN where not
// computed), znew_l{l} (the boundary before the COPY carry), op_l{l} (0 COPY, 1 UPDATE, 2 FLUSH; in soft mode the operation of z rounded at 1/2), hnorm_l{l}.
#pragma once

#include "msrnn/cores/core.hpp"
#include "msrnn/kernels/gemm.hpp"

#include <algorithm>
#include <map>

namespace msrnn {

enum class HMBoundary { Step, Sample, Soft };
enum HMOp : int { kCopy = 0, kUpdate = 1, kFlush = 2 };

struct HMLSTMOptions {
  HMBoundary boundary = HMBoundary::Step;  // "boundary": "step" | "sample" | "soft"
  bool top_boundary = false;               // "top_boundary": the top layer gets a boundary detector
  bool copy_recompute = false;             // "copy_z": "carry" (false) | "recompute" (true)
  bool flush_cut = true;                   // "flush_cut": r = 1 - z^l_{t-1} on the recurrent term
  bool top_down = true;                    // "top_down": the term z^l_{t-1} U^l_{l+1} h^{l+1}_{t-1} (off: no weight_td)
  std::vector<char> blend;  // (L) "gradient" / "blend_l{l}": z^l read "switch" (0) | "blend" (1); soft forces 1
  std::vector<char> detector_below;      // (L) "detector_below_l{l}": layer l's boundary row reads only the layer below
  double slope = 1.0;                    // "slope": a of the hard sigmoid
  bool layer_norm = false;               // "layer_norm"
  bool skip = true;                      // "skip": gather active columns (1) or the masked path (0)
  double ln_eps = 1e-5;                  // "ln_eps"
  double rate_penalty = 0.0;             // "rate_penalty": lambda of the boundary-rate term (>= 0)
  double rate_weight = 5.0;              // "rate_weight": mu of the boundary-rate target term (>= 0)
  std::vector<double> rate_slack_below;  // "rate_slack_below_l{l}": s_-^l >= 0, the band below r_l that costs
                                         // nothing (L; default 0)
  std::vector<double> rate_slack_above;  // "rate_slack_above_l{l}": s_+^l >= 0, the band above r_l (L; default 0)
  std::vector<double> rate_target;       // "rate_target_l{l}": r_l in [0, 1] per layer, < 0 = no target (L);
                                         // default 0.18 in layer 1 (l = 0), none above
};
// Read the options by name (the registered core "hm_lstm"); unknown names and bad values throw.
HMLSTMOptions hm_lstm_options(CoreOptions& options, Index L);

// zhat = hard_sigm(a) = clamp((slope * a + 1) / 2, 0, 1)   (eq. 9)
template <class S> inline S hard_sigm(S a, S slope) {
  return std::min(S(1), std::max(S(0), (slope * a + S(1)) / S(2)));
}

// The pointwise part of one step for k columns, in the weighted form above.
// act (G, k): in, pre-activations a; out, [i; f; g; o] (and zhat in row 4H when G = 4H+1).
// c, tanh_c, h (H, k) out. cp, hp (H, k) in: c^l_{t-1}, h^l_{t-1}. zp, zb (1, k) in.
template <class S>
void hm_pointwise_forward(MRef<S> act, MRef<S> c, MRef<S> tanh_c, MRef<S> h, CRef<S> cp, CRef<S> hp, CRef<S> zp,
                          CRef<S> zb, S slope);
// da (4H, k) out: gradient of the gate pre-activations. dcp, dhp (H, k) out (overwritten): gradients reaching
// c^l_{t-1}, h^l_{t-1} directly through eq. 2-3. dwU, dwC (1, k) out: gradients of the weights w_U, w_C.
// dh, dc (H, k) in. act, tanh_c, c (the step's c^l_t), cp, hp, zp, zb as in forward.
template <class S>
void hm_pointwise_backward(MRef<S> da, MRef<S> dcp, MRef<S> dhp, MRef<S> dwU, MRef<S> dwC, CRef<S> dh, CRef<S> dc,
                           CRef<S> act, CRef<S> tanh_c, CRef<S> c, CRef<S> cp, CRef<S> hp, CRef<S> zp, CRef<S> zb);

template <class S> class HMLSTM : public Core<S> {
 public:
  HMLSTM(ParamSet<S>& ps, Index E, const std::vector<Index>& hidden, const HMLSTMOptions& opt, Rng* rng);
  Index input_size() const override { return E_; }
  Index output_size() const override { return out_size_; }
  std::vector<Index> output_parts() const override { return H_; }
  void bind(ParamSet<S>& ps) override;
  void forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool train) override;
  void backward(MRef<S> dX, CRef<S> dY, CRef<S> X) override;
  std::vector<NamedState<S>> get_state() const override;
  void set_state(const std::vector<NamedState<S>>& state) override;
  void reset_state(Index B) override;
  // "slope" (> 0), "skip" (0 or 1), "blend" (0 or 1: the gradient reading of every layer), "blend_l{l}" (of
  // layer l), "rate_penalty" (>= 0)
  void set_option(const std::string& name, double value) override;
  std::vector<NamedState<S>> records() const override;
  std::vector<std::pair<std::string, double>> aux_losses() const override;        // "boundary_rate", "boundary_target"
  std::vector<std::pair<std::string, double>> batch_statistics() const override;  // "zbar_l{l}" of layers with a target
  void set_batch_statistics(const std::vector<double>& values) override;
  const HMLSTMOptions& options() const { return opt_; }

 private:
  struct Layer {
    Index H = 0, Hb = 0, Ht = 0, G = 0;  // own size, size below (E or H_{l-1}), size above (0 on top), rows of s
    Index K = 0;                         // Hb + H + Ht: depth of the stacked step product
    bool detector = false;               // has a boundary row
    Param<S> W, U, Utd, b, ln_g, ln_b;   // W (G, Hb), U (G, H), Utd (G, Ht), b (G, 1), ln_g/ln_b (4H, 1)
    Mat<S> h, c, z;                      // (H, B), (H, B), (1, B) carried state
    PackedPanels<S> Wp;                  // [W U Utd] (4H, K) packed, bias b: the gate rows
    Vec<S> wz;                           // (K) [W U Utd] row 4H: the boundary row (detector only)
    PackedPanels<S> WpT;                 // [W U Utd]^T (K, G) packed (backward)
    Mat<S> Wcat;                         // (G, K) [W U Utd], the source of WpT
    // Cache of the last forward.
    Mat<S> hs, cs, zs;            // (H, N + B), (H, N + B), (1, N + B); block 0 is the state before the chunk
    Mat<S> zhat;                  // (1, N) hard-sigmoid boundary value (NaN where not computed; detector only)
    Mat<S> znew;                  // (1, N) boundary before the COPY carry
    std::vector<std::int8_t> op;  // (N) HMOp of each column
    // Training forward only.
    Mat<S> act;                         // (G, N) [i; f; g; o; zhat] of computed columns
    Mat<S> tanh_c;                      // (H, N)
    Mat<S> xhat, rstd;                  // (4H, N), (1, 4N) layer norm; rstd entry q*N + n for gate block q
    std::vector<std::int8_t> computed;  // (N) 1 where the gates were computed
    // Backward buffers.
    Mat<S> dA;                   // (G, N) gradient of the pre-activations s (read at computed columns, and
                                 // at the boundary row of recomputed COPY columns)
    Mat<S> dh[2], dc[2], dz[2];  // (H, B), (H, B), (1, B) gradients at step t (index t % 2) and t-1
  };
  // Step scratch of one thread owning nb streams. The suffix _k marks buffers holding the k <= nb
  // columns of a step that are computed (UPDATE/FLUSH when skipping; all in the masked path), gathered
  // side by side from the thread's streams.
  struct Scratch {
    std::vector<Index> idx, cidx;  // computed / COPY column ids (within the batch)
    Mat<S> x_k;                    // (max K, nb) stacked inputs [zb h^{l-1}_t; r h^l_{t-1}; zp h^{l+1}_{t-1}]
    Mat<S> act_k;                  // (max G, nb) pre-activations, then [i; f; g; o; zhat]
    Mat<S> c_k, tanh_c_k, h_k, c_prev_k, h_prev_k;  // (max H, nb)
    Mat<S> z_prev_k, z_below_k;                     // (1, nb) z^l_{t-1}, z^{l-1}_t
    Mat<S> xhat_k, rstd_k;                          // (4 max H, nb), (1, 4 nb) layer norm
    Mat<S> dh_k, dc_k, dc_prev_k, dh_prev_k;        // (max H, nb)
    Mat<S> dwU_k, dwC_k;                            // (1, nb)
    Mat<S> dz_new;                                  // (1, B) gradient of znew, at the thread's columns
    std::vector<S> dwCz;  // (B) gradient of w_C through the carry (blend), at the thread's columns
    Mat<S> da_k;          // (max G, nb)
    Mat<S> dx_k;          // (max K, nb) [W U Utd]^T da
    Mat<S> act_saved_k, tanh_c_saved_k, c_saved_k;  // (max G, nb), (max H, nb), (max H, nb) the forward's cache
    std::vector<Mat<S>> dln_g, dln_b;               // per layer (4 H_l, 1) layer-norm gradients of this thread
    void reserve(const std::vector<Layer>& layers, Index nb, Index B, bool layer_norm, bool backward);
  };

  // Columns (of a step) whose gates are computed: all in the masked path, UPDATE/FLUSH when skipping.
  bool skipping(bool train) const;
  // A detector layer has a rate target and rate_weight > 0.
  bool has_rate_target() const;
  // Layer l has a detector, a rate target and rate_weight > 0.
  bool has_target(size_t l) const;
  // R_target from zbar_.
  double target_term() const;
  // e_l of the rate-target term: zbar^l - r_l less the slack on its side (0 inside [r_l - s_-, r_l + s_+]).
  double target_excess(size_t l) const;
  // d(R + R_target) / dz^l_t of every column of layer l in the last chunk (the same for all of them).
  double rate_gradient(size_t l) const;
  // Layer l at step t on columns [j0, j0 + nb); fast: packed stacked product, else Eigen products.
  void layer_step_forward(size_t l, Index t, Index j0, Index nb, CRef<S> X, Scratch& s, bool fast);
  void layer_step_backward(size_t l, Index t, Index j0, Index nb, Scratch& s, bool fast);
  // The named steps of forward (hm_lstm_forward.cpp) and backward (hm_lstm_backward.cpp), with their equations there.
  void forward_prepare(Index N, Index B, bool train);
  void draw_uniforms(Index T, Index B);
  void forward_packed(CRef<S> X, Index T, Index B, int nt);
  void forward_rate_terms(Index N, bool train);
  S boundary_of(S zhat, const double* u, Index b) const;
  void step_preactivations(size_t l, Index t, Index k, CRef<S> X, Scratch& s, const S* zp, const S* zb, bool fast);
  void step_layer_norm(size_t l, Index t, Index k, Scratch& s);
  void step_update(size_t l, Index t, Index k, Scratch& s, const S* zp, const S* zb, const double* u);
  void step_copy(size_t l, Index t, Scratch& s, const S* zp, const double* u);
  void weight_gradients(size_t l, CRef<S> X, bool fast);
  S zslope(const Layer& layer, Index n) const;
  void step_boundary_backward(size_t l, Index t, Index j0, Index nb, Scratch& s, const S* zp, const S* zb);
  void step_gates_backward(size_t l, Index t, Index k, Scratch& s, const S* zp, const S* zb);
  void step_inputs_backward(size_t l, Index t, Index k, Scratch& s, const S* zp, const S* zb, bool fast);
  void step_copy_backward(size_t l, Index t, Scratch& s);
  // The active columns s.idx of c^l_{t-1}, h^l_{t-1} (H, B), z^l_{t-1} and z^{l-1}_t (1, B) into
  // s.c_prev_k, s.h_prev_k (H, k), s.z_prev_k, s.z_below_k (1, k).
  void gather_previous(Scratch& s, CRef<S> cp, CRef<S> hp, const S* zp, const S* zb) const;

  Index E_, out_size_, T_ = 0, B_ = 0;
  std::vector<Index> H_;
  HMLSTMOptions opt_;
  Rng* rng_;
  std::vector<Layer> layers_;
  bool train_ = false, skip_ = false;  // mode of the last forward
  std::vector<char> blend_;            // (L) gradient reading of each z^l in the last forward (backward follows it)
  double aux_ = 0.0;                   // boundary-rate term of the last training forward
  double aux_target_ = 0.0;            // boundary-rate target term of the last training forward
  double counted_ = 0.0;               // columns of the last training forward that count (N without padding)
  std::vector<double> zbar_;           // (L) mean of z^l_t over the last training forward's chunk (or over
                                       // the whole batch, set_batch_statistics)
  Mat<S> ones_;                        // (1, B) z^0_t
  std::vector<double> uniforms_;       // (T, L, B) uniforms of Bernoulli boundaries, entry (t L + l) B + b
  std::vector<Scratch> scratch_;       // one per thread
};

}  // namespace msrnn
