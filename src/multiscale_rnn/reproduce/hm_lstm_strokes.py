"""Table 3 of the HM-LSTM paper (Chung, Ahn & Bengio 2017, Section 4.2): the average log-likelihood per test
sequence of pen-stroke models, a standard LSTM against the HM-LSTM and the HM-LSTM with slope annealing, each
with the mixture density head (Graves 2013). The paper's data, IAM-OnDB, cannot be shipped: the default is
KanjiVG's ordered kanji strokes (the ``strokes`` extra); ``--data-path`` to IAM-OnDB's lineStrokes (a folder
or archive) runs the same table on it (a folder of KanjiVG SVG files reads as KanjiVG).

Every model has 3 layers, the mixture density head with 20 components and equal parameters: the HM-LSTM
reads its layers through the gated output module (output embedding = hidden size), the LSTM's size is the
one whose parameter count is nearest. Batch 32, whole drawings (BPTT 300, chunks carried beyond), Adam,
clip 1, the paper's slope annealing a = min(3, 1 + 0.004 epoch) for the third row (the paper's rate per
epoch; over a reduced budget's epochs the slope hardly moves, which the report says). Seeds 0, 1, 2;
each model resumes per epoch from its checkpoint in OUT.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Union

import numpy as np

from ._common import SMOKE_MINUTES, Reproduction, Results, UnitProgress, epoch_curves, fmt, machine, markdown_table

__all__ = ["REPRODUCTION", "build", "matched_lstm_size"]

#: Table 3 of the paper: IAM-OnDB, average log-likelihood per test sequence.
PAPER = {"lstm": 1081, "hm-lstm": 1137, "hm-lstm-sa": 1167}
ROWS = ("lstm", "hm-lstm", "hm-lstm-sa")
SEEDS = (0, 1, 2)
#: Seconds per KanjiVG epoch of the reduced scale's models (3 x 128, 593k parameters) on one thread, with the
#: validation: 68-69 s of training measured on the 2-core AMD EPYC with other jobs running, rounded up.
SECONDS_PER_EPOCH = 80.0


class _Scale:
    """The sizes a budget runs at: below a minute the smoke scale, else 3 x 128 units for as many epochs as
    the budget gives nine models (at most 20)."""

    def __init__(self, minutes: float):
        self.smoke = minutes < SMOKE_MINUTES
        self.lr, self.batch_size, self.bptt = 1e-3, 32, 300
        if self.smoke:
            self.hidden, self.mixtures, self.epochs = 8, 2, 1
            return
        self.hidden, self.mixtures = 128, 20
        per_model = 60.0 * minutes / (len(ROWS) * len(SEEDS))
        self.epochs = max(1, min(20, int(per_model / SECONDS_PER_EPOCH)))


def build(row: str, hidden: int, mixtures: int, seed: int, lstm_hidden: Optional[int] = None):
    """The model of a row: the HM-LSTM (3 x ``hidden``, gated output module of ``hidden``) or the LSTM of
    ``lstm_hidden`` units a layer (:func:`matched_lstm_size`), both with the mixture density head."""
    from ..models.registry import build_model

    common: Dict[str, Any] = dict(input_size=3, head="mdn", mixtures=mixtures, seed=seed, vocab_size=None)
    if row == "lstm":
        h = lstm_hidden or hidden
        return build_model("lstm", embed_size=h, hidden_sizes=(h, h, h), **common)
    return build_model("hm-lstm", embed_size=hidden, hidden_sizes=(hidden,) * 3, head_size=hidden, **common)


def matched_lstm_size(hidden: int, mixtures: int) -> int:
    """The LSTM layer size whose model's parameter count is nearest the HM-LSTM's of ``hidden`` units."""
    target = build("hm-lstm", hidden, mixtures, 0).num_parameters
    return min(range(1, 2 * hidden + 1), key=lambda h: abs(build("lstm", h, mixtures, 0, h).num_parameters - target))


def _corpus(data_path, smoke: bool):
    """KanjiVG (the installed package, or a folder of its SVG files) or IAM-OnDB (``data_path``); the smoke
    scale keeps the first drawings of each split."""
    from .. import data

    path = None if data_path is None else Path(data_path)
    if path is None or (path.is_dir() and any(path.glob("*.svg"))):
        corpus = data.load("kanjivg", path=path)
    else:
        corpus = data.load("iam-ondb", path=path)
    if smoke:
        corpus.train, corpus.valid, corpus.test = corpus.train[:24], corpus.valid[:6], corpus.test[:6]
    return corpus


def run(out_dir: Path, budget, progress: bool, data_path=None) -> None:
    """Train (or resume) the three rows on seeds 0-2; a row per model and epoch in ``results.jsonl``, the last
    with the test figures."""
    s = _Scale(budget.minutes)
    corpus = _corpus(data_path, s.smoke)
    lstm_h = matched_lstm_size(s.hidden, s.mixtures)
    results = Results(out_dir)
    units = [(row, seed) for seed in SEEDS for row in ROWS]
    done = sum(results.find(dict(label=_label(r, sd), epoch=s.epochs, final=True)) is not None for r, sd in units)
    bar = UnitProgress(progress, len(units), done, "hm-lstm-table3")
    try:
        for row, seed in units:
            if results.find(dict(label=_label(row, seed), epoch=s.epochs, final=True)) is None:
                _train(corpus, s, row, seed, lstm_h, Path(out_dir), budget, results, bar.line)
                bar.advance()
                budget.unit_finished()
    finally:
        bar.close()


def _label(row: str, seed: int) -> str:
    return f"{row}-seed{seed}"


def _train(corpus, s: _Scale, row, seed, lstm_h, out_dir: Path, budget, results, line) -> None:
    """One model, an epoch a step from its checkpoint; a row per epoch trained in this call."""
    import multiscale_rnn as msr

    model = build(row, s.hidden, s.mixtures, seed, lstm_h)
    options: Optional[Dict[str, Union[float, Callable]]] = None
    if row == "hm-lstm-sa":
        options = {"slope": msr.schedules.linear(1.0, 3.0, per_epoch=0.004)}
    trainer = msr.Trainer(model, msr.optim.Adam(s.lr), clip_norm=1.0, batch_size=s.batch_size, bptt=s.bptt,
                          seed=seed, progress=False, model_options=options)  # fmt: skip
    label = _label(row, seed)
    for epoch in range(1, s.epochs + 1):
        budget.check()
        t0 = time.perf_counter()
        history = trainer.fit(corpus, epochs=epoch, checkpoint=out_dir / f"{label}.npz", resume="auto")
        if len(history) > epoch:  # the checkpoint is past this epoch
            continue
        r: Dict = dict(label=label, row=row, seed=seed, epoch=epoch, parameters=model.num_parameters,
                       hidden=lstm_h if row == "lstm" else s.hidden, valid_loss=history[-1]["valid_loss"],
                       seconds=time.perf_counter() - t0, data=corpus.name)  # fmt: skip
        if epoch == s.epochs:
            ev = msr.evaluate(model, corpus.test, batch_size=s.batch_size)
            r.update(final=True, test_log_likelihood=ev["log_likelihood"], test_loss=ev["loss"], **machine())
        results.append(r)
        line(f"{label} epoch {epoch}: valid {r['valid_loss']:.4f} nats per step")


def _spread(values: List[float]) -> str:
    """Median [min, max] of the seeds' values."""
    if not values:
        return "-"
    return f"{fmt(float(np.median(values)), 1)} [{fmt(min(values), 1)}, {fmt(max(values), 1)}] ({len(values)} seeds)"


