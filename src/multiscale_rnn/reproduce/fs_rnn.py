"""``fs-rnn-table3``: Mujika et al. 2017, the FS-LSTM-2 against a stacked and a sequential LSTM with the
same number of parameters on Penn Treebank characters (the comparison of Section 4.2, with the
training of Table 3), at a reduced scale.

All three use the setting of Section 4.2: layer norm on the cell states only (``layer_norm="cell"``), no
dropout or zoneout. The FS-LSTM-2 has fast cells of ``fast`` units and a slow cell of ``slow``; the
stacked LSTM (2 layers) and the sequential LSTM (3 cells one after another in each step, as many as the
FS-LSTM-2's chain F1, S, F2) take the hidden size whose parameter count is closest to the FS-LSTM's.
Adam 2e-3, gradient norm clipped to 1, batch 32, BPTT 100, the model of lowest validation BPC tested.
The seeds (``SEEDS``, in turn: the model's initialisation and the Trainer's seed) each train the three
models; the report gives each seed's figures and the median [range] over seeds. Each model trains one
epoch a call from ``OUT/<label>.npz``; each epoch is a line of ``OUT/results.jsonl`` with its seed, its
wall seconds and its ``cpu_seconds`` (the process's CPU time: the equal-time comparison reads these, so a
loaded or paused machine does not change it; the run trains on one thread unless told otherwise).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Dict

from ._common import (
    PTB_CHAR_FILES,
    SMOKE_MINUTES,
    Reproduction,
    Results,
    dist,
    epoch_curves,
    fmt,
    machine,
    markdown_table,
    say,
)

__all__ = ["REPRODUCTION", "matched_size", "equal_time", "PAPER"]

#: Table 1 of the paper (test BPC on Penn Treebank, parameters): the paper reports no stacked or
#: sequential LSTM of equal size in a table (Section 4.2 compares their dynamics).
PAPER = {"fs-lstm-2": "1.190 (7.2M parameters, fast 700, slow 400)", "stacked-lstm": "2-layer LSTM: 1.243"}
#: One thread: the run of the docs, 175-237 CPU-seconds an epoch of 1M characters (AMD EPYC, avx2)
CHARS_PER_SECOND = 4_600
#: The models a seed trains, in turn.
MODELS = ("fs-lstm-2", "stacked-lstm", "sequential-lstm")
#: The seeds a run trains, in turn (the smoke scale: the first).
SEEDS = (0, 1, 2)


def _models(vocab_size, embed, fast, slow, seed):
    """Builders of the three models by hidden size (the FS-LSTM-2's is fixed by fast and slow)."""
    import multiscale_rnn as msr

    common = dict(layer_norm="cell", seed=seed)
    fs, stacked, sequential = MODELS
    return {
        fs: lambda h: msr.FSRNN(vocab_size, embed, fast_size=fast, slow_size=slow, fast_cells=2, **common),
        stacked: lambda h: msr.StackedLSTM(vocab_size, embed, (h, h), **common),
        sequential: lambda h: msr.SequentialLSTM(vocab_size, embed, (h, h, h), **common),
    }


def _count(model) -> int:
    n = model.num_parameters
    return int(n() if callable(n) else n)


def matched_size(build, params: int) -> int:
    """The hidden size whose model's parameter count is closest to ``params`` (doubling, then bisection:
    only models near the answer's size are built)."""
    lo, hi = 1, 8
    while _count(build(hi)) <= params:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _count(build(mid)) <= params:
            lo = mid
        else:
            hi = mid
    return min((lo, hi), key=lambda h: abs(_count(build(h)) - params))


class _Settings:
    """The scale of a budget: below a minute the smoke scale, else half the paper's sizes."""

    def __init__(self, minutes: float):
        self.smoke = minutes < SMOKE_MINUTES
        if self.smoke:
            self.fast, self.slow, self.embed, self.train_chars, self.valid_chars, self.epochs = (
                12,
                8,
                8,
                4_000,
                1_000,
                1,
            )
            return
        self.fast, self.slow, self.embed, self.train_chars, self.valid_chars = 350, 200, 128, 1_000_000, 100_000
        self.epochs = max(1, min(10, int(60.0 * minutes / 3 / (self.train_chars / CHARS_PER_SECOND))))


def _train(corpus, s, name, build, hidden, seed, out_dir, budget, progress, results):
    """Train one model epoch by epoch from its checkpoint, append each new epoch's row, test at the end."""
    import multiscale_rnn as msr

    model = build(hidden)
    label = f"{name}-H{hidden}-seed{seed}"
    trainer = msr.Trainer(model, msr.optim.Adam(2e-3), clip_norm=1.0, batch_size=32, bptt=100, seed=seed,
                          progress=progress)  # fmt: skip
    done = {r["epoch"] for r in results.rows() if r["label"] == label}
    train, valid = corpus.train[: s.train_chars], corpus.valid[: s.valid_chars]
    for epoch in range(1, s.epochs + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        history = trainer.fit(train, valid=valid, epochs=epoch, checkpoint=Path(out_dir) / f"{label}.npz",
                              resume="auto", restore_best=epoch == s.epochs, vocab=corpus.vocab)  # fmt: skip
        if len(history) > epoch:  # the checkpoint is past this epoch: its row was written when it was trained
            continue
        row = dict(label=label, model=name, hidden=hidden, params=_count(model), seed=seed, epoch=epoch,
                   valid_bpc=history[-1]["valid_bpc"], seconds=time.perf_counter() - t0,
                   cpu_seconds=time.process_time() - c0)  # fmt: skip
        if epoch == s.epochs:
            row["test_bpc"] = msr.evaluate(model, corpus.test[: s.valid_chars], batch_size=16)["bpc"]
            row.update(machine())
        if epoch not in done or "test_bpc" in row:
            results.append(row)
        say(progress, f"{label} epoch {epoch}: valid {row['valid_bpc']:.3f} bpc")
        if epoch < s.epochs:
            budget.check()


def run(out_dir: Path, budget, progress: bool, data_path) -> None:
    """For each seed in turn, the FS-LSTM-2, then the stacked and the sequential LSTM of its parameter count."""
    import multiscale_rnn as msr

    corpus = msr.data.load("ptb-char", path=str(data_path))
    s = _Settings(budget.minutes)
    results = Results(out_dir)
    sizing = _models(corpus.vocab_size, s.embed, s.fast, s.slow, 0)  # sizes do not depend on the seed
    params = _count(sizing["fs-lstm-2"](0))
    sizes = {name: s.fast if name == "fs-lstm-2" else matched_size(build, params) for name, build in sizing.items()}
    for seed in SEEDS[:1] if s.smoke else SEEDS:
        builds = _models(corpus.vocab_size, s.embed, s.fast, s.slow, seed)
        for i, (name, build) in enumerate(builds.items(), 1):
            hidden = sizes[name]
            label = f"{name}-H{hidden}-seed{seed}"
            if any(r["label"] == label and "test_bpc" in r for r in results.rows()):
                continue
            budget.check()
            say(progress, f"[{i}/{len(builds)}] {label}: {params:,} parameters, {s.epochs} epoch(s)")
            _train(corpus, s, name, build, hidden, seed, out_dir, budget, progress, results)
            budget.unit_finished()


def equal_time(rows) -> tuple:
    """Each model's lowest validation BPC within the same training time: the shortest total time T of the
    models (the sum of their epochs' ``cpu_seconds``, or ``seconds`` for rows without them), and per label
    the best ``valid_bpc`` of the epochs that ended by T (None when its first epoch ended later)."""
    curves: Dict[str, Dict[int, dict]] = {}
    for r in rows:
        curves.setdefault(r["label"], {})[r["epoch"]] = r
    ends: Dict[str, list] = {}
    for label, by_epoch in curves.items():
        t, ends[label] = 0.0, []
        for e in sorted(by_epoch):
            t += by_epoch[e].get("cpu_seconds", by_epoch[e]["seconds"])
            ends[label].append((t, by_epoch[e]["valid_bpc"]))
    if not ends:
        return 0.0, {}
    T = min(points[-1][0] for points in ends.values())
    return T, {label: min((v for t, v in points if t <= T), default=None) for label, points in ends.items()}


def _seed(row: dict) -> int:
    """A row's seed (rows written before the seeds were recorded are seed 0's)."""
    return int(row.get("seed", 0))


def report(out_dir: Path) -> str:
    """Each finished model's parameters, epochs, its best epoch's validation BPC and the test BPC of that
    epoch (the Trainer restores it before the test), beside the paper's, a row per model and seed; the
    models compared at equal training time (``equal_time``) within each seed; then, over the seeds, each
    model's median [range] and on how many seeds the FS-LSTM-2 is ahead of each LSTM."""
    rows, all_rows = [], Results(out_dir).rows()
    tested: Dict[str, Dict[int, float]] = {}  # model -> seed -> test BPC
    for r in all_rows:
        if "test_bpc" in r:
            mine = [x for x in all_rows if x.get("label") == r["label"] and "valid_bpc" in x]
            top = min(mine, key=lambda x: x["valid_bpc"])
            rows.append([r["label"], _seed(r), f"{r['params']:,}", r["epoch"],
                         f"{fmt(top['valid_bpc'])} (epoch {top['epoch']})", fmt(r["test_bpc"]),
                         PAPER.get(r["model"], "-")])  # fmt: skip
            tested.setdefault(r["model"], {})[_seed(r)] = r["test_bpc"]
    timed: list = []
    at_time: Dict[str, Dict[int, float]] = {}  # model -> seed -> valid BPC at equal time
    epochs_by_seed: Dict[int, list] = {}
    for r in all_rows:
        if "label" in r and "seconds" in r:
            epochs_by_seed.setdefault(_seed(r), []).append(r)
    in_progress = []
    for seed, mine in sorted(epochs_by_seed.items()):
        if sum(seed in by_seed for by_seed in tested.values()) < len(MODELS):  # a model still training or to come
            in_progress.append(str(seed))
            continue
        T, best = equal_time(mine)
        model_of = {r["label"]: r["model"] for r in mine}
        for label, v in best.items():
            timed.append([label, seed, f"{T / 60.0:.1f}", fmt(v)])
            if v is not None:
                at_time.setdefault(model_of[label], {})[seed] = v
    out = [
        "PTB characters, layer norm on the cells, no dropout or zoneout (Section 4.2's setting), equal "
        "parameter counts; the paper's numbers are its full-size regularised models (Table 1).",
        "",
        markdown_table(
            ["model", "seed", "parameters", "epochs", "best valid BPC", "test BPC there", "paper (test BPC)"], rows
        ),
        "",
        "At equal training time: the lowest validation BPC of each model's epochs that ended within the "
        f"shortest model's total CPU time of training and validation in its seed ({_threads(all_rows)}), on the seeds "
        "whose three models have finished" + (f" (seed {', '.join(in_progress)} in progress)." if in_progress else "."),
        "",
        markdown_table(["model", "seed", "minutes", "valid BPC within them"], timed),
    ]
    over = []
    for model, by_seed in tested.items():
        over.append([model, ", ".join(str(k) for k in sorted(by_seed)), dist(list(by_seed.values()), 3),
                     dist(list(at_time.get(model, {}).values()), 3)])  # fmt: skip
    if over:
        out += ["", "Over the seeds (median [range]):", "",
                markdown_table(["model", "seeds", "test BPC", "valid BPC at equal time"], over)]  # fmt: skip
    for model in MODELS[1:]:
        ahead, n = _ahead(tested, model)
        if n:
            ahead_t, n_t = _ahead(at_time, model)
            out.append(f"\nThe FS-LSTM-2 is ahead of the {model} on {ahead} of {n} seed(s) in test BPC "
                       f"and on {ahead_t} of {n_t} at equal time.")  # fmt: skip
    return "\n".join(out)


def _threads(rows) -> str:
    """The thread counts of the rows that record one (a model's last row does); "one thread" when none does."""
    counts = sorted({int(r["threads"]) for r in rows if "threads" in r})
    return "one thread" if counts in ([], [1]) else " or ".join(map(str, counts)) + " threads"


def _ahead(by_model: Dict[str, Dict[int, float]], model: str) -> tuple:
    """On how many of the seeds both have the FS-LSTM-2's figure is below ``model``'s, and of how many."""
    fs, other = by_model.get("fs-lstm-2", {}), by_model.get(model, {})
    both = set(fs) & set(other)
    return sum(fs[k] < other[k] for k in both), len(both)


def estimate(minutes: float) -> float:
    """Expected minutes: every seed's 3 models for all their epochs at ``CHARS_PER_SECOND`` (the baselines
    are faster), at most the budget."""
    s = _Settings(minutes)
    if s.smoke:
        return minutes
    return min(minutes, len(SEEDS) * _seed_minutes(s))


def _seed_minutes(s: "_Settings") -> float:
    """Expected minutes of one seed's three models."""
    return 3 * s.epochs * s.train_chars / CHARS_PER_SECOND / 60.0


def scale(minutes: float) -> str:
    """The scale note of a budget."""
    s = _Settings(minutes)
    if s.smoke:
        return "smoke scale: fast 12, slow 8, 1 epoch on 4,000 characters"
    return (
        f"reduced: fast cells 350, slow 200 (the paper's 700 / 400), no regularisation, "
        f"the first 1M training characters, {s.epochs} epoch(s) per model; seeds 0, 1, 2 in turn, about "
        f"{_seed_minutes(s):.0f} min a seed (--budget {len(SEEDS) * _seed_minutes(s) + 10:.0f} for all three)"
    )


REPRODUCTION = Reproduction(
    name="fs-rnn-table3",
    paper="Mujika et al. 2017, Fast-Slow Recurrent Neural Networks",
    what="FS-LSTM-2 against stacked and sequential LSTMs of equal parameters on PTB characters (Table 3's training)",
    default_budget=180.0,
    reduced=True,
    scale=scale,
    run=run,
    report=report,
    data_files=PTB_CHAR_FILES,
    seeds="0, 1, 2 (model initialisation and the Trainer's seed), in turn",
    figures=lambda out: epoch_curves(out, "valid_bpc_by_epoch.png", "valid_bpc", "validation BPC"),
    estimate=estimate,
)
