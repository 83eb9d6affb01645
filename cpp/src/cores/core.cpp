#include "msrnn/cores/core.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>

namespace msrnn {

// ---- options, declared once --------------------------------------------------------------------

namespace opt {
OptionSpec flag(std::string name, bool dflt, std::string doc) {
  OptionSpec s;
  s.name = std::move(name);
  s.kind = OptionSpec::Kind::Flag;
  s.number = dflt ? 1.0 : 0.0;
  s.doc = std::move(doc);
  return s;
}

OptionSpec count(std::string name, long long dflt, long long lo, std::string doc) {
  OptionSpec s;
  s.name = std::move(name);
  s.kind = OptionSpec::Kind::Count;
  s.number = double(dflt);
  s.lo = double(lo);
  s.doc = std::move(doc);
  return s;
}

OptionSpec number(std::string name, double dflt, Range range, std::string doc) {
  OptionSpec s;
  s.name = std::move(name);
  s.kind = OptionSpec::Kind::Number;
  s.number = dflt;
  s.lo = range.lo;
  s.hi = range.hi;
  s.lo_open = range.lo_open;
  s.hi_open = range.hi_open;
  s.doc = std::move(doc);
  return s;
}

OptionSpec choice(std::string name, std::string dflt, std::vector<std::string> choices, std::string doc) {
  OptionSpec s;
  s.name = std::move(name);
  s.kind = OptionSpec::Kind::Choice;
  s.text = std::move(dflt);
  s.choices = std::move(choices);
  s.doc = std::move(doc);
  return s;
}

OptionSpec per_layer(OptionSpec spec, double rest, bool negative_is_none) {
  spec.per_layer = true;
  spec.rest = rest;
  spec.negative_is_none = negative_is_none;
  return spec;
}
}  // namespace opt

std::string describe_range(const OptionSpec& s) {
  using K = OptionSpec::Kind;
  if (s.kind == K::Count) return cat(">= ", s.lo);
  if (s.kind != K::Number) return "";
  const bool has_lo = s.lo > -1e300, has_hi = s.hi < 1e300;
  if (has_lo && has_hi) return cat("in ", s.lo_open ? "(" : "[", s.lo, ", ", s.hi, s.hi_open ? ")" : "]");
  if (has_lo) return cat(s.lo_open ? "> " : ">= ", s.lo);
  if (has_hi) return cat(s.hi_open ? "< " : "<= ", s.hi);
  return "";
}

namespace {
bool in_range(const OptionSpec& s, double v) {
  return (s.lo_open ? v > s.lo : v >= s.lo) && (s.hi_open ? v < s.hi : v <= s.hi);
}
const char* kind_name(OptionSpec::Kind k) {
  switch (k) {
    case OptionSpec::Kind::Flag: return "flag";
    case OptionSpec::Kind::Count: return "count";
    case OptionSpec::Kind::Number: return "number";
    case OptionSpec::Kind::Choice: return "choice";
  }
  return "?";
}
}  // namespace

CoreOptions::CoreOptions(std::string core, std::map<std::string, double> num, std::map<std::string, std::string> text)
    : core_(std::move(core)), num_(std::move(num)), text_(std::move(text)) {}

const OptionSpec& CoreOptions::spec(const std::string& name, OptionSpec::Kind kind) const {
  MSRNN_CHECK(schema_ != nullptr, "the ", core_, " core's options are read before its table is set");
  for (const auto& s : *schema_)
    if (s.name == name) {
      MSRNN_CHECK(s.kind == kind, "the ", core_, " core reads option '", name, "' as a ", kind_name(kind),
                  "; its table declares a ", kind_name(s.kind));
      return s;
    }
  throw std::logic_error(cat("the ", core_, " core reads option '", name, "', which its table does not declare"));
}

double CoreOptions::raw_number(const std::string& key, double dflt) {
  read_.push_back(key);
  MSRNN_CHECK(!text_.count(key), "the ", core_, " option '", key, "' must be a number, got '", text_.at(key), "'");
  auto it = num_.find(key);
  return it == num_.end() ? dflt : it->second;
}

double CoreOptions::checked_number(const OptionSpec& s, const std::string& key, double dflt) {
  const double v = raw_number(key, dflt);
  using K = OptionSpec::Kind;
  if (s.kind == K::Flag) {
    MSRNN_CHECK(v == 0.0 || v == 1.0, "the ", core_, " option '", key, "' must be True or False, got ", v);
  } else if (s.kind == K::Count) {
    MSRNN_CHECK(std::isfinite(v) && v == std::floor(v) && v >= s.lo && v < 9.0e15, "the ", core_, " option '", key,
                "' must be a whole number ", describe_range(s), ", got ", v);
  } else {
    const std::string rule = describe_range(s);
    MSRNN_CHECK(std::isfinite(v) && (in_range(s, v) || (s.negative_is_none && v < 0.0)), "the ", core_, " option '",
                key, "' must be a finite number", rule.empty() ? "" : " ", rule,
                s.negative_is_none ? " (or negative: none)" : "", ", got ", v);
  }
  return v;
}

double CoreOptions::number(const std::string& name) {
  const OptionSpec& s = spec(name, OptionSpec::Kind::Number);
  return checked_number(s, name, s.number);
}

bool CoreOptions::flag(const std::string& name) {
  const OptionSpec& s = spec(name, OptionSpec::Kind::Flag);
  return checked_number(s, name, s.number) == 1.0;
}

Index CoreOptions::count(const std::string& name) {
  const OptionSpec& s = spec(name, OptionSpec::Kind::Count);
  return static_cast<Index>(checked_number(s, name, s.number));
}

double CoreOptions::number(const std::string& name, Index l) {
  const OptionSpec& s = spec(name, OptionSpec::Kind::Number);
  MSRNN_CHECK(s.per_layer, "the ", core_, " option '", name, "' is not read per layer");
  return checked_number(s, cat(name, "_l", l), l == 0 ? s.number : s.rest);
}

bool CoreOptions::flag(const std::string& name, Index l) {
  const OptionSpec& s = spec(name, OptionSpec::Kind::Flag);
  MSRNN_CHECK(s.per_layer, "the ", core_, " option '", name, "' is not read per layer");
  return checked_number(s, cat(name, "_l", l), l == 0 ? s.number : s.rest) == 1.0;
}

std::string CoreOptions::choice(const std::string& name) {
  return choice(name, spec(name, OptionSpec::Kind::Choice).text);
}

std::string CoreOptions::choice(const std::string& name, const std::string& dflt) {
  const OptionSpec& s = spec(name, OptionSpec::Kind::Choice);
  read_.push_back(name);
  MSRNN_CHECK(!num_.count(name), "the ", core_, " option '", name, "' must be a string, got ", num_.at(name));
  auto it = text_.find(name);
  const std::string v = it == text_.end() ? dflt : it->second;
  if (std::find(s.choices.begin(), s.choices.end(), v) == s.choices.end()) {
    std::string list;
    for (size_t i = 0; i < s.choices.size(); ++i) list += cat(i ? ", '" : "'", s.choices[i], "'");
    throw std::invalid_argument(cat("the ", core_, " option '", name, "' must be one of ", list, ", got '", v, "'"));
  }
  return v;
}

void CoreOptions::finish() const {
  auto known = [&](const std::string& n) { return std::find(read_.begin(), read_.end(), n) != read_.end(); };
  std::string list;
  for (const auto& n : read_)
    if (list.find("'" + n + "'") == std::string::npos) list += cat(list.empty() ? "'" : ", '", n, "'");
  for (const auto& kv : num_)
    MSRNN_CHECK(known(kv.first), "the ", core_, " core has no option '", kv.first, "'",
                list.empty() ? std::string("; it takes none") : cat("; its options are ", list));
  for (const auto& kv : text_)
    MSRNN_CHECK(known(kv.first), "the ", core_, " core has no option '", kv.first, "'",
                list.empty() ? std::string("; it takes none") : cat("; its options are ", list));
}

// ---- registry -----------------------------------------------------------------------------------

namespace {
// Function-local statics: safe to use from other files' static initialisers.
template <class S> std::map<std::string, CoreFactory<S>>& registry() {
  static std::map<std::string, CoreFactory<S>> r;
  return r;
}
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, CoreSchema>& schemas() {
  static std::map<std::string, CoreSchema> r;
  return r;
}
}  // namespace

template <class S> void register_core(const std::string& name, CoreFactory<S> factory, CoreSchema schema) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto& r = registry<S>();
  MSRNN_CHECK(!r.count(name), "core '", name, "' registered twice");
  r[name] = std::move(factory);
  schemas()[name] = std::move(schema);  // the same table for float and double
}

