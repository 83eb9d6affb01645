"""The settings of a ``train`` run: defaults < preset < TOML config < flags, with the settings a resumed run
stored in between; what each setting must be (``SETTING_RULES``), and what a resume may not change.

See ``docs/cli.md`` for the settings and how they are resolved.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path
from typing import Any, Dict, List, Optional

from .. import presets as _presets
from .._checks import Rule, did_you_mean, first_bad_entry, is_int, is_number
from ..data.loaders import BUILT_IN, LOADERS, corpus_key
from ..schedules import lr_schedule_name

__all__ = [
    "SETTING_RULES",
    "NONE_WORDS",
    "NULLABLE",
    "PER_INVOCATION",
    "RESUME_FIXED",
    "IDENTITY",
    "parse_value",
    "key_values",
    "sizes",
    "load_config",
    "config_text",
    "check_settings",
    "settings_sources",
    "flag",
    "resolve_settings",
    "normal",
    "show",
    "resolve_data",
    "anneal_flag",
    "train_settings",
]


def parse_value(text: str) -> Any:
    """``3`` -> 3, ``0.5`` -> 0.5, ``true`` -> True, ``[1, 2]`` -> [1, 2], anything else a string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def key_values(items: List[str], what: str) -> Dict[str, Any]:
    """``["a=1", "b=x"]`` -> ``{"a": 1, "b": "x"}`` (values as :func:`parse_value` reads them); ``what`` names
    the flag in the error for an item without ``=``."""
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"{what} must look like NAME=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = parse_value(v.strip())
    return out


def sizes(text: str) -> List[int]:
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
        import tomli as tomllib  # type: ignore[no-redef]  # the same interface
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
        named = ", ".join(f"{k!r}{did_you_mean(k, _presets.DEFAULTS, quote=True)}" for k in unknown)
        raise ValueError(f"{path}: unknown setting(s) {named}; known: {sorted(_presets.DEFAULTS)} and 'preset'")
    return cfg


def config_text(name: str) -> str:
    """The preset ``name`` as a TOML config that ``load_config`` reads back to the same settings: its
    ``about`` text as comments, ``preset = name`` (so that a setting taken out falls back to the preset's),
    every setting, and the tables (``[options]``, ...) last. A ``None`` is written ``"none"``."""
    import textwrap

    settings = _presets.get_preset(name)
    lines = ["# " + line for line in textwrap.wrap(_presets.PRESETS[name].get("about", ""), 98)]
    lines.append(f"preset = {_toml(name)}")
    lines += [f"{k} = {_toml(v)}" for k, v in settings.items() if not isinstance(v, dict)]
    for table, entries in ((k, v) for k, v in settings.items() if isinstance(v, dict)):
        keys = {k: k if re.fullmatch(r"[A-Za-z0-9_-]+", str(k)) else json.dumps(str(k)) for k in entries}
        lines += ["", f"[{table}]"] + [f"{keys[k]} = {_toml(v)}" for k, v in entries.items()]
    return "\n".join(lines) + "\n"


def _toml(v) -> str:
    """One TOML value: a string (JSON's escapes are TOML's), a boolean, a number or an array of these."""
    if v is None:
        return '"none"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if v != v else "inf" if v > 0 else "-inf"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    return json.dumps(str(v))


_POSITIVE_INT: Rule = (lambda v: is_int(v) and v >= 1, "a positive integer")
_COUNT: Rule = (lambda v: is_int(v) and v >= 0, "a non-negative integer")
_STRING: Rule = (lambda v: isinstance(v, str) and v != "", "a non-empty string")

