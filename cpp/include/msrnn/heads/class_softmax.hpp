// Class-based softmax (Mikolov et al. 2011, "Extensions of recurrent neural network language
// model"), an exact, normalised head any core can use. The vocabulary [0, V) is cut into C classes
// of consecutive ids, class c = [s_c, s_{c+1}) with sizes n_c given by the config. With ids in
// descending training frequency, frequency binning (equal probability mass per class, C ~ sqrt(V);
// multiscale_rnn.data.class_sizes) makes classes of few frequent words and classes of many rare ones.
// For the core's output y (I) and a word w in class c(w):
//   P(w | y)       = P(c(w) | y) P(w | c(w), y)
//   P(c | y)       = softmax(U y + u)[c]                     class_decoder.weight U (C, I), class_decoder.bias u (C)
//   P(w | c, y)    = softmax over w' in c of (W_w' y + b_w')  decoder.weight W (V, I), decoder.bias b (V)
// The loss of one target (nll) costs C + n_c rows of products instead of V; forward (all V
// log-probabilities, for sampling and inspection) costs C + V. forward's Z holds log P(w | y): the
// logits are normalised, so softmax(Z) = exp(Z) is the model's distribution.
#pragma once

#include "msrnn/heads/head.hpp"

#include <vector>

namespace msrnn {

template <class S> class ClassSoftmaxHead : public Head<S> {
 public:
  // sizes: n_0..n_{C-1}, each >= 1, summing to V.
  ClassSoftmaxHead(ParamSet<S>& ps, Index I, Index V, const std::vector<Index>& sizes);
  Index input_size() const override { return I_; }
  Index output_size() const override { return V_; }
  void bind(ParamSet<S>& ps) override;
  void forward(MRef<S> Z, CRef<S> Y, Index T, Index B, bool train) override;
  // Training goes through nll / nll_backward (the full logits are never formed): refuses.
  void backward(MRef<S> dY, CRef<S> dZ, CRef<S> Y) override;
  void nll(double* nll, CRef<S> Y, const Targets<S>& targets, Index T, Index B, bool train) override;
  void nll_backward(MRef<S> dY, CRef<S> Y, const Targets<S>& targets, S scale, const double* weights) override;

 private:
  Index I_, V_, C_;
  std::vector<Index> start_;       // (C + 1) first id of each class, then V
  std::vector<std::int32_t> cls_;  // (V) class of each id
  Param<S> U_, u_, W_, b_;
  Mat<S> pc_;                 // (C, N) class logits, then P(c | y_n)
  std::vector<Index> order_;  // (N) columns grouped by their target's class
  std::vector<Index> first_;  // (C + 1) order_[first_[c] .. first_[c+1]) have targets in class c
  std::vector<Index> pw_at_;  // (C + 1) offset of class c's block in pw_, a multiple of kBlockAlign
  // (pw_at_[C]) blocks (n_c, m_c), column-major: P(w | c, y) over the class's words. Eigen-aligned, each block
  // starting on a 64-byte boundary: the products over a block then take the same vector path whatever the heap
  // addresses, so two runs of the same model and data agree bit for bit in one process too.
  Vec<S> pw_;
  static constexpr Index kBlockAlign = Index(64 / sizeof(S));
  Mat<S> dzc_;  // (C, N) backward
};

}  // namespace msrnn
