"""Gradient reaching back in time: the motivation of the higher order RNN (Soltani & Jiang 2016,
Figures 2-3). In an RNN of order 1 the gradient of the loss at step t reaches h_{t-k} only through
the chain h_{t-k} -> h_{t-k+1} -> ... -> h_t, a product of k Jacobians that shrinks fast with
sigmoid units; a HORNN of order N adds paths that skip up to N - 1 steps, so fewer Jacobians lie
between the loss and an old state, and more gradient reaches it.

For a model and a sequence, :func:`gradient_reach` measures ||dL_t / dh_{t-k}|| against k:

- L_t is the cross-entropy of step t alone (loss weights one on the last step of a window, zero
  elsewhere), t drawn at random positions of the sequence;
- dL_t/dh_{t-k} is the *whole* gradient reaching the state h_{t-k}: through every path of every
  later step (for a HORNN the N paths W_hn h_{t-n}; for a stacked model also through the layer
  above), as the core's state-gradient records give it (``model.record_gradients()``), all lags in
  one backward pass. The mechanism is :func:`multiscale_rnn.analysis.gradient_decay` (Figure 3 of
  the FS-RNN paper), which this module reuses.

Any model whose core records its hidden states ``h_*`` and their gradients works: the HORNN (order
1 with plain pooling is the Elman RNN, the paper's "RNN" baseline), the FS-RNN and the stacked LSTM.
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional

import numpy as np

from .fs_rnn_dynamics import cell_names, gradient_decay

__all__ = ["gradient_reach", "compare_reach", "relative_reach", "reach_length"]


def gradient_reach(
    model, ids, max_lag: int = 20, num_samples: int = 16, warmup: int = 20, layer: Optional[int] = None, seed: int = 0
) -> np.ndarray:
    """||dL_t / dh_{t-k}|| for k = 0..max_lag at ``num_samples`` random positions t of ``ids``.

    Each sample reads ``warmup`` tokens from a zero state (evaluation mode), then the window
    t-max_lag..t with the loss of step t alone; the norm is over the H units of layer ``layer``'s
    state (the top layer by default, the one the output reads). Returns (num_samples, max_lag + 1),
    column k the lag. Models with dropout draw masks in that pass, as in training.
    """
    names = cell_names(model, "h")
    if layer is None:
        name = names[-1]
    else:
        name = f"h_l{int(layer)}"
        if name not in names:
            raise ValueError(f"layer {layer!r}: the model records {names}, not {name!r}")
    return gradient_decay(model, ids, max_lag=max_lag, num_samples=num_samples, warmup=warmup, state="h", seed=seed)[
        name
    ]


def compare_reach(models: Mapping[str, object], ids, **kwargs) -> Dict[str, np.ndarray]:
    """:func:`gradient_reach` of every model (label -> model) on the same positions of ``ids``
    (the same ``seed``): label -> (num_samples, max_lag + 1)."""
    return {label: gradient_reach(m, ids, **kwargs) for label, m in models.items()}


def relative_reach(curve) -> np.ndarray:
    """The mean over samples of ``curve`` ((samples, K+1) or (K+1,)) divided by its value at k = 0
    (the gradient of the step's own state): the fraction of the gradient that reaches k steps back."""
    a = np.asarray(curve, dtype=np.float64)
    if a.ndim == 2:
        a = a.mean(axis=0)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"expected a (samples, K+1) or (K+1,) array, got shape {np.shape(curve)}")
    if not a[0] > 0:
        raise ValueError(f"the gradient at k = 0 is {a[0]}, nothing to compare with")
    return a / a[0]


def reach_length(curve, fraction: float = 0.01) -> int:
    """The first lag k at which the relative reach (:func:`relative_reach`) falls below
    ``fraction``; ``K + 1`` (one past the last lag measured) when it never does."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must be in (0, 1), got {fraction!r}")
    r = relative_reach(curve)
    below = np.nonzero(r < fraction)[0]
    return int(below[0]) if below.size else int(r.size)
