"""Network dynamics of Section 4.2 of the FS-RNN paper (Mujika et al. 2017), for any model whose
core records its cells' states (``FSRNN``, ``StackedLSTM``, ``SequentialLSTM``: ``c_f1``, ``c_s``,
``c_l0``, ...; ``h_*`` for GRU cells).

Figure 3, long-term effect of a cell state on the loss (after Krueger et al.):
    gradient_decay(model, ids)          -> {cell: (n, K+1)}  ||dL_t / dc_{t-k}||, k = 0..K
Figure 4, rate of change of the cell states:
    state_change(model, ids)            -> {cell: (steps,)}  (1/H) sum_i (c_{t,i} - c_{t-1,i})^2
Figure 5, bits per character at each position within words:
    per_token_loss(model, ids)          -> (n,)  -log p(ids[i+1] | ids[..i]) in nats
    word_positions(text)                -> (len(text),)  1, 2, ... inside words, 0 elsewhere
    bpc_by_position(losses, positions)  -> (P,)  mean bits per character at positions 1..P
    relative_loss(bpc, reference_bpc)   -> (P,)  bpc / reference_bpc

c_{t-k} is the state a cell holds after step t-k; L_t is the loss of the prediction made at step t.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np

from .._checks import positive_int

__all__ = [
    "gradient_decay",
    "state_change",
    "per_token_loss",
    "word_positions",
    "bpc_by_position",
    "relative_loss",
    "cell_names",
    "by_step",
]

_LN2 = np.log(2.0)


def _ids(ids, what: str = "ids") -> np.ndarray:
    a = np.asarray(ids)
    if a.ndim != 1:
        raise ValueError(f"{what} must be a 1-D array of token ids, got shape {a.shape}")
    if a.size and (a.dtype == bool or not np.issubdtype(a.dtype, np.integer)):
        raise TypeError(f"{what} must be integers, got dtype {a.dtype}")
    return a.astype(np.int32)


def by_step(arrays: Dict[str, np.ndarray], batch_size: int) -> Dict[str, np.ndarray]:
    """``model.records()`` or ``model.record_gradients()`` (name -> (rows, B*T), column t*B + b)
    as name -> (B, T, rows)."""
    B = int(batch_size)
    out = {}
    for k, v in arrays.items():
        rows, n = v.shape
        if n % B:
            raise ValueError(f"{k} has {n} columns, not a multiple of the batch size {B}")
        out[k] = v.T.reshape(n // B, B, rows).transpose(1, 0, 2)
    return out


def cell_names(model, state: Optional[str] = None) -> Sequence[str]:
    """Names of the recorded cell states of ``model``: the ``c_*`` entries when it has LSTM
    cells (``state="c"``), else (or with ``state="h"``) the ``h_*`` entries."""
    model.forward(np.zeros((1, 1), dtype=np.int32))
    names = list(model.records())
    if not names:
        raise ValueError(
            f"{type(model).__name__} records no cell states; the dynamics analyses need a model "
            "such as FSRNN, StackedLSTM or SequentialLSTM"
        )
    if state is None:
        state = "c" if any(n.startswith("c_") for n in names) else "h"
    if state not in ("c", "h"):
        raise ValueError(f"state must be 'c' or 'h', got {state!r}")
    picked = [n for n in names if n.startswith(state + "_")]
    if not picked:
        raise ValueError(f"the model records no '{state}_*' states; it records {names}")
    return picked


def gradient_decay(
    model, ids, max_lag: int = 100, num_samples: int = 32, warmup: int = 100, state: Optional[str] = None, seed: int = 0
) -> Dict[str, np.ndarray]:
    """||dL_t / dc_{t-k}|| for k = 0..max_lag at ``num_samples`` random positions t of ``ids``.

    Each sample reads ``warmup`` tokens from a zero state (evaluation mode), then the window
    t-max_lag..t in training mode with the loss of step t alone (``loss_and_grad(weights=...)``);
    the gradients reaching every recorded state (``record_gradients``) give all lags in one
    backward pass. Models with dropout or zoneout draw masks in that pass, as in training; the
    paper's Section 4.2 models have neither.

    Returns {cell name: (num_samples, max_lag + 1)}, column k the norm over the cell's units.
    """
    ids = _ids(ids)
    max_lag = int(max_lag)
    if max_lag < 0:
        raise ValueError(f"max_lag must be >= 0, got {max_lag}")
    n = positive_int(num_samples, "num_samples")
    warmup = int(warmup)
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    names = cell_names(model, state)
    W = max_lag + 1
    first, last = warmup + max_lag, len(ids) - 2  # t needs ids[t + 1] as its target
    if last < first:
        raise ValueError(
            f"{len(ids)} tokens are too few for warmup={warmup} and max_lag={max_lag}: need at least {first + 2}"
        )
    t = np.sort(np.random.default_rng(seed).integers(first, last + 1, n))
    start = t - max_lag  # first step of the window
    window = np.stack([ids[s : s + W] for s in start])  # (n, W)
    target = np.stack([ids[s + 1 : s + W + 1] for s in start])
    state0 = None
    if warmup > 0:
        pre = np.stack([ids[s - warmup : s] for s in start])
        pre_t = np.stack([ids[s - warmup + 1 : s + 1] for s in start])
        _, state0 = model.loss(pre, pre_t)
    weights = np.zeros(window.shape)
    weights[:, -1] = 1.0
    model.loss_and_grad(window, target, state0, weights=weights)
    grads = by_step(model.record_gradients(), n)  # (n, W, H) each
    model.zero_grad()
    # The loss is the mean of the n last-step losses, so each stream's gradient is 1/n of its own.
    return {name: n * np.linalg.norm(grads[name][:, ::-1], axis=2) for name in names}


def state_change(
    model, ids, batch_size: int = 16, bptt: int = 100, state: Optional[str] = None, skip: int = 0
) -> Dict[str, np.ndarray]:
    """Rate of change of every recorded cell state along ``ids`` (evaluation mode):
    (1/H) sum_i (c_{t,i} - c_{t-1,i})^2 for every step t >= 1 of ``batch_size`` contiguous streams.

    ``skip`` leaves out the first steps of each stream (the settling after the zero state).
    Returns {cell name: (streams * kept steps,)}; its mean and standard deviation are Figure 4's
    bar and error bar.
    """
    from ..data import batchify, chunks

    ids = _ids(ids)
    B = positive_int(batch_size, "batch_size")
    bptt = positive_int(bptt, "bptt")
    names = cell_names(model, state)
    streams = batchify(ids, B)
    prev = None
    out: Dict[str, list] = {k: [] for k in names}
    state_ = None
    for x, y in chunks(streams, bptt):
        _, state_ = model.loss(x, y, state_)
        rec = by_step(model.records(), B)
        for k in names:
            c = rec[k]  # (B, T, H)
            full = c if prev is None else np.concatenate([prev[k], c], axis=1)
            out[k].append(np.mean(np.diff(full, axis=1) ** 2, axis=2))  # (B, T or T-1)
        prev = {k: rec[k][:, -1:] for k in names}
    result = {}
    for k in names:
        rate = np.concatenate(out[k], axis=1)  # (B, steps - 1)
        result[k] = rate[:, max(0, int(skip) - 1) :].ravel()
    return result


def per_token_loss(model, ids, batch_size: int = 16, bptt: int = 100) -> np.ndarray:
    """-log p(ids[i+1] | ids[..i]) in nats for every i that ``batch_size`` contiguous streams
    cover (evaluation mode, state carried along each stream from zero). Returns an (n,) array,
    n = B * (len(ids) // B) - 1, aligned with the targets ids[1:n+1]. Stream b reads
    ids[b*L : (b+1)*L] (L = len(ids) // B), so the first target of each later stream,
    ids[b*L], is predicted by no stream: its entry is NaN."""
    from ..data import batchify, chunks

    ids = _ids(ids)
    B = positive_int(batch_size, "batch_size")
    bptt = positive_int(bptt, "bptt")
    streams = batchify(ids, B)
    L = streams.shape[1]
    losses = np.full((B, L), np.nan)
    pos = 0
    state_ = None
    for x, y in chunks(streams, bptt):
        _, nll, state_ = model.loss(x, y, state_, per_token=True)
        losses[:, pos : pos + x.shape[1]] = nll
        pos += x.shape[1]
    return losses.ravel()[:-1]


def word_positions(text, space: str = " ", min_length: int = 2) -> np.ndarray:
    """Position of every character within its word: 1 for the first letter, 2 for the second, ...
    and 0 outside words. A word is a run of lower-case letters a-z of at least ``min_length``
    between two ``space`` characters (the paper's Figure 5 rule). ``text``: a str, or any
    sequence of one-character strings (e.g. ``vocab.decode`` per id)."""
    chars = list(text)
    n = len(chars)
    pos = np.zeros(n, dtype=np.int64)
    i = 0
    while i < n:
        if chars[i] == space:
            j = i + 1
            while j < n and len(chars[j]) == 1 and "a" <= chars[j] <= "z":
                j += 1
            if j < n and chars[j] == space and j - (i + 1) >= min_length:
                pos[i + 1 : j] = np.arange(1, j - i)
            i = j
        else:
            i += 1
    return pos


def bpc_by_position(losses, positions, max_position: int = 10) -> np.ndarray:
    """Mean bits per character at each position 1..max_position within words.

    ``losses`` (n,) in nats (``per_token_loss``: losses[i] predicts target i + 1) and
    ``positions`` (n,) the word position of each loss's target (``word_positions(text)[1:n+1]``).
    NaN losses are left out; positions no word reaches give NaN."""
    losses = np.asarray(losses, dtype=np.float64)
    positions = np.asarray(positions)
    if losses.shape != positions.shape or losses.ndim != 1:
        raise ValueError(f"losses {losses.shape} and positions {positions.shape} must be 1-D of the same length")
    P = positive_int(max_position, "max_position")
    out = np.full(P, np.nan)
    ok = np.isfinite(losses)
    for p in range(1, P + 1):
        sel = ok & (positions == p)
        if sel.any():
            out[p - 1] = losses[sel].mean() / _LN2
    return out


def relative_loss(bpc, reference_bpc) -> np.ndarray:
    """``bpc / reference_bpc`` elementwise (Figure 5, right: relative to the stacked-LSTM)."""
    a, b = np.asarray(bpc, dtype=np.float64), np.asarray(reference_bpc, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} and {b.shape}")
    return a / b
