"""Models by name: ``MODELS`` (class name -> class, for checkpoints) and ``build_model(name, **kwargs)``
for the command line and presets.

A model family registers itself by being defined: a ``LanguageModel`` subclass with a ``core_name``
is entered in ``MODELS`` under its class name, and ``build_model`` knows it by that name and its
``aliases``. Names are case-insensitive; ``-`` and ``_`` are ignored. ``register_model`` adds names
or custom factories, e.g. ``register_model("tiny-lstm", lambda **kw: LSTM(hidden_sizes=(32,), **kw))``.
"""

from __future__ import annotations

from typing import Callable, Dict

from .._checks import did_you_mean

__all__ = ["MODELS", "build_model", "register_model", "register_family", "model_names"]

MODELS: Dict[str, type] = {}  # class name -> model class
_FACTORIES: Dict[str, Callable] = {}  # normalised name -> class or factory


def _key(name: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"model name must be a str, got {type(name).__name__}")
    return name.strip().lower().replace("-", "").replace("_", "")


def register_model(name: str, factory: Callable) -> None:
    """Make ``build_model(name, ...)`` call ``factory(**kwargs)`` (a model class or a function)."""
    if not callable(factory):
        raise TypeError(f"factory for {name!r} must be callable")
    _FACTORIES[_key(name)] = factory


def register_family(cls: type) -> None:
    """Enter a model class in ``MODELS`` and under its name and ``aliases`` (called when the class
    is defined)."""
    MODELS[cls.__name__] = cls
    for name in (cls.__name__,) + tuple(getattr(cls, "aliases", ())):
        register_model(name, cls)


def model_names():
    """The names ``build_model`` accepts (class names and aliases, normalised), sorted."""
    return sorted(_FACTORIES)


def build_model(name: str, **kwargs):
    """Build a model by name: ``build_model("lstm", vocab_size=84, embed_size=64, hidden_sizes=(256,))``.

    Raises ``ValueError`` naming the known models for an unknown name, and ``TypeError`` naming the
    arguments a model does not take.
    """
    key = _key(name)
    if key not in _FACTORIES:
        hint = did_you_mean(key, model_names(), quote=True)
        raise ValueError(f"unknown model {name!r}{hint}; known models: {', '.join(model_names())}")
    return _FACTORIES[key](**kwargs)
