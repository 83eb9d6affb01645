"""Load the C++ core built for the best instruction set this CPU supports.

The build produces ``_core`` (the compiler's default target) and, on x86-64, ``_core_avx2``
(x86-64-v3) and ``_core_avx512`` (x86-64-v4). ``MULTISCALE_RNN_ISA=baseline|avx2|avx512`` forces
one (for testing and benchmarks).
"""

from __future__ import annotations

import importlib
import os
import platform

_FLAGS_NEEDED = {
    "avx512": {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx2", "fma", "bmi2"},
    "avx2": {"avx2", "fma", "bmi1", "bmi2", "f16c", "movbe"},
}
_MODULES = {"avx512": "_core_avx512", "avx2": "_core_avx2", "baseline": "_core"}


def _cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _choose() -> list:
    forced = os.environ.get("MULTISCALE_RNN_ISA")
    if forced:
        if forced not in _MODULES:
            raise ValueError(f"MULTISCALE_RNN_ISA={forced!r}: expected one of {sorted(_MODULES)}")
        return [forced]
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return ["baseline"]
    flags = _cpu_flags()
    return [isa for isa in ("avx512", "avx2") if _FLAGS_NEEDED[isa] <= flags] + ["baseline"]


def _load():
    errors = []
    for isa in _choose():
        try:
            return isa, importlib.import_module(f"multiscale_rnn.{_MODULES[isa]}")
        except ImportError as e:  # variant not built on this platform
            errors.append(f"{_MODULES[isa]}: {e}")
    raise ImportError("multiscale_rnn's C++ core is not built or not importable:\n  " + "\n  ".join(errors))


ISA, core = _load()
