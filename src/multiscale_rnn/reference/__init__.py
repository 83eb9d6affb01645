"""Plain reference implementations of every model family, one module each, for tests and
benchmarks: written the natural way in PyTorch (float64 autograd in the parity tests, a loop over
steps), with the fast model's parameter and state names so weights and state copy across.

PyTorch is never a runtime dependency: each module imports it when called, and ``torch()``
raises ``ImportError`` saying how to install it. Import a family's module directly, e.g.
``from multiscale_rnn.reference import hm_lstm``.
"""
from __future__ import annotations

__all__ = ["torch"]


def torch():
    """The ``torch`` module, or ``ImportError`` naming the install command (``pip install torch``)."""
    try:
        import torch as _torch
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("the reference implementations need PyTorch: pip install torch") from e
    return _torch
