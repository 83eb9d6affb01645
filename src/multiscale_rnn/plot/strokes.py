"""Pen-stroke drawings: a sequence drawn with the pen lifts as breaks, coloured by segment (the HM-LSTM
paper's Figure 5 draws one sequence twice, cut into segments by z^2 and by the pen lifts)."""

from __future__ import annotations

from typing import Optional

import numpy as np

__all__ = ["strokes", "segments_from_ends", "figure5", "computation"]


def segments_from_ends(ends) -> np.ndarray:
    """Segment ids (L,) of L points from a bool per point marking the last point of a segment: the point
    after an end starts the next segment."""
    e = np.asarray(ends, dtype=bool)
    return np.concatenate([[0], np.cumsum(e[:-1])]).astype(int)


def strokes(xy, pen, segments=None, ax=None, title: Optional[str] = None, linewidth: float = 2.0):
    """Draw points ``xy`` (L, 2) (``corpus.points(seq)``), lifting the pen after every point where ``pen``
    (L,) is true, in SVG orientation (y down). ``segments`` (L,) ints: a colour per segment (a segment
    id per point; :func:`segments_from_ends`); one colour without. Returns the Axes."""
    import matplotlib.pyplot as plt

    xy = np.asarray(xy, dtype=np.float64)
    pen = np.asarray(pen, dtype=bool)
    if xy.ndim != 2 or xy.shape[1] != 2 or pen.shape != (len(xy),):
        raise ValueError(f"xy must be (L, 2) and pen (L,), got {xy.shape} and {pen.shape}")
    seg = np.zeros(len(xy), dtype=int) if segments is None else np.asarray(segments, dtype=int)
    if seg.shape != (len(xy),):
        raise ValueError(f"segments must have one id per point ({len(xy)}), got shape {seg.shape}")
    if ax is None:
        _, ax = plt.subplots(figsize=(3, 3))
    colours = plt.get_cmap("tab10")
    for k in range(1, len(xy)):
        if pen[k - 1]:  # the pen lifted after point k - 1: no line to point k
            continue
        ax.plot(
            xy[k - 1 : k + 1, 0], xy[k - 1 : k + 1, 1], color=colours(seg[k] % 10), lw=linewidth, solid_capstyle="round"
        )
    ax.set_aspect("equal")
    ax.invert_yaxis()
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title)
    return ax


def figure5(model, corpus, index: int = 0, split: str = "valid", layer: int = 2, axes=None):
    """The HM-LSTM paper's Figure 5 for drawing ``index`` of ``split``: left, the drawing cut into segments
    where z^``layer`` fires; right, cut where the pen lifts; each segment its own colour. ``axes``: two
    Axes (a new figure when None). Returns the two Axes."""
    import matplotlib.pyplot as plt

    from ..analysis.hm_lstm_strokes import point_references, stroke_trace

    rows = corpus.split(split)[index]
    tr = stroke_trace(model, rows)
    if not 1 <= layer <= tr.z.shape[0]:
        raise ValueError(f"layer must be in 1..{tr.z.shape[0]} (z^1 .. z^L of this model), got {layer}")
    xy, pen = corpus.points(rows)
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(6, 3))
    by_z = segments_from_ends(tr.z[layer - 1] > 0.5)
    by_pen = segments_from_ends(point_references(rows[:, 2] > 0.5))
    strokes(xy, pen, segments=by_z, ax=axes[0], title=f"segments by z{layer} ({by_z.max() + 1})")
    strokes(xy, pen, segments=by_pen, ax=axes[1], title=f"segments by pen-up ({by_pen.max() + 1})")
    return axes


def computation(model, corpus, index: int = 0, split: str = "valid", ax=None):
    """Where an HM-LSTM computes along drawing ``index`` of ``split``: every pen-down move coloured by how
    many layers updated (UPDATE or FLUSH, not COPY) on reading the point it arrives at, 1 to L, with a
    legend; the title gives the share of layer updates skipped. Returns the Axes."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from ..analysis.hm_lstm_strokes import stroke_trace

    rows = corpus.split(split)[index]
    tr = stroke_trace(model, rows)
    xy, pen = corpus.points(rows)
    worked = (tr.ops != 0).sum(axis=0)  # (L,) layers that updated at each point
    ax = strokes(xy, pen, segments=worked, ax=ax, title=f"layers updated ({tr.reduction:.0%} of updates skipped)")
    colours = plt.get_cmap("tab10")
    L = tr.ops.shape[0]
    ax.legend(handles=[Line2D([0], [0], color=colours(k % 10), lw=2, label=f"{k} layer{'s' if k > 1 else ''}")
                       for k in range(1, L + 1)], fontsize=7, loc="lower right")  # fmt: skip
    return ax
