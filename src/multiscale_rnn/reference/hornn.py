"""The HORNN (Soltani & Jiang 2016) written the natural way in PyTorch: a loop over steps with N
separate products W_hn h_{t-n} per step and layer, autograd for the gradients. Same parameter and
state names as :class:`multiscale_rnn.HORNN` (``weight_hh_l0`` (N*H, H) stacks [W_h1; ...; W_hN]).

``loss_and_grad(model, inputs, targets, state, mask)`` checks a model against it (float64; the common
interface of ``multiscale_rnn.reference``);
:class:`TorchHORNN` is the same network as a ``torch.nn.Module``, for benchmarks.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from ..models.base import Loss
from . import check_covered, tensors, torch_grads, torch_inputs, torch_objective
from . import torch as _torch

__all__ = ["hornn_layer", "TorchHORNN", "loss_and_grad", "state_gradients"]


def hornn_layer(
    x,
    lags: List,
    P: Dict,
    suffix: str,
    order: int,
    pooling: str,
    alpha: float = 0.6,
    activation: str = "sigmoid",
    keep: Optional[List] = None,
):
    """One HORNN layer over a sequence. ``x`` (B, T, E); ``lags[n-1]`` (B, H) is h_{-n}; ``P`` maps
    parameter names to tensors (``bias``/``gate_bias`` may be absent). Returns (y (B, T, H), the
    lags after the last step in the same order). ``keep``, a list, receives every step's h_t
    (B, H), the tensors later steps read (for gradients with respect to the states)."""
    torch = _torch()
    f = {"sigmoid": torch.sigmoid, "tanh": torch.tanh, "relu": torch.relu}[activation]
    W_in, W_h = P["weight_ih" + suffix], P["weight_hh" + suffix]
    H = W_in.shape[0]
    b = P.get("bias" + suffix)
    hist = list(reversed(lags))  # hist[-n] is h_{t-n}
    inputs = x @ W_in.T + (b if b is not None else 0.0)  # (B, T, H)
    if pooling == "gated":
        Wg_in, Wg_h, bg = P["gate_weight_ih" + suffix], P["gate_weight_hh" + suffix], P.get("gate_bias" + suffix)
        gate_in = x @ Wg_in.T + (bg if bg is not None else 0.0)  # (B, T, N*H)
    ys = []
    for t in range(x.shape[1]):
        paths = [hist[-n] @ W_h[(n - 1) * H : n * H].T for n in range(1, order + 1)]  # p_{t,n}
        if pooling == "plain":
            pooled = sum(paths)
        elif pooling == "fofe":
            pooled = sum(alpha**n * p for n, p in zip(range(1, order + 1), paths))
        elif pooling == "max":
            pooled = torch.stack(paths).max(dim=0).values  # ties: torch's choice (the tests avoid them)
        elif pooling == "gated":
            pooled = 0.0
            for n, p in zip(range(1, order + 1), paths):
                sl = slice((n - 1) * H, n * H)
                r = torch.sigmoid(gate_in[:, t, sl] + hist[-n] @ Wg_h[sl].T)
                pooled = pooled + r * p
        else:
            raise ValueError(f"unknown pooling {pooling!r}")
        h = f(inputs[:, t] + pooled)
        if keep is not None:
            keep.append(h)
        hist.append(h)
        ys.append(h)
    return torch.stack(ys, dim=1), [hist[-n] for n in range(1, order + 1)]


def _make_module():
    torch = _torch()

    class TorchHORNN(torch.nn.Module):
        """Embedding -> L HORNN layers -> linear decoder, parameters named as the fast model's."""

        def __init__(
            self,
            vocab_size,
            embed_size,
            hidden_sizes,
            order=3,
            pooling="plain",
            alpha=0.6,
            activation="sigmoid",
            bias=True,
            std=0.1,
        ):
            super().__init__()
            self.cfg = dict(order=order, pooling=pooling, alpha=alpha, activation=activation)
            self.hidden_sizes = tuple(hidden_sizes)
            self.embedding = torch.nn.Embedding(vocab_size, embed_size)
            self.layers = torch.nn.ParameterDict()
            e = embed_size
            for l, h in enumerate(self.hidden_sizes):
                shapes = {"weight_ih": (h, e), "weight_hh": (order * h, h)}
                if bias:
                    shapes["bias"] = (h,)
                if pooling == "gated":
                    shapes.update(gate_weight_ih=(order * h, e), gate_weight_hh=(order * h, h))
                    if bias:
                        shapes["gate_bias"] = (order * h,)
                for k, s in shapes.items():
                    self.layers[f"{k}_l{l}"] = torch.nn.Parameter(torch.randn(*s) * std)
                e = h
            self.decoder = torch.nn.Linear(e, vocab_size)

        def initial_state(self, batch):
            return {
                f"h_l{l}_lag{n}": torch.zeros(batch, h)
                for l, h in enumerate(self.hidden_sizes)
                for n in range(1, self.cfg["order"] + 1)
            }

        def hidden(self, tokens, state):
            """The top layer's states (B, T, H) and the new state."""
            y = self.embedding(tokens)
            new = {}
            for l in range(len(self.hidden_sizes)):
                lags = [state[f"h_l{l}_lag{n}"] for n in range(1, self.cfg["order"] + 1)]
                y, lags = hornn_layer(y, lags, self.layers, f"_l{l}", **self.cfg)
                new.update({f"h_l{l}_lag{n}": v for n, v in enumerate(lags, 1)})
            return y, new

        def forward(self, tokens, state):
            y, new = self.hidden(tokens, state)
            return self.decoder(y), new

    return TorchHORNN