#: What each setting must be: (check, words); None is allowed for the settings in ``NULLABLE``.
SETTING_RULES: Dict[str, Rule] = {
    "model": _STRING,
    "embed_size": _POSITIVE_INT,
    "hidden_sizes": (
        lambda v: isinstance(v, list) and bool(v) and all(is_int(h) and h >= 1 for h in v),
        "a list of positive integers",
    ),
    "dropout": (lambda v: is_number(v) and 0 <= v < 1, "a number in [0, 1)"),
    "dtype": (lambda v: v in ("float32", "float64"), "float32 or float64"),
    "init_std": (lambda v: is_number(v) and v > 0, "a finite number > 0 (or none)"),
    "data": _STRING,
    "data_path": _STRING,
    "epochs": _POSITIVE_INT,
    "batch_size": _POSITIVE_INT,
    "bptt": _POSITIVE_INT,
    "eval_batch_size": _POSITIVE_INT,
    "optimizer": _STRING,
    "lr": (lambda v: is_number(v) and v > 0, "a finite number > 0"),
    "momentum": (lambda v: is_number(v) and 0 <= v < 1, "a number in [0, 1)"),
    "weight_decay": (lambda v: is_number(v) and v >= 0, "a finite number >= 0"),
    "clip_norm": (lambda v: is_number(v) and v > 0, "a finite number > 0 (or none)"),
    "clip_value": (lambda v: is_number(v) and v > 0, "a finite number > 0 (or none)"),
    "column_norm": (lambda v: is_number(v) and v > 0, "a finite number > 0 (or none)"),
    "divergence": (lambda v: is_number(v) and v > 0, "a number of bits > 0 (or none)"),
    "early_stopping": (lambda v: is_int(v) and v >= 1, "a positive integer of epochs (or none)"),
    "min_delta": (lambda v: is_number(v) and v >= 0, "a finite number >= 0 (nats)"),
    "tensorboard": (lambda v: isinstance(v, str) and v != "", "a folder (or none)"),
    "lr_schedule": _STRING,
    "lr_factor": (lambda v: is_number(v) and v > 1, "a number > 1 that divides the learning rate (2 halves it)"),
    "lr_every": (lambda v: v in ("epoch", "step"), "epoch or step"),
    "patience": _COUNT,
    "halve_after": _COUNT,
    "lr_milestones": (
        lambda v: isinstance(v, list) and all(is_int(m) and m >= 1 for m in v),
        "a list of positive integers",
    ),
    "max_chunks": _POSITIVE_INT,
    "checkpoint_every": _POSITIVE_INT,
    "seed": (lambda v: is_int(v) and v >= 0, "a non-negative integer"),
    "restarts": _POSITIVE_INT,
    "select_after": (lambda v: v == "auto" or (is_int(v) and v >= 1), "a positive integer, auto or none"),
    "select": (lambda v: v in ("loss", "agreement"), "loss or agreement"),
    "threads": _POSITIVE_INT,
    "out": _STRING,
    "progress": (lambda v: isinstance(v, bool), "true or false"),
}


#: The words a model option may be given as to mean None (TOML has no null); a setting of ``NULLABLE`` also
#: takes ``off`` and an empty string.
NONE_WORDS = ("none", "null")

#: The settings that may be none (given as none, null, off or an empty string).
NULLABLE = (
    "init_std",
    "clip_norm",
    "clip_value",
    "column_norm",
    "divergence",
    "early_stopping",
    "tensorboard",
    "threads",
    "max_chunks",
    "checkpoint_every",
    "data_path",
    "select_after",
)


def check_settings(settings: Dict[str, Any]) -> None:
    """``ValueError`` naming the first setting of the wrong type or out of range (no silent
    conversion: ``batch_size = 4.5`` or ``0`` is refused, not read as 4 or the default)."""
    key = first_bad_entry(settings, SETTING_RULES, nullable=NULLABLE)
    if key is not None:
        raise ValueError(f"{key.replace('_', '-')} must be {SETTING_RULES[key][1]}, got {settings.get(key)!r}")
    if settings.get("min_delta") and settings.get("early_stopping") is None:
        raise ValueError(
            f"min-delta = {settings['min_delta']} is the smallest improvement early stopping counts, and early "
            f"stopping is off: give --early-stopping PATIENCE too (or leave --min-delta out)"
        )
    if str(settings.get("lr_schedule")).lower() in ("multistep", "multi-step") and not settings.get("lr_milestones"):
        raise ValueError(
            "lr-schedule multistep divides the learning rate at its milestones, and none were given: "
            "give --lr-milestones (e.g. 180 or 100,150)"
        )
    if is_int(settings.get("select_after")) and settings.get("restarts", 1) > 1:  # one run: nothing to compare
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
PER_INVOCATION = ("max_chunks", "threads", "progress", "out", "restarts", "select_after", "select", "preset")


#: Settings a resume may not change, and why (the rest: epochs, clipping, evaluation, ... may change).
RESUME_FIXED = {
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
    "init_std": "only initialises a new run (a resumed run goes on with its saved parameters)",
}


#: Settings that make a checkpoint another model or data: a new run never overwrites a checkpoint that
#: differs in one of them unless asked to (``--overwrite``).
IDENTITY = ("model", "embed_size", "hidden_sizes", "dropout", "dtype", "options", "data", "data_path", "data_options")


