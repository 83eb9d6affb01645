"""The events of ``Trainer.fit`` and the hooks that act on them.

``fit`` is a loop over named steps; what happens around the steps (the progress display, the ``log``
callable, the divergence guard, writing checkpoints) is done by hooks, objects with a method per event
they act on. ``Trainer(hooks=[...])`` adds your own after the trainer's; a hook may subclass
:class:`Hook` (every event does nothing) or be any object with some of the methods below. Every method
takes the :class:`FitRun` of the ``fit`` call first; ``run.trainer`` is the trainer.

Events, in the order they come::

    on_fit_start(run)              ``fit`` is about to train: its arguments are checked and a resume is done
    on_epoch_start(run)            an epoch starts or goes on (run.trainer.chunk chunks of it are done)
    on_model_changed(run, names)   the model's own schedules changed its options ``names`` (a boundary
                                   detector started after its warm-up): from here it is another model
    on_step(run, step)             after every optimiser step: ``step`` is a :class:`Step`
    on_chunks_end(run)             the epoch's chunks ended: all done, stopped, or an error was raised
    on_evaluate(run, row)          the epoch's figures are in ``row`` (training loss; validation loss when
                                   ``fit`` has ``valid``), before the trainer keeps the best parameters and
                                   asks the learning-rate schedule; a hook may add entries to ``row`` here
    on_epoch_end(run, row)         the epoch is complete and ``row`` is in ``trainer.history``
    on_checkpoint(run)             the trainer's state is ready to be saved: at the end of every epoch,
                                   every ``checkpoint_every`` chunks, and when the run stops within an epoch
    on_fit_end(run)                ``fit`` is about to return (not after an error)

A hook stops the run with ``run.stop()``: ``fit`` returns after the current event (within an epoch,
after the step, keeping the position as ``max_chunks`` does). With ``distributed``, every rank calls
the hooks; ``run.trainer.speaks`` is True on the rank that prints and writes.

>>> class EveryEpoch(Hook):                                           # doctest: +SKIP
...     def on_epoch_end(self, run, row):
...         print(row["epoch"], row["valid_bpc"])
>>> Trainer(model, hooks=[EveryEpoch()]).fit(corpus, epochs=3)        # doctest: +SKIP
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Union

import numpy as np

from .evaluation import bits

__all__ = ["EVENTS", "Hook", "Step", "FitRun", "check_hooks", "LogCalls", "CheckpointWriter"]

#: The events of ``fit``, in the order they come.
EVENTS = (
    "on_fit_start",
    "on_epoch_start",
    "on_model_changed",
    "on_step",
    "on_chunks_end",
    "on_evaluate",
    "on_epoch_end",
    "on_checkpoint",
    "on_fit_end",
)


class Hook:
    """A hook that does nothing on every event; subclass it and override the events you need."""

    def on_fit_start(self, run: "FitRun") -> None:
        """``fit`` is about to train (after the checks and the resume; ``run.trainer.step`` steps are done)."""

    def on_epoch_start(self, run: "FitRun") -> None:
        """An epoch starts, or goes on from ``run.trainer.chunk`` (a resumed or continued run)."""

    def on_model_changed(self, run: "FitRun", names: List[str]) -> None:
        """The model's own schedules changed its options ``names``."""

    def on_step(self, run: "FitRun", step: "Step") -> None:
        """An optimiser step was taken; ``step`` holds its figures."""

    def on_chunks_end(self, run: "FitRun") -> None:
        """The epoch's chunks ended (all done, stopped, or an error raised)."""

    def on_evaluate(self, run: "FitRun", row: dict) -> None:
        """The epoch's figures are in ``row``, which is not yet in the history; entries may be added."""

    def on_epoch_end(self, run: "FitRun", row: dict) -> None:
        """The epoch is complete; ``row`` is its entry of ``run.trainer.history``."""

    def on_checkpoint(self, run: "FitRun") -> None:
        """The trainer's state is ready to be saved (``run.trainer.save_checkpoint``)."""

    def on_fit_end(self, run: "FitRun") -> None:
        """``fit`` is about to return."""


@dataclass
class Step:
    """The figures of one optimiser step (what ``fit``'s ``log`` receives as ``event="chunk"``)."""

    epoch: int  #: the epoch under way (from 1)
    chunk: int  #: chunks done in this epoch, this one included
    chunks: int  #: chunks in an epoch
    step: int  #: optimiser steps so far, this one included
    loss: float  #: mean cross-entropy of the chunk's targets over all ranks, nats per token
    aux: Dict[str, float]  #: each auxiliary objective term of the chunk (the VCRNN's penalty, ...)
    grad_norm: Optional[float]  #: global gradient norm before clipping (None without ``clip_norm``)
    lr: float  #: the learning rate after the step (a schedule per step may have changed it)
    tokens: int  #: targets of the chunk over all ranks
    seconds: float  #: time the step took

    @property
    def tokens_per_s(self) -> float:
        """Targets per second of the step."""
        return self.tokens / max(self.seconds, 1e-9)


