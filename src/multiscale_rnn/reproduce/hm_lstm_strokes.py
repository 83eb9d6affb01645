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

Once every model is trained, each HM-LSTM's boundaries are read on the test drawings: z^1 and z^2 scored
against the pen lifts and (KanjiVG) the component ends, one point of slack, and the number of segments z^2
cuts a drawing into; the report gives their median and range over the seeds. The figures: the paper's
Figure 5 for every seed of the HM-LSTM with slope annealing (the first test drawing of at least two
strokes, not chosen by its segments), where its layers compute along that drawing, and drawings it samples.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Union

import numpy as np

from ._common import (
    SMOKE_MINUTES,
    Reproduction,
    Results,
    UnitProgress,
    dist,
    epoch_curves,
    machine,
    markdown_table,
)

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
    """The model of a row: the HM-LSTM (3 x ``hidden``, gated output module of ``hidden``, the phrase recipe's
    options, with which Table 3 was measured) or the LSTM of ``lstm_hidden`` units a layer
    (:func:`matched_lstm_size`), both with the mixture density head."""
    from ..models.hm_lstm import PHRASE_RECIPE
    from ..models.registry import build_model

    common: Dict[str, Any] = dict(input_size=3, head="mdn", mixtures=mixtures, seed=seed, vocab_size=None)
    if row == "lstm":
        h = lstm_hidden or hidden
        return build_model("lstm", embed_size=h, hidden_sizes=(h, h, h), **common)
    return build_model(
        "hm-lstm", embed_size=hidden, hidden_sizes=(hidden,) * 3, head_size=hidden, **PHRASE_RECIPE, **common
    )


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
    _analyse(corpus, s, Path(out_dir), results)


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
        written = results.find(dict(label=label, epoch=epoch))
        if len(history) > epoch or (written is not None and (epoch < s.epochs or written.get("final"))):
            continue  # the checkpoint is past this epoch, or its row was written before the run stopped
        r: Dict = dict(label=label, row=row, seed=seed, epoch=epoch, parameters=model.num_parameters,
                       hidden=lstm_h if row == "lstm" else s.hidden, valid_loss=history[-1]["valid_loss"],
                       seconds=time.perf_counter() - t0, data=corpus.name)  # fmt: skip
        if epoch == s.epochs:
            ev = msr.evaluate(model, corpus.test, batch_size=s.batch_size)
            r.update(final=True, test_log_likelihood=ev["log_likelihood"], test_loss=ev["loss"], **machine())
        results.append(r)
        line(f"{label} epoch {epoch}: valid {r['valid_loss']:.4f} nats per step")


#: The rows whose boundaries are read, and the drawing of the figures: the first test drawing of at least
#: this many strokes.
HM_ROWS = ("hm-lstm", "hm-lstm-sa")
FIGURE_STROKES = 2
#: The drawings' boundary kinds as the report names them.
KIND_NAMES = {"stroke": "pen lifts", "component": "component ends"}


def _analyse(corpus, s: _Scale, out_dir: Path, results) -> None:
    """Score every trained HM-LSTM's z^1 and z^2 on the test drawings (a row ``analysis=True`` per model,
    written once), then draw the figures from the checkpoints."""
    from ..analysis.hm_lstm_strokes import score_strokes
    from ..checkpoint import load

    models: Dict[str, Dict[str, Any]] = {}  # row -> label -> trained model
    for row in HM_ROWS:
        for seed in SEEDS:
            label = _label(row, seed)
            if results.find(dict(label=label, epoch=s.epochs, final=True)) is None:
                continue
            models.setdefault(row, {})[label] = model = load(out_dir / f"{label}.npz").model
            if results.find(dict(label=label, analysis=True)) is not None:
                continue
            r = score_strokes(model, corpus, "test", max_sequences=None, tolerance=1)
            z2_segments = r.pop("segments")[1]
            results.append(dict(label=label, row=row, seed=seed, analysis=True, z2_segments=z2_segments, **r))
    chosen = models.get("hm-lstm-sa") or models.get("hm-lstm")
    if chosen:
        _figures(corpus, chosen, out_dir)


