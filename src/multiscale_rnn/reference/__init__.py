"""Plain reference implementations of every model family, one module each, for tests and
benchmarks: written the natural way in PyTorch (float64 autograd in the parity tests, a loop over
steps), with the fast model's parameter and state names so weights and state copy across.

PyTorch is never a runtime dependency: each module imports it when called, and ``torch()``
raises ``ImportError`` saying how to install it. Import a family's module directly, e.g.
``from multiscale_rnn.reference import hm_lstm``.
"""

from __future__ import annotations

__all__ = ["torch", "tensors"]


def torch():
    """The ``torch`` module, or ``ImportError`` naming the install command (``pip install torch``)."""
    try:
        import torch as _torch
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("the reference implementations need PyTorch: pip install torch") from e
    return _torch


def tensors(model, dtype=None, requires_grad: bool = True) -> dict:
    """A model's parameters as torch tensors by the model's names (copies, in ``dtype``: the model's
    by default), the ``P`` every reference's ``forward`` takes."""
    import numpy as np

    t = torch()
    dt = {np.dtype("float32"): t.float32, np.dtype("float64"): t.float64}[np.dtype(dtype or model.dtype)]
    return {k: t.tensor(np.array(v), dtype=dt, requires_grad=requires_grad) for k, v in model.parameters().items()}
