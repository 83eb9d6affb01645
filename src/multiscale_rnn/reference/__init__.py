"""Plain reference implementations of every model family, for tests and benchmarks: the same network
computed independently of the C++ core, from a model's parameters (``model.parameters()``) and its
config, with the fast model's parameter and state names so weights and state copy across.

Every registered family has one, found by its core's name (``LanguageModel.core_name``) in
:data:`REFERENCES`, and every reference module offers the same function::

    loss_and_grad(model, inputs, targets, state=None, mask=None) -> (loss, grads, new_state)

- ``inputs``: token ids (B, T), or real vectors (B, T, D) for a model built with ``input_size=D``.
- ``targets``: class ids (B, T), or real vectors (B, T, 3) (dx, dy, pen bit) for a model with the
  mixture density head (``head="mdn"``), whose loss is then the reference of :mod:`.mdn` on the raw
  parameters the inner head gives (the linear head's, or the HM-LSTM's gated module's, "logits").
- ``state``: None (zeros) or a dict name -> (B, size) array, by the model's state names.
- ``mask``: None, or (B, T) non-negative weights (0/1: which targets count); the cross-entropy is
  then ``sum w nll / sum w``, as ``model.loss_and_grad(..., weights=mask)``. The auxiliary terms
  stay over every column, as the model's.
- ``loss``: a :class:`multiscale_rnn.models.base.Loss`, the mean cross-entropy with the family's
  auxiliary terms in ``.aux``; ``grads``: dict name -> NumPy array, the gradient of ``loss.total``
  with respect to every parameter; ``new_state``: the state after the last step (NumPy arrays).

It computes what ``model.loss_and_grad`` computes in training mode, in float64, for models without
dropout or zoneout (their random masks are drawn by the core and cannot be replayed). What a
reference does not cover (a head, a cell type) raises ``NotImplementedError`` naming it.
``loss_and_grad`` here calls the reference of ``model``'s family.

Two kinds of reference modules:

- NumPy with the backward written out by hand (``rnn``: the LSTM, GRU and Elman stacks and the
  FS-RNN paper's stacked and sequential LSTM);
- PyTorch float64 autograd, written the natural way (a loop over steps, every unit computed and
  masked where the fast model skips work): ``hm_lstm``, ``fs_rnn``, ``hornn``, ``vcrnn`` (VCRNN
  and VCGRU), ``clockwork``, and ``class_softmax`` (a head). PyTorch is never a runtime
  dependency of the package: these modules import it when called, and ``torch()`` raises
  ``ImportError`` saying how to install it (it is in the ``test`` extra).

A new family registers its reference by adding its core's name to :data:`REFERENCES`; the contract
tests (tests/test_contract.py) refuse a registered family without one.
"""

from __future__ import annotations

import importlib
from typing import Dict, Optional, Tuple

import numpy as np

__all__ = [
    "REFERENCES",
    "module",
    "loss_and_grad",
    "exact_gradient_options",
    "torch",
    "tensors",
    "check_covered",
    "class_targets",
    "real_targets",
    "mask_weights",
    "encode",
    "encode_backward",
    "linear_head",
    "torch_inputs",
    "torch_objective",
    "torch_grads",
]

#: The reference module (under ``multiscale_rnn.reference``) of every core, by ``core_name``.
REFERENCES: Dict[str, str] = {
    "lstm": "rnn",
    "gru": "rnn",
    "rnn_tanh": "rnn",
    "stacked_lstm": "rnn",
    "sequential_lstm": "rnn",
    "hm_lstm": "hm_lstm",
    "fs_rnn": "fs_rnn",
    "hornn": "hornn",
    "vcrnn": "vcrnn",
    "vcgru": "vcrnn",
    "clockwork": "clockwork",
}


def module(model_or_class):
    """The reference module of a model or model class (by its ``core_name``); ``KeyError`` naming
    the core when :data:`REFERENCES` has none."""
    core = getattr(model_or_class, "core_name", "")
    if core not in REFERENCES:
        name = getattr(model_or_class, "__name__", type(model_or_class).__name__)
        raise KeyError(
            f"no reference for {name} (core {core!r}): add it to multiscale_rnn.reference.REFERENCES "
            f"(known cores: {', '.join(sorted(REFERENCES))})"
        )
    return importlib.import_module(f"{__name__}.{REFERENCES[core]}")