@dataclass
class FitRun:
    """One call of ``Trainer.fit``: its checked arguments, its data, and where it stands.

    Hooks read ``trainer``, ``epochs``, ``n_chunks``, ``valid``, ``checkpoint``, ``vocab``, ``extra``,
    ``done`` and ``last_checkpoint``, and may call :meth:`stop`."""

    trainer: Any
    epochs: int  #: ``fit``'s epochs: the run ends when ``trainer.epoch`` reaches it
    max_chunks: Optional[int]
    checkpoint_every: Optional[int]
    checkpoint: Union[str, Path, None]  #: the checkpoint path (None: none is written)
    resume: Union[bool, str]
    train: np.ndarray  #: the training ids
    valid: Optional[np.ndarray]  #: the validation ids (None: no validation)
    streams: np.ndarray  #: this rank's training streams, (B_r, N / B)
    n_chunks: int  #: chunks in an epoch
    fingerprint: dict  #: the training data's token count and CRC-32
    vocab: Any  #: the vocabulary stored in the checkpoint
    extra: Optional[dict]
    log: Optional[Callable]
    hooks: list = field(default_factory=list)
    done: int = 0  #: chunks trained in this call
    last_checkpoint: Optional[Path] = None  #: the checkpoint written last (or found at the start)
    stopping: bool = False  #: a hook asked the run to stop
    save_on_stop: bool = True
    warning: Optional[str] = None
    sequences: Any = None  #: separate sequences (``training.sequences.SequenceBatches``), or None for streams

    def stop(self, warning: Optional[str] = None, save: bool = True) -> None:
        """End the run after the current event. ``save=False`` leaves the last checkpoint as it was
        (no ``on_checkpoint`` for where the run stopped); ``warning``: a message ``fit`` gives its caller
        as a ``RuntimeWarning`` before it returns (on the rank that speaks)."""
        self.stopping = True
        self.save_on_stop = self.save_on_stop and save
        if warning is not None:
            self.warning = warning

    def budget_spent(self) -> bool:
        """True once ``max_chunks`` chunks were trained in this call."""
        return self.max_chunks is not None and self.done >= self.max_chunks

    def emit(self, event: str, *args) -> None:
        """Call ``event`` on every hook that has it, in order, with this run and ``args``."""
        for hook in self.hooks:
            method = getattr(hook, event, None)
            if method is not None:
                method(self, *args)


def check_hooks(hooks) -> list:
    """``hooks`` as a list, refused (``TypeError``) unless it is a list or tuple of objects that each have
    at least one event method and no ``on_*`` method that is not an event (a misspelt event would never
    be called)."""
    if not isinstance(hooks, (list, tuple)):
        raise TypeError(f"hooks must be a list of hook objects, got {type(hooks).__name__}")
    for hook in hooks:
        if isinstance(hook, type):
            raise TypeError(f"hooks takes hook objects, got the class {hook.__name__}: pass {hook.__name__}()")
        names = [n for n in dir(hook) if n.startswith("on_") and callable(getattr(hook, n))]
        unknown = [n for n in names if n not in EVENTS]
        if unknown:
            raise TypeError(
                f"hook {type(hook).__name__} has {', '.join(unknown)}, which is no event of fit; the events: "
                f"{', '.join(EVENTS)}"
            )
        if not names:
            raise TypeError(f"hook {type(hook).__name__} has no event method ({', '.join(EVENTS)})")
        for name in names:
            _check_arguments(hook, name)
    return list(hooks)


def _check_arguments(hook, event: str) -> None:
    """``TypeError`` when the hook's ``event`` method cannot take what ``fit`` passes (the arguments of
    ``Hook``'s method of that name), so that a wrong signature is found before training, not after an epoch."""
    passed = [p for p in inspect.signature(getattr(Hook, event)).parameters if p != "self"]
    try:
        inspect.signature(getattr(hook, event)).bind(*passed)
    except ValueError:  # no signature to read (a builtin): it is found when called
        return
    except TypeError as e:
        raise TypeError(
            f"hook {type(hook).__name__}: {event} must take ({', '.join(passed)}), as fit calls it ({e})"
        ) from None


class LogCalls(Hook):
    """``fit``'s ``log``: a dict after every chunk (``event="chunk"``) and epoch (``event="epoch"``)."""

    def __init__(self, log: Callable):
        self.log = log

    def on_step(self, run: FitRun, step: Step) -> None:
        self.log(
            {
                "event": "chunk",
                "epoch": step.epoch,
                "chunk": step.chunk,
                "chunks": step.chunks,
                "step": step.step,
                "loss": step.loss,
                "bpc": bits(step.loss),
                "aux": dict(step.aux),
                "grad_norm": step.grad_norm,
                "lr": step.lr,
                "tokens_per_s": step.tokens_per_s,
            }
        )

    def on_epoch_end(self, run: FitRun, row: dict) -> None:
        self.log({"event": "epoch", **row})


class CheckpointWriter(Hook):
    """Writes ``fit``'s checkpoint (with its vocabulary, extra and the history beside it) whenever the
    trainer's state is ready to be saved; a collective call with ``distributed``."""

    def on_checkpoint(self, run: FitRun) -> None:
        if run.checkpoint is not None:
            run.last_checkpoint = run.trainer.save_checkpoint(run.checkpoint, vocab=run.vocab, extra=run.extra)
