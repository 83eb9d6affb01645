"""Named training settings for ``multiscale-rnn train --preset NAME`` (and ``resolve_settings``).

A preset is a dict of settings with the same keys as a TOML config file (see ``docs/cli.md``);
the order of precedence is: built-in defaults < preset < ``--config`` file < command-line flags.
Each model family declares its own presets (``PRESETS`` in the module that defines it, e.g.
``models/hornn.py``); this module gathers those of every registered family. Add a paper's experiment
there as one entry, with the source of its numbers in ``"about"``.

From Python, :func:`build` gives a preset's model, Trainer and corpus in one call, built by the code
the command line runs (``command_line/settings.py``, ``command_line/build.py``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Dict, NamedTuple, Optional

from ._checks import did_you_mean

if TYPE_CHECKING:
    from .data.corpus import Corpus
    from .models.base import LanguageModel
    from .storage import History
    from .training import Trainer

__all__ = ["DEFAULTS", "PRESETS", "get_preset", "DEFAULT_PRESET", "family_presets", "build", "PresetRun"]

#: Every setting the command line knows, with its default.
DEFAULTS: Dict[str, Any] = {
    # model
    "model": "lstm",
    "embed_size": 64,
    "hidden_sizes": [256],
    "dropout": 0.0,
    "dtype": "float32",
    "options": {},  # model-specific constructor options, e.g. {"layer_norm": true}
    "init_std": None,  # every parameter drawn from N(0, init_std^2) (msr.init.gaussian); null: the model's own
    # data
    "data": "embedded",
    "data_path": None,
    "data_options": {},  # e.g. for "synthetic": {"n_chars": 200000, "seed": 0}
    # training
    "epochs": 1,
    "batch_size": 32,
    "bptt": 100,
    "optimizer": "adam",  # adam | sgd
    "lr": 2e-3,
    "momentum": 0.0,  # sgd only
    "weight_decay": 0.0,
    "clip_norm": 1.0,  # null / "none" to switch off
    "clip_value": None,
    "column_norm": None,  # column normalisation after every update (msr.optim.ColumnNorm(max_norm)); null: off
    "divergence": None,  # bits per token above the best valid figure that stop a diverged run (e.g. 0.1); null: off
    "early_stopping": None,  # epochs without a better validation loss that stop the run (e.g. 3); null: off
    "min_delta": 0.0,  # early stopping: the decrease of the validation loss (nats) that counts as better
    "tensorboard": None,  # a folder for TensorBoard event files; null: none
    "lr_schedule": "constant",  # constant | halve | plateau
    "lr_factor": 2.0,  # halve / plateau: divide by this
    "patience": 0,  # plateau
    "halve_after": 4,  # halve: epochs at the initial rate
    "lr_milestones": [],  # multistep: completed-epoch counts after which lr is divided by lr_factor
    "lr_every": "epoch",  # halve / multistep count epochs, or "step": optimiser updates
    "anneal": {},  # option -> [start, end, per_epoch] (or [start, end, per_step, "step"])
    "max_chunks": None,
    "checkpoint_every": None,
    "eval_batch_size": 16,
    "restarts": 1,  # > 1: train this many runs (seeds seed, seed+1, ...), keep the lowest valid loss
    "select_after": "auto",  # restarts > 1: compare the runs after this many epochs ("auto": where the model
    # says, e.g. before the last detector starts of an HM-LSTM with compare_at="last_start"; none: at the end)
    "select": "loss",  # restarts > 1: keep the lowest validation loss, or "agreement": the boundaries the others share
    "seed": 0,
    "threads": None,
    "out": "runs/model.npz",
    "progress": True,
}

DEFAULT_PRESET = "quick"


def family_presets() -> Dict[str, Dict[str, Any]]:
    """Every registered family's presets (the ``PRESETS`` of the module that defines it), merged in the
    order of ``MODELS``; a name two families both declare is refused."""
    from .models import MODELS

    merged: Dict[str, Dict[str, Any]] = {}
    modules = dict.fromkeys(sys.modules[cls.__module__] for cls in MODELS.values())
    for module in modules:
        for name, preset in getattr(module, "PRESETS", {}).items():
            if name in merged:
                raise ValueError(f"preset {name!r} is declared twice (again in {module.__name__})")
            merged[name] = preset
    return merged


#: The presets of every model family, by name.
PRESETS: Dict[str, Dict[str, Any]] = family_presets()


def get_preset(name: str) -> Dict[str, Any]:
    """A copy of the named preset (without its ``about`` text)."""
    if not isinstance(name, str):
        raise TypeError(f"a preset's name must be a str, got {type(name).__name__}")
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}{did_you_mean(name, PRESETS)}; presets: {', '.join(sorted(PRESETS))}")
    return {k: v for k, v in PRESETS[name].items() if k != "about"}


class PresetRun(NamedTuple):
    """What :func:`build` returns: the preset's ``model``, its ``trainer`` (optimiser, schedules,
    clipping, batch and seed of the preset), the ``corpus`` it trains on and the resolved ``settings``
    (the keys of a TOML config, docs/cli.md; ``settings["epochs"]`` is the preset's length)."""

    model: "LanguageModel"
    trainer: "Trainer"
    corpus: "Corpus"
    settings: Dict[str, Any]

    def fit(self, epochs: Optional[int] = None, **kwargs: Any) -> "History":
        """``trainer.fit(corpus, epochs=settings["epochs"], ...)``: the run ``multiscale-rnn train --preset``
        makes (one run: a preset's ``restarts`` are the command line's, ``msr.best_of`` from Python). A
        checkpoint (``checkpoint=...``) records the settings, so that ``multiscale-rnn evaluate`` and
        ``sample`` find the corpus as for one written by the command line."""
        kwargs.setdefault("extra", {"settings": {k: v for k, v in self.settings.items() if k != "progress"}})
        return self.trainer.fit(
            self.corpus, epochs=int(self.settings["epochs"] if epochs is None else epochs), **kwargs
        )


def build(name: str, data_path: Optional[str] = None, **settings: Any) -> PresetRun:
    """The command line's preset ``name`` as Python objects: ``(model, trainer, corpus, settings)``.

    The same code as ``multiscale-rnn train --preset NAME`` resolves the settings (defaults < the preset <
    ``settings``, each keyword a setting of docs/cli.md, as ``--flag`` would give it: ``epochs=1``,
    ``hidden_sizes=[128]``, ``options={"slope": 2.0}``; ``progress`` as the Trainer's: True, False, "bar" or
    "lines"), loads the corpus (``data_path``: where a corpus read from files is, or your own text under a
    preset of the shipped ones), builds the model and the Trainer. Nothing is trained or written: call ``run.fit()`` (or
    ``run.trainer.fit(run.corpus, ...)``). Progress shows as in ``Trainer(progress=True)``: a bar per
    epoch in a terminal or a notebook, plain lines in a log.

    ``ValueError`` for an unknown preset (naming the closest one and every preset) or an unknown or
    ill-typed setting (naming it); ``FileNotFoundError`` for a corpus that is not at ``data_path``."""
    from .command_line.build import load_corpus, model_from_settings, set_threads, trainer_from_settings
    from .command_line.settings import resolve_settings

    get_preset(name)  # an unknown name is refused before the settings are read
    flags = dict(settings)
    progress = flags.pop("progress", True)  # the Trainer's: True, False, "bar" or "lines"
    if progress not in (True, False, "bar", "lines"):
        raise ValueError(f"progress must be True, False, 'bar' or 'lines', got {progress!r}")
    flags["progress"] = progress is not False
    if data_path is not None:
        flags["data_path"] = str(data_path)
    s = resolve_settings(preset=name, flags=flags)
    set_threads(s["threads"])
    corpus = load_corpus(s)
    model = model_from_settings(s, corpus.vocab_size, corpus)
    return PresetRun(model, trainer_from_settings(s, corpus, model, progress=progress), corpus, s)
