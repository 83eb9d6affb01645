// GRU, with PyTorch's gate order (r, z, n) and parameter names:
//   ax_t = W_ih x_t + b_ih,  ah_t = W_hh h_{t-1} + b_hh                  (3H, B) each
//   r = sigm(ax_r + ah_r)   z = sigm(ax_z + ah_z)
//   n = tanh(ax_n + r * ah_n)
//   h_t = (1 - z) * n + z * h_{t-1}
#pragma once

#include "msrnn/core.hpp"

namespace msrnn {

// act (3H, B): in, ax_t; out, [r; z; n]. ah (3H, B) in. h (H, B) out; h_prev (H, B) in.
template <class S> void gru_pointwise_forward(MRef<S> act, MRef<S> h, CRef<S> ah, CRef<S> h_prev);
// dax, dah (3H, B) out: gradients of ax_t and ah_t. dh_prev (H, B) out: the direct part z * dh.
// dh (H, B) in. act, ah, h_prev as in forward.
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
  Mat<S> h_;        // (H, B) carried state
  Mat<S> act_;      // (3H, N) [r; z; n]
  Mat<S> ah_;       // (3H, N) W_hh h_{t-1} + b_hh
  Mat<S> hs_;       // (H, N + B) block 0 is the state before the chunk
  Mat<S> dax_, dah_;  // (3H, N) backward
};

}  // namespace msrnn
