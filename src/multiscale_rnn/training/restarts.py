"""Random restarts selected by the validation likelihood or by the agreement of their boundaries (``best_of``)."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, Union, cast

import numpy as np

from .. import data
from .._checks import non_negative_int, positive_int
from ..checkpoint import check_room
from ..optim import Adam, Optimizer
from ..storage import check_writable
from .evaluation import evaluate
from .inputs import training_data
from .trainer import Trainer

if TYPE_CHECKING:
    from ..models.base import LanguageModel

__all__ = ["best_of", "auto_select_after", "agreements", "most_agreed"]

#: How ``best_of`` keeps one candidate: the lowest validation loss, or the boundaries the others agree with most.
SELECT_RULES = ("loss", "agreement")


def auto_select_after(model, train, batch_size: int, bptt: int, epochs: int) -> Optional[int]:
    """``select_after="auto"`` of :func:`best_of`: the whole epochs of ``train`` (in chunks of ``batch_size``
    streams x ``bptt`` steps) completed before ``model.selection_step()``, or None (compare after ``epochs``)
    where the model names no step or the count is 0 or at least ``epochs``."""
    step = model.selection_step() if hasattr(model, "selection_step") else None
    if step is None:
        return None
    n = data.num_chunks(data.batchify(np.asarray(train), batch_size), bptt)
    e = int(step) // n
    return e if 1 <= e < int(epochs) else None


def agreements(boundaries) -> np.ndarray:
    """For each boundary sequence (1-D bools, all of one text), its mean F1 at tolerance 1 against each other
    one (1.0 when there is no other)."""
    from ..models.hm_lstm import boundary_scores

    k = len(boundaries)
    if k == 1:
        return np.ones(1)
    f1 = [[boundary_scores(boundaries[i], boundaries[j], 1)["f1"] for j in range(k) if j != i] for i in range(k)]
    return np.array([np.mean(row) for row in f1])


def most_agreed(boundaries) -> int:
    """The index of the boundary sequence (1-D bools, all of one text) that agrees best with the others (the
    highest of :func:`agreements`, the first of equals). Reads no labels: of restarts that end in different
    segmentations, it keeps one of those most restarts reached."""
    return int(np.argmax(agreements(boundaries)))


def _check_arguments(make_model, restarts, seed, epochs, select_after, make_optimizer, fit_kw, checkpoint, trainer_kw):
    """``best_of``'s arguments checked before any work: ``(restarts, epochs, select_after, fit_kw)``, refused
    (``ValueError`` / ``TypeError``, or ``OSError`` for a checkpoint path that cannot be written) naming the
    argument."""
    restarts = positive_int(restarts, "restarts")
    non_negative_int(seed, "seed")
    if not callable(make_model):
        raise TypeError(
            f"make_model must be a callable of the seed that returns a model, got {type(make_model).__name__}"
        )
    if make_optimizer is not None and not callable(make_optimizer):
        raise TypeError(
            "make_optimizer must be a callable that returns a fresh optimiser (e.g. lambda: Adam(5e-3)), "
            f"got {type(make_optimizer).__name__}"
        )
    if "optimizer" in trainer_kw:
        raise TypeError(
            "best_of takes make_optimizer (a callable returning a fresh optimiser per candidate), not "
            "optimizer: one optimiser cannot serve several models"
        )
    fit_kw = dict(fit_kw or {})
    for key in ("checkpoint", "resume", "epochs", "vocab", "extra"):
        if key in fit_kw:
            raise TypeError(
                f"fit_kw may not hold {key!r}: best_of sets it (checkpoint, vocab and extra are its own "
                f"arguments; candidates are new runs)"
            )
    epochs = positive_int(epochs, "epochs")
    if isinstance(select_after, str):
        if select_after != "auto":
            raise ValueError(f"select_after must be a positive integer, None or 'auto', got {select_after!r}")
    else:
        select_after = positive_int(select_after, "select_after", allow_none=True)
        if select_after is not None and select_after > epochs:
            raise ValueError(
                f"select_after={select_after} is beyond epochs={epochs}: the candidates are compared "
                f"after select_after epochs, and the chosen one trains on to epochs"
            )
    if checkpoint is not None:
        check_writable(Path(checkpoint), "checkpoint")
    return restarts, epochs, select_after, fit_kw


def _first_checks(model, train, valid, vocab, select: str, checkpoint):
    """``(train, valid, vocab)`` of ``best_of``'s data (:func:`_splits`), checked against the first candidate
    ``model``, with ``select`` and room for the kept candidate's checkpoint (written at the end)."""
    train, valid, vocab = _splits(model, train, valid, vocab)
    _check_select(select, model, valid)
    if checkpoint is not None:
        check_room(checkpoint, model)
    return train, valid, vocab


