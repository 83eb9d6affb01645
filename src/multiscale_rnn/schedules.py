"""Schedules: the learning rate from epoch to epoch, and annealed model options.

Learning-rate schedules (``Trainer(lr_schedule=...)``) are asked for the learning rate of the next
epoch at the end of each epoch, with the validation loss (the training loss when there is no
validation set). ``epoch`` always counts *completed* epochs: 0 before training, 1 after the first.
``base_lr`` is the optimiser's learning rate when training starts.

    Constant()                        lr = base_lr
    HalveAfter(n, factor=2)           lr = base_lr / factor^max(0, epoch - n + 1): the first n epochs
                                      at base_lr, then divided by ``factor`` every epoch (Zaremba et al.)
    ReduceOnPlateau(factor, patience) lr /= factor once the validation loss has not improved on its
                                      best for more than ``patience`` epochs in a row
    NewBob(factor=2, threshold=0.003) base_lr until an epoch lowers the validation loss by less than
                                      ``threshold`` of it, then lr /= factor after that epoch and every
                                      epoch after (Mikolov's RNNLM toolkit, which stops at the second miss;
                                      ``anneal_after=n``: start after epoch n at the latest)
    LambdaLR(fn)                      lr = base_lr * fn(epoch)  (``fn`` any callable of the epoch)
    MultiStep(milestones, factor=10)  lr = base_lr / factor^(milestones reached): [180] with 200
                                      epochs divides by 10 for the last 20 (FS-RNN on Penn Treebank)

Model-option schedules (``Trainer(model_options={"slope": linear(1.0, 5.0, per_epoch=0.04)})``) are
any callable of ``(epoch, step)`` (completed epochs, optimiser steps so far) returning a number; the
Trainer passes the value to ``model.set_option(name, value)`` before every chunk.

    linear(start, end, per_epoch)     min(end, start + per_epoch * epoch)  (max(...) when end < start)

Every schedule's state is a JSON-able dict (``state_dict()`` / ``load_state_dict()``) stored in
checkpoints, so a resumed run continues the same schedule.
"""

from __future__ import annotations

import math
from typing import Callable, Optional, cast

from ._checks import is_int, is_number, positive_number

__all__ = [
    "LRSchedule",
    "Constant",
    "HalveAfter",
    "ReduceOnPlateau",
    "NewBob",
    "LambdaLR",
    "MultiStep",
    "Linear",
    "linear",
    "Step",
    "step",
    "LR_SCHEDULES",
    "make_lr_schedule",
]


def _every(every: str) -> str:
    if every not in ("epoch", "step"):
        raise ValueError(f"every must be 'epoch' or 'step', got {every!r}")
    return every


def _divisor(factor) -> float:
    """A schedule's ``factor`` (the learning rate is divided by it), checked: a number > 1."""
    if not (is_number(factor) and factor > 1.0):
        raise ValueError(f"factor must be > 1 (the learning rate is divided by it), got {factor!r}")
    return float(factor)


def _fraction(x, name: str) -> float:
    """A relative threshold, checked: a number in [0, 1)."""
    if not (is_number(x) and 0.0 <= x < 1.0):
        raise ValueError(f"{name} must be in [0, 1), got {x!r}")
    return float(x)


class LRSchedule:
    """Base class. ``start(base_lr)`` once, then ``next_lr(epoch, lr, metric)`` after every epoch;
    with ``every="step"`` (the schedules that need no validation loss) ``next_lr(step, lr, None)``
    after every update instead, ``step`` counting the updates done, so a run shorter than an epoch
    still follows the schedule."""

    every = "epoch"

    def __init__(self):
        self.base_lr: Optional[float] = None

    def _with_every(self, params: dict) -> dict:
        return {**params, "every": self.every} if self.every != "epoch" else params

    def start(self, base_lr: float) -> None:
        """Record the learning rate training starts from (kept across a resume)."""
        if self.base_lr is None:
            self.base_lr = positive_number(base_lr, "base learning rate")

    def next_lr(self, epoch: int, lr: float, metric: Optional[float]) -> float:
        """The learning rate for the epoch after ``epoch`` completed epochs."""
        raise NotImplementedError

    def params(self) -> dict:
        """Constructor arguments (JSON-able)."""
        return {}

    def state_dict(self) -> dict:
        return {"name": type(self).__name__, "params": self.params(), "base_lr": self.base_lr}

    def load_state_dict(self, state: dict) -> None:
        if state.get("name") != type(self).__name__:
            raise ValueError(f"schedule state is for {state.get('name')!r}, this schedule is {type(self).__name__!r}")
        if state.get("params", {}) != self.params():
            raise ValueError(
                f"{type(self).__name__} was saved with {state.get('params')}, this one has {self.params()}"
            )
        self.base_lr = state.get("base_lr")

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"


