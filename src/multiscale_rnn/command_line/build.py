"""What a run is built from its settings: the model, the optimiser, the schedules, the corpus, the
Trainer's arguments."""

from __future__ import annotations

import inspect
import re
from typing import Any, Dict, List, Optional

from .. import data, set_num_threads
from .._checks import did_you_mean
from ..data import loaders
from ..data.classes import class_sizes
from ..data.loaders import corpus_key
from ..data.synthetic import synthetic_hierarchy
from ..init import gaussian
from ..models.registry import build_model
from ..optim import SGD, Adam, ColumnNorm
from ..schedules import linear, lr_schedule_name, make_lr_schedule
from ..training import EarlyStopping, Trainer, bits_label

__all__ = [
    "model_from_settings",
    "build_optimizer",
    "build_lr_schedule",
    "anneal_schedule",
    "trainer_kw",
    "trainer_from_settings",
    "load_corpus",
    "token_unit",
    "corpus_bits_label",
    "set_threads",
]


def model_from_settings(settings: Dict[str, Any], vocab_size: Optional[int], corpus=None):
    """Build the model named in ``settings`` through ``build_model``; ``vocab_size`` None (a corpus of pen
    strokes): the mixture density head on (dx, dy, pen bit) rows, ``head="mdn"`` and ``input_size=3``
    unless the options say otherwise. The class softmax (option ``head="class"``) without ``head_classes``
    takes its class sizes from the training counts of ``corpus``, whose ids ``load_corpus`` put in descending
    frequency for that head (``data.class_sizes``). ``init_std``: every parameter then drawn
    from N(0, init_std^2) (``init.gaussian``, seeded by the settings' seed)."""
    own = ("vocab_size", "embed_size", "hidden_sizes", "dropout", "dtype", "seed")
    clash = sorted(set(settings["options"]) & set(own))
    if clash:
        raise ValueError(
            f"model option(s) {clash} are settings of their own: use --{clash[0].replace('_', '-')} "
            f"(or the top-level key in a config file)"
        )
    options = dict(settings["options"])
    if vocab_size is None:
        options.setdefault("head", "mdn")
        options.setdefault("input_size", 3)
    if options.get("head") == "class" and options.get("head_classes") is None:
        if corpus is None or not hasattr(corpus, "counts"):
            raise ValueError("head='class' without head_classes takes its class sizes from a text corpus: none given")
        options["head_classes"] = class_sizes(corpus.counts())
    model = build_model(
        settings["model"],
        vocab_size=None if vocab_size is None else int(vocab_size),
        embed_size=settings["embed_size"],
        hidden_sizes=list(settings["hidden_sizes"]),
        dropout=float(settings["dropout"]),
        dtype=settings["dtype"],
        seed=settings["seed"],
        **options,
    )
    if settings.get("init_std") is not None:
        gaussian(model, float(settings["init_std"]), rng=settings["seed"])
    return model


def build_optimizer(settings):
    """The optimiser of ``settings``: Adam or SGD with the learning rate, momentum and weight decay."""
    name = str(settings["optimizer"]).lower()
    if name == "adam":
        return Adam(lr=settings["lr"], weight_decay=settings["weight_decay"])
    if name == "sgd":
        return SGD(lr=settings["lr"], momentum=settings["momentum"], weight_decay=settings["weight_decay"])
    raise ValueError(f"unknown optimizer {settings['optimizer']!r}; choose adam or sgd")


def build_lr_schedule(settings):
    """The learning-rate schedule of ``settings`` (None for a constant rate)."""
    name = lr_schedule_name(str(settings["lr_schedule"]))
    every = settings.get("lr_every", "epoch")
    if name == "constant":
        return None
    if name == "halve":
        return make_lr_schedule("halve", epoch_n=settings["halve_after"], factor=settings["lr_factor"], every=every)
    if name == "multistep":
        return make_lr_schedule(
            "multistep", milestones=settings["lr_milestones"], factor=settings["lr_factor"], every=every
        )
    if every != "epoch":
        raise ValueError(
            f"lr-schedule {name} follows the validation loss and steps per epoch only "
            "(lr-every step is for halve and multistep)"
        )
    if name == "newbob":
        return make_lr_schedule(name, factor=settings["lr_factor"])
    return make_lr_schedule(name, factor=settings["lr_factor"], patience=settings["patience"])


