"""Named training settings for ``multiscale-rnn train --preset NAME`` (and ``resolve_settings``).

A preset is a dict of settings with the same keys as a TOML config file (see ``docs/cli.md``);
the order of precedence is: built-in defaults < preset < ``--config`` file < command-line flags.
Each model family declares its own presets (``PRESETS`` in the module that defines it, e.g.
``models/hornn.py``); this module gathers those of every registered family. Add a paper's experiment
there as one entry, with the source of its numbers in ``"about"``.
"""

from __future__ import annotations

import sys
from typing import Any, Dict

__all__ = ["DEFAULTS", "PRESETS", "get_preset", "DEFAULT_PRESET", "family_presets"]

#: Every setting the command line knows, with its default.
DEFAULTS: Dict[str, Any] = {
    # model
    "model": "lstm",
    "embed_size": 64,
    "hidden_sizes": [256],
    "dropout": 0.0,
    "dtype": "float32",
    "options": {},  # model-specific constructor options, e.g. {"layer_norm": true}
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
    # says, e.g. before an HM-LSTM's last detector starts; none: at the end)
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
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(sorted(PRESETS))}")
    return {k: v for k, v in PRESETS[name].items() if k != "about"}
