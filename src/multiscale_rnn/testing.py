"""Finite-difference gradient checks, used by the test suite and available to users who want to
check a model configuration of their own (build it with ``dtype="float64"``)."""

from __future__ import annotations

from typing import Callable, Dict, Optional

import numpy as np


def numeric_gradient(
    f: Callable[[], float], x: np.ndarray, eps: float = 1e-6, indices: Optional[np.ndarray] = None
) -> np.ndarray:
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


def check_model_gradients(
    model, tokens, targets, state=None, eps: float = 1e-6, names=None, max_entries: Optional[int] = None, seed: int = 0
) -> Dict[str, float]:
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


def run_chunks(model, chunks, state=None):
    """Run ``(tokens, targets)`` chunks with the state carried from one to the next.

    Returns ``(runs, state)``: per chunk ``(logits, loss, gradients)`` (logits from ``forward``,
    loss and gradients from ``loss_and_grad``), and the state after the last chunk.
    """
    runs = []
    for tok, tgt in chunks:
        logits, _ = model.forward(tok, state)
        loss, grads, state = model.loss_and_grad(tok, tgt, state)
        runs.append((logits, loss, grads))
    return runs, state


def assert_runs_equal(
    got, ref, rtol: float = 1e-12, grad_rtol: float = 1e-10, atol: float = 1e-13, exercised: bool = True
) -> None:
    """Assert that two ``run_chunks`` results agree: logits, losses, every gradient, final state.

    With ``exercised``, every reference gradient must also be non-zero somewhere, so that a path
    which leaves a parameter untouched cannot pass by comparing zeros.
    """
    (runs, state), (runs_ref, state_ref) = got, ref
    assert len(runs) == len(runs_ref), f"{len(runs)} chunks against {len(runs_ref)}"
    for k, ((lg, loss, grads), (lr, loss_r, grads_r)) in enumerate(zip(runs, runs_ref)):
        np.testing.assert_allclose(lg, lr, rtol=rtol, atol=atol, err_msg=f"logits, chunk {k}")
        np.testing.assert_allclose(loss, loss_r, rtol=rtol, err_msg=f"loss, chunk {k}")
        assert set(grads) == set(grads_r), (sorted(grads), sorted(grads_r))
        for name in grads_r:
            np.testing.assert_allclose(
                grads[name], grads_r[name], rtol=grad_rtol, atol=atol, err_msg=f"gradient {name}, chunk {k}"
            )
            if exercised:
                assert np.abs(grads_r[name]).max() > 0, f"gradient {name} is zero in chunk {k}"
    assert set(state) == set(state_ref), (sorted(state), sorted(state_ref))
    for name in state_ref:
        np.testing.assert_allclose(state[name], state_ref[name], rtol=rtol, atol=atol, err_msg=f"state {name}")
