"""``vcrnn-table3``: Jernite et al. 2017, Table 3 (left): VCRNN and VCGRU on Penn Treebank characters,
their mean m_t, equivalent dimension (RNN-d) and BPC, beside an Elman RNN and a GRU of the same RNN-d
(an Elman RNN of size n counts n, a GRU sqrt(2) n, as in the paper's table).

Each model trains one epoch a call from its checkpoint (``OUT/<label>.npz``) with the paper's schedule
(symmetric L1 penalty towards m_bar, ``TARGET``: 0.5 for the VCRNN and 0.3 for the VCGRU; the mask's sharpness
from 0.1 up by 0.1 per epoch to 1), Adam 2e-3, batch 32, BPTT 100, gradient norm clipped to 1, the divergence
guard on (a run it stops goes on from its last checkpoint at half the learning rate, at most twice, then ends at
its best epoch); every epoch is a line
of ``OUT/results.jsonl`` in the layout of ``bench/vc_calibrate.py`` (label, model, hidden, weight,
target, seed, epoch, valid_bpc, mean_m, rnn_d, seconds, isa, threads), whose runs ``report`` reads too.
A checkpoint holds the settings it was trained with (``vc_settings``: the learning rate, the characters read,
the model's options); a call with other settings into the same folder is refused, not continued.
"""

from __future__ import annotations

import copy
import math
import time
from pathlib import Path
from typing import Dict, Optional

from ..training.hooks import Hook
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
    unit_checkpoint,
)

__all__ = [
    "REPRODUCTION",
    "finished",
    "mean_m",
    "train_vc",
    "vc_label",
    "vc_settings",
    "build",
    "recipe_trainer",
    "PAPER",
]

#: Table 3 (left) of the paper: BPC and RNN-d of the 1024-unit models.
PAPER = {"vcrnn": (1.46, 760), "vcgru": (1.42, 648)}
#: m_bar of each VC model (the paper gives none; its VCRNN-1024 and VCGRU-1024 measure RNN-d 760 and 648, 74 % and
#: 45 % of their units). At 0.3 the VCRNN-1024 ended behind the Elman RNN of its RNN-d on every seed and set-up
#: measured, at 0.5 ahead (docs/studies/vcrnn_measurements.md, "m_bar 0.5 for the VCRNN"); the VCGRU is ahead of
#: the GRU of its RNN-d at 0.3.
TARGET = {"vcrnn": 0.5, "vcgru": 0.3}
#: RNN-d of a unit of size n, in units of n, in the paper's convention (Table 3: GRU-1024 has RNN-d 1450): a
#: VC model's measured RNN-d takes the same count (``equivalent_dim(..., gates=GATES[name] ** 2)``), so a VCGRU
#: and the GRU it is compared with are sized alike.
GATES = {"elman": 1.0, "gru": math.sqrt(2), "vcrnn": 1.0, "vcgru": math.sqrt(2)}
#: the constant unit each VC model is compared with (Table 3: the VCRNN with the Elman RNN, the VCGRU with the GRU)
BASELINE = {"vcrnn": "elman", "vcgru": "gru"}


def baseline_size(rnn_d: float, baseline: str) -> int:
    """The hidden size of the ``baseline`` unit (``elman`` or ``gru``) whose RNN-d is ``rnn_d``."""
    return max(1, int(round(rnn_d / GATES[baseline])))


#: Training characters per second on one thread at the default scale, by model: AMD EPYC Zen 3, `avx2`, each model
#: timed over 40 chunks of 32 x 100 of the recipe (the VC models at their ``TARGET``, the Elman RNN at 522 units and
#: the GRU at 340, the sizes of the VC models' RNN-d); an epoch also reads the validation text.
CHARS_PER_SECOND = {"vcrnn": 11_000, "vcgru": 5_200, "elman": 14_300, "gru": 12_300}


