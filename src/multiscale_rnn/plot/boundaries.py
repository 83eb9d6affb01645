"""The HM-LSTM figures of Chung et al. (2017): the boundary map of Figure 3 and the hidden-norm
heatmap of Figure 4, drawn from an :class:`multiscale_rnn.models.hm_lstm.HMTrace`
(``model.trace(text, vocab)``)."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

__all__ = ["boundaries", "hidden_norms"]


def _symbols(trace) -> Sequence[str]:
    text = getattr(trace, "text", None)
    if text is not None:
        return ["_" if s == " " else ("\u21b5" if s == "\n" else s) for s in text]
    return [str(int(t)) for t in trace.tokens]


def _check(trace):
    for name in ("z", "ops", "h_norms"):
        if not hasattr(trace, name):
            raise TypeError(f"expected an HM-LSTM trace (model.trace(...)) with '{name}', got {type(trace).__name__}")


def boundaries(trace, width: int = 90, ax=None, layers: Optional[Sequence[int]] = None, fontsize: float = 7.0,
               reference: bool = True):
    """Figure 3: the symbols along x, wrapped into rows of ``width``; under each row of text one row
    of cells per layer, white where z^l_t = 1 (a boundary) and black where z^l_t = 0.

    ``layers``: which layers to show (0-based; default those with a boundary detector, i.e. all
    but a top layer whose z is always 0). With ``reference`` and a trace scored against reference
    boundaries, a thin row marks them (grey) under the layers. Returns the Axes.
    """
    import matplotlib.pyplot as plt

    _check(trace)
    if not isinstance(width, (int, np.integer)) or width < 1:
        raise ValueError(f"width must be a positive integer, got {width!r}")
    z = np.asarray(trace.z)
    L, T = z.shape
    if layers is None:
        layers = [l for l in range(L) if l < L - 1 or np.any(z[l] != 0)] or list(range(L))
    for l in layers:
        if not 0 <= l < L:
            raise ValueError(f"layer {l} is outside 0..{L - 1}")
    ref = getattr(trace, "reference", None) if reference else None
    sym = _symbols(trace)
    n_rows = -(-T // width)
    band = 1 + len(layers) + (ref is not None) + 1  # text, layers, reference, gap
    img = np.full((n_rows * band, width), np.nan)
    for r in range(n_rows):
        seg = slice(r * width, min(T, (r + 1) * width))
        n = seg.stop - seg.start
        for j, l in enumerate(layers):
            img[r * band + 1 + j, :n] = z[l, seg] > 0.5
        if ref is not None:
            img[r * band + 1 + len(layers), :n] = np.where(ref[seg], 0.5, 0.0)
    if ax is None:
        _, ax = plt.subplots(figsize=(max(4.0, width * 0.12), max(1.5, n_rows * band * 0.22)))
    cmap = plt.get_cmap("gray").with_extremes(bad="white")
    ax.imshow(np.ma.masked_invalid(img), cmap=cmap, vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    for t, s in enumerate(sym):
        r, c = divmod(t, width)
        ax.text(c, r * band, s, ha="center", va="center", fontsize=fontsize, family="monospace")
    yt, yl = [], []
    for r in range(n_rows):
        for j, l in enumerate(layers):
            yt.append(r * band + 1 + j)
            yl.append(f"$z^{{{l + 1}}}$")
        if ref is not None:
            yt.append(r * band + 1 + len(layers))
            yl.append("ref")
    ax.set_yticks(yt)
    ax.set_yticklabels(yl, fontsize=fontsize)
    ax.set_xticks([])
    ax.set_xlim(-0.5, width - 0.5)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    ax.set_title("boundaries (white: $z^\\ell_t = 1$)", fontsize=fontsize + 2)
    return ax


def hidden_norms(trace, ax=None, cmap: str = "viridis", fontsize: float = 7.0, max_labels: int = 200):
    """Figure 4: a heatmap of ||h^l_t|| per layer (top layer first, each layer scaled to its own
    range) with each layer's boundary row z^l_t (white 1, black 0) under it; symbols along x.
    Flat runs in a layer's row are its COPY steps. Returns the Axes."""
    import matplotlib.pyplot as plt

    _check(trace)
    norms = np.asarray(trace.h_norms, dtype=float)
    z = np.asarray(trace.z)
    L, T = norms.shape
    colors = plt.get_cmap(cmap)
    rows, labels = [], []
    for l in reversed(range(L)):
        v = norms[l]
        lo, hi = np.nanmin(v), np.nanmax(v)
        scaled = (v - lo) / (hi - lo) if hi > lo else np.zeros_like(v)
        rows.append(colors(scaled))
        labels.append(f"$\\|h^{{{l + 1}}}\\|$")
        if l < L - 1 or np.any(z[l] != 0):
            g = (z[l] > 0.5).astype(float)
            rows.append(np.stack([g, g, g, np.ones_like(g)], axis=1))
            labels.append(f"$z^{{{l + 1}}}$")
    img = np.stack(rows)  # (rows, T, 4)
    if ax is None:
        _, ax = plt.subplots(figsize=(max(4.0, T * 0.1), 0.35 * len(rows) + 0.8))
    ax.imshow(img, aspect="auto", interpolation="nearest")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=fontsize)
    if T <= max_labels:
        ax.set_xticks(range(T))
        ax.set_xticklabels(_symbols(trace), fontsize=fontsize, family="monospace")
        ax.tick_params(axis="x", length=0)
    else:
        ax.set_xlabel("step")
    ax.set_title("hidden-state norms and boundaries", fontsize=fontsize + 2)
    return ax
