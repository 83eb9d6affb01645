"""Checks used by the test suite and available to users who want to check a model configuration of
their own: finite-difference gradient checks (build the model with ``dtype="float64"``), runs compared
chunk by chunk, and the switches and handles of the C++ core that such checks need: the kernel paths
(:func:`kernel_switches`), the core's own model without a family's Python checks (:func:`core_model`),
its registered cores and option tables, its float64 building blocks (:func:`blocks`) and the
instruction-set variants this CPU can run (:func:`isa_variants`)."""

from __future__ import annotations

import contextlib
import importlib.util
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from . import _native
from ._native import core as _core
from .models.base import core_schema

__all__ = [
    "numeric_gradient",
    "relative_error",
    "check_model_gradients",
    "run_chunks",
    "assert_runs_equal",
    "kernel_switches",
    "core_model",
    "core_names",
    "core_schema",
    "blocks",
    "isa_variants",
]


@contextlib.contextmanager
def kernel_switches(
    *,
    reference_kernels: Optional[bool] = None,
    input_tables: Optional[bool] = None,
    bf16_model_kernel: Optional[bool] = None,
) -> Iterator[None]:
    """Within the ``with`` block, run the core's plain reference kernels or its fast paths
    (``reference_kernels``, :func:`multiscale_rnn.set_reference_kernels`), let evaluation forwards
    use per-token input tables or not (``input_tables``, :func:`multiscale_rnn.set_input_tables`) and
    let ``inference_precision = "bfloat16"`` run the portable model of the AVX512-BF16 kernel instead
    of a hardware kernel, on any CPU (``bf16_model_kernel``: the same loops with the instruction
    modelled in plain C++, for tests; see :func:`multiscale_rnn.bf16_kernel`); a switch given as None
    is left as it is. All are restored on leaving the block, also on an error."""
    before = (bool(_core.reference_kernels()), bool(_core.input_tables()), bool(_core.bf16_model_kernel()))
    try:
        if reference_kernels is not None:
            _core.set_reference_kernels(bool(reference_kernels))
        if input_tables is not None:
            _core.set_input_tables(bool(input_tables))
        if bf16_model_kernel is not None:
            _core.set_bf16_model_kernel(bool(bf16_model_kernel))
        yield
    finally:
        _core.set_reference_kernels(before[0])
        _core.set_input_tables(before[1])
        _core.set_bf16_model_kernel(before[2])


def core_model(
    core_name: str,
    vocab_size: int,
    embed_size: int,
    hidden_sizes: Sequence[int],
    dropout: float = 0.0,
    seed: int = 0,
    options: Optional[Dict[str, Any]] = None,
    dtype: str = "float64",
) -> Any:
    """The C++ core's language model of the registered core ``core_name``, built directly: none of the
    family class's Python checks run, so a test sees the core's own refusals (``ValueError`` naming
    the option). ``options`` are the core's options by name (its table, :func:`core_schema`)."""
    cls = {"float32": _core.LanguageModelF32, "float64": _core.LanguageModelF64}[dtype]
    return cls(core_name, vocab_size, embed_size, list(hidden_sizes), dropout, seed, dict(options or {}))


def core_names() -> List[str]:
    """The names of the cores registered in the C++ core."""
    return list(_core.core_names())


def blocks() -> Any:
    """The core's building blocks bound in float64 (and the bfloat16 rounding and step product, by
    kernel), for checks of the pieces one at a time."""
    return _core.blocks


def isa_variants() -> List[Tuple[str, bool, str]]:
    """The instruction-set variants of the core this CPU can run, best first: (name, built, module),
    e.g. ``("avx2", True, "multiscale_rnn._core_avx2")``; ``multiscale_rnn.ISA`` is the one loaded."""
    flags = _native._cpu_flags()
    isas = [isa for isa in ("avx512", "avx2") if _native._FLAGS_NEEDED[isa] <= flags] + ["baseline"]
    modules = [f"multiscale_rnn.{_native._MODULES[isa]}" for isa in isas]
    return [(isa, importlib.util.find_spec(m) is not None, m) for isa, m in zip(isas, modules)]


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
    return float(np.linalg.norm(a - b) / max(float(np.linalg.norm(a)), float(np.linalg.norm(b)), 1e-12))


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