class Constant(LRSchedule):
    """The learning rate never changes."""

    def next_lr(self, epoch, lr, metric):
        return lr


class HalveAfter(LRSchedule):
    """``base_lr`` for the first ``epoch_n`` epochs, then divided by ``factor`` (2) after every epoch."""

    def __init__(self, epoch_n: int, factor: float = 2.0, every: str = "epoch"):
        super().__init__()
        self.every = _every(every)
        if not is_int(epoch_n) or epoch_n < 0:
            raise ValueError(f"epoch_n must be an integer >= 0, got {epoch_n!r}")
        self.epoch_n = int(epoch_n)
        self.factor = _divisor(factor)

    def params(self):
        return self._with_every({"epoch_n": self.epoch_n, "factor": self.factor})

    def next_lr(self, epoch, lr, metric):
        return self.base_lr / self.factor ** max(0, epoch + 1 - self.epoch_n)


class ReduceOnPlateau(LRSchedule):
    """Divide the learning rate by ``factor`` when the monitored loss has not improved.

    An epoch improves when its loss is below ``best * (1 - threshold)``. After more than
    ``patience`` epochs in a row without improvement, lr becomes max(min_lr, lr / factor) and the
    count starts again.
    """

    def __init__(self, factor: float = 2.0, patience: int = 0, threshold: float = 0.0, min_lr: float = 0.0):
        super().__init__()
        self.factor = _divisor(factor)
        if not is_int(patience) or patience < 0:
            raise ValueError(f"patience must be an integer >= 0, got {patience!r}")
        self.patience = int(patience)
        self.threshold = _fraction(threshold, "threshold")
        self.min_lr = float(min_lr)
        if self.min_lr < 0:
            raise ValueError(f"min_lr must be >= 0, got {min_lr!r}")
        self.best: Optional[float] = None
        self.bad_epochs = 0

    def params(self):
        return {"factor": self.factor, "patience": self.patience, "threshold": self.threshold, "min_lr": self.min_lr}

    def next_lr(self, epoch, lr, metric):
        if metric is None or not math.isfinite(metric):
            raise ValueError(f"ReduceOnPlateau needs a finite loss after epoch {epoch}, got {metric!r}")
        if self.best is None or metric < self.best * (1.0 - self.threshold):
            self.best = float(metric)
            self.bad_epochs = 0
            return lr
        self.bad_epochs += 1
        if self.bad_epochs > self.patience:
            self.bad_epochs = 0
            return max(self.min_lr, lr / self.factor)
        return lr

    def state_dict(self):
        return {**super().state_dict(), "best": self.best, "bad_epochs": self.bad_epochs}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.best = state.get("best")
        self.bad_epochs = int(state.get("bad_epochs", 0))


class NewBob(LRSchedule):
    """The schedule of Mikolov's RNNLM toolkit ("newbob"): ``base_lr`` until the first *miss*, an epoch
    whose validation loss L_e is not below ``L_{e-1} * (1 - threshold)`` (the toolkit's ``min_improvement``
    1.003 on the log-likelihood); from then on lr /= ``factor`` after every epoch, that one included.
    The toolkit stops at the second miss: ``NewBob.misses(losses)`` counts them over a run's validation
    losses (``misses(...) >= 2``), with the same test. The toolkit also puts back the previous weights
    after an epoch that made the validation loss worse; this schedule does not (``Trainer.restore_best()``
    at the end gives the best epoch's). ``anneal_after=n`` (not the toolkit's) starts the halving after
    epoch n at the latest, for a run whose epochs are capped before its first miss.
    """

    def __init__(self, factor: float = 2.0, threshold: float = 0.003, anneal_after: Optional[int] = None):
        super().__init__()
        self.factor = _divisor(factor)
        self.threshold = _fraction(threshold, "threshold")
        if anneal_after is not None and (not is_int(anneal_after) or anneal_after < 0):
            raise ValueError(f"anneal_after must be None or an integer >= 0, got {anneal_after!r}")
        self.anneal_after = None if anneal_after is None else int(anneal_after)
        self.last: Optional[float] = None
        self.annealing = False

    def params(self):
        p = {"factor": self.factor, "threshold": self.threshold}
        if self.anneal_after is not None:  # absent when unset: checkpoints from before it existed still load
            p["anneal_after"] = self.anneal_after
        return p

    def missed(self, before: float, after: float) -> bool:
        """Whether an epoch that took the validation loss from ``before`` to ``after`` is a miss."""
        return not after < before * (1.0 - self.threshold)

    def misses(self, losses) -> int:
        """The misses among consecutive validation losses (one per epoch)."""
        return sum(1 for a, b in zip(losses, losses[1:]) if self.missed(a, b))

    def next_lr(self, epoch, lr, metric):
        if metric is None or not math.isfinite(metric):
            raise ValueError(f"NewBob needs a finite loss after epoch {epoch}, got {metric!r}")
        if self.last is not None and self.missed(self.last, metric):
            self.annealing = True
        if self.anneal_after is not None and epoch >= self.anneal_after:
            self.annealing = True
        self.last = float(metric)
        return lr / self.factor if self.annealing else lr

    def state_dict(self):
        return {**super().state_dict(), "last": self.last, "annealing": self.annealing}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.last = state.get("last")
        self.annealing = bool(state.get("annealing", False))


