"""Reference class-based softmax head (Mikolov et al. 2011), the natural way in PyTorch:
    log P(w | y) = log softmax(U y + u)[c(w)] + log softmax over w' in c(w) of (W_w' y + b_w')
with the fast head's names: class_decoder.weight U (C, I), class_decoder.bias u (C),
decoder.weight W (V, I), decoder.bias b (V); classes are consecutive ids of the given sizes."""

from __future__ import annotations

from . import torch as _torch

__all__ = ["log_probs", "nll"]


def log_probs(y, params, sizes):
    """log P(w | y_n) for every w: (N, V) from y (N, I); ``params`` name -> tensor."""
    torch = _torch()
    U, u = params["class_decoder.weight"], params["class_decoder.bias"]
    W, b = params["decoder.weight"], params["decoder.bias"]
    log_pc = torch.log_softmax(y @ U.T + u, dim=1)  # (N, C)
    parts, start = [], 0
    for c, n in enumerate(sizes):
        zw = y @ W[start : start + n].T + b[start : start + n]  # (N, n_c)
        parts.append(log_pc[:, c : c + 1] + torch.log_softmax(zw, dim=1))
        start += n
    return torch.cat(parts, dim=1)


def nll(y, params, sizes, targets):
    """-log P(targets_n | y_n), (N,), for y (N, I) and targets (N,) (a LongTensor)."""
    lp = log_probs(y, params, sizes)
    return -lp.gather(1, targets.view(-1, 1)).view(-1)
