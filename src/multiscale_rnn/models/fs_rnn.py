"""Fast-Slow RNN (Mujika, Meier, Steger, NIPS 2017) and the comparison models of its Section 4.2.

FS-RNN with K >= 2 fast cells F1..FK (one shared fast state of size H_F) and one slow cell S (H_S):

    h^{F1}_t = f^{F1}(h^{FK}_{t-1}, x_t)
    h^S_t    = f^S(h^S_{t-1}, h^{F1}_t)
    h^{F2}_t = f^{F2}(h^{F1}_t, h^S_t)
    h^{Fi}_t = f^{Fi}(h^{F(i-1)}_t)          3 <= i <= K   (no input term)
    logits_t = W_dec h^{FK}_t + b_dec

Each f is an LSTM (default) or GRU cell; for LSTM the state handed along is the pair (h, c).
The paper's LN-LSTM cell (``layer_norm=True``):

    a = W_ih x + W_hh h_{t-1} [+ b];   a^k <- LN(a^k) for each gate k in (i, f, g, o) separately
    c~_t = sigm(a_f) * c_{t-1} + sigm(a_i) * tanh(a_g);   h~_t = sigm(a_o) * tanh(LN(c~_t))

LN(x) = gamma * (x - mean(x)) / sqrt(var(x) + eps) + beta over the H units, eps = ``layer_norm_eps``
(1e-5 by default; 1e-3 in the authors' code). ``bias_before_norm=True`` adds the trainable bias b
(``bias_*``, 4H) before the gate layer norms, as the authors' code does (GRU cells: to the input term).

Zoneout (``zoneout_c``, ``zoneout_h``: probabilities of keeping the previous value) on every
cell's recurrent connection: c_t = m_c * c~_t + (1 - m_c) * c_{t-1} with m_c ~ Bernoulli(1 - z_c)
in training and m_c = 1 - z_c (the expectation) in evaluation; the same for h. ``dropout`` acts on
every non-recurrent connection with a fresh mask each step: the embedding, h^{F1} into S, h^S
into F2, and h^{FK} into the softmax.

``SequentialLSTM``: K cells one after another within a step (the fast layer alone),
h^1_t = f^1(h^K_{t-1}, x_t), h^i_t = f^i(h^{i-1}_t). ``StackedLSTM``: the usual stack, with layer
norm and zoneout available in its cells. Both default to layer norm on the cell states only, as in
the paper's Section 4.2.

Initialisation (all three, after the paper): every weight matrix orthogonal, each gate block of a
cell's matrices (``orthogonal_init="blocks"``, the default) or each whole matrix (``"whole"``, the
authors' code); biases and layer-norm shifts 0, layer-norm gains 1, LSTM forget-gate bias 1.

The paper presets (``presets.py``) use the authors' code's readings: ``layer_norm_eps=1e-3``,
``bias_before_norm=True``, ``orthogonal_init="whole"``. The defaults stay 1e-5, False, "blocks": the
models and checkpoints made before these options existed keep computing what they did.
"""

from __future__ import annotations

from typing import Tuple, Union

import numpy as np

from .base import LanguageModel, Option, core_declared

__all__ = ["FSRNN", "StackedLSTM", "SequentialLSTM"]

LayerNorm = Union[bool, str]


def _layer_norm_flags(layer_norm: LayerNorm) -> Tuple[bool, bool]:
    """(on the gates, on the cell state) from True / False / "cell" / "gates"."""
    return {True: (True, True), False: (False, False), "cell": (False, True), "gates": (True, False)}[layer_norm]


def _cell_options(cells, values) -> dict:
    ln_gates, ln_cell = _layer_norm_flags(values["layer_norm"])
    if values["zoneout_c"] and "lstm" not in cells:
        raise ValueError("zoneout_c acts on LSTM cell states; a GRU has none")
    if values["bias_before_norm"] and not ln_gates:
        raise ValueError(
            f"bias_before_norm adds a bias before the gate layer norm; layer_norm="
            f"{values['layer_norm']!r} has none (use True or 'gates')"
        )
    return dict(
        layer_norm_gates=ln_gates,
        layer_norm_cell=ln_cell and "lstm" in cells,
        zoneout_c=values["zoneout_c"],
        zoneout_h=values["zoneout_h"],
        layer_norm_eps=values["layer_norm_eps"],
        bias_before_norm=values["bias_before_norm"],
    )


_LAYER_NORM = Option(
    "layer_norm",
    object,
    True,
    choices=(True, False, "cell", "gates"),
    core=False,
    doc="True (each gate and the cell state), 'cell', 'gates' or False",
)
_ORTHOGONAL_INIT = Option(
    "orthogonal_init",
    str,
    "blocks",
    choices=("blocks", "whole"),
    core=False,
    doc="orthogonal initialisation of each gate block or of each whole matrix (the authors' code)",
)
# layer_norm stands for the core's layer_norm_gates and layer_norm_cell (_layer_norm_flags)
_SET_BY_LAYER_NORM = ("layer_norm_gates", "layer_norm_cell")


