"""The command line: ``multiscale-rnn train | evaluate | sample | presets`` (or ``python -m multiscale_rnn``).

    multiscale-rnn train                                   # the quick preset: ~1 minute, prints BPC
    multiscale-rnn train --preset synthetic --epochs 3
    multiscale-rnn train --config run.toml --lr 1e-3       # flags override the file
    multiscale-rnn evaluate runs/quick.npz --split test
    multiscale-rnn sample runs/quick.npz --prompt "LOVE, n." --temperature 0.7
    mpirun -n 4 multiscale-rnn train --distributed ...     # data-parallel over MPI (docs/training.md)

Settings are resolved as defaults < preset < TOML config < flags (see ``docs/cli.md``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from . import presets as _presets
from .data.loaders import BUILT_IN, LOADERS, corpus_key

__all__ = ["main", "resolve_settings", "build_parser", "model_from_settings", "load_config"]


# ---- settings ------------------------------------------------------------------------------------
def _parse_value(text: str) -> Any:
    """``3`` -> 3, ``0.5`` -> 0.5, ``true`` -> True, ``[1, 2]`` -> [1, 2], anything else a string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _key_values(items: List[str], what: str) -> Dict[str, Any]:
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"{what} must look like NAME=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = _parse_value(v.strip())
    return out


def _sizes(text: str) -> List[int]:
    """``512,512`` -> [512, 512]: positive integers separated by commas (argparse names the flag)."""
    parts = [p for p in str(text).replace(" ", "").split(",") if p]
    try:
        sizes = [int(p) for p in parts]
    except ValueError:
        sizes = None
    if not parts or sizes is None or any(n < 1 for n in sizes):
        raise argparse.ArgumentTypeError(f"must be positive integers separated by commas (e.g. 512,512), got {text!r}")
    return sizes


