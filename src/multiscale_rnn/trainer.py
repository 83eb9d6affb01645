"""Training by truncated back-propagation through time (TBPTT), evaluation and sampling.

The training text (1-D token ids) is cut into B contiguous streams (``data.batchify``); each epoch
walks them T = ``bptt`` steps at a time (``data.chunks``). The recurrent state after one chunk is
the starting state of the next (gradients stop at chunk boundaries); it is zero at the start of
every epoch. One optimiser step per chunk::

    zero_grad; loss = mean over B*T targets of -ln p(target); backward (accumulates into the flat
    gradient buffer); check loss and gradient are finite; clip (norm, then value); optimiser step

Reported figures: ``loss`` in nats per token, ``bpc`` = loss / ln 2 in bits per token (bits per
character on character corpora, bits per word on word corpora), ``perplexity`` = exp(loss).
"""

from __future__ import annotations

import copy
import math
import re
import sys
import time
import zlib
from pathlib import Path
from typing import Callable, Dict, List, Optional, Union

import numpy as np

from ._native import core as _core
from .distributed import data_parallel
from .optim import Adam, Optimizer
from .storage import History, check_writable, history_path

__all__ = ["Trainer", "History", "evaluate", "sample", "history_path"]

LN2 = math.log(2.0)


def _bits(loss: float) -> float:
    return loss / LN2


BITS_LABELS = {"char": "bpc", "word": "bpw", "bit": "bits/bit", "symbol": "bits/symbol"}


def bits_label(unit: str) -> str:
    """The name of the bits-per-token figure for tokens of ``unit`` (a key of ``BITS_LABELS``)."""
    return BITS_LABELS[unit]


def _perplexity(loss: float) -> float:
    try:
        return math.exp(loss)
    except OverflowError:
        return math.inf


def _data():
    from . import data

    return data


