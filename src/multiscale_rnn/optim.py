"""Optimisers over a model's one flat parameter buffer.

Each optimiser keeps its state (moments, step count) as NumPy arrays the size of the flat buffer
and calls the C++ kernels (``_core.adam_step`` / ``_core.sgd_step``) on
``model.flat_parameters()`` and ``model.flat_gradients()``:

Adam (Kingma & Ba 2015), bias-corrected, L2 weight decay added to the gradient::

    g' = clamp(g) + wd * w
    m  = b1 * m + (1 - b1) * g'          v = b2 * v + (1 - b2) * g'^2
    w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)          t = 1, 2, ...

SGD with momentum (PyTorch's rule)::

    g' = clamp(g) + wd * w
    buf = g' at t = 1, else momentum * buf + g'
    w -= lr * buf                       (w -= lr * g' when momentum = 0)

where ``clamp`` limits each element to [-clip_value, clip_value] when ``step(model, clip_value=c)``
is given (clipping by value fused into the step: the same result as ``_core.clip_by_value`` before
it, in one pass over the gradient instead of two; the gradient buffer itself is left unclipped),
and is the identity otherwise. Both match ``torch.optim.Adam`` / ``torch.optim.SGD`` (tests hold
them equal). ``opt.lr`` may be
changed at any time (schedules do); ``state_dict()`` / ``load_state_dict()`` round-trip the state
exactly (checkpoints store it).
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np

from ._checks import is_number, non_negative_number, positive_number
from ._native import core as _core

__all__ = [
    "Optimizer",
    "Adam",
    "SGD",
    "OPTIMIZERS",
    "optimizer_from_state",
    "ColumnNorm",
    "global_norm",
    "clip_by_norm",
    "clip_by_value",
    "all_finite",
]


class Optimizer:
    """Base class: hyper-parameters, the step count and state arrays sized on the first step."""

    #: names of the state arrays (each the size of the flat parameter buffer)
    buffers: Tuple[str, ...] = ()

    def __init__(self, lr: float, weight_decay: float = 0.0):
        self.lr = lr
        self.weight_decay = non_negative_number(weight_decay, "weight_decay")
        self.step_count = 0
        self.state: Dict[str, np.ndarray] = {}

    @property
    def lr(self) -> float:
        return self._lr

    @lr.setter
    def lr(self, value: float) -> None:
        self._lr = positive_number(value, "learning rate")

    def hyper(self) -> dict:
        """The hyper-parameters (JSON-able), as accepted by the constructor."""
        return {"lr": self.lr, "weight_decay": self.weight_decay}

    def _buffers_for(self, w: np.ndarray) -> Dict[str, np.ndarray]:
        if not self.state:
            self.state = {name: np.zeros_like(w) for name in self.buffers}
        for name, buf in self.state.items():
            if buf.shape != w.shape or buf.dtype != w.dtype:
                raise ValueError(
                    f"{type(self).__name__} state '{name}' has shape {buf.shape} and dtype {buf.dtype}, but the "
                    f"model's parameters have shape {w.shape} and dtype {w.dtype}: one optimiser per model"
                )
        return self.state

    def step(self, model, clip_value: Optional[float] = None) -> None:
        """One update of ``model.flat_parameters()`` from ``model.flat_gradients()``, each gradient
        element first clamped to [-clip_value, clip_value] when ``clip_value`` is given."""
        clip = 0.0
        if clip_value is not None:
            clip = positive_number(clip_value, "clip_value")
        w, g = model.flat_parameters(), model.flat_gradients()
        if w.shape != g.shape or w.dtype != g.dtype:
            raise ValueError(f"parameters {w.shape} {w.dtype} and gradients {g.shape} {g.dtype} differ")
        bufs = self._buffers_for(w)
        self.step_count += 1
        self._update(w, g, bufs, clip)

    def _update(self, w: np.ndarray, g: np.ndarray, bufs: Dict[str, np.ndarray], clip: float) -> None:
        raise NotImplementedError

    # ---- state ---------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """``{"name", "hyper", "step", "arrays"}``; arrays are copies."""
        return {
            "name": type(self).__name__,
            "hyper": self.hyper(),
            "step": int(self.step_count),
            "arrays": {k: v.copy() for k, v in self.state.items()},
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore hyper-parameters, step count and state arrays (checked against this optimiser)."""
        name = state.get("name")
        if name != type(self).__name__:
            raise ValueError(f"optimiser state is for {name!r}, this optimiser is {type(self).__name__!r}")
        for k, v in state.get("hyper", {}).items():
            if k not in self.hyper():
                raise ValueError(f"{name} has no hyper-parameter {k!r}")
            setattr(self, k, tuple(float(b) for b in v) if k == "betas" else float(v))
        arrays = dict(state.get("arrays", {}))
        if arrays and set(arrays) != set(self.buffers):
            raise ValueError(f"{name} state arrays are {sorted(arrays)}, expected {sorted(self.buffers)}")
        step = int(state.get("step", 0))
        if step < 0:
            raise ValueError(f"optimiser step count must be >= 0, got {step}")
        if step > 0 and self.buffers and not arrays:
            raise ValueError(f"{name} state at step {step} has no moment arrays")
        sizes = {np.asarray(a).shape for a in arrays.values()}
        if len(sizes) > 1:
            raise ValueError(f"{name} state arrays have different shapes {sorted(sizes)}")
        self.step_count = step
        self.state = {k: np.array(v, copy=True) for k, v in arrays.items()}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.hyper().items())
        return f"{type(self).__name__}({args})"


