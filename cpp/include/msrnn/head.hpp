// Output heads: map the core's output Y (I, N) to logits Z (V, N). The softmax cross-entropy on top
// is the model's (blocks.hpp), so every head works with every loss.
#pragma once

#include "msrnn/blocks.hpp"
#include "msrnn/params.hpp"

namespace msrnn {

template <class S> class Head {
 public:
  virtual ~Head() = default;
  virtual Index input_size() const = 0;   // I
  virtual Index output_size() const = 0;  // V
  virtual void bind(ParamSet<S>& ps) = 0;
  // Z (V, N) out, Y (I, N) in. With train = true, keeps what backward needs.
  virtual void forward(MRef<S> Z, CRef<S> Y, Index T, Index B, bool train) = 0;
  // dY (I, N) out, dZ (V, N) in, Y the forward input. Accumulates parameter gradients.
  virtual void backward(MRef<S> dY, CRef<S> dZ, CRef<S> Y) = 0;
  // Named matrices the last forward recorded (e.g. output gates), each (rows, N); none by default.
  virtual std::vector<NamedState<S>> records() const { return {}; }
};

// Softmax head: Z = W Y + b, PyTorch names decoder.weight (V, I) and decoder.bias (V).
template <class S> class LinearHead : public Head<S> {
 public:
  LinearHead(ParamSet<S>& ps, Index I, Index V);
  Index input_size() const override { return I_; }
  Index output_size() const override { return V_; }
  void bind(ParamSet<S>& ps) override;
  void forward(MRef<S> Z, CRef<S> Y, Index T, Index B, bool train) override;
  void backward(MRef<S> dY, CRef<S> dZ, CRef<S> Y) override;

 private:
  Index I_, V_;
  Param<S> W_, b_;
};

}  // namespace msrnn
