"""How much a variable-computation RNN computes where: the numbers behind Figures 2 and 3 and
Table 2 of Jernite et al. (2017), from a trace of the model (``model.trace(...)``: any object
with ``tokens`` (T,), ``text`` (T symbols or None), ``m`` (T,) the scheduler's m_t in [0, 1],
``d`` (T,) the dimensions updated at each step, ``e`` (D, T) the update mask and
``equivalent_dim``). Plots in :mod:`multiscale_rnn.plot.vcrnn_computation`.

At step t the scheduler reads h_{t-1} and x_t, m_t = sigma(u . h_{t-1} + v . x_t + b), and only
the first ceil(m_t D) dimensions (softly, through e_t) are updated; m_t is therefore attributed
to the **input** symbol x_t (``trace.tokens[t]``). To attribute it to the predicted symbol
instead, pass ``values[:-1]`` with ``classes[1:]``.

Figure 3, computation along a text:
    character_profile(trace)                 -> (values (T,), symbols, spaces (T,) bool)
Figure 2, computation of the top dimensions by bit position (bit-level text):
    top_dimension_activity(trace, top)       -> (T,)  mean of e_t over the top dimensions
    bit_position_profile(trace, positions)   -> {position: mean}  0..7 bits, 8.. buffer
Table 2, mean m_t per symbol class (music: note lengths):
    mean_by_class(values, classes)           -> {class: mean}
    music_computation(trace)                 -> {note length / "rest" / "bar" / "end": mean m_t}
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Dict, Hashable, List, Optional, Sequence, Tuple, Union, cast

import numpy as np

from .._checks import is_int
from ..data.bits import bit_positions
from ..data.music import MUSIC_KINDS, symbol_classes

__all__ = [
    "character_profile",
    "top_dimension_activity",
    "bit_position_profile",
    "mean_by_class",
    "class_order",
    "music_computation",
    "trace_symbols",
]


def _field(trace, name: str) -> np.ndarray:
    if not hasattr(trace, name):
        raise TypeError(
            f"expected a variable-computation trace (model.trace(...)) with '{name}', got {type(trace).__name__}"
        )
    return np.asarray(getattr(trace, name))


def _steps(trace) -> int:
    m = _field(trace, "m")
    if m.ndim != 1:
        raise ValueError(f"trace.m must have shape (T,), got {m.shape}")
    return m.shape[0]


def trace_symbols(trace, vocab=None) -> List[Any]:
    """The symbols of a trace: ``trace.text`` when set, else ``vocab.itos`` of ``trace.tokens``,
    else the token ids."""
    T = _steps(trace)
    text = getattr(trace, "text", None)
    if text is not None:
        symbols = list(text)
    else:
        tokens = _field(trace, "tokens").tolist()
        symbols = [vocab.itos[t] for t in tokens] if vocab is not None else tokens
    if len(symbols) != T:
        raise ValueError(f"the trace has {len(symbols)} symbols but {T} steps")
    return symbols


def character_profile(trace, what: str = "m") -> Tuple[np.ndarray, List[Any], np.ndarray]:
    """Figure 3: the computation at each step, its symbol, and where the symbol is a space (a
    word boundary). ``what="m"``: m_t; ``"d"``: d_t / D, the fraction of dimensions updated
    (D = ``trace.e.shape[0]``)."""
    T = _steps(trace)
    if what == "m":
        values = _field(trace, "m").astype(float)
    elif what == "d":
        e = _field(trace, "e")
        values = _field(trace, "d").astype(float) / e.shape[0]
    else:
        raise ValueError(f"what must be 'm' or 'd', got {what!r}")
    symbols = trace_symbols(trace)
    spaces = np.array([s == " " for s in symbols], dtype=bool).reshape(T)
    return values, symbols, spaces


def _top_rows(D: int, top: Union[float, int, Sequence[int], slice]) -> np.ndarray:
    if isinstance(top, slice):
        rows = np.arange(D)[top]
    elif isinstance(top, (float, np.floating)) and not isinstance(top, bool):
        if not 0 < top <= 1:
            raise ValueError(f"top as a fraction must be in (0, 1], got {top}")
        rows = np.arange(D - max(1, math.ceil(top * D - 1e-9)), D)
    elif is_int(top):
        top = cast(int, top)
        if not 1 <= top <= D:
            raise ValueError(f"top as a count must be in 1..{D}, got {top}")
        rows = np.arange(D - int(top), D)
    else:
        rows = np.asarray(top, dtype=int).reshape(-1)
        if rows.size and (rows.min() < 0 or rows.max() >= D):
            raise ValueError(f"top dimensions must lie in 0..{D - 1}")
    if rows.size == 0:
        raise ValueError("no dimension selected by top")
    return rows


def top_dimension_activity(trace, top: Union[float, int, Sequence[int], slice] = 0.05) -> np.ndarray:
    """Mean of the update mask e_t over the top (highest-index) dimensions at each step, (T,).
    ``top``: a fraction of D (0.05: the top 5 %, the paper's 950..999 of 1000), a count, or
    explicit rows (a slice or indices)."""
    T = _steps(trace)
    e = _field(trace, "e").astype(float)
    if e.ndim != 2 or e.shape[1] != T:
        raise ValueError(f"trace.e must have shape (D, {T}), got {e.shape}")
    return e[_top_rows(e.shape[0], top)].mean(axis=0)


def bit_position_profile(
    trace,
    positions: Optional[Sequence[int]] = None,
    buffer_bits: int = 0,
    offset: int = 0,
    top: Union[float, int, Sequence[int], slice, None] = 0.05,
) -> Dict[int, float]:
    """Figure 2: mean computation by position within the character frame of bit-level text:
    positions 0..7 are the character's bits (0 the most significant), 8..7+buffer_bits the
    buffer. ``positions``: each step's position (``BitCorpus.positions[split][start:start+T]``);
    else they follow from ``buffer_bits`` and ``offset`` (the frame position of step 0). The
    computation is :func:`top_dimension_activity` with ``top``, or m_t when ``top`` is None.
    Returns {position: mean} over the positions present, in increasing order."""
    T = _steps(trace)
    values = _field(trace, "m").astype(float) if top is None else top_dimension_activity(trace, top)
    pos = bit_positions(T, buffer_bits, offset) if positions is None else np.asarray(positions).reshape(-1)
    if pos.shape[0] != T:
        raise ValueError(f"positions has {pos.shape[0]} entries but the trace has {T} steps")
    means = cast(Dict[Any, float], mean_by_class(values, pos.tolist()))  # without counts: one dict
    return {int(p): v for p, v in means.items()}


def class_order(classes) -> List[Hashable]:
    """Classes in display order: numbers and fractions (``"1/3"``) ascending, then the music
    kinds (rest, bar, end, unknown), then the rest sorted by their text."""

    def key(c):
        try:
            return (0, float(Fraction(str(c))), "")
        except (ValueError, ZeroDivisionError):
            pass
        if c in MUSIC_KINDS:
            return (1, float(MUSIC_KINDS.index(c)), "")
        return (2, 0.0, str(c))

    return sorted(set(classes), key=key)


def mean_by_class(
    values, classes, order: Optional[Sequence[Hashable]] = None, counts: bool = False
) -> Union[Dict[Any, float], Tuple[Dict[Any, float], Dict[Any, int]]]:
    """Mean of ``values`` (T,) per label of ``classes`` (T labels), as {class: mean} in
    ``order`` (default :func:`class_order`; classes of ``order`` absent from ``classes`` are
    left out). NaN values are ignored. With ``counts=True`` also {class: number of steps}."""
    v = np.asarray(values, dtype=float).reshape(-1)
    labels = list(classes)
    if len(labels) != v.shape[0]:
        raise ValueError(f"values has {v.shape[0]} entries but classes has {len(labels)}")
    sums: Dict[Any, float] = {}
    ns: Dict[Any, int] = {}
    for x, c in zip(v.tolist(), labels):
        if x == x:
            sums[c] = sums.get(c, 0.0) + x
            ns[c] = ns.get(c, 0) + 1
    keys = [c for c in (class_order(ns) if order is None else order) if c in ns]
    means = {c: sums[c] / ns[c] for c in keys}
    return (means, {c: ns[c] for c in keys}) if counts else means


def music_computation(trace, vocab=None, by: str = "length", counts: bool = False):
    """Table 2: mean m_t per music symbol class, with classes from
    :func:`multiscale_rnn.data.symbol_classes` (``by="length"``: note lengths in quarter notes,
    ``"1/4"``, ``"1/3"``, ``"1/2"``, ..., then ``"rest"``, ``"bar"``, ``"end"``; ``by="kind"``).
    The symbols come from ``trace.text`` or ``vocab`` (see :func:`trace_symbols`)."""
    symbols = trace_symbols(trace, vocab)
    return mean_by_class(_field(trace, "m"), symbol_classes(symbols, by=by), counts=counts)
