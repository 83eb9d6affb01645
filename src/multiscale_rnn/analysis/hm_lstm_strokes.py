"""What an HM-LSTM with the mixture density head does along a drawing: its boundaries z^l scored against
the drawings' own boundaries (pen lifts, and KanjiVG's component ends), and the segments of the HM-LSTM
paper's Figure 5 (a sequence cut by z^2 beside the same sequence cut by the pen lifts).

Steps and points: the model reads the start vector (0, 0, 1) and then the rows (dx, dy, p) of a drawing
of L = n + 1 points; step t reads the offset that arrives at point t (step 0: the start, point 0), so
z^l_t and every per-step record belong to point t, and a reference boundary at point t (the pen lifts
after it, or its component ends there) is row t - 1's flag.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

from ..models.hm_lstm import boundary_scores
from ..training.sequences import START

__all__ = ["stroke_inputs", "point_references", "stroke_trace", "score_strokes"]


def stroke_inputs(rows) -> np.ndarray:
    """The (n + 1, 3) inputs of a drawing of n rows: the start vector, then every row."""
    rows = np.asarray(rows, dtype=np.float64)
    return np.vstack([np.asarray(START, dtype=np.float64)[None, :], rows])


def point_references(flags) -> np.ndarray:
    """A per-row boundary flag (n,) as a per-point one (n + 1,): point 0 ends nothing."""
    return np.concatenate([[False], np.asarray(flags, dtype=bool)])


def stroke_trace(model, rows, reference=None, tolerance: int = 0):
    """The model's :class:`~multiscale_rnn.models.hm_lstm.HMTrace` of one drawing read from zeros (one
    step per point), scored against ``reference`` (a per-row flag, e.g. ``corpus.boundaries[split][i]
    ["stroke"]``) when given."""
    ref = None if reference is None else point_references(reference)
    return model.trace(stroke_inputs(rows).astype(model.dtype), reference_boundaries=ref, tolerance=tolerance)


def score_strokes(
    model, corpus, split: str = "valid", max_sequences: Optional[int] = 200, tolerance: int = 1
) -> Dict[str, Any]:
    """z^l of every detector layer against the drawings' boundaries over the first ``max_sequences``
    drawings of ``split`` (all: None), pooled: per reference kind ("stroke" and, where the corpus has it,
    "component") and layer, precision, recall and F1 (``tolerance`` points of slack), and the rate of
    z^l = 1 per point beside the reference's rate, and the segments z^l cuts each drawing into (Figure 5's).
    Returns ``{"layers": [...], "rates": [...], "segments": [[per drawing] of z^1, ...],
    "reference_rates": {kind: rate}, kind: [scores of z^1, z^2, ...]}``."""
    seqs = corpus.split(split)[: max_sequences if max_sequences is not None else None]
    bounds = corpus.boundaries[split][: len(seqs)]
    if not seqs:
        raise ValueError(f"the {split} split of {corpus.name} has no drawings")
    zs: List[np.ndarray] = []
    refs: Dict[str, List[np.ndarray]] = {k: [] for k in bounds[0]}
    for rows, b in zip(seqs, bounds):
        tr = stroke_trace(model, rows)
        zs.append(tr.z > 0.5)  # (L, n + 1)
        for k in refs:
            refs[k].append(point_references(b[k]))
    z = np.concatenate(zs, axis=1)
    detectors = [l for l in range(z.shape[0]) if l + 1 < z.shape[0] or model.config.get("top_boundary")]
    out: Dict[str, Any] = {
        "layers": [f"z{l + 1}" for l in detectors],
        "rates": [float(z[l].mean()) for l in detectors],
        "segments": [[int(zd[l, :-1].sum()) + 1 for zd in zs] for l in detectors],  # segments_from_ends' count
        "sequences": len(seqs),
        "points": int(z.shape[1]),
    }
    out["reference_rates"] = {k: float(np.concatenate(v).mean()) for k, v in refs.items()}
    for k, v in refs.items():
        r = np.concatenate(v)
        out[k] = [boundary_scores(z[l], r, tolerance) for l in detectors]
    return out
