"""Drawing helpers shared by the plots of curves over samples (the FS-RNN dynamics, the HORNN gradient
reach): an Axes to draw on, samples as rows, a mean with a band of one standard deviation."""

from __future__ import annotations

import numpy as np

__all__ = ["axes_or_new", "sample_rows", "mean_band"]


def axes_or_new(ax):
    """``ax``, or the Axes of a new 5 x 3.5 inch figure when None."""
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(5, 3.5))
    return ax


def sample_rows(a) -> np.ndarray:
    """A curve (points,) or curves (samples, points) as a 2-D float64 array, one row per sample."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 1:
        return a[None]
    if a.ndim != 2:
        raise ValueError(f"expected a 1-D curve or a 2-D (samples, points) array, got shape {a.shape}")
    return a


def mean_band(ax, x, rows, label):
    """The mean of ``rows`` (samples, points) against ``x`` with a band of one standard deviation
    (when there is more than one sample), kept above 0 on a log axis."""
    mean = np.nanmean(rows, axis=0)
    (line,) = ax.plot(x, mean, label=label)
    if rows.shape[0] > 1:
        std = np.nanstd(rows, axis=0)
        low = mean - std
        if ax.get_yscale() == "log":  # keep the band on the positive axis
            low = np.where(low > 0, low, mean / 10)
        ax.fill_between(x, low, mean + std, color=line.get_color(), alpha=0.2, linewidth=0)
