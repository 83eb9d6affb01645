"""Early stopping on the validation loss (``Trainer(early_stopping=EarlyStopping(patience=3))``): a hook
that stops the run once the validation loss has not improved for ``patience`` epochs and puts the best
parameters back at the end. Its counters are part of the trainer's saved state, so a resumed run counts on."""

from __future__ import annotations

from typing import Any, Dict, Optional

from .._checks import is_number, non_negative_number, positive_int
from .hooks import FitRun, Hook

__all__ = ["EarlyStopping"]


class EarlyStopping(Hook):
    """Stop training when the validation loss has not improved for ``patience`` epochs.

    Parameters
    ----------
    patience : epochs without improvement after which the run stops (an integer >= 1): with 3, a run whose
        best epoch is 4 stops at the end of epoch 7 unless epoch 5, 6 or 7 improves on it.
    min_delta : how much lower than the best so far (in nats per token, the unit of ``valid_loss``) an
        epoch's validation loss must be to count as an improvement (a finite number >= 0; 0: any decrease).
    restore_best : at the end of ``fit`` (stopped early, or all its epochs done; not when ``max_chunks``
        cut it short), put the best model the trainer kept back (``trainer.best_params`` and the options'
        values then, ``trainer.best_options``: the epoch of lowest validation loss, ``trainer.best_epoch``).

    Needs validation data (``fit(valid=...)`` or a corpus with a valid split). The checkpoint written at the
    epoch that stops the run holds that epoch's (last) parameters, as every checkpoint does, and the best
    ones in its trainer state (``multiscale-rnn evaluate --best``). The counters (``best``, ``best_epoch``,
    ``bad``, ``stopped_epoch``) are saved with the trainer's state; a run resumed after it stopped stays
    stopped unless given a larger ``patience``.
    """

    def __init__(self, patience: int = 3, min_delta: float = 0.0, restore_best: bool = True) -> None:
        self.patience = positive_int(patience, "early stopping patience")
        if not is_number(min_delta):
            raise ValueError(f"early stopping min_delta must be a finite number >= 0 (nats), got {min_delta!r}")
        self.min_delta = non_negative_number(min_delta, "early stopping min_delta")
        if not isinstance(restore_best, bool):
            raise TypeError(f"early stopping restore_best must be True or False, got {restore_best!r}")
        self.restore_best = restore_best
        self.best: Optional[float] = None  #: the lowest validation loss that counted as an improvement
        self.best_epoch: Optional[int] = None  #: its epoch
        self.bad = 0  #: epochs since then without improvement
        self.stopped_epoch: Optional[int] = None  #: the epoch at whose end the run stopped (None: it did not)
        self._replay = False  # counters to be read from the history at the next fit (a state without them)

    def __repr__(self) -> str:
        return f"EarlyStopping(patience={self.patience}, min_delta={self.min_delta})"

    # ---- state ------------------------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """The counters, for the trainer's saved state (``Trainer.state_dict()["early_stopping"]``)."""
        return {"best": self.best, "best_epoch": self.best_epoch, "bad": self.bad, "stopped_epoch": self.stopped_epoch}

    def load_state_dict(self, state: Optional[Dict[str, Any]]) -> None:
        """Counters saved by ``state_dict`` (checked by ``training.state.check_state``); None (a run saved
        without early stopping): they are counted again from the trainer's history when ``fit`` starts."""
        if state is None:
            self.best, self.best_epoch, self.bad, self.stopped_epoch = None, None, 0, None
            self._replay = True
            return
        self.best = None if state.get("best") is None else float(state["best"])
        self.best_epoch = state.get("best_epoch")
        self.bad = int(state.get("bad", 0))
        self.stopped_epoch = state.get("stopped_epoch")
        self._replay = False

    # ---- events -----------------------------------------------------------------------------------
    def observe(self, epoch: int, loss: Optional[float]) -> bool:
        """Count the validation loss of ``epoch``; True when it is an improvement."""
        if loss is None or not is_number(loss):
            self.bad += 1
            return False
        if self.best is None or loss < self.best - self.min_delta:
            self.best, self.best_epoch, self.bad = float(loss), int(epoch), 0
            return True
        self.bad += 1
        return False

    def on_fit_start(self, run: FitRun) -> None:
        """Count the history of a run saved without early stopping; a run that stopped stays stopped."""
        if self._replay:
            self._replay = False
            for row in run.trainer.history:
                self.observe(row["epoch"], row.get("valid_loss"))
        if self.bad >= self.patience:
            self.stopped_epoch = self.stopped_epoch or run.trainer.epoch
            run.stop(save=False)
        elif self.stopped_epoch is not None:  # a larger patience: the run goes on
            self.stopped_epoch = None

    def on_evaluate(self, run: FitRun, row: dict) -> None:
        self.observe(row["epoch"], row.get("valid_loss"))

    def on_epoch_end(self, run: FitRun, row: dict) -> None:
        if self.bad >= self.patience:
            self.stopped_epoch = row["epoch"]
            row["early_stop"] = True
            run.stop()  # after this epoch's checkpoint, which holds the counters

    def on_fit_end(self, run: FitRun) -> None:
        trainer = run.trainer
        if self.restore_best and (self.stopped_epoch is not None or trainer.epoch >= run.epochs):
            trainer.restore_best()