def loss_and_grad(model, inputs, targets, state=None, mask=None, padding=None):
    """The reference of ``model``'s family: ``(Loss, grads, new_state)`` (see the module docstring).
    ``padding`` (B, T) 0/1, as ``model.loss_and_grad(..., padding=...)``: the columns marked 0 count in
    neither the loss (``mask`` defaults to it) nor the family's auxiliary terms (families with auxiliary
    terms take it as a keyword)."""
    mod = module(model)
    if padding is None:
        return mod.loss_and_grad(model, inputs, targets, state, mask)
    mask = padding if mask is None else mask
    if model.aux_terms:
        return mod.loss_and_grad(model, inputs, targets, state, mask, padding=padding)
    return mod.loss_and_grad(model, inputs, targets, state, mask)


def exact_gradient_options(model_or_class) -> dict:
    """Options under which the family's ``loss_and_grad`` is the exact derivative of its objective, for
    finite-difference checks (a reference module's ``EXACT_GRADIENT_OPTIONS``; none for most: the
    HM-LSTM's straight-through boundaries are replaced by soft ones)."""
    return dict(getattr(module(model_or_class), "EXACT_GRADIENT_OPTIONS", {}))


# ---- what every reference reads the same way ------------------------------------------------------
def check_covered(model, heads: Tuple[str, ...] = ("linear",)) -> None:
    """``NotImplementedError`` for what no reference replays: dropout and zoneout (random masks of
    the core), and a head outside ``heads`` (the mixture density head counts as its inner head:
    "gated" with a head_size, else "linear")."""
    cfg = model.config
    if cfg.get("dropout", 0.0):
        raise NotImplementedError(
            f"{cfg['model']} with dropout={cfg['dropout']}: the reference cannot replay the core's dropout masks"
        )
    for z in ("zoneout_c", "zoneout_h"):
        if cfg.get(z, 0.0):
            raise NotImplementedError(
                f"{cfg['model']} with {z}={cfg[z]}: the reference cannot replay the core's zoneout masks"
            )
    head = cfg.get("head", "linear")
    if head == "mdn":
        head = "gated" if cfg.get("head_size") else "linear"
    if head not in heads:
        raise NotImplementedError(f"the {cfg['model']} reference has no {cfg['head']!r} head (it has {heads})")


def real_targets(targets) -> bool:
    """True for real-valued targets (B, T, 3), what the mixture density head reads."""
    return np.asarray(targets).ndim == 3


def class_targets(targets, shape) -> np.ndarray:
    """Class ids (B, T) as int64, checked against the inputs' (B, T)."""
    t = np.asarray(targets)
    if t.shape != tuple(shape):
        raise ValueError(f"targets have shape {t.shape}, inputs {tuple(shape)}")
    return t.astype(np.int64)


def mask_weights(mask, shape) -> Optional[np.ndarray]:
    """None, or the (B, T) loss weights as float64, checked as the model checks them."""
    if mask is None:
        return None
    w = np.asarray(mask, dtype=np.float64)
    if w.shape != tuple(shape):
        raise ValueError(f"mask has shape {w.shape}, targets {tuple(shape)}")
    if not (np.all(np.isfinite(w)) and np.all(w >= 0) and w.sum() > 0):
        raise ValueError("mask must be finite, non-negative and not all zero")
    return w


def _is_ids(inputs) -> bool:
    return np.asarray(inputs).ndim == 2


# ---- NumPy: the encoder and the linear head, forward and backward --------------------------------
def encode(params: dict, inputs) -> np.ndarray:
    """x (B, T, E): ``embedding.weight`` rows of token ids (B, T), or ``encoder.weight`` (E, D) times
    real vectors (B, T, D) plus ``encoder.bias``."""
    if _is_ids(inputs):
        return params["embedding.weight"][np.asarray(inputs, dtype=np.int64)]
    x = np.asarray(inputs, dtype=np.float64)
    return x @ params["encoder.weight"].T + params["encoder.bias"]


def encode_backward(grads: dict, inputs, dx: np.ndarray) -> None:
    """Add the encoder's parameter gradients for dL/dx (B, T, E) to ``grads``."""
    E = dx.shape[-1]
    if _is_ids(inputs):
        np.add.at(grads["embedding.weight"], np.asarray(inputs, dtype=np.int64).reshape(-1), dx.reshape(-1, E))
    else:
        x = np.asarray(inputs, dtype=np.float64).reshape(-1, np.shape(inputs)[-1])
        grads["encoder.weight"] += dx.reshape(-1, E).T @ x
        grads["encoder.bias"] += dx.reshape(-1, E).sum(0)


