"""Limits checked before the core allocates anything: sizes that overflow, models that cannot fit
in memory. A model is refused with the size it would need rather than failing inside the
allocator (``std::bad_alloc``) or being ended by the system's out-of-memory killer."""

from __future__ import annotations

import os
from typing import Optional, Sequence

__all__ = ["MAX_SIZE", "memory_bytes", "check_model_size", "format_bytes"]

#: The largest vocabulary, embedding, hidden or head size accepted (products of two such sizes
#: and a gate count still fit comfortably in a 64-bit index).
MAX_SIZE = (1 << 31) - 1


def memory_bytes() -> Optional[int]:
    """Physical memory of this machine in bytes (None when unknown)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def format_bytes(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} PiB"


def check_model_size(
    owner: str,
    vocab_size: int,
    embed_size: int,
    hidden: Sequence[int],
    itemsize: int,
    head_size: int = 0,
    input_size: Optional[int] = None,
) -> int:
    """Refuse sizes above :data:`MAX_SIZE` (``ValueError``: too large) and models whose parameters
    and gradients cannot fit in this machine's memory (``MemoryError`` with the size needed).

    The need is a lower bound, counted for every family alike: the embedding (or input encoder),
    one square recurrent matrix per layer, the layer's input matrix, and the output layer, for
    the parameters and their gradients. Returns that bound in bytes."""
    sizes = {
        "vocab_size": vocab_size,
        "embed_size": embed_size,
        "head_size": head_size or 0,
        "input_size": input_size or 0,
    }
    sizes.update({f"hidden_sizes[{i}]": h for i, h in enumerate(hidden)})
    for name, v in sizes.items():
        if v > MAX_SIZE:
            raise ValueError(f"{owner}: {name} = {v:,} is too large (at most {MAX_SIZE:,})")
    count = (input_size or vocab_size) * embed_size
    below = embed_size
    for h in hidden:
        count += h * h + h * below
        below = h
    count += vocab_size * (head_size or below)
    need = 2 * count * itemsize
    have = memory_bytes()
    if have is not None and need > have:
        raise MemoryError(
            f"{owner}: the parameters and gradients need at least {format_bytes(need)} "
            f"({count:,} parameters), more than this machine's {format_bytes(have)} of memory"
        )
    return need
