#include "msrnn/heads/output_module.hpp"

#include "msrnn/kernels/blocks.hpp"
#include "msrnn/kernels/gemm.hpp"

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
  Wg_.id = ps.add("output.gate.weight", Index(parts.size()), I_, {"output", 0, ""});
  We_.id = ps.add("output.embed.weight", He, I_, {"output", 0, ""});
  Wd_.id = ps.add("decoder.weight", V, He, {"output", 0, ""});
  bd_.id = ps.add("decoder.bias", V, 1, {"output", 0, ""});
}

template <class S> void GatedOutputHead<S>::bind(ParamSet<S>& ps) {
  for (auto* p : {&Wg_, &We_, &Wd_, &bd_}) p->bind(ps);
}

// The products over all columns run on the core's threads, split by columns (or, for weight gradients,
// by rows of the gradient), with single-threaded Eigen inside (gemm.hpp).
template <class S> void GatedOutputHead<S>::forward(MRef<S> Z, CRef<S> Y, Index, Index, bool) {
  MSRNN_CHECK(Y.rows() == I_, "gated output module input has ", Y.rows(), " rows, expected ", I_);
  const Index N = Y.cols();
  g_.resize(Index(parts_.size()), N);
  yg_.resize(I_, N);
  e_.resize(He_, N);
  parallel_slices(N, 16, [&](Index c0, Index n) {
    auto g = g_.middleCols(c0, n);
    g.noalias() = Wg_.w * Y.middleCols(c0, n);
    g.array() = g.array().logistic();
    Index row = 0;
    for (size_t l = 0; l < parts_.size(); ++l) {
      yg_.block(row, c0, parts_[l], n) = Y.block(row, c0, parts_[l], n) * g.row(l).asDiagonal();
      row += parts_[l];
    }
    auto e = e_.middleCols(c0, n);
    e.noalias() = We_.w * yg_.middleCols(c0, n);
    e.array() = e.array().max(S(0));
  });
  linear_forward<S>(Z, Wd_.w, bd_.w, e_);
}

template <class S> void GatedOutputHead<S>::backward(MRef<S> dY, CRef<S> dZ, CRef<S> Y) {
  const Index N = Y.cols();
  linear_backward_params<S>(Wd_.g, bd_.g, dZ, e_);
  de_.resize(He_, N);
  linear_backward_input<S>(de_, Wd_.w, dZ);
  dyg_.resize(I_, N);
  dg_.resize(Index(parts_.size()), N);
  parallel_slices(N, 16, [&](Index c0, Index n) {
    auto de = de_.middleCols(c0, n);
    de.array() *= (e_.middleCols(c0, n).array() > S(0)).template cast<S>();
    auto dyg = dyg_.middleCols(c0, n);
    dyg.noalias() = We_.w.transpose() * de;
    auto g = g_.middleCols(c0, n);
    auto dg = dg_.middleCols(c0, n);
    Index row = 0;
    for (size_t l = 0; l < parts_.size(); ++l) {
      const Index p = parts_[l];
      dg.row(l) = Y.block(row, c0, p, n).cwiseProduct(dyg.middleRows(row, p)).colwise().sum();
      dY.block(row, c0, p, n) = dyg.middleRows(row, p) * g.row(l).asDiagonal();
      row += p;
    }
    dg.array() *= g.array() * (S(1) - g.array());
    dY.middleCols(c0, n).noalias() += Wg_.w.transpose() * dg;
  });
  parallel_slices(I_, 16, [&](Index r0, Index n) {
    We_.g.middleCols(r0, n).noalias() += de_ * yg_.middleRows(r0, n).transpose();
    Wg_.g.middleCols(r0, n).noalias() += dg_ * Y.middleRows(r0, n).transpose();
  });
}

template class GatedOutputHead<float>;
template class GatedOutputHead<double>;

}  // namespace msrnn