def report(out_dir: Path) -> str:
    """Each row's test log-likelihood per sequence over the seeds, beside the paper's, and the orderings."""
    finals = [r for r in Results(out_dir).rows() if r.get("final")]
    by_row = {row: [r["test_log_likelihood"] for r in finals if r["row"] == row] for row in ROWS}
    params = {row: next((r["parameters"] for r in finals if r["row"] == row), None) for row in ROWS}
    data = finals[0]["data"] if finals else "-"
    table = markdown_table(
        ["model", "parameters", "test log-likelihood per sequence: median [min, max]", "paper (IAM-OnDB)"],
        [[row, "-" if params[row] is None else f"{params[row]:,}", _spread(by_row[row]), PAPER[row]] for row in ROWS],
    )
    medians = {row: float(np.median(v)) for row, v in by_row.items() if v}
    order = " < ".join(sorted(medians, key=lambda row: medians[row])) if medians else "-"
    return "\n".join(
        [
            f"Data: {data}. The paper's figures are on IAM-OnDB and differ in scale; compare the orderings.",
            "",
            table,
            "",
            f"Ordering by median (worst first): here {order}; the paper's lstm < hm-lstm < hm-lstm-sa.",
        ]
    )


def scale(minutes: float) -> str:
    """The scale note of a budget."""
    s = _Scale(minutes)
    if s.smoke:
        return "smoke scale: 8 units, 2 components, 1 epoch on 24 drawings"
    return f"3 x {s.hidden} units (the paper's 400 reduced), 20 components, {s.epochs} epoch(s) per model"


REPRODUCTION = Reproduction(
    name="hm-lstm-table3",
    paper="Chung, Ahn & Bengio 2017, Hierarchical Multiscale RNNs (Section 4.2, Table 3)",
    what="Table 3: log-likelihood per test sequence of pen strokes, LSTM against HM-LSTM with and without "
    "slope annealing (KanjiVG by default; --data-path: IAM-OnDB)",
    default_budget=180.0,
    reduced=True,
    scale=scale,
    run=run,
    report=report,
    seeds="0, 1, 2 (model and batch order)",
    data_note='KanjiVG from pip install "multiscale-rnn[strokes]" (--data-path: IAM-OnDB\'s lineStrokes)',
    figures=lambda out: epoch_curves(out, "valid_loss_by_epoch.png", "valid_loss", "validation nats per step"),
    estimate=lambda minutes: (
        minutes
        if minutes < SMOKE_MINUTES
        else min(minutes, len(ROWS) * len(SEEDS) * _Scale(minutes).epochs * SECONDS_PER_EPOCH / 60.0)
    ),
)
