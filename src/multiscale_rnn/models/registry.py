"""Model construction by name, for the command line and presets: ``build_model(name, **kwargs)``.

Names are case-insensitive; ``-`` and ``_`` are ignored. Every class in ``MODELS`` is known by its
class name (``lstm``, ``gru``, ``elmanrnn``); ``register_model`` adds names or custom factories
(the baselines add ``rnn``), e.g. ``register_model("hm-lstm", HMLSTM)``.
"""
from __future__ import annotations

from typing import Callable, Dict

__all__ = ["build_model", "register_model", "model_names"]

_FACTORIES: Dict[str, Callable] = {}


def _key(name: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"model name must be a str, got {type(name).__name__}")
    return name.strip().lower().replace("-", "").replace("_", "")


def register_model(name: str, factory: Callable) -> None:
    """Make ``build_model(name, ...)`` call ``factory(**kwargs)`` (a model class or a function)."""
    if not callable(factory):
        raise TypeError(f"factory for {name!r} must be callable")
    _FACTORIES[_key(name)] = factory


def _table() -> Dict[str, Callable]:
    from . import MODELS
    table = {_key(n): cls for n, cls in MODELS.items()}
    table.update(_FACTORIES)
    return table


def model_names():
    """The names ``build_model`` accepts (registered names and class names), sorted."""
    return sorted(_table())


def build_model(name: str, **kwargs):
    """Build a model by name: ``build_model("lstm", vocab_size=84, embed_size=64, hidden_sizes=(256,))``.

    Raises ``ValueError`` naming the known models for an unknown name, and ``TypeError`` naming the
    arguments a model does not take.
    """
    table = _table()
    key = _key(name)
    if key not in table:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(model_names())}")
    return table[key](**kwargs)


def _register_baselines() -> None:
    from .rnn import GRU, LSTM, ElmanRNN
    register_model("lstm", LSTM)
    register_model("gru", GRU)
    register_model("rnn", ElmanRNN)
    register_model("rnn_tanh", ElmanRNN)
    register_model("elman", ElmanRNN)


_register_baselines()
