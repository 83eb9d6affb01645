"""The LSTM, GRU and Elman RNN stacks (``msr.LSTM``, ``msr.GRU``, ``msr.ElmanRNN``) and the FS-RNN
paper's stacked and sequential LSTM (``msr.StackedLSTM``, ``msr.SequentialLSTM``) in plain NumPy:
a loop over steps forward, its mirror backward written out by hand, float64.

Cells follow PyTorch's equations, gate orders and names, for one step of a batch (B rows)::

    LSTM  (i, f, g, o):  a = W_ih x + b_ih + W_hh h + b_hh   (weight_ih (4H, E), weight_hh (4H, H))
                         c' = sigm(a_f) c + sigm(a_i) tanh(a_g),  h' = sigm(a_o) tanh(c')
    GRU   (r, z, n):     r = sigm(W_ir x + b_ir + W_hr h + b_hr),  z = sigm(W_iz x + b_iz + W_hz h + b_hz)
                         n = tanh(W_in x + b_in + r (W_hn h + b_hn)),  h' = (1 - z) n + z h
    Elman:               h' = tanh(W_ih x + b_ih + W_hh h + b_hh)

The stacked and sequential LSTM's cells add the FS-RNN paper's layer norms (``layer_norm``):
on the gates, each gate block of a = W_ih x + W_hh h [+ bias] normalised with its gain and shift
(``ln_gates_weight``, ``ln_gates_bias``; no ``bias_ih``/``bias_hh``; ``bias`` before the norm with
``bias_before_norm``), and on the cell state, h' = sigm(a_o) tanh(LN(c')) with c' carried
un-normalised (``ln_cell_weight``, ``ln_cell_bias``). LN(x) = gain (x - mean) / sqrt(var + eps) +
shift over the H units (population variance). GRU cells with layer norm are not covered.

Stacks (``_l0`` ... ``_l{L-1}``, state ``h_l{l}`` and ``c_l{l}``): layer l reads the layer below at
the same step. The sequential LSTM (state ``h``, ``c``): cell 0 reads x_t and the last cell's state
of step t-1, cell i > 0 reads no input (no ``weight_ih``) and the state cell i-1 just wrote.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from ..models.base import Loss
from . import check_covered, encode, encode_backward, linear_head, mask_weights

__all__ = ["loss_and_grad", "cells"]

_LAYER_NORM = {True: (True, True), False: (False, False), "cell": (False, True), "gates": (True, False)}
_PLAIN = {"lstm": "lstm", "gru": "gru", "rnn_tanh": "elman"}


def _sigm(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


class _Spec:
    """One cell's type and readings: ``kind`` "lstm", "gru" or "elman"; layer norms on the gates and
    on the cell state; their epsilon; a bias before the gate norms."""

    def __init__(self, kind: str, ln_gates=False, ln_cell=False, eps=1e-5, bias_before_norm=False):
        self.kind, self.ln_gates, self.ln_cell, self.eps, self.bias_before_norm = (
            kind,
            ln_gates,
            ln_cell,
            eps,
            bias_before_norm,
        )
        self.has_c = kind == "lstm"
        self.gates = {"lstm": 4, "gru": 3, "elman": 1}[kind]


def cells(model):
    """(layout, spec, number of cells) of ``model``: layout "stack" or "chain" (the sequential LSTM)."""
    core = model.core_name
    cfg = model.config
    n = len(cfg["hidden_sizes"])
    if core in _PLAIN:
        return "stack", _Spec(_PLAIN[core]), n
    if core not in ("stacked_lstm", "sequential_lstm"):
        raise ValueError(f"the NumPy RNN reference does not know the core {core!r}")
    ln_gates, ln_cell = _LAYER_NORM[cfg["layer_norm"]]
    if cfg["cell"] == "gru":
        if ln_gates:
            raise NotImplementedError(f"{cfg['model']}: GRU cells with layer norm are not in the NumPy reference")
        ln_cell = False  # a GRU has no cell state
    spec = _Spec(cfg["cell"], ln_gates, ln_cell, float(cfg["layer_norm_eps"]), bool(cfg["bias_before_norm"]))
    return ("chain" if core == "sequential_lstm" else "stack"), spec, n


# ---- layer norm over the last axis -----------------------------------------------------------------
def _ln_forward(x, gain, shift, eps):
    mu = x.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    xhat = (x - mu) * rstd
    return xhat * gain + shift, (xhat, rstd, gain)


def _ln_backward(dy, cache, dgain, dshift):
    xhat, rstd, gain = cache
    dgain += (dy * xhat).sum(0)
    dshift += dy.sum(0)
    dxhat = dy * gain
    return rstd * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))


# ---- one cell, one step ------------------------------------------------------------------------------
def _cell_forward(spec: _Spec, P: dict, sfx: str, x, h, c):
    """(h', c', cache) of one step; ``x`` (B, E) or None (no input term), h (B, H), c (B, H) or None."""
    H = h.shape[1]
    rec = P["weight_hh" + sfx]
    cache = {"x": x, "h": h, "c": c}
    if spec.kind == "gru":
        gi = (x @ P["weight_ih" + sfx].T if x is not None else np.zeros((h.shape[0], 3 * H))) + P["bias_ih" + sfx]
        gh = h @ rec.T + P["bias_hh" + sfx]
        r = _sigm(gi[:, :H] + gh[:, :H])
        z = _sigm(gi[:, H : 2 * H] + gh[:, H : 2 * H])
        n = np.tanh(gi[:, 2 * H :] + r * gh[:, 2 * H :])
        cache.update(r=r, z=z, n=n, ghn=gh[:, 2 * H :])
        return (1 - z) * n + z * h, None, cache
    a = h @ rec.T
    if x is not None:
        a = a + x @ P["weight_ih" + sfx].T
    if spec.kind == "elman":
        hn = np.tanh(a + P["bias_ih" + sfx] + P["bias_hh" + sfx])
        cache["hn"] = hn
        return hn, None, cache
    if spec.ln_gates:
        if spec.bias_before_norm:
            a = a + P["bias" + sfx]
        gain, shift = P["ln_gates_weight" + sfx], P["ln_gates_bias" + sfx]
        parts, cache["ln_gates"] = [], []
        for k in range(4):
            blk = slice(k * H, (k + 1) * H)
            y, lc = _ln_forward(a[:, blk], gain[blk], shift[blk], spec.eps)
            parts.append(y)
            cache["ln_gates"].append(lc)
        a = np.concatenate(parts, axis=1)
    else:
        a = a + P["bias_ih" + sfx] + P["bias_hh" + sfx]
    i, f = _sigm(a[:, :H]), _sigm(a[:, H : 2 * H])
    g, o = np.tanh(a[:, 2 * H : 3 * H]), _sigm(a[:, 3 * H :])
    ct = f * c + i * g
    cn = ct
    if spec.ln_cell:
        cn, cache["ln_cell"] = _ln_forward(ct, P["ln_cell_weight" + sfx], P["ln_cell_bias" + sfx], spec.eps)
    tc = np.tanh(cn)
    cache.update(i=i, f=f, g=g, o=o, tc=tc)
    return o * tc, ct, cache


def _cell_backward(spec: _Spec, P: dict, G: dict, sfx: str, cache, dhn, dcn):
    """Gradients of one step: from dL/dh' and dL/dc' (None without a cell state) to (dL/dx or None,
    dL/dh, dL/dc or None); the parameters' gradients are added to ``G``."""
    x, h = cache["x"], cache["h"]
    H = h.shape[1]
    if spec.kind == "gru":
        r, z, n, ghn = cache["r"], cache["z"], cache["n"], cache["ghn"]
        dan = dhn * (1 - z) * (1 - n * n)
        daz = dhn * (h - n) * z * (1 - z)
        dar = dan * ghn * r * (1 - r)
        dgi = np.concatenate([dar, daz, dan], axis=1)
        dgh = np.concatenate([dar, daz, dan * r], axis=1)
        G["bias_ih" + sfx] += dgi.sum(0)
        G["bias_hh" + sfx] += dgh.sum(0)
        G["weight_hh" + sfx] += dgh.T @ h
        dh = dhn * z + dgh @ P["weight_hh" + sfx]
        dx = None
        if x is not None:
            G["weight_ih" + sfx] += dgi.T @ x
            dx = dgi @ P["weight_ih" + sfx]
        return dx, dh, None
    if spec.kind == "elman":
        da = dhn * (1 - cache["hn"] ** 2)
        G["bias_ih" + sfx] += da.sum(0)
        G["bias_hh" + sfx] += da.sum(0)
        dc_prev = None
    else:
        i, f, g, o, tc, c = cache["i"], cache["f"], cache["g"], cache["o"], cache["tc"], cache["c"]
        dct = dhn * o * (1 - tc * tc)
        if spec.ln_cell:
            dct = _ln_backward(dct, cache["ln_cell"], G["ln_cell_weight" + sfx], G["ln_cell_bias" + sfx])
        dct = dct + dcn
        dc_prev = dct * f
        da = np.concatenate(
            [dct * g * i * (1 - i), dct * c * f * (1 - f), dct * i * (1 - g * g), dhn * tc * o * (1 - o)], axis=1
        )
        if spec.ln_gates:
            gain, shift = G["ln_gates_weight" + sfx], G["ln_gates_bias" + sfx]
            da = np.concatenate(
                [
                    _ln_backward(
                        da[:, k * H : (k + 1) * H],
                        cache["ln_gates"][k],
                        gain[k * H : (k + 1) * H],
                        shift[k * H : (k + 1) * H],
                    )
                    for k in range(4)
                ],
                axis=1,
            )
            if spec.bias_before_norm:
                G["bias" + sfx] += da.sum(0)
        else:
            G["bias_ih" + sfx] += da.sum(0)
            G["bias_hh" + sfx] += da.sum(0)
    G["weight_hh" + sfx] += da.T @ h
    dh = da @ P["weight_hh" + sfx]
    dx = None
    if x is not None:
        G["weight_ih" + sfx] += da.T @ x
        dx = da @ P["weight_ih" + sfx]
    return dx, dh, dc_prev


