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
    torch_layer = "LSTM"  # multiscale_rnn.export.to_torch
    example_options = dict(embed_size=8, hidden_sizes=(12, 12))


class GRU(LanguageModel):
    """Stacked GRU language model (PyTorch's GRU: r, z, n gates; b_hn inside the reset product)."""

    core_name = "gru"
    torch_layer = "GRU"
    example_options = dict(embed_size=8, hidden_sizes=(12, 12))


class ElmanRNN(LanguageModel):
    """Stacked Elman RNN language model: h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)."""

    core_name = "rnn_tanh"
    aliases = ("rnn", "rnn_tanh", "elman")
    torch_layer = "RNN"  # nonlinearity tanh
    example_options = dict(embed_size=8, hidden_sizes=(12, 12))


# The presets of this family (``multiscale-rnn train --preset NAME``; ``multiscale_rnn.presets`` gathers
# every registered family's): settings with the keys of a TOML config file (docs/cli.md).
PRESETS = {
    "quick": {
        "about": "A one-minute demonstration on 2 cores: a 1-layer LSTM of 256 units, two epochs of the "
        "shipped text (The Devil's Dictionary, 345k training characters).",
        "model": "lstm",
        "embed_size": 64,
        "hidden_sizes": [256],
        "data": "embedded",
        "epochs": 2,
        "batch_size": 16,
        "bptt": 50,
        "optimizer": "adam",
        "lr": 4e-3,
        "clip_norm": 1.0,
        "out": "runs/quick.npz",
    },
    "synthetic": {
        "about": "A small LSTM on the generated hierarchical text (characters -> words -> phrases).",
        "model": "lstm",
        "embed_size": 32,
        "hidden_sizes": [128],
        "data": "synthetic",
        "data_options": {"n_chars": 200_000, "seed": 0},
        "epochs": 2,
        "batch_size": 32,
        "bptt": 100,
        "optimizer": "adam",
        "lr": 3e-3,
        "clip_norm": 1.0,
        "out": "runs/synthetic.npz",
    },
    "ptb-char-lstm": {
        "about": "A standard LSTM baseline on Penn Treebank characters (needs --data-path): 1 layer of 1000 "
        "units, Adam 2e-3, batch 128, 100 steps, gradient norm clipped to 1, learning rate halved "
        "when validation stops improving.",
        "model": "lstm",
        "embed_size": 128,
        "hidden_sizes": [1000],
        "data": "ptb-char",
        "epochs": 20,
        "batch_size": 128,
        "bptt": 100,
        "optimizer": "adam",
        "lr": 2e-3,
        "clip_norm": 1.0,
        "lr_schedule": "plateau",
        "lr_factor": 2.0,
        "patience": 0,
        "out": "runs/ptb-char-lstm.npz",
    },
}