def mean_m(model, ids, batch_size: int = 16, chunk: int = 500) -> tuple:
    """(mean m_t, RNN-d) of a VC ``model`` reading ``ids`` in evaluation mode as ``batch_size`` streams,
    RNN-d in the paper's convention (``GATES``: a VCGRU's d_t counted as a GRU's, G = 2)."""
    from ..models.vcrnn import corpus_trace

    m, d = corpus_trace(model, ids, batch_size, chunk)
    return float(m.mean()), float(model.equivalent_dim(d, gates=GATES[model.core_name] ** 2))


def vc_label(model_name: str, hidden: int, weight, target, seed: int, scope: str = "step", init: str = "target") -> str:
    """A model's name in the results (``vcrnn-H512-w0.1-m0.3-seed0``, ``vcrnn-H512-w1-m0.3-batch-seed0`` with
    ``penalty_scope="batch"``, ``vcrnn-H1024-w1-m0.3-uniform-seed1`` with ``scheduler_init="uniform"``;
    ``gru-H460-seed0`` for a baseline)."""
    if weight is None:
        return f"{model_name}-H{hidden}-seed{seed}"
    extra = ("" if scope == "step" else "-" + scope) + ("" if init == "target" else "-" + init)
    return f"{model_name}-H{hidden}-w{weight:g}-m{target:g}{extra}-seed{seed}"


def vc_settings(corpus, settings, model_name: str, weight, seed: int) -> dict:
    """What a model's figures depend on besides its number of epochs, as ``train_vc`` stores them in the model's
    checkpoint and checks them before going on with it (``unit_checkpoint``): the model (unit, D, penalty weight,
    m_bar, penalty scope, scheduler initialisation, seed), the learning rate it started at (``settings.lr``: a
    run halved after a divergence keeps the rate it was asked to train at), the training and validation
    characters it read and ``settings.retries``. The label (``vc_label``) holds none of the rate, the characters
    and the retries, so without them a call with another rate would go on with the model of the other rate. The
    number of epochs is left out: the sharpness schedule and Adam's rate do not depend on it, so a larger
    number goes on with the same run."""
    vc = model_name in ("vcrnn", "vcgru")
    s = dict(
        model=model_name,
        hidden=settings.hidden,
        weight=weight,
        target=settings.target if vc else None,  # a constant unit ignores it (its rows record None)
        seed=seed,
        lr=settings.lr,
        train_chars=len(corpus.train[: settings.train_chars]),  # the characters read, at most the corpus
        valid_chars=len(corpus.valid[: settings.valid_chars]),  # the test text's too (test_bpc)
        retries=getattr(settings, "retries", 0),  # decides how a run goes on after a divergence
    )
    if vc:
        s.update(vc_options(settings))
    return s


def vc_options(settings) -> Dict[str, str]:
    """``settings``' ``penalty_scope`` and ``scheduler_init``, the VC models' declared defaults ("step", "target")
    where it has none."""
    import multiscale_rnn as msr

    declared = msr.VCRNN.all_options()  # the VCGRU declares the same
    return {k: getattr(settings, k, declared[k].default) for k in ("penalty_scope", "scheduler_init")}


def build(model_name, vocab_size, hidden, weight, target, seed, scope="step", init="target"):
    """A model of Table 3: a VC unit (``vcrnn``, ``vcgru``) of D = ``hidden`` with the L1 penalty of ``weight``
    towards m_bar = ``target``, or a constant unit (``elman``, ``gru``; ``weight`` unused)."""
    import multiscale_rnn as msr

    if model_name in ("vcrnn", "vcgru"):
        cls = {"vcrnn": msr.VCRNN, "vcgru": msr.VCGRU}[model_name]
        return cls(vocab_size, embed_size=hidden, hidden_sizes=(hidden,), target=target, penalty="l1",
                   penalty_weight=weight, penalty_scope=scope, scheduler_init=init, seed=seed)  # fmt: skip
    cls = {"elman": msr.ElmanRNN, "gru": msr.GRU}[model_name]
    return cls(vocab_size, embed_size=hidden, hidden_sizes=(hidden,), seed=seed)


