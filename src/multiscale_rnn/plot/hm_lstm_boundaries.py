"""The HM-LSTM figures of Chung et al. (2017): the boundary map of Figure 3 and the hidden-norm
heatmap of Figure 4, drawn from an :class:`multiscale_rnn.models.hm_lstm.HMTrace`
(``model.trace(text, vocab)``)."""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from .._checks import positive_int

__all__ = ["boundaries", "boundary_rows", "detector_layers", "hidden_norms"]


def _symbols(trace) -> Sequence[str]:
    text = getattr(trace, "text", None)
    if text is not None:
        return ["_" if s == " " else ("\u21b5" if s == "\n" else s) for s in text]
    return [str(int(t)) for t in trace.tokens]


def _check(trace):
    for name in ("z", "ops", "h_norms"):
        if not hasattr(trace, name):
            raise TypeError(f"expected an HM-LSTM trace (model.trace(...)) with '{name}', got {type(trace).__name__}")


def detector_layers(trace) -> list:
    """The 0-based layers of ``trace`` that have a boundary detector: every layer but the top one,
    and the top one too when the model had ``top_boundary=True`` (``trace.detectors``; a trace without
    that field counts the top layer when its z is ever non-zero)."""
    z = np.asarray(trace.z)
    L = z.shape[0]
    det = getattr(trace, "detectors", None)
    if det is not None:
        return [l for l in range(L) if bool(det[l])]
    return [l for l in range(L) if l < L - 1 or np.any(z[l] != 0)]


def boundary_rows(trace, width: int = 90, layers: Optional[Sequence[int]] = None, reference: bool = True):
    """The cell image of :func:`boundaries` and its row labels, without drawing.

    Returns ``(img, labels, band, layers)``: ``img`` (n_rows * band, width) with, for each wrapped
    row r of ``width`` steps, from the top: one row per layer from the highest detector down to
    z^1 (1 where z^l_t = 1, 0 where 0), the reference row when shown (0.5 at a reference boundary),
    the text row and an empty gap row (NaN, drawn white); ``labels`` the label of each of the
    ``band`` rows of a band (``"text"`` and ``""`` for the last two).
    """
    _check(trace)
    positive_int(width, "width")
    z = np.asarray(trace.z)
    L, T = z.shape
    if layers is None:
        layers = detector_layers(trace)
        if not layers:
            raise ValueError(
                f"this trace's HM-LSTM has {L} layer(s) and no boundary detector (the top layer has none unless "
                f"top_boundary=True): there are no boundaries to draw; give the model two layers or more (from Python, "
                f"layers= draws a layer's z all the same)"
            )
    layers = sorted(set(int(l) for l in layers), reverse=True)  # the highest layer on top
    for l in layers:
        if not 0 <= l < L:
            raise ValueError(f"layer {l} is outside 0..{L - 1}")
    ref = getattr(trace, "reference", None) if reference else None
    labels = [f"$z^{{{l + 1}}}$" for l in layers] + (["ref"] if ref is not None else []) + ["text", ""]
    band = len(labels)
    n_rows = -(-T // width)
    img = np.full((n_rows * band, width), np.nan)
    for r in range(n_rows):
        seg = slice(r * width, min(T, (r + 1) * width))
        n = seg.stop - seg.start
        for j, l in enumerate(layers):
            img[r * band + j, :n] = z[l, seg] > 0.5
        if ref is not None:
            img[r * band + len(layers), :n] = np.where(ref[seg], 0.5, 0.0)
    return img, labels, band, layers


def boundaries(
    trace,
    width: int = 90,
    ax=None,
    layers: Optional[Sequence[int]] = None,
    fontsize: float = 7.0,
    reference: bool = True,
):
    """Figure 3: the symbols along x, wrapped into rows of ``width``; above each row of text one row
    of cells per layer with a boundary detector (the highest layer on top, z^1 just above the text,
    as in the paper), white where z^l_t = 1 (a boundary) and black where z^l_t = 0.

    ``layers``: which layers to show (0-based; default every layer with a detector: all but the top
    one, and the top one with ``top_boundary=True``). With ``reference`` and a trace scored against
    reference boundaries, a grey-marked row shows them between the layers and the text. Long texts
    wrap into bands of ``width`` steps. Returns the Axes; :func:`boundary_rows` gives the cells.
    """
    import matplotlib.pyplot as plt

    img, labels, band, layers = boundary_rows(trace, width, layers, reference)
    sym = _symbols(trace)
    n_rows = img.shape[0] // band
    text_row = band - 2
    if ax is None:
        _, ax = plt.subplots(figsize=(max(4.0, width * 0.12), max(1.5, n_rows * band * 0.22)))
    cmap = plt.get_cmap("gray").with_extremes(bad="white")
    ax.imshow(np.ma.masked_invalid(img), cmap=cmap, vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    for t, s in enumerate(sym):
        r, c = divmod(t, width)
        ax.text(c, r * band + text_row, s, ha="center", va="center", fontsize=fontsize, family="monospace")
    yt, yl = [], []
    for r in range(n_rows):
        for j, lab in enumerate(labels[:text_row]):
            yt.append(r * band + j)
            yl.append(lab)
    ax.set_yticks(yt)
    ax.set_yticklabels(yl, fontsize=fontsize)
    ax.set_xticks([])
    ax.set_xlim(-0.5, width - 0.5)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    ax.set_title("boundaries (white: $z^\\ell_t = 1$)", fontsize=fontsize + 2)
    return ax


def hidden_norms(
    trace, ax=None, cmap: str = "viridis", fontsize: float = 7.0, max_labels: int = 200, colorbar: bool = True
):
    """Figure 4: a heatmap of ||h^l_t|| per layer (top layer first, each layer scaled to its own
    range, (||h^l_t|| - min_t) / (max_t - min_t)) with each layer's boundary row z^l_t (white 1, black 0)
    under it; symbols along x. Flat runs in a layer's row are its COPY steps. ``colorbar``: a colour bar
    of that scale beside the Axes. Returns the Axes."""
    import matplotlib.pyplot as plt

    _check(trace)
    norms = np.asarray(trace.h_norms, dtype=float)
    z = np.asarray(trace.z)
    L, T = norms.shape
    detectors = detector_layers(trace)
    colors = plt.get_cmap(cmap)
    rows, labels = [], []
    for l in reversed(range(L)):
        v = norms[l]
        lo, hi = np.nanmin(v), np.nanmax(v)
        scaled = (v - lo) / (hi - lo) if hi > lo else np.zeros_like(v)
        rows.append(colors(scaled))
        labels.append(f"$\\|h^{{{l + 1}}}\\|$")
        if l in detectors:
            g = (z[l] > 0.5).astype(float)
            rows.append(np.stack([g, g, g, np.ones_like(g)], axis=1))
            labels.append(f"$z^{{{l + 1}}}$")
    img = np.stack(rows)  # (rows, T, 4)
    if ax is None:
        _, ax = plt.subplots(figsize=(max(4.0, T * 0.1), 0.35 * len(rows) + 0.8))
    ax.imshow(img, aspect="auto", interpolation="nearest")
    if colorbar:
        from matplotlib.cm import ScalarMappable
        from matplotlib.colors import Normalize

        bar = ax.figure.colorbar(ScalarMappable(Normalize(0.0, 1.0), colors), ax=ax, fraction=0.03, pad=0.01)
        bar.set_label("$\\|h^\\ell_t\\|$ in its layer's range", fontsize=fontsize)
        bar.ax.tick_params(labelsize=fontsize)
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
