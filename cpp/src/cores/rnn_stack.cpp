#include "msrnn/cores/rnn_stack.hpp"

#include "msrnn/cores/elman.hpp"
#include "msrnn/cores/gru.hpp"
#include "msrnn/cores/lstm.hpp"

namespace msrnn {

CellType cell_type_from_name(const std::string& name) {
  if (name == "lstm") return CellType::LSTM;
  if (name == "gru") return CellType::GRU;
  if (name == "rnn_tanh" || name == "elman") return CellType::Elman;
  throw std::invalid_argument(cat("unknown cell type '", name, "'; expected 'lstm', 'gru' or 'rnn_tanh'"));
}

template <class S>
std::unique_ptr<Core<S>> make_cell_layer(CellType cell, ParamSet<S>& ps, const std::string& suffix, Index E, Index H) {
  switch (cell) {
    case CellType::LSTM: return std::make_unique<LSTMLayer<S>>(ps, suffix, E, H);
    case CellType::GRU: return std::make_unique<GRULayer<S>>(ps, suffix, E, H);
    case CellType::Elman: return std::make_unique<ElmanLayer<S>>(ps, suffix, E, H);
  }
  throw std::invalid_argument("unknown cell type");
}

template <class S>
RNNStack<S>::RNNStack(ParamSet<S>& ps, CellType cell, Index E, const std::vector<Index>& hidden, double dropout,
                      Rng* rng)
    : E_(E), cell_(cell) {
  MSRNN_CHECK(!hidden.empty(), "a recurrent stack needs at least one layer");
  MSRNN_CHECK(dropout >= 0.0 && dropout < 1.0, "dropout must be in [0, 1), got ", dropout);
  Index in = E;
  std::vector<Index> sizes;
  for (size_t l = 0; l < hidden.size(); ++l) {
    layers_.push_back(make_cell_layer<S>(cell, ps, cat("_l", l), in, hidden[l]));
    in = hidden[l];
    sizes.push_back(layers_.back()->output_size());
  }
  links_ = std::make_unique<LayerLinks<S>>(std::move(sizes), dropout, rng);
}

template <class S> void RNNStack<S>::bind(ParamSet<S>& ps) {
  for (auto& l : layers_) l->bind(ps);
}

template <class S> void RNNStack<S>::forward(MRef<S> Y, CRef<S> X, Index T, Index B, bool train) {
  forward_from(0, Y, X, T, B, train);
}

template <class S>
bool RNNStack<S>::forward_tokens(MRef<S> Y, CRef<S> Emb, const std::int32_t* tokens, Index T, Index B) {
  const size_t L = layers_.size();
  Mat<S>& out0 = links_->output(0);
  if (L > 1) out0.resize(layers_[0]->output_size(), T * B);
  if (!layers_[0]->forward_tokens(L > 1 ? MRef<S>(out0) : Y, Emb, tokens, T, B)) return false;
  if (L > 1) forward_from(1, Y, out0, T, B, /*train=*/false);
  return true;
}

template <class S> void RNNStack<S>::forward_from(size_t l0, MRef<S> Y, CRef<S> X, Index T, Index B, bool train) {
  links_->forward(l0, Y, X, T * B, train,
                  [&](size_t l, MRef<S> y, CRef<S> x) { layers_[l]->forward(y, x, T, B, train); });
}

template <class S> void RNNStack<S>::backward(MRef<S> dX, CRef<S> dY, CRef<S> X) {
  links_->backward(dX, dY, X, [&](size_t l, MRef<S> dx, CRef<S> dy, CRef<S> x) { layers_[l]->backward(dx, dy, x); });
}

template <class S> std::vector<NamedState<S>> RNNStack<S>::get_state() const {
  std::vector<NamedState<S>> all;
  for (const auto& l : layers_)
    for (auto& s : l->get_state()) all.push_back(std::move(s));
  return all;
}

template <class S> void RNNStack<S>::set_state(const std::vector<NamedState<S>>& state) {
  for (auto& l : layers_) l->set_state(state);
}

template <class S> void RNNStack<S>::set_inference_precision(Precision p) {
  MSRNN_CHECK(p == Precision::Float32 || cell_ == CellType::LSTM, precision_name(p),
              " inference is implemented for LSTM layers only; this stack has ",
              cell_ == CellType::GRU ? "GRU" : "Elman", " layers");
  for (auto& l : layers_) l->set_inference_precision(p);
}

template <class S> void RNNStack<S>::reset_state(Index B) {
  for (auto& l : layers_) l->reset_state(B);
}

template std::unique_ptr<Core<float>> make_cell_layer<float>(CellType, ParamSet<float>&, const std::string&, Index,
                                                             Index);
template std::unique_ptr<Core<double>> make_cell_layer<double>(CellType, ParamSet<double>&, const std::string&, Index,
                                                               Index);
template class RNNStack<float>;
template class RNNStack<double>;

namespace {
// The baselines: "lstm", "gru", "rnn_tanh" (Elman); no options of their own.
template <class S> std::unique_ptr<Core<S>> make_stack(ParamSet<S>& ps, const CoreArgs& a, CellType cell) {
  a.options->finish();
  return std::make_unique<RNNStack<S>>(ps, cell, a.input_size, a.hidden_sizes, a.dropout, a.rng);
}
template <class S> std::unique_ptr<Core<S>> make_lstm(ParamSet<S>& ps, const CoreArgs& a) {
  return make_stack<S>(ps, a, CellType::LSTM);
}
template <class S> std::unique_ptr<Core<S>> make_gru(ParamSet<S>& ps, const CoreArgs& a) {
  return make_stack<S>(ps, a, CellType::GRU);
}
template <class S> std::unique_ptr<Core<S>> make_elman(ParamSet<S>& ps, const CoreArgs& a) {
  return make_stack<S>(ps, a, CellType::Elman);
}
}  // namespace
MSRNN_REGISTER_CORE("lstm", make_lstm, CoreSchema{});
MSRNN_REGISTER_CORE("gru", make_gru, CoreSchema{});
MSRNN_REGISTER_CORE("rnn_tanh", make_elman, CoreSchema{});

}  // namespace msrnn
