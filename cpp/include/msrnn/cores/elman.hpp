// Elman RNN with tanh, PyTorch's nn.RNN names:
//   h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)                    (H, B)
#pragma once

#include "msrnn/cores/core.hpp"

namespace msrnn {

// One Elman layer over a chunk. Parameters: weight_ih (H, E), weight_hh (H, H), bias_ih (H),
// bias_hh (H). State: h (H, B).
template <class S> class ElmanLayer : public Core<S> {
 public:
  ElmanLayer(ParamSet<S>& ps, const std::string& suffix, Index E, Index H);
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
  Mat<S> h_;   // (H, B) carried state
  Mat<S> hs_;  // (H, N + B) block 0 is the state before the chunk
  Mat<S> da_;  // (H, N) backward
};

}  // namespace msrnn