def _check_select(select: str, model, valid) -> None:
    """``select`` refused unless one of ``SELECT_RULES``, and ``"agreement"`` for a model that marks no
    boundaries (``selection_boundaries`` None), naming the model."""
    if select not in SELECT_RULES:
        raise ValueError(f"select must be one of {', '.join(map(repr, SELECT_RULES))}, got {select!r}")
    if select == "agreement" and model.selection_boundaries(valid[:2]) is None:
        raise ValueError(
            f"select='agreement' compares the candidates' boundaries, and {type(model).__name__} marks "
            f"none (the HM-LSTM does): use select='loss'"
        )


def _most_agreed(marked: list, results: list) -> tuple:
    """``select="agreement"``: the (index, trainer) of the candidate of ``marked`` ((index, trainer, boundaries)
    of each candidate of finite loss) whose boundaries agree best with the others'; each one's ``agreement``
    (:func:`agreements`) goes into its row of ``results``."""
    agree = agreements([b for _, _, b in marked])
    for (i, _, _), a in zip(marked, agree):
        results[i]["agreement"] = float(a)
    i, trainer, _ = marked[int(np.argmax(agree))]
    return i, trainer


def _candidate_trainer(model, seed: int, make_optimizer, eval_batch_size: int, trainer_kw: dict) -> Trainer:
    """A candidate's trainer: a fresh optimiser, a copy of the learning-rate schedule and of early stopping (they
    keep state), and TensorBoard files in a folder of its own (``DIR/seed-N``)."""
    opt = make_optimizer() if make_optimizer is not None else Adam()
    kw = dict(trainer_kw)
    for key in ("lr_schedule", "early_stopping"):
        if kw.get(key) is not None:
            kw[key] = copy.deepcopy(kw[key])
    if kw.get("tensorboard") is not None:
        kw["tensorboard"] = Path(kw["tensorboard"]) / f"seed-{seed}"
    return Trainer(model, optimizer=opt, seed=seed, eval_batch_size=eval_batch_size, **kw)


def _splits(model, train, valid, vocab):
    """``(train, valid, vocab)`` as ``training_data`` gives them, refused without validation ids."""
    train, valid, vocab = training_data(model, train, valid, vocab)
    if valid is None or len(valid) < 2:
        raise ValueError(
            "best_of needs validation ids (at least 2 tokens) to choose among the candidates: "
            "pass valid=, or a corpus with a valid split"
        )
    return train, valid, vocab


def _fit(trainer: Trainer, train, epochs: int, fit_kw: dict, what: str) -> None:
    """``trainer.fit(train, epochs=epochs, **fit_kw)``; a ``FloatingPointError`` is raised again naming ``what``."""
    try:
        trainer.fit(train, epochs=epochs, **fit_kw)
    except FloatingPointError as e:
        raise FloatingPointError(f"{what}: {e}") from e


def _compared(trainer: Trainer, train, valid, epochs: int, fit_kw: dict, eval_batch_size: int, what: str) -> dict:
    """Train a candidate for ``epochs`` and score it on ``valid``: its row of ``best_of``'s results."""
    _fit(trainer, train, epochs, fit_kw, what)
    ev = evaluate(trainer.model, valid, batch_size=eval_batch_size)
    return {
        "seed": trainer.seed,
        "valid_loss": ev["loss"],
        "valid_bpc": ev["bpc"],
        "epochs": trainer.epoch,
        "steps": trainer.step,
        "compared_after": trainer.epoch,
        "chosen": False,
    }


def _better(results: list, i: int, best) -> bool:
    """Whether candidate ``i`` has a finite validation loss lower than the best so far (``best``: its index
    first, or None)."""
    loss = results[i]["valid_loss"]
    return math.isfinite(loss) and (best is None or loss < results[best[0]]["valid_loss"])


def _keep(results: list, best, train, epochs: int, select_after, fit_kw: dict, checkpoint, vocab, extra):
    """The end of ``best_of``: the chosen candidate (``best``: its index and trainer) marked, trained on to
    ``epochs`` when it was compared earlier, and its checkpoint written; returns ``(model, results)``."""
    if best is None:
        raise FloatingPointError(f"no candidate of {len(results)} reached a finite validation loss: {results}")
    chosen, trainer = results[best[0]], best[1]
    chosen["chosen"] = True
    if select_after is not None and select_after < epochs:
        _fit(
            trainer,
            train,
            epochs,
            fit_kw,
            f"the chosen candidate (seed {chosen['seed']}), trained on after the selection",
        )
        chosen.update(epochs=trainer.epoch, steps=trainer.step)
    if checkpoint is not None:
        trainer.save_checkpoint(checkpoint, vocab=vocab, extra=extra)
    return trainer.model, results


