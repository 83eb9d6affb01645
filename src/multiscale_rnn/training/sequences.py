"""Separate sequences (pen strokes) in padded batches, what ``Trainer.fit`` and ``evaluate`` read when
the data are a list of sequences instead of one token stream.

A sequence is a float array (n, 3) of rows (dx, dy, pen bit) (``multiscale_rnn.data.strokes``). The
model reads a start vector (0, 0, 1) and then the rows, and predicts every row:

    inputs  = [(0, 0, 1), row_0, ..., row_{n-2}]      (n, 3)
    targets = [row_0, row_1, ..., row_{n-1}]          (n, 3)

so that a sequence's log-likelihood covers all its n rows. A batch holds B sequences, padded with
zeros to the longest; padded steps have loss weight 0, so they count in neither the loss nor its
gradient, and every batch starts from the zero state (no state passes between two sequences). A
batch longer than ``bptt`` steps is cut into chunks of ``bptt`` steps with the state carried
between them (truncated BPTT within the batch). The order of the sequences is a permutation drawn
per epoch from the trainer's seed, so a resumed run sees the same batches.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Iterator, List, Sequence, Tuple

import numpy as np

__all__ = ["START", "SequenceBatches", "as_sequences", "is_sequences", "padded", "sequences_fingerprint"]

#: What the model reads before a sequence's first row: no offset, the pen lifted.
START = (0.0, 0.0, 1.0)


def is_sequences(data) -> bool:
    """True for a list or tuple of 2-D arrays (separate sequences), or a corpus holding them."""
    if hasattr(data, "train") and isinstance(getattr(data, "train"), (list, tuple)):
        return True
    return isinstance(data, (list, tuple)) and len(data) > 0 and all(np.ndim(s) == 2 for s in data)


def as_sequences(seqs, what: str, width: int = 3) -> List[np.ndarray]:
    """The sequences as float64 arrays (n_i, width), each checked: 2-D, ``width`` columns, at least one
    row, finite, pen bits (column 2) 0 or 1. Errors name the sequence and the row."""
    if not isinstance(seqs, (list, tuple)) or not seqs:
        raise TypeError(f"{what} must be a non-empty list of (steps, {width}) arrays, got {type(seqs).__name__}")
    out = []
    for i, s in enumerate(seqs):
        a = np.asarray(s, dtype=np.float64)
        if a.ndim != 2 or a.shape[1] != width or a.shape[0] < 1:
            raise ValueError(f"{what}[{i}] must have shape (steps >= 1, {width}), got {a.shape}")
        bad = ~np.isfinite(a)
        if bad.any():
            r, c = np.argwhere(bad)[0]
            raise ValueError(f"{what}[{i}] row {r} column {c} is {a[r, c]}, not a finite number")
        pen = a[:, 2]
        wrong = np.flatnonzero((pen != 0.0) & (pen != 1.0))
        if len(wrong):
            raise ValueError(f"{what}[{i}] row {wrong[0]}: pen bit {pen[wrong[0]]} must be 0 or 1")
        out.append(a)
    return out


def padded(seqs: Sequence[np.ndarray], dtype=np.float64) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(inputs (B, L, 3), targets (B, L, 3), weights (B, L))`` of sequences padded to the longest, L:
    inputs start with :data:`START`, weights are 1 on every real step and 0 on padding."""
    B, L = len(seqs), max(len(s) for s in seqs)
    x = np.zeros((B, L, 3), dtype=dtype)  # (B, L, 3)
    y = np.zeros((B, L, 3), dtype=dtype)  # (B, L, 3)
    w = np.zeros((B, L))  # (B, L)
    for b, s in enumerate(seqs):
        n = len(s)
        x[b, 0] = START
        x[b, 1:n] = s[: n - 1]
        y[b, :n] = s
        w[b, :n] = 1.0
    return x, y, w


def sequences_fingerprint(seqs: Sequence[np.ndarray]) -> dict:
    """Row count and CRC-32 of the sequences (their float64 rows and lengths), to recognise them on resume."""
    crc = 0
    for s in seqs:
        a = np.ascontiguousarray(s, dtype=np.float64)
        crc = zlib.crc32(np.int64(len(a)).tobytes(), crc)
        crc = zlib.crc32(a.tobytes(), crc)
    return {"tokens": int(sum(len(s) for s in seqs)), "crc32": int(crc)}


@dataclass
class Chunk:
    """One optimiser step's data: inputs (B, T, 3), targets (B, T, 3), weights (B, T), and whether it
    starts a batch (the state is then reset to zeros first)."""

    x: np.ndarray
    y: np.ndarray
    w: np.ndarray
    first: bool


