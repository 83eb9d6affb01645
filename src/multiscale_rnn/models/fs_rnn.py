"""Fast-Slow RNN (Mujika, Meier, Steger, NIPS 2017) and the comparison models of its Section 4.2.

FS-RNN with K >= 2 fast cells F1..FK (one shared fast state of size H_F) and one slow cell S (H_S):

    h^{F1}_t = f^{F1}(h^{FK}_{t-1}, x_t)
    h^S_t    = f^S(h^S_{t-1}, h^{F1}_t)
    h^{F2}_t = f^{F2}(h^{F1}_t, h^S_t)
    h^{Fi}_t = f^{Fi}(h^{F(i-1)}_t)          3 <= i <= K   (no input term)
    logits_t = W_dec h^{FK}_t + b_dec

Each f is an LSTM (default) or GRU cell; for LSTM the state handed along is the pair (h, c).
The paper's LN-LSTM cell (``layer_norm=True``):

    a = W_ih x + W_hh h_{t-1};   a^k <- LN(a^k) for each gate k in (i, f, g, o) separately
    c~_t = sigm(a_f) * c_{t-1} + sigm(a_i) * tanh(a_g);   h~_t = sigm(a_o) * tanh(LN(c~_t))

Zoneout (``zoneout_c``, ``zoneout_h``: probabilities of keeping the previous value) on every
cell's recurrent connection: c_t = m_c * c~_t + (1 - m_c) * c_{t-1} with m_c ~ Bernoulli(1 - z_c)
in training and m_c = 1 - z_c (the expectation) in evaluation; the same for h. ``dropout`` acts on
every non-recurrent connection with a fresh mask each step: the embedding, h^{F1} into S, h^S
into F2, and h^{FK} into the softmax.

``SequentialLSTM``: K cells one after another within a step (the fast layer alone),
h^1_t = f^1(h^K_{t-1}, x_t), h^i_t = f^i(h^{i-1}_t). ``StackedLSTM``: the usual stack, with layer
norm and zoneout available in its cells. Both default to layer norm on the cell states only, as in
the paper's Section 4.2.

Initialisation (all three, after the paper): every weight matrix orthogonal (each gate block of a
recurrent matrix), biases and layer-norm shifts 0, layer-norm gains 1, LSTM forget-gate bias 1.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import numpy as np

from .base import LanguageModel

LayerNorm = Union[bool, str]
_CELLS = ("lstm", "gru")


def _layer_norm_flags(layer_norm: LayerNorm) -> Tuple[bool, bool]:
    """(on the gates, on the cell state) from True / False / "cell" / "gates"."""
    if layer_norm is True:
        return True, True
    if layer_norm is False or layer_norm is None:
        return False, False
    if layer_norm == "cell":
        return False, True
    if layer_norm == "gates":
        return True, False
    raise ValueError(f"layer_norm must be True, False, 'cell' or 'gates', got {layer_norm!r}")


def _check_cell(name: str, what: str) -> str:
    if name not in _CELLS:
        raise ValueError(f"{what} must be 'lstm' or 'gru', got {name!r}")
    return name


def _probability(p: float, what: str) -> float:
    if not 0.0 <= float(p) < 1.0:
        raise ValueError(f"{what} must be in [0, 1), got {p}")
    return float(p)


def _cell_options(cells, layer_norm: LayerNorm, zoneout_c: float, zoneout_h: float) -> dict:
    ln_gates, ln_cell = _layer_norm_flags(layer_norm)
    any_lstm = "lstm" in cells
    zoneout_c = _probability(zoneout_c, "zoneout_c")
    if zoneout_c and not any_lstm:
        raise ValueError("zoneout_c acts on LSTM cell states; a GRU has none")
    return dict(layer_norm_gates=ln_gates, layer_norm_cell=ln_cell and any_lstm, zoneout_c=zoneout_c,
                zoneout_h=_probability(zoneout_h, "zoneout_h"))


def paper_init(model: LanguageModel, seed: int = 0) -> None:
    """The FS-RNN paper's initialisation: orthogonal weight matrices (embedding or encoder, every
    cell's ``weight_ih``/``weight_hh`` by gate block, decoder), zero biases and layer-norm shifts, unit
    layer-norm gains, and forget-gate bias 1 in every LSTM cell (on ``bias_ih``, or on the
    forget block of ``ln_gates_bias`` when the gates are layer-normalised)."""
    from .. import init
    rng = np.random.default_rng(seed)
    init.default(model, rng)                    # the decoder bias
    params = model.parameters()
    init.orthogonal(model, "weight_*", rng=rng)
    for name in ("embedding.weight", "encoder.weight", "decoder.weight"):   # whichever the model has
        if name in params:
            init.orthogonal(model, name, rng=rng)
    for name, p in params.items():
        if name.startswith(("bias_", "ln_gates_bias", "ln_cell_bias")):
            p[...] = 0.0
        elif name.startswith(("ln_gates_weight", "ln_cell_weight")):
            p[...] = 1.0
    for name, w in params.items():
        if not name.startswith("weight_hh") or w.shape[0] != 4 * w.shape[1]:
            continue                                # LSTM cells only: (4H, H) recurrent matrices
        suffix = name[len("weight_hh"):]
        target = "bias_ih" + suffix if "bias_ih" + suffix in params else "ln_gates_bias" + suffix
        init.forget_bias(model, 1.0, pattern=target)


class FSRNN(LanguageModel):
    """Fast-Slow RNN language model.

    ``fast_size``, ``slow_size``: H_F, H_S. ``fast_cells``: K >= 2. ``cell``: the fast cells' type,
    ``slow_cell``: the slow cell's (default: the same). ``layer_norm``: True (each gate and the cell
    state, the paper's default), "cell", "gates" or False. ``hidden_sizes=(H_F, H_S)`` may replace
    the two sizes (checkpoints store it that way).
    """
    core_name = "fs_rnn"

    def __init__(self, vocab_size: int, embed_size: int, fast_size: Optional[int] = None,
                 slow_size: Optional[int] = None, *, fast_cells: int = 2, cell: str = "lstm",
                 slow_cell: Optional[str] = None, layer_norm: LayerNorm = True, zoneout_c: float = 0.0,
                 zoneout_h: float = 0.0, dropout: float = 0.0, dtype: str = "float32", seed: int = 0,
                 hidden_sizes: Optional[Sequence[int]] = None, head: str = "linear", head_size: int = 0,
                 input_size: Optional[int] = None):
        if hidden_sizes is not None:
            if fast_size is not None or slow_size is not None:
                raise ValueError("give either fast_size and slow_size or hidden_sizes, not both")
            if len(hidden_sizes) != 2:
                raise ValueError(f"hidden_sizes must be (fast size, slow size), got {hidden_sizes!r}")
            fast_size, slow_size = hidden_sizes
        if fast_size is None or slow_size is None:
            raise ValueError("FSRNN needs fast_size and slow_size")
        if not isinstance(fast_cells, (int, np.integer)) or isinstance(fast_cells, bool) or fast_cells < 2:
            raise ValueError(f"fast_cells must be an integer >= 2, got {fast_cells!r}")
        cell = _check_cell(cell, "cell")
        slow_cell = _check_cell(slow_cell or cell, "slow_cell")
        options = dict(fast_cells=int(fast_cells), fast_cell=cell, slow_cell=slow_cell,
                       **_cell_options((cell, slow_cell), layer_norm, zoneout_c, zoneout_h))
        super().__init__(vocab_size, embed_size, (fast_size, slow_size), dropout=dropout, dtype=dtype, seed=seed,
                         options=options, head=head, head_size=head_size, input_size=input_size,
                         fast_cells=int(fast_cells), cell=cell, slow_cell=slow_cell,
                         layer_norm=layer_norm, zoneout_c=float(zoneout_c), zoneout_h=float(zoneout_h))

    def reset_parameters(self, seed: int = 0) -> None:
        paper_init(self, seed)


class _ChainOrStack(LanguageModel):
    def __init__(self, vocab_size: int, embed_size: int, hidden_sizes, *, cell: str = "lstm",
                 layer_norm: LayerNorm = "cell", zoneout_c: float = 0.0, zoneout_h: float = 0.0,
                 dropout: float = 0.0, dtype: str = "float32", seed: int = 0, head: str = "linear",
                 head_size: int = 0, input_size: Optional[int] = None):
        cell = _check_cell(cell, "cell")
        options = dict(cell=cell, **_cell_options((cell,), layer_norm, zoneout_c, zoneout_h))
        super().__init__(vocab_size, embed_size, hidden_sizes, dropout=dropout, dtype=dtype, seed=seed,
                         options=options, head=head, head_size=head_size, input_size=input_size, cell=cell, layer_norm=layer_norm, zoneout_c=float(zoneout_c),
                         zoneout_h=float(zoneout_h))

    def reset_parameters(self, seed: int = 0) -> None:
        paper_init(self, seed)


class StackedLSTM(_ChainOrStack):
    """Stacked LSTM (or GRU, ``cell="gru"``) whose cells take layer norm and zoneout: the FS-RNN
    paper's stacked-LSTM, with layer norm on the cell states by default (``layer_norm="cell"``).
    ``hidden_sizes``: one size per layer. ``dropout`` acts on the embedding, between layers and
    before the softmax. With ``layer_norm=False`` and no zoneout it computes what ``msr.LSTM`` does."""
    core_name = "stacked_lstm"


class SequentialLSTM(_ChainOrStack):
    """Sequential LSTM: K cells connected one after another within each step, only the first
    reading x_t: h^1_t = f^1(h^K_{t-1}, x_t), h^i_t = f^i(h^{i-1}_t), output h^K_t.
    ``hidden_sizes``: K equal sizes (the cells share one state). Layer norm on the cell states by
    default, as in the paper's Section 4.2."""
    core_name = "sequential_lstm"


def _register_names() -> None:
    from .registry import register_model
    register_model("fs-lstm", FSRNN)
    register_model("fs-rnn", FSRNN)


_register_names()
