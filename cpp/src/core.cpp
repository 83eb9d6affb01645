#include "msrnn/core.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>

namespace msrnn {

// ---- CoreOptions --------------------------------------------------------------------------------

CoreOptions::CoreOptions(std::string core, std::map<std::string, double> num, std::map<std::string, std::string> text)
    : core_(std::move(core)), num_(std::move(num)), text_(std::move(text)) {}

double CoreOptions::raw_number(const std::string& name, double dflt) {
  read_.push_back(name);
  MSRNN_CHECK(!text_.count(name), "the ", core_, " option '", name, "' must be a number, got '", text_.at(name), "'");
  auto it = num_.find(name);
  return it == num_.end() ? dflt : it->second;
}

double CoreOptions::number(const std::string& name, double dflt, double lo, double hi) {
  const double v = raw_number(name, dflt);
  MSRNN_CHECK(std::isfinite(v) && v >= lo && v <= hi, "the ", core_, " option '", name, "' must be a finite number",
              (lo > -1e300 || hi < 1e300) ? cat(" in [", lo, ", ", hi, "]") : std::string(), ", got ", v);
  return v;
}

bool CoreOptions::flag(const std::string& name, bool dflt) {
  const double v = raw_number(name, dflt ? 1.0 : 0.0);
  MSRNN_CHECK(v == 0.0 || v == 1.0, "the ", core_, " option '", name, "' must be True or False, got ", v);
  return v == 1.0;
}

Index CoreOptions::count(const std::string& name, Index dflt, Index lo) {
  const double v = raw_number(name, double(dflt));
  MSRNN_CHECK(std::isfinite(v) && v == std::floor(v) && v >= double(lo) && v < 9.0e15, "the ", core_, " option '",
              name, "' must be a whole number >= ", lo, ", got ", v);
  return static_cast<Index>(v);
}

std::string CoreOptions::choice(const std::string& name, const std::string& dflt,
                                const std::vector<std::string>& allowed) {
  read_.push_back(name);
  MSRNN_CHECK(!num_.count(name), "the ", core_, " option '", name, "' must be a string, got ", num_.at(name));
  auto it = text_.find(name);
  const std::string v = it == text_.end() ? dflt : it->second;
  if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
    std::string list;
    for (size_t i = 0; i < allowed.size(); ++i) list += cat(i ? ", '" : "'", allowed[i], "'");
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
}  // namespace

template <class S> void register_core(const std::string& name, CoreFactory<S> factory) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto& r = registry<S>();
  MSRNN_CHECK(!r.count(name), "core '", name, "' registered twice");
  r[name] = std::move(factory);
}

template <class S> std::unique_ptr<Core<S>> make_core(const std::string& name, ParamSet<S>& ps, const CoreArgs& args) {
  CoreFactory<S> factory;
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
  }
  return factory(ps, args);
}

std::vector<std::string> core_names() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<std::string> out;
  for (const auto& kv : registry<double>()) out.push_back(kv.first);
  return out;
}

template void register_core<float>(const std::string&, CoreFactory<float>);
template void register_core<double>(const std::string&, CoreFactory<double>);
template std::unique_ptr<Core<float>> make_core<float>(const std::string&, ParamSet<float>&, const CoreArgs&);
template std::unique_ptr<Core<double>> make_core<double>(const std::string&, ParamSet<double>&, const CoreArgs&);

}  // namespace msrnn
