"""The variable-computation figures of Jernite et al. (2017): per-character computation along a
text (Figure 3), computation of the top dimensions by bit position (Figure 2) and mean m_t per
symbol class (Table 2), drawn from a trace (``model.trace(...)``: ``tokens``, ``text``, ``m``,
``d``, ``e``, ``equivalent_dim``). The numbers come from :mod:`multiscale_rnn.analysis.vcrnn_computation`.

Artists carry a gid so that they can be found again: ``"computation"`` (the bars of m_t or of
the means), ``"space"`` (word-boundary marks), ``"buffer"`` (bars of buffer bits).
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Union

import numpy as np

from .._checks import positive_int
from ..analysis.vcrnn_computation import bit_position_profile, character_profile, music_computation
from ..data.bits import BITS_PER_CHAR

__all__ = ["computation_profile", "bit_profile", "class_computation"]


def _show(s) -> str:
    return "_" if s == " " else ("\u21b5" if s == "\n" else str(s))


def computation_profile(
    trace,
    width: int = 80,
    start: int = 0,
    stop: Optional[int] = None,
    what: str = "m",
    ax=None,
    fontsize: float = 7.0,
    color: str = "C0",
    space_color: str = "0.85",
):
    """Figure 3: a bar of m_t (``what="m"``) or d_t / D (``"d"``) at each step, the symbol under
    it, wrapped into rows of ``width`` steps (row 0 at the top); spaces (word boundaries) are
    marked by a grey band behind their bar and written ``_``. ``start`` / ``stop`` select a
    window of the trace. Returns the Axes."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    positive_int(width, "width")
    values, symbols, spaces = character_profile(trace, what)
    T = len(values)
    stop = T if stop is None else stop
    if not 0 <= start < stop <= T:
        raise ValueError(f"need 0 <= start < stop <= {T}, got start={start}, stop={stop}")
    values, symbols, spaces = values[start:stop], symbols[start:stop], spaces[start:stop]
    n = len(values)
    n_rows = -(-n // width)
    band = 1.6  # one row: bars of height <= 1, then the symbols
    if ax is None:
        _, ax = plt.subplots(figsize=(max(4.0, min(width, n) * 0.13), max(1.5, n_rows * 1.1)))
    for k in range(n):
        r, c = divmod(k, width)
        y0 = -r * band
        if spaces[k]:
            ax.add_patch(Rectangle((c - 0.5, y0), 1.0, 1.0, color=space_color, zorder=0, gid="space"))
        ax.text(c, y0 - 0.25, _show(symbols[k]), ha="center", va="center", fontsize=fontsize, family="monospace")
    cols = np.arange(n) % width
    rows = np.arange(n) // width
    bars = ax.bar(cols, values, width=0.8, bottom=-rows * band, color=color, zorder=2)
    for b in bars:
        b.set_gid("computation")
    ax.set_xlim(-0.5, width - 0.5)
    ax.set_ylim(-(n_rows - 1) * band - 0.5, 1.05)
    ax.set_xticks([])
    ax.set_yticks([-r * band + y for r in range(n_rows) for y in (0.0, 1.0)])
    ax.set_yticklabels(["0", "1"] * n_rows, fontsize=fontsize)
    label = "$m_t$" if what == "m" else "$d_t / D$"
    ax.set_title(f"computation per step ({label}; grey: word boundaries)", fontsize=fontsize + 2)
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    return ax


def bit_profile(
    trace,
    positions: Optional[Sequence[int]] = None,
    buffer_bits: int = 0,
    offset: int = 0,
    top: Union[float, int, Sequence[int], slice, None] = 0.05,
    ax=None,
    fontsize: float = 8.0,
    color: str = "C0",
    buffer_color: str = "0.6",
):
    """Figure 2: mean activity of the top dimensions (``top``, see
    :func:`multiscale_rnn.analysis.top_dimension_activity`; m_t when None) by position within
    the character frame of bit-level text, one bar per position: the character's bits ``b1``
    (most significant) .. ``b8``, then the buffer bits ``z1`` .. (another colour). ``positions``
    or ``buffer_bits`` / ``offset`` as in :func:`multiscale_rnn.analysis.bit_position_profile`.
    Returns the Axes."""
    import matplotlib.pyplot as plt

    profile = bit_position_profile(trace, positions, buffer_bits, offset, top)
    pos = list(profile)
    heights = [profile[p] for p in pos]
    is_buffer = [p >= BITS_PER_CHAR for p in pos]
    if ax is None:
        _, ax = plt.subplots(figsize=(max(3.0, 0.3 * len(pos) + 1), 2.5))
    bars = ax.bar(range(len(pos)), heights, color=[buffer_color if b else color for b in is_buffer])
    for b, buf in zip(bars, is_buffer):
        b.set_gid("buffer" if buf else "computation")
    ax.set_xticks(range(len(pos)))
    ax.set_xticklabels(
        [f"z{p - BITS_PER_CHAR + 1}" if b else f"b{p + 1}" for p, b in zip(pos, is_buffer)],
        fontsize=fontsize,
        rotation=90 if len(pos) > 16 else 0,
    )
    ax.set_ylim(0, 1.05)
    what = "$m_t$" if top is None else "mean $e_t$ of the top dimensions"
    ax.set_ylabel(what, fontsize=fontsize)
    ax.set_xlabel("bit within the character (b1 most significant; z: buffer)", fontsize=fontsize)
    return ax


def class_computation(
    trace_or_means: Union[Dict, object],
    vocab=None,
    by: str = "length",
    ax=None,
    fontsize: float = 8.0,
    color: str = "C0",
    counts: Optional[Dict] = None,
):
    """Table 2 as a bar chart: mean m_t per symbol class, from a trace (classes from its music
    symbols, see :func:`multiscale_rnn.analysis.music_computation`) or from a ready
    {class: mean} dict (e.g. :func:`multiscale_rnn.analysis.mean_by_class`). The number of steps
    of each class is written above its bar when known (``counts``). Returns the Axes."""
    import matplotlib.pyplot as plt

    if isinstance(trace_or_means, dict):
        means = trace_or_means
    else:
        means, counts = music_computation(trace_or_means, vocab, by=by, counts=True)
    if not means:
        raise ValueError("no class to plot")
    if ax is None:
        _, ax = plt.subplots(figsize=(max(3.0, 0.5 * len(means) + 1), 2.5))
    labels = [str(c) for c in means]
    bars = ax.bar(range(len(labels)), list(means.values()), color=color)
    for b in bars:
        b.set_gid("computation")
    if counts:
        for b, c in zip(bars, means):
            if c in counts:
                ax.text(
                    b.get_x() + b.get_width() / 2,
                    b.get_height(),
                    f"n={counts[c]}",
                    ha="center",
                    va="bottom",
                    fontsize=fontsize - 2,
                )
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=fontsize)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("mean $m_t$", fontsize=fontsize)
    ax.set_xlabel("note length (quarter notes)" if by == "length" else "symbol class", fontsize=fontsize)
    return ax
