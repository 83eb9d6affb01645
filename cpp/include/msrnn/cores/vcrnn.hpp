// Variable Computation RNN and GRU (Jernite, Grave, Joulin & Mikolov, ICLR 2017, Section 4 and
// Appendix A). One layer of D units reading x_t of size D (the embedding, E = D):
//
//   m_t = sigm(u . h_{t-1} + v . x_t + b_m)                                    scheduler (eq. 7)
//   (e_t)_i = Thres_eps(sigm(lambda (m_t D - i - o)))   i = 0..D-1              mask (eq. 8/11)
//             o = 0 (mask_index "zero": m_t = 1 updates every unit) or 1 ("one": eq. 8 with i = 1..D)
//             Thres_eps(s) = 1 if s > 1 - eps, 0 if s < eps, else s
//   h_bar = e_t . h_{t-1},  x_bar = e_t . x_t                                  (eq. 12)
//   VCRNN: h_t = e_t . tanh(U h_bar + V x_bar + b) + (1 - e_t) . h_{t-1}         (eq. 13)
//   VCGRU: r = sigm(U_r h_bar + V_r x_bar + b_r)                                (eq. 14-16)
//          z = e_t . sigm(U_z h_bar + V_z x_bar + b_z)
//          h~ = tanh(U_n (r . h_bar) + V_n x_bar + b_n)          (reset before the product)
//          h_t = z . h~ + (1 - z) . h_{t-1}
//
// Gradients are exact through the sigmoid of the mask (de_i/dm = lambda D e_i (1 - e_i)) and zero
// where Thres clamps (e_i in {0, 1}). The auxiliary term "vc_penalty" is
//   w * mean over the N = T*B columns of f(m_t - m_bar),  f = |.| (l1), max(0, .) (one_sided), (.)^2 (l2).
// m_bar is a fixed target (option "target"), so f applies to each column on its own and the term is a mean
// over the columns: the terms and gradients of parts of a batch, weighted by their shares of the columns, add
// up to the whole batch's, and data-parallel training needs no batch statistics (Core::batch_statistics).
// That is the paper's reading ("close to m_bar at all time", penalty_scope "step"). The other reading of
// Omega(m, m_bar), penalty_scope "batch", applies f once to the mean of m_t over the batch:
//   w * f(mbar_N - m_bar),  mbar_N = mean over the N columns of m_n,
// with the gradient w f'(mbar_N - m_bar) / N on every m_n; mbar_N is a batch statistic ("mean_m").
//
// Skipped work: e is non-increasing in i, so with d_t = 1 + the last i with e_i > 0, units i >= d_t
// keep h_{t-1} and h_bar, x_bar vanish there; a column needs only the leading d_t x d_t block of each
// matrix. Each step sorts its streams by q = min(D, d_t rounded up to `block`); the products run as a
// staircase over the distinct values of q (the levels): the band of rows and the band of columns of each
// matrix between two consecutive levels are multiplied, in one product each, by every stream whose q
// reaches that level, so each entry of a matrix is read once per step and a stream does only its leading
// q x q block. The backward does the same per step; the weight gradients are accumulated once per chunk,
// one product per q over all columns of the chunk with that q. The VCRNN (one matrix per pass, where the
// thin bands of the staircase cost most) instead multiplies packed panels (PackedPanels::multiply_leading):
// [U W] packed per chunk as far as the steps reach (the leading rows and depths only), then per step every
// panel of 16 (float, AVX2) rows runs over the sorted streams that reach it, each stream to exactly its own
// depth q, in one pass for U h_bar + V x_bar; the backward packs U^T and W^T up to the chunk's largest q.
// The Eigen staircase stays as the plain path (reference_kernels()). Outside the steps, once per chunk (the plain
// path does them at each step): the scheduler's v . x_t of every column (vx_) and the gradients of u and v
// (from pms_); an evaluation from token ids (forward_tokens) reads x_t = Emb[:, token] in place, v . x_t from
// the table v Emb. The masks are written on the rows [0, q) the products read. The mask evaluates the sigmoid
// only where Thres_eps can leave it open (other units are exactly 0 or 1). With skip = false every column has
// q = D: the plain masked full computation (tests hold both equal). Threads run over streams
// (over_streams): each thread steps its own streams through the chunk and sorts them by q itself; the
// scheduler's gradients are summed per thread and added in thread order.
#pragma once

#include "msrnn/cores/core.hpp"
#include "msrnn/kernels/gemm.hpp"

#include <array>
#include <atomic>
#include <mutex>

