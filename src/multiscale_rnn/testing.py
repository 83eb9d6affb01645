"""Finite-difference gradient checks, used by the test suite and available to users who want to
check a model configuration of their own (build it with ``dtype="float64"``)."""
from __future__ import annotations

from typing import Callable, Dict, Optional

import numpy as np


def numeric_gradient(f: Callable[[], float], x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of the scalar ``f()`` with respect to every element of the array ``x``,
    which ``f`` reads (``x`` is perturbed in place and restored)."""
    g = np.zeros(x.shape)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        old = x[i].copy()
        x[i] = old + eps
        fp = f()
        x[i] = old - eps
        fm = f()
        x[i] = old
        g[i] = (fp - fm) / (2 * eps)
    return g


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
        flat_idx = np.arange(p.size)
        if max_entries is not None and p.size > max_entries:
            flat_idx = np.sort(pick.choice(p.size, max_entries, replace=False))
        num = np.empty(len(flat_idx))
        for k, j in enumerate(flat_idx):
            i = np.unravel_index(j, p.shape)
            old = p[i]
            p[i] = old + eps
            fp = loss()
            p[i] = old - eps
            fm = loss()
            p[i] = old
            num[k] = (fp - fm) / (2 * eps)
        ana = np.array([grads[name][np.unravel_index(j, p.shape)] for j in flat_idx])
        errors[name] = relative_error(ana, num)
    return errors