class SequenceBatches:
    """The chunks of an epoch over ``seqs`` in batches of ``batch_size`` sequences (the last batch may
    hold fewer), each batch cut into chunks of at most ``bptt`` steps; the order drawn from ``seed``
    and the epoch."""

    def __init__(self, seqs: Sequence[np.ndarray], batch_size: int, bptt: int, seed: int, dtype=np.float64):
        self.seqs, self.batch_size, self.bptt, self.seed, self.dtype = list(seqs), batch_size, bptt, seed, dtype

    def order(self, epoch: int) -> np.ndarray:
        """The permutation of the sequences in ``epoch`` (0-based)."""
        return np.random.default_rng([self.seed, epoch]).permutation(len(self.seqs))

    def batches(self, epoch: int) -> List[np.ndarray]:
        """The sequence indices of each batch of ``epoch``."""
        order, B = self.order(epoch), self.batch_size
        return [order[i : i + B] for i in range(0, len(order), B)]

    def _chunk_counts(self, epoch: int) -> List[int]:
        return [-(-max(len(self.seqs[i]) for i in idx) // self.bptt) for idx in self.batches(epoch)]

    def num_chunks(self, epoch: int) -> int:
        """Chunks (optimiser steps) in ``epoch``."""
        return sum(self._chunk_counts(epoch))

    def chunks(self, epoch: int, start: int = 0) -> Iterator[Tuple[int, Chunk]]:
        """``(k, chunk)`` for chunks ``start``, ``start + 1``, ... of ``epoch``."""
        k = 0
        for idx in self.batches(epoch):
            x, y, w = padded([self.seqs[i] for i in idx], self.dtype)
            for t0 in range(0, x.shape[1], self.bptt):
                if k >= start:
                    sl = slice(t0, t0 + self.bptt)
                    yield k, Chunk(x[:, sl], y[:, sl], w[:, sl], t0 == 0)
                k += 1


def evaluate_sequences(model, seqs, batch_size: int = 16) -> dict:
    """Evaluation-mode figures of ``model`` on separate sequences: each read from the zero state in
    batches of ``batch_size`` (padding not scored). Returns ``loss`` (nats per step), ``bpc`` (bits per
    step), ``nats_per_sequence`` (the mean over sequences of each one's summed -log p),
    ``log_likelihood`` (its negative: the HM-LSTM paper's Table 3 figure), ``perplexity`` (None: not
    defined for densities), ``tokens`` (steps scored) and ``sequences``."""
    from .._checks import positive_int

    positive_int(batch_size, "batch_size")
    seqs = as_sequences(seqs, "evaluation sequences")
    total, per_seq = 0.0, []
    for i in range(0, len(seqs), int(batch_size)):
        part = seqs[i : i + int(batch_size)]
        x, y, w = padded(part, model.dtype)
        _, nll, _ = model.loss(x, y, None, per_token=True)  # (B, L)
        sums = (nll * w).sum(axis=1)
        per_seq.extend(sums.tolist())
        total += float(sums.sum())
    steps = int(sum(len(s) for s in seqs))
    loss = total / steps
    nps = float(np.mean(per_seq))
    return {
        "loss": loss,
        "bpc": loss / np.log(2.0),
        "perplexity": None,
        "nats_per_sequence": nps,
        "log_likelihood": -nps,
        "tokens": steps,
        "sequences": len(seqs),
    }


def sample_strokes(
    model,
    steps: int = 64,
    *,
    temperature: float = 1.0,
    bias: float = 0.0,
    num_samples: int = 1,
    seed: int = 0,
) -> List[np.ndarray]:
    """Draw ``num_samples`` sequences of ``steps`` rows (dx, dy, pen bit) from a model with the mixture
    density head, each started from the zero state and :data:`START`; rows are in the training data's
    normalised units (``corpus.points(row)`` draws them). ``temperature`` tau scales pi^ and e^ by
    1 / tau and sigma by sqrt(tau); ``bias`` b is Graves' (2013, section 5.4): sigma = exp(sigma^ - b),
    pi = softmax(pi^ (1 + b)), cleaner and less varied samples as b grows. Seeded by ``seed``."""
    from .._checks import non_negative_int, positive_int
    from .._native import core as _core

    if model.config.get("head") != "mdn":
        raise TypeError(
            f"sample_strokes needs a model with head='mdn'; this one's head is {model.config.get('head')!r}"
        )
    positive_int(steps, "steps")
    positive_int(num_samples, "num_samples")
    non_negative_int(seed, "seed")
    if not (np.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a positive number, got {temperature!r}")
    if not (np.isfinite(bias) and bias >= 0):
        raise ValueError(f"bias must be a number >= 0, got {bias!r}")
    M, S = int(model.config["mixtures"]), int(num_samples)
    rng = np.random.default_rng(seed)
    out = np.zeros((S, steps, 3))  # (S, steps, 3)
    x = np.tile(np.asarray(START, dtype=model.dtype), (S, 1, 1))  # (S, 1, 3)
    model.reset_state(S)
    for t in range(steps):
        z, _ = model.forward(x, "keep")  # (S, 1, 6M + 1)
        d = _core.mixture_columns(np.asarray(z[:, 0], dtype=np.float64), M, float(temperature), float(bias))
        j = np.array([rng.choice(M, p=p / p.sum()) for p in d["pi"]])  # (S,) components
        r = np.arange(S)
        s1, s2, rho = d["sigma1"][r, j], d["sigma2"][r, j], d["rho"][r, j]
        u = rng.standard_normal((S, 2))
        out[:, t, 0] = d["mu1"][r, j] + s1 * u[:, 0]
        out[:, t, 1] = d["mu2"][r, j] + s2 * (rho * u[:, 0] + np.sqrt(1.0 - rho * rho) * u[:, 1])
        out[:, t, 2] = (rng.random(S) < d["e"]).astype(float)
        x = out[:, t : t + 1].astype(model.dtype)
    return [out[i] for i in range(S)]