namespace msrnn {

enum class VCUnit { Elman, GRU };
enum class VCPenalty { L1, OneSided, L2 };
// Rows of the "time" record (wall-clock seconds per phase, for benchmarks): each step's time of a phase
// is split evenly over the columns of the streams that ran it, a chunk's (packing, weight gradients) over
// all N columns, so a row's sum is the phase's time summed over the threads.
enum VCPhase : int {
  kFwdScheduler,
  kFwdOperands,
  kFwdProducts,
  kFwdPointwise,
  kFwdPack,
  kBwdScheduler,
  kBwdOperands,
  kBwdProducts,
  kBwdPointwise,
  kBwdPack,
  kBwdWeightGrads,
  kVCPhases
};

struct VCOptions {
  double sharpness = 1.0;  // lambda > 0
  double eps = 0.01;       // Thres_eps, in (0, 0.5)
  int mask_offset = 0;     // o above: 0 ("zero") or 1 ("one")
  VCPenalty penalty = VCPenalty::L1;
  bool penalty_on_mean = false;  // penalty_scope "batch": f of the batch's mean m_t, not the mean of f(m_t)
  double penalty_weight = 0.01;  // w >= 0
  double target = 0.3;           // m_bar in [0, 1]
  bool skip = true;              // products on the leading q x q blocks only
  Index block = 16;              // q is d_t rounded up to a multiple of this
};

// Parameters (G = 1 for the VCRNN, 3 for the VCGRU with gate blocks [r; z; n]):
//   weight_ih_l0 (G*D, D) V,  weight_hh_l0 (G*D, D) U,  bias_l0 (G*D) b,
//   sched_weight_ih_l0 (1, D) v,  sched_weight_hh_l0 (1, D) u,  sched_bias_l0 (1) b_m.
// State: h_l0 (D, B). Records: m (1, N), d (1, N) (d_t as a number), e (D, N), time (kVCPhases, N).
template <class S> class VCLayer : public Core<S> {
 public:
  VCLayer(ParamSet<S>& ps, VCUnit unit, Index E, Index D, const VCOptions& opt);
  Index input_size() const override { return D_; }
  Index output_size() const override { return D_; }
  void bind(ParamSet<S>& ps) override;
  void forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool train) override;
  // Evaluation from token ids (Core::forward_tokens): x_t = Emb[:, token_t] read in place (no embedded (D, N)
  // input) and the scheduler's v . x_t from the table v Emb (1, V). Taken when input_tables() is on, the table
  // pays (input_tables_pay) and the fast kernels are selected; else false.
  bool forward_tokens(MRef<S> Y, CRef<S> Emb, const std::int32_t* tokens, Index T, Index B) override;
  void backward(MRef<S> dX, CRef<S> dY, CRef<S> X) override;
  std::vector<NamedState<S>> get_state() const override;
  void set_state(const std::vector<NamedState<S>>& state) override;
  void reset_state(Index B) override;
  void set_option(const std::string& name, double value) override;
  std::vector<NamedState<S>> records() const override;
  std::vector<std::pair<std::string, double>> aux_losses() const override;
  std::vector<std::pair<std::string, double>> batch_statistics() const override;
  void set_batch_statistics(const std::vector<double>& values) override;

 private:
  const char* unit_name() const { return unit_ == VCUnit::GRU ? "VCGRU" : "VCRNN"; }
  // Mask of column n from m_n: fills e_ rows [0, d) (rows >= d are 0) and open_[n], returns d.
  Index mask_column(Index n, S m);
  // Penalty f(m - m_bar) and its derivative.
  double penalty_value(double m) const;
  double penalty_slope(double m) const;
  // aux_ (and mean_m_) of a forward from the sum pen of its columns' penalties (vcrnn.cpp).
  void set_penalty(double pen, Index N, bool train);
  // Per-thread work buffers: each thread runs its own streams [j0, j0 + nb) through the chunk.
  struct Work {
    std::vector<Index> order;                  // (nb) local columns of a step sorted by q
    Index first = 0;                           // first position of order with q > 0
    std::vector<std::array<Index, 2>> levels;  // (q, first position with that q) per distinct q > 0
    std::vector<Index> qs;                     // (nb - first) q of positions [first, nb), non-decreasing
    // Operands of a step in sorted order, each (D, nb); column k uses its leading q rows:
    Mat<S> hb, xb;                 // h_bar, x_bar
    Mat<S> a[3];                   // pre-activations (forward), their gradients per gate (backward)
    Mat<S> rh;                     // forward: r . h_bar; backward: gradient of r . h_bar
    Mat<S> dhb, de, dhbar, dxbar;  // backward: dL/dh_t rows, dL/de, dL/dh_bar, dL/dx_bar
    Mat<S> dh, dhp, dxl;           // (D, nb) backward: gradients reaching h_t, h_{t-1}, x_t
    Mat<S> pm;                     // (1, nb) scheduler pre-activations / their gradients
    Mat<S> gu, gv;                 // (1, D) this thread's sums of the gradients of u, v
    S gb = S(0);                   // and of b_m
    double pen = 0.0;              // and of the penalty (of m_t itself with penalty_on_mean)
    double pack_s = 0.0;           // seconds this thread spent packing weights
  };
  // Sorts the local columns [0, nb) of a step (global columns n0 + j) by q into w.order, w.first, w.levels, w.qs.
  void group_step(Work& w, Index n0, Index nb) const;
  // One gate's leading (q, q) block of a (G*D, D) matrix.
  auto lead(MatMap<S>& A, Index gate, Index q) { return A.block(gate * D_, 0, q, q); }
  // Weight gradients of the whole chunk, one product per q.
  void accumulate_weight_grads(CRef<S> X);
  // The forward of forward and forward_tokens: X (D, N) the inputs, or with tokens (N) the embedding Emb (D, V).
  void run(MRef<S> Y, CRef<S> X, const std::int32_t* tokens, Index T, Index B, bool train);
  // The scheduler's v . x_t of the whole chunk into vx_ (fast path; vcrnn.cpp), X and tokens as in run.
  void scheduler_input_term(CRef<S> X, const std::int32_t* tokens);
  // The scheduler's u and v gradients of the whole chunk from pms_ (fast path; vcrnn.cpp).
  void scheduler_weight_grads(CRef<S> X);
  // Wall-clock time of consecutive phases (vcrnn.cpp).
  struct PhaseClock;
  // The named steps of forward and backward over one step of a thread's streams (vcrnn.cpp, with the equations).
  // HP, HN, XT: views of h_{t-1}, h_t, x_t (D, nb), columns [n0, n0 + nb) of the chunk; XC: x_col(n), the
  // data of x_t (D) of global column n.
  template <class HP> void forward_scheduler(Work& w, const HP& Hp, Index n0, Index nb);
  template <class HP, class HN, class XC>
  void forward_operands(Work& w, const HP& Hp, HN& Hn, const XC& x_col, Index n0, Index nb);
  template <class HP, class HN>
  void forward_elman(Work& w, const HP& Hp, HN& Hn, Index n0, Index nb, bool packed, PhaseClock& clk,
                     double (&sec)[kVCPhases]);
  template <class HP, class HN>
  void forward_gru(Work& w, const HP& Hp, HN& Hn, Index n0, Index nb, PhaseClock& clk, double (&sec)[kVCPhases]);
  void backward_work(Work& w, Index nb);
  template <class HP> void backward_operands(Work& w, const HP& Hp, Index n0, Index nb);
  template <class HP>
  void backward_elman(Work& w, const HP& Hp, Index n0, Index nb, bool packed, PhaseClock& clk,
                      double (&sec)[kVCPhases]);
  template <class HP>
  void backward_gru(Work& w, const HP& Hp, Index n0, Index nb, PhaseClock& clk, double (&sec)[kVCPhases]);
  template <class HP, class XT>
  void backward_mask(Work& w, const HP& Hp, const XT& Xt, MRef<S>& dxt, Index n0, Index nb, S lamD);
  template <class HP, class XT>
  void backward_scheduler(Work& w, const HP& Hp, const XT& Xt, MRef<S>& dxt, Index n0, Index nb, S pw);

