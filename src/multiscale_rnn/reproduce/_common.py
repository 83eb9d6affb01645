"""What every reproduction shares: its declaration (``Reproduction``), the budget of a run, the results
file of finished units (JSON lines, one object per unit or epoch), the machine line of a report, and
the progress lines of a run."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np

from ..data.loaders import FILES
from ..storage import append_lines, atomic_write_text, read_json_lines

__all__ = [
    "Reproduction",
    "Budget",
    "BudgetSpent",
    "Results",
    "unit_checkpoint",
    "cpu_name",
    "machine",
    "setup",
    "setup_labels",
    "markdown_table",
    "say",
    "figure",
    "epoch_curves",
    "UnitProgress",
    "PTB_CHAR_FILES",
    "PTB_WORD_FILES",
    "TEXT8_FILES",
    "file_names",
]


@dataclass(frozen=True)
class Reproduction:
    """One reproducible table or figure of a paper.

    ``run(out_dir, budget, progress, data_path)`` trains what is missing in ``out_dir`` (resuming from
    the checkpoints there) and stops when ``budget`` says so; ``report(out_dir)`` returns the markdown
    of what ``out_dir`` holds, the paper's numbers beside ours. ``data_files`` are the files
    ``--data-path`` must hold, each a tuple of the names it may have (``data.loaders.FILES``' entries; empty:
    generated data, no path needed). ``scale(minutes)`` describes the
    scale a budget runs at. ``figures(out_dir)``, when given, draws the report's figures into ``out_dir``
    (PNG files, which the report shows) after a run. ``estimate(minutes)`` is the wall-clock minutes a
    run at that budget is expected to take on one thread (at most the budget, where a run stops).
    ``data_note`` says what a reproduction without ``data_files`` reads (empty: data it generates)."""

    name: str
    paper: str
    what: str
    default_budget: float
    reduced: bool
    scale: Callable[[float], str]
    run: Callable
    report: Callable[[Path], str]
    data_files: Tuple[Tuple[str, ...], ...] = ()
    seeds: str = "0"
    figures: Optional[Callable[[Path], None]] = None
    estimate: Optional[Callable[[float], float]] = None
    data_note: str = ""  # what it reads when it needs no --data-path files (empty: generated data)


#: The files ``--data-path`` must hold for Penn Treebank's character-level splits, its word-level splits and text8
#: (the loaders' declaration: each file a tuple of the names it may have).
PTB_CHAR_FILES = FILES["ptb-char"]
PTB_WORD_FILES = FILES["ptb-word"]
TEXT8_FILES = FILES["text8-word"]


def file_names(files: Tuple[Tuple[str, ...], ...]) -> str:
    """``files`` (``Reproduction.data_files``) as a phrase: ``a, b, c`` (a file of several names: ``x or y``)."""
    return ", ".join(" or ".join(names) for names in files)


#: Below this many minutes a run is the smoke scale: tiny models on whatever data is given (for tests).
SMOKE_MINUTES = 1.0


class BudgetSpent(Exception):
    """Raised inside a run when its budget (minutes, or units of this call) is spent."""


class Budget:
    """The time a reproduction may take over all its calls, the scale it runs at, and the units this call may
    finish.

    ``limit``: this call's budget, the minutes of the whole run over all its calls; the minutes spent are kept
    in ``out_dir/spent.json`` (updated after every epoch), so that a run killed and started again counts the
    time of its earlier calls. ``minutes``: the budget that sets the run's scale (the epochs and sizes of its
    models), ``scale_minutes`` when given (the first call's, ``reproduce.run`` keeps it in
    ``out_dir/scale.json``), else ``limit``. ``max_units`` (tests, or a call of a known length) stops the call
    after that many newly finished units."""

    def __init__(
        self, minutes: float, out_dir: Path, max_units: Optional[int] = None, scale_minutes: Optional[float] = None
    ):
        self.limit = float(minutes)
        self.minutes = self.limit if scale_minutes is None else float(scale_minutes)
        self.smoke = self.minutes < SMOKE_MINUTES
        self.path = Path(out_dir) / "spent.json"
        self.max_units = max_units
        self.units_done = 0
        self.before = json.loads(self.path.read_text())["seconds"] if self.path.exists() else 0.0
        self.t0 = time.perf_counter()

    def seconds(self) -> float:
        """Seconds spent over every call of this run, this one included."""
        return self.before + time.perf_counter() - self.t0

    def save(self) -> None:
        """Write the seconds spent so far (called after every epoch and unit)."""
        atomic_write_text(self.path, json.dumps({"seconds": self.seconds()}))

    def check(self) -> None:
        """Raise ``BudgetSpent`` when the minutes or this call's units are used up."""
        self.save()
        if self.max_units is not None and self.units_done >= self.max_units:
            raise BudgetSpent(f"stopped after {self.units_done} unit(s) (max_units)")
        if not self.smoke and self.seconds() >= 60.0 * self.limit:
            raise BudgetSpent(f"the budget of {self.limit:g} minutes is spent")

    def unit_finished(self) -> None:
        """Count a unit finished in this call."""
        self.units_done += 1
        self.save()


