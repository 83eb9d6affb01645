// Output heads: map the core's output Y (I, N) to logits Z (V, N), whose softmax is the model's
// distribution over the V symbols. A head also owns its loss: by default the softmax cross-entropy
// of its logits (blocks.hpp); a head may override it with a cheaper exact form (class_softmax.hpp),
// or with another distribution over real-valued targets (the mixture density head, mdn.hpp).
#pragma once

#include "msrnn/kernels/blocks.hpp"
#include "msrnn/model/params.hpp"

namespace msrnn {

// Throws std::out_of_range naming the first id outside [0, V) with its stream and step.
void check_tokens(const std::int32_t* tokens, Index T, Index B, Index V, const char* what);

// What a loss compares the head's output with, step-major (n = t*B + b): class ids for the softmax
// heads, or real vectors for a head with target_size() = D > 0.
template <class S> struct Targets {
  const std::int32_t* ids = nullptr;  // (N) ids in [0, V)
  const S* values = nullptr;          // (D, N) real vectors
};

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
  // D of real-valued targets (D, N); 0 for class ids (the default).
  virtual Index target_size() const { return 0; }
  // Throws std::invalid_argument / std::out_of_range naming the first bad target by stream and step:
  // by default an id outside [0, output_size()).
  virtual void check_targets(const Targets<S>& targets, Index T, Index B) const;

  // The loss the model trains and evaluates: nll (N) out, nll_n = -log p(targets_n | y_n).
  // With train = true, keeps what nll_backward needs. Default: the softmax cross-entropy of
  // forward's logits (all V of them) against targets.ids (N) in [0, V).
  virtual void nll(double* nll, CRef<S> Y, const Targets<S>& targets, Index T, Index B, bool train);
  // After nll(train = true) on the same Y and targets: dY (I, N) out, the gradient of
  //   L = scale * sum_n w_n nll_n     (w_n = weights[n], or 1 without weights);
  // accumulates parameter gradients.
  virtual void nll_backward(MRef<S> dY, CRef<S> Y, const Targets<S>& targets, S scale, const double* weights);

 private:
  Mat<S> p_;  // (V, N) default loss: logits, then probabilities, then dZ
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
