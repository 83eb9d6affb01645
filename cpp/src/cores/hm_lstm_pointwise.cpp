// HM-LSTM (hm_lstm.hpp): the pointwise kernels of one step (eq. 2-3 in the weighted form, eq. 9).
#include "msrnn/cores/hm_lstm.hpp"

#include <cmath>
#include <limits>

namespace msrnn {

template <class S>
void hm_pointwise_forward(MRef<S> act, MRef<S> c, MRef<S> tanh_c, MRef<S> h, CRef<S> cp, CRef<S> hp, CRef<S> zp,
                          CRef<S> zb, S slope) {
  const Index H = c.rows();
  auto i = act.topRows(H).array();
  auto f = act.middleRows(H, H).array();
  auto g = act.middleRows(2 * H, H).array();
  auto o = act.middleRows(3 * H, H).array();
  i = i.logistic();
  f = f.logistic();
  g = g.tanh();
  o = o.logistic();
  if (act.rows() > 4 * H)
    for (Index j = 0; j < act.cols(); ++j) act(4 * H, j) = hard_sigm(act(4 * H, j), slope);
  for (Index j = 0; j < c.cols(); ++j) {
    const S wC = (S(1) - zp(0, j)) * (S(1) - zb(0, j)), wU = (S(1) - zp(0, j)) * zb(0, j);
    c.col(j).array() =
        (S(1) - wC) * (i.col(j) * g.col(j)) + wU * (f.col(j) * cp.col(j).array()) + wC * cp.col(j).array();
    tanh_c.col(j).array() = c.col(j).array().tanh();
    h.col(j).array() = (S(1) - wC) * (o.col(j) * tanh_c.col(j).array()) + wC * hp.col(j).array();
  }
}

template <class S>
void hm_pointwise_backward(MRef<S> da, MRef<S> dcp, MRef<S> dhp, MRef<S> dwU, MRef<S> dwC, CRef<S> dh, CRef<S> dc,
                           CRef<S> act, CRef<S> tanh_c, CRef<S> c, CRef<S> cp, CRef<S> hp, CRef<S> zp, CRef<S> zb) {
  (void)c;
  const Index H = dh.rows();
  for (Index j = 0; j < dh.cols(); ++j) {
    const S wC = (S(1) - zp(0, j)) * (S(1) - zb(0, j)), wU = (S(1) - zp(0, j)) * zb(0, j), a1 = S(1) - wC;
    const auto i = act.col(j).segment(0, H).array();
    const auto f = act.col(j).segment(H, H).array();
    const auto g = act.col(j).segment(2 * H, H).array();
    const auto o = act.col(j).segment(3 * H, H).array();
    const auto tc = tanh_c.col(j).array();
    const auto dhj = dh.col(j).array();
    const auto cpj = cp.col(j).array();
    // Gradient reaching c_t in total (kept in dcp's memory until the end).
    auto dct = dcp.col(j).array();
    dct = dc.col(j).array() + a1 * dhj * o * (S(1) - tc.square());
    da.col(j).segment(0, H).array() = a1 * dct * g * i * (S(1) - i);
    da.col(j).segment(H, H).array() = wU * dct * cpj * f * (S(1) - f);
    da.col(j).segment(2 * H, H).array() = a1 * dct * i * (S(1) - g.square());
    da.col(j).segment(3 * H, H).array() = a1 * dhj * tc * o * (S(1) - o);
    dwC(0, j) = (dhj * (hp.col(j).array() - o * tc)).sum() + (dct * (cpj - i * g)).sum();
    dwU(0, j) = (dct * f * cpj).sum();
    dhp.col(j).array() = wC * dhj;
    dct *= wU * f + wC;
  }
}

#define MSRNN_INSTANTIATE(S)                                                                                        \
  template void hm_pointwise_forward<S>(MRef<S>, MRef<S>, MRef<S>, MRef<S>, CRef<S>, CRef<S>, CRef<S>, CRef<S>, S); \
  template void hm_pointwise_backward<S>(MRef<S>, MRef<S>, MRef<S>, MRef<S>, MRef<S>, CRef<S>, CRef<S>, CRef<S>,    \
                                         CRef<S>, CRef<S>, CRef<S>, CRef<S>, CRef<S>, CRef<S>);
MSRNN_INSTANTIATE(float)
MSRNN_INSTANTIATE(double)
#undef MSRNN_INSTANTIATE

}  // namespace msrnn
