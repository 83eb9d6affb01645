"""Checks of arguments, settings and stored values, with one meaning of "an integer" and "a number".

An integer is a Python ``int`` or a NumPy integer, never a ``bool`` (``True`` is not 1 here, and a
NumPy bool is not an integer either). A number is an integer or a Python or NumPy float, and finite.
Nothing is converted before it is checked: ``4.0`` is not an integer and ``"0.1"`` is not a number.

The raising helpers return the value as a plain ``int`` or ``float``. Tables of rules (``{key: (check,
words)}``, as the command line's settings and the trainer's saved state have) are read by
:func:`first_bad_entry`, which leaves the wording of the error to its caller.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Collection, Literal, Mapping, Optional, Tuple, overload

import numpy as np

__all__ = [
    "is_int",
    "is_number",
    "positive_int",
    "non_negative_int",
    "int_at_least",
    "positive_number",
    "non_negative_number",
    "Rule",
    "first_bad_entry",
    "closest",
    "did_you_mean",
]

#: One entry of a table of rules: (check of the value, what the value must be, in words).
Rule = Tuple[Callable[[Any], bool], str]


def is_int(v: Any) -> bool:
    """True for a Python or NumPy integer; False for a bool (Python's or NumPy's) and anything else."""
    return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))


def is_number(v: Any) -> bool:
    """True for a finite integer or float (Python's or NumPy's); False for bools, NaN, infinities and
    anything else (strings are not converted)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
        return False
    return isinstance(v, numbers.Integral) or math.isfinite(v)


@overload
def positive_int(value: Any, name: str, allow_none: Literal[False] = False) -> int: ...
@overload
def positive_int(value: Any, name: str, allow_none: bool) -> Optional[int]: ...


def positive_int(value: Any, name: str, allow_none: bool = False) -> Optional[int]:
    """``value`` as an ``int`` when it is an integer >= 1 (or None, with ``allow_none``); else
    ``ValueError`` "NAME must be a positive integer, got VALUE"."""
    if value is None and allow_none:
        return None
    if not is_int(value) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def non_negative_int(value: Any, name: str) -> int:
    """``value`` as an ``int`` when it is an integer >= 0; else ``ValueError`` "NAME must be a
    non-negative integer, got VALUE"."""
    if not is_int(value) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def int_at_least(value: Any, name: str, minimum: int) -> int:
    """``value`` as an ``int`` when it is an integer >= ``minimum``; ``TypeError`` "NAME must be an
    integer, got TYPE VALUE" for anything but an integer, ``ValueError`` "NAME must be at least
    MINIMUM, got VALUE" for an integer below it."""
    if not is_int(value):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


@overload
def positive_number(value: Any, name: str, allow_none: Literal[False] = False) -> float: ...
@overload
def positive_number(value: Any, name: str, allow_none: bool) -> Optional[float]: ...


def positive_number(value: Any, name: str, allow_none: bool = False) -> Optional[float]:
    """``value`` as a ``float`` when it is a finite number > 0 (or None, with ``allow_none``); else
    ``ValueError`` "NAME must be a finite number > 0, got VALUE" ("... > 0 or None" with ``allow_none``)."""
    if value is None and allow_none:
        return None
    if not (is_number(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0{' or None' if allow_none else ''}, got {value!r}")
    return float(value)


def non_negative_number(value: Any, name: str) -> float:
    """``value`` as a ``float`` when it is a finite number >= 0; else ``ValueError`` "NAME must be a
    finite number >= 0, got VALUE"."""
    if not (is_number(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def first_bad_entry(
    values: Mapping[str, Any], rules: Mapping[str, Rule], nullable: Collection[str] = ()
) -> Optional[str]:
    """The first key of ``rules`` (in their order) whose value in ``values`` breaks its rule, or None
    when every value keeps its rule. A key missing from ``values`` reads as None, which the keys in
    ``nullable`` may be (a rule's check is not asked about it)."""
    for key, (ok, _words) in rules.items():
        v = values.get(key)
        if v is None and key in nullable:
            continue
        if not ok(v):
            return key
    return None


def closest(word: str, choices: Collection[str]) -> Optional[str]:
    """The choice nearest to ``word`` (``difflib``'s closest match), or None when none is close."""
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1)
    return close[0] if close else None


def did_you_mean(word: str, choices: Collection[str], quote: bool = False) -> str:
    """`` (did you mean X?)`` for the choice nearest to a mistyped ``word`` (``X`` in quotes with ``quote``), or
    an empty string: the hint every "unknown name" error adds."""
    near = closest(word, choices)
    return "" if near is None else f" (did you mean {near!r}?)" if quote else f" (did you mean {near}?)"