def best_of(
    make_model: Callable[[int], LanguageModel],
    train: Any,
    valid: Any = None,
    *,
    restarts: int = 3,
    epochs: int = 1,
    seed: int = 0,
    make_optimizer: Optional[Callable[[], Optimizer]] = None,
    eval_batch_size: int = 16,
    fit_kw: Optional[dict] = None,
    checkpoint: Union[str, Path, None] = None,
    vocab: Any = None,
    extra: Optional[dict] = None,
    select_after: Union[int, str, None] = "auto",
    select: str = "loss",
    **trainer_kw: Any,
) -> Tuple[LanguageModel, List[Dict[str, Any]]]:
    """Random restarts selected by the validation likelihood: train ``restarts`` candidates and keep the one with the
    lowest loss on ``valid``.

    ``train``: a ``data.Corpus`` (its train split; ``valid`` defaults to its valid split, and its vocabulary is
    stored in the checkpoint) or token ids, with ``valid`` the validation ids.

    Candidate ``i`` is ``make_model(seed + i)``, trained by ``Trainer(model, optimizer=make_optimizer(),
    seed=seed + i, **trainer_kw).fit(train, epochs=epochs, **fit_kw)`` (``make_optimizer`` default: ``Adam()``; a fresh
    optimiser per candidate, since an optimiser keeps per-parameter state; an ``lr_schedule``, which may keep state
    too, is copied for each candidate; ``fit_kw`` e.g. ``valid``, ``log``, ``max_chunks``; ``eval_batch_size``
    serves the Trainer's validation and the selection's). The selection reads only the likelihood of ``valid`` (no
    labels), so it is as fair as any model selection on held-out text; keep the text you score the model on out of
    ``valid``.

    ``select_after``: compare the candidates after this many epochs and train only the chosen one on to ``epochs``
    (its optimiser, schedules and step count carried on, as ``fit`` goes on); None: after ``epochs``; ``"auto"``
    (the default): the model's choice (``model.selection_step()``), as whole epochs before that update, and after
    ``epochs`` where the model has none or it falls in the first epoch or at or after the last. The HM-LSTM's
    default recipes name none (compared at the end); with ``compare_at="last_start"`` (the phrase recipe,
    ``warmup=[500, 1500]``) it chooses the last detector's start: comparing before layer 2's detector starts picks
    the run whose word boundaries settled, and costs ``restarts`` times the shorter run plus one continuation.
    The rows' ``valid_loss`` and ``valid_bpc`` are then those at the selection; the chosen row's ``epochs`` and
    ``steps`` count its whole training.

    ``select="agreement"`` keeps instead the candidate of finite loss whose boundaries on ``valid``
    (``model.selection_boundaries``: the HM-LSTM's z^1) the others agree with most (:func:`agreements`, in each
    row's ``agreement``; docs/training.md, "Random restarts").

    ``checkpoint``: the chosen candidate's checkpoint (model, optimiser, progress, history, with ``vocab`` and
    ``extra``) is written there once all candidates are trained, as ``Trainer.fit`` writes it; candidates write
    none, so a failed call leaves an existing file as it was.

    Returns ``(model, results)``: the chosen model and one dict per candidate, in order, with ``seed``,
    ``valid_loss``, ``valid_bpc``, ``epochs``, ``steps``, ``compared_after`` (the epochs at the comparison) and
    ``chosen``. A candidate whose training fails (e.g. ``FloatingPointError``) ends the call naming its seed.

    >>> model, results = best_of(lambda s: HMLSTM(v, 16, [32, 32], seed=s), corpus.train,  # doctest: +SKIP
    ...                          corpus.valid, restarts=3, epochs=40, batch_size=32, bptt=50, clip_norm=1.0,
    ...                          make_optimizer=lambda: optim.Adam(5e-3), progress=False)
    """
    restarts, epochs, select_after, fit_kw = _check_arguments(
        make_model, restarts, seed, epochs, select_after, make_optimizer, fit_kw, checkpoint, trainer_kw
    )
    best, results, marked = None, [], []  # best: (index, trainer) of the lowest finite loss; marked: see below
    for i in range(restarts):
        s = int(seed) + i
        model = make_model(s)
        if i == 0:  # a corpus gives the splits and the vocabulary; checked against the first candidate
            train, valid, vocab = _first_checks(model, train, valid, vocab, select, checkpoint)
        trainer = _candidate_trainer(model, s, make_optimizer, eval_batch_size, trainer_kw)
        if select_after == "auto":  # resolved on the first candidate: they share the configuration
            select_after = auto_select_after(model, train, trainer.batch_size, trainer.bptt, epochs)
        what = f"candidate {i + 1}/{restarts} (seed {s})"
        after = cast(int, select_after or epochs)  # "auto" resolved above
        results.append(_compared(trainer, train, valid, after, fit_kw, eval_batch_size, what))
        if select == "agreement" and math.isfinite(results[i]["valid_loss"]):  # (index, trainer, boundaries)
            marked.append((i, trainer, np.asarray(trainer.model.selection_boundaries(valid), dtype=bool)))
        elif select == "loss" and _better(results, i, best):
            best = (i, trainer)
    best = _most_agreed(marked, results) if marked else best
    return _keep(results, best, train, epochs, select_after, fit_kw, checkpoint, vocab, extra)
