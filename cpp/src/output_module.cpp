#include "msrnn/output_module.hpp"

namespace msrnn {

template <class S>
GatedOutputHead<S>::GatedOutputHead(ParamSet<S>& ps, const std::vector<Index>& parts, Index He, Index V)
    : parts_(parts), He_(He), V_(V) {
  MSRNN_CHECK(!parts.empty(), "the gated output module needs at least one input part");
  for (Index p : parts) {
    MSRNN_CHECK(p > 0, "gated output module input parts must be positive, got ", p);
    I_ += p;
  }
  MSRNN_CHECK(He > 0, "the gated output module needs a positive head_size (output embedding), got ", He);
  MSRNN_CHECK(V > 0, "vocabulary size must be positive, got ", V);
  Wg_.id = ps.add("output.gate.weight", Index(parts.size()), I_);
  We_.id = ps.add("output.embed.weight", He, I_);
  Wd_.id = ps.add("decoder.weight", V, He);
  bd_.id = ps.add("decoder.bias", V, 1);
}

template <class S> void GatedOutputHead<S>::bind(ParamSet<S>& ps) {
  for (auto* p : {&Wg_, &We_, &Wd_, &bd_}) p->bind(ps);
}

template <class S> void GatedOutputHead<S>::forward(MRef<S> Z, CRef<S> Y, Index, Index, bool) {
  MSRNN_CHECK(Y.rows() == I_, "gated output module input has ", Y.rows(), " rows, expected ", I_);
  const Index N = Y.cols();
  g_.resize(Index(parts_.size()), N);
  g_.noalias() = Wg_.w * Y;
  g_.array() = g_.array().logistic();
  yg_.resize(I_, N);
  Index row = 0;
  for (size_t l = 0; l < parts_.size(); ++l) {
    yg_.middleRows(row, parts_[l]) = Y.middleRows(row, parts_[l]) * g_.row(l).asDiagonal();
    row += parts_[l];
  }
  e_.resize(He_, N);
  e_.noalias() = We_.w * yg_;
  e_.array() = e_.array().max(S(0));
  linear_forward<S>(Z, Wd_.w, bd_.w, e_);
}

template <class S> void GatedOutputHead<S>::backward(MRef<S> dY, CRef<S> dZ, CRef<S> Y) {
  const Index N = Y.cols();
  linear_backward_params<S>(Wd_.g, bd_.g, dZ, e_);
  de_.resize(He_, N);
  linear_backward_input<S>(de_, Wd_.w, dZ);
  de_.array() *= (e_.array() > S(0)).template cast<S>();
  We_.g.noalias() += de_ * yg_.transpose();
  dyg_.resize(I_, N);
  dyg_.noalias() = We_.w.transpose() * de_;
  dg_.resize(Index(parts_.size()), N);
  Index row = 0;
  for (size_t l = 0; l < parts_.size(); ++l) {
    const Index p = parts_[l];
    dg_.row(l) = Y.middleRows(row, p).cwiseProduct(dyg_.middleRows(row, p)).colwise().sum();
    dY.middleRows(row, p) = dyg_.middleRows(row, p) * g_.row(l).asDiagonal();
    row += p;
  }
  dg_.array() *= g_.array() * (S(1) - g_.array());
  Wg_.g.noalias() += dg_ * Y.transpose();
  dY.noalias() += Wg_.w.transpose() * dg_;
}

template class GatedOutputHead<float>;
template class GatedOutputHead<double>;

}  // namespace msrnn
