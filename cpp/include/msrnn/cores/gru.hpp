// GRU, with PyTorch's gate order (r, z, n) and parameter names:
//   ax_t = W_ih x_t + b_ih,  ah_t = W_hh h_{t-1} + b_hh                  (3H, B) each
//   r = sigm(ax_r + ah_r)   z = sigm(ax_z + ah_z)
//   n = tanh(ax_n + r * ah_n)
//   h_t = (1 - z) * n + z * h_{t-1}
#pragma once

#include "msrnn/cores/core.hpp"

namespace msrnn {

// The gate math of one step, written once, gate by gate. act (3H, B): in, ax_t; out, [r; z; n].
// ah (3H, B) in. h (H, B) out; h_prev (H, B) in. norm(k) is called on gate k's pre-activation
// (rows [kH, (k+1)H) of act: ax_r + ah_r, ax_z + ah_z, ax_n + r * ah_n) just before its
// nonlinearity, so a caller can normalise it in place (StepCell's layer norm); a no-op otherwise.
template <class S, class Norm>
void gru_gates_forward(MRef<S> act, MRef<S> h, CRef<S> ah, CRef<S> h_prev, Norm&& norm) {
  const Index H = h.rows();
  auto r = act.topRows(H).array();
  auto z = act.middleRows(H, H).array();
  auto n = act.bottomRows(H).array();
  r += ah.topRows(H).array();
  norm(0);
  r = r.logistic();
  z += ah.middleRows(H, H).array();
  norm(1);
  z = z.logistic();
  n += r * ah.bottomRows(H).array();
  norm(2);
  n = n.tanh();
  h.array() = (S(1) - z) * n + z * h_prev.array();
}
// dax, dah (3H, B) out: gradients of ax_t and ah_t. dh_prev (H, B) out: the direct part z * dh.
// dh (H, B) in. act, ah, h_prev as in forward. norm_back(k) is called once the gradient of gate
// k's nonlinearity input is in rows [kH, (k+1)H) of dax, to carry it back through the caller's
// normalisation in place (the mirror of norm in gru_gates_forward).
template <class S, class Norm>
void gru_gates_backward(MRef<S> dax, MRef<S> dah, MRef<S> dh_prev, CRef<S> dh, CRef<S> act, CRef<S> ah, CRef<S> h_prev,
                        Norm&& norm_back) {
  const Index H = dh.rows();
  const auto r = act.topRows(H).array();
  const auto z = act.middleRows(H, H).array();
  const auto n = act.bottomRows(H).array();
  auto dan = dax.bottomRows(H).array();
  dan = dh.array() * (S(1) - z) * (S(1) - n.square());
  norm_back(2);  // d(ax_n + r * ah_n)
  dah.bottomRows(H).array() = dan * r;
  dax.topRows(H).array() = dan * ah.bottomRows(H).array() * r * (S(1) - r);  // d(ax_r + ah_r)
  norm_back(0);
  dax.middleRows(H, H).array() = dh.array() * (h_prev.array() - n) * z * (S(1) - z);  // d(ax_z + ah_z)
  norm_back(1);
  dah.topRows(2 * H) = dax.topRows(2 * H);
  dh_prev.array() = dh.array() * z;
}
// The same without normalisation.
template <class S> void gru_pointwise_forward(MRef<S> act, MRef<S> h, CRef<S> ah, CRef<S> h_prev);
template <class S>
void gru_pointwise_backward(MRef<S> dax, MRef<S> dah, MRef<S> dh_prev, CRef<S> dh, CRef<S> act, CRef<S> ah,
                            CRef<S> h_prev);

// One GRU layer over a chunk. Parameters: weight_ih (3H, E), weight_hh (3H, H), bias_ih (3H),
// bias_hh (3H). State: h (H, B).
template <class S> class GRULayer : public Core<S> {
 public:
  GRULayer(ParamSet<S>& ps, const std::string& suffix, Index E, Index H);
  Index input_size() const override { return E_; }
  Index output_size() const override { return H_; }
  void bind(ParamSet<S>& ps) override;
  void forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool train) override;
  void backward(MRef<S> dX, CRef<S> dY, CRef<S> X) override;
  std::vector<NamedState<S>> get_state() const override;
  void set_state(const std::vector<NamedState<S>>& state) override;
  void reset_state(Index B) override;

 private:
  Index E_, H_, T_ = 0, B_ = 0;
  std::string suffix_;
  Param<S> W_ih_, W_hh_, b_ih_, b_hh_;
  Mat<S> h_;          // (H, B) carried state
  Mat<S> act_;        // (3H, N) [r; z; n]
  Mat<S> ah_;         // (3H, N) W_hh h_{t-1} + b_hh
  Mat<S> hs_;         // (H, N + B) block 0 is the state before the chunk
  Mat<S> dax_, dah_;  // (3H, N) backward
};

}  // namespace msrnn