  VCUnit unit_;
  Index G_, D_, T_ = 0, B_ = 0;
  VCOptions opt_;
  Param<S> W_, U_, b_, v_, u_, bm_;
  Mat<S> h_;                 // (D, B) carried state
  Mat<S> hs_;                // (D, N + B) h_{t-1} of every column; block 0 is the state before the chunk
  Mat<S> e_;                 // (D, N) masks e_t; rows >= q of a column unwritten (records() gives their 0)
  Mat<S> m_;                 // (1, N) scheduler values m_t
  Mat<S> vx_;                // (1, N) v . x_t of every column (fast path: before the steps; plain: at each step)
  std::vector<Index> d_;     // (N) d_t
  std::vector<Index> q_;     // (N) q of each column (the rows its products use)
  std::vector<Index> open_;  // (N) first unit with e < 1: units [open, d) are the open ones (0 < e < 1)
  Mat<S> g_;                 // (G*D, N) VCRNN: tanh(a); VCGRU: [r; sigm(a_z); h~]; rows >= q of a column unused
  Mat<S> pms_;               // (1, N) backward: scheduler pre-activation gradients (fast path, per chunk)
  Mat<S> da_;                // (G*D, N) backward: gradients of the pre-activations (rows >= q unused)
  Mat<S> time_;              // (kVCPhases, N) seconds per phase and column (VCPhase)
  double aux_ = 0.0;         // penalty of the last training forward
  double mean_m_ = 0.0;      // penalty_on_mean: mbar_N of the last training forward (or the batch's, set)
  bool trained_ = false;     // whether the last forward was a training one
  std::vector<Work> work_;   // one per thread
  // The VCRNN's skipped products through packed panels (packed_path()): packed once per chunk, then each
  // step multiplies every panel of rows by the streams that reach it (PackedPanels::multiply_leading).
  bool packed_path() const { return unit_ == VCUnit::Elman && opt_.skip && !reference_kernels(); }
  PackedPanels<S> UW_p_;  // [U W] (D, 2D): forward, a = U h_bar + V x_bar in one pass
  // The forward packs [U W] only as far as its steps reach: the panels of the leading packed_ext_ rows, at
  // depths [0, packed_ext_) and [D, D + packed_ext_); a step needing more extends it (under pack_mutex_;
  // the extension writes only entries no step reads before it is published).
  void extend_packing(Index q);
  std::atomic<Index> packed_ext_{0};
  std::mutex pack_mutex_;
  PackedPanels<S> Ut_p_;  // U^T (D, D): backward, dL/dh_bar
  PackedPanels<S> Wt_p_;  // W^T (D, D): backward, dL/dx_bar
};

}  // namespace msrnn