def recipe_trainer(model, lr: float, seed: int, progress: bool = False, hooks=(), divergence=0.1):
    """The Table 3 recipe's Trainer: Adam at ``lr``, clipping at norm 1, B = 32, T = 100, the divergence guard
    at ``divergence`` bpc, and for a VC model the paper's sharpness schedule."""
    import multiscale_rnn as msr

    vc = model.core_name in ("vcrnn", "vcgru")
    return msr.Trainer(model, msr.optim.Adam(lr), clip_norm=1.0, batch_size=32, bptt=100, seed=seed,
                       progress=progress, divergence=divergence, hooks=list(hooks),
                       model_options={"sharpness": msr.sharpness_schedule()} if vc else None)  # fmt: skip


def train_vc(corpus, settings, model_name, weight, seed, out: Path, budget=None, progress=False, test=False,
             on_row=None, halvings: int = 0):  # fmt: skip
    """Train one model epoch by epoch from its checkpoint in ``out``; its rows, one per epoch trained by this
    call or read back from the checkpoint (the last with ``test_bpc`` when ``test``), each passed to
    ``on_row`` as soon as it is made, so a run stopped by ``budget`` keeps the rows of its finished epochs.
    An epoch the checkpoint had already passed gets no row: the model in hand is a later epoch's, so its
    figures would be. ``settings`` has ``hidden``, ``target``, ``lr``, ``epochs``, ``train_chars``,
    ``valid_chars`` and may have ``penalty_scope`` and ``scheduler_init`` (``vc_options``: the models' defaults); a
    baseline (``elman``, ``gru``) takes ``weight=None``. ``settings.retries`` (0 when absent): how many times a run
    the divergence guard stops goes on from its last checkpoint with the learning rate halved; ``halvings``: how
    many it already has (its rows marked ``retried``). The divergence gets a row marked ``diverged``
    (``best_epoch``, and ``diverged_bpc`` the figure that stopped it): with ``retried`` when the run goes on, else
    as its last row, whose ``valid_bpc``, ``mean_m``, ``rnn_d`` (and ``test_bpc`` when ``test``) are those of the
    parameters the model ends with, the best epoch's. Every row has the learning rate it trained at.

    Raises ``ValueError`` naming the checkpoint when it was written with other settings (``vc_settings``:
    another learning rate, other characters, another model) or is past ``settings.epochs`` (none of the epochs
    asked can get a row from it); neither is continued nor recorded. A larger ``settings.epochs`` than the
    checkpoint's goes on with it."""
    import multiscale_rnn as msr

    hidden = settings.hidden
    options = vc_options(settings)
    scope, init = options["penalty_scope"], options["scheduler_init"]
    retries = getattr(settings, "retries", 0)
    label = vc_label(model_name, hidden, weight, settings.target, seed, scope, init)
    train, valid = corpus.train[: settings.train_chars], corpus.valid[: settings.valid_chars]
    path = out / f"{label}.npz"
    # Refuses a checkpoint of other settings. Every fit of the unit gets the same extra: each checkpoint write
    # replaces the one stored, so a fit without it would leave the next call nothing to check.
    extra = unit_checkpoint(path, vc_settings(corpus, settings, model_name, weight, seed))

    def start(lr: float):
        """The model and its Trainer at ``lr``; ``fit`` resumes from the checkpoint when there is one."""
        model = build(model_name, corpus.vocab_size, hidden, weight, settings.target, seed, scope, init)
        return model, recipe_trainer(model, lr, seed, progress=progress, hooks=[_LearningRate(lr)])

    lr = settings.lr * 0.5**halvings
    model, trainer = start(lr)
    rows = []
    epochs = 1
    while epochs <= settings.epochs:
        t0 = time.perf_counter()
        history = trainer.fit(
            train, valid=valid, epochs=epochs, checkpoint=path, resume="auto", vocab=corpus.vocab, extra=extra
        )
        _check_not_past(path, label, len(history), settings.epochs)  # only the first fit can find it past
        if len(history) > epochs:  # the checkpoint is past this epoch
            epochs += 1
            continue
        d = trainer.diverged  # the guard stopped this epoch and put the best epoch's parameters back
        r = _epoch_row(model, model_name, settings, weight, seed, label, epochs, lr, history, d, valid)
        r["seconds"] = time.perf_counter() - t0
        m, rnn_d = r["mean_m"], r["rnn_d"]
        retry = d is not None and halvings < retries  # on from the last checkpoint at half the rate
        if retry:
            r["retried"] = True
        elif test and (epochs == settings.epochs or d is not None):
            r["test_bpc"] = msr.evaluate(model, corpus.test[: settings.valid_chars], batch_size=16)["bpc"]
            r.update(machine())
        rows.append(r)
        if on_row is not None:
            on_row(r)
        if retry:
            say(
                progress,
                f"{label}: diverged at epoch {epochs} (lr {lr:g}); on from the last checkpoint at lr {lr / 2:g}",
            )
            halvings, lr = halvings + 1, lr / 2
            model, trainer = start(lr)
            continue
        mm = "" if m is None else f", mean m {m:.3f} (m_bar {settings.target})"
        say(progress, f"{label} epoch {epochs}: valid {r['valid_bpc']:.3f} bpc{mm}, RNN-d {rnn_d:.0f} of {hidden}")
        if d is not None:  # trained on, the run would repeat the diverged epoch from the last checkpoint
            say(progress, f"{label}: diverged at epoch {epochs}; ends with epoch {d['best_epoch']}'s parameters")
            break
        if budget is not None and epochs < settings.epochs:
            budget.check()
        epochs += 1
    return rows


