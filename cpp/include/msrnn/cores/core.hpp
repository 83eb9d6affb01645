// The recurrent core interface. A core maps an input sequence X (E, N = T*B) to outputs Y (O, N),
// carrying its state (h, c, z, ...) from chunk to chunk for truncated BPTT. A single recurrent layer
// and a whole stack of layers are both cores, so models compose them freely.
#pragma once

#include "msrnn/kernels/blocks.hpp"
#include "msrnn/model/params.hpp"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace msrnn {

// Arithmetic of evaluation-mode forward passes (training always runs in the model's dtype):
//   Float32           the model's own dtype
//   BFloat16          weights and step inputs rounded to bfloat16, products accumulated in float32
//                     on AMX tiles where they run, else with AVX512-BF16 (bf16_kernel(), amx_bf16.hpp);
//                     gates, state and head in float32
//   BFloat16Emulated  the same rounding, products with the float32 kernels: any CPU, equal to
//                     BFloat16 up to float32 summation order (the plain reference of BFloat16)
enum class Precision { Float32, BFloat16, BFloat16Emulated };
Precision precision_from_name(const std::string& name);  // "float32", "bfloat16", "bfloat16-emulated"
const char* precision_name(Precision p);

// Per-token input tables (Core::forward_tokens) are on by default; off selects the plain path of
// embedding then forward (tests hold the two equal; benchmarks compare them).
bool input_tables();
void set_input_tables(bool on);
// Whether a table (rows, V) built once pays for a chunk of N = T*B tokens: building it costs V/N of
// the per-step input products it replaces, and it must fit beside them, so the rule is 4 V <= N
// (a quarter at most; a character model of V = 50 with T*B = 6400 qualifies, a word model of
// V = 10k with T*B = 700 does not).
inline bool input_tables_pay(Index V, Index N) { return 4 * V <= N; }

template <class S> class Core {
 public:
  virtual ~Core() = default;
  virtual Index input_size() const = 0;   // E
  virtual Index output_size() const = 0;  // O
  // How the O output rows split into layers (e.g. [H_1, ..., H_L] when Y stacks every layer's h), so a
  // head can read each layer; one part by default.
  virtual std::vector<Index> output_parts() const { return {output_size()}; }
  // Take views of the parameters once the flat buffer exists.
  virtual void bind(ParamSet<S>& ps) = 0;
  // Y (O, N) out, X (E, N) in. Starts from the carried state and leaves the state after step T-1.
  // With train = true, keeps in its cache what backward needs (and applies dropout/zoneout, if any).
  virtual void forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool train) = 0;
  // Evaluation-mode forward from token ids, for cores whose first input term is linear in x_t:
  // with x_t = Emb[:, token_t] (Emb (E, V), the model's embedding table) that term is one column of
  // a table built once per call (the LSTM's P = W_ih Emb + b_ih + b_hh, (4H, V)) instead of a
  // product at every step. Y (O, N) as forward(Y, Emb[:, tokens], T, B, false) up to rounding order.
  // Returns false, having changed nothing, when the core has no such path or it would not pay
  // (input_tables_pay); the caller then embeds the tokens and calls forward.
  virtual bool forward_tokens(MRef<S> /*Y*/, CRef<S> /*Emb*/, const std::int32_t* /*tokens*/, Index /*T*/,
                              Index /*B*/) {
    return false;
  }
  // dX (E, N) out (overwritten; pass a 0-column matrix to skip), dY (O, N) in, X the forward input.
  // Accumulates parameter gradients. Gradients do not flow into the state before the chunk.
  virtual void backward(MRef<S> dX, CRef<S> dY, CRef<S> X) = 0;
  // Carried state: named (rows, B) matrices. reset_state sets zeros for batch size B.
  virtual std::vector<NamedState<S>> get_state() const = 0;
  virtual void set_state(const std::vector<NamedState<S>>& state) = 0;
  virtual void reset_state(Index B) = 0;
  // Change an option between chunks (e.g. a slope being annealed). Cores without options refuse.
  virtual void set_option(const std::string& name, double /*value*/) {
    throw std::invalid_argument(cat("this model has no option that can change during training ('", name,
                                    "' given); the HM-LSTM's and the VC units' options can"));
  }
  // Arithmetic of evaluation-mode forwards. Cores without a bfloat16 path refuse anything but Float32.
  virtual void set_inference_precision(Precision p) {
    if (p != Precision::Float32)
      throw std::invalid_argument(cat("this core has no ", precision_name(p), " inference path (LSTM layers only)"));
  }
  // Named matrices the last forward recorded for introspection, each (rows, N); none by default.
  virtual std::vector<NamedState<S>> records() const { return {}; }
  // After backward: the gradient of the loss with respect to each recorded state, by the names
  // records() uses, each (rows, N): column block t is the whole gradient that reached that state
  // at step t through every use of it in the chunk (the core documents its exact variables).
  // Cores that record no states return none.
  virtual std::vector<NamedState<S>> record_grads() const { return {}; }
  // Auxiliary objective: terms a core adds to the model's loss (e.g. the VCRNN's penalty on its
  // scheduler), each by name with its value over the last training forward, in the units the core
  // documents (normally a mean over the N = T*B columns). The model's objective is the
  // cross-entropy plus their sum; the core's backward adds their gradients to its own. Evaluation
  // forwards compute none. No terms by default.
  virtual std::vector<std::pair<std::string, double>> aux_losses() const { return {}; }
  // Batch statistics: for auxiliary terms that apply a nonlinearity to a statistic of the batch, e.g.
  // mu (sbar - r)^2 with sbar = (1/N) sum_n s_n a mean over the N = T*B columns. Such a term is not a
  // mean over the columns, so the terms of two halves of a batch do not average to the term of the
  // batch (data-parallel training computes halves); a term that is a mean of per-column values is,
  // and needs none. After a training forward the core names each statistic its terms read, with its
  // value over the chunk's N columns; none by default.
  virtual std::vector<std::pair<std::string, double>> batch_statistics() const { return {}; }
  // Replace those statistics (one value each, in the order batch_statistics() gives), before backward,
  // with their values over a larger batch this chunk is part of (the mean over all ranks' columns).
  // The core then computes its terms' values (aux_losses()) and their gradients from them: for
  // mu (sbar - r)^2 the gradient on each of its own N columns is 2 mu (sbar - r) / N, which the
  // caller's weighting of this chunk's gradient by N / N_all turns into the whole batch's
  // 2 mu (sbar - r) / N_all. Refuses values of the wrong count, or any when the core has none.
  virtual void set_batch_statistics(const std::vector<double>& values) {
    MSRNN_CHECK(values.empty(), "this core has no batch statistics, got ", values.size(), " values");
  }
  // Padding of separate sequences (LanguageModel::loss_and_grad): mask (N) of 0 and 1, or nullptr for
  // none. The auxiliary terms of the next training forward, and their gradients, are then means over the
  // columns marked 1: padding counts in none of them.
  void set_padding(const double* mask, Index N) {
    if (mask)
      padding_.assign(mask, mask + N);
    else
      padding_.clear();
  }

 protected:
  // 1 for a column that counts in the auxiliary terms, 0 for padding.
  double column_weight(Index n) const { return padding_.empty() ? 1.0 : padding_[size_t(n)]; }
  // The number of columns of N that count (N without padding).
  double counted_columns(Index N) const {
    if (padding_.empty()) return double(N);
    double c = 0.0;
    for (double m : padding_) c += m;
    return c;
  }

 private:
  std::vector<double> padding_;  // (N) 0/1, or empty: every column counts
};

