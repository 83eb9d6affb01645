"""Reproductions of the papers' tables and figures, one command each (docs/reproduce.md).

    multiscale-rnn reproduce --list
    multiscale-rnn reproduce hornn-table2 --data-path ../shared/data/ptb --budget 180 --out runs/hornn

    import multiscale_rnn as msr
    msr.reproduce.run("hornn-table2", budget_minutes=180, out="runs/hornn", data_path="../shared/data/ptb")

Each reproduction (``REPRODUCTIONS``) declares its paper and table, its default budget (minutes), the
scale a budget runs at, the data it needs, a resumable ``run`` and a ``report``. A run trains what
``out`` lacks, resuming from the checkpoints there after an interruption (at the granularity of a model's
epoch), stops when its budget is spent, and writes ``out/REPORT.md``: the table beside the paper's
numbers, the machine, the seeds and the time taken. A budget under one minute runs the smoke scale
(tiny models, for tests).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Dict, Optional, Union

from .._checks import did_you_mean
from ..storage import atomic_write_text
from . import fs_rnn, hm_lstm, hm_lstm_real_text, hm_lstm_strokes, hornn, vcrnn
from ._common import SMOKE_MINUTES, Budget, BudgetSpent, Reproduction, Results, file_names, machine_line

__all__ = ["REPRODUCTIONS", "Reproduction", "BudgetSpent", "get", "run", "report", "listing"]

REPRODUCTIONS: Dict[str, Reproduction] = {
    r.name: r
    for r in (
        hornn.REPRODUCTION,
        hornn.FIGURE6,
        hornn.TABLE4,
        hm_lstm.REPRODUCTION,
        hm_lstm_real_text.REPRODUCTION,
        hm_lstm_strokes.REPRODUCTION,
        vcrnn.REPRODUCTION,
        fs_rnn.REPRODUCTION,
    )
}


def get(name: str) -> Reproduction:
    """The reproduction called ``name``; ``ValueError`` naming it and the known ones otherwise."""
    if name not in REPRODUCTIONS:
        raise ValueError(
            f"unknown reproduction {name!r}{did_you_mean(name, REPRODUCTIONS)}; known: {', '.join(REPRODUCTIONS)}"
        )
    return REPRODUCTIONS[name]


def _check_data(r: Reproduction, data_path) -> Optional[Path]:
    """The data folder, checked to hold the files ``r`` needs (errors name the reproduction and the path); for a
    reproduction that needs none, the optional path it may read (or None)."""
    if not r.data_files:
        if data_path is not None and not Path(data_path).exists():
            raise FileNotFoundError(f"{r.name}: --data-path {data_path} does not exist")
        return None if data_path is None else Path(data_path)
    if data_path is None:
        raise ValueError(f"{r.name} needs --data-path: a folder holding {file_names(r.data_files)}")
    path = Path(data_path).expanduser()
    if not path.is_dir():
        what = "is a file, not a folder" if path.exists() else "does not exist"
        raise FileNotFoundError(
            f"{r.name}: --data-path {path} {what}: give the folder holding {file_names(r.data_files)}"
        )
    missing = tuple(names for names in r.data_files if not any((path / n).is_file() for n in names))
    if missing:
        raise FileNotFoundError(f"{r.name}: --data-path {path} lacks {file_names(missing)}")
    return path


def report(name: str, out: Union[str, Path]) -> str:
    """The markdown report of what ``out`` holds for reproduction ``name`` (nothing is written)."""
    r = get(name)
    out = Path(out)
    if not out.is_dir():
        raise FileNotFoundError(f"{name}: no results folder {out}")
    rows = Results(out).rows()
    spent = Budget(0.0, out).before
    seconds = sum(x.get("seconds", 0.0) for x in rows) if spent == 0.0 else spent
    pictures = [f"![{p.stem}]({p.name})" for p in sorted(out.glob("*.png"))]
    return "\n".join(
        [
            f"# {r.name}: {r.what}",
            "",
            f"Paper: {r.paper}.",
            "",
            r.report(out),
            "",
            *([*pictures, ""] if pictures else []),
            *(
                [
                    machine_line(rows),
                    "",
                    f"Seeds: {r.seeds}{_seeds_held(rows, r.seeds)}. Time taken: {seconds / 60:.1f} min over "
                    f"{len(rows)} result row(s).",
                ]
                if rows
                else [f"No result in {out} yet: `multiscale-rnn reproduce {r.name} --out {out}` trains them."]
            ),
            "",
        ]
    )


def _seeds_held(rows, declared: str) -> str:
    """``; the results hold seeds 0, 1`` when the rows' seeds are not the ``declared`` ones (a folder that
    other scripts added seeds to), else nothing."""
    held = sorted({int(x["seed"]) for x in rows if isinstance(x.get("seed"), int)})
    listed = re.match(r"([\d, ]+)(\(|$)", declared)  # "0, 1, 2 (model ...)" declares 0, 1, 2
    declared_seeds = [int(d) for d in re.findall(r"\d+", listed.group(1))] if listed else []
    text = ", ".join(map(str, held))
    return f"; the results hold seed(s) {text}" if held and held != declared_seeds else ""


def run(
    name: str,
    budget_minutes: Optional[float] = None,
    out: Union[str, Path, None] = None,
    data_path: Union[str, Path, None] = None,
    progress: bool = True,
    max_units: Optional[int] = None,
) -> Path:
    """Run (or resume) reproduction ``name`` into ``out`` (default ``runs/reproduce/NAME``) within
    ``budget_minutes`` (default: its own; the time of earlier calls counts), then write
    ``out/REPORT.md`` and return its path. ``max_units`` stops this call after that many newly
    finished models; the report then shows what is done. A folder keeps the scale of its first call's budget
    (``_folder_scale``): a later call's budget gives the run more or less time, never another scale."""
    r = get(name)
    minutes = r.default_budget if budget_minutes is None else float(budget_minutes)
    if not minutes > 0:
        raise ValueError(f"{name}: budget_minutes must be > 0, got {budget_minutes!r}")
    path = _check_data(r, data_path)
    out = Path("runs/reproduce") / name if out is None else Path(out)
    out.mkdir(parents=True, exist_ok=True)
    scale_minutes = _folder_scale(r, out, minutes, path)
    budget = Budget(minutes, out, max_units, scale_minutes)
    kept = r.scale(scale_minutes) != r.scale(minutes)
    if kept and progress:
        print(
            f"{name}: {out} keeps the scale of its first call ({r.scale(scale_minutes)}; budget {scale_minutes:g} "
            f"min): this call's budget of {minutes:g} min sets the time of the whole run, not its scale. For the "
            f"scale of {minutes:g} min, give another --out.",
            flush=True,
        )
    t0 = time.perf_counter()
    try:
        r.run(out, budget, progress, path)
        stopped = None
    except BudgetSpent as e:
        stopped = str(e)
    budget.save()
    if r.figures is not None:
        r.figures(out)
    text = report(name, out)
    text += f"\nScale: {r.scale(scale_minutes)}" + (
        f" (the first call's budget, {scale_minutes:g} min)" if kept else ""
    )
    text += f"; budget {minutes:g} min. This call: {time.perf_counter() - t0:.0f} s"
    text += f", stopped: {stopped} (run again to resume).\n" if stopped else ", complete.\n"
    atomic_write_text(out / "REPORT.md", text)
    if progress:
        print(f"{name}: report in {out / 'REPORT.md'}" + (f" ({stopped})" if stopped else ""), flush=True)
    return out / "REPORT.md"


