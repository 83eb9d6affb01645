// Float64 bindings of the building blocks, one forward/backward pair each, for gradient checks
// and reference comparisons from Python (module `_core.blocks`). Arrays are copied in and out.
// Also, in float32: the linear map's products on the caller's arrays and the module's arithmetic peak
// (for timing), the bfloat16 rounding and the bfloat16 step product (each kernel).
#include <pybind11/eigen.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "msrnn/cores/gru.hpp"
#include "msrnn/cores/lstm.hpp"
#include "msrnn/kernels/amx_bf16.hpp"
#include "msrnn/kernels/blocks.hpp"
#include "msrnn/kernels/gemm.hpp"
#include "msrnn/kernels/peak.hpp"

#include <algorithm>
#include <iterator>

namespace py = pybind11;
using namespace msrnn;
using M = Mat<double>;
using Ids = py::array_t<std::int32_t, py::array::c_style | py::array::forcecast>;

namespace {

template <class A, class B> void same_shape(const A& a, const B& b, const char* what_a, const char* what_b) {
  if (a.rows() != b.rows() || a.cols() != b.cols())
    throw py::value_error(
        cat(what_a, " has shape (", a.rows(), ", ", a.cols(), "), ", what_b, " (", b.rows(), ", ", b.cols(), ")"));
}

void check_ids(const Ids& ids, Index n, Index V, const char* what) {
  if (ids.size() != n) throw py::value_error(cat(what, " has ", ids.size(), " entries, expected ", n));
  for (Index i = 0; i < n; ++i)
    if (ids.data()[i] < 0 || ids.data()[i] >= V)
      throw py::index_error(cat(what, " id ", ids.data()[i], " at position ", i, " is outside [0, ", V, ")"));
}

template <class Mx> void check_rows(const Mx& a, Index rows, const char* what) {
  if (a.rows() != rows) throw py::value_error(cat(what, " has ", a.rows(), " rows, expected ", rows));
}

// The non-recurrent blocks: embedding, linear map, layer normalisation, dropout mask, softmax cross-entropy.
void bind_layer_blocks(py::module_& m) {
  m.def("embedding_forward", [](const M& W, const Ids& ids) {
    check_ids(ids, ids.size(), W.cols(), "token");
    M X(W.rows(), ids.size());
    embedding_forward<double>(X, W, ids.data());
    return X;
  });
  m.def("embedding_backward", [](const M& dX, const Ids& ids, Index V) {
    check_ids(ids, dX.cols(), V, "token");
    M dW = M::Zero(dX.rows(), V);
    embedding_backward<double>(dW, dX, ids.data());
    return dW;
  });

  m.def("linear_forward", [](const M& W, const M& b, const M& X) {
    check_rows(X, W.cols(), "X");
    check_rows(b, W.rows(), "b");
    M Y(W.rows(), X.cols());
    linear_forward<double>(Y, W, b, X);
    return Y;
  });
  m.def("linear_backward", [](const M& dY, const M& W, const M& X) {
    check_rows(dY, W.rows(), "dY");
    M dW = M::Zero(W.rows(), W.cols()), db = M::Zero(W.rows(), 1), dX(W.cols(), dY.cols());
    linear_backward_params<double>(dW, db, dY, X);
    linear_backward_input<double>(dX, W, dY);
    return py::make_tuple(dX, dW, db);
  });

  m.def("layer_norm_forward", [](const M& X, const M& g, const M& b, double eps) {
    check_rows(g, X.rows(), "gain");
    check_rows(b, X.rows(), "bias");
    M Y(X.rows(), X.cols()), xhat(X.rows(), X.cols()), rstd(1, X.cols());
    layer_norm_forward<double>(Y, xhat, rstd, X, g, b, eps);
    return py::make_tuple(Y, xhat, rstd);
  });
  m.def("layer_norm_backward", [](const M& dY, const M& xhat, const M& rstd, const M& g) {
    same_shape(dY, xhat, "dY", "xhat");
    M dX(dY.rows(), dY.cols()), dg = M::Zero(dY.rows(), 1), db = M::Zero(dY.rows(), 1);
    layer_norm_backward<double>(dX, dg, db, dY, xhat, rstd, g);
    return py::make_tuple(dX, dg, db);
  });

  m.def("dropout_mask", [](Index rows, Index cols, double p, std::uint64_t seed) {
    Rng rng(seed);
    M mask(rows, cols);
    dropout_mask<double>(mask, p, rng);
    return mask;
  });

  m.def("softmax_xent_forward", [](const M& Z, const Ids& targets) {
    check_ids(targets, Z.cols(), Z.rows(), "target");
    M P(Z.rows(), Z.cols());
    const double loss = softmax_xent_forward<double>(P, Z, targets.data());
    return py::make_tuple(loss, P);
  });
  m.def("softmax_xent_backward", [](const M& P, const Ids& targets, double scale) {
    check_ids(targets, P.cols(), P.rows(), "target");
    M dZ(P.rows(), P.cols());
    softmax_xent_backward<double>(dZ, P, targets.data(), scale);
    return dZ;
  });
}

// The LSTM's and GRU's pointwise step parts, forward and backward.
void bind_cell_blocks(py::module_& m) {
  // One step of the cells' pointwise parts (gates given as pre-activations).
  m.def("lstm_pointwise_forward", [](M a, const M& c_prev) {
    check_rows(a, 4 * c_prev.rows(), "pre-activations");
    const Index H = c_prev.rows(), B = c_prev.cols();
    M c(H, B), tanh_c(H, B), h(H, B);
    lstm_pointwise_forward<double>(a, c, tanh_c, h, c_prev);
    return py::make_tuple(a, c, tanh_c, h);
  });
  m.def("lstm_pointwise_backward", [](const M& dh, const M& dc, const M& act, const M& tanh_c, const M& c_prev) {
    same_shape(dh, c_prev, "dh", "c_prev");
    M da(act.rows(), act.cols()), dc_prev(dh.rows(), dh.cols());
    lstm_pointwise_backward<double>(da, dc_prev, dh, dc, act, tanh_c, c_prev);
    return py::make_tuple(da, dc_prev);
  });
  m.def("gru_pointwise_forward", [](M ax, const M& ah, const M& h_prev) {
    check_rows(ax, 3 * h_prev.rows(), "input pre-activations");
    same_shape(ax, ah, "ax", "ah");
    M h(h_prev.rows(), h_prev.cols());
    gru_pointwise_forward<double>(ax, h, ah, h_prev);
    return py::make_tuple(ax, h);
  });
  m.def("gru_pointwise_backward", [](const M& dh, const M& act, const M& ah, const M& h_prev) {
    same_shape(dh, h_prev, "dh", "h_prev");
    M dax(act.rows(), act.cols()), dah(act.rows(), act.cols()), dh_prev(dh.rows(), dh.cols());
    gru_pointwise_backward<double>(dax, dah, dh_prev, dh, act, ah, h_prev);
    return py::make_tuple(dax, dah, dh_prev);
  });
}

// bfloat16 rounding and the bfloat16 step product.
void bind_bf16_blocks(py::module_& m) {
  // bfloat16 (float32 arrays).
  using F = Mat<float>;
  // The linear map's three products in float32 on the caller's arrays, without copies (Fortran-ordered,
  // writeable float32 arrays; anything else is refused), so a benchmark times the products alone:
  //   Y (V, N) = b + W X,   dW (V, H) += dY X^T and db += dY 1,   dX (H, N) = W^T dY.
  using FRef = Eigen::Ref<F>;
  using FCRef = Eigen::Ref<const F>;
  m.def(
      "linear_forward_into",
      [](FRef Y, FCRef W, FCRef b, FCRef X) {
        check_rows(X, W.cols(), "X");
        check_rows(b, W.rows(), "b");
        check_rows(Y, W.rows(), "Y");
        if (Y.cols() != X.cols()) throw py::value_error(cat("Y has ", Y.cols(), " columns, expected ", X.cols()));
        linear_forward<float>(Y, W, b, X);
      },
      py::arg("Y").noconvert(), py::arg("W").noconvert(), py::arg("b").noconvert(), py::arg("X").noconvert());
  m.def(
      "linear_backward_into",
      [](FRef dX, FRef dW, FRef db, FCRef dY, FCRef W, FCRef X) {
        check_rows(dY, W.rows(), "dY");
        check_rows(X, W.cols(), "X");
        check_rows(dX, W.cols(), "dX");
        same_shape(dW, W, "dW", "W");
        check_rows(db, W.rows(), "db");
        if (dY.cols() != X.cols() || dX.cols() != X.cols())
          throw py::value_error(cat("dY, X and dX have ", dY.cols(), ", ", X.cols(), " and ", dX.cols(), " columns"));
        linear_backward_params<float>(dW, db, dY, X);
        linear_backward_input<float>(dX, W, dY);
      },
      py::arg("dX").noconvert(), py::arg("dW").noconvert(), py::arg("db").noconvert(), py::arg("dY").noconvert(),
      py::arg("W").noconvert(), py::arg("X").noconvert());
  m.def("round_to_bf16", [](const F& x) {
    F y(x.rows(), x.cols());
    round_to_bf16(y.data(), x.data(), x.size());
    return y;
  });
  // C (M, N) = b + A [X1; X2] with A (M, K), X = [X1; X2] (K, N) split after row K1, through the
  // LSTM layer's bfloat16 step product: kernel "amx", "avx512-bf16" or "avx512-bf16-model"
  // (Bf16Matrix) or "emulated" (PackedPanels holding the rounded A, times the rounded X).
  m.def(
      "bf16_step_product",
      [](const F& A, const F& b, const F& X, Index K1, const std::string& kernel) {
        check_rows(X, A.cols(), "X");
        check_rows(b, A.rows(), "b");
        if (K1 < 0 || K1 > A.cols()) throw py::value_error(cat("split K1 = ", K1, " outside [0, ", A.cols(), "]"));
        const Bf16Kernel kernels[] = {Bf16Kernel::Amx, Bf16Kernel::Avx512Bf16, Bf16Kernel::Avx512Bf16Model,
                                      Bf16Kernel::Emulated};
        const auto k = std::find_if(std::begin(kernels), std::end(kernels),
                                    [&](Bf16Kernel c) { return kernel == bf16_kernel_name(c); });
        if (k == std::end(kernels))
          throw py::value_error(
              cat("kernel must be 'amx', 'avx512-bf16', 'avx512-bf16-model' or 'emulated', got '", kernel, "'"));
        F C(A.rows(), X.cols());
        bf16_step_product(C.data(), A.data(), b.data(), X.data(), A.rows(), A.cols(), K1, X.cols(), *k);
        return C;
      },
      py::arg("A"), py::arg("b"), py::arg("X"), py::arg("K1"), py::arg("kernel"));
}

void bind_peak_blocks(py::module_& m) {
  // The module's arithmetic peak (peak.hpp): `iterations` rounds of vector multiply-adds on each of the
  // core's threads; a dict of the run's flops, checksum, threads, lanes, vector_floats and fused.
  m.def(
      "multiply_add_peak",
      [](std::int64_t iterations, float a, float c) {
        if (iterations < 1) throw py::value_error(cat("iterations must be at least 1, got ", iterations));
        PeakRun r;
        {
          py::gil_scoped_release release;
          r = multiply_add_peak(iterations, a, c);
        }
        py::dict d;
        d["flops"] = r.flops;
        d["checksum"] = r.checksum;
        d["threads"] = r.threads;
        d["lanes"] = r.lanes;
        d["vector_floats"] = r.vector_floats;
        d["fused"] = r.fused;
        return d;
      },
      py::arg("iterations"), py::arg("a") = 0.9999f, py::arg("c") = 0.0001f);
}

}  // namespace

void bind_blocks(py::module_& parent) {
  auto m = parent.def_submodule("blocks", "float64 building blocks (forward/backward pairs) for checks");
  bind_layer_blocks(m);
  bind_cell_blocks(m);
  bind_bf16_blocks(m);
  bind_peak_blocks(m);
}