class LambdaLR(LRSchedule):
    """``lr = base_lr * fn(epoch)`` for any callable ``fn`` of the completed epochs (PyTorch's rule).

    The callable itself is not saved in checkpoints: pass the same one when resuming.
    """

    def __init__(self, fn: Callable[[int], float], every: str = "epoch"):
        super().__init__()
        self.every = _every(every)
        if not callable(fn):
            raise TypeError(f"LambdaLR needs a callable of the epoch, got {type(fn).__name__}")
        self.fn = fn

    def params(self):
        return self._with_every({"fn": getattr(self.fn, "__name__", type(self.fn).__name__)})

    def next_lr(self, epoch, lr, metric):
        return self.base_lr * float(self.fn(epoch))


class MultiStep(LRSchedule):
    """``base_lr / factor^k``, k the number of ``milestones`` (completed-epoch counts) reached.

    ``MultiStep([180], factor=10)`` trains epochs 1-180 at ``base_lr`` and epochs 181-200 at
    ``base_lr / 10``: the FS-RNN paper's "divide by 10 for the last 20 epochs" on Penn Treebank.
    """

    def __init__(self, milestones, factor: float = 10.0, every: str = "epoch"):
        super().__init__()
        self.every = _every(every)
        ms = list(milestones) if not isinstance(milestones, (int, float)) else [milestones]
        for m in ms:
            if not is_int(m) or m < 1:
                raise ValueError(f"milestones must be whole numbers of {self.every}s >= 1, got {milestones!r}")
        if not ms:
            raise ValueError(f"milestones: give at least one count of {self.every}s (e.g. [180]), got none")
        self.milestones = sorted(int(m) for m in ms)
        self.factor = _divisor(factor)

    def params(self):
        return self._with_every({"milestones": list(self.milestones), "factor": self.factor})

    def next_lr(self, epoch, lr, metric):
        return self.base_lr / self.factor ** sum(1 for m in self.milestones if epoch >= m)


def check_lr_schedule(schedule: Optional[LRSchedule]) -> Optional[LRSchedule]:
    """``schedule`` when it is an :class:`LRSchedule` or None; ``TypeError`` pointing to
    :func:`make_lr_schedule` otherwise (a name such as ``"halve"`` given in its place)."""
    if schedule is not None and not isinstance(schedule, LRSchedule):
        raise TypeError(
            f"lr_schedule must be a multiscale_rnn.schedules.LRSchedule or None, got {schedule!r:.60} "
            f"(schedules.make_lr_schedule(name, ...) builds one by name, e.g. make_lr_schedule('halve', epoch_n=4))"
        )
    return schedule


LR_SCHEDULES = {cls.__name__: cls for cls in (Constant, HalveAfter, ReduceOnPlateau, NewBob, MultiStep)}


#: The names a schedule is built by (spelled without case, ``-`` or ``_``) and the short name each stands for.
LR_SCHEDULE_NAMES = {
    "constant": "constant",
    "none": "constant",
    "halve": "halve",
    "halveafter": "halve",
    "plateau": "plateau",
    "reduceonplateau": "plateau",
    "newbob": "newbob",
    "multistep": "multistep",
}


def lr_schedule_name(name: str) -> str:
    """The short name (``constant``, ``halve``, ``plateau``, ``newbob``, ``multistep``) of a schedule's name or
    alias (``Halve-After``, ``reduce_on_plateau``, ``none``); ``ValueError`` for an unknown one."""
    key = str(name).strip().lower().replace("_", "").replace("-", "")
    if key not in LR_SCHEDULE_NAMES:
        names = ", ".join(dict.fromkeys(LR_SCHEDULE_NAMES.values()))
        raise ValueError(f"unknown learning-rate schedule {name!r}; choose one of {names}")
    return LR_SCHEDULE_NAMES[key]


