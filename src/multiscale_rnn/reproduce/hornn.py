"""``hornn-table2``: Soltani & Jiang 2016, Table 2 (test perplexity of HORNNs against order and pooling
on word-level Penn Treebank), with the order-1 RNN of their Table 3; ``hornn-figure6``: their Figure 6 (test
perplexity of the 3rd-order FOFE HORNN against the forgetting factor alpha), with the same recipe;
``hornn-table4``: their Table 4 (text8 words, the 3rd-order HORNN of every pooling and the RNN), with the recipe as
the paper took it to text8 untuned: 500 units and the text8 schedule (``models.hornn.CORPUS_SETTINGS``, 5 epochs at
the initial rate, then halved after every epoch; all epochs trained, the best kept).

The paper's recipe (docs/training.md): 400 sigmoid units, the class-based softmax, N(0, 0.1^2)
initialisation, SGD with momentum 0.9 and the paper's learning rate, 0.5 (``models.hornn.LEARNING_RATE``; 1.0,
the best of a 2-epoch sweep of the RNN alone, ended higher on nearly every model trained to the end),
weight decay 1e-5, clipping by value at 5, column normalisation at 4.0 (``RECIPE``; 2.0 until 2026-12-02),
batch 20, BPTT 30, and the learning rate and stopping rule of Mikolov's RNNLM toolkit (``schedule()``: the
rate halved after the first epoch that misses, validation loss not 0.3 % below the epoch before, and after
every epoch from then on; training stops at the second miss, ``should_stop``). The paper halves "at the end of
each epoch if the cross entropy on the validation set does not decrease" and follows the toolkit's schedule on
text8; halving only after the epochs that miss (``ReduceOnPlateau(patience=0)``) left the RNN at 153.1 test
perplexity, and two epochs of the toolkit's halving from its best epoch took it to 135.0
(docs/studies/hornn_ptb.md).

The checkpoint directory is the one of ``bench/repro_hornn_ptb.py --checkpoints DIR``:
``DIR/<pooling>-N<order>-H<hidden>-seed<seed>.npz`` per model (``fofe-N3-alpha0.2-H400-seed0.npz`` for
Figure 6's) (one epoch a call, resumed after an
interruption) and one line of ``DIR/results.jsonl`` per finished model.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..models.hornn import CORPUS_SETTINGS, LEARNING_RATE, RECIPE, RECIPE_OPTIONS
from ._common import (
    PTB_WORD_FILES,
    SMOKE_MINUTES,
    TEXT8_FILES,
    Reproduction,
    Results,
    dist,
    figure,
    fmt,
    machine,
    markdown_table,
    say,
    unit_checkpoint,
)

__all__ = [
    "REPRODUCTION",
    "FIGURE6",
    "TABLE4",
    "HornnSettings",
    "schedule",
    "recipe_trainer",
    "should_stop",
    "train_model",
    "finished",
    "PAPER",
]


def schedule(anneal_after: Optional[int] = None):
    """The learning-rate schedule of the recipe: the RNNLM toolkit's (``schedules.NewBob``, its
    ``min_improvement`` 1.003 as a threshold of 0.3 % on the validation loss); a run capped below the
    paper's 20 epochs halves from ``anneal_after`` on at the latest (``HornnSettings.anneal_after``)."""
    import multiscale_rnn as msr

    return msr.schedules.NewBob(factor=2.0, threshold=0.003, anneal_after=anneal_after)


#: Table 2 of the paper (test perplexity by pooling and order) and the RNN of its Table 3.
PAPER = {
    ("plain", 1): 123,
    ("plain", 2): 111,
    ("plain", 3): 108,
    ("plain", 4): 109,
    ("max", 2): 110,
    ("max", 3): 109,
    ("max", 4): 108,
    ("fofe", 2): 103,
    ("fofe", 3): 101,
    ("fofe", 4): 100,
    ("gated", 2): 102,
    ("gated", 3): 100,
    ("gated", 4): 100,
}

#: The models trained, in order: the RNN, order 3 with every pooling, then orders 2 and 4 of the two best.
UNITS = [
    ("plain", 1),
    ("plain", 3),
    ("max", 3),
    ("fofe", 3),
    ("gated", 3),
    ("fofe", 2),
    ("gated", 2),
    ("fofe", 4),
    ("gated", 4),
]

#: The seeds a run trains, in turn, each all its models (the smoke scale: the first); the scale is set for one seed.
SEEDS = (0, 1, 2)

#: The forgetting factors of Figure 6 (the paper's range, 0.2-0.9), each a 3rd-order FOFE HORNN.
ALPHAS = (0.2, 0.4, 0.6, 0.8, 0.9)

#: What the paper says of Figure 6 (a plot; the text gives no figures): the best alpha and the one it uses.
PAPER_FIGURE6 = "lowest between alpha 0.5 and 0.7 (the paper's text; a plot without figures), alpha 0.6 used: 101"
PAPER_BEST_ALPHAS = (0.5, 0.7)

WORDS_PER_SECOND = 5_000  # a conservative one-thread rate of the 400-unit models (9,000 for the RNN alone)

#: Table 4 of the paper (test perplexity on text8 words, 44k-word vocabulary): the 3rd-order HORNNs, and the RNN the
#: paper quotes (Mikolov et al. 2014).
PAPER_TABLE4 = {("plain", 1): 184, ("plain", 3): 172, ("max", 3): 163, ("fofe", 3): 154, ("gated", 3): 144}

