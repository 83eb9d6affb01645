"""The curves of a training run: bits per token against the optimiser step, read from what ``fit`` writes
beside a checkpoint (the CSV of every step and the history of every epoch) or from a ``History``."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import List, Optional, Union

import numpy as np

from ..storage import History, history_path
from ..training.logs import csv_path
from .curves import axes_or_new

__all__ = ["training_curves"]


def training_curves(run: Union[str, Path, History, list], ax=None, smooth: Optional[int] = None):
    """Training bits per token of every step (faint, with its moving mean over ``smooth`` steps: by default
    a fiftieth of the run), the training and validation figures of every epoch, and a dotted line where the
    learning rate changed, against the optimiser step.

    ``run``: a checkpoint path (``runs/lstm.npz``: its CSV of steps and history beside it, either may be
    missing but not both) or a ``History`` (the list ``fit`` returns: epochs only). Returns the Axes.
    """
    steps, epochs = _read(run)
    if not steps and not epochs:
        raise ValueError(f"{_name(run)} holds no step and no epoch: nothing to draw")
    new = ax is None
    ax = axes_or_new(ax)
    if steps:
        x = np.array([float(r["step"]) for r in steps])
        bpc = np.array([float(r["bpc"]) for r in steps])
        ax.plot(x, bpc, color="0.75", linewidth=0.5, label="train, each step")
        window = smooth if smooth is not None else max(1, len(bpc) // 50)
        if not isinstance(window, int) or window < 1:
            raise ValueError(f"smooth must be a positive number of steps, got {smooth!r}")
        if 1 < window <= len(bpc):
            mean = np.convolve(bpc, np.ones(window) / window, mode="valid")
            ax.plot(x[window - 1 :], mean, color="C0", linewidth=1.2, label=f"train, mean of {window} steps")
        lr = np.array([float(r["lr"]) for r in steps])
        for i in np.flatnonzero(lr[1:] != lr[:-1]) + 1:
            ax.axvline(x[i - 1], color="0.4", linestyle=":", linewidth=0.8)
    if epochs and all(r.get("steps") is not None for r in epochs):
        at = [r["steps"] for r in epochs]
        for key, label, style in (("train_bpc", "train, epoch", "s"), ("valid_bpc", "valid, epoch", "o")):
            if any(r.get(key) is not None for r in epochs):
                y = [np.nan if r.get(key) is None else r[key] for r in epochs]
                ax.plot(at, y, marker=style, linestyle="-" if key == "valid_bpc" else "none", label=label)
    ax.set_xlabel("optimiser step" + (" (dotted: learning rate changed)" if steps else ""))
    ax.set_ylabel("bits per token")
    ax.legend(fontsize=7)
    if new:
        ax.figure.tight_layout()
    return ax


def _read(run) -> tuple:
    """(step rows of the CSV, epoch rows of the history) of a checkpoint path or a History."""
    if isinstance(run, (list, tuple)):
        if not all(isinstance(r, dict) for r in run):
            raise TypeError("a history must be a list of one dict per epoch (what fit returns, History.load)")
        return [], list(run)
    if not isinstance(run, (str, Path)):
        raise TypeError(f"run must be a checkpoint path or a History, got {type(run).__name__}")
    table, hist = csv_path(run), history_path(run)
    if not table.is_file() and not hist.is_file():
        raise FileNotFoundError(f"{run}: neither its CSV of steps ({table}) nor its history ({hist}) exists")
    steps: List[dict] = []
    if table.is_file():
        with open(table, newline="", encoding="utf-8") as f:
            steps = list(csv.DictReader(f))
        missing = sorted({"step", "bpc", "lr"} - set(steps[0] if steps else {"step", "bpc", "lr"}))
        if missing:
            raise ValueError(f"{table} is not the CSV of a run's steps: it lacks the column(s) {', '.join(missing)}")
    return steps, (list(History.load(hist)) if hist.is_file() else [])


def _name(run) -> str:
    return str(run) if isinstance(run, (str, Path)) else "the history"