def make_lr_schedule(name: str, **params) -> LRSchedule:
    """Build a schedule by name: ``constant``, ``halve`` / ``halveafter``, ``plateau`` /
    ``reduceonplateau``, ``newbob``, ``multistep``."""
    classes = {
        "constant": Constant,
        "halve": HalveAfter,
        "plateau": ReduceOnPlateau,
        "newbob": NewBob,
        "multistep": MultiStep,
    }
    return classes[lr_schedule_name(name)](**params)


class Linear:
    """``min(end, start + per_epoch * epoch)`` (``max`` when ``end < start``); a callable of
    ``(epoch, step=0)``. ``epoch`` may be fractional. With ``per_step`` instead of ``per_epoch``
    the value moves after every update: ``start + per_step * step``."""

    def __init__(self, start: float, end: float, per_epoch: Optional[float] = None, per_step: Optional[float] = None):
        if (per_epoch is None) == (per_step is None):
            raise ValueError("a linear schedule needs exactly one of per_epoch and per_step")
        self.per = "epoch" if per_step is None else "step"
        rate = cast(float, per_epoch if per_step is None else per_step)  # exactly one is given
        self.start, self.end, self.per_epoch = float(start), float(end), float(rate)
        for k, v in self.params().items():
            if not math.isfinite(v):
                raise ValueError(f"linear schedule {k} must be finite, got {v!r}")
        if (self.end - self.start) * self.per_epoch < 0:
            raise ValueError(f"linear schedule from {start} to {end} cannot get there with per_epoch={per_epoch}")

    def __call__(self, epoch: float, step: int = 0) -> float:
        value = self.start + self.per_epoch * (epoch if self.per == "epoch" else step)
        return min(self.end, value) if self.end >= self.start else max(self.end, value)

    def params(self) -> dict:
        return {"start": self.start, "end": self.end, f"per_{self.per}": self.per_epoch}

    def state_dict(self) -> dict:
        return {"name": "Linear", "params": self.params()}

    def __repr__(self) -> str:
        return f"linear(start={self.start}, end={self.end}, per_{self.per}={self.per_epoch})"


def linear(start: float, end: float, per_epoch: Optional[float] = None, per_step: Optional[float] = None) -> Linear:
    """A model-option schedule: ``min(end, start + per_epoch * epoch)`` (e.g. the HM-LSTM slope,
    ``linear(1.0, 5.0, per_epoch=0.04)``), or ``start + per_step * step`` moving after every update."""
    return Linear(start, end, per_epoch, per_step)


class Step:
    """``before`` until ``at`` (an epoch, fractional allowed, or an update count with
    ``per="step"``), ``after`` from then on; a callable of ``(epoch, step=0)``."""

    def __init__(self, before: float, after: float, at: float, per: str = "epoch"):
        if per not in ("epoch", "step"):
            raise ValueError(f"a step schedule counts per 'epoch' or 'step', got {per!r}")
        self.before, self.after, self.at, self.per = float(before), float(after), float(at), per
        for k, v in self.params().items():
            if not math.isfinite(v):
                raise ValueError(f"step schedule {k} must be finite, got {v!r}")

    def __call__(self, epoch: float, step: int = 0) -> float:
        now = epoch if self.per == "epoch" else step
        return self.before if now < self.at else self.after

    def params(self) -> dict:
        return {"before": self.before, "after": self.after, f"at_{self.per}": self.at}

    def state_dict(self) -> dict:
        return {"name": "Step", "params": self.params()}

    def __repr__(self) -> str:
        return f"step(before={self.before}, after={self.after}, at_{self.per}={self.at})"


def step(before: float, after: float, at_epoch: Optional[float] = None, at_step: Optional[int] = None) -> Step:
    """A model-option schedule that changes once: ``before`` until epoch ``at_epoch`` (or update
    ``at_step``), then ``after``; e.g. the HM-LSTM's gradient reading, blended first and switched
    once the boundaries have settled: ``{"blend": step(1, 0, at_epoch=4)}``."""
    if (at_epoch is None) == (at_step is None):
        raise ValueError("a step schedule needs exactly one of at_epoch and at_step")
    at = cast(float, at_epoch if at_step is None else at_step)  # exactly one is given
    return Step(before, after, at, "epoch" if at_step is None else "step")
