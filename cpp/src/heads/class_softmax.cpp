#include "msrnn/heads/class_softmax.hpp"

#include "msrnn/kernels/gemm.hpp"

#include <cmath>

namespace msrnn {

template <class S>
ClassSoftmaxHead<S>::ClassSoftmaxHead(ParamSet<S>& ps, Index I, Index V, const std::vector<Index>& sizes)
    : I_(I), V_(V), C_(Index(sizes.size())) {
  MSRNN_CHECK(C_ >= 1, "the class softmax needs at least one class");
  MSRNN_CHECK(C_ <= V, "the class softmax has ", C_, " classes for a vocabulary of ", V, " symbols");
  start_.assign(C_ + 1, 0);
  for (Index c = 0; c < C_; ++c) {
    MSRNN_CHECK(sizes[c] >= 1, "class ", c, " of the class softmax has size ", sizes[c],
                "; each class needs >= 1 symbol");
    start_[c + 1] = start_[c] + sizes[c];
  }
  MSRNN_CHECK(start_[C_] == V, "the class sizes of the class softmax sum to ", start_[C_],
              ", not to the vocabulary size ", V);
  cls_.resize(V);
  for (Index c = 0; c < C_; ++c)
    for (Index w = start_[c]; w < start_[c + 1]; ++w) cls_[w] = std::int32_t(c);
  U_.id = ps.add("class_decoder.weight", C_, I, {"output", 0, ""});
  u_.id = ps.add("class_decoder.bias", C_, 1, {"output", 0, ""});
  W_.id = ps.add("decoder.weight", V, I, {"output", 0, ""});
  b_.id = ps.add("decoder.bias", V, 1, {"output", 0, ""});
}

template <class S> void ClassSoftmaxHead<S>::bind(ParamSet<S>& ps) {
  U_.bind(ps);
  u_.bind(ps);
  W_.bind(ps);
  b_.bind(ps);
}

namespace {
// z (n) in place -> softmax(z); returns log sum exp(z).
template <class V> double softmax_in_place(V&& z) {
  using S = typename std::decay_t<V>::Scalar;
  const S zmax = z.maxCoeff();
  z = (z.array() - zmax).exp();
  const S sum = z.sum();
  z /= sum;
  return double(zmax) + std::log(double(sum));
}
}  // namespace

template <class S> void ClassSoftmaxHead<S>::forward(MRef<S> Z, CRef<S> Y, Index, Index, bool) {
  const Index N = Y.cols();
  Mat<S> zc(C_, N);  // (C, N) class logits (not pc_, which a pending nll_backward reads)
  linear_forward<S>(zc, U_.w, u_.w, Y);
  linear_forward<S>(Z, W_.w, b_.w, Y);
  auto lse = [](auto&& z) {
    const auto zmax = z.maxCoeff();
    return zmax + std::log((z.array() - zmax).exp().sum());
  };
  parallel_slices(N, 16, [&](Index c0, Index m) {
    for (Index n = c0; n < c0 + m; ++n) {
      const S lse_c = lse(zc.col(n));
      for (Index c = 0; c < C_; ++c) {
        auto z = Z.col(n).segment(start_[c], start_[c + 1] - start_[c]);
        z.array() += (zc(c, n) - lse_c) - lse(z);  // log P(c | y) + log P(w | c, y)
      }
    }
  });
}

template <class S> void ClassSoftmaxHead<S>::backward(MRef<S>, CRef<S>, CRef<S>) {
  MSRNN_CHECK(false, "the class softmax head trains through its own loss (nll, nll_backward), not through full logits");
}

template <class S>
void ClassSoftmaxHead<S>::nll(double* nll, CRef<S> Y, const Targets<S>& tg, Index, Index, bool) {
  const std::int32_t* targets = tg.ids;  // (N)
  const Index N = Y.cols();
  // Class part, all columns: P(c | y_n) and -log P(c(t_n) | y_n).
  pc_.resize(C_, N);
  linear_forward<S>(pc_, U_.w, u_.w, Y);
  parallel_slices(N, 16, [&](Index c0, Index m) {
    for (Index n = c0; n < c0 + m; ++n) {
      const S zc = pc_(cls_[targets[n]], n);  // read before the column becomes probabilities
      nll[n] = softmax_in_place(pc_.col(n)) - double(zc);
    }
  });
  // Columns grouped by their target's class (a counting sort, stable).
  first_.assign(C_ + 1, 0);
  for (Index n = 0; n < N; ++n) ++first_[cls_[targets[n]] + 1];
  for (Index c = 0; c < C_; ++c) first_[c + 1] += first_[c];
  order_.resize(N);
  {
    std::vector<Index> next(first_.begin(), first_.end() - 1);
    for (Index n = 0; n < N; ++n) order_[next[cls_[targets[n]]]++] = n;
  }
  pw_at_.assign(C_ + 1, 0);
  for (Index c = 0; c < C_; ++c) {
    const Index end = pw_at_[c] + (start_[c + 1] - start_[c]) * (first_[c + 1] - first_[c]);
    pw_at_[c + 1] = (end + kBlockAlign - 1) / kBlockAlign * kBlockAlign;  // the next block on a 64-byte boundary
  }
  pw_.resize(pw_at_[C_]);
  // Word part, one product per class over the columns whose target is in it; classes on threads
  // (dynamic: their costs n_c m_c differ), each writing its own block of pw_ and its own nll entries.
  const int nt = get_num_threads();
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
  for (Index c = 0; c < C_; ++c) {
    const Index m = first_[c + 1] - first_[c], s = start_[c], nc = start_[c + 1] - s;
    if (m == 0) continue;
    Mat<S> yg(I_, m);  // (I, m) the class's columns of Y
    for (Index j = 0; j < m; ++j) yg.col(j) = Y.col(order_[first_[c] + j]);
    MatMap<S> pw(pw_.data() + pw_at_[c], nc, m);  // (n_c, m) logits, then P(w | c, y)
    pw.colwise() = b_.w.col(0).segment(s, nc);
    pw.noalias() += W_.w.middleRows(s, nc) * yg;
    for (Index j = 0; j < m; ++j) {
      const Index n = order_[first_[c] + j];
      const S zw = pw(targets[n] - s, j);
      nll[n] += softmax_in_place(pw.col(j)) - double(zw);
    }
  }
}

template <class S>
void ClassSoftmaxHead<S>::nll_backward(MRef<S> dY, CRef<S> Y, const Targets<S>& tg, S scale, const double* weights) {
  const std::int32_t* targets = tg.ids;  // (N)
  const Index N = Y.cols();
  MSRNN_CHECK(pc_.cols() == N && Index(order_.size()) == N, "nll_backward needs a preceding nll over the same ", N,
              " columns");
  auto coef = [&](Index n) { return weights ? S(double(scale) * weights[n]) : scale; };
  // Class part: dz_c = coef_n (P(c | y_n) - [c = c(t_n)]).
  dzc_.resize(C_, N);
  parallel_slices(N, 16, [&](Index c0, Index m) {
    for (Index n = c0; n < c0 + m; ++n) {
      const S k = coef(n);
      dzc_.col(n) = pc_.col(n) * k;
      dzc_(cls_[targets[n]], n) -= k;
    }
  });
  linear_backward_params<S>(U_.g, u_.g, dzc_, Y);
  linear_backward_input<S>(dY, U_.w, dzc_);  // overwrites dY
  // Word part per class: disjoint rows of dW, db and disjoint columns of dY, so classes run on threads.
  const int nt = get_num_threads();
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
  for (Index c = 0; c < C_; ++c) {
    const Index m = first_[c + 1] - first_[c], s = start_[c], nc = start_[c + 1] - s;
    if (m == 0) continue;
    Mat<S> yg(I_, m);  // (I, m) the class's columns of Y
    for (Index j = 0; j < m; ++j) yg.col(j) = Y.col(order_[first_[c] + j]);
    MatMap<S> dz(pw_.data() + pw_at_[c], nc, m);  // (n_c, m) P(w | c, y), then dz_w in place
    for (Index j = 0; j < m; ++j) {
      const Index n = order_[first_[c] + j];
      const S k = coef(n);
      dz.col(j) *= k;
      dz(targets[n] - s, j) -= k;
    }
    W_.g.middleRows(s, nc).noalias() += dz * yg.transpose();
    b_.g.col(0).segment(s, nc) += dz.rowwise().sum();
    Mat<S> dyg(I_, m);  // (I, m)
    dyg.noalias() = W_.w.middleRows(s, nc).transpose() * dz;
    for (Index j = 0; j < m; ++j) dY.col(order_[first_[c] + j]) += dyg.col(j);
  }
  order_.clear();  // one backward per nll
}

template class ClassSoftmaxHead<float>;
template class ClassSoftmaxHead<double>;

}  // namespace msrnn
