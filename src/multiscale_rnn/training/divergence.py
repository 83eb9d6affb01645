"""The divergence guard (``Trainer(divergence=...)``): a validation figure far above the best so far
stops the run, says so, puts the best parameters back and leaves the last checkpoint as it was."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

from .evaluation import bits, bits_label
from .hooks import FitRun, Hook

__all__ = ["DivergenceGuard", "MISSING"]

#: ``DivergenceGuard.load_state_dict``'s state of a checkpoint saved before the guard's state was
MISSING = object()


class DivergenceGuard(Hook):
    """The trainer's divergence guard, kept from one ``fit`` call to the next; it reads the margin from
    ``trainer.divergence`` at every epoch (None: off) and records a stop in ``trainer.diverged``.

    Its baseline is the best validation loss since the model's own schedules last changed the model
    (``on_model_changed``: a boundary detector starting after its warm-up makes a new model, whose first
    epochs are not compared with the old one's), with its epoch and parameters."""

    def __init__(self):
        self.baseline: Optional[dict] = None  # {"loss", "epoch", "params", "options"}; None until an epoch sets it
        self.tripped = False  # the epoch being ended diverged

    def state_dict(self) -> Optional[Dict[str, Any]]:
        """The baseline, for the trainer's saved state (``Trainer.state_dict()["divergence"]``): a resumed run
        compares its next epoch with the best before the stop, not with nothing."""
        return None if self.baseline is None else dict(self.baseline)

    def load_state_dict(self, state: Optional[Dict[str, Any]], trainer) -> None:
        """A baseline saved by ``state_dict`` (checked by ``training.state.check_state``), or None. A state
        saved before the guard's was (``missing``) takes the trainer's best epoch instead."""
        if state is MISSING:
            state = None
            if trainer.best_params is not None:
                state = {"loss": trainer.best_loss, "epoch": trainer.best_epoch, "params": trainer.best_params,
                         "options": trainer.best_options or {}}  # fmt: skip
        if state is None:
            self.baseline = None
            return
        self.baseline = {
            "loss": float(state["loss"]),
            "epoch": int(state["epoch"]),
            "params": np.array(state["params"], copy=True),
            "options": {str(k): float(v) for k, v in (state.get("options") or {}).items()},
        }

    def on_fit_start(self, run: FitRun) -> None:
        """``trainer.diverged`` speaks of this ``fit`` call: a run continued after a stop starts without one."""
        run.trainer.diverged = None

    def on_model_changed(self, run: FitRun, names: List[str]) -> None:
        self.baseline = None  # the model itself changed (a detector started): a new baseline

    def on_evaluate(self, run: FitRun, row: dict) -> None:
        """Compare the epoch's validation figure with the baseline: mark the row diverged, or move the baseline."""
        trainer, metric = run.trainer, row["valid_loss"]
        self.tripped = False
        if metric is None or trainer.divergence is None:
            return
        g = self.baseline
        if g is not None and not (bits(metric) <= bits(g["loss"]) + trainer.divergence):
            row["diverged"] = True
            self.tripped = True
            trainer.diverged = {
                "epoch": row["epoch"],
                "valid_bits": bits(metric),
                "best_bits": bits(g["loss"]),
                "best_epoch": g["epoch"],
            }
        elif g is None or metric < g["loss"]:
            self.baseline = {
                "loss": float(metric),
                "epoch": row["epoch"],
                "params": np.array(trainer.model.flat_parameters(), copy=True),
                "options": dict(trainer.option_values),
            }

    def on_epoch_end(self, run: FitRun, row: dict) -> None:
        """Stop a run that diverged in this epoch: say so, and put the best model back (parameters, options)."""
        if not self.tripped:
            return
        self.tripped = False
        trainer = run.trainer
        d = trainer.diverged
        label = bits_label(trainer.unit)
        kept = (
            f"the last checkpoint {run.last_checkpoint} is left as it was"
            if run.last_checkpoint is not None
            else "no checkpoint was written"
        )
        message = (
            f"epoch {d['epoch']}: validation {label} {d['valid_bits']:.4f} is {d['valid_bits'] - d['best_bits']:.2f} "
            f"above the best so far ({d['best_bits']:.4f}, epoch {d['best_epoch']}): the run has diverged. "
            f"Training stopped; the model holds the best parameters (epoch {d['best_epoch']}) and {kept}. "
            f"Lower the learning rate or tighten clipping to go on, or pass divergence=None "
            f"(--divergence none) to train through it."
        )
        assert self.baseline is not None  # a run diverges from a best figure, whose parameters were kept
        trainer.put_back(self.baseline["params"], self.baseline["options"])
        run.stop(warning=message, save=False)
