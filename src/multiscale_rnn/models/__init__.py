"""The model families, one module each. Every module of this package is imported here; each family
registers itself (``registry.MODELS``, its aliases) and lists its public names in its ``__all__``,
which this package re-exports, so adding a family adds no line here at run time. Type checkers do not
run the loop below: they read the same names from the star imports under ``TYPE_CHECKING`` here and in
``multiscale_rnn/__init__.py``, one line per module (``tests/test_types.py`` checks that they list
every module)."""

import importlib as _importlib
import pkgutil as _pkgutil
from typing import TYPE_CHECKING

from .base import LanguageModel, Option, Role, as_tokens
from .registry import MODELS, build_model, model_names, register_model

__all__ = ["LanguageModel", "Option", "Role", "MODELS", "as_tokens", "build_model", "register_model", "model_names"]

if TYPE_CHECKING:
    from .clockwork import *  # noqa: F403
    from .fs_rnn import *  # noqa: F403
    from .hm_lstm import *  # noqa: F403
    from .hornn import *  # noqa: F403
    from .rnn import *  # noqa: F403
    from .vcrnn import *  # noqa: F403


for _info in sorted(_pkgutil.iter_modules(__path__), key=lambda m: m.name):  # noqa: F405
    if _info.name in ("base", "registry") or _info.name.startswith("_"):
        continue
    _module = _importlib.import_module(f".{_info.name}", __name__)
    for _name in getattr(_module, "__all__", ()):
        globals()[_name] = getattr(_module, _name)
        __all__.append(_name)
del _info, _module, _name