def _folder_scale(r: Reproduction, out: Path, minutes: float, data_path: Optional[Path] = None) -> float:
    """The budget that sets the scale of the run in ``out``: the first call's, kept in ``out/scale.json`` (written
    by that call with its data folder), so that a later call with another budget gives the run more or less time
    but never trains or reports models of two scales in one folder. Refused (``ValueError`` naming the folder):
    a folder of another reproduction, a smoke-scale folder continued at a full scale or the reverse, and a
    folder trained on another data folder (its finished models would be read back as this data's)."""
    path = out / "scale.json"
    data = None if data_path is None else str(Path(data_path).expanduser().resolve())
    if not path.exists():
        record = {"reproduction": r.name, "budget_minutes": float(minutes), "scale": r.scale(minutes), "data": data}
        atomic_write_text(path, json.dumps(record))
        return float(minutes)
    try:
        saved = json.loads(path.read_text())
        first, other, old_data = float(saved["budget_minutes"]), saved["reproduction"], saved["data"]
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path} is not the scale record of a reproduction ({e}): give another --out") from None
    if other != r.name:
        raise ValueError(f"{out} holds a run of {other}, not of {r.name}: give another --out")
    if (first < SMOKE_MINUTES) != (minutes < SMOKE_MINUTES):
        kinds = {True: "the smoke scale", False: "a full scale"}
        raise ValueError(
            f"{out} holds a run at {kinds[first < SMOKE_MINUTES]} (its first call's budget: {first:g} min); this "
            f"call's budget of {minutes:g} min gives {kinds[minutes < SMOKE_MINUTES]} (the smoke scale, for tests, "
            f"is a budget under one minute): give another --out"
        )
    if old_data != data:
        raise ValueError(
            f"{out} holds a run on the data of {old_data or 'the reproduction itself'}; this call gives "
            f"{data or 'none'}: give the same --data-path, or another --out"
        )
    return first


def listing() -> str:
    """The ``reproduce --list`` text: every reproduction, its default budget and scale, its data."""
    lines = []
    for r in REPRODUCTIONS.values():
        data = (
            f"--data-path with {file_names(r.data_files)}" if r.data_files else (r.data_note or "no data (generated)")
        )
        lines.append(f"{r.name}: {r.paper}")
        lines.append(f"    {r.what}")
        takes = r.default_budget if r.estimate is None else r.estimate(r.default_budget)
        lines.append(
            f"    default budget {r.default_budget:g} min, takes about {takes:.0f} min on one thread "
            f"({'reduced scale' if r.reduced else 'full scale'}): {r.scale(r.default_budget)}"
        )
        lines.append(f"    needs {data}")
    return "\n".join(lines)