def anneal_schedule(spec):
    """``[start, end, rate]`` (rate per epoch) or ``[start, end, rate, "step"|"epoch"]`` -> a schedule."""
    start, end, rate = (float(x) for x in spec[:3])
    if len(spec) == 4 and spec[3] == "step":
        return linear(start, end, per_step=rate)
    return linear(start, end, per_epoch=rate)


def trainer_kw(s, corpus) -> Dict[str, Any]:
    """The Trainer's arguments from the settings (all but the optimiser, seed and distribution)."""
    return dict(
        clip_norm=s["clip_norm"],
        clip_value=s["clip_value"],
        constraint=None if s.get("column_norm") is None else ColumnNorm(float(s["column_norm"])),
        batch_size=s["batch_size"],
        bptt=s["bptt"],
        lr_schedule=build_lr_schedule(s),
        model_options={k: anneal_schedule(v) for k, v in s["anneal"].items()},
        progress=bool(s["progress"]),
        eval_batch_size=s["eval_batch_size"],
        unit=token_unit(corpus),
        divergence=s.get("divergence"),
        early_stopping=None if s.get("early_stopping") is None else EarlyStopping(s["early_stopping"], s["min_delta"]),
        tensorboard=s.get("tensorboard"),
    )


def trainer_from_settings(s, corpus, model, distributed=None, progress=None):
    """The Trainer of a run: ``model`` with the optimiser, seed, schedules, clipping and batch of the settings
    ``s`` (``trainer_kw``), over MPI when ``distributed`` is given; ``progress`` (the Trainer's True, False,
    "bar" or "lines") in place of the settings' when given."""
    kw = trainer_kw(s, corpus)
    if progress is not None:
        kw["progress"] = progress
    return Trainer(model, optimizer=build_optimizer(s), seed=s["seed"], distributed=distributed, **kw)


def load_corpus(settings):
    """The corpus of ``settings`` (``data.load``), its ids in descending training frequency for a model with
    the class softmax (option ``head="class"``: ``Corpus.by_frequency()``, the order its class sizes need); a
    corpus option it does not take is refused naming the ``--data-option`` names it takes."""
    try:
        corpus = data.load(settings["data"], path=settings["data_path"], **settings["data_options"])
    except TypeError as e:  # an option the corpus does not take: name the flag and the options it takes
        m = re.search(r"unexpected (?:keyword argument|option\(s\):) '?([\w, ]+?)'?$", str(e))
        if not m:
            raise
        names = _corpus_options(settings["data"])
        hint = did_you_mean(m.group(1), names)
        takes = f"it takes {', '.join(names)}" if names else "it takes none"
        given = settings["data_path"] if settings["data"] == "text" and settings["data_path"] else settings["data"]
        raise ValueError(f"--data {given} takes no --data-option {m.group(1)}{hint}; {takes}") from None
    if settings["options"].get("head") == "class" and hasattr(corpus, "by_frequency"):
        corpus = corpus.by_frequency()
    return corpus


def _corpus_options(name: str) -> List[str]:
    """The --data-option names corpus ``name`` takes."""
    key = corpus_key(str(name))
    if key == "synthetic":
        return list(inspect.signature(synthetic_hierarchy).parameters) + ["valid_fraction", "test_fraction"]
    return list(getattr(loaders, "_OPTIONS", {}).get(key, ()))


def token_unit(corpus) -> str:
    """What one token of the corpus is, for the label of the bits figure: "char", "word", or
    "bit" / "symbol" for corpora that say so (``token_unit``: the bit corpora, the music corpus)."""
    return str(getattr(corpus, "token_unit", None) or getattr(corpus, "unit", "step"))


def corpus_bits_label(corpus) -> str:
    """The name of the corpus's bits-per-token figure (bpc, bpw, bits/bit, bits/symbol)."""
    return bits_label(token_unit(corpus))


def set_threads(n) -> None:
    """``--threads``: the core's thread count (None: leave it)."""
    if n is not None:
        set_num_threads(n)
