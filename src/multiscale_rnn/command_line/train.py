"""``multiscale-rnn train``: resolve the settings, build the run, train it (one run, or restarts with the
lowest validation loss kept), and report."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Optional

from .. import presets as _presets
from .._checks import is_int
from ..checkpoint import CheckpointError, load
from ..distributed import DataParallel
from ..storage import check_writable, history_path
from ..training import best_of, evaluate
from . import strokes
from .build import (
    build_optimizer,
    corpus_bits_label,
    load_corpus,
    model_from_settings,
    set_threads,
    trainer_from_settings,
    trainer_kw,
)
from .settings import IDENTITY, normal, settings_sources, show, train_settings

__all__ = ["cmd_train"]


class _Ranks:
    """How the steps of ``train`` run under ``--distributed`` (``dist`` None: one process)."""

    def __init__(self, dist):
        self.dist = dist
        self.root = dist is None or dist.root

    def say(self, text: str) -> None:
        """Print ``text`` on rank 0."""
        if self.root:
            print(text, flush=True)

    def together(self, fn: Callable):
        """Every rank runs ``fn``; an error anywhere is raised on every rank."""
        return fn() if self.dist is None else self.dist.together(fn)

    def on_root(self, fn: Callable):
        """Rank 0 runs ``fn`` (it alone reads and writes the files); its result on every rank."""
        return fn() if self.dist is None else self.dist.on_root(fn)


def _data_parallel(args):
    """``--distributed``: the ``DataParallel`` of ``MPI.COMM_WORLD`` (ImportError without mpi4py); else None."""
    if not getattr(args, "distributed", False):
        return None
    return DataParallel()


def cmd_train(args) -> int:
    """``multiscale-rnn train``; returns the exit status."""
    return _train(args, _data_parallel(args))


def _train(args, dist) -> int:
    """The steps of ``train``: settings, corpus and model, the first lines, the run(s), the report."""
    ranks = _Ranks(dist)
    s, config, flags, preset_given, saved = _settings(args, ranks)
    try:
        return _run(args, dist, ranks, s, config, flags, preset_given, saved)
    except CheckpointError as e:
        if saved is None or saved["settings"] is not None:
            raise
        raise CheckpointError(  # a run from Python: its settings came from the preset and the flags
            f"{e}\n{s['out']} was written from Python and records no command-line settings, so --resume took "
            f"them from the preset {s['preset']} and the flags: give every setting of its run as flags or "
            f"--config (the model's, the batch size, the learning rate and its schedule), or resume it from "
            f"Python (trainer.fit(corpus, checkpoint=..., resume=True))"
        ) from None


def _run(args, dist, ranks: _Ranks, s, config, flags, preset_given, saved) -> int:
    """``train`` once its settings are known: the corpus and model, the first lines, the run(s), the report."""
    out = Path(s["out"])
    corpus, model = ranks.together(lambda: _setup(args, s, out, ranks.root))
    label = corpus_bits_label(corpus)
    data_words = (
        strokes.describe(corpus)
        if strokes.is_strokes(corpus)
        else f"{len(corpus.train):,} training tokens, vocabulary {corpus.vocab_size}"
    )
    ranks.say(f"{s['model']} {model.num_parameters:,} parameters on {corpus.name} ({data_words})")
    ranks.say(
        settings_sources(
            s["preset"],
            preset_given,
            config,
            flags,
            config_name=str(getattr(args, "config", "config")),
            stored_from=str(out) if saved is not None and saved["settings"] is not None else None,
        )
    )
    if dist is not None:
        ranks.say(
            f"data-parallel over {dist.size} MPI ranks: {s['batch_size']} streams, "
            f"{s['batch_size'] // dist.size}{'+' if s['batch_size'] % dist.size else ''} per rank"
        )
    log = _epoch_lines(s, label)
    extra = {"settings": {k: v for k, v in s.items() if k not in ("progress",)}}
    if strokes.is_strokes(corpus):
        extra["strokes"] = strokes.stroke_extra(corpus)
        if s["restarts"] > 1:
            raise ValueError("--restarts is for text corpora; train a pen-stroke model once per seed (--seed)")
    if s["restarts"] > 1:
        model, epoch, step = _train_restarts(args, dist, s, corpus, out, log, extra, ranks.say)
        best = ""
    else:
        epoch, step, best = _train_one(args, dist, s, corpus, model, out, log, extra)
        if saved is not None and saved["epoch"] >= int(s["epochs"]):
            ranks.say(
                f"{out} has already completed {saved['epoch']} epoch(s) and --epochs is {s['epochs']}: nothing to "
                f"train. To train on, pass a larger --epochs (e.g. --resume --epochs {saved['epoch'] + s['epochs']})"
            )
    _report(ranks, s, corpus, model, dist, label, f"done after {epoch} epoch(s), {step} steps{best}", out, step)
    return 0


def _settings(args, ranks: _Ranks):
    """The run's settings and where they came from: ``(settings, config, flags, preset given, saved)``; with
    ``--resume``, the saved run's own settings (``saved``: see :func:`_saved_run`), then config and flags."""
    resume = bool(getattr(args, "resume", False))
    s, config, flags, preset_given = ranks.together(lambda: train_settings(args))
    out = Path(s["out"])
    saved = ranks.on_root(lambda: _saved_run(out)) if resume else None
    if saved is not None and saved["settings"] is not None:  # the run's own settings, then config and flags
        s, config, flags, preset_given = ranks.together(lambda: train_settings(args, saved["settings"], str(out)))
        s["out"] = str(out)
        path = s.get("data_path")
        if s["data"] == "text" and path and "data_path" not in flags and not Path(path).expanduser().exists():
            raise FileNotFoundError(
                f"--resume: {out} was trained on the text {path}, which is not there (a relative path is read "
                f"from the current folder, {Path.cwd()}): give --data-path where that text is now"
            )
    return s, config, flags, preset_given, saved


