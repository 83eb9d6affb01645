"""Plots of the FS-RNN paper's network dynamics (Figures 3-5) from ``multiscale_rnn.analysis``.

Each takes a dict label -> array (one curve or bar per label, e.g. ``{"FS-Slow": decay["c_s"],
"Stacked-1": stacked["c_l0"]}``), draws on ``ax`` (a new figure's when None) and returns the Axes.
"""

from __future__ import annotations

from typing import Dict

import numpy as np

__all__ = ["gradient_decay", "state_change", "bpc_by_position", "relative_loss"]

from .curves import axes_or_new, mean_band, sample_rows


def gradient_decay(curves: Dict[str, np.ndarray], ax=None, normalize: bool = True, log: bool = False):
    """Figure 3: ||dL_t / dc_{t-k}|| against k, the mean over samples with a band of one standard
    deviation. ``curves``: label -> (samples, K+1) from ``analysis.gradient_decay``. With
    ``normalize`` every value is divided by the largest mean over all curves; ``log`` draws the
    y axis logarithmic (the long-lag differences span orders of magnitude)."""
    ax = axes_or_new(ax)
    if log:
        ax.set_yscale("log")
    rows = {k: sample_rows(v) for k, v in curves.items()}
    scale = 1.0
    if normalize and rows:
        scale = max(float(np.nanmax(np.nanmean(r, axis=0))) for r in rows.values()) or 1.0
    for label, r in rows.items():
        mean_band(ax, np.arange(r.shape[1]), r / scale, label)
    ax.set_xlabel("k")
    ax.set_ylabel("gradient norm" + (" (normalised)" if normalize else ""))
    ax.legend(fontsize="small")
    return ax


def state_change(rates: Dict[str, np.ndarray], ax=None):
    """Figure 4: the mean rate of change of each cell's state as a bar, with the standard
    deviation as the error bar. ``rates``: label -> 1-D array from ``analysis.state_change``."""
    ax = axes_or_new(ax)
    labels = list(rates)
    means = [float(np.nanmean(rates[k])) for k in labels]
    stds = [float(np.nanstd(rates[k])) for k in labels]
    ax.bar(np.arange(len(labels)), means, yerr=stds, capsize=3, color="C0")
    ax.set_xticks(np.arange(len(labels)))
    ax.set_xticklabels(labels, rotation=45, ha="right")
    ax.set_ylabel("rate of change")
    return ax


def bpc_by_position(curves: Dict[str, np.ndarray], ax=None):
    """Figure 5, left: bits per character at each position 1..P within words. ``curves``: label ->
    (P,) or (runs, P) from ``analysis.bpc_by_position``."""
    ax = axes_or_new(ax)
    for label, v in curves.items():
        r = sample_rows(v)
        mean_band(ax, np.arange(1, r.shape[1] + 1), r, label)
    ax.set_xlabel("character position")
    ax.set_ylabel("BPC")
    ax.legend(fontsize="small")
    return ax


def relative_loss(curves: Dict[str, np.ndarray], reference: str, ax=None):
    """Figure 5, right: each curve divided by the curve labelled ``reference`` (position by
    position; with several runs, run by run)."""
    if reference not in curves:
        raise ValueError(f"reference {reference!r} is not among the curves {list(curves)}")
    ax = axes_or_new(ax)
    ref = sample_rows(curves[reference])
    for label, v in curves.items():
        r = sample_rows(v)
        mean_band(ax, np.arange(1, r.shape[1] + 1), r / (ref if ref.shape == r.shape else ref.mean(0)), label)
    ax.set_xlabel("character position")
    ax.set_ylabel(f"loss relative to {reference}")
    ax.legend(fontsize="small")
    return ax