# ---- the network -----------------------------------------------------------------------------------
def _state_names(layout: str, spec: _Spec, n: int) -> List[tuple]:
    """Per cell carrying a state: (h name, c name or None)."""
    if layout == "chain":
        return [("h", "c" if spec.has_c else None)]
    return [(f"h_l{l}", f"c_l{l}" if spec.has_c else None) for l in range(n)]


def loss_and_grad(model, inputs, targets, state: Optional[Dict[str, np.ndarray]] = None, mask=None):
    """Mean cross-entropy (``Loss``, no auxiliary terms), gradients by the model's names and the
    state after the last step, of an LSTM, GRU, Elman RNN, stacked or sequential LSTM model, in
    float64 NumPy from its parameters (the common interface of ``multiscale_rnn.reference``)."""
    check_covered(model)
    layout, spec, n = cells(model)
    P = {k: np.array(v, dtype=np.float64) for k, v in model.parameters().items()}
    G = {k: np.zeros_like(v) for k, v in P.items()}
    x = encode(P, inputs)  # (B, T, E)
    B, T = x.shape[:2]
    w = mask_weights(mask, (B, T))
    sizes = model.config["hidden_sizes"]
    names = _state_names(layout, spec, n)
    state = state or {}

    def start(name, size):
        return np.array(state[name], dtype=np.float64) if name in state else np.zeros((B, size))

    hs = [start(hn, sizes[j]) for j, (hn, _) in enumerate(names)]
    cs = [start(cn, sizes[j]) if cn else None for j, (_, cn) in enumerate(names)]

    caches, ys = [], []  # caches[t][cell]
    for t in range(T):
        step = []
        if layout == "stack":
            inp = x[:, t]
            for l in range(n):
                hs[l], cs[l], cache = _cell_forward(spec, P, f"_l{l}", inp, hs[l], cs[l])
                step.append(cache)
                inp = hs[l]
            ys.append(hs[-1])
        else:
            h, c = hs[0], cs[0]
            for k in range(n):
                h, c, cache = _cell_forward(spec, P, f"_l{k}", x[:, t] if k == 0 else None, h, c)
                step.append(cache)
            hs[0], cs[0] = h, c
            ys.append(h)
        caches.append(step)
    y = np.stack(ys, axis=1)  # (B, T, H_top)
    xent, dy = linear_head(P, y, targets, w, G)

    dx = np.zeros_like(x)
    dhs = [np.zeros_like(h) for h in hs]  # dL/d(state after step t), carried backwards
    dcs = [np.zeros_like(c) if c is not None else None for c in cs]
    for t in reversed(range(T)):
        if layout == "stack":
            from_above = dy[:, t]
            for l in reversed(range(n)):
                d_in, dhs[l], dcs[l] = _cell_backward(spec, P, G, f"_l{l}", caches[t][l], dhs[l] + from_above, dcs[l])
                from_above = d_in
            dx[:, t] = from_above
        else:
            dh, dc = dhs[0] + dy[:, t], dcs[0]
            for k in reversed(range(n)):
                d_in, dh, dc = _cell_backward(spec, P, G, f"_l{k}", caches[t][k], dh, dc)
            dx[:, t] = d_in
            dhs[0], dcs[0] = dh, dc
    encode_backward(G, inputs, dx)

    new_state = {}
    for j, (hn, cn) in enumerate(names):
        new_state[hn] = hs[j]
        if cn:
            new_state[cn] = cs[j]
    return Loss(xent, {}), G, new_state
