"""The VCRNN and VCGRU (Jernite et al. 2017, eq. 7-16) written directly in PyTorch autograd: a loop over
steps, the masked full computation (every unit of every column computed, e_t applied as a mask),
with the fast model's parameter and state names (``weight_ih_l0``, ``sched_bias_l0``, ``h_l0`` ...).

Also the GRU written the reset-before way (Cho et al. 2014: h~ = tanh(U_n (r . h) + V_n x + b_n)), the
unit a VCGRU becomes with m_t forced to 1. Used by the parity tests in float64 (``loss_and_grad``, the
common interface of ``multiscale_rnn.reference``) and by ``bench/bench_vcrnn.py`` as the masked model
written the natural way (``forward`` in float32).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..models.base import Loss
from . import check_covered, torch_grads, torch_inputs, torch_objective
from . import torch as _torch


def tensors(params: dict, dtype=None, requires_grad: bool = False) -> dict:
    """NumPy parameters (``model.parameters()``) as torch tensors (copies)."""
    torch = _torch()
    out = {}
    for k, v in params.items():
        t = torch.tensor(np.ascontiguousarray(v), dtype=dtype)
        out[k] = t.requires_grad_(requires_grad)
    return out


def mask(m, D: int, sharpness: float, eps: float, offset: int):
    """e (B, D) of m (B, 1): Thres_eps(sigm(lambda (m D - i - offset))), i = 0..D-1; the thresholded
    entries are constants (zero gradient)."""
    torch = _torch()
    idx = torch.arange(D, dtype=m.dtype) + offset
    s = torch.sigmoid(sharpness * (m * D - idx))
    one, zero = s > 1 - eps, s < eps
    return torch.where(one, torch.ones_like(s), torch.where(zero, torch.zeros_like(s), s))


def penalty(m, kind: str, target: float):
    """f(m - m_bar) elementwise: |.| (l1), max(0, .) (one_sided), (.)^2 (l2)."""
    torch = _torch()
    x = m - target
    if kind == "l1":
        return x.abs()
    if kind == "one_sided":
        return torch.clamp(x, min=0)
    if kind == "l2":
        return x * x
    raise ValueError(f"unknown penalty {kind!r}")


def forward(P: dict, config: dict, tok, state: Optional[dict] = None):
    """Logits (B, T, V), the state after the last step, and records: ``m`` (B, T), ``e`` (B, T, D).

    ``P``: parameter tensors by the model's names; ``config``: the model's config (``model.config``,
    with ``model`` "VCRNN" or "VCGRU"); ``tok``: (B, T) token ids (LongTensor); ``state``: dict
    ``h_l0`` -> (B, D) (zeros if None).
    """
    torch = _torch()
    D = config["hidden_sizes"][0]
    gru = config["model"] == "VCGRU"
    lam, eps = config["sharpness"], config["eps"]
    off = 1 if config["mask_index"] == "one" else 0
    x = P["embedding.weight"][tok]  # (B, T, D)
    Bn, Tn = tok.shape
    h = (state or {}).get("h_l0", torch.zeros(Bn, D, dtype=x.dtype))
    W, U, b = P["weight_ih_l0"], P["weight_hh_l0"], P["bias_l0"]
    ys, ms, es = [], [], []
    for t in range(Tn):
        xt = x[:, t]
        m = torch.sigmoid(h @ P["sched_weight_hh_l0"].T + xt @ P["sched_weight_ih_l0"].T + P["sched_bias_l0"])
        e = mask(m, D, lam, eps, off)  # (B, D)
        hb, xb = e * h, e * xt
        if gru:
            r = torch.sigmoid(hb @ U[:D].T + xb @ W[:D].T + b[:D])
            z = e * torch.sigmoid(hb @ U[D : 2 * D].T + xb @ W[D : 2 * D].T + b[D : 2 * D])
            n = torch.tanh((r * hb) @ U[2 * D :].T + xb @ W[2 * D :].T + b[2 * D :])
            h = z * n + (1 - z) * h
        else:
            h = e * torch.tanh(hb @ U.T + xb @ W.T + b) + (1 - e) * h
        ys.append(h)
        ms.append(m[:, 0])
        es.append(e)
    Y = torch.stack(ys, dim=1)
    logits = Y @ P["decoder.weight"].T + P["decoder.bias"]
    return logits, {"h_l0": h}, {"m": torch.stack(ms, dim=1), "e": torch.stack(es, dim=1)}


def gru_reset_before(P: dict, tok, state: Optional[dict] = None):
    """Logits (B, T, V) and state of a GRU with reset before the product (Cho et al. 2014):
    r = sigm(U_r h + V_r x + b_r), z = sigm(U_z h + V_z x + b_z), h~ = tanh(U_n (r . h) + V_n x + b_n),
    h_t = z . h~ + (1 - z) . h_{t-1}; parameters as the VCGRU's (the scheduler's unused)."""
    torch = _torch()
    x = P["embedding.weight"][tok]
    W, U, b = P["weight_ih_l0"], P["weight_hh_l0"], P["bias_l0"]
    D = U.shape[1]
    Bn, Tn = tok.shape
    h = (state or {}).get("h_l0", torch.zeros(Bn, D, dtype=x.dtype))
    ys = []
    for t in range(Tn):
        xt = x[:, t]
        r = torch.sigmoid(h @ U[:D].T + xt @ W[:D].T + b[:D])
        z = torch.sigmoid(h @ U[D : 2 * D].T + xt @ W[D : 2 * D].T + b[D : 2 * D])
        n = torch.tanh((r * h) @ U[2 * D :].T + xt @ W[2 * D :].T + b[2 * D :])
        h = z * n + (1 - z) * h
        ys.append(h)
    Y = torch.stack(ys, dim=1)
    return Y @ P["decoder.weight"].T + P["decoder.bias"], {"h_l0": h}


def loss_and_grad(model, inputs, targets, state: Optional[dict] = None, mask=None, *, padding=None):
    """The reference of ``model.loss_and_grad`` in float64 (the common interface of
    ``multiscale_rnn.reference``): the mean cross-entropy as a ``Loss`` whose ``aux["vc_penalty"]`` is
    the weight times the mean of f(m - m_bar) over the B*T columns (``penalty_scope`` "batch": f of the
    mean m minus m_bar), the gradients (NumPy, by the
    model's names) of ``loss.total`` and the new state. ``padding`` (B, T) 0/1: the mean over the columns
    it marks 1 (separate padded sequences)."""
    torch = _torch()
    check_covered(model)
    P = tensors(model.parameters(), torch.float64, requires_grad=True)
    Pin, tok = torch_inputs(P, inputs)
    st = None if state is None else {k: torch.tensor(np.asarray(v), dtype=torch.float64) for k, v in state.items()}
    logits, new, rec = forward(Pin, model.config, tok, st)
    xent = torch_objective(logits, targets, mask)
    cfg = model.config
    m = rec["m"]  # (B, T)
    pad = (
        torch.ones_like(m)
        if padding is None
        else torch.as_tensor(np.asarray(padding, dtype=np.float64)).reshape(m.shape)
    )
    if cfg.get("penalty_scope", "step") == "batch":  # f of the mean m_t over the counted columns
        aux = cfg["penalty_weight"] * penalty((m * pad).sum() / pad.sum(), cfg["penalty"], cfg["target"])
    else:  # the mean of f(m_t - m_bar) over the counted columns
        aux = cfg["penalty_weight"] * (penalty(m, cfg["penalty"], cfg["target"]) * pad).sum() / pad.sum()
    (xent + aux).backward()
    loss = Loss(float(xent.detach()), {"vc_penalty": float(aux.detach())})
    return loss, torch_grads(P), {k: v.detach().numpy() for k, v in new.items()}