def _setup(args, s: Dict[str, Any], out: Path, root: bool):
    """The corpus and the model, after the checks that come before any work (rank 0 checks the files)."""
    if root:
        check_writable(out, "--out checkpoint")  # before any work
        check_writable(history_path(out), "history")
    set_threads(s["threads"])
    corpus = load_corpus(s)
    model = model_from_settings(s, getattr(corpus, "vocab_size", None), corpus)
    if root and not getattr(args, "resume", False) and not getattr(args, "overwrite", False):
        _check_overwrite(out, s)  # after the settings' own errors, still before any work
    return corpus, model


def _epoch_lines(s: Dict[str, Any], label: str) -> Callable:
    """The ``log`` of the run: without the progress display, a line per epoch on standard output."""

    def log(event):
        if event["event"] == "epoch" and not s["progress"]:
            valid = f", valid {label} {event['valid_bpc']:.4f}" if event["valid_bpc"] is not None else ""
            print(
                f"epoch {event['epoch']}: train {label} {event['train_bpc']:.4f}{valid}, "
                f"{event['tokens_per_s']:,.0f} tokens/s, {event['seconds']:.1f} s",
                flush=True,
            )

    return log


def _train_one(args, dist, s, corpus, model, out: Path, log, extra) -> tuple:
    """One run (``restarts`` = 1), resumed with ``--resume``; returns its epochs, steps and what early stopping
    did (for the last line: the best epoch, whose parameters the model holds; empty without early stopping)."""
    trainer = trainer_from_settings(s, corpus, model, dist)
    trainer.fit(
        corpus.train,
        valid=corpus.valid,
        epochs=int(s["epochs"]),
        checkpoint=out,
        resume=bool(getattr(args, "resume", False)),
        max_chunks=s["max_chunks"],
        checkpoint_every=s["checkpoint_every"],
        log=log,
        vocab=getattr(corpus, "vocab", None),
        extra=extra,
    )
    return trainer.epoch, trainer.step, _early_stopping_note(trainer, int(s["epochs"]))


def _early_stopping_note(trainer, epochs: int) -> str:
    """The words of the last line on early stopping: whether it stopped the run, and the best epoch (whose
    parameters the model holds once the run is over, stopped early or not)."""
    stopper = trainer.early_stopping
    if stopper is None or trainer.best_epoch is None:
        return ""
    stopped = (
        f" (stopped early: no better validation loss for {stopper.patience} epochs)"
        if stopper.stopped_epoch is not None
        else ""
    )
    over = stopper.stopped_epoch is not None or trainer.epoch >= epochs
    return f"{stopped}; best epoch {trainer.best_epoch}" + (" (its parameters restored)" if over else " so far")


def _report(ranks: _Ranks, s, corpus, model, dist, label: str, done: str, out: Path, step: int) -> None:
    """The last lines: the figures on the valid and test splits, then the model's own notes."""
    results = {}
    for split in ("valid", "test"):
        ids = getattr(corpus, split)
        if ids is not None and len(ids) >= (1 if strokes.is_strokes(corpus) else 2):  # sequences, or ids
            results[split] = evaluate(
                model, ids, batch_size=int(s["eval_batch_size"]), bptt=int(s["bptt"]), distributed=dist
            )
    if strokes.is_strokes(corpus):
        parts = [strokes.report_line(split, r) for split, r in results.items()]
    else:
        parts = [
            f"{split} {label} {r['bpc']:.4f}"
            + (f" (perplexity {r['perplexity']:.1f})" if corpus.unit == "word" else "")
            for split, r in results.items()
        ]
    scored = ", ".join(parts) if parts else "no valid or test split to score"
    ranks.say(f"{done}: {scored}; checkpoint {out}")
    for line in model.end_of_run_notes(corpus, step):  # the family's own report (HM-LSTM: its boundaries)
        ranks.say(line)