class Results:
    """``out_dir/results.jsonl``: one JSON object per finished unit (or epoch), appended as they finish."""

    def __init__(self, out_dir: Path):
        self.path = Path(out_dir) / "results.jsonl"

    def rows(self) -> List[dict]:
        """Every row, in the order written (none when the file does not exist)."""
        return read_json_lines(self.path)

    def find(self, key: Dict) -> Optional[dict]:
        """The first row holding every item of ``key``, or None."""
        for r in self.rows():
            if all(r.get(k) == v for k, v in key.items()):
                return r
        return None

    def append(self, row: Dict) -> None:
        """Append one row (``storage.append_lines``: a failed append leaves the rows before intact)."""
        append_lines(self.path, json.dumps(row) + "\n")


def unit_checkpoint(path: Path, settings: Dict) -> Dict:
    """The ``extra`` of a unit's checkpoint, ``{"reproduction": settings}``, after checking that ``path``, when it
    exists, was written with the same ``settings``: a call with other settings (another budget's scale, another
    learning rate) into the same folder would otherwise continue that model and report it as this call's.
    Raises ``ValueError`` naming the settings that differ. A checkpoint written before the settings were stored
    is checked on the one setting it records, its first epoch's learning rate (``settings["lr"]``)."""
    from .. import checkpoint

    settings = json.loads(json.dumps(settings))  # as the checkpoint stores them: tuples as lists
    if not Path(path).exists():
        return {"reproduction": settings}
    ck = checkpoint.load(path)
    saved = ck.extra.get("reproduction")
    wanted = settings
    if not isinstance(saved, dict):  # written before the settings were stored: its first epoch's rate
        first = ck.history[0] if ck.history else {}
        saved = {"lr": first["lr"]} if "lr" in first and "lr" in settings else {}
        wanted = {k: settings[k] for k in saved}
    diffs = [
        f"{k} {saved.get(k, 'not set')!r} there, {wanted.get(k, 'not set')!r} here"
        for k in sorted(set(saved) | set(wanted))
        if saved.get(k) != wanted.get(k)
    ]
    if diffs:
        raise ValueError(
            f"{path} holds a model trained with other settings ({'; '.join(diffs)}): continuing it would report "
            f"that model as this run's. Write this run into another folder (--out), or delete the file to train "
            f"it again"
        )
    return {"reproduction": settings}