def flag(key: str) -> str:
    """A setting's flag: ``embed_size`` -> ``--embed-size``."""
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
    name = _preset_name(preset, config, flags, stored, stored_from)
    data_named = "data" in config or "data" in flags
    unknown = sorted(set(flags) - set(_presets.DEFAULTS))
    if unknown:
        raise ValueError(f"unknown setting(s) {unknown}")
    settings = dict(_presets.DEFAULTS)
    settings.update(_presets.get_preset(name))
    preset_path = settings.get("data_path")  # a first run's data path, before the stored run's
    if stored is not None:
        settings.update({k: v for k, v in stored.items() if k in _presets.DEFAULTS and k not in PER_INVOCATION})
    settings.update(config)
    settings.update(flags)
    settings["preset"] = name
    for key in NULLABLE:
        if isinstance(settings.get(key), str) and settings[key].lower() in (*NONE_WORDS, "off", ""):
            settings[key] = None
    path_named = "data_path" in flags or "data_path" in config
    if stored is not None and data_named and not path_named:
        # --data named again on --resume (the first run's command repeated): read it as a first run would, not
        # beside the stored run's data path, which --data FILE itself had set
        settings["data_path"] = preset_path
    resolve_data(settings, data_named, flags.get("data_options", config.get("data_options", {})), path_named)
    _normalise(settings)
    if stored is not None:
        _check_resume(settings, stored, stored_from, config, flags)
    elif "out" not in flags and "out" not in config:
        preset_data = _presets.get_preset(name).get("data", _presets.DEFAULTS["data"])
        if settings["data"] == "text" or corpus_key(str(settings["data"])) != corpus_key(str(preset_data)):
            folder = Path(settings["out"]).parent
            settings["out"] = str(folder / f"{name}-{_data_slug(settings)}.npz")
    check_settings(settings)
    _check_schedule_flags(settings, flags)
    return settings


#: The learning-rate schedules that read each schedule setting (the rest ignore it).
SCHEDULE_SETTINGS = {
    "lr_factor": ("halve", "plateau", "newbob", "multistep"),
    "patience": ("plateau",),
    "halve_after": ("halve",),
    "lr_milestones": ("multistep",),
    "lr_every": ("halve", "multistep"),
}


def _check_schedule_flags(settings: Dict[str, Any], flags: Dict[str, Any]) -> None:
    """A schedule, optimiser or restart flag given on the command line that the run does not read is refused,
    naming what reads it (``--lr-factor 10`` with the constant schedule, ``--momentum`` with Adam or
    ``--select-after`` with one run would change nothing)."""
    if "momentum" in flags and settings.get("optimizer") != "sgd":
        raise ValueError(
            f"--momentum is read only by --optimizer sgd, and this run's optimizer is {settings.get('optimizer')}: "
            "give --optimizer sgd too, or leave --momentum out"
        )
    for name in ("select_after", "select"):
        if name in flags and settings.get("restarts", 1) <= 1:
            raise ValueError(
                f"{flag(name)} chooses among restarts, and this run trains once: give --restarts N (N > 1) too, "
                f"or leave {flag(name)} out"
            )
    schedule = lr_schedule_name(str(settings.get("lr_schedule")))
    for name, readers in SCHEDULE_SETTINGS.items():
        if name in flags and schedule not in readers:
            which = ", ".join(readers[:-1]) + " and " + readers[-1] + " schedules" if len(readers) > 1 else ""
            raise ValueError(
                f"{flag(name)} is read only by the {which or readers[0] + ' schedule'}, and this run's "
                f"--lr-schedule is {settings.get('lr_schedule')}: choose one that reads it (e.g. --lr-schedule "
                f"{readers[0]}) or leave {flag(name)} out"
            )


def _preset_name(preset, config: Dict[str, Any], flags: Dict[str, Any], stored, stored_from: str) -> str:
    """The preset of the settings (``flags``' ``preset``, else the config's, else the stored run's, else
    ``preset``, else the default), taken out of ``config`` and ``flags``; a preset asked for that is not the
    one of the run a resume continues is refused."""
    asked = flags.pop("preset", None) or config.pop("preset", None)
    config.pop("preset", None)
    if stored is not None and asked and stored.get("preset") not in (None, asked):
        raise ValueError(
            f"--resume continues the run saved in {stored_from}, trained under preset "
            f"{stored['preset']}; --preset {asked} would change its settings: leave --preset out to "
            f"continue the run, or start a new run with another --out"
        )
    return asked or (stored or {}).get("preset") or preset or _presets.DEFAULT_PRESET


