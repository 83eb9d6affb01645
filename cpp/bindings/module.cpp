// pybind11 module `multiscale_rnn._core`: converts and checks arrays, releases the GIL around
// every computation, and holds no algorithms.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "msrnn/heads/mdn.hpp"
#include "msrnn/kernels/amx_bf16.hpp"
#include "msrnn/kernels/gemm.hpp"
#include "msrnn/kernels/optim.hpp"
#include "msrnn/model/language_model.hpp"

#include <algorithm>
#include <cstring>

namespace py = pybind11;
using namespace msrnn;

namespace {

template <class S> using Arr = py::array_t<S, py::array::c_style>;
using IntArr = py::array_t<std::int32_t, py::array::c_style>;

// (B, T) batch-major tokens -> step-major (T*B) vector, n = t*B + b.
std::vector<std::int32_t> step_major(const IntArr& a, const char* what, Index* T, Index* B) {
  if (a.ndim() != 2) throw py::value_error(cat(what, " must have shape (batch, steps), got ", a.ndim(), " dimensions"));
  *B = a.shape(0);
  *T = a.shape(1);
  if (*B < 1 || *T < 1) throw py::value_error(cat(what, " is empty: shape (", *B, ", ", *T, ")"));
  std::vector<std::int32_t> out(static_cast<size_t>(*T * *B));
  auto r = a.unchecked<2>();
  for (Index b = 0; b < *B; ++b)
    for (Index t = 0; t < *T; ++t) out[t * *B + b] = r(b, t);
  return out;
}

// What a model reads over a chunk, converted to step-major order: int32 token ids (B, T) for
// models with an embedding, or real vectors (B, T, D) of the model's dtype for a linear encoder.
template <class S> struct ChunkInput {
  Index T = 0, B = 0;
  std::vector<std::int32_t> tokens;  // (T*B)
  std::vector<S> values;             // (D, T*B)
  Inputs<S> view() const {
    return tokens.empty() ? Inputs<S>{nullptr, values.data()} : Inputs<S>{tokens.data(), nullptr};
  }
};

template <class S> ChunkInput<S> read_inputs(const LanguageModel<S>& model, const py::array& a) {
  ChunkInput<S> in;
  const Index D = model.input_size();
  if (D == 0) {
    if (!py::isinstance<IntArr>(a) || !(a.flags() & py::array::c_style))
      throw py::type_error(
          cat("tokens must be a C-contiguous int32 array, got dtype ", py::str(a.dtype()).cast<std::string>()));
    in.tokens = step_major(a.cast<IntArr>(), "tokens", &in.T, &in.B);
    return in;
  }
  if (!py::isinstance<Arr<S>>(a) || !(a.flags() & py::array::c_style))
    throw py::type_error(cat("inputs must be a C-contiguous array of the model's float dtype, got dtype ",
                             py::str(a.dtype()).cast<std::string>()));
  if (a.ndim() != 3 || a.shape(2) != D || a.shape(0) < 1 || a.shape(1) < 1)
    throw py::value_error(cat("inputs must have shape (batch, steps, ", D, "), got ", a.ndim(), " dimensions"));
  in.B = a.shape(0);
  in.T = a.shape(1);
  in.values.resize(static_cast<size_t>(D * in.T * in.B));
  auto r = a.cast<Arr<S>>().template unchecked<3>();
  for (Index b = 0; b < in.B; ++b)
    for (Index t = 0; t < in.T; ++t)
      for (Index d = 0; d < D; ++d) in.values[(t * in.B + b) * D + d] = r(b, t, d);
  return in;
}

// The targets of a chunk, step-major, checked against the inputs' shape: int32 ids (B, T), or real
// vectors (B, T, D) of the model's dtype for a head with real targets (target_size() = D).
template <class S> struct ChunkTargets {
  std::vector<std::int32_t> ids;  // (T*B)
  std::vector<S> values;          // (D, T*B)
  Targets<S> view() const { return ids.empty() ? Targets<S>{nullptr, values.data()} : Targets<S>{ids.data(), nullptr}; }
};

template <class S>
ChunkTargets<S> read_targets(const LanguageModel<S>& model, const ChunkInput<S>& in, const py::array& a) {
  ChunkTargets<S> out;
  const Index D = model.target_size();
  Index T, B;
  if (D == 0) {
    if (!py::isinstance<IntArr>(a) || !(a.flags() & py::array::c_style))
      throw py::type_error(
          cat("targets must be a C-contiguous int32 array, got dtype ", py::str(a.dtype()).cast<std::string>()));
    out.ids = step_major(a.cast<IntArr>(), "targets", &T, &B);
  } else {
    if (!py::isinstance<Arr<S>>(a) || !(a.flags() & py::array::c_style))
      throw py::type_error(cat("targets must be a C-contiguous array of the model's float dtype, got dtype ",
                               py::str(a.dtype()).cast<std::string>()));
    if (a.ndim() != 3 || a.shape(2) != D)
      throw py::value_error(cat("targets must have shape (batch, steps, ", D, "), got ", a.ndim(), " dimensions",
                                a.ndim() == 3 ? cat(" with ", a.shape(2), " features") : std::string()));
    B = a.shape(0);
    T = a.shape(1);
    out.values.resize(static_cast<size_t>(D * T * B));
    auto r = a.cast<Arr<S>>().template unchecked<3>();
    for (Index b = 0; b < B; ++b)
      for (Index t = 0; t < T; ++t)
        for (Index d = 0; d < D; ++d) out.values[(t * B + b) * D + d] = r(b, t, d);
  }
  if (T != in.T || B != in.B)
    throw py::value_error(cat("targets have shape (", B, ", ", T, "), inputs (", in.B, ", ", in.T, ")"));
  return out;
}

// (T*B) step-major -> (B, T)
py::array_t<double> batch_major(const std::vector<double>& v, Index T, Index B) {
  py::array_t<double> out({B, T});
  auto w = out.mutable_unchecked<2>();
  for (Index b = 0; b < B; ++b)
    for (Index t = 0; t < T; ++t) w(b, t) = v[t * B + b];
  return out;
}

template <class S> py::dict state_to_dict(const std::vector<NamedState<S>>& state) {
  py::dict d;
  for (const auto& s : state) {
    Arr<S> a({s.value.cols(), s.value.rows()});  // (B, rows): the same memory as (rows, B) column-major
    std::memcpy(a.mutable_data(), s.value.data(), sizeof(S) * s.value.size());
    d[py::str(s.name)] = a;
  }
  return d;
}

template <class S> std::vector<NamedState<S>> state_from_dict(const py::dict& d) {
  std::vector<NamedState<S>> out;
  for (auto item : d) {
    const auto name = py::cast<std::string>(item.first);
    auto a = py::cast<Arr<S>>(item.second);
    if (a.ndim() != 2)
      throw py::value_error(cat("state '", name, "' must have shape (batch, size), got ", a.ndim(), " dimensions"));
    Mat<S> m(a.shape(1), a.shape(0));
    std::memcpy(m.data(), a.data(), sizeof(S) * m.size());
    if (!m.allFinite()) throw py::value_error(cat("state '", name, "' holds NaN or infinity"));
    out.push_back({name, std::move(m)});
  }
  return out;
}

template <class S> py::array_t<S> view_of(Vec<S>& v, py::handle owner) {
  return py::array_t<S>({v.size()}, {sizeof(S)}, v.data(), owner);
}

ModelConfig make_config(const std::string& core, Index vocab, Index embed, const std::vector<Index>& hidden,
                        double dropout, std::uint64_t seed, const py::dict& options, const std::string& head,
                        Index head_size, Index input_size, const std::vector<Index>& head_classes, Index mixtures) {
  ModelConfig c;
  c.mixtures = mixtures;
  c.input_size = input_size;
  c.core = core;
  c.head = head;
  c.head_size = head_size;
  c.head_classes = head_classes;
  c.vocab_size = vocab;
  c.embed_size = embed;
  c.hidden_sizes = hidden;
  c.dropout = dropout;
  c.seed = seed;
  for (auto item : options) {
    const auto key = py::cast<std::string>(item.first);
    if (py::isinstance<py::str>(item.second))
      c.text_options[key] = py::cast<std::string>(item.second);
    else if (py::isinstance<py::bool_>(item.second) || py::isinstance<py::int_>(item.second) ||
             py::isinstance<py::float_>(item.second))
      c.num_options[key] = py::cast<double>(item.second);
    else
      throw py::type_error(cat("option '", key, "' must be a number, a bool or a string"));
  }
  return c;
}

// The per-token loss weights or padding (B, T) of loss_and_grad as a step-major vector (T*B), or empty for None.
std::vector<double> read_weights(const py::object& weights, Index T, Index B) {
  std::vector<double> w;
  if (!weights.is_none()) {
    auto a = py::cast<py::array_t<double, py::array::c_style | py::array::forcecast>>(weights);
    if (a.ndim() != 2 || a.shape(0) != B || a.shape(1) != T)
      throw py::value_error(cat("weights must have the targets' shape (", B, ", ", T, ")"));
    w.resize(static_cast<size_t>(T * B));
    auto r = a.unchecked<2>();
    for (Index b = 0; b < B; ++b)
      for (Index t = 0; t < T; ++t) w[t * B + b] = r(b, t);
  }
  return w;
}

// The batch statistics as a float64 array (K) for the Python reducer, which changes it in
// place or returns the K values to use. It runs inside the computation, so it takes the GIL.
// Empty for None; the reducer returned refers to `reducer`, which must outlive it.
StatisticsReducer python_reducer(const py::object& reducer) {
  StatisticsReducer reduce;
  if (!reducer.is_none()) {
    if (!PyCallable_Check(reducer.ptr()))
      throw py::type_error(cat("reducer must be callable, got ", py::str(py::type::of(reducer)).cast<std::string>()));
    reduce = [&reducer](std::vector<double>& values) {
      py::gil_scoped_acquire gil;
      const auto K = static_cast<py::ssize_t>(values.size());
      py::array_t<double> a(K);  // (K)
      std::copy(values.begin(), values.end(), a.mutable_data());
      py::object out = reducer(a);
      if (!out.is_none()) {
        auto r = py::cast<py::array_t<double, py::array::c_style | py::array::forcecast>>(out);
        if (r.ndim() != 1 || r.shape(0) != K)
          throw py::value_error(cat("the reducer must return None or ", K, " batch statistics, got shape ",
                                    py::str(r.attr("shape")).cast<std::string>()));
        a = r;
      }
      std::copy(a.data(), a.data() + K, values.begin());
    };
  }
  return reduce;
}

// forward, loss_and_grad and loss of a LanguageModel<S>: arrays in, the computation without the GIL.
template <class S> void bind_model_computation(py::class_<LanguageModel<S>>& cls) {
  using M = LanguageModel<S>;
  cls.def(
         "forward",
         [](M& self, const py::array& inputs, bool train) {
           const auto in = read_inputs(self, inputs);
           const Index T = in.T, B = in.B, V = self.output_size();
           Mat<S> logits(V, T * B);
           {
             py::gil_scoped_release release;
             self.forward(logits, in.view(), T, B, train);
           }
           Arr<S> out({B, T, V});
           auto w = out.template mutable_unchecked<3>();
           for (Index b = 0; b < B; ++b)
             for (Index t = 0; t < T; ++t)
               for (Index v = 0; v < V; ++v) w(b, t, v) = logits(v, t * B + b);
           return out;
         },
         py::arg("inputs"), py::arg("train") = false)
      .def(
          "loss_and_grad",
          [](M& self, const py::array& inputs, const py::array& targets, py::object weights, py::object reducer,
             py::object padding) {
            const auto in = read_inputs(self, inputs);
            const auto tgt = read_targets(self, in, targets);
            const std::vector<double> w = read_weights(weights, in.T, in.B);
            const std::vector<double> pad = read_weights(padding, in.T, in.B);
            const StatisticsReducer reduce = python_reducer(reducer);
            double loss;
            {
              py::gil_scoped_release release;
              loss = self.loss_and_grad(in.view(), tgt.view(), in.T, in.B, w.empty() ? nullptr : w.data(), reduce,
                                        pad.empty() ? nullptr : pad.data());
            }
            return loss;
          },
          py::arg("inputs"), py::arg("targets"), py::arg("weights") = py::none(), py::arg("reducer") = py::none(),
          py::arg("padding") = py::none())
      .def(
          "loss",
          [](M& self, const py::array& inputs, const py::array& targets, bool per_token) -> py::object {
            const auto in = read_inputs(self, inputs);
            const auto tgt = read_targets(self, in, targets);
            std::vector<double> nll(per_token ? in.T * in.B : 0);
            double loss;
            {
              py::gil_scoped_release release;
              loss = self.loss(in.view(), tgt.view(), in.T, in.B, per_token ? nll.data() : nullptr);
            }
            if (!per_token) return py::float_(loss);
            return py::make_tuple(loss, batch_major(nll, in.T, in.B));
          },
          py::arg("inputs"), py::arg("targets"), py::arg("per_token") = false);
}

// The state, options, records, statistics and random state of a LanguageModel<S>.
template <class S> void bind_model_state(py::class_<LanguageModel<S>>& cls) {
  using M = LanguageModel<S>;
  cls.def("get_state", [](M& self) { return state_to_dict<S>(self.get_state()); })
      .def("set_state", [](M& self, const py::dict& d) { self.set_state(state_from_dict<S>(d)); })
      .def("reset_state",
           [](M& self, Index B) {
             if (B < 1) throw py::value_error(cat("batch size must be at least 1, got ", B));
             self.reset_state(B);
           })
      .def("set_option", &M::set_option, py::arg("name"), py::arg("value"))
      .def(
          "set_inference_precision",
          [](M& self, const std::string& name) { self.set_inference_precision(precision_from_name(name)); },
          py::arg("precision"))
      .def_property_readonly("inference_precision",
                             [](const M& self) { return std::string(precision_name(self.inference_precision())); })
      .def("records", [](M& self) { return state_to_dict<S>(self.records()); })
      .def("aux_losses",
           [](M& self) {
             py::dict d;
             for (const auto& kv : self.aux_losses()) d[py::str(kv.first)] = kv.second;
             return d;
           })
      .def("batch_statistics",
           [](M& self) {
             py::dict d;
             for (const auto& kv : self.batch_statistics()) d[py::str(kv.first)] = kv.second;
             return d;
           })
      .def("record_grads", [](M& self) { return state_to_dict<S>(self.record_grads()); })
      .def("get_rng_state",
           [](M& self) {
             auto s = self.rng().state();
             py::array_t<std::uint64_t> a(4);
             std::memcpy(a.mutable_data(), s.data(), sizeof(s));
             return a;
           })
      .def("set_rng_state", [](M& self, const py::array_t<std::uint64_t, py::array::c_style>& a) {
        if (a.size() != 4) throw py::value_error(cat("random state must have 4 words, got ", a.size()));
        std::array<std::uint64_t, 4> s;
        std::memcpy(s.data(), a.data(), sizeof(s));
        self.rng().set_state(s);
      });
}

template <class S> void bind_model(py::module_& m, const char* name) {
  using M = LanguageModel<S>;
  py::class_<M> cls(m, name);
  cls.def(py::init([](const std::string& core, Index vocab, Index embed, const std::vector<Index>& hidden,
                      double dropout, std::uint64_t seed, const py::dict& options, const std::string& head,
                      Index head_size, Index input_size, const std::vector<Index>& head_classes, Index mixtures) {
            return std::make_unique<M>(make_config(core, vocab, embed, hidden, dropout, seed, options, head, head_size,
                                                   input_size, head_classes, mixtures));
          }),
          py::arg("core"), py::arg("vocab_size"), py::arg("embed_size"), py::arg("hidden_sizes"),
          py::arg("dropout") = 0.0, py::arg("seed") = 0, py::arg("options") = py::dict(), py::arg("head") = "linear",
          py::arg("head_size") = 0, py::arg("input_size") = 0, py::arg("head_classes") = std::vector<Index>(),
          py::arg("mixtures") = 0)
      .def("param_info",
           [](M& self) {
             py::list out;
             for (const auto& p : self.params().info())
               out.append(py::make_tuple(p.name, p.offset, p.rows, p.cols, p.numpy_transposed, p.role.kind, p.role.unit,
                                         p.role.layer));
             return out;
           })
      .def("flat_params", [](py::object self) { return view_of(self.cast<M&>().params().data(), self); })
      .def("flat_grads", [](py::object self) { return view_of(self.cast<M&>().params().grad_data(), self); })
      .def("zero_grad", [](M& self) { self.params().zero_grad(); })
      .def_property_readonly("input_size", &M::input_size)
      .def_property_readonly("output_size", &M::output_size)
      .def_property_readonly("target_size", &M::target_size);
  bind_model_computation<S>(cls);
  bind_model_state<S>(cls);
}

template <class S> void bind_optim(py::module_& m) {
  auto same = [](const Arr<S>& a, const Arr<S>& b, const char* what) {
    if (a.size() != b.size())
      throw py::value_error(cat(what, " has ", b.size(), " elements, parameters have ", a.size()));
  };
  m.def(
      "adam_step",
      [same](Arr<S> w, const Arr<S>& g, Arr<S> mo, Arr<S> v, long long step, double lr, double b1, double b2,
             double eps, double wd, double clip) {
        same(w, g, "gradient");
        same(w, mo, "first moment");
        same(w, v, "second moment");
        py::gil_scoped_release release;
        adam_step<S>(w.mutable_data(), g.data(), mo.mutable_data(), v.mutable_data(), w.size(), step, lr, b1, b2, eps,
                     wd, clip);
      },
      py::arg("w").noconvert(), py::arg("g").noconvert(), py::arg("m").noconvert(), py::arg("v").noconvert(),
      py::arg("step"), py::arg("lr"), py::arg("beta1"), py::arg("beta2"), py::arg("eps"), py::arg("weight_decay"),
      py::arg("clip") = 0.0);
  m.def(
      "sgd_step",
      [same](Arr<S> w, const Arr<S>& g, Arr<S> buf, long long step, double lr, double momentum, double wd,
             double clip) {
        same(w, g, "gradient");
        same(w, buf, "momentum buffer");
        py::gil_scoped_release release;
        sgd_step<S>(w.mutable_data(), g.data(), buf.mutable_data(), w.size(), step, lr, momentum, wd, clip);
      },
      py::arg("w").noconvert(), py::arg("g").noconvert(), py::arg("buf").noconvert(), py::arg("step"), py::arg("lr"),
      py::arg("momentum"), py::arg("weight_decay"), py::arg("clip") = 0.0);
  m.def("global_norm", [](const Arr<S>& g) { return global_norm<S>(g.data(), g.size()); }, py::arg("g").noconvert());
  m.def(
      "clip_by_norm", [](Arr<S> g, double mx) { return clip_by_norm<S>(g.mutable_data(), g.size(), mx); },
      py::arg("g").noconvert(), py::arg("max_norm"));
  m.def(
      "clip_by_value", [](Arr<S> g, double c) { clip_by_value<S>(g.mutable_data(), g.size(), c); },
      py::arg("g").noconvert(), py::arg("clip"));
  m.def("all_finite", [](const Arr<S>& x) { return all_finite<S>(x.data(), x.size()); }, py::arg("x").noconvert());
}

// The mixture density head's distributions for raw parameters z (B, 6M + 1) (mdn.hpp, mixture_column),
// and its per-row negative log-likelihoods of x (B, 3).
void bind_mixture(py::module_& m) {
  using D2 = py::array_t<double, py::array::c_style | py::array::forcecast>;
  auto rows = [](const D2& z, Index M) {
    if (M < 1) throw py::value_error(cat("mixtures must be >= 1, got ", M));
    if (z.ndim() != 2 || z.shape(1) != 6 * M + 1)
      throw py::value_error(cat("z must have shape (rows, ", 6 * M + 1, ") for ", M, " mixtures"));
    return z.shape(0);
  };
  m.def(
      "mixture_columns",
      [rows](const D2& z, Index M, double temperature, double bias) {
        const Index R = rows(z, M);
        py::array_t<double> e(R), pi({R, M}), mu1({R, M}), mu2({R, M}), s1({R, M}), s2({R, M}), rho({R, M});
        for (Index r = 0; r < R; ++r) {
          const MixtureColumn c = mixture_column<double>(z.data() + r * z.shape(1), M, temperature, bias);
          e.mutable_data()[r] = c.e;
          std::copy(c.pi.begin(), c.pi.end(), pi.mutable_data() + r * M);
          std::copy(c.mu1.begin(), c.mu1.end(), mu1.mutable_data() + r * M);
          std::copy(c.mu2.begin(), c.mu2.end(), mu2.mutable_data() + r * M);
          std::copy(c.s1.begin(), c.s1.end(), s1.mutable_data() + r * M);
          std::copy(c.s2.begin(), c.s2.end(), s2.mutable_data() + r * M);
          std::copy(c.rho.begin(), c.rho.end(), rho.mutable_data() + r * M);
        }
        py::dict d;
        d["e"] = e, d["pi"] = pi, d["mu1"] = mu1, d["mu2"] = mu2, d["sigma1"] = s1, d["sigma2"] = s2, d["rho"] = rho;
        return d;
      },
      py::arg("z"), py::arg("mixtures"), py::arg("temperature") = 1.0, py::arg("bias") = 0.0);
  m.def(
      "mixture_nll",
      [rows](const D2& z, const D2& x, Index M) {
        const Index R = rows(z, M);
        if (x.ndim() != 2 || x.shape(0) != R || x.shape(1) != 3)
          throw py::value_error(cat("x must have shape (", R, ", 3)"));
        py::array_t<double> nll(R), dz({R, 6 * M + 1});
        for (Index r = 0; r < R; ++r)
          nll.mutable_data()[r] =
              mixture_nll<double>(dz.mutable_data() + r * (6 * M + 1), z.data() + r * (6 * M + 1), x.data() + r * 3, M);
        return py::make_tuple(nll, dz);
      },
      py::arg("z"), py::arg("x"), py::arg("mixtures"));
}

// The mixture density head alone (mdn.hpp, MixtureHeadAlone): its parameters and its loss and gradient of
// Y (N, I) against X (N, 3), both C-contiguous in the head's dtype (row n is column n of the core's (I, N)).
template <class S> void bind_mixture_head(py::module_& m, const char* name) {
  using H = MixtureHeadAlone<S>;
  py::class_<H>(m, name)
      .def(py::init<Index, Index>(), py::arg("input_size"), py::arg("mixtures"))
      .def("param_info",
           [](H& self) {
             py::dict out;  // name -> (offset, rows, cols) in the flat buffer, column-major
             for (const auto& p : self.params().info()) out[py::str(p.name)] = py::make_tuple(p.offset, p.rows, p.cols);
             return out;
           })
      .def("flat_params", [](py::object self) { return view_of(self.cast<H&>().params().data(), self); })
      .def("flat_grads", [](py::object self) { return view_of(self.cast<H&>().params().grad_data(), self); })
      .def("zero_grad", [](H& self) { self.params().zero_grad(); })
      .def(
          "loss_and_grad",
          [](H& self, const Arr<S>& y, const Arr<S>& x) {
            if (y.ndim() != 2 || x.ndim() != 2 || x.shape(1) != 3 || x.shape(0) != y.shape(0))
              throw py::value_error("y must be (N, I) and x (N, 3) with the same N");
            const Index N = y.shape(0), I = y.shape(1);
            Arr<S> dy({N, I});
            double loss;
            {
              py::gil_scoped_release release;
              MatMap<S> dY(dy.mutable_data(), I, N);
              loss = self.loss_and_grad(dY, CMatMap<S>(y.data(), I, N), x.data());
            }
            return py::make_tuple(loss, dy);
          },
          py::arg("y").noconvert(), py::arg("x").noconvert());
}

}  // namespace