def load_config(path) -> Dict[str, Any]:
    """Read a TOML config file (tomllib, or tomli before Python 3.11); refuse unknown keys."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11
        import tomli as tomllib
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"config file not found: {path}")
    if path.is_dir():
        raise ValueError(f"config {path} is a folder, not a TOML file")
    try:
        with open(path, "rb") as f:
            cfg = tomllib.load(f)
    except UnicodeDecodeError as e:
        raise ValueError(f"config {path} is not a text file (not UTF-8 at byte offset {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path} is not valid TOML: {e}") from None
    unknown = sorted(set(cfg) - set(_presets.DEFAULTS) - {"preset"})
    if unknown:
        raise ValueError(f"{path}: unknown setting(s) {unknown}; known: {sorted(_presets.DEFAULTS)} and 'preset'")
    return cfg


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


_POSITIVE_INT = (lambda v: _is_int(v) and v >= 1, "a positive integer")
_COUNT = (lambda v: _is_int(v) and v >= 0, "a non-negative integer")
_STRING = (lambda v: isinstance(v, str) and v != "", "a non-empty string")

#: What each setting must be: (check, words); None is allowed where the default is None.
_SETTING_RULES = {
    "model": _STRING,
    "embed_size": _POSITIVE_INT,
    "hidden_sizes": (
        lambda v: isinstance(v, list) and v and all(_is_int(h) and h >= 1 for h in v),
        "a list of positive integers",
    ),
    "dropout": (lambda v: _is_number(v) and 0 <= v < 1, "a number in [0, 1)"),
    "dtype": (lambda v: v in ("float32", "float64"), "float32 or float64"),
    "data": _STRING,
    "data_path": _STRING,
    "epochs": _POSITIVE_INT,
    "batch_size": _POSITIVE_INT,
    "bptt": _POSITIVE_INT,
    "eval_batch_size": _POSITIVE_INT,
    "optimizer": _STRING,
    "lr": (lambda v: _is_number(v) and v > 0, "a finite number > 0"),
    "momentum": (lambda v: _is_number(v) and 0 <= v < 1, "a number in [0, 1)"),
    "weight_decay": (lambda v: _is_number(v) and v >= 0, "a finite number >= 0"),
    "clip_norm": (lambda v: _is_number(v) and v > 0, "a finite number > 0 (or none)"),
    "clip_value": (lambda v: _is_number(v) and v > 0, "a finite number > 0 (or none)"),
    "divergence": (lambda v: _is_number(v) and v > 0, "a number of bits > 0 (or none)"),
    "lr_schedule": _STRING,
    "lr_factor": (lambda v: _is_number(v) and v > 0, "a finite number > 0"),
    "lr_every": (lambda v: v in ("epoch", "step"), "epoch or step"),
    "patience": _COUNT,
    "halve_after": _COUNT,
    "lr_milestones": (
        lambda v: isinstance(v, list) and all(_is_int(m) and m >= 1 for m in v),
        "a list of positive integers",
    ),
    "max_chunks": _POSITIVE_INT,
    "checkpoint_every": _POSITIVE_INT,
    "seed": (lambda v: _is_int(v) and v >= 0, "a non-negative integer"),
    "restarts": _POSITIVE_INT,
    "select_after": (lambda v: v == "auto" or (_is_int(v) and v >= 1), "a positive integer, auto or none"),
    "threads": _POSITIVE_INT,
    "out": _STRING,
    "progress": (lambda v: isinstance(v, bool), "true or false"),
}


_NULLABLE = (
    "clip_norm",
    "clip_value",
    "divergence",
    "threads",
    "max_chunks",
    "checkpoint_every",
    "data_path",
    "select_after",
)


def check_settings(settings: Dict[str, Any]) -> None:
    """``ValueError`` naming the first setting of the wrong type or out of range (no silent
    conversion: ``batch_size = 4.5`` or ``0`` is refused, not read as 4 or the default)."""
    for key, (ok, words) in _SETTING_RULES.items():
        v = settings.get(key)
        if v is None and key in _NULLABLE:
            continue
        if not ok(v):
            raise ValueError(f"{key.replace('_', '-')} must be {words}, got {v!r}")
    if _is_int(settings.get("select_after")) and settings.get("restarts", 1) > 1:  # one run: nothing to compare
        if settings["select_after"] > settings.get("epochs", 1):
            raise ValueError(
                f"select-after = {settings['select_after']} is beyond epochs = {settings.get('epochs')}: "
                f"the runs are compared after select-after epochs and the kept one trains on to epochs"
            )


def settings_sources(
    preset_name: str,
    preset_given: bool,
    config: Dict[str, Any],
    flags: Dict[str, Any],
    config_name: str = "config",
    stored_from: Optional[str] = None,
) -> str:
    """One line saying where the settings came from: the preset (and whether it was asked for), or the
    checkpoint a resume continues (``stored_from``), the config file's keys and the flags' keys."""
    if stored_from is not None:
        parts = [f"the checkpoint {stored_from} (preset {preset_name})"]
    else:
        preset_keys = [k for k in _presets.get_preset(preset_name) if k not in config and k not in flags]
        parts = [
            f"preset {preset_name}"
            + ("" if preset_given else " (the default; --preset to choose)")
            + (f": {', '.join(preset_keys)}" if preset_keys else "")
        ]
    config_keys = [k for k in config if k != "preset" and k not in flags]
    if config_keys:
        parts.append(f"{config_name}: {', '.join(config_keys)}")
    flag_keys = [k for k in flags if k != "preset"]
    if flag_keys:
        parts.append(f"flags: {', '.join(flag_keys)}")
    return "settings from " + "; ".join(parts)


#: Settings of one invocation, not of the run: a resume does not take them from the checkpoint.
_PER_INVOCATION = ("max_chunks", "threads", "progress", "out", "restarts", "select_after", "preset")

#: Settings a resume may not change, and why (the rest: epochs, clipping, evaluation, ... may change).
_RESUME_FIXED = {
    **{k: "would change the model" for k in ("model", "embed_size", "hidden_sizes", "dropout", "dtype", "options")},
    **{k: "is other training data" for k in ("data", "data_options")},
    **{
        k: "would not continue the same run"
        for k in (
            "batch_size",
            "bptt",
            "lr_schedule",
            "lr_factor",
            "patience",
            "halve_after",
            "lr_milestones",
            "lr_every",
            "anneal",
        )
    },
    **{
        k: "is not used: the run goes on with its saved optimiser state"
        for k in ("optimizer", "lr", "momentum", "weight_decay")
    },
    "seed": "only seeds a new run (a resumed run goes on with its saved random state)",
}

#: Settings that make a checkpoint another model or data: a new run never overwrites a checkpoint that
#: differs in one of them unless asked to (``--overwrite``).
_IDENTITY = ("model", "embed_size", "hidden_sizes", "dropout", "dtype", "options", "data", "data_path", "data_options")


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def resolve_settings(
    preset: Optional[str] = None,
    config: Optional[Dict[str, Any]] = None,
    flags: Optional[Dict[str, Any]] = None,
    stored: Optional[Dict[str, Any]] = None,
    stored_from: str = "the checkpoint",
) -> Dict[str, Any]:
    """defaults < preset (``flags["preset"]``, else the config's, else the default preset) < config < flags.

    A corpus name that is a path (``--data my.txt``), or a data path without a corpus name
    (``--data-path my.txt`` alone) under a preset whose corpus is built in (``quick``, ``synthetic``),
    means your own text (``data = "text"``); under a preset of a corpus read from files
    (``ptb-char-hm-lstm``) the data path is where that corpus is. A name that is neither a corpus nor
    an existing file is refused (a missing file as missing), and so is a data path beside a built-in
    corpus's name (``--data embedded --data-path x``: the path would be ignored).

    ``stored``: the settings saved in a checkpoint being resumed (``stored_from`` names it). They come
    between the preset and the config (the preset is the stored one), except the settings of one
    invocation (``max_chunks``, ``threads``, ``progress``, ``out``, ``restarts``, ``select_after``);
    a config or flag that contradicts one the run cannot change (the model, the data, the batch, the
    optimiser, the schedules, the seed) is refused naming both values.

    Without an ``out`` from the config or flags and with another corpus than the preset's, the
    checkpoint is named after both (``runs/quick-my.npz`` for ``--data my.txt``). The result is
    checked by :func:`check_settings`."""
    config = dict(config or {})
    flags = dict(flags or {})
    asked = flags.pop("preset", None) or config.pop("preset", None)
    config.pop("preset", None)
    if stored is not None and asked and stored.get("preset") not in (None, asked):
        raise ValueError(
            f"--resume continues the run saved in {stored_from}, trained under preset "
            f"{stored['preset']}; --preset {asked} would change its settings: leave --preset out to "
            f"continue the run, or start a new run with another --out"
        )
    name = asked or (stored or {}).get("preset") or preset or _presets.DEFAULT_PRESET
    data_named = "data" in config or "data" in flags
    unknown = sorted(set(flags) - set(_presets.DEFAULTS))
    if unknown:
        raise ValueError(f"unknown setting(s) {unknown}")
    settings = dict(_presets.DEFAULTS)
    settings.update(_presets.get_preset(name))
    if stored is not None:
        settings.update({k: v for k, v in stored.items() if k in _presets.DEFAULTS and k not in _PER_INVOCATION})
    settings.update(config)
    settings.update(flags)
    settings["preset"] = name
    for key in (
        "clip_norm",
        "clip_value",
        "divergence",
        "threads",
        "max_chunks",
        "checkpoint_every",
        "data_path",
        "select_after",
    ):
        if isinstance(settings.get(key), str) and settings[key].lower() in ("none", "null", "off", ""):
            settings[key] = None
    _resolve_data(
        settings,
        data_named,
        flags.get("data_options", config.get("data_options", {})),
        "data_path" in flags or "data_path" in config,
    )
    for key in ("clip_norm", "clip_value"):
        if settings.get(key) == 0:
            settings[key] = None
    if isinstance(settings["hidden_sizes"], int):
        settings["hidden_sizes"] = [settings["hidden_sizes"]]
    for key in ("options", "data_options", "anneal"):
        if not isinstance(settings[key], dict):
            raise ValueError(f"setting {key!r} must be a table (dict), got {settings[key]!r}")
    for name_, spec in settings["anneal"].items():
        if not (
            isinstance(spec, (list, tuple))
            and len(spec) in (3, 4)
            and all(_is_number(x) for x in spec[:3])
            and (len(spec) == 3 or spec[3] in ("epoch", "step"))
        ):
            raise ValueError(f'anneal.{name_} must be [start, end, rate] or [start, end, rate, "step"], got {spec!r}')
    if stored is not None:
        for key, why in _RESUME_FIXED.items():
            if key in stored and _normal(settings.get(key)) != _normal(stored[key]):
                src = (
                    "--data / --data-path"
                    if key in ("data", "data_options") and key not in flags and key not in config
                    else _flag(key)
                    if key in flags
                    else f"{key} in the config file"
                )
                raise ValueError(
                    f"--resume continues the run saved in {stored_from}, whose {key} is "
                    f"{_show(stored[key])}; {src} gives {_show(settings.get(key))}, which {why}. Leave "
                    f"{src} out to continue that run, or start a new run with another --out"
                )
    elif "out" not in flags and "out" not in config:
        preset_data = _presets.get_preset(name).get("data", _presets.DEFAULTS["data"])
        if settings["data"] == "text" or corpus_key(str(settings["data"])) != corpus_key(str(preset_data)):
            folder = Path(settings["out"]).parent
            settings["out"] = str(folder / f"{name}-{_data_slug(settings)}.npz")
    check_settings(settings)
    return settings


def _normal(v):
    """A setting as JSON would store it (tuples as lists), for comparing with a checkpoint's settings."""
    return json.loads(json.dumps(v, default=str))


def _show(v) -> str:
    return "none" if v is None else f"'{v}'" if isinstance(v, str) else json.dumps(v)


def _data_slug(settings) -> str:
    """A short name for the corpus of ``settings``: the file or folder name of your own text, else the corpus."""
    if settings["data"] == "text" and settings.get("data_path"):
        p = Path(str(settings["data_path"])).expanduser()
        return re.sub(r"[^\w.-]+", "_", p.stem or p.name or "text")
    return corpus_key(str(settings["data"]))


def _resolve_data(settings: Dict[str, Any], data_named: bool, own_options, path_named: bool = True) -> None:
    """Your own text in ``settings`` (``data = "text"``, ``data_path``) when the corpus name is an existing
    path, or when a data path comes without a name beside a built-in corpus; refuses a name that is no
    corpus (a path that does not exist as a missing file) and a data path beside a built-in corpus's name."""
    data, path = settings.get("data"), settings.get("data_path")
    own_text = False
    if isinstance(data, str) and corpus_key(data) not in LOADERS and path in (None, ""):
        if not Path(data).expanduser().exists():
            raise _no_corpus(data)
        settings["data"], settings["data_path"] = "text", data  # a path as the corpus name: your own text
        own_text = True
    elif isinstance(data, str) and corpus_key(data) not in LOADERS:
        raise _no_corpus(data, path)
    elif path not in (None, "") and not data_named and _built_in(data):
        settings["data"] = "text"  # a path alone, with a built-in corpus: your own text
        own_text = True
    elif path not in (None, "") and data_named and path_named and _built_in(data):
        raise ValueError(
            f"--data {data} is built into the package and reads no file, so --data-path {path} would "
            f"be ignored: leave --data-path out, or give your own text as --data {path}"
        )
    if own_text:  # the corpus options of the preset (or of the checkpoint) were for its corpus
        settings["data_options"] = dict(own_options or {})


def _no_corpus(data: str, path=None) -> Exception:
    """The error for a corpus name that is none: a missing file when the name looks like a path."""
    import difflib

    names = ", ".join(LOADERS[:-1])
    if path not in (None, ""):
        return ValueError(
            f"--data {data}: no corpus has that name (with --data-path, --data names the corpus "
            f"the path holds: {names}; for your own text give --data-path alone or --data FILE)"
        )
    if re.search(r"[/\\~]|\.\w+$", data):
        return FileNotFoundError(
            f"--data {data}: no such file or folder (--data takes a corpus name, {names}, or the path of your own text)"
        )
    close = difflib.get_close_matches(corpus_key(data), LOADERS, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return ValueError(
        f"--data {data}: no corpus has that name{hint}, and no file or folder either; the corpora: "
        f"{names}, or the path of your own text"
    )


def _built_in(data) -> bool:
    """The corpus name (or None) is one that ships with the package and reads no file; a data path then
    means the user's own text. Other corpora (ptb-char, text8, ...) read theirs from the data path."""
    return data is None or (isinstance(data, str) and corpus_key(data) in BUILT_IN)


def anneal_schedule(spec):
    """``[start, end, rate]`` (rate per epoch) or ``[start, end, rate, "step"|"epoch"]`` -> a schedule."""
    from .schedules import linear

    start, end, rate = (float(x) for x in spec[:3])
    if len(spec) == 4 and spec[3] == "step":
        return linear(start, end, per_step=rate)
    return linear(start, end, per_epoch=rate)


def model_from_settings(settings: Dict[str, Any], vocab_size: int):
    """Build the model named in ``settings`` through ``build_model``."""
    from .models.registry import build_model

    own = ("vocab_size", "embed_size", "hidden_sizes", "dropout", "dtype", "seed")
    clash = sorted(set(settings["options"]) & set(own))
    if clash:
        raise ValueError(
            f"model option(s) {clash} are settings of their own: use --{clash[0].replace('_', '-')} "
            f"(or the top-level key in a config file)"
        )
    return build_model(
        settings["model"],
        vocab_size=int(vocab_size),
        embed_size=settings["embed_size"],
        hidden_sizes=list(settings["hidden_sizes"]),
        dropout=float(settings["dropout"]),
        dtype=settings["dtype"],
        seed=settings["seed"],
        **settings["options"],
    )


def _optimizer(settings):
    from .optim import SGD, Adam

    name = str(settings["optimizer"]).lower()
    if name == "adam":
        return Adam(lr=settings["lr"], weight_decay=settings["weight_decay"])
    if name == "sgd":
        return SGD(lr=settings["lr"], momentum=settings["momentum"], weight_decay=settings["weight_decay"])
    raise ValueError(f"unknown optimizer {settings['optimizer']!r}; choose adam or sgd")


def _lr_schedule(settings):
    from .schedules import make_lr_schedule

    name = str(settings["lr_schedule"]).lower()
    every = settings.get("lr_every", "epoch")
    if name in ("constant", "none"):
        return None
    if name in ("halve", "halveafter", "halve-after"):
        return make_lr_schedule("halve", epoch_n=settings["halve_after"], factor=settings["lr_factor"], every=every)
    if name in ("multistep", "multi-step"):
        return make_lr_schedule(
            "multistep", milestones=settings["lr_milestones"], factor=settings["lr_factor"], every=every
        )
    if every != "epoch":
        raise ValueError(
            f"lr-schedule {name} follows the validation loss and steps per epoch only "
            "(lr-every step is for halve and multistep)"
        )
    return make_lr_schedule(name, factor=settings["lr_factor"], patience=settings["patience"])


def _load_corpus(settings):
    from . import data

    try:
        return data.load(settings["data"], path=settings["data_path"], **settings["data_options"])
    except TypeError as e:  # an option the corpus does not take: name the flag and the options it takes
        m = re.search(r"unexpected (?:keyword argument|option\(s\):) '?([\w, ]+?)'?$", str(e))
        if not m:
            raise
        raise ValueError(
            f"--data {settings['data']} takes no --data-option {m.group(1)}; {_corpus_options(settings['data'])}"
        ) from None


def _corpus_options(name: str) -> str:
    """The --data-option names corpus ``name`` takes, in words."""
    import inspect

    from .data import loaders
    from .data.synthetic import synthetic_hierarchy

    key = corpus_key(str(name))
    if key == "synthetic":
        names = list(inspect.signature(synthetic_hierarchy).parameters) + ["valid_fraction", "test_fraction"]
    else:
        names = list(getattr(loaders, "_OPTIONS", {}).get(key, ()))
    return f"it takes {', '.join(names)}" if names else "it takes none"


def _token_unit(corpus) -> str:
    """What one token of the corpus is, for the label of the bits figure: "char", "word", or
    "bit" / "symbol" for corpora that say so (``token_unit``: the bit corpora, the music corpus)."""
    return getattr(corpus, "token_unit", corpus.unit)


def _label(corpus) -> str:
    from .trainer import bits_label

    return bits_label(_token_unit(corpus))


# ---- commands ------------------------------------------------------------------------------------
def _set_threads(n):
    if n is not None:
        from . import set_num_threads

        set_num_threads(n)


def _data_parallel(args):
    """``--distributed``: the ``DataParallel`` of ``MPI.COMM_WORLD`` (ImportError without mpi4py); else None."""
    if not getattr(args, "distributed", False):
        return None
    from .distributed import DataParallel

    return DataParallel()


def cmd_train(args) -> int:
    return _train(args, _data_parallel(args))


def _train(args, dist) -> int:
    from .storage import check_writable, history_path
    from .trainer import Trainer, evaluate

    def say(text: str) -> None:
        if dist is None or dist.root:
            print(text, flush=True)

    def together(fn):  # every rank runs fn; an error anywhere is raised on every rank
        return fn() if dist is None else dist.together(fn)

    def on_root(fn):  # rank 0 runs fn (it alone reads and writes the files); its result on every rank
        return fn() if dist is None else dist.on_root(fn)

    resume = bool(getattr(args, "resume", False))
    s, config, flags, preset_given = together(lambda: _train_settings(args))
    out = Path(s["out"])
    saved = on_root(lambda: _saved_run(out)) if resume else None
    if saved is not None and saved["settings"] is not None:  # the run's own settings, then config and flags
        s, config, flags, preset_given = together(lambda: _train_settings(args, saved["settings"], str(out)))
        s["out"] = str(out)

    def setup():
        if dist is None or dist.root:
            check_writable(out, "--out checkpoint")  # before any work
            check_writable(history_path(out), "history")
        _set_threads(s["threads"])
        corpus = _load_corpus(s)
        model = model_from_settings(s, corpus.vocab_size)
        if (dist is None or dist.root) and not resume and not getattr(args, "overwrite", False):
            _check_overwrite(out, s)  # after the settings' own errors, still before any work
        return corpus, model

    corpus, model = together(setup)
    label = _label(corpus)
    say(
        f"{s['model']} {model.num_parameters:,} parameters on {corpus.name} ({len(corpus.train):,} training "
        f"tokens, vocabulary {corpus.vocab_size})"
    )
    say(
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
        say(
            f"data-parallel over {dist.size} MPI ranks: {s['batch_size']} streams, "
            f"{s['batch_size'] // dist.size}{'+' if s['batch_size'] % dist.size else ''} per rank"
        )

    def log(event):
        if event["event"] == "epoch" and not s["progress"]:
            valid = f", valid {label} {event['valid_bpc']:.4f}" if event["valid_bpc"] is not None else ""
            print(
                f"epoch {event['epoch']}: train {label} {event['train_bpc']:.4f}{valid}, "
                f"{event['tokens_per_s']:,.0f} tokens/s, {event['seconds']:.1f} s",
                flush=True,
            )

    extra = {"settings": {k: v for k, v in s.items() if k not in ("progress",)}}
    if s["restarts"] > 1:
        model, epoch, step = _train_restarts(args, dist, s, corpus, out, log, extra, say)
    else:
        trainer = Trainer(model, optimizer=_optimizer(s), seed=s["seed"], distributed=dist, **_trainer_kw(s, corpus))
        trainer.fit(
            corpus.train,
            valid=corpus.valid,
            epochs=int(s["epochs"]),
            checkpoint=out,
            resume=bool(getattr(args, "resume", False)),
            max_chunks=s["max_chunks"],
            checkpoint_every=s["checkpoint_every"],
            log=log,
            vocab=corpus.vocab,
            extra=extra,
        )
        epoch, step = trainer.epoch, trainer.step
        if saved is not None and saved["epoch"] >= int(s["epochs"]):
            say(
                f"{out} has already completed {saved['epoch']} epoch(s) and --epochs is {s['epochs']}: nothing to "
                f"train. To train on, pass a larger --epochs (e.g. --resume --epochs {saved['epoch'] + s['epochs']})"
            )
    results = {}
    for split in ("valid", "test"):
        ids = getattr(corpus, split)
        if ids is not None and len(ids) >= 2:
            results[split] = evaluate(
                model, ids, batch_size=int(s["eval_batch_size"]), bptt=int(s["bptt"]), distributed=dist
            )
    parts = [
        f"{split} {label} {r['bpc']:.4f}" + (f" (perplexity {r['perplexity']:.1f})" if corpus.unit == "word" else "")
        for split, r in results.items()
    ]
    say(f"done after {epoch} epoch(s), {step} steps: {', '.join(parts)}; checkpoint {out}")
    for line in model.end_of_run_notes(corpus, step):  # the family's own report (HM-LSTM: its boundaries)
        say(line)
    return 0


def _trainer_kw(s, corpus) -> Dict[str, Any]:
    """The Trainer's arguments from the settings (all but the optimiser, seed and distribution)."""
    return dict(
        clip_norm=s["clip_norm"],
        clip_value=s["clip_value"],
        batch_size=s["batch_size"],
        bptt=s["bptt"],
        lr_schedule=_lr_schedule(s),
        model_options={k: anneal_schedule(v) for k, v in s["anneal"].items()},
        progress=bool(s["progress"]),
        eval_batch_size=s["eval_batch_size"],
        unit=_token_unit(corpus),
        divergence=s.get("divergence"),
    )


def _train_restarts(args, dist, s, corpus, out, log, extra, say):
    """``restarts`` > 1: ``best_of`` over the seeds s["seed"] .. + restarts - 1; the chosen run's checkpoint
    goes to ``out``. Returns the chosen model, its epochs and its steps."""
    from .trainer import best_of

    n = int(s["restarts"])
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

    def run(seed) -> str:
        return f"run {seed - int(s['seed']) + 1}/{n} (seed {seed})"

    def make(seed):  # called as each run starts
        say(run(seed))
        return model_from_settings({**s, "seed": seed}, corpus.vocab_size)

    model, results = best_of(
        make,
        corpus.train,
        corpus.valid,
        restarts=n,
        epochs=int(s["epochs"]),
        seed=int(s["seed"]),
        select_after=s["select_after"],
        make_optimizer=lambda: _optimizer(s),
        fit_kw={"valid": corpus.valid, "log": log},
        checkpoint=out,
        vocab=corpus.vocab,
        extra=extra,
        **_trainer_kw(s, corpus),
    )
    label = _label(corpus)
    compared = results[0]["compared_after"]
    for r in results:
        at = f" after {compared} epochs" if compared < int(s["epochs"]) else ""
        say(f"{run(r['seed'])}: valid {label} {r['valid_bpc']:.4f}{at}" + ("  <- kept" if r["chosen"] else ""))
    chosen = next(r for r in results if r["chosen"])
    return model, chosen["epochs"], chosen["steps"]


def _train_settings(args, stored: Optional[Dict[str, Any]] = None, stored_from: str = "the checkpoint"):
    """The resolved settings of ``train`` and where they came from: (settings, config, flags, preset given).
    ``stored``: the settings of the checkpoint a ``--resume`` continues (see :func:`resolve_settings`)."""
    flags = {k: v for k, v in vars(args).items() if k in _presets.DEFAULTS or k == "preset"}
    flags.pop("config", None)
    if getattr(args, "option", None):
        flags["options"] = _key_values(args.option, "--option")
    if getattr(args, "data_option", None):
        flags["data_options"] = _key_values(args.data_option, "--data-option")
    if getattr(args, "anneal", None):
        flags["anneal"] = {k: _anneal_flag(k, v) for k, v in _key_values(args.anneal, "--anneal").items()}
    config = load_config(args.config) if getattr(args, "config", None) else {}
    for key in ("options", "data_options"):
        if key in flags and key in config:
            flags[key] = {**config[key], **flags[key]}
    preset_given = bool(flags.get("preset") or config.get("preset"))
    return (
        resolve_settings(config=config, flags=flags, stored=stored, stored_from=stored_from),
        config,
        flags,
        preset_given,
    )


def _saved_run(out: Path) -> Dict[str, Any]:
    """What ``--resume`` needs to know of the checkpoint ``out`` before the work: its settings (None when
    it was written from Python, which records none) and its completed epochs."""
    from .checkpoint import load

    if not out.exists():
        raise FileNotFoundError(f"--resume: no checkpoint at {out} to continue (--out names it)")
    ck = load(out)
    settings = ck.extra.get("settings")
    state = ck.trainer_state or {}
    epoch = state.get("epoch")
    if isinstance(settings, dict) and _is_int(state.get("seed")):  # the run's own seed (restarts: the kept run's)
        settings = {**settings, "seed": state["seed"]}
    return {"settings": settings if isinstance(settings, dict) else None, "epoch": epoch if _is_int(epoch) else 0}


def _check_overwrite(out: Path, s: Dict[str, Any]) -> None:
    """A new run writes ``out``: refuse (``FileExistsError``) when it holds something else than a checkpoint of
    the same model and data (another model, another corpus, a run from Python, a file of another kind),
    naming the difference and the flags that choose (another ``--out``, ``--overwrite``, ``--resume``)."""
    from .checkpoint import load

    if not out.exists():
        return
    choose = "give another --out, or --overwrite to replace it"
    try:
        ck = load(out)
    except (ValueError, OSError) as e:
        raise FileExistsError(
            f"--out {out} exists and is not a checkpoint this run may replace ({e}); {choose}"
        ) from None
    saved = ck.extra.get("settings")
    if not isinstance(saved, dict):
        raise FileExistsError(
            f"--out {out} holds a {ck.config.get('model')} model saved from Python, which records "
            f"no settings to compare with this run's; {choose}"
        )
    diffs = []
    for key in _IDENTITY:
        old, new = saved.get(key, _presets.DEFAULTS[key]), s.get(key)
        if key == "data_path" and old is not None and new is not None:
            old, new = str(Path(old).expanduser().resolve()), str(Path(new).expanduser().resolve())
        if _normal(old) != _normal(new):
            diffs.append(f"{key} {_show(old)} there, {_show(new)} here")
    if diffs:
        raise FileExistsError(
            f"--out {out} holds the checkpoint of another model or data ({'; '.join(diffs)}); "
            f"this run would overwrite it: {choose} (--resume continues it)"
        )


def _anneal_flag(name: str, value) -> list:
    """``--anneal NAME=START,END,RATE[,step]`` -> [start, end, rate] or [start, end, rate, "step"]."""
    parts = [p.strip() for p in str(value).strip("[]").split(",")]
    unit = parts.pop() if parts and parts[-1] in ("step", "epoch") else None
    try:
        spec = [float(p) for p in parts]
    except ValueError:
        spec = []
    if len(spec) != 3:
        raise ValueError(f"--anneal {name}= must be START,END,RATE or START,END,RATE,step, got {value!r}")
    return spec + ([unit] if unit else [])


def _load_checkpoint(path, best: bool):
    from .checkpoint import load

    ck = load(path)
    if best:
        state = ck.trainer_state or {}
        if state.get("best_params") is None:
            raise ValueError(
                f"{path} holds no best parameters (no epoch was completed): leave --best out to use the last parameters"
            )
        ck.model.flat_parameters()[...] = state["best_params"]
    return ck


def _set_precision(model, precision: str) -> None:
    """``--precision``: the model's inference precision; a refusal becomes a clear error."""
    try:
        model.inference_precision = precision
    except (ValueError, RuntimeError) as e:
        raise ValueError(f"--precision {precision}: {e}") from e


def _checkpoint_data(args, ck, need_corpus: bool):
    """The corpus (None when not needed and not given) and the vocabulary to read ``ck``'s model with.

    The corpus is ``--data`` / ``--data-path`` / ``--data-option`` when given, else the one the checkpoint's
    settings name (written by ``train``). The vocabulary is the checkpoint's, else the corpus's. Refused
    (``ValueError`` naming the fix): a checkpoint with no vocabulary and no data given; a checkpoint that
    does not record its corpus when one is needed; a vocabulary whose size is not the model's vocab_size;
    a corpus whose vocabulary differs from the stored one."""
    path, model_v = args.checkpoint, int(ck.model.vocab_size)
    given = args.data is not None or args.data_path is not None or bool(args.data_option)
    stored = ck.extra.get("settings") if isinstance(ck.extra.get("settings"), dict) else None
    vocab = ck.vocab if ck.vocab is not None and hasattr(ck.vocab, "itos") else None
    if vocab is None and not given:
        raise ValueError(
            f"{path} holds no vocabulary (it was saved from Python without one), so its model's "
            f"{model_v} token ids cannot be matched to symbols: give the corpus it was trained on (--data "
            f"NAME, with --data-path for a corpus read from files, or --data FILE for your own text), or "
            f"store the vocabulary when training: Trainer.fit(corpus, ...) or fit(..., "
            f"vocab=corpus.vocab)"
        )
    corpus = None
    if given or need_corpus:
        if not given and stored is None:
            raise ValueError(
                f"{path} does not record the corpus it was trained on (it was saved from Python): give "
                f"--data NAME (with --data-path for a corpus read from files, or --data FILE for your "
                f"own text)"
            )
        s = dict(_presets.DEFAULTS)
        s.update(stored or {})
        if given:
            options = _key_values(args.data_option or [], "--data-option")
            if args.data is not None:  # another corpus: none of the stored one's path and options
                s["data"], s["data_path"], s["data_options"] = args.data, args.data_path, options
            else:
                if args.data_path is not None:
                    s["data_path"] = args.data_path
                s["data_options"] = {**s.get("data_options", {}), **options}
            _resolve_data(s, args.data is not None, options, args.data_path is not None)
        try:
            corpus = _load_corpus(s)
        except FileNotFoundError as e:
            if given:
                raise
            raise FileNotFoundError(
                f"{e} (the corpus {path} was trained on, where it was then: give --data-path where it is now)"
            ) from None
        if corpus.vocab_size != model_v:
            raise ValueError(
                f"the vocabulary of {corpus.name} has {corpus.vocab_size} symbols and the model in {path} "
                f"has {model_v}: give --data (and --data-path) of the corpus the model was trained on"
            )
        if vocab is None:
            print(
                f"note: {path} holds no vocabulary; reading it with the vocabulary of {corpus.name} ({model_v} "
                f"symbols, as many as the model has)",
                file=sys.stderr,
                flush=True,
            )
            vocab = corpus.vocab
        elif list(vocab.itos) != list(corpus.vocab.itos) or vocab.unit != corpus.vocab.unit:
            first = next((i for i, (a, b) in enumerate(zip(vocab.itos, corpus.vocab.itos)) if a != b), None)
            where = (
                f": id {first} is {vocab.itos[first]!r} there, {corpus.vocab.itos[first]!r} here"
                if first is not None
                else f" (units {vocab.unit} and {corpus.vocab.unit})"
            )
            raise ValueError(
                f"the vocabulary of {corpus.name} differs from the one stored in {path} (both "
                f"{model_v} symbols{where}): give --data of the corpus the model was trained on"
            )
    if vocab.size != model_v:  # a stored vocabulary (the checkpoint's own check covers this too)
        raise ValueError(f"the vocabulary stored in {path} has {vocab.size} symbols and its model {model_v}")
    return corpus, vocab


def _positive(value, flag: str) -> None:
    if value is not None and value < 1:
        raise ValueError(f"{flag} must be a positive integer, got {value}")


def cmd_evaluate(args) -> int:
    from .trainer import evaluate

    _positive(args.batch_size, "--batch-size")
    _positive(args.bptt, "--bptt")
    _set_threads(args.threads)
    ck = _load_checkpoint(args.checkpoint, args.best)
    _set_precision(ck.model, args.precision)
    corpus, _ = _checkpoint_data(args, ck, need_corpus=True)
    s = dict(_presets.DEFAULTS)
    s.update(ck.extra.get("settings") or {})
    ids = getattr(corpus, args.split)
    if ids is None:
        raise ValueError(f"{corpus.name} has no {args.split} split (--split chooses train, valid or test)")
    bptt = args.bptt if args.bptt is not None else s["bptt"]
    batch = args.batch_size if args.batch_size is not None else s["eval_batch_size"]
    r = evaluate(ck.model, ids, batch_size=batch, bptt=bptt)
    if args.json:
        print(json.dumps({"split": args.split, "data": corpus.name, **r}))
    else:
        label = _label(corpus)
        print(
            f"{corpus.name} {args.split}: loss {r['loss']:.4f} nats, {label} {r['bpc']:.4f}, "
            f"perplexity {r['perplexity']:.2f} ({r['tokens']:,} tokens)"
        )
    return 0


def _unknown_symbols(vocab, prompt: str):
    """The symbols of ``prompt`` that ``vocab`` lacks, as (position, description) in prompt order: a
    character's position for character vocabularies, a byte's for byte ones, a word's for word ones."""
    from .data.vocab import describe_symbol, tokenize_words

    if vocab.unit == "word":
        return [(i, repr(w)) for i, w in enumerate(tokenize_words(prompt)) if w not in vocab.stoi]
    if vocab.level == "byte":
        return [
            (i, describe_symbol(b, "byte"))
            for i, b in enumerate(prompt.encode("utf-8", "surrogatepass"))
            if b not in vocab.stoi
        ]
    return [(i, describe_symbol(c, "codepoint")) for i, c in enumerate(prompt) if c not in vocab.stoi]


def _check_prompt(args, vocab) -> None:
    """Refuse a prompt with symbols the vocabulary lacks (naming them and where they are), unless
    ``--allow-unknown`` and the vocabulary has an unknown symbol to read them as (then a note says so)."""
    unknown = _unknown_symbols(vocab, args.prompt)
    if not unknown:
        return
    unit = "word" if vocab.unit == "word" else "byte" if vocab.level == "byte" else "character"
    listed = ", ".join(f"{d} at {unit} {i}" for i, d in unknown[:10]) + (
        f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
    )
    what = f"{len(unknown)} {unit}(s) the vocabulary of {args.checkpoint} lacks ({vocab.size} symbols): {listed}"
    if vocab.unk is None:
        raise ValueError(
            f"--prompt has {what}; the vocabulary has no unknown symbol to read them as: leave them out of the prompt"
        )
    if not args.allow_unknown:
        raise ValueError(
            f"--prompt has {what}: leave them out of the prompt, or pass --allow-unknown to read them "
            f"as the unknown symbol {vocab.unk!r}"
        )
    print(f"note: --prompt: read as the unknown symbol {vocab.unk!r}: {listed}", file=sys.stderr, flush=True)


def cmd_sample(args) -> int:
    from .trainer import sample

    if args.length < 0:
        raise ValueError(f"--length must be an integer >= 0, got {args.length}")
    if not (math.isfinite(args.temperature) and args.temperature > 0):
        raise ValueError(f"--temperature must be a finite number > 0, got {args.temperature}")
    if args.seed < 0:
        raise ValueError(f"--seed must be a non-negative integer, got {args.seed}")
    _set_threads(args.threads)
    ck = _load_checkpoint(args.checkpoint, args.best)
    _set_precision(ck.model, args.precision)
    _, vocab = _checkpoint_data(args, ck, need_corpus=False)
    _check_prompt(args, vocab)
    print(sample(ck.model, vocab, prompt=args.prompt, length=args.length, temperature=args.temperature, seed=args.seed))
    return 0


def cmd_presets(args) -> int:
    for name, p in sorted(_presets.PRESETS.items()):
        default = " (default)" if name == _presets.DEFAULT_PRESET else ""
        print(f"{name}{default}: {p.get('about', '')}")
    return 0


# ---- parser --------------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error: ``multiscale-rnn train: error: argument --hidden-sizes: ...`` and where
    to find the flags, instead of the whole usage text (exit status 2)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _bind_dash_values(parser: argparse.ArgumentParser, argv: List[str]) -> List[str]:
    """``--hidden-sizes -32,32`` -> ``--hidden-sizes=-32,32``: a value that starts with ``-`` and is no
    flag goes to the flag before it, so the flag's own check names the value (argparse would take it for
    a flag and answer "expected one argument")."""
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    sub = subparsers[0].choices.get(argv[0]) if subparsers and argv else None
    if sub is None:
        return argv
    flags = set(sub._option_string_actions)
    takes_value = {
        o
        for o, a in sub._option_string_actions.items()
        if a.nargs is None
        and a.option_strings
        and not isinstance(
            a, (argparse._StoreConstAction, argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._HelpAction)
        )
    }
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            out.extend(argv[i:])
            break
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if (
            a in takes_value
            and nxt is not None
            and nxt.startswith("-")
            and nxt != "--"
            and nxt.split("=", 1)[0] not in flags
        ):
            out.append(f"{a}={nxt}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="multiscale-rnn", description="Train, evaluate and sample multiscale recurrent language models.")
    sub = p.add_subparsers(dest="command", required=True, metavar="{train,evaluate,sample,presets}")
    S = argparse.SUPPRESS  # flags not given stay out of the namespace, so presets and configs show through

    t = sub.add_parser("train", help="train a model, write a checkpoint and its history", argument_default=S)
    t.add_argument("--config", help="TOML file of settings (flags override it)")
    t.add_argument("--preset", help=f"named settings (default {_presets.DEFAULT_PRESET}; see 'presets')")
    g = t.add_argument_group("model")
    g.add_argument("--model", help="lstm, gru, rnn, or any registered family")
    g.add_argument("--embed-size", type=int)
    g.add_argument("--hidden-sizes", type=_sizes, help="comma-separated, one per layer, e.g. 512,512")
    g.add_argument("--dropout", type=float)
    g.add_argument("--dtype", choices=["float32", "float64"])
    g.add_argument("--option", action="append", metavar="NAME=VALUE", help="model option (repeatable)")
    g = t.add_argument_group("data")
    g.add_argument(
        "--data",
        help="embedded, synthetic, ptb-char, ptb-word, text8, enwik8, shakespeare, ... or "
        "the path of your own text file (or folder)",
    )
    g.add_argument(
        "--data-path",
        help="local copy of the corpus (no download); alone: your own text file, or a "
        "folder of train.txt, valid.txt, test.txt",
    )
    g.add_argument(
        "--data-option",
        action="append",
        metavar="NAME=VALUE",
        help="corpus option (repeatable), e.g. unit=word or level=byte for your own text",
    )
    g = t.add_argument_group("training")
    g.add_argument("--epochs", type=int)
    g.add_argument("--batch-size", type=int)
    g.add_argument("--bptt", type=int)
    g.add_argument("--optimizer", choices=["adam", "sgd"])
    g.add_argument("--lr", type=float)
    g.add_argument("--momentum", type=float)
    g.add_argument("--weight-decay", type=float)
    g.add_argument("--clip-norm", type=_parse_value, help="max global gradient norm ('none' to switch off)")
    g.add_argument("--clip-value", type=_parse_value, help="clamp gradient elements ('none' to switch off)")
    g.add_argument(
        "--divergence",
        type=_parse_value,
        metavar="BITS",
        help="stop when validation bits per token exceed the best by more than this, keeping the best "
        "parameters (e.g. 0.1; off by default)",
    )
    g.add_argument("--lr-schedule", choices=["constant", "halve", "plateau", "multistep"])
    g.add_argument("--lr-factor", type=float, help="divide the learning rate by this (halve, plateau, multistep)")
    g.add_argument("--patience", type=int, help="plateau: epochs without improvement before dividing")
    g.add_argument("--halve-after", type=int, help="halve: epochs at the initial learning rate")
    g.add_argument("--lr-milestones", type=_sizes, help="multistep: comma-separated epoch counts, e.g. 180")
    g.add_argument("--lr-every", choices=["epoch", "step"], help="halve / multistep count epochs (default) or updates")
    g.add_argument(
        "--anneal",
        action="append",
        metavar="NAME=START,END,RATE[,step]",
        help="anneal a model option linearly per epoch (repeatable), e.g. slope=1,5,0.04; with ',step' "
        "the rate is per update",
    )
    g.add_argument("--max-chunks", type=int, help="stop after this many chunks (resume later)")
    g.add_argument("--checkpoint-every", type=int, help="also checkpoint every K chunks")
    g.add_argument("--eval-batch-size", type=int)
    g.add_argument(
        "--resume",
        action="store_true",
        help="continue the run saved in --out with its settings "
        "(flags may change the epochs, clipping, evaluation and checkpointing)",
    )
    g.add_argument(
        "--distributed",
        action="store_true",
        help="data-parallel over MPI: start with 'mpirun -n K'; the batch's streams are shared by the "
        'K ranks (needs mpi4py: pip install "multiscale-rnn[mpi]")',
    )
    g.add_argument("--seed", type=int)
    g.add_argument(
        "--restarts",
        type=int,
        help="train this many runs (seeds --seed, --seed + 1, ...) and keep the "
        "one with the lowest validation loss (default 1)",
    )
    g.add_argument(
        "--select-after",
        type=_parse_value,
        help="with --restarts: compare the runs after this many "
        "epochs and train only the kept one on to --epochs; 'none': at the end; 'auto' (default): where "
        "the model says (an HM-LSTM of 3 or more layers: before its last boundary detector starts; "
        "others at the end)",
    )
    g.add_argument("--threads", type=int)
    g.add_argument(
        "--out",
        help="checkpoint path (.npz); the history goes beside it (.history.json); default "
        "from the preset (and the corpus when it is not the preset's)",
    )
    g.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the checkpoint at --out even when it holds another model or data",
    )
    g.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    t.set_defaults(func=cmd_train)

    for name, helptext, func in (
        ("evaluate", "loss and bits per token of a checkpoint on a split", cmd_evaluate),
        ("sample", "generate text from a checkpoint", cmd_sample),
    ):
        c = sub.add_parser(name, help=helptext)
        c.add_argument("checkpoint", help="a .npz checkpoint written by train")
        c.add_argument("--best", action="store_true", help="use the best parameters (lowest validation loss)")
        c.add_argument("--threads", type=int)
        c.add_argument(
            "--precision",
            choices=["float32", "bfloat16", "bfloat16-emulated"],
            default="float32",
            help="arithmetic of the LSTM layers' products (bfloat16: AMX tiles, float32 accumulation; "
            "float32 LSTM models only)",
        )
        c.set_defaults(func=func)
        c.add_argument(
            "--data",
            help="corpus, or the path of your own text (default: the one the model was "
            "trained on, as the checkpoint records it)"
            if name == "evaluate"
            else "corpus whose vocabulary to use when the checkpoint stores none (the one the model was trained on)",
        )
        c.add_argument("--data-path", help="local copy of the corpus; alone, beside a built-in corpus: your own text")
        c.add_argument("--data-option", action="append", metavar="NAME=VALUE", help="corpus option (repeatable)")
        if name == "evaluate":
            c.add_argument("--split", choices=["train", "valid", "test"], default="test")
            c.add_argument("--batch-size", type=int)
            c.add_argument("--bptt", type=int)
            c.add_argument("--json", action="store_true", help="print one JSON line")
        else:
            c.add_argument("--prompt", default="")
            c.add_argument("--length", type=int, default=200)
            c.add_argument("--temperature", type=float, default=1.0)
            c.add_argument("--seed", type=int, default=0)
            c.add_argument(
                "--allow-unknown",
                action="store_true",
                help="read prompt symbols the vocabulary lacks as its unknown symbol (default: refuse them)",
            )
    pr = sub.add_parser("presets", help="list the named presets")
    pr.set_defaults(func=cmd_presets)
    return p


#: Exceptions that report bad input or a bad environment: one ``error:`` line, no traceback.
_EXPECTED = (ValueError, TypeError, IndexError, OSError, FloatingPointError, OverflowError, ImportError)


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point; returns the exit status: 0 success, 1 an error (one ``error:`` line on stderr), 2 a
    malformed command line (one ``error:`` line), 130 interrupted, 141 standard output closed early
    (``| head``: quietly).

    An exception of another type (``RuntimeError``, ``AssertionError``, ...) is not foreseen: the
    traceback is printed first (for a bug report), then the same one ``error:`` line with the exception's
    type. Under ``--distributed`` any exception raised on one rank alone is printed with its rank and
    ends the whole MPI job (``MPI_Abort``) instead of leaving the other ranks waiting for it."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(_bind_dash_values(parser, argv))
    try:
        status = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return status
    except BrokenPipeError as e:  # | head closed standard output: stop quietly
        return _stdout_closed(args, e)
    except _EXPECTED as e:
        return _failed(args, e, f"error: {_cli_words(_message(e))}", 1)
    except MemoryError as e:
        return _failed(args, e, f"error: out of memory{': ' + str(e) if str(e) else ''}", 1)
    except KeyboardInterrupt as e:
        return _failed(args, e, "interrupted", 130)
    except Exception as e:  # not foreseen: the traceback (a bug report needs it), then the error line
        return _failed(args, e, f"error: {type(e).__name__}: {_message(e)}", 1, trace=True)


def _flag_of(name: str) -> str:
    """A Python argument name as the command line's flag (``embed_size`` -> ``--embed-size``)."""
    return {"vocab": "--data", "path": "--data-path"}.get(name, _flag(name))


#: Model arguments the command line sets by flags of their own (or not at all), not by ``--option``.
_OWN_FLAGS = ("vocab_size", "embed_size", "hidden_sizes", "dropout", "dtype", "seed", "input_size")

#: Messages of the package written for Python callers, in the words of the command line: (pattern, words).
_CLI_WORDS = [
    (
        re.compile(r"(\w+) got unexpected arguments? ('[^;]+); it takes (.*)$"),
        lambda m: (
            f"--option {m.group(2).replace(chr(39), '')}: {m.group(1)} has no such option; its options: "
            + ", ".join(o for o in m.group(3).split(", ") if o not in _OWN_FLAGS)
            + " (and the flags --embed-size, --hidden-sizes, --dropout, --dtype, --seed)"
        ),
    ),
    (
        re.compile(r"^hidden_sizes must be \(fast size, slow size\)"),
        "--hidden-sizes must be FAST,SLOW (the sizes of the fast cells and of the slow cell)",
    ),
    (
        re.compile(r"embed_size must equal the hidden size (\d+), got (\S+) \(leave embed_size out to get it\)"),
        r"--embed-size must equal the hidden size \1, got \2 (give --embed-size \1)",
    ),
    (re.compile(r"(?:and )?pass path= to the loader"), "and give its path with --data-path"),
    (re.compile(r"pass path= to a local copy"), "give --data-path of a local copy"),
    (re.compile(r"load\('([\w-]+)'\) needs path="), r"--data \1 needs --data-path"),
    (re.compile(r"load\('([\w-]+)'\) got unexpected option\(s\): "), r"--data \1 takes no --data-option "),
    (
        re.compile(r"the '([\w-]+)' corpus is built in and takes no path"),
        r"--data \1 is built into the package and reads no file (leave --data-path out)",
    ),
    (re.compile(r"pass level='byte' \(--data-option level=byte\)"), "give --data-option level=byte"),
    (re.compile(r"batch_size=(\d+) streams cannot be shared"), r"--batch-size \1: \1 streams cannot be shared"),
    (
        re.compile(r"the checkpoint was trained with (\w+)=(\S+), this trainer has \w+=(\S+):"),
        lambda m: (
            f"the checkpoint was trained with {_flag_of(m.group(1))} {m.group(2)}, this run has "
            f"{_flag_of(m.group(1))} {m.group(3)}:"
        ),
    ),
]


def _cli_words(text: str) -> str:
    """``text`` with the fixes it names for Python callers (``leave embed_size out``, ``pass path=``) named by
    the command line's flags."""
    for pattern, words in _CLI_WORDS:
        text = pattern.sub(words, text)
    return text


def _message(e: BaseException) -> str:
    """The text of an exception (its type when it has none)."""
    return str(e) or type(e).__name__


def _stdout_closed(args, error: BaseException) -> int:
    """Standard output was closed by its reader (``multiscale-rnn presets | head``): no message; the rest
    of the output goes nowhere (else Python's flush at exit would fail again). Exit status 141, as a
    program ended by SIGPIPE. Under ``--distributed`` the other ranks are ended too."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout without a file descriptor (a test's capture)
        pass
    MPI = sys.modules.get("mpi4py.MPI")
    if getattr(args, "distributed", False) and MPI is not None and MPI.COMM_WORLD.Get_size() > 1:
        MPI.COMM_WORLD.Abort(141)
    return 141


def _failed(args, error: BaseException, text: str, status: int, trace: bool = False) -> int:
    """Report an error and return the exit status. Under ``--distributed`` an error every rank
    raised together is reported by rank 0 alone; one raised on a single rank is reported with its
    rank and ends the whole MPI job (``MPI_Abort``), as the other ranks would wait for it forever.
    ``trace``: print the traceback first (an exception nobody foresaw)."""
    rank = None
    MPI = sys.modules.get("mpi4py.MPI")  # imported (and MPI started) by --distributed only
    if getattr(args, "distributed", False) and MPI is not None:
        rank = MPI.COMM_WORLD.Get_rank()
        if not getattr(error, "all_ranks", False):
            if trace:
                _print_traceback(error, f"rank {rank}: ")
            print(f"multiscale-rnn {args.command} (rank {rank}): {text}", file=sys.stderr, flush=True)
            MPI.COMM_WORLD.Abort(status)
    if rank in (None, 0):
        if trace and rank is None:
            _print_traceback(error)
        print(f"multiscale-rnn {args.command}: {text}", file=sys.stderr, flush=True)
        if trace and rank is None:
            print(
                "(unexpected: the traceback above shows where it was raised; please include it when you report "
                "the problem)",
                file=sys.stderr,
                flush=True,
            )
    return status


def _print_traceback(error: BaseException, prefix: str = "") -> None:
    import traceback

    lines = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    sys.stderr.write("".join(prefix + line + "\n" for line in lines.rstrip("\n").split("\n")))
    sys.stderr.flush()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
