"""The Clockwork RNN (Koutník et al. 2014) written the plain way in PyTorch: every module computed
at every step, then masked (idle modules keep h_{t-1}), W_H multiplied by its block-upper-triangular
mask; autograd for the gradients. Same parameter and state names as
:class:`multiscale_rnn.ClockworkRNN`.
"""

from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from ..models.base import Loss
from . import check_covered, tensors, torch_grads, torch_inputs, torch_objective
from . import torch as _torch

__all__ = ["clockwork_layer", "loss_and_grad"]


def clockwork_layer(x, h, clock: int, P: Dict, modules: int, base: int):
    """The layer over a sequence. ``x`` (B, T, E), ``h`` (B, H) the state before, ``clock`` the t of
    the first step. Returns (y (B, T, H), h after the last step)."""
    torch = _torch()
    W_ih, W_hh = P["weight_ih_l0"], P["weight_hh_l0"]
    H = W_ih.shape[0]
    k = H // modules
    module = torch.arange(H) // k  # module of each unit
    mask = (module[None, :] >= module[:, None]).to(W_hh.dtype)  # block upper triangular
    W = W_hh * mask
    ys = []
    for t in range(x.shape[1]):
        runs = torch.tensor([(clock + t) % base ** int(i) == 0 for i in module])  # (H,)
        a = x[:, t] @ W_ih.T + P["bias_ih_l0"] + h @ W.T + P["bias_hh_l0"]
        h = torch.where(runs[None, :], torch.tanh(a), h)
        ys.append(h)
    return torch.stack(ys, dim=1), h


def loss_and_grad(model, inputs, targets, state: Optional[Dict[str, np.ndarray]] = None, mask=None):
    """Mean cross-entropy (``Loss``, no auxiliary terms), gradients (dict name -> array) and final
    state of ``model`` (a :class:`multiscale_rnn.ClockworkRNN` with the linear head), in float64
    autograd (the common interface of ``multiscale_rnn.reference``)."""
    torch = _torch()
    check_covered(model)
    cfg = model.config
    P = tensors(model, np.float64)
    Pin, tok = torch_inputs(P, inputs)
    B, T = tok.shape
    H = cfg["hidden_sizes"][0]
    if state is None:
        state = {"h_l0": np.zeros((B, H)), "clock_l0": np.zeros((B, 1))}
    clock = int(np.asarray(state["clock_l0"])[0, 0])
    x = Pin["embedding.weight"][tok]
    y, h = clockwork_layer(
        x, torch.tensor(np.asarray(state["h_l0"], dtype=np.float64)), clock, P, cfg["modules"], cfg["base"]
    )
    logits = y @ P["decoder.weight"].T + P["decoder.bias"]
    loss = torch_objective(logits, targets, mask)
    loss.backward()
    final = {"h_l0": h.detach().numpy(), "clock_l0": np.full((B, 1), float(clock + T))}
    return Loss(float(loss.detach())), torch_grads(P), final
