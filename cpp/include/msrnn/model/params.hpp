// One flat parameter buffer and one flat gradient buffer of the same layout, with named views.
//
// A model registers every tensor (name, rows, cols) before `finalize()`; the buffers are then
// allocated once and never move, so the `Eigen::Map` views that layers take stay valid.
// Optimisers, clipping, checkpoints and NumPy access all act on the two contiguous arrays.
#pragma once

#include "msrnn/model/common.hpp"

#include <string>
#include <vector>

namespace msrnn {

// How a tensor appears in NumPy. The core stores every tensor column-major as (rows, cols).
// numpy_transposed = false: NumPy sees (rows, cols), Fortran order (e.g. weight_ih (4H, E)).
// numpy_transposed = true:  NumPy sees (cols, rows), C order (e.g. an embedding stored (E, V)
//                           appears as PyTorch's (V, E)).
// What a tensor is, exported with it so that initialisers (multiscale_rnn.init) find tensors by
// role instead of by name:
//   kind   "embedding"  token embedding or input encoder weights
//          "input"      weights on a layer's inputs (x_t or the layer below)
//          "recurrent"  weights on a layer's own or other layers' previous states
//          "bias"       additive biases of a layer's pre-activations
//          "gain"       multiplicative gains (layer norm), initialised to 1
//          "shift"      additive shifts (layer norm), initialised to 0
//          "output"     head weights and biases (decoder, output module)
//          "other"      anything else
//   unit   rows of one gate block (the layer's H) when the rows stack gate blocks ([i; f; g; o] of
//          an LSTM: 4 blocks of H), else 0
//   layer  the layer or cell the tensor belongs to (its name suffix: "_l0", "_f1", "_s"), "" for
//          tensors of the model as a whole
struct ParamRole {
  std::string kind = "other";
  Index unit = 0;
  std::string layer;
};

struct ParamInfo {
  std::string name;
  Index offset = 0;  // first element in the flat buffer
  Index rows = 0, cols = 0;
  bool numpy_transposed = false;
  ParamRole role;
  Index size() const { return rows * cols; }
};

template <class S> class ParamSet {
 public:
  // Register a tensor; returns its id. Tensors start on 16-element boundaries (64 bytes in float).
  int add(const std::string& name, Index rows, Index cols, ParamRole role = {}, bool numpy_transposed = false) {
    MSRNN_CHECK(!finalized_, "parameter '", name, "' registered after the buffer was allocated");
    MSRNN_CHECK(rows > 0 && cols > 0, "parameter '", name, "' has an empty shape (", rows, ", ", cols, ")");
    for (const auto& p : info_) MSRNN_CHECK(p.name != name, "parameter name '", name, "' used twice");
    ParamInfo p{name, size_, rows, cols, numpy_transposed, std::move(role)};
    size_ += (p.size() + 15) / 16 * 16;
    info_.push_back(p);
    return static_cast<int>(info_.size()) - 1;
  }
  void finalize() {
    MSRNN_CHECK(!finalized_, "parameter buffer allocated twice");
    data_.setZero(size_);
    grad_.setZero(size_);
    finalized_ = true;
  }
  bool finalized() const { return finalized_; }

  MatMap<S> value(int id) {
    const auto& p = info_.at(id);
    return MatMap<S>(data_.data() + p.offset, p.rows, p.cols);
  }
  MatMap<S> grad(int id) {
    const auto& p = info_.at(id);
    return MatMap<S>(grad_.data() + p.offset, p.rows, p.cols);
  }
  int find(const std::string& name) const {
    for (size_t i = 0; i < info_.size(); ++i)
      if (info_[i].name == name) return static_cast<int>(i);
    return -1;
  }

  Vec<S>& data() { return data_; }       // (size,)
  Vec<S>& grad_data() { return grad_; }  // (size,)
  Index size() const { return size_; }
  const std::vector<ParamInfo>& info() const { return info_; }
  void zero_grad() { grad_.setZero(); }

 private:
  std::vector<ParamInfo> info_;
  Index size_ = 0;
  bool finalized_ = false;
  Vec<S> data_, grad_;
};

// A weight view and its gradient view, as layers hold them.
template <class S> struct Param {
  int id = -1;
  MatMap<S> w{nullptr, 0, 0};
  MatMap<S> g{nullptr, 0, 0};
  void bind(ParamSet<S>& ps) {
    new (&w) MatMap<S>(ps.value(id));
    new (&g) MatMap<S>(ps.grad(id));
  }
};

}  // namespace msrnn