def _figure_index(corpus) -> int:
    """The first test drawing of at least :data:`FIGURE_STROKES` strokes (the first when none has)."""
    strokes = [int(np.asarray(rows)[:, 2].sum()) for rows in corpus.test]
    return next((i for i, n in enumerate(strokes) if n >= FIGURE_STROKES), 0)


def _figures(corpus, chosen: Dict[str, Any], out_dir: Path) -> None:
    """``figure5.png`` (a row per trained seed of ``chosen``: the annealed HM-LSTM's, else the plain one's),
    ``computation.png`` and ``samples.png`` of its first seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..plot.strokes import computation, figure5, strokes
    from ..training.sequences import sample_strokes

    index = _figure_index(corpus)
    fig, axes = plt.subplots(len(chosen), 2, figsize=(6, 3 * len(chosen)), squeeze=False)
    for k, (label, model) in enumerate(chosen.items()):
        figure5(model, corpus, index=index, split="test", layer=2, axes=axes[k])
        axes[k, 0].set_title(f"{label}: " + axes[k, 0].get_title(), fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "figure5.png", dpi=90)
    plt.close(fig)
    label, model = next(iter(chosen.items()))
    fig, ax = plt.subplots(figsize=(3.5, 3.5))
    computation(model, corpus, index=index, split="test", ax=ax)
    ax.set_title(f"{label}: " + ax.get_title(), fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "computation.png", dpi=90)
    plt.close(fig)
    drawn = sample_strokes(model, 60, bias=1.0, num_samples=6, seed=0)
    fig, axes = plt.subplots(1, len(drawn), figsize=(1.8 * len(drawn), 2.0), squeeze=False)
    for k, rows in enumerate(drawn):
        xy, pen = corpus.points(rows)
        strokes(xy, pen, ax=axes[0, k], title=f"sample {k + 1}")
    fig.suptitle(f"{label}, bias 1", fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "samples.png", dpi=90)
    plt.close(fig)


def _spread(values: List[float], digits: int = 1, seeds: bool = True) -> str:
    """Median [min, max] of the seeds' values."""
    return dist(values, digits) + (f" ({len(values)} seeds)" if seeds and values else "")


def boundary_report(rows: List[dict]) -> str:
    """The HM-LSTMs' boundaries on the test drawings, median [min, max] over seeds: rates of z^1 and z^2 per
    point, F1 against the pen lifts and the component ends, and the z^2 segments of a drawing."""
    ref: Dict[str, float] = next((r["reference_rates"] for r in rows), {})
    kinds = [k for k in KIND_NAMES if k in ref]
    header = ["model", "seeds", "z1 rate", "z2 rate"]
    header += [f"z{l} F1 vs {KIND_NAMES[k]}" for l in (1, 2) for k in kinds]
    header += ["z2 segments per drawing", "drawings with >= 2 z2 segments"]
    table = []
    for row in HM_ROWS:
        got = [r for r in rows if r["row"] == row]
        if not got:
            continue
        line = [row, str(len(got))] + [_spread([r["rates"][l] for r in got], 3, False) for l in (0, 1)]
        line += [_spread([r[k][l]["f1"] for r in got], 2, False) for l in (0, 1) for k in kinds]
        line.append(_spread([float(np.median(r["z2_segments"])) for r in got], 1, False))
        line.append(_spread([float(np.mean(np.asarray(r["z2_segments"]) >= 2)) for r in got], 2, False))
        table.append(line)
    rates = ", ".join(f"{KIND_NAMES[k]} {ref[k]:.3f}" for k in kinds)
    return "\n".join(
        [
            f"Boundaries on the test drawings (one point of slack; reference rates per point: {rates}):",
            "",
            markdown_table(header, table),
        ]
    )


def report(out_dir: Path) -> str:
    """Each row's test log-likelihood per sequence over the seeds, beside the paper's, and the orderings."""
    rows = Results(out_dir).rows()
    finals = [r for r in rows if r.get("final")]
    analyses = [r for r in rows if r.get("analysis")]
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
        + (["", boundary_report(analyses)] if analyses else [])
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
