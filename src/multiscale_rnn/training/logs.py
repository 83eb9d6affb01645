"""Logs a program can read: the CSV of every optimiser step written beside the checkpoint, and TensorBoard
event files (``Trainer(tensorboard=DIR)``). Both are hooks on the events of ``fit``.

The CSV (``runs/x.npz`` -> ``runs/x.csv``) has one row per optimiser step::

    step,epoch,chunk,loss,bpc,lr,grad_norm,tokens,tokens_per_s,seconds,<aux terms>,valid_loss,valid_bpc

``valid_loss`` and ``valid_bpc`` are filled on the last step of each epoch (empty elsewhere); the model's
auxiliary objective terms (``model.aux_terms``, e.g. ``vc_penalty``) have a column each. Rows reach the file
when a checkpoint is written, before it, so the CSV never lacks a row the checkpoint has trained; a resumed
run first drops the rows after the checkpoint's step, so its CSV is the uninterrupted run's (but for the
wall-clock columns ``tokens_per_s`` and ``seconds``).
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from ..storage import append_lines, atomic_write_text
from .evaluation import bits
from .hooks import FitRun, Hook, Step

__all__ = [
    "CSV_COLUMNS",
    "WALL_CLOCK_COLUMNS",
    "csv_path",
    "csv_columns",
    "CsvLog",
    "TensorBoardLog",
    "summary_writer",
    "writer_class",
]

#: The columns of the CSV log before the auxiliary terms' and the validation figures'.
CSV_COLUMNS = ("step", "epoch", "chunk", "loss", "bpc", "lr", "grad_norm", "tokens", "tokens_per_s", "seconds")
#: The columns that measure time: they differ between two runs that are otherwise the same.
WALL_CLOCK_COLUMNS = ("tokens_per_s", "seconds")


def csv_path(checkpoint: Union[str, Path]) -> Path:
    """Where the CSV log of a checkpoint goes: ``runs/x.npz`` -> ``runs/x.csv``."""
    p = Path(checkpoint)
    return p.with_suffix(".csv") if p.suffix else p.with_name(p.name + ".csv")


def csv_columns(aux_terms) -> List[str]:
    """The CSV's header for a model with the auxiliary terms ``aux_terms``."""
    return list(CSV_COLUMNS) + [str(a) for a in aux_terms] + ["valid_loss", "valid_bpc"]


def _cell(value: Any) -> str:
    """A CSV cell: empty for None, a float as Python writes it (read back exactly by ``float``)."""
    return "" if value is None else repr(float(value)) if isinstance(value, float) else str(value)


