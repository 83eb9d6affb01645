"""The Fast-Slow LSTM (Mujika, Meier & Steger 2017) written the natural way in PyTorch: one cell call
per cell and step, with the package's parameter and state names (``weight_ih_f1``, ``h_fast``, ...).

    h^{F1}_t = f^{F1}(h^{FK}_{t-1}, x_t)     h^S_t = f^S(h^S_{t-1}, h^{F1}_t)
    h^{F2}_t = f^{F2}(h^{F1}_t, h^S_t)       h^{Fi}_t = f^{Fi}(h^{F(i-1)}_t), 3 <= i <= K

Cells without layer norm are PyTorch's own LSTM cell (``torch.lstm_cell``, the kernel of
``nn.LSTMCell``); with layer norm, each gate block and (``ln_cell``) the cell state are normalised as
in the paper, with epsilon ``eps`` and (``bias_before_norm``) the bias ``bias_*`` added before the gate
layer norms. Zoneout keeps the previous value with probability z: a Bernoulli mask in training, the
expectation in evaluation. Used by the parity tests in float64 (``loss_and_grad``, the common
interface of ``multiscale_rnn.reference``) and by ``bench/bench_fs_rnn.py`` in float32.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from ..models.base import Loss
from . import check_covered, tensors, torch_grads, torch_inputs, torch_objective
from . import torch as _torch

STATE = ("h_fast", "c_fast", "h_slow", "c_slow")


def _zoneout(new, old, z: float, train: bool):
    """Zoneout: keep the previous value ``old`` with probability z, by a Bernoulli mask m in training
    (m new + (1 - m) old), by the expectation (1 - z) new + z old in evaluation."""
    if z == 0.0:
        return new
    if train:
        m = _torch().empty_like(new).bernoulli_(1 - z)
        return m * new + (1 - m) * old
    return (1 - z) * new + z * old


def _lstm_written_out(P: Dict[str, Any], sfx: str, inp, h, c, cfg: dict):
    """h~_t and c~_t (B, H) of one LSTM cell written out (layer norm, or records kept):
    a = W_hh h [+ W_ih x]; each gate block k of a layer-normalised (``ln_gates``, after the bias ``bias`` with
    ``bias_before_norm``) or a + b_ih + b_hh; c~_t = f * c + i * g; h~_t = o * tanh(LN(c~_t)) (``ln_cell``) or
    o * tanh(c~_t)."""
    torch = _torch()
    F = torch.nn.functional
    H, eps = h.shape[1], cfg["eps"]
    a = h @ P["weight_hh" + sfx].T
    if inp is not None:
        a = a + inp @ P["weight_ih" + sfx].T
    if cfg["ln_gates"]:
        if cfg["bias_before_norm"]:
            a = a + P["bias" + sfx]
        g, b = P["ln_gates_weight" + sfx], P["ln_gates_bias" + sfx]
        a = torch.cat(
            [
                F.layer_norm(a[:, k * H : (k + 1) * H], (H,), g[k * H : (k + 1) * H], b[k * H : (k + 1) * H], eps)
                for k in range(4)
            ],
            1,
        )
    else:
        a = a + P["bias_ih" + sfx] + P["bias_hh" + sfx]
    i, f = torch.sigmoid(a[:, :H]), torch.sigmoid(a[:, H : 2 * H])
    g, o = torch.tanh(a[:, 2 * H : 3 * H]), torch.sigmoid(a[:, 3 * H :])
    ct = f * c + i * g
    cn = F.layer_norm(ct, (H,), P["ln_cell_weight" + sfx], P["ln_cell_bias" + sfx], eps) if cfg["ln_cell"] else ct
    return o * torch.tanh(cn), ct


def _cell(P: Dict[str, Any], sfx: str, inp, h, c, cfg: dict, keep: Optional[dict]):
    """One step of the cell named by ``sfx`` (``_f1``, ``_s``, ...): (h_t, c_t) after zoneout, from input ``inp``
    (B, E) or None and the state (h, c). Without layer norm and records, PyTorch's own ``torch.lstm_cell``; else
    written out (``_lstm_written_out``). ``keep``: receives h_t and c~_t with gradients retained."""
    torch = _torch()
    if not cfg["ln_gates"] and not cfg["ln_cell"] and keep is None and inp is not None:
        h_new, c_new = torch.lstm_cell(
            inp, (h, c), P["weight_ih" + sfx], P["weight_hh" + sfx], P["bias_ih" + sfx], P["bias_hh" + sfx]
        )
        ct = c_new
    else:
        h_new, ct = _lstm_written_out(P, sfx, inp, h, c, cfg)
    hn = _zoneout(h_new, h, cfg["zoneout_h"], cfg["train"])
    if keep is not None:
        for name, v in (("h" + sfx, hn), ("c" + sfx, ct)):
            v.retain_grad()
            keep.setdefault(name, []).append(v)
    return hn, _zoneout(ct, c, cfg["zoneout_c"], cfg["train"])


def forward(
    P: Dict[str, Any],
    tok,
    state: Optional[dict] = None,
    *,
    fast_cells: int = 2,
    ln_gates: bool = True,
    ln_cell: bool = True,
    zoneout_c: float = 0.0,
    zoneout_h: float = 0.0,
    dropout: float = 0.0,
    train: bool = False,
    eps: float = 1e-5,
    bias_before_norm: bool = False,
    keep: Optional[dict] = None,
):
    """Logits (B, T, V) and the state after the last step (dict ``h_fast, c_fast, h_slow, c_slow``).

    ``P``: parameter tensors by the model's names. ``tok``: (B, T) LongTensor. ``state``: zeros if
    None. ``dropout``: on the embedding, h^{F1} into S, h^S into F2 and the output (training only).
    ``keep``: a dict that receives, per cell (``h_f1``, ``c_f1``, ...), the list over steps of its h_t
    and c~_t with gradients retained (the quantities of ``record_gradients``).
    """
    torch = _torch()
    F = torch.nn.functional
    x = P["embedding.weight"][tok]  # (B, T, E)
    B = tok.shape[0]
    HF, HS = P["weight_hh_f1"].shape[1], P["weight_hh_s"].shape[1]
    zeros = {"h_fast": HF, "c_fast": HF, "h_slow": HS, "c_slow": HS}
    state = dict(state or {})
    hf, cf, hs, cs = (state.get(k, torch.zeros(B, zeros[k], dtype=x.dtype)) for k in STATE)
    cfg = dict(
        ln_gates=ln_gates,
        ln_cell=ln_cell,
        zoneout_c=zoneout_c,
        zoneout_h=zoneout_h,
        train=train,
        eps=eps,
        bias_before_norm=bias_before_norm,
    )
    cell = lambda sfx, inp, h, c: _cell(P, sfx, inp, h, c, cfg, keep)  # noqa: E731
    drop = lambda v: F.dropout(v, dropout, train) if dropout else v  # noqa: E731
    x = drop(x)
    out = []
    for t in range(tok.shape[1]):
        hf, cf = cell("_f1", x[:, t], hf, cf)
        hs, cs = cell("_s", drop(hf), hs, cs)
        hf, cf = cell("_f2", drop(hs), hf, cf)
        for i in range(3, fast_cells + 1):
            hf, cf = cell(f"_f{i}", None, hf, cf)
        out.append(hf)
    y = drop(torch.stack(out, 1))
    logits = y @ P["decoder.weight"].T + P["decoder.bias"]
    return logits, dict(h_fast=hf, c_fast=cf, h_slow=hs, c_slow=cs)


def options(model) -> dict:
    """The ``forward`` keyword arguments that compute what an ``msr.FSRNN`` computes."""
    o = model.options
    return dict(
        fast_cells=int(o["fast_cells"]),
        ln_gates=bool(o["layer_norm_gates"]),
        ln_cell=bool(o["layer_norm_cell"]),
        zoneout_c=float(o["zoneout_c"]),
        zoneout_h=float(o["zoneout_h"]),
        dropout=float(model.config["dropout"]),
        eps=float(o["layer_norm_eps"]),
        bias_before_norm=bool(o["bias_before_norm"]),
    )


def loss_and_grad(model, inputs, targets, state: Optional[dict] = None, mask=None):
    """The reference of ``model.loss_and_grad`` for an ``msr.FSRNN`` with LSTM cells (the common
    interface of ``multiscale_rnn.reference``): the mean cross-entropy (``Loss``, no auxiliary terms),
    the gradients by the model's names and the new state (NumPy), in float64 autograd."""
    torch = _torch()
    check_covered(model)
    cfg = model.config
    if cfg["cell"] != "lstm" or cfg["slow_cell"] != "lstm":
        raise NotImplementedError(f"the FS-RNN reference has LSTM cells only, got {cfg['cell']!r}/{cfg['slow_cell']!r}")
    P = tensors(model, np.float64)
    Pin, tok = torch_inputs(P, inputs)
    st = None if state is None else {k: torch.tensor(np.asarray(v, dtype=np.float64)) for k, v in state.items()}
    logits, new = forward(Pin, tok, st, train=True, **options(model))
    xent = torch_objective(logits, targets, mask)
    xent.backward()
    return Loss(float(xent.detach())), torch_grads(P), {k: v.detach().numpy() for k, v in new.items()}
