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
import math
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional, Union

import numpy as np

from ._checks import is_int, is_number
from .storage import History, atomic_write, check_writable  # noqa: F401 - atomic_write is part of this module's API

__all__ = ["FORMAT", "VERSION", "CheckpointError", "Checkpoint", "save", "load", "check_config", "check_room"]

FORMAT = "multiscale-rnn-checkpoint"
VERSION = 1
_REQUIRED = ("__format__", "__version__", "config", "params", "rng", "meta")


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used: corrupt, foreign, too new, or for another model."""


@dataclass
class Checkpoint:
    """What ``load`` returns. ``model`` has the saved parameters and random state, and the values the trainer's
    annealed options had when it was saved (a VCRNN's sharpness, an HM-LSTM's slope): it computes what the
    trained model computed."""

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


def _text(s: str) -> np.ndarray:
    return np.array(s)  # a 0-d unicode array: no pickle needed


# ---- save ----------------------------------------------------------------------------------------
def check_room(path: Union[str, Path], model) -> Path:
    """Before any work: ``path`` can take ``model``'s checkpoint (``storage.check_writable``), with room in its
    folder for at least the model's parameters (a lower bound of what ``save`` writes), else ``OSError``
    naming the path, the sizes and the free space."""
    n, dtype = model.num_parameters, np.dtype(model.dtype)
    why = f" (its {n:,} {dtype.name} parameters alone)"
    return check_writable(path, "checkpoint", needs=n * dtype.itemsize, why=why)


def save(
    path: Union[str, Path],
    model,
    optimizer=None,
    trainer_state: Optional[dict] = None,
    vocab=None,
    history=None,
    extra: Optional[dict] = None,
) -> Path:
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
    arrays.update(
        {
            "__format__": _text(FORMAT),
            "__version__": np.array(VERSION, dtype=np.int64),
            "config": _text(json.dumps(model.config, default=_json_default, sort_keys=True)),
            "params": np.array(model.flat_parameters(), copy=True),
            "rng": np.asarray(model.get_rng_state(), dtype=np.uint64),
            "meta": _text(meta_json),
        }
    )
    return atomic_write(path, lambda f: np.savez(f, **arrays))  # type: ignore[arg-type]  # numpy's stub: **kwds as allow_pickle


# ---- load ----------------------------------------------------------------------------------------
# Reading is defensive: a checkpoint may be damaged or hostile. Only the members the format names
# are read (the fixed ones and the arrays the metadata points at), each member must be stored
# uncompressed (as ``np.savez`` writes it) so no member can claim more bytes than the file holds,
# every array's ``.npy`` header is checked (no object dtype, the data length matching the header,
# shape and dtype as the model needs) before its data are read, and every JSON value is checked
# for its type before use. Every refusal is a ``CheckpointError`` naming the file.


class _Archive:
    """The members of a checkpoint file, read one at a time with their headers checked first."""

    def __init__(self, path: Path):
        self.path = path
        try:
            size = os.path.getsize(path)
            self.zf = zipfile.ZipFile(path)
            self.members = {}
            for info in self.zf.infolist():
                if info.filename.endswith(".npy"):
                    self.members[info.filename[:-4]] = info
        except (
            zipfile.BadZipFile,
            zipfile.LargeZipFile,
            OSError,
            EOFError,
            ValueError,
            KeyError,
            NotImplementedError,
        ) as e:
            raise CheckpointError(f"{path} is corrupt or not an .npz checkpoint: {type(e).__name__}: {e}") from None
        self.size = size

    def close(self) -> None:
        self.zf.close()

    def __contains__(self, key: str) -> bool:
        return key in self.members

    def array(self, key: str, shape=None, dtype=None, what: Optional[str] = None) -> np.ndarray:
        """Member ``key`` as an array, refused unless its header is sound and (when given) its
        shape and dtype are ``shape`` and ``dtype``."""
        what = what or f"array {key!r}"
        info = self.members.get(key)
        if info is None:
            raise CheckpointError(f"{self.path}: {what} ({key}.npy) is missing from the file")
        where = f"{self.path} (member {info.filename})"  # the file the user named, and the entry inside it
        if (
            info.compress_type != zipfile.ZIP_STORED
            or info.file_size != info.compress_size
            or info.file_size > self.size
        ):
            raise CheckpointError(
                f"{where}: {what} is stored compressed or claims {info.file_size:,} bytes in "
                f"a file of {self.size:,} bytes; the file is damaged"
            )
        try:
            with self.zf.open(info) as f:
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    got_shape, fortran, got_dtype = np.lib.format.read_array_header_1_0(f)
                elif version == (2, 0):
                    got_shape, fortran, got_dtype = np.lib.format.read_array_header_2_0(f)
                else:
                    raise ValueError(f"unsupported .npy version {version}")
                if got_dtype.hasobject:
                    raise CheckpointError(
                        f"{where}: {what} holds Python objects, which checkpoints never "
                        "contain; the file is damaged or not from multiscale-rnn"
                    )
                # numbers or text only, each element at least one byte: no structured, void or empty dtype whose
                # size says nothing of the element count
                if got_dtype.kind not in "biufcU" or got_dtype.itemsize == 0:
                    raise CheckpointError(
                        f"{where}: {what} has dtype {got_dtype}, which checkpoints never hold "
                        "(numbers or text); the file is damaged or not from multiscale-rnn"
                    )
                if any(n < 0 for n in got_shape):
                    raise CheckpointError(
                        f"{where}: {what} declares the negative shape {got_shape}; the file is damaged"
                    )
                count = math.prod(got_shape)
                nbytes = count * got_dtype.itemsize
                if nbytes != info.file_size - f.tell():
                    raise CheckpointError(
                        f"{where}: {what} declares shape {got_shape} {got_dtype} "
                        f"({nbytes:,} bytes) but holds {info.file_size - f.tell():,} bytes; "
                        "the file is damaged"
                    )
                if shape is not None and tuple(got_shape) != tuple(shape):
                    raise CheckpointError(f"{where}: {what} has shape {tuple(got_shape)}, expected {tuple(shape)}")
                if dtype is not None and got_dtype != np.dtype(dtype):
                    raise CheckpointError(f"{where}: {what} has dtype {got_dtype}, expected {np.dtype(dtype)}")
                data = f.read(nbytes)
        except CheckpointError:
            raise
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, KeyError, SyntaxError, TypeError) as e:
            raise CheckpointError(
                f"{where}: {what} is unreadable ({type(e).__name__}: {e}); the file is damaged"
            ) from None
        if len(data) != nbytes:
            raise CheckpointError(f"{where}: {what} is truncated")
        arr = np.frombuffer(data, dtype=got_dtype, count=count)
        return np.array(arr.reshape(got_shape, order="F" if fortran else "C"), copy=True)

    def text(self, key: str, what: str) -> str:
        a = self.array(key, shape=(), what=what)
        if a.dtype.kind != "U":
            raise CheckpointError(f"{self.path} (member {key}.npy): {what} must be text, got dtype {a.dtype}")
        return str(a)


def _read(path: Path) -> _Archive:
    if not path.exists():
        near = path.with_name(path.name + ".npz")
        hint = f" (did you mean {near}?)" if path.suffix != ".npz" and near.is_file() else ""
        raise FileNotFoundError(f"checkpoint not found: {path}{hint}")
    if path.is_dir():
        raise CheckpointError(f"{path} is a folder, not a checkpoint file")
    z = _Archive(path)
    if "__format__" not in z:
        z.close()
        raise CheckpointError(
            f"{path} is not a multiscale-rnn checkpoint (no '__format__' tag; keys: {sorted(z.members)[:8]})"
        )
    return z


def _json(z: _Archive, key: str, what: str) -> Any:
    try:
        return json.loads(z.text(key, what))
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{z.path} (member {key}.npy) holds unreadable JSON {what}: {e}") from None
    except RecursionError:
        raise CheckpointError(f"{z.path} (member {key}.npy): the JSON {what} is nested too deeply") from None


def _want(value, kinds, where: str, path: Path, none: bool = False):
    """``value`` if it is one of ``kinds`` (``int`` excludes bool; ``float`` accepts ints, finite only)."""
    if value is None and none:
        return value
    ok = False
    for k in kinds if isinstance(kinds, tuple) else (kinds,):
        if k is int:
            ok = ok or is_int(value)
        elif k is float:
            ok = ok or is_number(value)
        else:
            ok = ok or isinstance(value, k)
    if not ok:
        names = " or ".join(
            {
                int: "an integer",
                float: "a finite number",
                dict: "an object",
                list: "a list",
                str: "a string",
                bool: "true/false",
            }.get(k, k.__name__)
            for k in (kinds if isinstance(kinds, tuple) else (kinds,))
        )
        raise CheckpointError(f"{path}: {where} must be {names}{' or null' if none else ''}, got {value!r:.80}")
    return value


def _join_checked(obj, z: _Archive, where: str, expect=None):
    """Replace every {"__array__": key} in ``obj`` by the array read from ``z``; ``expect(where)``
    may return (shape, dtype) for an array at ``where``, or None for no constraint."""
    if isinstance(obj, dict):
        if set(obj) == {"__array__"}:
            key = _want(obj["__array__"], str, f"{where} (an array reference)", z.path)
            shape, dtype = (expect(where) if expect is not None else None) or (None, None)
            return z.array(key, shape, dtype, what=f"array {key!r}")
        return {k: _join_checked(v, z, f"{where}/{k}", expect) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_join_checked(v, z, f"{where}/{i}", expect) for i, v in enumerate(obj)]
    return obj


def _check_carried(trainer_state: dict, model, path: Path) -> None:
    """Refuse a carried TBPTT state (``trainer/carried/<name>``) that is not the model's state for the saved
    ``batch_size`` streams: a name the model lacks, or another shape than (batch_size, size)."""
    carried = trainer_state.get("carried")
    if not isinstance(carried, dict) or not carried:
        return
    batch = trainer_state.get("batch_size")
    before = model.get_state()
    model.reset_state(1)
    sizes = {k: tuple(v.shape[1:]) for k, v in model.get_state().items()}
    try:
        model.set_state(before)
    except (TypeError, ValueError):
        pass
    for name, a in carried.items():
        where = f"{path} (member trainer/carried/{name}.npy)"
        if name not in sizes:
            raise CheckpointError(
                f"{where}: the carried state {name!r} is not a state of this model "
                f"(it has {', '.join(sorted(sizes))}); the file is damaged"
            )
        if not isinstance(a, np.ndarray):
            raise CheckpointError(f"{where}: the carried state {name!r} must be an array, got {a!r:.80}")
        rows = batch if is_int(batch) else a.shape[0] if a.ndim else -1
        if a.shape != (rows, *sizes[name]):
            raise CheckpointError(
                f"{where}: the carried state {name!r} has shape {a.shape}, expected "
                f"{(rows, *sizes[name])} (batch_size {batch} streams); the file is damaged"
            )


def check_config(saved: dict, model, path: Union[str, Path] = "checkpoint") -> None:
    """Raise ``CheckpointError`` unless ``model`` has the saved configuration (the init ``seed`` may
    differ) and the same flat parameter size. An option the saved config lacks (written before the option
    existed) matches the model's value when that is the option's declared default."""
    own = model.config
    options = type(model).all_options() if hasattr(type(model), "all_options") else {}
    newer = {k for k in set(own) - set(saved) if k in options and own[k] == options[k].default}
    decisive = ("model", "vocab_size", "dtype", "hidden_sizes", "embed_size")  # reported first, in this order
    keys = sorted(set(saved) | set(own), key=lambda k: (decisive.index(k) if k in decisive else len(decisive), k))
    if saved.get("model") != own.get("model"):  # another family: the options of one family only are noise
        keys = [k for k in keys if k in saved and k in own]
    diffs = [
        f"{k}: saved {saved.get(k)!r}, model {own.get(k)!r}"
        for k in keys
        if k != "seed" and k not in newer and saved.get(k) != own.get(k)
    ]
    if diffs:  # the decisive difference on the first line, any others one per line below
        raise CheckpointError(
            f"{path} was saved from a different model ({diffs[0]})" + "".join(f"\n  also {d}" for d in diffs[1:])
        )


def _set_annealed_options(model, trainer_state: Optional[dict], path: Path) -> None:
    """Give ``model`` the values of the options the trainer annealed, as they were at the save (the model's
    config holds the values it was built with)."""
    from .training.state import saved_option_values

    saved = (trainer_state or {}).get("model_options") or {}
    if not isinstance(saved, dict):
        raise CheckpointError(f"{path}: the trainer state's model_options must be an object, got {saved!r:.60}")
    for name, value in saved_option_values(trainer_state or {}).items():
        try:
            model.set_option(name, float(value))
        except (TypeError, ValueError, KeyError, RuntimeError) as e:
            raise CheckpointError(f"{path}: cannot set the annealed option {name!r} to {value!r}: {e}") from None


def load(path: Union[str, Path], model=None) -> Checkpoint:
    """Read a checkpoint, refusing a missing file (``FileNotFoundError``), a corrupt or foreign file,
    a newer format version, or one whose model does not match ``model`` (``CheckpointError``).

    Without ``model`` a new model is built from the saved config (``multiscale_rnn.models.MODELS``);
    with ``model`` its parameters and random state are overwritten. The optimiser is rebuilt when
    one was saved; ``trainer_state`` holds the Trainer's progress for ``Trainer.fit(resume=True)``.
    """
    path = Path(path)
    z = _read(path)
    try:
        return _load(z, path, model)
    finally:
        z.close()


def _load(z: _Archive, path: Path, model) -> Checkpoint:
    """Read the archive ``z`` (from ``path``), each part checked before it is used: the header, the model
    (rebuilt from its config, or ``model`` checked against it), the parameters and random state, the
    optimiser, the trainer state, the vocabulary, the history."""
    config, meta = _header(z, path)
    model = _model_for(config, model, path)
    flat = model.flat_parameters()
    params = z.array("params", flat.shape, flat.dtype, what="the parameter array")
    if not np.all(np.isfinite(params)):
        raise CheckpointError(f"{path}: the saved parameters hold NaN or infinity")
    rng = z.array("rng", (4,), np.uint64, what="the random state")
    optimizer, opt_state = _optimizer_part(z, meta, flat, path)
    trainer_meta = _want(meta.get("trainer"), dict, "the trainer state", path, none=True)
    trainer_state = None
    if trainer_meta is not None:
        trainer_state = _join_checked(
            trainer_meta,
            z,
            "trainer",
            lambda where: (
                (flat.shape, flat.dtype)
                if where in ("trainer/best_params", "trainer/divergence/params")
                else (None, flat.dtype)
                if where.startswith("trainer/carried/")
                else None
            ),
        )
        _check_carried(trainer_state, model, path)
    vocab = _vocab_part(meta, model, path)
    history = _want(meta.get("history"), list, "the history", path, none=True)
    if history is not None:
        for i, row in enumerate(history):
            _want(row, dict, f"history row {i}", path)
        history = History(history)
    extra = _want(meta.get("extra"), dict, "the extra settings", path, none=True) or {}
    flat[...] = params
    model.set_rng_state(rng)
    _set_annealed_options(model, trainer_state, path)
    return Checkpoint(
        path=path,
        config=config,
        model=model,
        optimizer=optimizer,
        optimizer_state=opt_state,
        trainer_state=trainer_state,
        vocab=vocab,
        history=history,
        extra=extra,
    )


def _header(z: _Archive, path: Path):
    """``(config, meta)`` of the archive, after its format tag, its members and its version are checked."""
    fmt = z.text("__format__", "format tag")
    if fmt != FORMAT:
        raise CheckpointError(f"{path} is not a multiscale-rnn checkpoint (format tag {fmt!r:.80})")
    missing = [k for k in _REQUIRED if k not in z]
    if missing:
        raise CheckpointError(f"{path} is incomplete: missing {missing}")
    v = z.array("__version__", shape=(), what="format version")
    if v.dtype.kind not in "iu":
        raise CheckpointError(f"{path} has an unreadable format version: {v!r}")
    version = int(v)
    if version > VERSION or version < 1:
        raise CheckpointError(
            f"{path} has format version {version}; this multiscale-rnn reads version {VERSION} "
            "(upgrade the package to read it)"
            if version > VERSION
            else f"{path} has an invalid format version {version}"
        )
    config = _json(z, "config", "model config")
    meta = _json(z, "meta", "metadata")
    if not isinstance(config, dict) or not isinstance(config.get("model"), str):
        raise CheckpointError(f"{path}: the model config must be an object with a 'model' name, got {config!r:.80}")
    _want(meta, dict, "the metadata", path)
    return config, meta


def _model_for(config: dict, model, path: Path):
    """``model`` checked against the saved config, or (None) the model rebuilt from it."""
    from .models import MODELS

    if model is not None:
        check_config(config, model, path)
        return model
    name = config["model"]
    if name not in MODELS:
        raise CheckpointError(
            f"{path} holds a {name!r} model, which this installation does not know (known: {sorted(MODELS)})"
        )
    kwargs = {k: v for k, v in config.items() if k != "model"}
    try:
        return MODELS[name](**kwargs)
    except (TypeError, ValueError, OverflowError, MemoryError) as e:
        raise CheckpointError(f"{path}: cannot rebuild {name} from its config {kwargs!r:.300}: {e}") from None


def _optimizer_part(z: _Archive, meta: dict, flat: np.ndarray, path: Path):
    """``(optimizer, its state)`` saved in the archive, or ``(None, None)``; its arrays must be finite and
    shaped like the parameters ``flat``."""
    from .optim import optimizer_from_state

    opt_meta = _want(meta.get("optimizer"), dict, "the optimiser state", path, none=True)
    if opt_meta is None:
        return None, None
    _want(opt_meta.get("name"), str, "the optimiser name", path)
    _want(opt_meta.get("hyper", {}), dict, "the optimiser hyper-parameters", path)
    _want(opt_meta.get("step", 0), int, "the optimiser step", path)
    _want(opt_meta.get("arrays", {}), dict, "the optimiser arrays", path)
    opt_state = _join_checked(
        opt_meta,
        z,
        "optimizer",
        lambda where: (flat.shape, flat.dtype) if where.startswith("optimizer/arrays/") else None,
    )
    try:
        optimizer = optimizer_from_state(opt_state)
    except (TypeError, ValueError, OverflowError, AttributeError, KeyError) as e:
        raise CheckpointError(f"{path}: cannot restore the optimiser: {e}") from None
    for k, a in optimizer.state.items():
        if a.shape != flat.shape or a.dtype != flat.dtype:
            raise CheckpointError(
                f"{path}: optimiser array {k!r} has shape {a.shape} {a.dtype}, parameters {flat.shape} {flat.dtype}"
            )
        if not np.all(np.isfinite(a)):
            raise CheckpointError(f"{path}: optimiser array {k!r} holds NaN or infinity")
    return optimizer, opt_state


def _vocab_part(meta: dict, model, path: Path):
    """The stored vocabulary as a ``data.Vocab`` (None when none is stored), with the model's size."""
    vocab = meta.get("vocab")
    if vocab is None:
        return None
    try:
        from .data import Vocab
    except ImportError:  # data layer absent: keep the JSON
        return vocab
    try:
        vocab = Vocab.from_json(vocab)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise CheckpointError(f"{path}: the stored vocabulary is unusable: {e}") from None
    if vocab.size != getattr(model, "vocab_size", vocab.size):
        raise CheckpointError(f"{path}: the stored vocabulary has {vocab.size} symbols, the model {model.vocab_size}")
    return vocab