template <class S> std::unique_ptr<Core<S>> make_core(const std::string& name, ParamSet<S>& ps, const CoreArgs& args) {
  CoreFactory<S> factory;
  const CoreSchema* schema = nullptr;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto& r = registry<S>();
    auto it = r.find(name);
    if (it == r.end()) {
      std::string list;
      for (const auto& kv : r) list += cat(list.empty() ? "'" : ", '", kv.first, "'");
      throw std::invalid_argument(cat("unknown core '", name, "'; known cores: ", list));
    }
    factory = it->second;
    schema = &schemas().at(name);  // never erased: the pointer stays valid
  }
  MSRNN_CHECK(args.options != nullptr, "make_core('", name, "'): no options given");
  args.options->set_schema(schema);
  auto core = factory(ps, args);
  args.options->finish();
  return core;
}

const CoreSchema& core_schema(const std::string& name) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = schemas().find(name);
  MSRNN_CHECK(it != schemas().end(), "unknown core '", name, "'");
  return it->second;
}

std::vector<std::string> core_names() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<std::string> out;
  for (const auto& kv : registry<double>()) out.push_back(kv.first);
  return out;
}

template void register_core<float>(const std::string&, CoreFactory<float>, CoreSchema);
template void register_core<double>(const std::string&, CoreFactory<double>, CoreSchema);
template std::unique_ptr<Core<float>> make_core<float>(const std::string&, ParamSet<float>&, const CoreArgs&);
template std::unique_ptr<Core<double>> make_core<double>(const std::string&, ParamSet<double>&, const CoreArgs&);

}  // namespace msrnn
