"""Checkpoints: one ``.npz`` file (no pickle) holding everything needed to rebuild a model and to
continue its training exactly where it stopped.

Keys of the archive::

    __format__        "multiscale-rnn-checkpoint"          (what this file is)
    __version__       1                                    (layout version; newer files are refused)
    config            JSON: the model's constructor arguments (``model.config``)
    params            the flat parameter buffer, 1-D, the model's dtype
    rng               the model's C++ random generator state, uint64 (4,)
    meta              JSON: optimiser (name, hyper-parameters, step), trainer progress, schedules,
                      NumPy generator states, vocabulary, history; arrays inside these are replaced
                      by {"__array__": key} and stored under that key:
    optimizer/arrays/<name>  optimiser state arrays (Adam's m, v; SGD's momentum buffer), flat like params
    trainer/<path>    trainer arrays: carried TBPTT state (B, size) per name, best parameters, ...

Files are written atomically: a temporary file in the same folder, flushed and fsync'ed, then
``os.replace``'d over the target, so a crash never leaves a half-written checkpoint and the previous
checkpoint stays intact until the new one is complete.
"""
from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional, Union

import numpy as np

from .storage import History, atomic_write  # noqa: F401 - atomic_write is part of this module's API

__all__ = ["FORMAT", "VERSION", "CheckpointError", "Checkpoint", "save", "load", "check_config"]

