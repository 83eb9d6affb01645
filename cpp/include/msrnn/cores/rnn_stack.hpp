// A stack of recurrent layers (LSTM, GRU or Elman), layer l feeding layer l+1, with optional
// dropout on the connections between layers (not on the recurrent ones):
//   h^0_t = x_t,   h^l_t = cell_l(m^l * h^{l-1}_t, h^l_{t-1}),   y_t = h^L_t
// where m^l is a fresh inverted-dropout mask per chunk, step and unit (m^1 = 1: input dropout is
// the model's). Parameter and state names carry the layer suffix _l0, _l1, ... as in PyTorch.
#pragma once

#include "msrnn/cores/core.hpp"
#include "msrnn/kernels/blocks.hpp"

#include <memory>
#include <vector>

namespace msrnn {

// The connections between the layers of a stack, with optional dropout on them (not on the
// recurrent ones), one piece of code for every stacked core (RNNStack, HORNN):
//   x^{l0} = X,   x^l = m^l * y^{l-1} (l > l0),   y^l = layer_l(x^l),   Y = y^{L-1}
// m^l a fresh inverted-dropout mask per chunk, step and unit when dropout is on (input dropout is
// the model's). The caller runs its layer l through fwd(l, y^l, x^l) and bwd(l, dx^l, dy^l, x^l).
template <class S> class LayerLinks {
 public:
  // sizes[l]: the output rows H_l of layer l.
  LayerLinks(std::vector<Index> sizes, double p, Rng* rng)
      : sizes_(std::move(sizes)),
        p_(p),
        rng_(rng),
        out_(sizes_.size()),
        in_(sizes_.size()),
        mask_(sizes_.size()),
        grad_(sizes_.size()) {}
  bool dropped() const { return dropped_; }  // masks in use in the last forward
  Mat<S>& output(size_t l) { return out_[l]; }

  // Layers l0..L-1 of a chunk of N columns, X feeding layer l0; masks drawn when `dropped`.
  template <class Fwd> void forward(size_t l0, MRef<S> Y, CRef<S> X, Index N, bool dropped, Fwd&& fwd) {
    const size_t L = sizes_.size();
    dropped_ = dropped && p_ > 0.0 && L > 1;
    for (size_t l = l0; l < L; ++l) {
      if (l + 1 < L) out_[l].resize(sizes_[l], N);
      MRef<S> y = (l + 1 < L) ? MRef<S>(out_[l]) : Y;
      if (l == l0) {
        fwd(l, y, X);
      } else if (dropped_) {
        mask_[l].resize(out_[l - 1].rows(), N);
        dropout_mask<S>(mask_[l], p_, *rng_);
        in_[l] = out_[l - 1].cwiseProduct(mask_[l]);
        fwd(l, y, CRefV<S>(in_[l]));
      } else {
        fwd(l, y, CRefV<S>(out_[l - 1]));
      }
    }
  }

  // From the top layer down to layer 0 (X: the input of the last forward, read by layer 0).
  template <class Bwd> void backward(MRef<S> dX, CRef<S> dY, CRef<S> X, Bwd&& bwd) {
    const size_t L = sizes_.size();
    for (size_t l = L; l-- > 0;) {
      const CRefV<S> dy = (l + 1 < L) ? CRefV<S>(grad_[l]) : CRefV<S>(dY);
      if (l == 0) {
        bwd(l, dX, dy, X);
      } else {
        grad_[l - 1].resize(sizes_[l - 1], dy.cols());
        bwd(l, MRef<S>(grad_[l - 1]), dy, CRefV<S>(dropped_ ? in_[l] : out_[l - 1]));
        if (dropped_) grad_[l - 1].array() *= mask_[l].array();
      }
    }
  }

 private:
  std::vector<Index> sizes_;
  double p_;
  Rng* rng_;
  bool dropped_ = false;
  std::vector<Mat<S>> out_;   // out_[l] (H_l, N): output of layer l, l < L-1
  std::vector<Mat<S>> in_;    // in_[l] (H_{l-1}, N): masked input of layer l >= 1 (when dropout is on)
  std::vector<Mat<S>> mask_;  // mask_[l] (H_{l-1}, N)
  std::vector<Mat<S>> grad_;  // grad_[l] (H_l, N): backward, the gradient reaching layer l's output
};

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
  std::vector<std::unique_ptr<Core<S>>> layers_;
  std::unique_ptr<LayerLinks<S>> links_;  // between-layer buffers and dropout
  void forward_from(size_t l0, MRef<S> Y, CRef<S> X, Index T, Index B, bool train);  // layers l0.. (X feeds l0)
};

}  // namespace msrnn
