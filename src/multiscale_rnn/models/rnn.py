"""Baseline language models: stacked LSTM, GRU and Elman (tanh) RNN.

    x_t = embedding[token_t]
    h^l_t = cell(h^{l-1}_t, h^l_{t-1})   for l = 1..L   (h^0_t = x_t)
    logits_t = W_dec h^L_t + b_dec

Cells follow PyTorch's equations, gate order and parameter names (``weight_ih_l0`` ...), so
weights copy to and from ``torch.nn.LSTM`` / ``GRU`` / ``RNN``. With ``dropout=p``, inverted
dropout acts on every non-recurrent connection: the embeddings, between layers, and before the
softmax (Zaremba et al. 2014); recurrent connections are never dropped.
"""

from __future__ import annotations

from .base import LanguageModel

__all__ = ["LSTM", "GRU", "ElmanRNN"]


class LSTM(LanguageModel):
    """Stacked LSTM language model. ``hidden_sizes``: one size per layer, e.g. ``(512, 512, 512)``."""

    core_name = "lstm"
    example_options = dict(embed_size=8, hidden_sizes=(12, 12))


class GRU(LanguageModel):
    """Stacked GRU language model (PyTorch's GRU: r, z, n gates; b_hn inside the reset product)."""

    core_name = "gru"
    example_options = dict(embed_size=8, hidden_sizes=(12, 12))


class ElmanRNN(LanguageModel):
    """Stacked Elman RNN language model: h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)."""

    core_name = "rnn_tanh"
    aliases = ("rnn", "rnn_tanh", "elman")
    example_options = dict(embed_size=8, hidden_sizes=(12, 12))