# ---- evaluation ----------------------------------------------------------------------------------
def evaluate(model, ids, batch_size: int = 16, bptt: int = 100, *, distributed=None) -> Dict[str, float]:
    """Evaluation-mode loss of ``model`` on 1-D token ids.

    The ids are cut into ``B = min(batch_size, len(ids) // 2)`` contiguous streams, each read from
    a zero state with the state carried from chunk to chunk (so the result does not depend on
    ``bptt``, which only bounds the memory used); the ``len(ids) % B`` tokens at the end are left out. Returns
    ``loss`` (nats per token), ``bpc``
    (bits per token), ``perplexity``, ``tokens`` (targets scored) and ``streams`` (B). The model's
    carried state is left at the end of the streams.

    ``distributed`` (True, an mpi4py communicator or a ``distributed.DataParallel``; collective):
    each rank reads its share of the B streams and the sums are added over the ranks, so every rank
    returns the figures of all B streams (equal to one process's up to the order of the sums).
    """
    data = _data()
    if isinstance(ids, data.Corpus):
        raise TypeError(
            f"evaluate takes token ids, got the corpus {ids.name!r}: pass one of its splits (corpus.test, corpus.valid)"
        )
    hint = data.batching.text_given_for_ids(ids, "evaluation ids", use="a split: msr.evaluate(model, corpus.test)")
    if hint is not None:
        raise TypeError(hint)
    ids = np.asarray(ids)
    if ids.ndim != 1:
        raise ValueError(f"evaluation ids must be 1-D, got shape {ids.shape}")
    if isinstance(batch_size, bool) or int(batch_size) != batch_size or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if isinstance(bptt, bool) or int(bptt) != bptt or bptt < 1:
        raise ValueError(f"bptt must be a positive integer, got {bptt!r}")
    if len(ids) < 2:
        raise ValueError(f"evaluation needs at least 2 tokens (an input and its target), got {len(ids)}")
    B = min(int(batch_size), len(ids) // 2)
    streams = data.batchify(ids, B)
    if ids.size and (streams.min() < 0 or streams.max() >= model.vocab_size):
        bad = int(np.flatnonzero((ids < 0) | (ids >= model.vocab_size))[0])
        raise IndexError(
            f"token id {int(ids[bad])} at position {bad} is outside the model's vocabulary [0, {model.vocab_size})"
        )
    dist = data_parallel(distributed)
    if dist is not None:
        streams = streams[dist.shard(B)]  # may be empty when B < ranks
    total, count = 0.0, 0
    if len(streams):
        model.reset_state(len(streams))
        for x, y in data.chunks(streams, int(bptt)):
            n = x.size
            total += model.loss(x, y, "keep")[0] * n
            count += n
    if dist is not None:
        total, count = dist.sum([total, count])
        count = int(count)
    loss = total / count
    return {"loss": loss, "bpc": _bits(loss), "perplexity": _perplexity(loss), "tokens": count, "streams": B}


# ---- sampling ------------------------------------------------------------------------------------
def _start_id(vocab) -> int:
    stoi = getattr(vocab, "stoi", {})
    for symbol in ("\n", "<eos>", " "):
        if symbol in stoi:
            return int(stoi[symbol])
    return 0


def sample(model, vocab, prompt: str = "", length: int = 200, temperature: float = 1.0, seed: int = 0) -> str:
    """Generate ``length`` symbols after ``prompt`` and return the prompt and the generated text.

    The prompt is encoded with ``vocab`` and read in one pass; then each step draws the next symbol
    from softmax(logits / temperature) with a NumPy generator seeded by ``seed`` and feeds it back
    (``model.forward`` one step at a time, state carried). Lower temperatures sharpen the
    distribution (towards the argmax); higher ones flatten it. Without a prompt the model starts
    from a newline (``<eos>`` for word vocabularies; else id 0), which is not part of the output.
    """
    t = float(temperature)
    if not (t > 0 and math.isfinite(t)):
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
    if isinstance(length, bool) or int(length) != length or length < 0:
        raise ValueError(f"length must be an integer >= 0, got {length!r}")
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
    if vocab.size != model.vocab_size:
        raise ValueError(f"the vocabulary has {vocab.size} symbols, the model {model.vocab_size}")
    rng = np.random.default_rng(seed)
    prompt_ids = [int(i) for i in vocab.encode(prompt)] if prompt else []
    feed = np.array([prompt_ids or [_start_id(vocab)]], dtype=np.int32)  # (1, T)
    logits, state = model.forward(feed)
    out: List[int] = []
    for i in range(int(length)):
        z = logits[0, -1].astype(np.float64) / t
        z -= z.max()
        p = np.exp(z)
        cdf = np.cumsum(p)
        tok = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
        tok = min(tok, model.vocab_size - 1)
        out.append(tok)
        if i + 1 < length:
            logits, state = model.forward(np.array([[tok]], dtype=np.int32), state)
    return vocab.decode(prompt_ids + out)


class _ProgressLines:
    """Progress as plain lines on standard error (for logs): about every 10 % of the epoch, at
    least every 30 s, never more than once a second."""

    def __init__(self, epoch_no: int, epochs: int, n_chunks: int, label: str):
        self.head = f"epoch {epoch_no}/{epochs}"
        self.n_chunks, self.label = n_chunks, label
        self.every = max(1, n_chunks // 10)
        self.last = time.perf_counter()
        self.loss = self.tokens = self.seconds = 0.0

    def update(self, chunk: int, loss: float, tokens: int, seconds: float) -> None:
        self.loss += loss * tokens
        self.tokens += tokens
        self.seconds += seconds
        now = time.perf_counter()
        if (chunk % self.every == 0 and now - self.last >= 1.0) or now - self.last >= 30.0 or chunk == self.n_chunks:
            mean = self.loss / max(self.tokens, 1)
            print(
                f"{self.head} chunk {chunk}/{self.n_chunks}: loss {mean:.4f}, {self.label} {_bits(mean):.4f}, "
                f"{self.tokens / max(self.seconds, 1e-9):,.0f} tokens/s",
                file=sys.stderr,
                flush=True,
            )
            self.last = now
            self.loss = self.tokens = self.seconds = 0.0


# ---- the trainer ---------------------------------------------------------------------------------
def _positive_int(value, name: str, allow_none: bool = False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_number(v) -> bool:
    return (
        isinstance(v, (int, float, np.integer, np.floating))
        and not isinstance(v, (bool, np.bool_))
        and math.isfinite(float(v))
    )


# What each entry of ``Trainer.state_dict()`` must be: (check, words, may be None).
_STATE_ENTRIES = {
    "epoch": (lambda v: _is_int(v) and v >= 0, "an integer >= 0", False),
    "chunk": (lambda v: _is_int(v) and v >= 0, "an integer >= 0", False),
    "step": (lambda v: _is_int(v) and v >= 0, "an integer >= 0", False),
    "tokens": (lambda v: _is_int(v) and v >= 0, "an integer >= 0", False),
    "sum_loss": (_is_number, "a finite number", False),
    "seconds": (_is_number, "a finite number", True),
    "sum_aux": (
        lambda v: isinstance(v, dict) and all(_is_number(x) for x in v.values()),
        "an object of finite numbers",
        True,
    ),
    "carried": (
        lambda v: isinstance(v, dict) and all(isinstance(x, np.ndarray) for x in v.values()),
        "an object of arrays",
        True,
    ),
    "best_loss": (_is_number, "a finite number", True),
    "best_epoch": (lambda v: _is_int(v) and v >= 1, "an integer >= 1", True),
    "best_params": (lambda v: isinstance(v, np.ndarray), "an array", True),
    "lr_schedule": (lambda v: isinstance(v, dict), "an object", True),
    "model_options": (lambda v: isinstance(v, dict), "an object", True),
    "data": (
        lambda v: isinstance(v, dict) and _is_int(v.get("tokens")) and _is_int(v.get("crc32")),
        "an object with integer 'tokens' and 'crc32'",
        True,
    ),
    "rank_rngs": (
        lambda v: isinstance(v, np.ndarray) and v.ndim == 2 and v.shape[0] >= 1 and v.dtype == np.uint64,
        "a (ranks, words) uint64 array",
        True,
    ),
}


def _check_state(state) -> None:
    """``ValueError`` naming the first entry of a saved trainer state that is missing or of the wrong type."""
    if not isinstance(state, dict):
        raise ValueError(f"the trainer state must be an object, got {type(state).__name__}")
    for key, (ok, words, optional) in _STATE_ENTRIES.items():
        if key not in state:
            if optional:
                continue
            raise ValueError(f"the trainer state lacks {key!r}")
        v = state[key]
        if v is None and optional:
            continue
        if not ok(v):
            raise ValueError(f"trainer state {key!r} must be {words}, got {v!r:.80}")


def _ids_fingerprint(ids: np.ndarray) -> dict:
    a = np.ascontiguousarray(ids, dtype=np.int32)
    return {"tokens": int(a.size), "crc32": int(zlib.crc32(a.tobytes()))}


def _vocab_for(model, vocab, where: str):
    """``vocab`` (a ``data.Vocab`` or its ``to_json()`` dict) as a ``Vocab``, refused unless it has the
    model's ``vocab_size`` symbols; None stays None."""
    if vocab is None:
        return None
    data = _data()
    if isinstance(vocab, dict):
        try:
            vocab = data.Vocab.from_json(vocab)
        except (TypeError, ValueError, KeyError) as e:
            raise ValueError(f"{where}: the vocabulary dict is not a Vocab.to_json() dict: {e}") from None
    if not isinstance(vocab, data.Vocab):
        raise TypeError(f"{where} must be a multiscale_rnn.data.Vocab (e.g. corpus.vocab), got {type(vocab).__name__}")
    if vocab.size != model.vocab_size:
        raise ValueError(
            f"{where} has {vocab.size} symbols but the model has vocab_size={model.vocab_size}: "
            f"build the model with vocab_size={vocab.size} (vocab.size), or pass the vocabulary the "
            f"model was built for"
        )
    return vocab


def training_data(model, train, valid=None, vocab=None):
    """``(train_ids, valid_ids, vocab)`` from what ``Trainer.fit`` and ``best_of`` take: a ``data.Corpus``
    (its train and valid splits and its vocabulary; ``valid`` and ``vocab``, when given, replace the
    corpus's, and a ``vocab`` that differs from the corpus's is refused) or token ids. Text where ids
    belong is refused with how to encode it, and a vocabulary whose size is not the model's
    ``vocab_size`` with both sizes."""
    data = _data()
    if isinstance(valid, data.Corpus):
        raise TypeError(
            "valid must be token ids (e.g. corpus.valid), got a Corpus: pass the corpus as the "
            "first argument, fit(corpus), to train on its train split and validate on its valid split"
        )
    if isinstance(train, data.Corpus):
        corpus = train
        if corpus.vocab_size != model.vocab_size:
            raise ValueError(
                f"the corpus {corpus.name!r} has {corpus.vocab_size} symbols (corpus.vocab_size) but "
                f"the model has vocab_size={model.vocab_size}: build the model with "
                f"vocab_size=corpus.vocab_size"
            )
        if vocab is not None and _vocab_for(model, vocab, "vocab") != corpus.vocab:
            raise ValueError(
                f"vocab differs from the corpus {corpus.name!r}'s vocabulary: leave vocab out to store the corpus's"
            )
        train, valid, vocab = corpus.train, (corpus.valid if valid is None else valid), corpus.vocab
    for what, ids in (("train", train), ("valid", valid)):
        hint = data.batching.text_given_for_ids(ids, f"{what} ids")
        if hint is not None:
            raise TypeError(hint)
    return train, valid, _vocab_for(model, vocab, "vocab")


class Trainer:
    """Truncated-BPTT training of a language model.

    Parameters
    ----------
    model : a ``LanguageModel``.
    optimizer : an ``optim.Optimizer`` (default ``Adam(lr=2e-3)``).
    clip_norm : scale the gradient so its global L2 norm is at most this (None: off).
    clip_value : then clamp every gradient element to [-clip_value, clip_value] (None: off).
    batch_size, bptt : B streams, T steps per chunk.
    lr_schedule : a ``schedules.LRSchedule`` asked for the learning rate after every epoch.
    model_options : dict option name -> number or callable of (epoch, step), applied with
        ``model.set_option`` before every chunk (e.g. ``{"slope": schedules.linear(1, 5, 0.04)}``).
        Added to the model's own schedules (``model.default_model_options()``: the HM-LSTM's boundary
        warm-up, ``{"detectors": schedules.step(0, 1, at_step=warmup)}``, or one ``detectors_l{l}`` per
        layer), which an entry of the same family replaces (``detectors`` or any ``detectors_l{l}``
        replaces all of the model's ``detectors`` and ``detectors_l{l}`` entries).
    seed : the model's random generator (dropout and any other noise) is seeded from it when a new
        training run starts, so the same model, data, seed and thread count give identical runs.
    progress : True: a tqdm bar (loss, bits per token, tokens per second) when standard error is a
        terminal or the output goes to a Jupyter notebook (tqdm's widget where ipywidgets is installed,
        else the text bar), else plain lines (one about every 10 % of an epoch and at least every 30 s,
        no carriage returns, for log files); "bar" or "lines" to choose; False for none.
    eval_batch_size : streams for validation (default: ``batch_size``; see ``evaluate``).
    unit : "char", "word", "bit" or "symbol": only the label of the bits figure in the progress bar
        (bpc, bpw, bits/bit, bits/symbol).
    constraint : a callable of the model run after every optimiser step (e.g.
        ``optim.ColumnNorm(max_norm)``, column normalisation); None: off.
    distributed : False, or data-parallel training over MPI (``multiscale_rnn.distributed``): True
        for ``MPI.COMM_WORLD``, or an mpi4py communicator. Each rank reads its share of the
        ``batch_size`` streams and the gradients are averaged after each chunk, so K ranks give the
        parameters one process gives; only rank 0 prints, calls ``log`` and writes checkpoints.
        ``fit``, ``save_checkpoint`` and ``resume_from`` are then collective (every rank calls them).
    divergence : the divergence guard, in bits per token (off by default; 0.1 is a sensible margin for
        runs whose validation figure should fall steadily): when an epoch's validation
        bits per token lie more than this above the best so far, the run has diverged. "So far" counts
        from the last time the model's own schedules changed the model (``default_model_options``: a
        boundary detector starting after its warm-up makes a new model, whose first epochs are not
        compared with the old one's). ``fit`` then says so (a ``RuntimeWarning`` naming both epochs
        and figures), stops, puts those best parameters back into the model and leaves the last
        checkpoint as it was; the epoch's history row has ``"diverged": True`` and ``trainer.diverged``
        the figures. None (the default) turns the guard off. Needs validation data. Off by default
        because some recipes are not monotone: an HM-LSTM's validation figure jumps for a few epochs
        after each detector starts.
    """

    def __init__(
        self,
        model,
        optimizer: Optional[Optimizer] = None,
        clip_norm: Optional[float] = None,
        clip_value: Optional[float] = None,
        batch_size: int = 64,
        bptt: int = 100,
        lr_schedule=None,
        model_options: Optional[Dict[str, Union[float, Callable]]] = None,
        seed: int = 0,
        progress: bool = True,
        eval_batch_size: Optional[int] = None,
        unit: str = "char",
        constraint: Optional[Callable] = None,
        distributed=False,
        divergence: Optional[float] = None,
    ):
        self.model = model
        self.optimizer = optimizer if optimizer is not None else Adam()
        if not isinstance(self.optimizer, Optimizer):
            raise TypeError(f"optimizer must be a multiscale_rnn.optim.Optimizer, got {type(optimizer).__name__}")
        for name, v in (("clip_norm", clip_norm), ("clip_value", clip_value)):
            if v is not None and not (float(v) > 0 and math.isfinite(float(v))):
                raise ValueError(f"{name} must be a finite number > 0 or None, got {v!r}")
        self.clip_norm = None if clip_norm is None else float(clip_norm)
        self.clip_value = None if clip_value is None else float(clip_value)
        self.batch_size = _positive_int(batch_size, "batch_size")
        self.bptt = _positive_int(bptt, "bptt")
        self.eval_batch_size = _positive_int(eval_batch_size, "eval_batch_size", allow_none=True) or self.batch_size
        self.lr_schedule = lr_schedule
        # the model's own schedules (the HM-LSTM's boundary warm-up) unless model_options names them: an
        # entry replaces the model's entries of its family (detectors, detectors_l0, detectors_l1, ...)
        own = getattr(model, "default_model_options", None)
        given = dict(model_options or {})
        family = lambda name: re.sub(r"_l\d+$", "", str(name))  # noqa: E731
        named = {family(k) for k in given}
        own = {k: v for k, v in (own() if own is not None else {}).items() if family(k) not in named}
        self.model_options = {**own, **given}
        self._own_options = set(own)  # the model's own schedules (the HM-LSTM's boundary warm-up)
        for name, sched in self.model_options.items():
            if not (callable(sched) or isinstance(sched, (int, float))):
                raise TypeError(f"model option {name!r} must be a number or a callable of (epoch, step)")
        if not _is_int(seed) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.seed = int(seed)
        if progress not in (True, False, "bar", "lines"):
            raise ValueError(f"progress must be True, False, 'bar' or 'lines', got {progress!r}")
        self.progress = progress
        if unit not in BITS_LABELS:
            raise ValueError(f"unit must be one of {', '.join(map(repr, BITS_LABELS))}, got {unit!r}")
        self.unit = unit
        if constraint is not None and not callable(constraint):
            raise TypeError(f"constraint must be a callable of the model, got {type(constraint).__name__}")
        self.constraint = constraint
        if divergence is not None and not (_is_number(divergence) and float(divergence) > 0):
            raise ValueError(f"divergence must be a number of bits > 0 (or None: no guard), got {divergence!r}")
        self.divergence = None if divergence is None else float(divergence)
        self.diverged: Optional[dict] = None  # the epoch the guard stopped at, with its figures
        # the guard's baseline: the best validation loss since the model's own schedules last changed the
        # model, with its epoch and parameters ({"loss", "epoch", "params"}); None until an epoch sets it
        self._guard: Optional[dict] = None
        self.dist = data_parallel(distributed)  # None, or a distributed.DataParallel
        self.history = History()
        # progress
        self.epoch = 0  # completed epochs
        self.chunk = 0  # chunks done in the current epoch
        self.step = 0  # optimiser steps so far
        self._sum_loss = 0.0  # sum of loss * tokens in the current epoch
        self._sum_aux: Dict[str, float] = {}  # sum of each auxiliary loss term * tokens in the epoch
        self._tokens = 0  # targets in the current epoch
        self._seconds = 0.0  # training time of the current epoch
        self._carried: Optional[Dict[str, np.ndarray]] = None  # TBPTT state at the current position
        self.best_loss: Optional[float] = None
        self.best_epoch: Optional[int] = None
        self.best_params: Optional[np.ndarray] = None
        self._data_id: Optional[dict] = None
        self._rank_rngs: Optional[np.ndarray] = None  # (K, 4) every rank's random state, for checkpoints
        self._applied: Dict[str, float] = {}
        self.option_values: Dict[str, float] = {}

    def _progress_mode(self, tqdm=True) -> Optional[str]:
        """None, "bar" or "lines" (True picks the bar only when standard error is a terminal)."""
        if not self.progress or not self._speaks:
            return None
        if self.progress is True:  # a bar where it is drawn: a terminal or a Jupyter notebook
            from ._progress import in_notebook

            tty = getattr(sys.stderr, "isatty", None)
            mode = "bar" if (tty is not None and tty()) or in_notebook() else "lines"
        else:
            mode = self.progress
        return "lines" if mode == "bar" and tqdm is None else mode

    @property
    def _speaks(self) -> bool:
        """True where this process prints, logs and writes (not a rank other than 0)."""
        return self.dist is None or self.dist.root

    # ---- model options --------------------------------------------------------------------------
    def _set_option(self, name: str, value: float) -> None:
        self.model.set_option(name, float(value))

    def _apply_options(self, force: bool = False) -> None:
        for name, sched in self.model_options.items():
            value = float(sched(self.epoch, self.step) if callable(sched) else sched)
            if force or self._applied.get(name) != value:
                if name in self._own_options and name in self._applied and self._applied[name] != value:
                    self._guard = None  # the model itself changed (a detector started): a new baseline
                self._set_option(name, value)
                self._applied[name] = value
        self.option_values = dict(self._applied)

    # ---- state for checkpoints ------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Progress, schedules and best parameters (JSON-able values and NumPy arrays)."""
        return {
            "epoch": self.epoch,
            "chunk": self.chunk,
            "step": self.step,
            "sum_loss": self._sum_loss,
            "sum_aux": dict(self._sum_aux),
            "tokens": self._tokens,
            "seconds": self._seconds,
            "carried": {k: np.array(v, copy=True) for k, v in self._carried.items()} if self._carried else None,
            "batch_size": self.batch_size,
            "bptt": self.bptt,
            "clip_norm": self.clip_norm,
            "clip_value": self.clip_value,
            "seed": self.seed,
            "eval_batch_size": self.eval_batch_size,
            "best_loss": self.best_loss,
            "best_epoch": self.best_epoch,
            "best_params": self.best_params,
            "lr_schedule": self.lr_schedule.state_dict() if self.lr_schedule is not None else None,
            "model_options": {
                k: {"value": self._applied.get(k), "schedule": repr(s)} for k, s in self.model_options.items()
            },
            "data": self._data_id,
            **({"rank_rngs": self._rank_rngs} if self._rank_rngs is not None else {}),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore progress saved by ``state_dict`` (checked against this trainer's settings and
        for the type of every entry: ``ValueError`` naming the entry otherwise)."""
        _check_state(state)
        for key in ("batch_size", "bptt"):
            if state.get(key) != getattr(self, key):
                raise ValueError(
                    f"the checkpoint was trained with {key}={state.get(key)}, this trainer has "
                    f"{key}={getattr(self, key)}: resuming would not continue the same run"
                )
        saved_sched = state.get("lr_schedule")
        if (saved_sched is None) != (self.lr_schedule is None):
            raise ValueError(
                f"the checkpoint has learning-rate schedule {saved_sched and saved_sched.get('name')}, "
                f"this trainer has {self.lr_schedule!r}"
            )
        if saved_sched is not None:
            self.lr_schedule.load_state_dict(saved_sched)
        saved_opts = set((state.get("model_options") or {}))
        if saved_opts != set(self.model_options):
            raise ValueError(
                f"the checkpoint anneals model options {sorted(saved_opts)}, this trainer {sorted(self.model_options)}"
            )
        self.epoch, self.chunk, self.step = int(state["epoch"]), int(state["chunk"]), int(state["step"])
        self._sum_loss, self._tokens = float(state["sum_loss"]), int(state["tokens"])
        self._sum_aux = {str(k): float(v) for k, v in (state.get("sum_aux") or {}).items()}
        self._seconds = float(state.get("seconds", 0.0))
        carried = state.get("carried")
        self._carried = {k: np.array(v, copy=True) for k, v in carried.items()} if carried else None
        self.best_loss, self.best_epoch = state.get("best_loss"), state.get("best_epoch")
        bp = state.get("best_params")
        self.best_params = None if bp is None else np.array(bp, copy=True)
        self._data_id = state.get("data")
        rngs = state.get("rank_rngs")
        self._rank_rngs = None if rngs is None else np.array(rngs, copy=True)

    def save_checkpoint(self, path: Union[str, Path], vocab=None, extra: Optional[dict] = None) -> Path:
        """Write model, optimiser, progress and history to ``path`` and the history to its JSON.

        With ``distributed`` it is collective: every rank's random state is gathered, rank 0 writes,
        and an error in writing is raised on every rank."""
        from . import checkpoint

        self._rank_rngs = None if self.dist is None else self.dist.gather_rng(self.model.get_rng_state())

        def write() -> Path:
            out = checkpoint.save(
                path, self.model, self.optimizer, self.state_dict(), vocab=vocab, history=self.history, extra=extra
            )
            self.history.save(history_path(out))
            return out

        return write() if self.dist is None else self.dist.on_root(write)

    def _seed_rng(self) -> None:
        """Seed the model's generator for a new run from ``seed`` (rank r > 0 of a distributed run
        from ``seed`` and r, so the ranks draw different dropout masks for their streams)."""
        rank = 0 if self.dist is None else self.dist.rank
        seq = np.random.SeedSequence(self.seed, spawn_key=(rank, self.step) if rank else ())
        self.model.set_rng_state(seq.generate_state(4, dtype=np.uint64) | np.uint64(1))

    def resume_from(self, path: Union[str, Path]):
        """Load a checkpoint written by this kind of run into the trainer's model and optimiser.

        With ``distributed`` it is collective: rank 0 reads the file and sends it to the others
        (no shared file system needed); each rank takes its own saved random state when the run
        was saved with as many ranks, else rank 0 takes the checkpoint's and the others are seeded
        from ``seed``, their rank and the step."""
        if self.dist is None:
            return self._resume(path)
        ck = self.dist.load_checkpoint(path, self._resume)
        rngs = self._rank_rngs
        if rngs is not None and rngs.shape[0] == self.dist.size:
            self.model.set_rng_state(rngs[self.dist.rank])
        elif not self.dist.root:
            self._seed_rng()
        return ck

    def _resume(self, path: Union[str, Path]):
        from . import checkpoint

        ck = checkpoint.load(path, model=self.model)
        if ck.trainer_state is None:
            raise checkpoint.CheckpointError(f"{path} holds no training progress (saved without a trainer)")
        if ck.optimizer is None:
            raise checkpoint.CheckpointError(f"{path} holds no optimiser state")
        if type(ck.optimizer) is not type(self.optimizer):
            raise checkpoint.CheckpointError(
                f"{path} was trained with {type(ck.optimizer).__name__}, this trainer "
                f"uses {type(self.optimizer).__name__}"
            )
        try:
            self.optimizer.load_state_dict(ck.optimizer_state)
            self.load_state_dict(ck.trainer_state)
        except (TypeError, ValueError, KeyError, OverflowError) as e:
            raise checkpoint.CheckpointError(f"{path}: cannot resume from it: {e}") from None
        self.history = ck.history if ck.history is not None else History()
        return ck

    def restore_best(self) -> bool:
        """Copy the best parameters seen (lowest validation loss) into the model; False if none."""
        if self.best_params is None:
            return False
        self.model.flat_parameters()[...] = self.best_params
        return True

    # ---- training -------------------------------------------------------------------------------
    def fit(
        self,
        train,
        valid=None,
        epochs: int = 1,
        checkpoint: Union[str, Path, None] = None,
        resume: Union[bool, str] = False,
        max_chunks: Optional[int] = None,
        log: Optional[Callable] = None,
        checkpoint_every: Optional[int] = None,
        vocab=None,
        restore_best: bool = False,
        extra: Optional[dict] = None,
    ) -> History:
        """Train until ``epochs`` epochs are complete (counting any done before: call again with a
        larger ``epochs`` to go on); returns the history of all epochs.

        ``train``: a ``data.Corpus`` (``fit(corpus)``: trains on ``corpus.train``, validates on
        ``corpus.valid`` and stores ``corpus.vocab`` in the checkpoint, so that it can be read and
        scored without the corpus), or 1-D token ids (``corpus.train``, ``vocab.encode(text)``).
        Text is refused with how to encode it; a corpus or ``vocab`` whose size is not the model's
        ``vocab_size`` is refused with both sizes.

        ``valid``: ids evaluated after each epoch (best parameters and ``ReduceOnPlateau`` follow
        its loss; the training loss without it); with a corpus, its valid split unless given.
        ``vocab``: the vocabulary stored in the checkpoint (with a corpus, the corpus's; given
        ids, pass ``vocab=corpus.vocab``; when resuming, the checkpoint's unless given, and a
        different one is refused). ``checkpoint``: a path written at the end of every
        epoch, every ``checkpoint_every`` chunks, and when ``max_chunks`` stops the run, with the
        history beside it (``x.history.json``). ``resume``: True continues from ``checkpoint``
        (which must exist), "auto" when it exists; the continuation gives the same losses, bit for
        bit, as an uninterrupted run. ``max_chunks``: stop after this many chunks in this call.
        ``log``: a callable receiving a dict after every chunk (``event="chunk"``) and epoch
        (``event="epoch"``). ``restore_best``: load the best parameters at the end. ``extra`` (a
        JSON-able dict) is stored in the checkpoint.

        Raises ``FloatingPointError`` (naming epoch and chunk) when the loss or gradient is not
        finite; parameters are then not updated and the last checkpoint is left as it was.

        With ``distributed`` every rank calls ``fit`` with the same arguments and data; the ranks
        first check that they agree (``ValueError`` on every rank otherwise), every error of the
        setup is raised on every rank, and only rank 0 reads and writes the checkpoint.
        """
        data = _data()
        dist = self.dist

        def prepare():
            epochs_ = _positive_int(epochs, "epochs")
            max_chunks_ = _positive_int(max_chunks, "max_chunks", allow_none=True)
            every = _positive_int(checkpoint_every, "checkpoint_every", allow_none=True)
            if resume not in (False, True, "auto"):
                raise ValueError(f"resume must be False, True or 'auto', got {resume!r}")
            if resume and checkpoint is None:
                raise ValueError("resume needs the checkpoint path")
            if checkpoint is not None and self._speaks:
                check_writable(checkpoint, "checkpoint")
                check_writable(history_path(checkpoint), "history")
            train_ids, valid_, vocab_ = training_data(self.model, train, valid, vocab)
            ids = np.asarray(train_ids)
            data.check_length(ids, self.batch_size, self.bptt, "train")
            if valid_ is not None:
                valid_ = np.asarray(valid_)
                if len(valid_) < 2:
                    raise ValueError(f"the valid split has {len(valid_)} tokens; evaluation needs at least 2")
            all_streams = data.batchify(ids, self.batch_size)
            if all_streams.min() < 0 or all_streams.max() >= self.model.vocab_size:
                bad = int(np.flatnonzero((ids < 0) | (ids >= self.model.vocab_size))[0])
                raise IndexError(
                    f"train token id {int(ids[bad])} at position {bad} is outside the model's "
                    f"vocabulary [0, {self.model.vocab_size})"
                )
            if dist is not None and dist.size > self.batch_size:
                raise ValueError(
                    f"batch_size={self.batch_size} streams cannot be shared by {dist.size} ranks: "
                    f"each rank needs at least one stream"
                )
            return (
                epochs_,
                max_chunks_,
                every,
                ids,
                valid_,
                all_streams,
                data.num_chunks(all_streams, self.bptt),
                _ids_fingerprint(ids),
                vocab_,
            )

        if dist is None:
            epochs, max_chunks, checkpoint_every, train_ids, valid, streams, n_chunks, fingerprint, vocab = prepare()
        else:
            epochs, max_chunks, checkpoint_every, train_ids, valid, streams, n_chunks, fingerprint, vocab = (
                dist.together(prepare)
            )
            dist.check_model(
                self.model,
                {
                    "the training data (tokens, CRC-32)": fingerprint,
                    "the validation data (tokens, CRC-32)": None if valid is None else _ids_fingerprint(valid),
                    **{
                        f"the trainer setting {k}": v
                        for k, v in (
                            ("batch_size", self.batch_size),
                            ("bptt", self.bptt),
                            ("eval_batch_size", self.eval_batch_size),
                            ("clip_norm", self.clip_norm),
                            ("clip_value", self.clip_value),
                            ("seed", self.seed),
                            ("optimizer", f"{type(self.optimizer).__name__}({self.optimizer.hyper()})"),
                            ("model_options", sorted(self.model_options)),
                            ("lr_schedule", type(self.lr_schedule).__name__),
                            ("constraint", type(self.constraint).__name__),
                        )
                    },
                    "the progress (epoch, chunk, step)": (self.epoch, self.chunk, self.step),
                    **{
                        f"the fit argument {k}": v
                        for k, v in (
                            ("epochs", epochs),
                            ("max_chunks", max_chunks),
                            ("checkpoint_every", checkpoint_every),
                            ("resume", resume),
                            ("checkpoint given", checkpoint is not None),
                        )
                    },
                },
            )
        B = self.batch_size  # streams of all ranks
        rows = slice(0, B) if dist is None else dist.shard(B)
        local = streams[rows]  # this rank's streams (B_r, N / B)

        if dist is None:
            resuming = resume is True or (resume == "auto" and Path(checkpoint).exists())
        else:
            resuming = resume is True or (resume == "auto" and dist.on_root(lambda: Path(checkpoint).exists()))
        if resuming:
            ck = self.resume_from(checkpoint)
            if vocab is None:  # the vocabulary stays in the checkpoints of the continued run
                vocab = ck.vocab
            elif ck.vocab is not None and ck.vocab != vocab:
                raise ValueError(
                    f"{checkpoint} was trained with another vocabulary ({ck.vocab.size} symbols) than "
                    f"the one given ({vocab.size}): resuming would not continue the same run"
                )
            if self._data_id is not None and self._data_id != fingerprint:
                raise ValueError(
                    f"the training data differ from the checkpoint's ({self._data_id['tokens']:,} tokens, "
                    f"crc32 {self._data_id['crc32']}) : got {fingerprint['tokens']:,} tokens, crc32 "
                    f"{fingerprint['crc32']}"
                )
        elif self.epoch == 0 and self.chunk == 0 and self.step == 0:
            self._seed_rng()
        self._data_id = fingerprint
        if self.lr_schedule is not None:
            self.lr_schedule.start(self.optimizer.lr)

        opt, model = self.optimizer, self.model
        flat_g = model.flat_gradients()
        done = 0
        last_ckpt: Optional[Path] = None
        if checkpoint is not None and self._speaks and Path(checkpoint).exists():
            last_ckpt = Path(checkpoint)
        bar = None
        try:
            from ._progress import bar_class

            tqdm = bar_class()  # tqdm's notebook widget only where ipywidgets is installed: no IProgress warning
        except ImportError:  # pragma: no cover - tqdm is a dependency
            tqdm = None
        label = bits_label(self.unit)

        def save():
            nonlocal last_ckpt
            if checkpoint is not None:
                last_ckpt = self.save_checkpoint(checkpoint, vocab=vocab, extra=extra)

        while self.epoch < epochs:
            if max_chunks is not None and done >= max_chunks:
                break
            epoch_no = self.epoch + 1
            if self.chunk == 0:
                model.reset_state(local.shape[0])
                self._sum_loss, self._tokens, self._seconds = 0.0, 0, 0.0
                self._sum_aux = {}
            else:  # the carried state holds all B streams (whatever the number of ranks that saved it)
                model.set_state(self._carried if dist is None else dist.local_state(self._carried, B))
            lines = None
            if self._progress_mode(tqdm) == "lines":
                lines = _ProgressLines(epoch_no, epochs, n_chunks, label)
            elif self._progress_mode(tqdm) == "bar":
                bar = tqdm(
                    total=n_chunks,
                    initial=self.chunk,
                    desc=f"epoch {epoch_no}/{epochs}",
                    unit="chunk",
                    leave=False,
                    dynamic_ncols=True,
                )
            t_epoch = time.perf_counter() - self._seconds
            stopped = False
            try:
                for k, (x, y) in enumerate(data.chunks(local, self.bptt)):
                    if k < self.chunk:
                        continue
                    if max_chunks is not None and done >= max_chunks:
                        stopped = True
                        break
                    t0 = time.perf_counter()
                    self._apply_options(force=(done == 0))
                    n = B * x.shape[1]  # targets of the chunk over all ranks
                    # batch statistics of nonlinear auxiliary terms: the mean over all B streams (distributed.py)
                    reducer = None if dist is None else (lambda s: dist.average_statistics(s, x.size, n))
                    result, _, _ = model.loss_and_grad(x, y, "keep", copy_grads=False, reducer=reducer)
                    loss, aux = float(result), result.aux
                    if dist is not None:  # the mean gradient, loss and terms over all B streams
                        dist.average_gradients(flat_g, x.size, n)
                        names = sorted(aux)
                        means = dist.average([loss] + [aux[a] for a in names], x.size, n)
                        loss, aux = float(means[0]), dict(zip(names, (float(v) for v in means[1:])))
                    if self.clip_norm is not None:
                        norm = float(_core.clip_by_norm(flat_g, self.clip_norm))
                        finite = math.isfinite(norm)
                    else:
                        norm = None
                        finite = bool(_core.all_finite(flat_g))
                    if not (math.isfinite(loss) and finite):
                        what = f"loss is {loss}" if not math.isfinite(loss) else "the gradient holds NaN or infinity"
                        kept = f"; the last checkpoint {last_ckpt} is left as it was" if last_ckpt else ""
                        error = FloatingPointError(
                            f"{what} at chunk {k + 1}/{n_chunks} of epoch {epoch_no} (step {self.step + 1}); "
                            f"training stopped before updating the parameters{kept}"
                        )
                        error.all_ranks = True  # the reduced loss and gradient are the same on every rank
                        raise error
                    opt.step(model, clip_value=self.clip_value)  # clipping by value fused into the step
                    if self.constraint is not None:
                        self.constraint(model)
                    self.step += 1
                    if self.lr_schedule is not None and self.lr_schedule.every == "step":
                        opt.lr = self.lr_schedule.next_lr(self.step, opt.lr, None)
                    self.chunk = k + 1
                    done += 1
                    self._sum_loss += loss * n
                    for name, value in aux.items():
                        self._sum_aux[name] = self._sum_aux.get(name, 0.0) + value * n
                    self._tokens += n
                    dt = time.perf_counter() - t0
                    if bar is not None:
                        bar.update(1)
                        bar.set_postfix(
                            {
                                "loss": f"{loss:.3f}",
                                label: f"{_bits(loss):.3f}",
                                **{name: f"{v:.4g}" for name, v in aux.items()},
                                "tok/s": f"{n / max(dt, 1e-9):,.0f}",
                            },
                            refresh=False,
                        )
                    if lines is not None:
                        lines.update(self.chunk, loss, n, dt)
                    if log is not None and self._speaks:
                        log(
                            {
                                "event": "chunk",
                                "epoch": epoch_no,
                                "chunk": k + 1,
                                "chunks": n_chunks,
                                "step": self.step,
                                "loss": loss,
                                "bpc": _bits(loss),
                                "aux": dict(aux),
                                "grad_norm": norm,
                                "lr": opt.lr,
                                "tokens_per_s": n / max(dt, 1e-9),
                            }
                        )
                    if checkpoint_every is not None and self.chunk % checkpoint_every == 0 and self.chunk < n_chunks:
                        self._seconds = time.perf_counter() - t_epoch
                        self._carried = self._all_streams_state()
                        save()
            finally:
                if bar is not None:
                    bar.close()
                    bar = None
            self._seconds = time.perf_counter() - t_epoch
            if stopped or self.chunk < n_chunks:
                self._carried = self._all_streams_state()
                save()
                break
            self._end_epoch(epoch_no, valid, log)
            if self.diverged is not None and self.diverged["epoch"] == epoch_no:
                self._stop_diverged(last_ckpt)
                break
            save()
        if restore_best:
            self.restore_best()
        return self.history

    def _stop_diverged(self, last_ckpt: Optional[Path]) -> None:
        """The divergence guard's stop (see the class docstring): say so, put the best parameters back."""
        d, label = self.diverged, bits_label(self.unit)
        kept = (
            f"the last checkpoint {last_ckpt} is left as it was"
            if last_ckpt is not None
            else "no checkpoint was written"
        )
        message = (
            f"epoch {d['epoch']}: validation {label} {d['valid_bits']:.4f} is {d['valid_bits'] - d['best_bits']:.2f} "
            f"above the best so far ({d['best_bits']:.4f}, epoch {d['best_epoch']}): the run has diverged. "
            f"Training stopped; the model holds the best parameters (epoch {d['best_epoch']}) and {kept}. "
            f"Lower the learning rate or tighten clipping to go on, or pass divergence=None "
            f"(--divergence none) to train through it."
        )
        self.model.flat_parameters()[...] = self._guard["params"]
        if self._speaks:
            import warnings

            warnings.warn(message, RuntimeWarning, stacklevel=3)

    def _all_streams_state(self) -> Dict[str, np.ndarray]:
        """The carried state of all B streams (gathered from every rank when distributed)."""
        state = self.model.get_state()
        return state if self.dist is None else self.dist.gather_state(state)

    def _end_epoch(self, epoch_no: int, valid, log) -> None:
        train_loss = self._sum_loss / max(self._tokens, 1)
        row = {
            "epoch": epoch_no,
            "train_loss": train_loss,
            "train_bpc": _bits(train_loss),
            "valid_loss": None,
            "valid_bpc": None,
            "valid_perplexity": None,
            "lr": self.optimizer.lr,
            "seconds": self._seconds,
            "tokens_per_s": self._tokens / max(self._seconds, 1e-9),
            "steps": self.step,
        }
        if self._sum_aux:
            row["train_aux"] = {k: v / max(self._tokens, 1) for k, v in self._sum_aux.items()}
        if self.model_options:
            row["options"] = dict(self._applied)
        metric = train_loss
        if valid is not None:
            ev = evaluate(self.model, valid, batch_size=self.eval_batch_size, bptt=self.bptt, distributed=self.dist)
            row.update(valid_loss=ev["loss"], valid_bpc=ev["bpc"], valid_perplexity=ev["perplexity"])
            metric = ev["loss"]
        if valid is not None and self.divergence is not None:
            g = self._guard
            if g is not None and not (_bits(metric) <= _bits(g["loss"]) + self.divergence):
                row["diverged"] = True
                self.diverged = {
                    "epoch": epoch_no,
                    "valid_bits": _bits(metric),
                    "best_bits": _bits(g["loss"]),
                    "best_epoch": g["epoch"],
                }
            elif g is None or metric < g["loss"]:
                self._guard = {
                    "loss": float(metric),
                    "epoch": epoch_no,
                    "params": np.array(self.model.flat_parameters(), copy=True),
                }
        if math.isfinite(metric) and (self.best_loss is None or metric < self.best_loss):
            self.best_loss, self.best_epoch = float(metric), epoch_no
            self.best_params = np.array(self.model.flat_parameters(), copy=True)
        self.epoch, self.chunk = epoch_no, 0
        self._carried = None
        self._sum_loss, self._tokens = 0.0, 0
        self._sum_aux = {}
        if self.lr_schedule is not None and self.lr_schedule.every == "epoch":
            self.optimizer.lr = self.lr_schedule.next_lr(self.epoch, self.optimizer.lr, metric)
        row["next_lr"] = self.optimizer.lr
        self.history.append(row)
        if self.progress and self._speaks:
            label = bits_label(self.unit)
            valid_txt = f", valid {label} {row['valid_bpc']:.4f}" if row["valid_bpc"] is not None else ""
            text = (
                f"epoch {epoch_no}: train {label} {row['train_bpc']:.4f}{valid_txt}, "
                f"{row['tokens_per_s']:,.0f} tokens/s, {row['seconds']:.1f} s"
            )
            if self._progress_mode() == "bar":
                from ._progress import bar_class

                bar_class().write(text)
            else:
                print(text, file=sys.stderr, flush=True)
        if log is not None and self._speaks:
            log({"event": "epoch", **row})


# ---- random restarts -----------------------------------------------------------------------------


def auto_select_after(model, train, batch_size: int, bptt: int, epochs: int) -> Optional[int]:
    """``select_after="auto"`` of :func:`best_of`: the whole epochs of ``train`` (in chunks of ``batch_size``
    streams x ``bptt`` steps) completed before ``model.selection_step()``, or None (compare after ``epochs``)
    where the model names no step or the count is 0 or at least ``epochs``."""
    step = model.selection_step() if hasattr(model, "selection_step") else None
    if step is None:
        return None
    data = _data()
    n = data.num_chunks(data.batchify(np.asarray(train), batch_size), bptt)
    e = int(step) // n
    return e if 1 <= e < int(epochs) else None


def best_of(
    make_model: Callable[[int], object],
    train,
    valid=None,
    *,
    restarts: int = 3,
    epochs: int = 1,
    seed: int = 0,
    make_optimizer: Optional[Callable[[], Optimizer]] = None,
    eval_batch_size: int = 16,
    fit_kw: Optional[dict] = None,
    checkpoint: Union[str, Path, None] = None,
    vocab=None,
    extra: Optional[dict] = None,
    select_after: Union[int, str, None] = "auto",
    **trainer_kw,
):
    """Random restarts selected by the validation likelihood: train ``restarts`` candidates and keep
    the one with the lowest loss on ``valid``.

    ``train``: a ``data.Corpus`` (its train split; ``valid`` defaults to its valid split, and its
    vocabulary is stored in the checkpoint) or token ids, with ``valid`` the validation ids.

    Candidate ``i`` is ``make_model(seed + i)``, trained by ``Trainer(model, optimizer=make_optimizer(),
    seed=seed + i, **trainer_kw).fit(train, epochs=epochs, **fit_kw)`` (``make_optimizer`` default:
    ``Adam()``; a fresh optimiser per candidate, since an optimiser keeps per-parameter state; an
    ``lr_schedule``, which may keep state too, is copied for each candidate; ``fit_kw`` e.g. ``valid``,
    ``log``, ``max_chunks``; ``eval_batch_size`` serves the Trainer's validation and the selection's).
    The selection reads only the likelihood of ``valid`` (no labels), so it
    is as fair as any model selection on held-out text; keep the text you score the model on out of
    ``valid``. For models whose training can end in different local optima from different seeds, such
    as the HM-LSTM's boundary detectors (see docs/models/hm_lstm.md: its validation BPC and the F1 of
    its word boundaries go together).

    ``select_after``: compare the candidates after this many epochs and train only the chosen one on to
    ``epochs`` (its optimiser, schedules and step count carried on, as ``fit`` goes on); None: after
    ``epochs``; ``"auto"`` (the default): the model's choice (``model.selection_step()``), as whole epochs
    before that update, and after ``epochs`` where the model has none or it falls in the first epoch or
    at or after the last. An HM-LSTM with a warm-up per layer whose starts differ (``warmup=[500, 1500]``,
    its default from 3 layers) chooses the last detector's start: comparing before layer 2's detector
    starts picks the run whose word boundaries settled, and costs ``restarts`` times the shorter run
    plus one continuation. The rows' ``valid_loss`` and ``valid_bpc`` are then those at the selection;
    the chosen row's ``epochs`` and ``steps`` count its whole training.

    ``checkpoint``: the chosen candidate's checkpoint (model, optimiser, progress, history, with
    ``vocab`` and ``extra``) is written there once all candidates are trained, as ``Trainer.fit``
    writes it; candidates write none, so a failed call leaves an existing file as it was.

    Returns ``(model, results)``: the chosen model and one dict per candidate, in order, with ``seed``,
    ``valid_loss``, ``valid_bpc``, ``epochs``, ``steps``, ``compared_after`` (the epochs at the comparison)
    and ``chosen``. A candidate whose training
    fails (for example a ``FloatingPointError``) ends the call with that error, naming its seed.

    >>> model, results = best_of(lambda s: HMLSTM(v, 16, [32, 32], seed=s), corpus.train,  # doctest: +SKIP
    ...                          corpus.valid, restarts=3, epochs=40, batch_size=32, bptt=50, clip_norm=1.0,
    ...                          make_optimizer=lambda: optim.Adam(5e-3), progress=False)
    """
    restarts = _positive_int(restarts, "restarts")
    if not _is_int(seed) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if not callable(make_model):
        raise TypeError(
            f"make_model must be a callable of the seed that returns a model, got {type(make_model).__name__}"
        )
    if make_optimizer is not None and not callable(make_optimizer):
        raise TypeError(
            "make_optimizer must be a callable that returns a fresh optimiser (e.g. lambda: Adam(5e-3)), "
            f"got {type(make_optimizer).__name__}"
        )
    if "optimizer" in trainer_kw:
        raise TypeError(
            "best_of takes make_optimizer (a callable returning a fresh optimiser per candidate), not "
            "optimizer: one optimiser cannot serve several models"
        )
    fit_kw = dict(fit_kw or {})
    for key in ("checkpoint", "resume", "epochs", "vocab", "extra"):
        if key in fit_kw:
            raise TypeError(
                f"fit_kw may not hold {key!r}: best_of sets it (checkpoint, vocab and extra are its own "
                f"arguments; candidates are new runs)"
            )
    epochs = _positive_int(epochs, "epochs")
    if isinstance(select_after, str):
        if select_after != "auto":
            raise ValueError(f"select_after must be a positive integer, None or 'auto', got {select_after!r}")
    else:
        select_after = _positive_int(select_after, "select_after", allow_none=True)
        if select_after is not None and select_after > epochs:
            raise ValueError(
                f"select_after={select_after} is beyond epochs={epochs}: the candidates are compared "
                f"after select_after epochs, and the chosen one trains on to epochs"
            )
    if checkpoint is not None:
        check_writable(Path(checkpoint), "checkpoint")  # before any work
    best, results = None, []
    for i in range(restarts):
        s = int(seed) + i
        model = make_model(s)
        if i == 0:  # a corpus gives the splits and the vocabulary; checked against the first candidate
            train, valid, vocab = training_data(model, train, valid, vocab)
            if valid is None or len(valid) < 2:
                raise ValueError(
                    "best_of needs validation ids (at least 2 tokens) to choose among the candidates: "
                    "pass valid=, or a corpus with a valid split"
                )
        opt = make_optimizer() if make_optimizer is not None else Adam()
        kw = dict(trainer_kw)
        if kw.get("lr_schedule") is not None:
            kw["lr_schedule"] = copy.deepcopy(kw["lr_schedule"])
        trainer = Trainer(model, optimizer=opt, seed=s, eval_batch_size=eval_batch_size, **kw)
        if select_after == "auto":  # resolved on the first candidate: they share the configuration
            select_after = auto_select_after(model, train, trainer.batch_size, trainer.bptt, epochs)
        try:
            trainer.fit(train, epochs=select_after or epochs, **fit_kw)
        except FloatingPointError as e:
            raise FloatingPointError(f"candidate {i + 1}/{restarts} (seed {s}): {e}") from e
        ev = evaluate(model, valid, batch_size=eval_batch_size)
        results.append(
            {
                "seed": s,
                "valid_loss": ev["loss"],
                "valid_bpc": ev["bpc"],
                "epochs": trainer.epoch,
                "steps": trainer.step,
                "compared_after": trainer.epoch,
                "chosen": False,
            }
        )
        if math.isfinite(ev["loss"]) and (best is None or ev["loss"] < best[0]):
            best = (ev["loss"], i, trainer)
    if best is None:
        raise FloatingPointError(f"no candidate of {restarts} reached a finite validation loss: {results}")
    results[best[1]]["chosen"] = True
    if select_after is not None and select_after < epochs:
        try:
            best[2].fit(train, epochs=epochs, **fit_kw)
        except FloatingPointError as e:
            raise FloatingPointError(
                f"the chosen candidate (seed {results[best[1]]['seed']}), trained on after the selection: {e}"
            ) from e
        results[best[1]].update(epochs=best[2].epoch, steps=best[2].step)
    if checkpoint is not None:
        best[2].save_checkpoint(checkpoint, vocab=vocab, extra=extra)
    return best[2].model, results