// ---- options ------------------------------------------------------------------------------------

// ---- options, declared once --------------------------------------------------------------------

// One option of a core: its name, kind, default, allowed values and one line of doc. A core declares
// all of its options in one table beside its factory (MSRNN_REGISTER_CORE); the factory reads them by
// name through CoreOptions, which checks them against the table, and the bindings export the table
// (core_schema) so that the Python family builds its keywords, checks and messages from it.
struct OptionSpec {
  enum class Kind { Flag, Count, Number, Choice };
  std::string name;
  Kind kind = Kind::Number;
  double number = 0.0;               // the default of a Flag (0 or 1), Count or Number
  std::string text;                  // the default of a Choice
  std::vector<std::string> choices;  // a Choice's allowed values
  double lo = -1e300, hi = 1e300;    // a Number's range (a Count's lo; hi unused)
  bool lo_open = false, hi_open = false;
  // Read per layer as name_l0, name_l1, ... (the family sets them from its own keywords): the range
  // applies to each, `number` is layer 0's default and `rest` the other layers'.
  bool per_layer = false;
  double rest = 0.0;
  bool negative_is_none = false;  // a per-layer Number: any negative value means "none"
  std::string doc;
};
using CoreSchema = std::vector<OptionSpec>;

// The table's rows, one call each (namespace opt): opt::flag("skip", true, "..."),
// opt::count("block", 16, 1, "..."), opt::number("eps", 0.01, opt::open(0, 0.5), "..."),
// opt::choice("penalty", "l1", {"l1", "l2"}, "..."), opt::per_layer(row, others' default).
namespace opt {
struct Range {
  double lo = -1e300, hi = 1e300;
  bool lo_open = false, hi_open = false;
};
inline Range closed(double lo, double hi) { return {lo, hi, false, false}; }
inline Range open(double lo, double hi) { return {lo, hi, true, true}; }
inline Range at_least(double lo) { return {lo, 1e300, false, false}; }
inline Range above(double lo) { return {lo, 1e300, true, false}; }
inline Range any() { return {}; }
OptionSpec flag(std::string name, bool dflt, std::string doc);
OptionSpec count(std::string name, long long dflt, long long lo, std::string doc);
OptionSpec number(std::string name, double dflt, Range range, std::string doc);
OptionSpec choice(std::string name, std::string dflt, std::vector<std::string> choices, std::string doc);
// The row read per layer (name_l0, name_l1, ...): `spec`'s default for layer 0, `rest` for the others;
// with negative_is_none, any negative value means "none" (allowed beside the range).
OptionSpec per_layer(OptionSpec spec, double rest, bool negative_is_none = false);
}  // namespace opt
// The words of a row's range for messages: "> 0", "in [0, 1]", "in (0, 0.5)"; "" for none.
std::string describe_range(const OptionSpec& spec);

