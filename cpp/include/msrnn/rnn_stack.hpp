// A stack of recurrent layers (LSTM, GRU or Elman), layer l feeding layer l+1, with optional
// dropout on the connections between layers (not on the recurrent ones):
//   h^0_t = x_t,   h^l_t = cell_l(m^l * h^{l-1}_t, h^l_{t-1}),   y_t = h^L_t
// where m^l is a fresh inverted-dropout mask per chunk, step and unit (m^1 = 1: input dropout is
// the model's). Parameter and state names carry the layer suffix _l0, _l1, ... as in PyTorch.
#pragma once

#include "msrnn/core.hpp"

namespace msrnn {

enum class CellType { LSTM, GRU, Elman };
CellType cell_type_from_name(const std::string& name);  // "lstm", "gru", "rnn_tanh"/"elman"

template <class S> std::unique_ptr<Core<S>> make_cell_layer(CellType cell, ParamSet<S>& ps, const std::string& suffix,
                                                           Index E, Index H);

template <class S> class RNNStack : public Core<S> {
 public:
  RNNStack(ParamSet<S>& ps, CellType cell, Index E, const std::vector<Index>& hidden, double dropout, Rng* rng);
  Index input_size() const override { return E_; }
  Index output_size() const override { return layers_.back()->output_size(); }
  void bind(ParamSet<S>& ps) override;
  void forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool train) override;
  void backward(MRef<S> dX, CRef<S> dY, CRef<S> X) override;
  // The first layer's table path (an LSTM's), then the other layers as in forward.
  bool forward_tokens(MRef<S> Y, CRef<S> Emb, const std::int32_t* tokens, Index T, Index B) override;
  std::vector<NamedState<S>> get_state() const override;
  void set_state(const std::vector<NamedState<S>>& state) override;
  void reset_state(Index B) override;
  // Every layer's; refused (and nothing changed) unless every layer accepts it.
  void set_inference_precision(Precision p) override;

 private:
  Index E_;
  CellType cell_;
  double p_;
  Rng* rng_;
  bool dropped_ = false;                        // masks in use in the last forward
  std::vector<std::unique_ptr<Core<S>>> layers_;
  std::vector<Mat<S>> out_;    // out_[l] (H_l, N): output of layer l, l < L-1
  std::vector<Mat<S>> in_;     // in_[l] (H_{l-1}, N): masked input of layer l >= 1 (when dropout is on)
  std::vector<Mat<S>> mask_;   // mask_[l] (H_{l-1}, N)
  std::vector<Mat<S>> grad_;   // grad_[l] (H_l, N): backward buffers
  void forward_from(size_t l0, MRef<S> Y, CRef<S> X, Index T, Index B, bool train);  // layers l0.. (X feeds l0)
};

}  // namespace msrnn
