"""Finite-difference gradient checks, used by the test suite and available to users who want to
check a model configuration of their own (build it with ``dtype="float64"``)."""
from __future__ import annotations

from typing import Callable, Dict, Optional

import numpy as np


def numeric_gradient(f: Callable[[], float], x: np.ndarray, eps: float = 1e-6,
                     indices: Optional[np.ndarray] = None) -> np.ndarray:
    """Central differences of the scalar ``f()`` with respect to the array ``x``, which ``f`` reads
    (``x`` is perturbed in place and restored). With ``indices`` (flat, C order), only those
    entries: returns a 1-D array of their derivatives; otherwise an array shaped like ``x``."""
    flat = np.arange(x.size) if indices is None else np.asarray(indices)
    g = np.empty(len(flat))
    for k, j in enumerate(flat):
        i = np.unravel_index(j, x.shape)
        old = x[i].copy()
        x[i] = old + eps
        fp = f()
        x[i] = old - eps
        fm = f()
        x[i] = old
        g[k] = (fp - fm) / (2 * eps)
    return g.reshape(x.shape) if indices is None else g


def relative_error(a: np.ndarray, b: np.ndarray) -> float:
    """||a - b|| / max(||a||, ||b||, 1e-12)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(a), np.linalg.norm(b), 1e-12))


def check_model_gradients(model, tokens, targets, state=None, eps: float = 1e-6, names=None,
                          max_entries: Optional[int] = None, seed: int = 0) -> Dict[str, float]:
    """Relative error between ``model.loss_and_grad`` and central differences of its loss, per
    parameter. The model's random state (dropout, zoneout, sampled boundaries) is restored before
    every evaluation, so all evaluations see the same masks. ``max_entries`` checks a random
    subset of each tensor's entries (all by default)."""
    if model.dtype != np.float64:
        raise ValueError("gradient checks need a model built with dtype='float64'")
    rng_state = model.get_rng_state()

    def loss() -> float:
        model.set_rng_state(rng_state)
        return model.loss_and_grad(tokens, targets, state)[0]

    model.set_rng_state(rng_state)
    _, grads, _ = model.loss_and_grad(tokens, targets, state)
    pick = np.random.default_rng(seed)
    errors = {}
    for name, p in model.parameters().items():
        if names is not None and name not in names:
            continue
        idx = np.arange(p.size)
        if max_entries is not None and p.size > max_entries:
            idx = np.sort(pick.choice(p.size, max_entries, replace=False))
        num = numeric_gradient(loss, p, eps, idx)
        ana = grads[name][np.unravel_index(idx, p.shape)]
        errors[name] = relative_error(ana, num)
    return errors