class Adam(Optimizer):
    """Adam with bias correction; ``weight_decay`` is L2 added to the gradient (PyTorch's ``Adam``)."""

    buffers = ("m", "v")

    def __init__(self, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0):
        super().__init__(lr, weight_decay)
        b1, b2 = betas
        for i, b in enumerate((b1, b2)):
            if not (is_number(b) and 0.0 <= b < 1.0):
                raise ValueError(f"betas[{i}] must be in [0, 1), got {b!r}")
        self.betas = (float(b1), float(b2))
        self.eps = non_negative_number(eps, "eps")

    def hyper(self) -> dict:
        return {"lr": self.lr, "betas": list(self.betas), "eps": self.eps, "weight_decay": self.weight_decay}

    def _update(self, w, g, bufs, clip) -> None:
        _core.adam_step(
            w,
            g,
            bufs["m"],
            bufs["v"],
            self.step_count,
            self.lr,
            self.betas[0],
            self.betas[1],
            self.eps,
            self.weight_decay,
            clip,
        )


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum (PyTorch's ``SGD``, no dampening)."""

    def __init__(self, lr: float, momentum: float = 0.0, weight_decay: float = 0.0):
        super().__init__(lr, weight_decay)
        self.momentum = non_negative_number(momentum, "momentum")

    _scratch: Optional[np.ndarray] = None  # momentum = 0: what the kernel is given as its buffer

    @property
    def buffers(self) -> Tuple[str, ...]:  # type: ignore[override]  # a class attribute elsewhere; here it depends on momentum
        return ("momentum_buffer",) if self.momentum else ()

    def hyper(self) -> dict:
        return {"lr": self.lr, "momentum": self.momentum, "weight_decay": self.weight_decay}

    def _update(self, w, g, bufs, clip) -> None:
        # The kernel wants a buffer of the right size even when momentum = 0 (it is not touched then).
        buf = bufs["momentum_buffer"] if "momentum_buffer" in bufs else self._empty_like(w)
        _core.sgd_step(w, g, buf, self.step_count, self.lr, self.momentum, self.weight_decay, clip)

    def _empty_like(self, w: np.ndarray) -> np.ndarray:
        # momentum = 0: a scratch buffer the kernel never reads or writes, kept across steps.
        if self._scratch is None or self._scratch.shape != w.shape or self._scratch.dtype != w.dtype:
            self._scratch = np.zeros_like(w)
        return self._scratch


OPTIMIZERS = {cls.__name__: cls for cls in (Adam, SGD)}


def optimizer_from_state(state: dict) -> Optimizer:
    """Rebuild an optimiser from ``state_dict()`` output."""
    name = state.get("name")
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimiser {name!r}; known: {sorted(OPTIMIZERS)}")
    hyper = dict(state.get("hyper", {}))
    opt = OPTIMIZERS[name](**hyper)
    opt.load_state_dict(state)
    return opt


class ColumnNorm:
    """Column normalisation (Pachitariu & Sahani 2013), a constraint applied after every update
    (``Trainer(constraint=ColumnNorm(...))``, or call ``constraint(model)`` yourself)::

        w_j <- w_j * min(1, max_norm / ||w_j||_2)        for every column w_j of a chosen matrix

    A matrix W (rows, cols) maps its input to its output (``W x``), so column j holds the weights
    leaving input unit j. Matrices that stack gate blocks (an LSTM's ``weight_ih`` (4H, E), whose
    role has ``unit = H``) are capped per block: each gate's column separately. The matrices are
    chosen by role kind (``kinds``, default the recurrent and input weights: ``("recurrent",
    "input")``; see ``model.parameter_roles()``), optionally narrowed by ``names`` (fnmatch patterns).
    Vectors (biases, gains) are never touched. Vectorised NumPy on the parameter views, in place.
    """

    def __init__(self, max_norm: float = 2.0, kinds=("recurrent", "input"), names=None):
        self.max_norm = positive_number(max_norm, "max_norm")
        if isinstance(kinds, str):
            kinds = (kinds,)
        self.kinds = tuple(kinds)
        if not self.kinds:
            raise ValueError("kinds must name at least one parameter role kind")
        if isinstance(names, str):
            names = (names,)
        self.names = None if names is None else tuple(names)

    def matrices(self, model):
        """The (name, view, unit) triples this constraint caps, in the model's parameter order."""
        import fnmatch

        roles = model.parameter_roles()
        params = model.parameters()
        known = {r.kind for r in roles.values()}
        unknown = [k for k in self.kinds if k not in known]
        if unknown:
            raise ValueError(
                f"ColumnNorm: no parameter has role kind {unknown}; this model's kinds are {sorted(known)}"
            )
        out = []
        for name, p in params.items():
            if p.ndim != 2 or roles[name].kind not in self.kinds:
                continue
            if self.names is not None and not any(fnmatch.fnmatch(name, pat) for pat in self.names):
                continue
            out.append((name, p, roles[name].unit))
        if not out:
            raise ValueError(
                f"ColumnNorm: no matrix of kinds {list(self.kinds)} matches names {list(self.names or [])}"
            )
        return out

    @staticmethod
    def _block_norms(w: np.ndarray, unit: int):
        """Matrix ``w`` as the math writes it (the transpose of NumPy-transposed storage), the length of its
        capped blocks of rows, and the L2 norm of every block's every column: (blocks, cols)."""
        rows, cols = w.shape
        if w.flags.c_contiguous and not w.flags.f_contiguous:
            # NumPy-transposed storage (an embedding (V, E)): the math's columns are its rows
            w = w.T
            rows, cols = w.shape
            unit = 0
        block = unit if unit and rows % unit == 0 else rows
        blocks = w.reshape(rows // block, block, cols)  # (blocks, block, cols); row a*block + b of w
        return w, block, np.sqrt(np.einsum("kbc,kbc->kc", blocks, blocks))  # norms: (blocks, cols)

    def norms(self, model) -> Dict[str, np.ndarray]:
        """The L2 norm of every column this constraint caps: name -> (blocks, cols), block k's column j (the
        weights leaving input unit j into gate block k, or of lag k + 1 in a HORNN's stacked recurrent matrices;
        one block where a matrix has none). Whether the cap binds: ``(n >= max_norm * (1 - 1e-3)).mean()``."""
        return {name: self._block_norms(w, unit)[2] for name, w, unit in self.matrices(model)}

    def __call__(self, model) -> None:
        for name, w, unit in self.matrices(model):
            w, block, norms = self._block_norms(w, unit)  # w: a view of the parameter, written in place
            scale = np.minimum(1.0, self.max_norm / np.maximum(norms, np.finfo(w.dtype).tiny))
            if (scale < 1.0).any():
                w *= np.repeat(scale.astype(w.dtype), block, axis=0)

    def __repr__(self) -> str:
        return f"ColumnNorm(max_norm={self.max_norm!r}, kinds={self.kinds!r}, names={self.names!r})"


def global_norm(g: np.ndarray) -> float:
    """The Euclidean norm of a flat gradient (float32 or float64), summed in float64."""
    return float(_core.global_norm(g))


def clip_by_norm(g: np.ndarray, max_norm: float) -> float:
    """Scale the flat gradient ``g`` in place so that its norm is at most ``max_norm`` (> 0, else
    ``ValueError``); returns the norm before clipping (the trainer's ``clip_norm``)."""
    return float(_core.clip_by_norm(g, max_norm))


def clip_by_value(g: np.ndarray, limit: float) -> None:
    """Clip every entry of the flat gradient ``g`` to [-limit, limit] in place (the trainer's ``clip_value``)."""
    _core.clip_by_value(g, limit)


def all_finite(g: np.ndarray) -> bool:
    """Whether every entry of the flat array ``g`` is finite."""
    return bool(_core.all_finite(g))
