"""Parameter initialisers. Each takes a model, acts on the parameters whose names match a pattern,
and draws from a NumPy ``Generator`` so results follow the user's seed. Layer structure (gate
blocks, which tensors are biases, gains or shifts) comes from the roles the core exports with each
parameter (``model.parameter_roles()``), never from parameter names.

    uniform(model, scale)        U(-scale, scale)
    gaussian(model, std)         N(0, std^2)
    orthogonal(model)            each gate block of every recurrent matrix orthogonal (or each
                                 whole matrix, by_blocks=False)
    forget_bias(model, value)    LSTM forget-gate biases (bias_ih + bias_hh) sum to `value`
    default(model)               PyTorch's rule: U(-1/sqrt(H), 1/sqrt(H)) for recurrent layers and
                                 the decoder, N(0, 1) for the embedding; layer-norm gains 1, shifts 0
"""

from __future__ import annotations

import fnmatch
from typing import Any, Dict, Optional

import numpy as np

from ._checks import is_number, non_negative_number


def _select(model, pattern: str):
    params = model.parameters()
    names = [n for n in params if fnmatch.fnmatch(n, pattern)]
    if not names:
        raise ValueError(f"no parameter matches {pattern!r}; parameters are {sorted(params)}")
    return [(n, params[n]) for n in names]


def _rng(rng) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def uniform(model, scale: float, pattern: str = "*", rng=0) -> None:
    """Every matching parameter from U(-scale, scale)."""
    scale = non_negative_number(scale, "uniform: scale")
    g = _rng(rng)
    for _, p in _select(model, pattern):
        p[...] = g.uniform(-scale, scale, p.shape)


def gaussian(model, std: float, pattern: str = "*", rng=0) -> None:
    """Every matching parameter from N(0, std^2)."""
    std = non_negative_number(std, "gaussian: std")
    g = _rng(rng)
    for _, p in _select(model, pattern):
        p[...] = g.normal(0.0, std, p.shape)


def _orthogonal(g: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    a = g.normal(size=(max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(a)
    q *= np.sign(np.diag(r))
    return q if rows >= cols else q.T


def _unit(model, name: str) -> int:
    """Rows of one gate block of a parameter (its layer's H), from the role the core exports; 0 when
    the tensor's rows are not gate blocks."""
    return model.parameter_roles()[name].unit


def orthogonal(model, pattern: str = "weight_hh*", gain: float = 1.0, rng=0, by_blocks: bool = True) -> None:
    """Each gate block of the matching matrices (semi-)orthogonal (times ``gain``).

    A (G*H, cols) matrix of a recurrent layer with hidden size H is G gate blocks of (H, cols):
    square recurrent blocks (H, H) are orthogonal, input blocks (H, E) semi-orthogonal (orthonormal
    rows or columns, whichever are fewer). Other matrices get a semi-orthogonal matrix of their shape.
    ``by_blocks=False``: every matching matrix whole, (G*H, cols) semi-orthogonal (for cols <= G*H
    orthonormal columns, so each gate block has singular values below 1), as the FS-RNN authors'
    code initialises its cells.
    """
    if not is_number(gain):
        raise ValueError(f"orthogonal: gain must be a finite number, got {gain!r}")
    g = _rng(rng)
    for name, p in _select(model, pattern):
        if p.ndim != 2:
            continue
        rows, cols = p.shape
        h = _unit(model, name)
        if by_blocks and h and rows % h == 0:
            for k in range(rows // h):
                p[k * h : (k + 1) * h] = gain * _orthogonal(g, h, cols)
        else:
            p[...] = gain * _orthogonal(g, rows, cols)


def forget_bias(model, value: float = 1.0, pattern: str = "*", prefer: str = "bias") -> None:
    """Set LSTM forget-gate biases so that the biases of each LSTM layer sum to ``value`` on the
    forget gate (gate block 1 of 4, PyTorch's order i, f, g, o): the layer's first matching bias
    (role ``bias``, or the gate layer norm's ``shift`` when the layer has no bias) gets ``value``,
    any other bias of the layer 0 there. ``prefer="shift"``: the shift when the layer has both (a
    bias added before a layer norm would be normalised away). Only tensors of exactly 4H rows (H
    the layer's gate-block size) are LSTM gate biases; a model without any matching one is refused."""
    if prefer not in ("bias", "shift"):
        raise ValueError(f"forget_bias: prefer must be 'bias' or 'shift', got {prefer!r}")
    if not is_number(value):
        raise ValueError(f"forget_bias: value must be a finite number, got {value!r}")
    params, roles = model.parameters(), model.parameter_roles()
    gate_bias = {
        n for n, r in roles.items() if r.unit and params[n].shape == (4 * r.unit,) and r.kind in ("bias", "shift")
    }
    chosen: Dict[str, Any] = {}
    for name, _ in _select(model, pattern):
        r = roles[name]
        if name in gate_bias:
            if prefer == "shift":
                has_shift = any(q.layer == r.layer and q.kind == "shift" for n, q in roles.items() if n in gate_bias)
                take = r.kind == "shift" or not has_shift
            else:
                has_bias = any(q.layer == r.layer and q.kind == "bias" for q in roles.values())
                take = r.kind == "bias" or not has_bias
            if take:
                chosen.setdefault(r.layer, name)
    if not chosen:
        raise ValueError("no LSTM bias (4H entries) matches the pattern")
    for layer, name in chosen.items():
        h = roles[name].unit
        for other, r in roles.items():
            if r.layer == layer and r.kind == roles[name].kind and params[other].shape == (4 * h,):
                params[other][h : 2 * h] = value if other == name else 0.0


def default(model, rng: Optional[np.random.Generator] = None) -> None:
    """PyTorch's defaults, by each parameter's role: N(0, 1) for the token embedding;
    U(-1/sqrt(H), 1/sqrt(H)) for a layer's weights and biases (H its gate-block size); for head
    (``output``) tensors and others U(-1/sqrt(n), 1/sqrt(n)) with n the matrix's columns (a bias:
    its head matrix's columns, or its own length); then layer-norm gains 1 and shifts 0."""
    g = _rng(rng if rng is not None else 0)
    params, roles = model.parameters(), model.parameter_roles()
    for name, p in params.items():
        r = roles[name]
        if r.kind == "embedding" and name == "embedding.weight":
            p[...] = g.normal(0.0, 1.0, p.shape)
            continue
        if r.unit:
            fan = r.unit
        elif p.ndim == 2:
            fan = p.shape[-1]
        else:
            weight = params.get(name.rsplit(".", 1)[0] + ".weight") if r.kind == "output" else None
            fan = weight.shape[-1] if weight is not None and weight.ndim == 2 else p.shape[0]
        bound = 1.0 / np.sqrt(fan)
        p[...] = g.uniform(-bound, bound, p.shape)
    for name, p in params.items():
        if roles[name].kind == "gain":
            p[...] = 1.0
        elif roles[name].kind == "shift":
            p[...] = 0.0