def _chain_options(core_name: str):
    """The options of the stacked and sequential LSTM: their core's table (cpp/src/cores/fs_rnn.cpp), with
    ``layer_norm`` for its two layer-norm flags, and the initialisation's option."""
    return core_declared(core_name, skip=_SET_BY_LAYER_NORM) + (_LAYER_NORM, _ORTHOGONAL_INIT)


def paper_init(model: LanguageModel, seed: int = 0) -> None:
    """The FS-RNN paper's initialisation: orthogonal weight matrices (embedding or encoder, every
    cell's ``weight_ih``/``weight_hh`` by gate block or whole, as the model's ``orthogonal_init``
    says, decoder), zero biases and layer-norm shifts, unit layer-norm gains, and forget-gate bias 1
    in every LSTM cell (on ``bias_ih``, or on the forget block of ``ln_gates_bias`` when the gates
    are layer-normalised: a bias before the normalisation could not carry it)."""
    from .. import init

    rng = np.random.default_rng(seed)
    init.default(model, rng)  # the decoder bias
    params = model.parameters()
    whole = model.config.get("orthogonal_init", "blocks") == "whole"
    init.orthogonal(model, "weight_*", rng=rng, by_blocks=not whole)
    for name in ("embedding.weight", "encoder.weight", "decoder.weight"):  # whichever the model has
        if name in params:
            init.orthogonal(model, name, rng=rng)
    roles = model.parameter_roles()
    for name, p in params.items():
        if roles[name].kind in ("bias", "shift") and roles[name].layer:
            p[...] = 0.0
        elif roles[name].kind == "gain":
            p[...] = 1.0
    if any(r.unit and params[n].shape == (4 * r.unit,) for n, r in roles.items() if r.kind in ("bias", "shift")):
        init.forget_bias(model, 1.0, prefer="shift")


class FSRNN(LanguageModel):
    """Fast-Slow RNN language model.

    ``fast_size``, ``slow_size``: H_F, H_S. ``fast_cells``: K >= 2. ``cell``: the fast cells' type,
    ``slow_cell``: the slow cell's (default: the same). ``layer_norm``: True (each gate and the cell
    state, the paper's default), "cell", "gates" or False. ``hidden_sizes=(H_F, H_S)`` may replace
    the two sizes (checkpoints store it that way).
    """

    core_name = "fs_rnn"
    aliases = ("fs-lstm", "fs-rnn")
    example_options = dict(embed_size=8, fast_size=10, slow_size=12)
    positional = ("vocab_size", "embed_size", "fast_size", "slow_size")
    family_options = (
        Option("fast_size", int, None, check=lambda v: v >= 1, rule=">= 1", core=False, doc="H_F"),
        Option("slow_size", int, None, check=lambda v: v >= 1, rule=">= 1", core=False, doc="H_S"),
        # the core's table (cpp/src/cores/fs_rnn.cpp): its fast_cell is the keyword cell, its slow_cell follows it
        *core_declared("fs_rnn", rename={"fast_cell": "cell"}, derived=("slow_cell",), skip=_SET_BY_LAYER_NORM),
        _LAYER_NORM,
        _ORTHOGONAL_INIT,
    )

    def core_options(self, values, sizes):
        fast, slow, hidden = values.pop("fast_size"), values.pop("slow_size"), sizes["hidden_sizes"]
        if hidden is not None:
            if fast is not None or slow is not None:
                raise ValueError("give either fast_size and slow_size or hidden_sizes, not both")
            if np.isscalar(hidden) or len(hidden) != 2:
                raise ValueError(f"hidden_sizes must be (fast size, slow size), got {hidden!r}")
        elif fast is None or slow is None:
            raise ValueError("FSRNN needs fast_size and slow_size")
        else:
            sizes["hidden_sizes"] = (fast, slow)
        values["slow_cell"] = values["slow_cell"] or values["cell"]
        cells = (values["cell"], values["slow_cell"])
        return dict(
            fast_cells=values["fast_cells"], fast_cell=cells[0], slow_cell=cells[1], **_cell_options(cells, values)
        )

    def reset_parameters(self, seed: int = 0) -> None:
        paper_init(self, seed)


class _ChainOrStack(LanguageModel):
    defaults = dict(layer_norm="cell")

    def core_options(self, values, sizes):
        return dict(cell=values["cell"], **_cell_options((values["cell"],), values))

    def reset_parameters(self, seed: int = 0) -> None:
        paper_init(self, seed)


class StackedLSTM(_ChainOrStack):
    """Stacked LSTM (or GRU, ``cell="gru"``) whose cells take layer norm and zoneout: the FS-RNN
    paper's stacked-LSTM, with layer norm on the cell states by default (``layer_norm="cell"``).
    ``hidden_sizes``: one size per layer. ``dropout`` acts on the embedding, between layers and
    before the softmax. With ``layer_norm=False`` and no zoneout it computes what ``msr.LSTM`` does."""

    core_name = "stacked_lstm"
    example_options = dict(embed_size=8, hidden_sizes=(10, 10))
    family_options = _chain_options("stacked_lstm")