void bind_blocks(py::module_& parent);  // blocks.cpp

PYBIND11_MODULE(MSRNN_MODULE_NAME, m) {
  m.doc() = "multiscale-rnn C++ core";
  // pybind11 turns std::invalid_argument into ValueError and std::out_of_range into IndexError.
  m.def("set_num_threads", &set_num_threads, py::arg("n"));
  m.def("get_num_threads", &get_num_threads);
  m.def("core_names", &core_names);  // the registered cores
  bind_mixture(m);
  bind_mixture_head<float>(m, "MixtureHeadF32");
  bind_mixture_head<double>(m, "MixtureHeadF64");
  // A core's declared options (core.hpp, OptionSpec), one dict each in the table's order: name, kind
  // ("flag", "count", "number", "choice"), default, lo / hi / lo_open / hi_open (numbers; None where
  // unbounded), choices, per_layer, rest (the other layers' default), negative_is_none, rule, doc.
  m.def(
      "core_schema",
      [](const std::string& name) {
        py::list out;
        for (const OptionSpec& s : core_schema(name)) {
          using K = OptionSpec::Kind;
          py::dict d;
          d["name"] = s.name;
          d["kind"] = s.kind == K::Flag     ? "flag"
                      : s.kind == K::Count  ? "count"
                      : s.kind == K::Number ? "number"
                                            : "choice";
          if (s.kind == K::Flag)
            d["default"] = py::bool_(s.number != 0.0);
          else if (s.kind == K::Count)
            d["default"] = py::int_(static_cast<long long>(s.number));
          else if (s.kind == K::Number)
            d["default"] = s.number;
          else
            d["default"] = s.text;
          d["lo"] = s.lo > -1e300 ? py::object(py::float_(s.lo)) : py::object(py::none());
          d["hi"] = s.hi < 1e300 ? py::object(py::float_(s.hi)) : py::object(py::none());
          d["lo_open"] = s.lo_open;
          d["hi_open"] = s.hi_open;
          d["choices"] = s.choices;
          d["per_layer"] = s.per_layer;
          d["rest"] = s.rest;
          d["negative_is_none"] = s.negative_is_none;
          d["rule"] = describe_range(s);
          d["doc"] = s.doc;
          out.append(d);
        }
        return out;
      },
      py::arg("name"));
  // Select the plain reference kernels instead of the optimised ones (tests hold the two equal).
  m.def("set_reference_kernels", &set_reference_kernels, py::arg("on"));
  m.def("reference_kernels", &reference_kernels);
  // Per-token input tables in evaluation forwards from token ids (on by default; off selects the
  // plain path of embedding then the core's forward, which tests hold equal).
  m.def("set_input_tables", &set_input_tables, py::arg("on"));
  m.def("input_tables", &input_tables);
  // None when the AMX / AVX512-BF16 / either bfloat16 kernel can run in this process, else why not.
  auto reason = [](const char* why) { return why ? py::object(py::str(why)) : py::object(py::none()); };
  m.def("amx_bf16_unavailable_reason", [=]() { return reason(amx_bf16_unavailable_reason()); });
  m.def("avx512_bf16_unavailable_reason", [=]() { return reason(avx512_bf16_unavailable_reason()); });
  m.def("bf16_unavailable_reason", [=]() { return reason(bf16_unavailable_reason()); });
  // The kernel inference_precision "bfloat16" runs ("amx", "avx512-bf16", "avx512-bf16-model"), or None.
  m.def("bf16_kernel", []() -> py::object {
    return bf16_unavailable_reason() ? py::object(py::none()) : py::object(py::str(bf16_kernel_name(bf16_kernel())));
  });
  // The portable model of the AVX512-BF16 kernel in place of the hardware kernels (tests).
  m.def("set_bf16_model_kernel", &set_bf16_model_kernel, py::arg("on"));
  m.def("bf16_model_kernel", &bf16_model_kernel);
  bind_model<float>(m, "LanguageModelF32");
  bind_model<double>(m, "LanguageModelF64");
  bind_optim<float>(m);
  bind_optim<double>(m);
  bind_blocks(m);
}