class CsvLog(Hook):
    """Writes the CSV log of ``fit`` beside its checkpoint (on the rank that writes; nothing without a
    checkpoint). Rows are kept in memory and appended to the file (flushed and synced) at every
    ``on_checkpoint``, before the checkpoint writer, and at the end of ``fit``."""

    def __init__(self) -> None:
        self.path: Optional[Path] = None
        self.columns: List[str] = []
        self.pending: List[Dict[str, Any]] = []

    def on_fit_start(self, run: FitRun) -> None:
        """Keep the rows of the steps the trainer has done (a resumed or continued run) and drop the rest."""
        trainer = run.trainer
        self.pending = []
        if run.checkpoint is None or not trainer.speaks:
            self.path = None
            return
        self.path = csv_path(run.checkpoint)
        self.columns = csv_columns(getattr(trainer.model, "aux_terms", ()))
        kept: List[Dict[str, Any]] = []
        if trainer.step > 0 and self.path.exists():
            with open(self.path, newline="", encoding="utf-8") as f:
                kept = [r for r in csv.DictReader(f) if r.get("step", "").isdigit() and int(r["step"]) <= trainer.step]
        text = io.StringIO()
        writer = csv.DictWriter(text, self.columns, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(kept)
        atomic_write_text(self.path, text.getvalue())

    def on_step(self, run: FitRun, step: Step) -> None:
        if self.path is None:
            return
        row = {
            "step": step.step,
            "epoch": step.epoch,
            "chunk": step.chunk,
            "loss": step.loss,
            "bpc": bits(step.loss),
            "lr": step.lr,
            "grad_norm": step.grad_norm,
            "tokens": step.tokens,
            "tokens_per_s": step.tokens_per_s,
            "seconds": step.seconds,
            **step.aux,
        }
        self.pending.append(row)

    def on_evaluate(self, run: FitRun, row: dict) -> None:
        if self.path is not None and self.pending and row.get("valid_loss") is not None:
            self.pending[-1].update(valid_loss=row["valid_loss"], valid_bpc=row["valid_bpc"])

    def on_checkpoint(self, run: FitRun) -> None:
        self.flush()

    def on_fit_end(self, run: FitRun) -> None:
        self.flush()

    def flush(self) -> None:
        """Append the rows kept since the last write to the file, and sync it."""
        if self.path is None or not self.pending:
            return
        text = io.StringIO()
        writer = csv.DictWriter(text, self.columns, extrasaction="ignore", lineterminator="\n")
        writer.writerows({k: _cell(v) for k, v in r.items()} for r in self.pending)
        append_lines(self.path, text.getvalue())  # a failed append leaves the rows before intact
        self.pending = []


_WRITERS = 0  # writers made by this process


def writer_class() -> Any:
    """The TensorBoard ``SummaryWriter`` class: tensorboardX's, else PyTorch's (``torch.utils.tensorboard``,
    which needs the tensorboard package); ``ImportError`` naming the extra to install when neither imports."""
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        try:
            from torch.utils.tensorboard import SummaryWriter  # type: ignore[no-redef]
        except ImportError:
            raise ImportError(
                "tensorboard= (--tensorboard) writes TensorBoard event files with tensorboardX, which is not "
                'installed: pip install "multiscale-rnn[tensorboard]" (or pip install tensorboardX)'
            ) from None
    return SummaryWriter


def summary_writer(logdir: Union[str, Path], purge_step: Optional[int] = None) -> Any:
    """A TensorBoard ``SummaryWriter`` of ``logdir`` (see :func:`writer_class`). ``purge_step``: events of that
    step and later, left in the folder by an earlier run, are hidden (a resumed run writes them again)."""
    global _WRITERS
    _WRITERS += 1  # the files are named by the second they were made in: a suffix keeps two runs' files apart
    suffix = f".{os.getpid()}.{_WRITERS}.from-step-{purge_step or 0}"
    return writer_class()(str(logdir), purge_step=purge_step, filename_suffix=suffix)


class TensorBoardLog(Hook):
    """Writes ``fit``'s figures as TensorBoard scalars under ``logdir`` (on the rank that writes), at the
    optimiser step as global step: ``train/loss``, ``train/bpc``, ``train/lr``, ``train/grad_norm``,
    ``train/tokens_per_s``, ``train/aux/NAME`` every step; ``epoch/train_loss``, ``epoch/train_bpc``,
    ``epoch/valid_loss``, ``epoch/valid_bpc`` at the end of each epoch. A resumed run hides the events an
    earlier run wrote after its checkpoint (``purge_step``)."""

    def __init__(self, logdir: Union[str, Path]) -> None:
        self.logdir = Path(logdir)
        self.writer: Any = None

    def on_fit_start(self, run: FitRun) -> None:
        if run.trainer.speaks:
            step = run.trainer.step
            self.writer = summary_writer(self.logdir, purge_step=step + 1 if step > 0 else None)

    def on_step(self, run: FitRun, step: Step) -> None:
        w = self.writer
        if w is None:
            return
        scalars = {"loss": step.loss, "bpc": bits(step.loss), "lr": step.lr, "tokens_per_s": step.tokens_per_s}
        if step.grad_norm is not None:
            scalars["grad_norm"] = step.grad_norm
        scalars.update({f"aux/{k}": v for k, v in step.aux.items()})
        for name, value in scalars.items():
            w.add_scalar(f"train/{name}", value, step.step)

    def on_epoch_end(self, run: FitRun, row: dict) -> None:
        if self.writer is None:
            return
        for key in ("train_loss", "train_bpc", "valid_loss", "valid_bpc"):
            if row.get(key) is not None:
                self.writer.add_scalar(f"epoch/{key}", row[key], row["steps"])

    def on_checkpoint(self, run: FitRun) -> None:
        if self.writer is not None:
            self.writer.flush()

    def on_fit_end(self, run: FitRun) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