#: Table 4's models, in the order a seed trains them: the RNN, the two best poolings of Table 2, then plain and max.
UNITS_TABLE4 = [("plain", 1), ("fofe", 3), ("gated", 3), ("plain", 3), ("max", 3)]

#: The corpora the HORNN reproductions train on (``data.load`` names) and their key in ``CORPUS_SETTINGS``.
CORPORA = {"ptb-word": "ptb", "text8-word": "text8"}

#: Training words of the text8 prefix in ../shared/data (the first 12.5 % of text8, cut 90 / 5 / 5 %), the size
#: Table 4's budget is planned on; the full text8's 90M characters hold about 8 times as many.
TEXT8_PREFIX_WORDS = 1_926_898


@dataclass
class HornnSettings:
    """The settings of a HORNN run (the attributes ``bench/repro_hornn_ptb.py``'s arguments have)."""

    hidden: int = 400
    train_tokens: int = 100_000_000
    epochs: int = 20
    anneal_after: Optional[int] = None  # halve after every epoch from this one on, missed or not (None: NewBob's rule)
    lr: float = LEARNING_RATE
    weight_decay: float = RECIPE["weight_decay"]  # the recipe's; one not ``UNNAMED``'s is part of a model's key
    column_norm: float = RECIPE["column_norm"]  # the same (the recipe's 4.0 is: rows without it were at 2.0)
    head: str = RECIPE_OPTIONS["head"]  # the class softmax, or "linear": the full softmax of the paper's eq. 2
    corpus: str = "ptb-word"  # or "text8-word": the paper's text8 schedule (CORPUS_SETTINGS), all epochs trained
    seed: int = 0
    threads: int = 1
    progress: bool = False
    checkpoints: Optional[str] = None


def recipe_trainer(model, lr: float, lr_schedule, progress: bool = False, **overrides):
    """The recipe's Trainer for ``model`` (``models.hornn.RECIPE``: SGD at ``lr`` with momentum 0.9 and weight
    decay 1e-5, clipping by value at 5, batch 20, BPTT 30, column normalisation at 4.0), the learning rate
    following ``lr_schedule``; ``weight_decay=`` / ``column_norm=`` in place of the recipe's."""
    import multiscale_rnn as msr

    unknown = sorted(set(overrides) - {"weight_decay", "column_norm"})
    if unknown:
        raise TypeError(f"recipe_trainer takes weight_decay and column_norm, not {', '.join(unknown)}")
    r = {**RECIPE, **overrides}
    return msr.Trainer(model, msr.optim.SGD(lr, momentum=r["momentum"], weight_decay=r["weight_decay"]),
                       clip_value=r["clip_value"], batch_size=r["batch_size"], bptt=r["bptt"], unit="word",
                       progress=progress, lr_schedule=lr_schedule,
                       constraint=msr.optim.ColumnNorm(r["column_norm"]))  # fmt: skip


def corpus_settings(args) -> Dict[str, Any]:
    """The paper's settings for ``args``' corpus (``CORPUS_SETTINGS``; PTB's where ``args`` names none)."""
    return CORPUS_SETTINGS[CORPORA[getattr(args, "corpus", OPTIONAL["corpus"])]]


def lr_schedule(args):
    """The learning-rate schedule of ``args``' corpus: on PTB ``schedule(args.anneal_after)`` (the toolkit's, which
    ``should_stop`` ends), on text8 the paper's text8 schedule (``CORPUS_SETTINGS``: ``schedules.HalveAfter``, the
    rate halved after every epoch from ``args.anneal_after``, or the paper's 5, on)."""
    import multiscale_rnn as msr

    corpus = corpus_settings(args)
    anneal_after = getattr(args, "anneal_after", None)
    if corpus["lr_schedule"] == "newbob":
        return schedule(anneal_after)
    return msr.schedules.HalveAfter(corpus["halve_after"] if anneal_after is None else anneal_after)


def should_stop(valid_losses) -> bool:
    """The stopping rule (the RNNLM toolkit's; the paper names the halving, not when to stop): stop at
    the second epoch that misses (``schedule()``'s test), or after ``epochs``."""
    return schedule().misses(valid_losses) >= 2


def label(pooling: str, order: int, alpha=None) -> str:
    """A model's name in the checkpoint directory (``plain-N3``, ``fofe-N3-alpha0.6``)."""
    return f"{pooling}-N{order}" + ("" if alpha is None else f"-alpha{alpha}")


def unit_name(pooling: str, order: int, alpha, hidden: int, seed: int) -> str:
    """The stem of a model's files in the checkpoint directory (``gated-N3-H400-seed0``: .npz, .history.json)."""
    return f"{label(pooling, order, alpha)}-H{hidden}-seed{seed}"


