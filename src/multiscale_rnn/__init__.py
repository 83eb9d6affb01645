"""multiscale-rnn: multiscale recurrent neural networks with a fast C++ core."""

from typing import TYPE_CHECKING, Optional

from . import (
    analysis,
    checkpoint,
    data,
    export,
    init,
    models,
    optim,
    plot,
    presets,
    reproduce,
    schedules,
    testing,
    training,
)
from ._native import ISA
from ._native import core as _core
from .models import *  # noqa: F401,F403 - every model family, its classes and helpers (models.__all__)

if TYPE_CHECKING:  # the same names for type checkers, which do not run the loop of models/__init__.py
    from .models.clockwork import *  # noqa: F403
    from .models.fs_rnn import *  # noqa: F403
    from .models.hm_lstm import *  # noqa: F403
    from .models.hornn import *  # noqa: F403
    from .models.rnn import *  # noqa: F403
    from .models.vcrnn import *  # noqa: F403
from .training import EarlyStopping, History, Trainer, best_of, evaluate, sample

__version__ = "0.1.0"


def max_threads() -> int:
    """The most threads ``set_num_threads`` accepts: 4 per logical CPU, at least 8 (more only slow
    the core down, and the OpenMP runtime ends the process when it cannot start them)."""
    import os

    return max(8, 4 * (os.cpu_count() or 1))


def set_num_threads(n: int) -> None:
    """Threads for the core's matrix products and loops (Eigen + OpenMP): an integer from 1 to
    :func:`max_threads`, else ``ValueError`` (``TypeError`` for a non-integer)."""
    from ._checks import is_int

    if not is_int(n):
        raise TypeError(f"threads must be an integer, got {n!r}")
    if not 1 <= n <= max_threads():
        raise ValueError(f"threads must be between 1 and {max_threads()} (4 per CPU), got {n}")
    _core.set_num_threads(int(n))


def get_num_threads() -> int:
    return int(_core.get_num_threads())


def set_reference_kernels(on: bool) -> None:
    """Run the core's plain reference kernels (``True``: Eigen products one step after another, no
    threads over units) instead of its optimised fast paths (``False``, the default). Both compute the
    same function and agree to rounding; the switch is process-wide and exists to check the fast paths
    (``multiscale_rnn.testing.kernel_switches`` sets it for a ``with`` block)."""
    if not isinstance(on, bool):
        raise TypeError(f"on must be a bool, got {on!r}")
    _core.set_reference_kernels(on)


def reference_kernels() -> bool:
    """Whether the core runs its plain reference kernels (:func:`set_reference_kernels`)."""
    return bool(_core.reference_kernels())


def set_input_tables(on: bool) -> None:
    """Let evaluation forwards over token ids read a per-token table of the first layer's input term
    (``True``, the default, when the vocabulary is small against the chunk) or compute it per step
    (``False``, the plain path). Both agree to rounding; the switch is process-wide and exists to check
    the tables (``multiscale_rnn.testing.kernel_switches`` sets it for a ``with`` block)."""
    if not isinstance(on, bool):
        raise TypeError(f"on must be a bool, got {on!r}")
    _core.set_input_tables(on)


def input_tables() -> bool:
    """Whether evaluation forwards may use per-token input tables (:func:`set_input_tables`)."""
    return bool(_core.input_tables())


def amx_bf16_unavailable_reason() -> Optional[str]:
    """None when this process can run the AMX bfloat16 kernel, else a sentence saying why not (the
    missing CPUID flag, tile state refused by the OS, or a core module built without the kernel)."""
    return _core.amx_bf16_unavailable_reason()


def avx512_bf16_unavailable_reason() -> Optional[str]:
    """None when this process can run the AVX512-BF16 bfloat16 kernel (AMD Zen 4 and later, Intel
    Cooper Lake), else a sentence saying why not (the missing CPUID flag, AVX-512 state not enabled
    by the OS, or a core module built without the kernel)."""
    return _core.avx512_bf16_unavailable_reason()


def bf16_kernel() -> Optional[str]:
    """The kernel ``inference_precision = "bfloat16"`` runs in this process: ``"amx"`` where AMX
    runs, else ``"avx512-bf16"`` where AVX512-BF16 runs, else None (then "bfloat16" is refused;
    :func:`bf16_unavailable_reason` says why). ``"avx512-bf16-model"`` while tests select the
    portable model of the AVX512-BF16 kernel (``testing.kernel_switches(bf16_model_kernel=True)``)."""
    return _core.bf16_kernel()


def bf16_unavailable_reason() -> Optional[str]:
    """None when ``inference_precision = "bfloat16"`` can run here (:func:`bf16_kernel`), else a
    sentence giving the reasons of both kernels, AMX and AVX512-BF16."""
    return _core.bf16_unavailable_reason()


__all__ = list(models.__all__) + [
    "models",
    "Trainer",
    "EarlyStopping",
    "History",
    "best_of",
    "evaluate",
    "sample",
    "data",
    "init",
    "optim",
    "schedules",
    "checkpoint",
    "plot",
    "analysis",
    "testing",
    "training",
    "reproduce",
    "presets",
    "export",
    "set_num_threads",
    "get_num_threads",
    "max_threads",
    "amx_bf16_unavailable_reason",
    "avx512_bf16_unavailable_reason",
    "bf16_kernel",
    "bf16_unavailable_reason",
    "set_reference_kernels",
    "reference_kernels",
    "set_input_tables",
    "input_tables",
    "ISA",
    "__version__",
]

del TYPE_CHECKING, Optional  # names of typing, not of the package
