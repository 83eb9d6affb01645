"""Word classes for the class-based softmax head (``head="class"``, docs/models/heads.md).

Frequency binning (Mikolov et al. 2011): with ids in descending training
frequency, walk the vocabulary and start a new class each time the running
share of the training tokens passes the next multiple of ``1 / num_classes``;
each class then holds about ``1 / num_classes`` of the probability mass (the
most frequent words make classes of their own or of a few words, the rare
words share large classes). The head takes the class sizes, consecutive ids
per class, so its config stays a short JSON list.
"""

import math
from typing import Any, List, Optional

import numpy as np

from .._checks import is_int

__all__ = ["class_sizes"]


def class_sizes(counts: Any, num_classes: Optional[int] = None) -> List[int]:
    """Class sizes (Python ints, summing to ``len(counts)``) for ``head_classes``.

    ``counts``: training occurrences of each id, in descending order (ids sorted
    by frequency: ``Corpus.counts()`` of a corpus made with
    ``order="frequency"`` or ``Corpus.by_frequency()``). ``num_classes``: the
    classes wanted, default ``round(sqrt(V))``; fewer come out when single words
    hold more than one class's share. Ids with zero count join the last class.

    >>> class_sizes([50, 30, 10, 5, 3, 2], num_classes=3)
    [1, 1, 4]
    """
    c = np.asarray(counts)
    if c.ndim != 1 or c.size == 0:
        raise ValueError(f"counts must be a non-empty 1-D array of occurrences per id, got shape {c.shape}")
    if not np.issubdtype(c.dtype, np.integer) and not np.issubdtype(c.dtype, np.floating):
        raise TypeError(f"counts must be numbers, got dtype {c.dtype}")
    c = c.astype(np.float64)
    if not np.isfinite(c).all() or (c < 0).any():
        raise ValueError("counts must be finite and non-negative")
    if c.sum() <= 0:
        raise ValueError("counts are all zero")
    if (np.diff(c) > 0).any():
        at = int(np.flatnonzero(np.diff(c) > 0)[0]) + 1
        raise ValueError(
            f"counts must be in descending order (ids sorted by training frequency), but id {at} "
            f"has {c[at]:g} > {c[at - 1]:g}; use word_corpus(..., order='frequency') or "
            f"Corpus.by_frequency()"
        )
    V = c.size
    if num_classes is None:
        num_classes = max(1, round(math.sqrt(V)))
    if not is_int(num_classes) or not 1 <= num_classes <= V:
        raise ValueError(f"num_classes must be an integer in [1, {V}], got {num_classes!r}")
    share = np.cumsum(c) / c.sum()  # share of the tokens up to and including each id
    sizes: List[int] = []
    start, k = 0, 1
    for w in range(V):
        # close the class after w when its running share passed k / num_classes
        if share[w] >= k / num_classes and len(sizes) < num_classes - 1 and w + 1 < V and c[w + 1] > 0:
            sizes.append(w + 1 - start)
            start = w + 1
            while k < num_classes and share[w] >= k / num_classes:
                k += 1
    sizes.append(V - start)
    return sizes