def train_model(corpus, classes, args, pooling="plain", order=1, alpha=None, budget=None):
    """Train one HORNN with the paper's recipe on ``args.corpus`` (its schedule: ``lr_schedule``); (valid, test
    perplexity, seconds, epochs, best epoch), the perplexities those of the epoch with the lowest validation loss and
    the seconds the training time of all its epochs (summed from the history, so a run that resumed counts the
    epochs before the resume too; the evaluations are not counted). With ``args.checkpoints``, one epoch a call from
    the model's checkpoint there (an interrupted run goes on where it stopped) until ``args.epochs`` or, on PTB,
    ``should_stop``; ``budget.check()`` after each epoch. A checkpoint
    there written with other settings (``_key``: another learning rate, scale or schedule) is refused
    (``unit_checkpoint``)."""
    import multiscale_rnn as msr

    head = getattr(args, "head", RECIPE_OPTIONS["head"])
    kw = dict(order=order, pooling=pooling, activation=RECIPE_OPTIONS["activation"], seed=args.seed, head=head)
    if head == "class":
        kw["head_classes"] = classes
    if alpha is not None:
        kw["alpha"] = alpha
    model = msr.HORNN(corpus.vocab_size, args.hidden, (args.hidden,), **kw)
    msr.init.gaussian(model, RECIPE["init_std"], rng=args.seed)
    trainer = recipe_trainer(model, args.lr, lr_schedule(args), args.progress, **regularisation(args))
    stops = isinstance(trainer.lr_schedule, msr.schedules.NewBob)  # the toolkit's rule; text8's trains every epoch
    train = corpus.train[: args.train_tokens]
    if args.checkpoints is None:
        trainer.fit(train, valid=corpus.valid, epochs=args.epochs)
        epochs = args.epochs
    else:
        ck = Path(args.checkpoints) / f"{unit_name(pooling, order, alpha, args.hidden, args.seed)}.npz"
        extra = unit_checkpoint(ck, _key(corpus, args, pooling, order, alpha))  # refuses another run's checkpoint
        for epochs in range(1, args.epochs + 1):
            history = trainer.fit(
                train, valid=corpus.valid, epochs=epochs, checkpoint=ck, resume="auto", vocab=corpus.vocab, extra=extra
            )
            if stops and should_stop([r["valid_loss"] for r in history]):
                break
            if budget is not None and epochs < args.epochs:
                budget.check()
    trainer.restore_best()  # the epoch of lowest validation loss, not the last (which stopped on a miss)
    valid = msr.evaluate(model, corpus.valid, batch_size=20, bptt=30)["perplexity"]
    test = msr.evaluate(model, corpus.test, batch_size=20, bptt=30)["perplexity"]
    seconds = sum(r["seconds"] for r in trainer.history)
    return valid, test, seconds, epochs, trainer.best_epoch


#: The regularisation of the rows and checkpoints written before it entered a key (``_key``): a key names weight
#: decay and column norm only where they differ from these, so those rows keep their keys. Column norm 2.0 was the
#: recipe's until 2026-12-02; a row without ``column_norm`` was trained at 2.0, one of today's recipe names 4.0.
UNNAMED = {"weight_decay": 1e-5, "column_norm": 2.0}


#: The items a model's key (``_key``) holds only where they differ from these values, those of the rows written before
#: each entered keys (no ``anneal_after``, the class softmax, ``UNNAMED``'s regularisation). A key without one matches
#: only the rows without it (``find_done``: ``Results.find`` matches the rows holding every item of a key, so a key
#: without ``column_norm``, a model at 2.0, would otherwise take a row at 4.0 for its own).
OPTIONAL: Dict[str, Any] = {"anneal_after": None, "head": "class", "corpus": "ptb-word", **UNNAMED}


def regularisation(args) -> Dict[str, float]:
    """``args``' weight decay and column norm, the recipe's (``RECIPE``) where ``args`` has none or None."""
    given = {k: getattr(args, k, None) for k in UNNAMED}
    return {k: float(RECIPE[k] if v is None else v) for k, v in given.items()}


def _key(corpus, args, pooling, order, alpha):
    optional = {k: getattr(args, k, OPTIONAL[k]) for k in ("anneal_after", "head", "corpus")} | regularisation(args)
    return dict(
        pooling=pooling,
        order=order,
        alpha=alpha,
        hidden=args.hidden,
        seed=args.seed,
        train_tokens=min(args.train_tokens, len(corpus.train)),
        max_epochs=args.epochs,
        lr=args.lr,
        # rows without it were trained with ReduceOnPlateau(patience=0)
        schedule=corpus_settings(args)["lr_schedule"],
        # only where not ``OPTIONAL``'s: the rows before these options keep their keys
        **{k: v for k, v in optional.items() if v != OPTIONAL[k]},
    )


def default_alpha() -> float:
    """FOFE's default forgetting factor (the core's declaration: 0.6), the model a FOFE row without alpha trained."""
    from ..models.base import core_default

    return float(core_default("hornn", "alpha"))


def row_alpha(r: dict) -> float:
    """A FOFE row's forgetting factor: its ``alpha``, or the default for a row without one (Table 2's FOFE models,
    the same models as Figure 6's at that alpha)."""
    return float(r["alpha"]) if r.get("alpha") is not None else default_alpha()


def find_done(results: Results, key: dict) -> Optional[dict]:
    """The row of ``key``'s model in ``results``, or None; a FOFE model at the default alpha is found under either
    key, without alpha (Table 2's) or with it (Figure 6's): one model, trained once. A row with an item of
    ``OPTIONAL`` that ``key`` does not have (or the reverse) is another model's."""
    exact = dict(key, **{k: key.get(k) for k in OPTIONAL})  # None: the row has no such item
    done = results.find(exact)
    if done is None and key["pooling"] == "fofe" and row_alpha(key) == default_alpha():
        done = results.find(dict(exact, alpha=default_alpha() if key["alpha"] is None else None))
    return done


