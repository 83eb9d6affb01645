"""The training API under its first name: ``multiscale_rnn.trainer.Trainer`` and friends, which live in
``multiscale_rnn.training`` (one module per job; see its docstring)."""

from .training import (  # noqa: F401 - re-exported
    BITS_LABELS,
    EVENTS,
    FitRun,
    History,
    Hook,
    Step,
    Trainer,
    auto_select_after,
    best_of,
    bits_label,
    evaluate,
    history_path,
    sample,
    training_data,
)

__all__ = ["Trainer", "History", "evaluate", "sample", "history_path"]