def _normalise(settings: Dict[str, Any]) -> None:
    """Clipping by 0 as none, one hidden size as a list, a model option "none" as None; the tables (options,
    data options, anneal) and each anneal entry refused unless of their form."""
    for key in ("clip_norm", "clip_value"):
        if settings.get(key) == 0:
            settings[key] = None
    if isinstance(settings["hidden_sizes"], int):
        settings["hidden_sizes"] = [settings["hidden_sizes"]]
    for key in ("options", "data_options", "anneal"):
        if not isinstance(settings[key], dict):
            raise ValueError(f"setting {key!r} must be a table (dict), got {settings[key]!r}")
    # TOML has no null: a model option written "none" or "null" is None (no option takes those words)
    settings["options"] = {
        k: None if isinstance(v, str) and v.lower() in NONE_WORDS else v for k, v in settings["options"].items()
    }
    for name, spec in settings["anneal"].items():
        if not (
            isinstance(spec, (list, tuple))
            and len(spec) in (3, 4)
            and all(is_number(x) for x in spec[:3])
            and (len(spec) == 3 or spec[3] in ("epoch", "step"))
        ):
            raise ValueError(f'anneal.{name} must be [start, end, rate] or [start, end, rate, "step"], got {spec!r}')


def _check_resume(settings, stored: Dict[str, Any], stored_from: str, config, flags) -> None:
    """Refuse settings that contradict one the stored run cannot change (``RESUME_FIXED``), naming both values
    and where the new one came from."""
    for key, why in RESUME_FIXED.items():
        if key in stored and normal(settings.get(key)) != normal(stored[key]):
            src = (
                "--data / --data-path"
                if key in ("data", "data_options") and key not in flags and key not in config
                else flag(key)
                if key in flags
                else f"{key} in the config file"
            )
            raise ValueError(
                f"--resume continues the run saved in {stored_from}, whose {key} is "
                f"{show(stored[key])}; {src} gives {show(settings.get(key))}, which {why}. Leave "
                f"{src} out to continue that run, or start a new run with another --out"
            )


def normal(v):
    """A setting as JSON would store it (tuples as lists), for comparing with a checkpoint's settings."""
    return json.loads(json.dumps(v, default=str))


def show(v) -> str:
    """A setting's value as the messages show it: none, 'text', or JSON."""
    return "none" if v is None else f"'{v}'" if isinstance(v, str) else json.dumps(v)


def _data_slug(settings) -> str:
    """A short name for the corpus of ``settings``: the file or folder name of your own text, else the corpus."""
    if settings["data"] == "text" and settings.get("data_path"):
        p = Path(str(settings["data_path"])).expanduser()
        return re.sub(r"[^\w.-]+", "_", p.stem or p.name or "text")
    return corpus_key(str(settings["data"]))


def resolve_data(settings: Dict[str, Any], data_named: bool, own_options, path_named: bool = True) -> None:
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
    names = ", ".join(LOADERS[:-1])  # the corpora the command line trains on
    if path not in (None, ""):
        return ValueError(
            f"--data {data}: no corpus has that name (with --data-path, --data names the corpus "
            f"the path holds: {names}; for your own text give --data-path alone or --data FILE)"
        )
    if re.search(r"[/\\~]|\.\w+$", data):
        return FileNotFoundError(
            f"--data {data}: no such file or folder (--data takes a corpus name, {names}, or the path of your own text)"
        )
    hint = did_you_mean(corpus_key(data), LOADERS)
    return ValueError(
        f"--data {data}: no corpus has that name{hint}, and no file or folder either; the corpora: "
        f"{names}, or the path of your own text"
    )


def _built_in(data) -> bool:
    """The corpus name (or None) is one that ships with the package and reads no file; a data path then
    means the user's own text. Other corpora (ptb-char, text8, ...) read theirs from the data path."""
    return data is None or (isinstance(data, str) and corpus_key(data) in BUILT_IN)


def anneal_flag(name: str, value) -> list:
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


def train_settings(args, stored: Optional[Dict[str, Any]] = None, stored_from: str = "the checkpoint"):
    """The resolved settings of ``train`` and where they came from: (settings, config, flags, preset given).
    ``stored``: the settings of the checkpoint a ``--resume`` continues (see :func:`resolve_settings`)."""
    flags = {k: v for k, v in vars(args).items() if k in _presets.DEFAULTS or k == "preset"}
    flags.pop("config", None)
    if getattr(args, "option", None):
        flags["options"] = key_values(args.option, "--option")
    if getattr(args, "data_option", None):
        flags["data_options"] = key_values(args.data_option, "--data-option")
    if getattr(args, "anneal", None):
        flags["anneal"] = {k: anneal_flag(k, v) for k, v in key_values(args.anneal, "--anneal").items()}
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