def _epoch_row(model, model_name, settings, weight, seed, label, epoch, lr, history, diverged, valid) -> dict:
    """The row of an epoch (without its seconds): the model's settings, its validation BPC (the best epoch's when
    the divergence guard stopped it, ``diverged`` its record), mean m and RNN-d on ``valid``, the rate it trained
    at, the module and threads."""
    import multiscale_rnn as msr

    vc = model_name in ("vcrnn", "vcgru")
    m, rnn_d = mean_m(model, valid) if vc else (None, GATES[model_name] * settings.hidden)
    r = dict(label=label, model=model_name, hidden=settings.hidden, weight=weight,
             target=settings.target if vc else None, seed=seed, epoch=epoch,
             valid_bpc=history[-1]["valid_bpc"] if diverged is None else diverged["best_bits"], mean_m=m,
             rnn_d=rnn_d, lr=lr, isa=msr._native.ISA, threads=msr.get_num_threads())  # fmt: skip
    if vc:
        r.update(vc_options(settings))
    if diverged is not None:  # the row's figures are the best epoch's, the model's parameters now
        r.update(diverged=True, best_epoch=diverged["best_epoch"], diverged_bpc=diverged["valid_bits"])
    return r


def _check_not_past(path: Path, label: str, trained: int, asked: int) -> None:
    """Refuse a checkpoint already ``trained`` past the ``asked`` epochs: its parameters are a later epoch's, so no
    epoch asked can get a row from it (``ValueError`` naming it and what to do)."""
    if trained > asked:
        raise ValueError(
            f"{path} holds {label} trained for {trained} epochs, past the {asked} asked: its parameters are those "
            f"of epoch {trained}, so no epoch asked can get a row from it. Ask for {trained} or more epochs to go "
            f"on with it, or write this run into another folder (--out)"
        )


class _LearningRate(Hook):
    """Sets the optimiser's learning rate when ``fit`` starts, after the resume (which reads the rate of the
    checkpoint): a run going on after a divergence trains at its lowered rate."""

    def __init__(self, lr: float):
        self.lr = lr

    def on_fit_start(self, run) -> None:
        run.trainer.optimizer.lr = self.lr