def linear_head(params: dict, y: np.ndarray, targets, weights: Optional[np.ndarray], grads: dict):
    """The linear head on y (B, T, I): the mean (or ``weights``-weighted mean) cross-entropy of class
    ids ``targets`` (B, T), or the mixture density loss of real targets (B, T, 3) on its outputs, with
    the head's gradients added to ``grads``; returns (loss, dL/dy)."""
    W, b = params["decoder.weight"], params["decoder.bias"]
    if real_targets(targets):  # the mixture density head: its loss and gradients through autograd
        t = torch()
        Wt, bt, yt = (t.tensor(a, dtype=t.float64, requires_grad=True) for a in (W, b, y))
        loss = torch_objective(yt @ Wt.T + bt, targets, weights)
        loss.backward()
        grads["decoder.weight"] += Wt.grad.numpy()
        grads["decoder.bias"] += bt.grad.numpy()
        return float(loss.detach()), yt.grad.numpy()
    targets = class_targets(targets, y.shape[:2])
    z = y @ W.T + b  # (B, T, V)
    z = z - z.max(axis=-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    nll = -np.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]  # (B, T)
    w = np.full(nll.shape, 1.0 / nll.size) if weights is None else weights / weights.sum()
    dz = np.exp(logp)
    np.put_along_axis(dz, targets[..., None], np.take_along_axis(dz, targets[..., None], axis=-1) - 1.0, axis=-1)
    dz *= w[..., None]
    I = y.shape[-1]
    grads["decoder.weight"] += dz.reshape(-1, W.shape[0]).T @ y.reshape(-1, I)
    grads["decoder.bias"] += dz.reshape(-1, W.shape[0]).sum(0)
    return float((w * nll).sum()), dz @ W


# ---- PyTorch: shared by the autograd references --------------------------------------------------
def torch():
    """The ``torch`` module, or ``ImportError`` naming the install command (``pip install torch``)."""
    try:
        import torch as _torch
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("the PyTorch reference implementations need PyTorch: pip install torch") from e
    return _torch


def tensors(model, dtype=None, requires_grad: bool = True) -> dict:
    """A model's parameters as torch tensors by the model's names (copies, in ``dtype``: the model's
    by default), the ``P`` every reference's ``forward`` takes."""
    t = torch()
    dt = {np.dtype("float32"): t.float32, np.dtype("float64"): t.float64}[np.dtype(dtype or model.dtype)]
    return {k: t.tensor(np.array(v), dtype=dt, requires_grad=requires_grad) for k, v in model.parameters().items()}


def torch_inputs(P: dict, inputs):
    """What a reference written for token ids reads: ``(P', ids)`` with ids a (B, T) LongTensor
    looked up in ``P'["embedding.weight"]``. Token ids pass unchanged (``P' = P``); real vectors
    (B, T, D) are encoded first (``encoder.weight``, ``encoder.bias``) and looked up by position, so
    that their gradients reach the encoder through autograd."""
    t = torch()
    if _is_ids(inputs):
        return P, t.as_tensor(np.asarray(inputs, dtype=np.int64))
    x = t.as_tensor(np.asarray(inputs, dtype=np.float64))
    B, T, _ = x.shape
    table = (x @ P["encoder.weight"].T + P["encoder.bias"]).reshape(B * T, -1)
    return dict(P, **{"embedding.weight": table}), t.arange(B * T).reshape(B, T)


def torch_objective(logits, targets, mask=None):
    """The (weighted) mean cross-entropy of ``logits`` (B, T, V) for class ids ``targets`` (B, T); for
    real targets (B, T, 3), the mixture density loss (:func:`multiscale_rnn.reference.mdn.nll`) of the
    raw parameters ``logits`` (B, T, 6M + 1)."""
    t = torch()
    shape = tuple(logits.shape[:2])
    if real_targets(targets):
        from .mdn import nll as mixture_nll

        x = np.asarray(targets, dtype=np.float64)
        if x.shape != shape + (3,):
            raise ValueError(f"targets have shape {x.shape}, expected {shape + (3,)}")
        w = mask_weights(mask, shape)
        nll = mixture_nll(logits.reshape(-1, logits.shape[-1]), t.as_tensor(x).reshape(-1, 3))
    else:
        tgt = class_targets(targets, shape)
        w = mask_weights(mask, tgt.shape)
        nll = t.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), t.as_tensor(tgt).reshape(-1), reduction="none"
        )
    if w is None:
        return nll.mean()
    w = t.as_tensor(w).reshape(-1)
    return (w * nll).sum() / w.sum()


def torch_grads(P: dict) -> dict:
    """dict name -> NumPy gradient of every leaf tensor in ``P`` (zeros where none reached it)."""
    return {k: (p.grad.numpy() if p.grad is not None else np.zeros(tuple(p.shape))) for k, p in P.items()}