def _train_restarts(args, dist, s, corpus, out, log, extra, say):
    """``restarts`` > 1: ``best_of`` over the seeds s["seed"] .. + restarts - 1; the chosen run's checkpoint
    goes to ``out``. Returns the chosen model, its epochs and its steps."""
    n = int(s["restarts"])
    _check_restarts(args, dist, s, corpus, n)

    def run(seed) -> str:
        return f"run {seed - int(s['seed']) + 1}/{n} (seed {seed})"

    def make(seed):  # called as each run starts
        say(run(seed))
        return model_from_settings({**s, "seed": seed}, corpus.vocab_size, corpus)

    model, results = best_of(
        make,
        corpus.train,
        corpus.valid,
        restarts=n,
        epochs=int(s["epochs"]),
        seed=int(s["seed"]),
        select_after=s["select_after"],
        select=s["select"],
        make_optimizer=lambda: build_optimizer(s),
        fit_kw={"valid": corpus.valid, "log": log},
        checkpoint=out,
        vocab=corpus.vocab,
        extra=extra,
        **trainer_kw(s, corpus),
    )
    label = corpus_bits_label(corpus)
    compared = results[0]["compared_after"]
    for r in results:
        at = f" after {compared} epochs" if compared < int(s["epochs"]) else ""
        agree = f", agreement {r['agreement']:.3f}" if "agreement" in r else ""
        say(f"{run(r['seed'])}: valid {label} {r['valid_bpc']:.4f}{at}{agree}" + ("  <- kept" if r["chosen"] else ""))
    chosen = next(r for r in results if r["chosen"])
    return model, chosen["epochs"], chosen["steps"]


def _check_restarts(args, dist, s, corpus, n: int) -> None:
    """Refuse what restarts cannot do: resume, distribute, choose without validation data, stop early."""
    if getattr(args, "resume", False):
        raise ValueError(
            f"--resume continues one run, and restarts = {n} starts new ones: resume the chosen run "
            f"with --restarts 1 (its seed is in the checkpoint)"
        )
    if dist is not None:
        raise ValueError("restarts > 1 is not available with --distributed (train the runs one by one)")
    if corpus.valid is None or len(corpus.valid) < 2:
        raise ValueError(
            f"restarts = {n} chooses by the validation loss, and corpus {corpus.name} has no validation split"
        )
    if s["checkpoint_every"] is not None or s["max_chunks"] is not None:
        raise ValueError(
            "restarts > 1 writes the chosen run's checkpoint at the end: it takes neither "
            "checkpoint-every nor max-chunks"
        )


def _saved_run(out: Path) -> Dict[str, Any]:
    """What ``--resume`` needs to know of the checkpoint ``out`` before the work: its settings (None when
    it was written from Python, which records none) and its completed epochs."""
    if not out.exists():
        raise FileNotFoundError(f"--resume: no checkpoint at {out} to continue (--out names it)")
    ck = load(out)
    settings = ck.extra.get("settings")
    state = ck.trainer_state or {}
    epoch = state.get("epoch")
    if isinstance(settings, dict) and is_int(state.get("seed")):  # the run's own seed (restarts: the kept run's)
        settings = {**settings, "seed": state["seed"]}
    return {"settings": settings if isinstance(settings, dict) else None, "epoch": epoch if is_int(epoch) else 0}


def _check_overwrite(out: Path, s: Dict[str, Any]) -> None:
    """A new run writes ``out``: refuse (``FileExistsError``) when it holds something else than a checkpoint of
    the same model and data (another model, another corpus, a run from Python, a file of another kind),
    naming the difference and the flags that choose (another ``--out``, ``--overwrite``, ``--resume``)."""
    if not out.exists():
        return
    choose = "give another --out, or --overwrite to replace it"
    try:
        ck = load(out)
    except (ValueError, OSError) as e:
        raise FileExistsError(
            f"--out {out} exists and is not a checkpoint this run may replace ({e}); {choose}"
        ) from None
    saved: Optional[dict] = ck.extra.get("settings")
    if not isinstance(saved, dict):
        raise FileExistsError(
            f"--out {out} holds a {ck.config.get('model')} model saved from Python, which records "
            f"no settings to compare with this run's; {choose}"
        )
    diffs = []
    for key in IDENTITY:
        old, new = saved.get(key, _presets.DEFAULTS[key]), s.get(key)
        if key == "data_path" and old is not None and new is not None:
            old, new = str(Path(old).expanduser().resolve()), str(Path(new).expanduser().resolve())
        if normal(old) != normal(new):
            diffs.append(f"{key} {show(old)} there, {show(new)} here")
    if diffs:
        raise FileExistsError(
            f"--out {out} holds the checkpoint of another model or data ({'; '.join(diffs)}); "
            f"this run would overwrite it: {choose} (--resume continues it)"
        )
