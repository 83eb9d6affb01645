"""Batching for truncated back-propagation through time.

A split of N tokens becomes B contiguous streams (``batchify``): stream b holds
tokens ``[b*n, (b+1)*n)`` with ``n = N // B``; the ``N % B`` tokens at the end
are dropped. ``chunks`` then walks the streams T steps at a time, yielding
inputs and the targets one step ahead, so the recurrent state of chunk k is the
correct starting state of chunk k+1.
"""

from typing import Any, Iterator, Optional, Tuple

import numpy as np

from .._checks import int_at_least

__all__ = ["batchify", "chunks", "num_chunks", "check_length"]


def text_given_for_ids(ids: Any, what: str, use: str = "it whole: trainer.fit(corpus)") -> Optional[str]:
    """The message for text given where token ids belong (a ``str`` or ``bytes``, or an array of
    strings), saying how to encode it (``use``: how to pass the corpus built from it); None for
    anything else."""
    if isinstance(ids, (str, bytes, bytearray)):
        unit = "characters" if isinstance(ids, str) else "bytes"
        got = f"a {type(ids).__name__} of {len(ids):,} {unit}"
    elif isinstance(ids, (list, tuple, np.ndarray)) and np.asarray(ids).dtype.kind in "US":
        got = f"strings (dtype {np.asarray(ids).dtype})"
    else:
        return None
    return (
        f"{what} must be token ids (a 1-D integer array), got {got}. Encode text first: "
        "ids = vocab.encode(text) with the model's vocabulary (e.g. corpus.vocab), or build a corpus with "
        "msr.data.char_corpus(text) (msr.data.word_corpus for words, msr.data.load(path='my.txt') for a file) "
        f"and pass {use}"
    )


def _ids_1d(ids: Any, what: str) -> np.ndarray:
    if ids is None:
        raise ValueError(f"the {what} split is missing (None)")
    hint = text_given_for_ids(ids, what + " ids")
    if hint is not None:
        raise TypeError(hint)
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise ValueError(f"{what} ids must be 1-D, got shape {arr.shape}")
    if arr.size and (arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"{what} ids must be integers, got dtype {arr.dtype}")
    return arr


def _streams_2d(streams: Any) -> np.ndarray:
    arr = np.asarray(streams)
    if arr.ndim != 2:
        raise ValueError(f"streams must be a 2-D (B, N) array from batchify, got shape {arr.shape}")
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"streams must hold integer ids, got dtype {arr.dtype}")
    if arr.shape[1] < 2:
        raise ValueError(
            f"streams of length {arr.shape[1]} hold no (input, target) pair: each stream needs at least 2 tokens"
        )
    return arr


def check_length(ids: Any, batch_size: int, bptt: int, what: str = "train") -> None:
    """Raise :class:`ValueError` unless ``ids`` fills at least one full chunk:
    ``batch_size`` streams of ``bptt + 1`` tokens (``bptt`` inputs and the
    target after the last one), i.e. ``batch_size * (bptt + 1)`` tokens."""
    arr = _ids_1d(ids, what)
    batch_size = int_at_least(batch_size, "batch_size", 1)
    bptt = int_at_least(bptt, "bptt", 1)
    need = batch_size * (bptt + 1)
    if len(arr) < need:
        raise ValueError(
            f"the {what} split is too short for batch_size={batch_size} and bptt={bptt}: it needs at least "
            f"{need:,} tokens ({batch_size} streams of {bptt + 1}) but has {len(arr):,}; "
            f"use a smaller batch_size or bptt"
        )


def batchify(ids: Any, batch_size: int) -> np.ndarray:
    """Cut a 1-D id sequence into ``batch_size`` contiguous streams: a
    C-contiguous ``(B, N // B)`` ``int32`` array; the last ``N % B`` tokens are
    dropped. Each stream needs at least 2 tokens (an input and its target)."""
    arr = _ids_1d(ids, "input")
    batch_size = int_at_least(batch_size, "batch_size", 1)
    n = len(arr) // batch_size
    if n < 2:
        raise ValueError(
            f"{len(arr):,} tokens are too few for batch_size={batch_size}: need at least "
            f"{2 * batch_size:,} (2 per stream)"
        )
    return np.ascontiguousarray(arr[: n * batch_size].reshape(batch_size, n), dtype=np.int32)


def num_chunks(streams: Any, bptt: int) -> int:
    """How many chunks :func:`chunks` yields: ``ceil((N - 1) / bptt)``."""
    arr = _streams_2d(streams)
    bptt = int_at_least(bptt, "bptt", 1)
    return -(-(arr.shape[1] - 1) // bptt)


def chunks(streams: Any, bptt: int) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
    """Iterate over ``(inputs, targets)`` pairs of C-contiguous ``(B, T)``
    ``int32`` arrays, ``targets[:, t] == streams[:, i + t + 1]`` for inputs
    ``streams[:, i + t]``. ``T == bptt`` except for the last chunk, which may be
    shorter. Every token but the first of each stream is a target exactly once.
    """
    arr = _streams_2d(streams)
    bptt = int_at_least(bptt, "bptt", 1)
    return _chunk_iter(arr, bptt)


def _chunk_iter(arr: np.ndarray, bptt: int) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
    n = arr.shape[1]
    for i in range(0, n - 1, bptt):
        t = min(bptt, n - 1 - i)
        yield (
            np.ascontiguousarray(arr[:, i : i + t], dtype=np.int32),
            np.ascontiguousarray(arr[:, i + 1 : i + 1 + t], dtype=np.int32),
        )