def cpu_name(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU for the records: its model name from ``cpuinfo`` with, where the file gives them, its family and
    model numbers ("AMD EPYC (family 25, model 1)": a name alone can stand for several generations), or
    "unknown" where there is no such file."""
    fields: Dict[str, str] = {}
    try:
        with open(cpuinfo) as f:
            for line in f:
                if not line.strip():  # the first processor's block is enough
                    break
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        return "unknown"
    name = fields.get("model name", "unknown")
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    return name


def machine() -> Dict:
    """The machine a unit ran on: CPU, cores, instruction-set module, threads (stored with each row)."""
    from .. import _native, get_num_threads

    return dict(cpu=cpu_name(), cores=os.cpu_count(), isa=_native.ISA, threads=get_num_threads())


def setup(row: dict) -> Tuple[str, int, str]:
    """The set-up a row ran on, ``(instruction-set module, threads, CPU)`` ("?" where the row does not say):
    runs of different set-ups sum in another order, so the tables keep them apart."""
    return (row.get("isa", "?"), row.get("threads", 1), row.get("cpu", "?"))


def setup_labels(setups: Iterable[Tuple[str, int, str]]) -> Dict[Tuple[str, int, str], str]:
    """A table cell for each of ``setups`` (``setup``'s tuples): "`avx2`, 1", with the CPU after it where the
    set-ups come from more than one CPU."""
    setups = list(setups)
    several = len({cpu for _, _, cpu in setups}) > 1
    return {s: f"`{s[0]}`, {s[1]}" + (f", {s[2]}" if several else "") for s in setups}


def machine_line(rows: Iterable[dict]) -> str:
    """The report's machine line: the machines the rows record (an older row may lack the cores), or
    this machine's CPU when no row records one, with the module and threads the rows ran with (this
    process's when no row has them)."""
    rows = list(rows)
    seen: List[str] = []
    for r in rows:
        if "cpu" in r:
            m = f"{r['cpu']}, instruction-set module `{r.get('isa', '?')}`, {r.get('threads', '?')} thread(s)"
            if m not in seen:
                seen.append(m)
    if not seen:
        here = machine()
        isa = next((r["isa"] for r in rows if "isa" in r), here["isa"])
        threads = next((r["threads"] for r in rows if "threads" in r), here["threads"])
        seen.append(f"{here['cpu']}, instruction-set module `{isa}`, {threads} thread(s)")
    return "Machine: " + "; ".join(seen) + f" ({os.cpu_count()} cores here)"


def fmt(value, digits: int = 3) -> str:
    """A number for a table (``-`` for None or NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def dist(values, digits: int = 2) -> str:
    """Median and range of ``values``, ``median [min, max]`` (``-`` for none): a figure over seeds."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return "-"
    return f"{np.median(v):.{digits}f} [{v.min():.{digits}f}, {v.max():.{digits}f}]"


def markdown_table(header: List[str], rows: List[List]) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def say(progress: bool, text: str) -> None:
    """A progress line on standard error when ``progress`` is on."""
    if progress:
        print(text, file=sys.stderr, flush=True)


class UnitProgress:
    """Progress over a reproduction's units for runs whose training shows none of its own: a bar where
    one is drawn (a terminal, a Jupyter notebook: the package's ``_progress.bar_class``), else lines."""

    def __init__(self, progress: bool, total: int, done: int, name: str):
        self.progress, self.bar = progress, None
        if progress:
            from ..training.progress import progress_mode

            if progress_mode(True) == "bar":
                from .._progress import bar_class

                self.bar = bar_class()(total=total, initial=done, desc=name, unit="run")

    def line(self, text: str) -> None:
        """A line above the bar, or on standard error."""
        if self.bar is not None:
            self.bar.write(text)
        else:
            say(self.progress, text)

    def advance(self) -> None:
        """One more unit finished."""
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        """Close the bar (kept on screen)."""
        if self.bar is not None:
            self.bar.close()


def figure(out_dir: Path, name: str, draw: Callable) -> Path:
    """``draw(ax)`` on a new figure saved as ``out_dir/name`` (a PNG; matplotlib without a display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    draw(ax)
    fig.tight_layout()
    path = Path(out_dir) / name
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def epoch_curves(out_dir: Path, name: str, value: str, ylabel: str) -> None:
    """The figure of ``value`` against the epoch for every ``label`` of ``out_dir/results.jsonl``."""
    curves: Dict[str, Dict[int, float]] = {}
    for r in Results(out_dir).rows():
        if "label" in r and "epoch" in r and r.get(value) is not None:
            curves.setdefault(r["label"], {})[r["epoch"]] = r[value]
    if not curves:
        return

    def draw(ax):
        for label, points in curves.items():
            epochs = sorted(points)
            ax.plot(epochs, [points[e] for e in epochs], marker="o", label=label)
        ax.set_xlabel("epoch")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)

    figure(out_dir, name, draw)
