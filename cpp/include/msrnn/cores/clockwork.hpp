// Clockwork RNN (Koutník, Greff, Gomez & Schmidhuber, "A Clockwork RNN", ICML 2014), the fixed-
// timescale baseline of the multiscale papers (Chung et al. 2017, Table 1: CW-RNN 1.46 BPC on PTB).
//
// The H hidden units are split into g modules of k = H / g units, module i (i = 0..g-1) with
// period T_i = base^i. At step t only the modules with t mod T_i = 0 run; the others keep their
// state. Module i reads its own units and every slower module's (W_H is block upper triangular):
//   a^i_t = W_I^i x_t + b_ih^i + b_hh^i + sum_{j >= i} W_H^{ij} h^j_{t-1}
//   h^i_t = tanh(a^i_t)   if t mod T_i = 0,   h^i_t = h^i_{t-1}   otherwise
// With base an integer the running modules are always the first m_t (T_{i-1} divides T_i), so a
// step does exactly the work of its running modules: the first m_t k rows of W_I, and module i's
// k rows of W_H over columns i k .. H. The blocks of W_H below the block diagonal (j < i) are never
// read and get zero gradient.
//
// The clock t counts the steps since the state was reset, starting at 0 (every module reads the
// first input; the paper does not say where t starts). It is part of the carried state ("clock",
// one value per stream, equal across streams) so that TBPTT chunks continue the schedule.
// With g = 1 the model is the Elman RNN (PyTorch's nn.RNN with tanh).
#pragma once

#include "msrnn/cores/core.hpp"

namespace msrnn {

template <class S> class ClockworkRNN : public Core<S> {
 public:
  // E input size, H hidden size (a multiple of g), g modules, periods base^i.
  ClockworkRNN(ParamSet<S>& ps, Index E, Index H, Index g, Index base);
  Index input_size() const override { return E_; }
  Index output_size() const override { return H_; }
  void bind(ParamSet<S>& ps) override;
  void forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool train) override;
  void backward(MRef<S> dX, CRef<S> dY, CRef<S> X) override;
  std::vector<NamedState<S>> get_state() const override;
  void set_state(const std::vector<NamedState<S>>& state) override;
  void reset_state(Index B) override;
  // "modules_run" (1, T*B): m_t, the number of modules that ran at each step of the last forward.
  std::vector<NamedState<S>> records() const override;

  // m_t for clock value t: the modules i with t mod base^i = 0 (always the first m_t).
  Index modules_running(long long t) const;

 private:
  Index E_, H_, g_, k_, base_, T_ = 0, B_ = 0;
  long long clock_ = 0;  // t of the next step
  Param<S> W_ih_, W_hh_, b_ih_, b_hh_;
  Mat<S> h_;                    // (H, B) carried state
  Mat<S> hs_;                   // (H, N + B) block 0 is the state before the chunk, block t+1 is h_t
  Mat<S> da_;                   // (H, N) backward: dL/da_t, zero on the rows of modules that did not run
  std::vector<Index> running_;  // (T) m_t of the last forward
};

}  // namespace msrnn