def TorchHORNN(*args, **kwargs):
    """A ``torch.nn.Module`` HORNN language model (see ``_make_module``); the class is built on first
    use so that importing this module does not import torch."""
    global _CLASS
    if _CLASS is None:
        _CLASS = _make_module()
    return _CLASS(*args, **kwargs)


_CLASS = None


def _forward(model, inputs, targets, state, mask):
    """float64 autograd run of ``model``'s network: (loss, parameter tensors, final state, the
    h_t tensors of every layer (lists of (B, H) per step))."""
    torch = _torch()
    check_covered(model)
    cfg = model.config
    P = tensors(model, np.float64)
    Pin, tok = torch_inputs(P, inputs)
    B = tok.shape[0]
    order, H = cfg["order"], cfg["hidden_sizes"]
    if state is None:
        state = {f"h_l{l}_lag{n}": np.zeros((B, h)) for l, h in enumerate(H) for n in range(1, order + 1)}
    y = Pin["embedding.weight"][tok]
    final, states = {}, []
    for l in range(len(H)):
        lags = [torch.tensor(np.asarray(state[f"h_l{l}_lag{n}"], dtype=np.float64)) for n in range(1, order + 1)]
        states.append([])
        y, lags = hornn_layer(
            y, lags, P, f"_l{l}", order, cfg["pooling"], cfg.get("alpha", 0.6), cfg["activation"], keep=states[-1]
        )
        final.update({f"h_l{l}_lag{n}": v.detach().numpy() for n, v in enumerate(lags, 1)})
    logits = y @ P["decoder.weight"].T + P["decoder.bias"]
    return torch_objective(logits, targets, mask), P, final, states


def loss_and_grad(model, inputs, targets, state: Optional[Dict[str, np.ndarray]] = None, mask=None):
    """Mean cross-entropy (``Loss``, no auxiliary terms), gradients (dict name -> array) and final
    state of ``model`` (a :class:`multiscale_rnn.HORNN` with the linear head), computed in float64
    PyTorch autograd from its parameters (the common interface of ``multiscale_rnn.reference``).
    ``mask`` (B, T): the weighted mean, as the model's ``weights``."""
    loss, P, final, _ = _forward(model, inputs, targets, state, mask)
    loss.backward()
    return Loss(float(loss.detach())), torch_grads(P), final


def state_gradients(
    model, tokens, targets, state: Optional[Dict[str, np.ndarray]] = None, weights=None
) -> Dict[str, np.ndarray]:
    """dL/dh_t of every layer and step by autograd: {"h_l0": (B, T, H), ...}, the whole gradient
    reaching each state (what ``model.record_gradients()`` holds, laid out by stream and step)."""
    torch = _torch()
    loss, _, _, states = _forward(model, tokens, targets, state, weights)
    flat = [h for layer in states for h in layer]
    grads = torch.autograd.grad(loss, flat)
    out, i = {}, 0
    for l, layer in enumerate(states):
        out[f"h_l{l}"] = torch.stack(grads[i : i + len(layer)], dim=1).numpy()
        i += len(layer)
    return out