class _Settings:
    """The scale of a budget: below a minute the smoke scale, else the paper's 1024 units."""

    def __init__(self, minutes: float):
        self.smoke = minutes < SMOKE_MINUTES
        self.target: Optional[float] = None  # the model's m_bar (``for_model``)
        self.lr, self.weight = 2e-3, 1.0
        self.retries = 2  # a run the divergence guard stops goes on at half the rate, at most twice
        if self.smoke:
            self.hidden, self.train_chars, self.valid_chars, self.epochs = 8, 4_000, 1_000, 1
            return
        self.hidden, self.train_chars, self.valid_chars = 1024, 1_000_000, 100_000
        self.epochs = max(1, min(10, int(60.0 * minutes / self.seconds_per_epoch())))

    def for_model(self, model_name: str) -> "_Settings":
        """These settings with the m_bar of ``model_name`` (``TARGET``; None for a constant unit)."""
        s = copy.copy(self)
        s.target = TARGET.get(model_name)
        return s

    def seconds_per_epoch(self) -> float:
        """One epoch of each of the 4 models at ``CHARS_PER_SECOND``."""
        return sum(self.train_chars / rate for rate in CHARS_PER_SECOND.values())


def finished(r: dict, epochs: int) -> bool:
    """Whether a results row ends its model's run: its last epoch, or the epoch the divergence guard stopped
    when the run did not go on at a lower rate."""
    return not r.get("retried") and (r["epoch"] == epochs or bool(r.get("diverged")))


def _finished_unit(results, label, epochs):
    return next((r for r in results.rows() if r["label"] == label and finished(r, epochs) and "test_bpc" in r), None)


def run(out_dir: Path, budget, progress: bool, data_path) -> None:
    """VCRNN-D and VCGRU-D, then an Elman RNN and a GRU of their measured RNN-d."""
    import multiscale_rnn as msr

    corpus = msr.data.load("ptb-char", path=str(data_path))
    s = _Settings(budget.minutes)
    results = Results(out_dir)
    plan = [("vcrnn", None), ("vcgru", None), ("elman", "vcrnn"), ("gru", "vcgru")]
    for i, (name, like) in enumerate(plan, 1):
        unit_s = s.for_model(name)
        if like is not None:  # the size whose RNN-d is the VC model's
            vc = _finished_unit(results, vc_label(like, s.hidden, s.weight, TARGET[like], 0), s.epochs)
            unit_s.hidden = baseline_size(vc["rnn_d"], name)
        weight = s.weight if like is None else None
        label = vc_label(name, unit_s.hidden, weight, unit_s.target, 0)
        if _finished_unit(results, label, s.epochs) is not None:
            continue
        budget.check()
        say(progress, f"[{i}/{len(plan)}] {label}: {s.epochs} epoch(s) on {s.train_chars:,} characters")
        mine = [r for r in results.rows() if r["label"] == label]
        done = {r["epoch"] for r in mine if not r.get("retried")}
        halvings = sum(1 for r in mine if r.get("retried"))

        def keep(r, done=done):  # a row once: an epoch read back from the checkpoint is in the results already
            if r.get("retried") or "test_bpc" in r or r["epoch"] not in done:
                results.append(r)

        train_vc(corpus, unit_s, name, weight, 0, Path(out_dir), budget, progress, test=True, on_row=keep,
                 halvings=halvings)  # fmt: skip
        budget.unit_finished()


