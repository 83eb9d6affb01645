"""Parameter initialisers. Each takes a model, acts on the parameters whose names match, and
draws from a NumPy ``Generator`` so results follow the user's seed.

    uniform(model, scale)        U(-scale, scale)
    gaussian(model, std)         N(0, std^2)
    orthogonal(model)            each gate block of every recurrent matrix orthogonal
    forget_bias(model, value)    LSTM forget-gate biases (bias_ih + bias_hh) sum to `value`
    default(model)               PyTorch's rule: U(-1/sqrt(H), 1/sqrt(H)) for recurrent layers and
                                 the decoder, N(0, 1) for the embedding
"""
from __future__ import annotations

import fnmatch
import re
from typing import Optional

import numpy as np


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
    g = _rng(rng)
    for _, p in _select(model, pattern):
        p[...] = g.uniform(-scale, scale, p.shape)


def gaussian(model, std: float, pattern: str = "*", rng=0) -> None:
    """Every matching parameter from N(0, std^2)."""
    g = _rng(rng)
    for _, p in _select(model, pattern):
        p[...] = g.normal(0.0, std, p.shape)


def _orthogonal(g: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    a = g.normal(size=(max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(a)
    q *= np.sign(np.diag(r))
    return q if rows >= cols else q.T


# Names of a recurrent layer's or cell's tensors: <kind><suffix>, e.g. weight_hh_l0, bias_ih_f1,
# ln_gates_bias_s; the suffix names the layer or cell.
_CELL_TENSORS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "ln_gates_weight", "ln_gates_bias")


def _layer_hidden(params, name: str) -> Optional[int]:
    """H of the layer or cell a parameter belongs to (from the ``weight_hh<suffix>`` of the same
    suffix: _l0, _f1, _s, ...), or None."""
    for kind in _CELL_TENSORS:
        if name.startswith(kind + "_"):
            hh = params.get("weight_hh" + name[len(kind):])
            return None if hh is None else int(hh.shape[1])
    return None


def orthogonal(model, pattern: str = "weight_hh*", gain: float = 1.0, rng=0) -> None:
    """Each gate block of the matching matrices (semi-)orthogonal (times ``gain``).

    A (G*H, cols) matrix of a recurrent layer with hidden size H is G gate blocks of (H, cols):
    square recurrent blocks (H, H) are orthogonal, input blocks (H, E) semi-orthogonal (orthonormal
    rows or columns, whichever are fewer). Other matrices get a semi-orthogonal matrix of their shape.
    """
    g = _rng(rng)
    params = model.parameters()
    for name, p in _select(model, pattern):
        if p.ndim != 2:
            continue
        rows, cols = p.shape
        h = _layer_hidden(params, name)
        if h is not None and rows % h == 0:
            for k in range(rows // h):
                p[k * h:(k + 1) * h] = gain * _orthogonal(g, h, cols)
        else:
            p[...] = gain * _orthogonal(g, rows, cols)


def forget_bias(model, value: float = 1.0, pattern: str = "bias_ih*") -> None:
    """Set LSTM forget-gate biases so that bias_ih + bias_hh = ``value`` on the forget gate
    (gate block 1 of 4, PyTorch's order i, f, g, o). Only biases of 4H entries (H the layer's hidden
    size) are LSTM biases; a model without any is refused."""
    params = model.parameters()
    found = False
    for name, p in _select(model, pattern):
        h = _layer_hidden(params, name)
        if h is None or p.shape[0] != 4 * h:
            continue
        other = params.get(name.replace("bias_ih", "bias_hh"))
        p[h:2 * h] = value
        if other is not None and other is not p:
            other[h:2 * h] = 0.0
        found = True
    if not found:
        raise ValueError("no LSTM bias (4H entries) matches the pattern")


def default(model, rng: Optional[np.random.Generator] = None) -> None:
    """PyTorch's defaults: U(-1/sqrt(H), 1/sqrt(H)) for recurrent weights and biases (H the layer's
    hidden size) and for the decoder (H its input size); N(0, 1) for embeddings."""
    g = _rng(rng if rng is not None else 0)
    params = model.parameters()
    for name, p in params.items():
        if name.startswith("embedding"):
            p[...] = g.normal(0.0, 1.0, p.shape)
            continue
        m = re.search(r"_l(\d+)$", name)
        if m and "weight_hh" + m.group(0) in params:
            hidden = params["weight_hh" + m.group(0)].shape[1]
        elif name.startswith("decoder"):
            hidden = params["decoder.weight"].shape[1]
        else:
            hidden = p.shape[-1] if p.ndim == 2 else p.shape[0]
        bound = 1.0 / np.sqrt(hidden)
        p[...] = g.uniform(-bound, bound, p.shape)
