"""The progress display of ``Trainer.fit``: a tqdm bar where it is drawn (a terminal, a Jupyter
notebook), plain lines otherwise (log files), and a line per epoch (``Trainer(progress=...)``)."""

from __future__ import annotations

import sys
import time
from typing import Optional

from .evaluation import bits, bits_label
from .hooks import FitRun, Hook, Step

__all__ = ["ProgressLines", "ProgressDisplay", "progress_mode"]


class ProgressLines:
    """Progress as plain lines on standard error (for logs): about every 10 % of the epoch, at
    least every 30 s, never more than once a second."""

    def __init__(self, epoch_no: int, epochs: int, n_chunks: int, label: str):
        self.head = f"epoch {epoch_no}/{epochs}"
        self.n_chunks, self.label = n_chunks, label
        self.every = max(1, n_chunks // 10)
        self.last = time.perf_counter()
        self.loss = self.tokens = self.seconds = 0.0

    def update(self, chunk: int, loss: float, tokens: int, seconds: float) -> None:
        """Count a chunk; print a line (the mean since the last one) when one is due."""
        self.loss += loss * tokens
        self.tokens += tokens
        self.seconds += seconds
        now = time.perf_counter()
        if (chunk % self.every == 0 and now - self.last >= 1.0) or now - self.last >= 30.0 or chunk == self.n_chunks:
            mean = self.loss / max(self.tokens, 1)
            print(
                f"{self.head} chunk {chunk}/{self.n_chunks}: loss {mean:.4f}, {self.label} {bits(mean):.4f}, "
                f"{self.tokens / max(self.seconds, 1e-9):,.0f} tokens/s",
                file=sys.stderr,
                flush=True,
            )
            self.last = now
            self.loss = self.tokens = self.seconds = 0.0


def progress_mode(progress, tqdm=True) -> Optional[str]:
    """None, "bar" or "lines" for ``Trainer(progress=...)`` (True picks the bar only when standard error is
    a terminal or the output goes to a Jupyter notebook; lines when ``tqdm`` is None: no tqdm)."""
    if not progress:
        return None
    if progress is True:  # a bar where it is drawn: a terminal or a Jupyter notebook
        from .._progress import in_notebook

        tty = getattr(sys.stderr, "isatty", None)
        mode = "bar" if (tty is not None and tty()) or in_notebook() else "lines"
    else:
        mode = progress
    return "lines" if mode == "bar" and tqdm is None else mode


class ProgressDisplay(Hook):
    """The progress of one ``fit`` call on the rank that prints: a bar or lines per epoch (the mode is
    chosen again at every epoch from ``trainer.progress``), then the epoch's line (``epoch 3: train
    bpc 1.2345, valid bpc 1.3456, 12,345 tokens/s, 6.7 s``)."""

    def __init__(self, trainer):
        try:
            from .._progress import bar_class

            self.tqdm = bar_class()  # tqdm's notebook widget only where ipywidgets is installed: no IProgress warning
        except ImportError:  # pragma: no cover - tqdm is a dependency
            self.tqdm = None
        self.label = bits_label(trainer.unit)
        self.bar = self.lines = None

    def on_epoch_start(self, run: FitRun) -> None:
        trainer, epoch_no = run.trainer, run.trainer.epoch + 1
        self.lines = None
        mode = progress_mode(trainer.progress, self.tqdm)
        if mode == "lines":
            self.lines = ProgressLines(epoch_no, run.epochs, run.n_chunks, self.label)
        elif mode == "bar":
            self.bar = self.tqdm(
                total=run.n_chunks,
                initial=trainer.chunk,
                desc=f"epoch {epoch_no}/{run.epochs}",
                unit="chunk",
                leave=False,
                dynamic_ncols=True,
            )

    def on_step(self, run: FitRun, step: Step) -> None:
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(
                {
                    "loss": f"{step.loss:.3f}",
                    self.label: f"{bits(step.loss):.3f}",
                    **{name: f"{v:.4g}" for name, v in step.aux.items()},
                    "tok/s": f"{step.tokens_per_s:,.0f}",
                },
                refresh=False,
            )
        if self.lines is not None:
            self.lines.update(step.chunk, step.loss, step.tokens, step.seconds)

    def on_chunks_end(self, run: FitRun) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def on_epoch_end(self, run: FitRun, row: dict) -> None:
        trainer = run.trainer
        if not trainer.progress:
            return
        label = bits_label(trainer.unit)
        valid_txt = f", valid {label} {row['valid_bpc']:.4f}" if row["valid_bpc"] is not None else ""
        text = (
            f"epoch {row['epoch']}: train {label} {row['train_bpc']:.4f}{valid_txt}, "
            f"{row['tokens_per_s']:,.0f} tokens/s, {row['seconds']:.1f} s"
        )
        if progress_mode(trainer.progress) == "bar":
            from .._progress import bar_class

            bar_class().write(text)
        else:
            print(text, file=sys.stderr, flush=True)