FORMAT = "multiscale-rnn-checkpoint"
VERSION = 1
_REQUIRED = ("__format__", "__version__", "config", "params", "rng", "meta")


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used: corrupt, foreign, too new, or for another model."""


@dataclass
class Checkpoint:
    """What ``load`` returns. ``model`` has the saved parameters and random state."""

    path: Path
    config: dict
    model: Any
    optimizer: Any = None
    optimizer_state: Optional[dict] = None
    trainer_state: Optional[dict] = None
    vocab: Any = None
    history: Any = None
    extra: Dict[str, Any] = field(default_factory=dict)


# ---- JSON with arrays pulled out -----------------------------------------------------------------
def _json_default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"cannot store a {type(o).__name__} in a checkpoint")


def _split_arrays(obj, prefix: str, arrays: Dict[str, np.ndarray]):
    """Replace every ndarray inside nested dicts/lists by {"__array__": key}; collect the arrays."""
    if isinstance(obj, np.ndarray):
        arrays[prefix] = obj
        return {"__array__": prefix}
    if isinstance(obj, dict):
        for k in obj:
            if not isinstance(k, str) or "/" in k:
                raise ValueError(f"checkpoint keys must be strings without '/', got {k!r} in {prefix!r}")
        return {k: _split_arrays(v, f"{prefix}/{k}", arrays) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_split_arrays(v, f"{prefix}/{i}", arrays) for i, v in enumerate(obj)]
    return obj


def _join_arrays(obj, arrays: Dict[str, np.ndarray], path: Path):
    if isinstance(obj, dict):
        if set(obj) == {"__array__"}:
            key = obj["__array__"]
            if key not in arrays:
                raise CheckpointError(f"{path}: array {key!r} named in the metadata is missing from the file")
            return arrays[key]
        return {k: _join_arrays(v, arrays, path) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_join_arrays(v, arrays, path) for v in obj]
    return obj


def _text(s: str) -> np.ndarray:
    return np.array(s)  # a 0-d unicode array: no pickle needed


# ---- save ----------------------------------------------------------------------------------------
def save(path: Union[str, Path], model, optimizer=None, trainer_state: Optional[dict] = None, vocab=None,
         history=None, extra: Optional[dict] = None) -> Path:
    """Write a checkpoint atomically; returns the path.

    ``optimizer``: an ``optim.Optimizer`` (or its ``state_dict()``); ``trainer_state``: a dict of
    JSON-able values and NumPy arrays (``Trainer.state_dict()``); ``vocab``: a ``data.Vocab`` (or
    its ``to_json()`` dict); ``history``: a list of per-epoch dicts; ``extra``: any JSON-able dict
    (the command line stores its settings there).
    """
    arrays: Dict[str, np.ndarray] = {}
    opt_state = optimizer.state_dict() if hasattr(optimizer, "state_dict") else optimizer
    if vocab is not None and hasattr(vocab, "to_json"):
        vocab = vocab.to_json()
    meta = {
        "optimizer": _split_arrays(opt_state, "optimizer", arrays) if opt_state is not None else None,
        "trainer": _split_arrays(trainer_state, "trainer", arrays) if trainer_state is not None else None,
        "vocab": vocab,
        "history": list(history) if history is not None else None,
        "extra": extra or {},
    }
    meta_json = json.dumps(meta, default=_json_default, sort_keys=True)
    arrays.update({
        "__format__": _text(FORMAT),
        "__version__": np.array(VERSION, dtype=np.int64),
        "config": _text(json.dumps(model.config, default=_json_default, sort_keys=True)),
        "params": np.array(model.flat_parameters(), copy=True),
        "rng": np.asarray(model.get_rng_state(), dtype=np.uint64),
        "meta": _text(meta_json),
    })
    return atomic_write(path, lambda f: np.savez(f, **arrays))


# ---- load ----------------------------------------------------------------------------------------
def _read(path: Path) -> Dict[str, np.ndarray]:
    if not path.exists():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    if path.is_dir():
        raise CheckpointError(f"{path} is a folder, not a checkpoint file")
    try:
        with np.load(path, allow_pickle=False) as z:
            keys = list(z.files)
            if "__format__" not in keys:
                raise CheckpointError(f"{path} is not a multiscale-rnn checkpoint (no '__format__' tag; keys: "
                                      f"{sorted(keys)[:8]})")
            return {k: z[k] for k in keys}
    except CheckpointError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, KeyError) as e:
        raise CheckpointError(f"{path} is corrupt or not an .npz checkpoint: {type(e).__name__}: {e}") from e


def check_config(saved: dict, model, path: Union[str, Path] = "checkpoint") -> None:
    """Raise ``CheckpointError`` unless ``model`` has the saved configuration (the init ``seed`` may
    differ) and the same flat parameter size."""
    own = model.config
    diffs = [f"{k}: saved {saved.get(k)!r}, model {own.get(k)!r}" for k in sorted(set(saved) | set(own))
             if k != "seed" and saved.get(k) != own.get(k)]
    if diffs:
        raise CheckpointError(f"{path} was saved from a different model ({'; '.join(diffs)})")


def load(path: Union[str, Path], model=None) -> Checkpoint:
    """Read a checkpoint, refusing a missing file (``FileNotFoundError``), a corrupt or foreign file,
    a newer format version, or one whose model does not match ``model`` (``CheckpointError``).

    Without ``model`` a new model is built from the saved config (``multiscale_rnn.models.MODELS``);
    with ``model`` its parameters and random state are overwritten. The optimiser is rebuilt when
    one was saved; ``trainer_state`` holds the Trainer's progress for ``Trainer.fit(resume=True)``.
    """
    from .models import MODELS
    from .optim import optimizer_from_state

    path = Path(path)
    z = _read(path)
    fmt = str(z["__format__"])
    if fmt != FORMAT:
        raise CheckpointError(f"{path} is not a multiscale-rnn checkpoint (format tag {fmt!r})")
    missing = [k for k in _REQUIRED if k not in z]
    if missing:
        raise CheckpointError(f"{path} is incomplete: missing {missing}")
    try:
        version = int(z["__version__"])
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{path} has an unreadable format version: {z['__version__']!r}") from e
    if version > VERSION or version < 1:
        raise CheckpointError(f"{path} has format version {version}; this multiscale-rnn reads version {VERSION} "
                              "(upgrade the package to read it)" if version > VERSION else
                              f"{path} has an invalid format version {version}")
    try:
        config = json.loads(str(z["config"]))
        meta = json.loads(str(z["meta"]))
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path} holds unreadable JSON metadata: {e}") from e
    if not isinstance(config, dict) or "model" not in config:
        raise CheckpointError(f"{path}: the model config has no 'model' name")

    if model is None:
        name = config["model"]
        if name not in MODELS:
            raise CheckpointError(f"{path} holds a {name!r} model, which this installation does not know "
                                  f"(known: {sorted(MODELS)})")
        kwargs = {k: v for k, v in config.items() if k != "model"}
        try:
            model = MODELS[name](**kwargs)
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{path}: cannot rebuild {name} from its config {kwargs}: {e}") from e
    else:
        check_config(config, model, path)

    params = z["params"]
    flat = model.flat_parameters()
    if params.shape != flat.shape or params.dtype != flat.dtype:
        raise CheckpointError(f"{path}: parameters have shape {params.shape} and dtype {params.dtype}, the model "
                              f"needs {flat.shape} {flat.dtype}")
    if not np.all(np.isfinite(params)):
        raise CheckpointError(f"{path}: the saved parameters hold NaN or infinity")
    rng = z["rng"]
    if rng.shape != (4,) or rng.dtype != np.uint64:
        raise CheckpointError(f"{path}: random state must be uint64 (4,), got {rng.dtype} {rng.shape}")
    flat[...] = params
    model.set_rng_state(rng)

    opt_state = _join_arrays(meta.get("optimizer"), z, path) if meta.get("optimizer") is not None else None
    optimizer = None
    if opt_state is not None:
        try:
            optimizer = optimizer_from_state(opt_state)
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{path}: cannot restore the optimiser: {e}") from e
        for k, v in optimizer.state.items():
            if v.shape != flat.shape or v.dtype != flat.dtype:
                raise CheckpointError(f"{path}: optimiser array {k!r} has shape {v.shape} {v.dtype}, parameters "
                                      f"{flat.shape} {flat.dtype}")
    trainer_state = _join_arrays(meta.get("trainer"), z, path) if meta.get("trainer") is not None else None

    vocab = meta.get("vocab")
    if vocab is not None:
        try:
            from .data import Vocab
            vocab = Vocab.from_json(vocab)
        except ImportError:  # data layer absent: keep the JSON
            pass
    history = meta.get("history")
    if history is not None:
        history = History(history)
    return Checkpoint(path=path, config=config, model=model, optimizer=optimizer, optimizer_state=opt_state,
                      trainer_state=trainer_state, vocab=vocab, history=history, extra=meta.get("extra") or {})
