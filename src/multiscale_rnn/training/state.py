"""What a trainer's saved state holds (``Trainer.state_dict``, the ``trainer`` part of a checkpoint),
and its check before a resume reads it."""

from __future__ import annotations

import zlib
from typing import Dict

import numpy as np

from .._checks import Rule, first_bad_entry, is_int, is_number

__all__ = ["STATE_RULES", "OPTIONAL_STATE", "check_state", "ids_fingerprint", "saved_option_values"]

_COUNT: Rule = (lambda v: is_int(v) and v >= 0, "an integer >= 0")
_NUMBER: Rule = (is_number, "a finite number")

#: What each entry of ``Trainer.state_dict()`` must be: (check, words).
STATE_RULES: Dict[str, Rule] = {
    "epoch": _COUNT,
    "chunk": _COUNT,
    "step": _COUNT,
    "tokens": _COUNT,
    "sum_loss": _NUMBER,
    "seconds": _NUMBER,
    "sum_aux": (lambda v: isinstance(v, dict) and all(is_number(x) for x in v.values()), "an object of finite numbers"),
    "carried": (
        lambda v: isinstance(v, dict) and all(isinstance(x, np.ndarray) for x in v.values()),
        "an object of arrays",
    ),
    "best_loss": _NUMBER,
    "best_epoch": (lambda v: is_int(v) and v >= 1, "an integer >= 1"),
    "best_params": (lambda v: isinstance(v, np.ndarray), "an array"),
    "best_options": (
        lambda v: isinstance(v, dict) and all(is_number(x) for x in v.values()),
        "an object of finite numbers",
    ),
    "lr_schedule": (lambda v: isinstance(v, dict), "an object"),
    "model_options": (lambda v: isinstance(v, dict), "an object"),
    "data": (
        lambda v: isinstance(v, dict) and is_int(v.get("tokens")) and is_int(v.get("crc32")),
        "an object with integer 'tokens' and 'crc32'",
    ),
    "early_stopping": (
        lambda v: (
            isinstance(v, dict)
            and (v.get("best") is None or is_number(v["best"]))
            and all(v.get(k) is None or (is_int(v[k]) and v[k] >= 1) for k in ("best_epoch", "stopped_epoch"))
            and is_int(v.get("bad"))
            and v["bad"] >= 0
        ),
        "an object with 'best' (a finite number or null), 'best_epoch' and 'stopped_epoch' (integers >= 1 or "
        "null) and 'bad' (an integer >= 0)",
    ),
    "divergence": (
        lambda v: (
            isinstance(v, dict)
            and is_number(v.get("loss"))
            and is_int(v.get("epoch"))
            and isinstance(v.get("params"), np.ndarray)
            and isinstance(v.get("options", {}), dict)
        ),
        "an object with 'loss' (a finite number), 'epoch' (an integer), 'params' (an array) and 'options'",
    ),
    "rank_rngs": (
        lambda v: isinstance(v, np.ndarray) and v.ndim == 2 and v.shape[0] >= 1 and v.dtype == np.uint64,
        "a (ranks, words) uint64 array",
    ),
}

#: The entries a saved state may lack or hold as None (older runs, runs without validation, one process).
OPTIONAL_STATE = (
    "seconds",
    "sum_aux",
    "carried",
    "best_loss",
    "best_epoch",
    "best_params",
    "best_options",
    "lr_schedule",
    "model_options",
    "data",
    "early_stopping",
    "divergence",
    "rank_rngs",
)


def check_state(state) -> None:
    """``ValueError`` naming the first entry of a saved trainer state that is missing or of the wrong type."""
    if not isinstance(state, dict):
        raise ValueError(f"the trainer state must be an object, got {type(state).__name__}")
    key = first_bad_entry(state, STATE_RULES, nullable=OPTIONAL_STATE)
    if key is None:
        return
    if key not in state:
        raise ValueError(f"the trainer state lacks {key!r}")
    raise ValueError(f"trainer state {key!r} must be {STATE_RULES[key][1]}, got {state[key]!r:.80}")


def saved_option_values(state: dict) -> Dict[str, float]:
    """The values the trainer's annealed model options had when ``state`` was saved (its ``model_options``
    entries that hold a value)."""
    saved = state.get("model_options") or {}
    values = {name: entry.get("value") if isinstance(entry, dict) else None for name, entry in saved.items()}
    return {name: float(v) for name, v in values.items() if v is not None}


def ids_fingerprint(ids: np.ndarray) -> dict:
    """The token count and CRC-32 of ``ids`` (as int32): the ``data`` entry of a saved state, which a
    resume and the ranks of a distributed run compare."""
    a = np.ascontiguousarray(ids, dtype=np.int32)
    return {"tokens": int(a.size), "crc32": int(zlib.crc32(a.tobytes()))}