def finished(corpus, classes, args, pooling, order, alpha=None, budget=None):
    """``train_model``'s (valid, test, seconds); with ``args.checkpoints``, read from DIR/results.jsonl
    when that model finished before (``find_done``), else trained and appended there (with its epochs and
    machine)."""
    if args.checkpoints is None:
        return train_model(corpus, classes, args, pooling, order, alpha)[:3]
    key = _key(corpus, args, pooling, order, alpha)
    results = Results(Path(args.checkpoints))
    done = find_done(results, key)
    if done is not None:
        return done["valid"], done["test"], done["seconds"]
    Path(args.checkpoints).mkdir(parents=True, exist_ok=True)
    valid, test, sec, epochs, best = train_model(corpus, classes, args, pooling, order, alpha, budget=budget)
    results.append(
        dict(key, valid=valid, test=test, seconds=sec, epochs=epochs, best_epoch=best, vocab_size=corpus.vocab_size,
             **machine())
    )  # fmt: skip
    return valid, test, sec


#: Training words a corpus's budget is planned on: PTB's, and the text8 prefix's (``TEXT8_PREFIX_WORDS``).
PLANNED_WORDS = {"ptb-word": 929_589, "text8-word": TEXT8_PREFIX_WORDS}


def settings_for(minutes: float, models: int = len(UNITS), corpus: str = "ptb-word") -> HornnSettings:
    """The scale of a budget: below a minute the smoke scale (16 units, 1 epoch, 2,000 words), else the
    paper's size for ``corpus`` (``CORPUS_SETTINGS``: 400 units on PTB, 500 on text8) on all of the training words
    and as many epochs per model (at most the paper's 20 on PTB, our 10 on text8) as the budget shared by the
    ``models`` models (Table 2's 9, Figure 6's and Table 4's 5) allows at ``WORDS_PER_SECOND`` on the corpus's
    ``PLANNED_WORDS`` (so the scale is the one ``scale`` states whatever the data; a larger text takes longer). Capped
    below that, the rate is halved from an earlier epoch on at the latest: the last 3 on PTB, the second half on
    text8."""
    if minutes < SMOKE_MINUTES:
        return HornnSettings(hidden=16, train_tokens=2_000, epochs=1, corpus=corpus)
    paper = CORPUS_SETTINGS[CORPORA[corpus]]
    words = PLANNED_WORDS[corpus]
    most = paper["epochs"]
    epochs = max(1, min(most, int(60.0 * minutes / models / (words / WORDS_PER_SECOND))))
    if not 1 < epochs < most:
        anneal_after = None
    elif paper["lr_schedule"] == "newbob":
        anneal_after = max(1, epochs - 3)  # as a converged run's would
    else:
        anneal_after = min(paper["halve_after"], max(1, epochs // 2))
    return HornnSettings(hidden=paper["hidden"], epochs=epochs, anneal_after=anneal_after, corpus=corpus)


def _seed_minutes(minutes: float, models: int, corpus: str = "ptb-word") -> float:
    """Expected minutes of one seed's ``models`` models for all their epochs at ``WORDS_PER_SECOND`` (the stopping
    rule may end a model sooner), at the scale of ``minutes``."""
    epochs = settings_for(minutes, models=models, corpus=corpus).epochs
    return models * epochs * PLANNED_WORDS[corpus] / WORDS_PER_SECOND / 60.0


def estimate(minutes: float, models: int = len(UNITS), corpus: str = "ptb-word") -> float:
    """Expected minutes: every seed's ``models`` models (``_seed_minutes``), at most the budget."""
    if minutes < SMOKE_MINUTES:
        return minutes
    return min(minutes, len(SEEDS) * _seed_minutes(minutes, models, corpus))


def scale(minutes: float, models: int = len(UNITS), corpus: str = "ptb-word") -> str:
    """The scale note of a budget shared by ``models`` models a seed: their size and epochs, and how long a seed
    takes (the scale is the first call's, so a later call into the same folder with a larger budget trains the
    other seeds at this scale)."""
    s = settings_for(minutes, models=models, corpus=corpus)
    if minutes < SMOKE_MINUTES:
        return "smoke scale: 16 units, 1 epoch on 2,000 words, seed 0"
    halving = "" if s.anneal_after is None else f", the rate halved from epoch {s.anneal_after + 1} on at the latest"
    per_seed = _seed_minutes(minutes, models, corpus)
    seeds = ", ".join(str(x) for x in SEEDS)
    if len(SEEDS) * per_seed <= minutes:
        fit = f"all {len(SEEDS)} within the budget"
    else:
        total = len(SEEDS) * per_seed + 10
        fit = f"--budget {total:.0f} in a later call into the same --out trains all {len(SEEDS)} at this scale"
    text8 = (
        " (planned on the text8 prefix's 1.9M; the full text8 takes 8 times as long)" if corpus != "ptb-word" else ""
    )
    return (
        f"the paper's size ({s.hidden} units), all training words{text8}, at most {s.epochs} epoch(s) per "
        f"model{halving}; seeds {seeds} in turn, about {per_seed:.0f} min a seed ({fit})"
    )


def _train_all(
    out_dir: Path,
    budget,
    progress: bool,
    data_path,
    units: List[Tuple[str, int, Optional[float]]],
    corpus_name: str = "ptb-word",
):
    """For each of ``SEEDS`` in turn, train every (pooling, order, alpha) of ``units`` not yet in
    ``out_dir/results.jsonl``, in turn, on ``corpus_name`` at the scale of ``budget`` shared by one seed's units."""
    import multiscale_rnn as msr

    corpus = msr.data.load(corpus_name, path=str(data_path)).by_frequency()
    classes = msr.data.class_sizes(corpus.counts())
    args = settings_for(budget.minutes, models=len(units), corpus=corpus_name)
    args.checkpoints, args.progress, args.threads = str(out_dir), progress, msr.get_num_threads()
    for seed in SEEDS[:1] if budget.smoke else SEEDS:
        args.seed = seed
        for i, (pooling, order, alpha) in enumerate(units, 1):
            if find_done(Results(out_dir), _key(corpus, args, pooling, order, alpha)) is not None:
                continue
            budget.check()
            name = f"[seed {args.seed}, {i}/{len(units)}] {label(pooling, order, alpha)}"
            say(progress, f"{name}: H {args.hidden}, up to {args.epochs} epoch(s)")
            valid, test, sec = finished(corpus, classes, args, pooling, order, alpha, budget=budget)
            say(progress, f"{name}: test {test:.1f}, valid {valid:.1f}, {sec:.0f} s")
            budget.unit_finished()


def run(out_dir: Path, budget, progress: bool, data_path) -> None:
    """Train every model of Table 2 (``UNITS``) not yet in ``out_dir/results.jsonl``."""
    _train_all(out_dir, budget, progress, data_path, [(pooling, order, None) for pooling, order in UNITS])


def run_figure6(out_dir: Path, budget, progress: bool, data_path) -> None:
    """Train the 3rd-order FOFE HORNN at every alpha of ``ALPHAS`` not yet in ``out_dir/results.jsonl``."""
    _train_all(out_dir, budget, progress, data_path, [("fofe", 3, alpha) for alpha in ALPHAS])


def run_table4(out_dir: Path, budget, progress: bool, data_path) -> None:
    """Train every model of Table 4 (``UNITS_TABLE4``) on text8 words not yet in ``out_dir/results.jsonl``."""
    units: List[Tuple[str, int, Optional[float]]] = [(pooling, order, None) for pooling, order in UNITS_TABLE4]
    _train_all(out_dir, budget, progress, data_path, units, corpus_name="text8-word")


#: The items of a row's key (``_key``) besides its model and seed: the settings its figures depend on.
SETTINGS = ("corpus", "hidden", "train_tokens", "max_epochs", "lr", "schedule", "anneal_after", "weight_decay",
            "column_norm", "head")  # fmt: skip


def _in_table(r: dict, alpha: bool) -> bool:
    """Whether a row belongs to Table 2 (``alpha`` False: every model at the default alpha, FOFE's without alpha or
    with the default) or to Figure 6 (True: every 3rd-order FOFE model, Table 2's at the default alpha included)."""
    if alpha:
        return r.get("pooling") == "fofe" and r.get("order") == 3
    return r.get("alpha") is None or row_alpha(r) == default_alpha()


def _table_rows(out_dir: Path, alpha: bool = False, corpus: str = "ptb-word") -> Tuple[List[dict], List[dict]]:
    """The rows of ``out_dir/results.jsonl`` of Table 2 (with ``alpha``, of Figure 6: ``_in_table``; with ``corpus``
    "text8-word", of Table 4), split into those on ``corpus`` with the settings of the latest such row (the tables'
    rows) and the others (rows of another corpus or run into the same folder: a table or median mixing them would
    compare models trained differently)."""
    rows = [r for r in Results(out_dir).rows() if _in_table(r, alpha)]
    mine = [r for r in rows if r.get("corpus", OPTIONAL["corpus"]) == corpus]
    latest = tuple(mine[-1].get(k) for k in SETTINGS) if mine else None
    kept: List[dict] = []
    others: List[dict] = []
    for r in rows:
        (kept if tuple(r.get(k) for k in SETTINGS) == latest and r in mine else others).append(r)
    return kept, others


def _by_model(kept: List[dict]) -> Dict[tuple, Dict[int, dict]]:
    """(pooling, order) -> seed -> the latest row of that model and seed among ``kept`` (``_table_rows``')."""
    by: Dict[tuple, Dict[int, dict]] = {}
    for r in sorted(kept, key=lambda r: r.get("alpha") is None):  # rows with alpha first: one without it wins
        by.setdefault((r["pooling"], r["order"]), {})[int(r.get("seed", 0))] = r
    return by


def _cell(rows: Dict[int, dict]) -> str:
    """One seed: test (valid); several: the median [range] of the test perplexities and the seed count."""
    if len(rows) == 1:
        r = next(iter(rows.values()))
        return f"{r['test']:.1f} ({r['valid']:.1f})"
    return f"{dist([r['test'] for r in rows.values()], 1)} ({len(rows)} seeds)"


def report(out_dir: Path) -> str:
    """Table 2 beside ours: test perplexity (valid in brackets; median [range] over seeds where a model has
    several) of every model in ``out_dir/results.jsonl``, each HORNN against the RNN of the same seed, and a
    row per model and seed with its epochs."""
    kept, others = _table_rows(Path(out_dir))
    by = _by_model(kept)
    table = []
    for pooling in ("plain", "max", "fofe", "gated"):
        cells = [pooling]
        for order in (1, 2, 3, 4):
            # one path: at order 1 every pooling but FOFE's and the gate's is the RNN
            ours = by.get((pooling, order), by.get(("plain", 1)) if (pooling, order) == ("max", 1) else None)
            paper = PAPER.get((pooling, order), PAPER[("plain", 1)] if (order, pooling) == (1, "max") else None)
            cells.append(f"{'-' if ours is None else _cell(ours)} / {fmt(paper)}")
        table.append(cells)
    out = [
        "Test perplexity, ours (validation in brackets; median [range] over seeds where a model has several) / the "
        "paper's; N=1 is the RNN (paper: Table 3, Mikolov et al. 2011). `-`: not trained yet.",
        "",
        markdown_table(["pooling", "N=1", "N=2", "N=3", "N=4"], table),
    ]
    return "\n".join(out + _against_rnn_and_runs(Path(out_dir), kept, others, by))


def _against_rnn_and_runs(out_dir: Path, kept: List[dict], others: List[dict], by: Dict[tuple, Dict[int, dict]]):
    """The report's lines after its table: each HORNN against the RNN of the same seed, a row per finished model and
    seed (``_runs_table``), the rows left out (``_others_line``) and the models in progress."""
    rnn = by.get(("plain", 1), {})
    against = []
    for (pooling, order), seeds in sorted(by.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        paired = [seeds[s]["test"] - rnn[s]["test"] for s in sorted(seeds) if s in rnn]
        if order > 1 and paired:
            below = sum(d < 0 for d in paired)
            against.append([label(pooling, order), f"{below} of {len(paired)}", dist(paired, 1)])
    rows = sorted((r for seeds in by.values() for r in seeds.values()),
                  key=lambda r: (r["order"], r["pooling"], r.get("seed", 0)))  # fmt: skip
    out = []
    if against:
        out += ["", "Each HORNN against the RNN of the same seed (test perplexity, HORNN minus RNN):", ""]
        out.append(markdown_table(["model", "below the RNN", "difference"], against))
    out += ["", _runs_table(rows)] + _still_improving(rows) + _others_line(kept, others)
    return out + _in_progress(out_dir, rows)


def _still_improving(rows: List[dict]) -> List[str]:
    """A line naming how many of ``rows`` kept their last epoch with every epoch of the scale trained: those were
    still improving when the scale stopped them, so more epochs would likely lower their figures."""
    last = [r for r in rows if r.get("best_epoch") == r.get("epochs") == r["max_epochs"]]  # no best_epoch: not counted
    if not last:
        return []
    return [
        "",
        f"{len(last)} of {len(rows)} model(s) trained all {last[0]['max_epochs']} epochs and kept the last: still "
        "improving when the scale stopped them, so more epochs would likely lower their figures.",
    ]


def report_table4(out_dir: Path) -> str:
    """Table 4 beside ours: test perplexity (valid in brackets; median [range] over seeds where a model has
    several) of the RNN and each 3rd-order HORNN on text8 words in ``out_dir/results.jsonl``, each HORNN against
    the RNN of the same seed, and a row per model and seed with its epochs."""
    kept, others = _table_rows(Path(out_dir), corpus="text8-word")
    by = _by_model(kept)
    vocab = f"{kept[-1]['vocab_size']:,}" if kept and "vocab_size" in kept[-1] else "the training text's"
    table = [
        [
            "RNN" if order == 1 else label(pooling, order),
            "-" if (pooling, order) not in by else _cell(by[pooling, order]),
            fmt(PAPER_TABLE4[pooling, order]),
        ]
        for pooling, order in UNITS_TABLE4
    ]
    out = [
        "Test perplexity on text8 words, ours (validation in brackets; median [range] over seeds where a model has "
        f"several; our vocabulary: {vocab} words, those seen 10 times or more in training) beside the paper's (the "
        "full text8, a vocabulary of about 44k; its RNN is Mikolov et al. 2014's). `-`: not trained yet.",
        "",
        markdown_table(["model", "ours: test (valid)", "paper"], table),
    ]
    hornns = [u for u in UNITS_TABLE4 if u[1] > 1]
    if all(u in by for u in hornns):  # the paper's order of the poolings, on the medians
        ours = sorted(hornns, key=lambda u: float(np.median([r["test"] for r in by[u].values()])))
        papers = sorted(hornns, key=lambda u: PAPER_TABLE4[u])
        out += ["", f"The poolings from best to worst by median test perplexity: ours {', '.join(p for p, _ in ours)}; "
                    f"the paper's {', '.join(p for p, _ in papers)}."]  # fmt: skip
    return "\n".join(out + _against_rnn_and_runs(Path(out_dir), kept, others, by))


def _runs_table(rows: List[dict]) -> str:
    """A row per finished model and seed: its settings, epochs (the epoch kept: of lowest validation loss),
    perplexities and training seconds."""
    return markdown_table(
        ["model", "seed", "hidden", "training words", "epochs (max)", "kept", "lr", "test", "valid", "seconds"],
        [
            [
                label(r["pooling"], r["order"], r.get("alpha")),
                r.get("seed", 0),
                r["hidden"],
                f"{r['train_tokens']:,}",
                f"{r.get('epochs', '?')} ({r['max_epochs']})",
                r.get("best_epoch", "?"),
                r["lr"],
                f"{r['test']:.1f}",
                f"{r['valid']:.1f}",
                f"{r['seconds']:.0f}",
            ]
            for r in rows
        ],
    )


def _by_alpha(kept: List[dict]) -> Dict[float, Dict[int, dict]]:
    """alpha -> seed -> the latest row of the 3rd-order FOFE HORNN at that alpha (``row_alpha``) and seed among
    ``kept``; where both exist, the row with alpha wins over Table 2's without."""
    by: Dict[float, Dict[int, dict]] = {}
    for r in sorted(kept, key=lambda r: r.get("alpha") is not None):  # rows without alpha first
        by.setdefault(row_alpha(r), {})[int(r.get("seed", 0))] = r
    return dict(sorted(by.items()))


def report_figure6(out_dir: Path) -> str:
    """Figure 6 as a table: test perplexity (valid in brackets; median [range] over seeds where an alpha has
    several) of the 3rd-order FOFE HORNN at each alpha in ``out_dir/results.jsonl``, the alpha of lowest test
    perplexity of each seed beside the paper's 0.5-0.7 (and of lowest validation perplexity, the split an alpha
    would be chosen on), and a row per model and seed."""
    kept, others = _table_rows(Path(out_dir), alpha=True)
    by = _by_alpha(kept)
    out = [
        "Test perplexity of the 3rd-order FOFE HORNN against its forgetting factor alpha (validation in brackets; "
        "median [range] over seeds where an alpha has several). The paper: " + PAPER_FIGURE6 + ".",
    ]
    if not by:
        return "\n".join(out + ["", "No model has finished yet."] + _in_progress(Path(out_dir), [], alpha=True))
    out += ["", markdown_table(["alpha", "test (valid)"], [[f"{a:g}", _cell(seeds)] for a, seeds in by.items()])]
    seeds = sorted({s for rows in by.values() for s in rows})
    complete = [s for s in seeds if all(s in rows for rows in by.values())]
    if len(by) > 1 and complete:
        lo, hi = PAPER_BEST_ALPHAS

        def lowest(split: str) -> str:
            best = {s: min(by, key=lambda a: by[a][s][split]) for s in complete}
            inside = sum(lo <= a <= hi for a in best.values())
            return (f"at alpha {', '.join(f'{best[s]:g} (seed {s})' for s in complete)}: within the paper's "
                    f"{lo:g}-{hi:g} on {inside} of {len(complete)} seed(s)")  # fmt: skip

        out += [
            "",
            f"Lowest test perplexity {lowest('test')} (over the alphas {', '.join(f'{a:g}' for a in by)}). Lowest "
            f"validation perplexity, the split an alpha would be chosen on, {lowest('valid')}.",
        ]
    rows = sorted((r for seeds in by.values() for r in seeds.values()),
                  key=lambda r: (row_alpha(r), r.get("seed", 0)))  # fmt: skip
    out += ["", _runs_table(rows)] + _others_line(kept, others)
    return "\n".join(out + _in_progress(Path(out_dir), rows, alpha=True))


def _others_line(kept: List[dict], others: List[dict]) -> List[str]:
    """The report's line naming the rows of other settings that its tables leave out (none: no line), and the one
    saying that the tables' rows have the full softmax where the recipe has the class softmax."""
    head = []
    if kept and kept[-1].get("head", OPTIONAL["head"]) != RECIPE_OPTIONS["head"]:
        head = ["", f"The tables' models have the output layer `head={kept[-1]['head']!r}` (the full softmax of the "
                    f"paper's eq. 2), where the recipe has the class softmax."]  # fmt: skip
    if not others:
        return head

    def settings(r):
        return ", ".join(f"{k} {r[k]}" for k in SETTINGS if r.get(k) is not None)

    other = "; ".join(sorted({settings(r) for r in others}))
    held = f"the rows trained with the latest row's settings ({settings(kept[-1])})" if kept else "no row of its corpus"
    return ["", f"The tables hold {held}; left out: {len(others)} row(s) of other settings ({other})."] + head


def _in_progress(out_dir: Path, rows, alpha: bool = False) -> list:
    """Lines for the models with a checkpoint's history but no result yet (those without alpha, Table 2's; with
    ``alpha``, Figure 6's, Table 2's 3rd-order FOFE included): their last epoch."""
    import json

    finished_names = {unit_name(r["pooling"], r["order"], r.get("alpha"), r["hidden"], r["seed"]) for r in rows}
    lines = []
    for path in sorted(out_dir.glob("*.history.json")):
        name = path.name[: -len(".history.json")]
        history = json.loads(path.read_text())
        ours = ("-alpha" in name or name.startswith(label("fofe", 3) + "-H")) if alpha else "-alpha" not in name
        if name in finished_names or not history or not ours:
            continue
        last = history[-1]
        ppl = last.get("valid_perplexity")
        lines.append(f"- in progress: {name}, epoch {last['epoch']}, valid perplexity {fmt(ppl, 1)}")
    return ["", "Not finished yet:", ""] + lines if lines else []


def _median_and_range(values: List[np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
    """The median of each array of ``values`` (figures over seeds) and its range as matplotlib's ``yerr``, (2, n)."""
    med = np.array([np.median(v) for v in values])
    return med, np.array([[m - v.min() for m, v in zip(med, values)], [v.max() - m for m, v in zip(med, values)]])


def figures(out_dir: Path) -> None:
    """``perplexity_by_order.png``: test perplexity against order per pooling, ours (solid; the median over
    seeds, their range as a bar, each pooling a little apart so that equal medians stay visible) and the paper's
    (dashed), the RNN at N = 1 in both."""
    by = _by_model(_table_rows(Path(out_dir))[0])
    tests = {k: np.array([r["test"] for r in v.values()]) for k, v in by.items()}
    if not tests:
        return
    seeds = sorted({s for v in by.values() for s in v})

    def draw(ax):
        for i, pooling in enumerate(("plain", "max", "fofe", "gated")):
            color = f"C{i}"
            ours = {n: tests.get((pooling, n), tests.get(("plain", 1)) if n == 1 else None) for n in (1, 2, 3, 4)}
            xs = [n for n, v in ours.items() if v is not None]
            med, spread = _median_and_range([ours[n] for n in xs])
            shift = 0.06 * (i - 1.5)
            ax.errorbar([n + shift for n in xs], med, yerr=spread, marker="o", capsize=2, color=color,
                        label=f"{pooling} (ours)")  # fmt: skip
            paper = [PAPER.get((pooling, n), PAPER[("plain", 1)] if n == 1 else None) for n in (1, 2, 3, 4)]
            ax.plot([1, 2, 3, 4], paper, linestyle="--", color=color, alpha=0.6)
        ax.set_xticks([1, 2, 3, 4])
        ax.set_xlabel("order N (1: the RNN)")
        ax.set_ylabel("test perplexity")
        ax.set_title(f"PTB words; median and range over seeds {', '.join(map(str, seeds))}; dashed: the paper",
                     fontsize=9)  # fmt: skip
        ax.legend(fontsize=7)

    figure(out_dir, "perplexity_by_order.png", draw)


def figures_figure6(out_dir: Path) -> None:
    """``perplexity_by_alpha.png``: test perplexity against alpha (the median over seeds, their range as a bar),
    the paper's best alphas (0.5-0.7) shaded."""
    by = _by_alpha(_table_rows(Path(out_dir), alpha=True)[0])
    if not by:
        return
    med, spread = _median_and_range([np.array([r["test"] for r in seeds.values()]) for seeds in by.values()])

    def draw(ax):
        ax.axvspan(*PAPER_BEST_ALPHAS, color="0.9", label="the paper's best alphas")
        ax.errorbar(list(by), med, yerr=spread, marker="o", capsize=3, label="ours (median, range over seeds)")
        ax.set_xlabel("forgetting factor alpha")
        ax.set_ylabel("test perplexity")
        ax.set_title("3rd-order FOFE HORNN, PTB words", fontsize=9)
        ax.legend(fontsize=7)

    figure(out_dir, "perplexity_by_alpha.png", draw)


def figures_table4(out_dir: Path) -> None:
    """``perplexity_table4.png``: test perplexity of each model of Table 4, ours (the median over seeds, their range
    as a bar) and the paper's (crosses; the full text8, so higher than ours is not a miss)."""
    by = _by_model(_table_rows(Path(out_dir), corpus="text8-word")[0])
    units = [u for u in UNITS_TABLE4 if u in by]
    if not units:
        return
    med, spread = _median_and_range([np.array([r["test"] for r in by[u].values()]) for u in units])
    names = ["RNN" if order == 1 else pooling for pooling, order in units]

    def draw(ax):
        xs = np.arange(len(units))
        ax.errorbar(xs, med, yerr=spread, marker="o", linestyle="none", capsize=3, label="ours (median, range)")
        ax.plot(xs, [PAPER_TABLE4[u] for u in units], "x", color="C3", label="the paper (full text8)")
        ax.set_xticks(xs, names)
        ax.set_xlabel("model (the HORNNs of order 3)")
        ax.set_ylabel("test perplexity")
        ax.set_title("text8 words", fontsize=9)
        ax.legend(fontsize=7)

    figure(out_dir, "perplexity_table4.png", draw)


SEED_NOTE = ", ".join(str(x) for x in SEEDS) + " (the model's initialisation), in turn"

REPRODUCTION = Reproduction(
    name="hornn-table2",
    paper="Soltani & Jiang 2016, Higher Order Recurrent Neural Networks",
    what="Table 2: PTB word test perplexity against order (2-4) and pooling (plain, max, FOFE, gated), with the RNN",
    default_budget=180.0,
    reduced=True,
    scale=scale,
    run=run,
    report=report,
    data_files=PTB_WORD_FILES,
    seeds=SEED_NOTE,
    figures=figures,
    estimate=estimate,
)

FIGURE6 = Reproduction(
    name="hornn-figure6",
    paper="Soltani & Jiang 2016, Higher Order Recurrent Neural Networks",
    what="Figure 6: PTB word test perplexity of the 3rd-order FOFE HORNN against its forgetting factor alpha (0.2-0.9)",
    default_budget=180.0,
    reduced=True,
    scale=partial(scale, models=len(ALPHAS)),
    run=run_figure6,
    report=report_figure6,
    data_files=PTB_WORD_FILES,
    seeds=SEED_NOTE,
    figures=figures_figure6,
    estimate=partial(estimate, models=len(ALPHAS)),
)

TABLE4 = Reproduction(
    name="hornn-table4",
    paper="Soltani & Jiang 2016, Higher Order Recurrent Neural Networks",
    what="Table 4: text8 word test perplexity of the 3rd-order HORNNs (plain, max, FOFE, gated) and the RNN, with "
    "the recipe the paper brought from PTB untuned",
    default_budget=180.0,
    reduced=True,
    scale=partial(scale, models=len(UNITS_TABLE4), corpus="text8-word"),
    run=run_table4,
    report=report_table4,
    data_files=TEXT8_FILES,
    seeds=SEED_NOTE,
    figures=figures_table4,
    estimate=partial(estimate, models=len(UNITS_TABLE4), corpus="text8-word"),
)
