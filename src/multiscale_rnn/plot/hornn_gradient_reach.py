"""Plot of the gradient reaching back in time (Soltani & Jiang 2016, Figures 2-3 motivation) from
``multiscale_rnn.analysis.hornn_gradient_reach``."""

from __future__ import annotations

from typing import Dict

import numpy as np

from .curves import axes_or_new, mean_band, sample_rows

__all__ = ["gradient_reach"]


def gradient_reach(curves: Dict[str, np.ndarray], ax=None, relative: bool = True, log: bool = True):
    """||dL_t / dh_{t-k}|| against k, one curve per label (mean over samples, a band of one
    standard deviation). ``curves``: label -> (samples, K+1) or (K+1,) from
    ``analysis.gradient_reach`` / ``analysis.compare_reach``. With ``relative`` each curve is
    divided by its own mean at k = 0 (the fraction of the gradient that reaches k steps back);
    ``log`` draws the y axis logarithmic. Returns the Axes."""
    ax = axes_or_new(ax)
    if log:
        ax.set_yscale("log")
    for label, v in curves.items():
        r = sample_rows(v)
        if relative:
            first = float(np.nanmean(r[:, 0]))
            if not first > 0:
                raise ValueError(f"curve {label!r} has gradient {first} at k = 0; cannot draw it relative")
            r = r / first
        mean_band(ax, np.arange(r.shape[1]), r, label)
    ax.set_xlabel("k (steps back)")
    ax.set_ylabel("||dL_t / dh_{t-k}||" + (" / (k = 0)" if relative else ""))
    ax.legend(fontsize="small")
    return ax