// The options given to one core, read by name against its table. Each read checks the value (kind,
// range, choices) and names the option in its error; finish() refuses any option given that no read
// asked for, listing the core's options.
class CoreOptions {
 public:
  CoreOptions(std::string core, std::map<std::string, double> num, std::map<std::string, std::string> text);
  const std::string& core() const { return core_; }
  void set_schema(const CoreSchema* schema) { schema_ = schema; }
  double number(const std::string& name);
  bool flag(const std::string& name);
  Index count(const std::string& name);
  std::string choice(const std::string& name);
  // Layer l's value of a per-layer row (name_l{l}).
  double number(const std::string& name, Index l);
  bool flag(const std::string& name, Index l);
  // A Choice's value, with `dflt` instead of the table's default (a default that follows another option).
  std::string choice(const std::string& name, const std::string& dflt);
  // Whether the config gives the option (read or not).
  bool given(const std::string& name) const { return num_.count(name) || text_.count(name); }
  // Throws std::invalid_argument naming the first option no read asked for.
  void finish() const;

 private:
  const OptionSpec& spec(const std::string& name, OptionSpec::Kind kind) const;
  double checked_number(const OptionSpec& s, const std::string& key, double dflt);
  double raw_number(const std::string& key, double dflt);
  std::string core_;
  const CoreSchema* schema_ = nullptr;
  std::map<std::string, double> num_;
  std::map<std::string, std::string> text_;
  std::vector<std::string> read_;
};

// ---- the registry of cores ----------------------------------------------------------------------

// What every core is built from: the model's sizes and shared options, and its own options.
struct CoreArgs {
  Index input_size = 0;             // E
  std::vector<Index> hidden_sizes;  // H of each layer (or cell)
  double dropout = 0.0;             // on the core's non-recurrent connections (between layers)
  Rng* rng = nullptr;               // the model's generator (dropout, zoneout, sampled boundaries)
  CoreOptions* options = nullptr;   // the core's own options; the factory reads them and calls finish()
};

template <class S> using CoreFactory = std::function<std::unique_ptr<Core<S>>(ParamSet<S>&, const CoreArgs&)>;

// Cores by name. Each core registers itself from its own .cpp with MSRNN_REGISTER_CORE (below),
// so building one is a lookup and no other file names it.
template <class S> void register_core(const std::string& name, CoreFactory<S> factory, CoreSchema schema);
// Builds the core `name`, its options read against its table (args.options).
template <class S> std::unique_ptr<Core<S>> make_core(const std::string& name, ParamSet<S>& ps, const CoreArgs& args);
std::vector<std::string> core_names();                   // sorted
const CoreSchema& core_schema(const std::string& name);  // the core's declared options

// MSRNN_REGISTER_CORE(name, factory, schema): `factory` a function template
//   template <class S> std::unique_ptr<Core<S>> factory(ParamSet<S>& ps, const CoreArgs& args);
// and `schema` the core's options (a CoreSchema), registered for float and double under `name` when
// the module loads. Use once per name, in the core's own .cpp at namespace scope.
#define MSRNN_REGISTER_CORE(NAME, FACTORY, SCHEMA)                        \
  static const bool MSRNN_CONCAT(msrnn_core_registered_, __LINE__) = [] { \
    ::msrnn::register_core<float>(NAME, &FACTORY<float>, SCHEMA);         \
    ::msrnn::register_core<double>(NAME, &FACTORY<double>, SCHEMA);       \
    return true;                                                          \
  }()
#define MSRNN_CONCAT_(a, b) a##b
#define MSRNN_CONCAT(a, b) MSRNN_CONCAT_(a, b)

// Look up `name` in a state list and check its shape; used by set_state implementations.
template <class S>
const Mat<S>& find_state(const std::vector<NamedState<S>>& state, const std::string& name, Index rows, Index B) {
  for (const auto& s : state)
    if (s.name == name) {
      MSRNN_CHECK(s.value.rows() == rows && s.value.cols() == B, "state '", name, "' has shape (batch ", s.value.cols(),
                  ", ", s.value.rows(), "), expected (batch ", B, ", ", rows, ")");
      return s.value;
    }
  throw std::invalid_argument(cat("state entry '", name, "' is missing"));
}

}  // namespace msrnn
