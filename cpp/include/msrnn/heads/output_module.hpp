// The gated output module of the HM-LSTM paper (eq. 11-12), a head any core can use. The core's output
// Y (I, N) is split into parts [h^1; ...; h^L] of sizes I_1..I_L (Core::output_parts()):
//   g^l_t = sigm(w^l [h^1_t; ...; h^L_t])              output.gate.weight (L, I), row l = w^l, no bias
//   h^e_t = ReLU(sum_l g^l_t W^e_l h^l_t)              output.embed.weight (He, I) = [W^e_1 ... W^e_L], no bias
//   z_t   = W_d h^e_t + b_d                            decoder.weight (V, He), decoder.bias (V)
// then the model's softmax. Records "gate" (L, N): the g^l_t of the last forward.
#pragma once

#include "msrnn/heads/head.hpp"

#include <vector>

namespace msrnn {

template <class S> class GatedOutputHead : public Head<S> {
 public:
  GatedOutputHead(ParamSet<S>& ps, const std::vector<Index>& parts, Index He, Index V);
  Index input_size() const override { return I_; }
  Index output_size() const override { return V_; }
  void bind(ParamSet<S>& ps) override;
  void forward(MRef<S> Z, CRef<S> Y, Index T, Index B, bool train) override;
  void backward(MRef<S> dY, CRef<S> dZ, CRef<S> Y) override;
  std::vector<NamedState<S>> records() const override { return {{"gate", g_}}; }

 private:
  std::vector<Index> parts_;
  Index I_ = 0, He_, V_;
  Param<S> Wg_, We_, Wd_, bd_;
  Mat<S> g_;    // (L, N) gates
  Mat<S> yg_;   // (I, N) gated input [g^1 h^1; ...; g^L h^L]
  Mat<S> e_;    // (He, N) output embedding after ReLU
  Mat<S> de_;   // (He, N) backward
  Mat<S> dyg_;  // (I, N) backward
  Mat<S> dg_;   // (L, N) backward
};

}  // namespace msrnn