def report(out_dir: Path) -> str:
    """The last epoch of every model in ``out_dir/results.jsonl``, beside the paper's Table 3."""
    last: Dict[str, dict] = {}
    rows_of: Dict[str, list] = {}
    for r in Results(out_dir).rows():
        rows_of.setdefault(r["label"], []).append(r)
        if r["label"] not in last or r["epoch"] >= last[r["label"]]["epoch"]:
            last[r["label"]] = r
    rows = []
    for r in last.values():
        paper = PAPER.get(r["model"]) if r.get("weight") is not None else None
        epochs = f"{r['best_epoch']} (diverged at {r['epoch']})" if r.get("diverged") else str(r["epoch"])
        halved = [x["epoch"] for x in rows_of[r["label"]] if x.get("retried")]
        if halved:
            epochs += f", lr halved at epoch {', '.join(map(str, halved))}"
        rows.append([r["label"], r["hidden"], fmt(r.get("target"), 2), fmt(r.get("weight"), 3), epochs,
                     fmt(r.get("mean_m"), 3), f"{r['rnn_d']:.0f}", fmt(r["valid_bpc"]), fmt(r.get("test_bpc")),
                     "-" if paper is None else f"{paper[0]} @ RNN-d {paper[1]} (1024 units)"])  # fmt: skip
    header = ["model", "D", "m_bar", "penalty", "epochs", "mean m", "RNN-d", "valid BPC", "test BPC", "paper"]
    out = [
        "PTB characters. RNN-d: an Elman RNN of size n counts n, a GRU sqrt(2) n; a VC model its measured "
        "equivalent dimension on the validation text. The paper gives no m_bar or penalty weight.",
        "",
        markdown_table(header, rows),
    ]
    against = _against_baselines(last)
    if against:
        out += ["", "Each VC model against the constant unit of its RNN-d and seed (median [range] over seeds):", ""]
        out.append(markdown_table(["VC model", "seeds", "mean m", "RNN-d", "test BPC", "the unit of its RNN-d",
                                   "VC ahead"], against))  # fmt: skip
    return "\n".join(out)


def _against_baselines(last: Dict[str, dict]) -> list:
    """Rows of the VC models (by unit, hidden size, weight, target and initialisation) tested after their run,
    each seed's test BPC beside that of the Elman RNN / GRU of its RNN-d and seed when it is there."""
    groups: Dict[tuple, list] = {}
    for r in last.values():
        if r["model"] in ("vcrnn", "vcgru") and r.get("test_bpc") is not None:
            init = r.get("scheduler_init", "uniform")  # rows written before the option had the former default
            key = (r["model"], r["hidden"], r["weight"], r["target"], init)
            groups.setdefault(key, []).append(r)
    out = []
    for (model, hidden, weight, target, init), rs in sorted(groups.items()):
        base = BASELINE[model]
        pairs = []
        for r in rs:
            b = last.get(vc_label(base, baseline_size(r["rnn_d"], base), None, None, r["seed"]))
            if b is not None and b.get("test_bpc") is not None:
                pairs.append((r["test_bpc"], b["test_bpc"]))
        name = f"{model}-H{hidden}-w{weight:g}-m{target:g}, scheduler_init {init}"
        ahead = f"{sum(v <= c for v, c in pairs)} of {len(pairs)}" if pairs else "-"
        out.append([name, ", ".join(str(r["seed"]) for r in rs), dist([r["mean_m"] for r in rs], 3),
                    dist([r["rnn_d"] for r in rs], 0), dist([r["test_bpc"] for r in rs], 3),
                    dist([c for _, c in pairs], 3), ahead])  # fmt: skip
    return out


def estimate(minutes: float) -> float:
    """Expected minutes: the 4 models for all their epochs at ``CHARS_PER_SECOND``, at most the budget."""
    s = _Settings(minutes)
    if s.smoke:
        return minutes
    return min(minutes, s.epochs * s.seconds_per_epoch() / 60.0)


def scale(minutes: float) -> str:
    """The scale note of a budget."""
    s = _Settings(minutes)
    if s.smoke:
        return "smoke scale: 8 units, 1 epoch on 4,000 characters"
    return (
        f"the paper's 1024 units (m_bar {TARGET['vcrnn']:g} for the VCRNN, {TARGET['vcgru']:g} for the VCGRU), "
        f"the first 1M training characters, {s.epochs} epoch(s) per model"
    )


REPRODUCTION = Reproduction(
    name="vcrnn-table3",
    paper="Jernite et al. 2017, Variable Computation in Recurrent Neural Networks",
    what="Table 3 (left): VCRNN / VCGRU on PTB characters, mean m, RNN-d, BPC, beside Elman / GRU of the same RNN-d",
    default_budget=180.0,
    reduced=True,
    scale=scale,
    run=run,
    report=report,
    data_files=PTB_CHAR_FILES,
    figures=lambda out: epoch_curves(out, "valid_bpc_by_epoch.png", "valid_bpc", "validation BPC"),
    estimate=estimate,
)
