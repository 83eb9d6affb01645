"""The Clockwork RNN (Koutník et al. 2014) written the plain way in PyTorch: every module computed
at every step, then masked (idle modules keep h_{t-1}), W_H multiplied by its block-upper-triangular
mask; autograd for the gradients. Same parameter and state names as
:class:`multiscale_rnn.ClockworkRNN`.
"""

from __future__ import annotations

from typing import Dict, Optional

import numpy as np

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


def loss_and_grad(model, tokens, targets, state: Optional[Dict[str, np.ndarray]] = None):
    """Mean cross-entropy, gradients (dict name -> array) and final state of ``model`` (a
    :class:`multiscale_rnn.ClockworkRNN`, linear head, token inputs, no dropout), in float64 autograd."""
    torch = _torch()
    cfg = model.config
    if cfg.get("head", "linear") != "linear" or cfg.get("input_size") is not None or cfg.get("dropout", 0.0):
        raise ValueError("the Clockwork RNN reference covers token inputs, the linear head and no dropout")
    P = {k: torch.tensor(np.array(v, dtype=np.float64), requires_grad=True) for k, v in model.parameters().items()}
    tok = np.asarray(tokens)
    B, H = tok.shape[0], cfg["hidden_sizes"][0]
    if state is None:
        state = {"h_l0": np.zeros((B, H)), "clock_l0": np.zeros((B, 1))}
    clock = int(np.asarray(state["clock_l0"])[0, 0])
    x = P["embedding.weight"][torch.as_tensor(tok, dtype=torch.long)]
    y, h = clockwork_layer(
        x, torch.tensor(np.asarray(state["h_l0"], dtype=np.float64)), clock, P, cfg["modules"], cfg["base"]
    )
    logits = y @ P["decoder.weight"].T + P["decoder.bias"]
    loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), torch.as_tensor(np.asarray(targets), dtype=torch.long).reshape(-1)
    )
    loss.backward()
    grads = {k: (p.grad.numpy() if p.grad is not None else np.zeros(p.shape)) for k, p in P.items()}
    final = {"h_l0": h.detach().numpy(), "clock_l0": np.full((B, 1), float(clock + tok.shape[1]))}
    return float(loss.detach()), grads, final