class SequentialLSTM(_ChainOrStack):
    """Sequential LSTM: K cells connected one after another within each step, only the first
    reading x_t: h^1_t = f^1(h^K_{t-1}, x_t), h^i_t = f^i(h^{i-1}_t), output h^K_t.
    ``hidden_sizes``: K equal sizes (the cells share one state). Layer norm on the cell states by
    default, as in the paper's Section 4.2."""

    core_name = "sequential_lstm"
    example_options = dict(embed_size=8, hidden_sizes=(10, 10))
    family_options = _chain_options("sequential_lstm")


# The presets of this family (``multiscale-rnn train --preset NAME``; ``multiscale_rnn.presets`` gathers
# every registered family's): settings with the keys of a TOML config file (docs/cli.md).
def _fs_lstm(data, fast, slow, k, dropout, zoneout_c, zoneout_h, embed, bptt, lr, epochs, schedule, about):
    """One column of the FS-RNN paper's Table 3: Adam, gradient norm clipped to 1, batch 128; the
    cells as the authors' code has them (docs/models/fs_rnn.md, "Readings"): layer-norm epsilon
    1e-3, a bias before each gate's layer norm, whole-matrix orthogonal initialisation."""
    return {
        "about": about,
        "model": "fsrnn",
        "embed_size": embed,
        "hidden_sizes": [fast, slow],
        "dropout": dropout,
        "options": {
            "fast_cells": k,
            "cell": "lstm",
            "layer_norm": True,
            "zoneout_c": zoneout_c,
            "zoneout_h": zoneout_h,
            "layer_norm_eps": 1e-3,
            "bias_before_norm": True,
            "orthogonal_init": "whole",
        },
        "data": data,
        "epochs": epochs,
        "batch_size": 128,
        "bptt": bptt,
        "optimizer": "adam",
        "lr": lr,
        "clip_norm": 1.0,
        **schedule,
    }


# Penn Treebank: lr / 10 for the last 20 of 200 epochs. enwik8: lr / 10 whenever the validation
# loss has not improved for two epochs in a row.
_PTB_RULE = {"lr_schedule": "multistep", "lr_milestones": [180], "lr_factor": 10.0}
_ENWIK8_RULE = {"lr_schedule": "plateau", "lr_factor": 10.0, "patience": 1}
_FS_SOURCE = "Mujika et al. 2017, Table 3 (needs --data-path). "

_COLUMNS = {
    "ptb-char-fs-lstm-2": _fs_lstm(
        "ptb-char",
        700,
        400,
        2,
        0.35,
        0.5,
        0.1,
        128,
        150,
        2e-3,
        200,
        _PTB_RULE,
        _FS_SOURCE + "FS-LSTM-2 on Penn Treebank characters: fast cells 700, slow cell 400, layer norm, "
        "zoneout 0.5 (cells) / 0.1 (hidden), dropout 0.35; 1.19 BPC in the paper.",
    ),
    "ptb-char-fs-lstm-4": _fs_lstm(
        "ptb-char",
        500,
        400,
        4,
        0.35,
        0.5,
        0.1,
        128,
        150,
        2e-3,
        200,
        _PTB_RULE,
        _FS_SOURCE + "FS-LSTM-4 on Penn Treebank characters: four fast cells of 500, slow cell 400; "
        "1.193 BPC in the paper.",
    ),
    "enwik8-fs-lstm-2": _fs_lstm(
        "enwik8",
        900,
        1500,
        2,
        0.2,
        0.3,
        0.05,
        256,
        150,
        1e-3,
        35,
        _ENWIK8_RULE,
        _FS_SOURCE + "FS-LSTM-2 on enwik8: fast cells 900, slow cell 1500, dropout 0.2, zoneout 0.3 / "
        "0.05; 1.290 BPC in the paper.",
    ),
    "enwik8-fs-lstm-4": _fs_lstm(
        "enwik8",
        730,
        1500,
        4,
        0.2,
        0.3,
        0.05,
        256,
        150,
        1e-3,
        35,
        _ENWIK8_RULE,
        _FS_SOURCE + "FS-LSTM-4 on enwik8: four fast cells of 730, slow cell 1500; 1.277 BPC in the paper.",
    ),
    "enwik8-large-fs-lstm-4": _fs_lstm(
        "enwik8",
        1200,
        1500,
        4,
        0.25,
        0.3,
        0.05,
        256,
        100,
        1e-3,
        50,
        _ENWIK8_RULE,
        _FS_SOURCE + "Large FS-LSTM-4 on enwik8: four fast cells of 1200, slow cell 1500, dropout 0.25, "
        "100 steps; 1.245 BPC in the paper.",
    ),
}
PRESETS = {name: {**preset, "out": f"runs/{name}.npz"} for name, preset in _COLUMNS.items()}
