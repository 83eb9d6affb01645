"""The command line's pen-stroke runs (``--data kanjivg`` or ``iam-ondb``): a model with the mixture
density head reading (dx, dy, pen bit) rows, scored in nats per sequence, sampled to a drawing."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import numpy as np

from .. import presets as _presets
from ..data.corpus import SPLITS
from ..storage import check_writable

__all__ = [
    "is_strokes",
    "describe",
    "report_line",
    "stroke_extra",
    "evaluate_checkpoint",
    "sample_checkpoint",
    "PLOT_KINDS",
    "plot_checkpoint",
]

#: The figures ``plot`` draws of a pen-stroke HM-LSTM, on a drawing of the corpus it was trained on.
PLOT_KINDS = {
    "figure5": "the drawing cut into segments by z2 beside the same drawing cut by the pen lifts (Figure 5)",
    "computation": "each pen-down move coloured by the number of layers that updated",
}


def is_strokes(corpus) -> bool:
    """True for a corpus of pen strokes (``data.strokes.StrokeCorpus``): its splits are separate sequences."""
    from ..training.sequences import is_sequences

    return is_sequences(corpus)


def describe(corpus) -> str:
    """The first line's words on the data: sequences and rows of the training split."""
    rows = sum(len(s) for s in corpus.train)
    return f"{len(corpus.train):,} training sequences ({rows:,} pen offsets)"


def report_line(split: str, r: Dict[str, Any]) -> str:
    """One split's figures: nats per sequence (the log-likelihood's negative), and per step."""
    return f"{split} {r['nats_per_sequence']:.2f} nats per sequence ({r['loss']:.4f} per step)"


def stroke_extra(corpus) -> Dict[str, Any]:
    """What the checkpoint keeps to draw the model's samples: the normalisation of the offsets."""
    return {"corpus": corpus.name, "mean": [float(v) for v in corpus.mean], "std": [float(v) for v in corpus.std]}


def _stored(ck) -> Dict[str, Any]:
    s = dict(_presets.DEFAULTS)
    s.update(ck.extra.get("settings") or {})
    return s


def _stored_corpus(args, ck):
    """The stroke corpus ``ck``'s model was trained on (its stored settings), or ``--data`` / ``--data-path``."""
    from .build import load_corpus

    s = _stored(ck)
    if getattr(args, "data", None) is not None:
        s["data"], s["data_path"] = args.data, args.data_path
    corpus = load_corpus(s)
    if not is_strokes(corpus):
        raise ValueError(f"{args.checkpoint} holds a pen-stroke model; --data {s['data']} is not a stroke corpus")
    return corpus


def plot_checkpoint(args, ck, out: Path) -> None:
    """``plot --kind figure5|computation``: drawing ``--index`` of ``--split`` of the checkpoint's corpus."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..plot.figures import save
    from ..plot.strokes import computation, figure5

    if ck.model.vocab_size is not None or "boundaries" not in type(ck.model).figure_kinds:  # an HM-LSTM of strokes
        raise ValueError(
            f"--kind {args.kind} draws a pen-stroke HM-LSTM (head='mdn'); {args.checkpoint} holds a "
            f"{type(ck.model).__name__}{'' if ck.model.vocab_size is None else ' of text'}"
        )
    corpus = _stored_corpus(args, ck)
    n = len(corpus.split(args.split))
    if not 0 <= args.index < n:
        raise ValueError(f"--index {args.index}: the {args.split} split of {corpus.name} has drawings 0 .. {n - 1}")
    if args.kind == "figure5":
        fig, axes = plt.subplots(1, 2, figsize=(7, 3.5))
        figure5(ck.model, corpus, index=args.index, split=args.split, layer=2, axes=axes)
    else:
        fig, ax = plt.subplots(figsize=(3.5, 3.5))
        computation(ck.model, corpus, index=args.index, split=args.split, ax=ax)
    save(fig, out)
    plt.close(fig)
    print(f"{out}: {args.kind} of drawing {args.index} of the {args.split} split of {corpus.name}")


def evaluate_checkpoint(args, ck) -> Dict[str, Any]:
    """``evaluate`` of a stroke model: the corpus it was trained on (or ``--data``), the split's figures."""
    from ..training import evaluate

    s = _stored(ck)
    corpus = _stored_corpus(args, ck)
    batch = args.batch_size if args.batch_size is not None else s["eval_batch_size"]
    names = SPLITS if args.split == "all" else (args.split,)
    r = evaluate(ck.model, [seq for name in names for seq in corpus.split(name) or []], batch_size=batch)
    return {"split": args.split, "data": corpus.name, **r}


def sample_checkpoint(args, ck) -> List[np.ndarray]:
    """``sample`` of a stroke model: ``--num-samples`` drawings of ``--length`` rows at ``--temperature`` and
    ``--bias``, drawn side by side into ``--out`` (PNG or SVG; default beside the checkpoint)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..data.strokes import drawing_points
    from ..plot import figures
    from ..plot.strokes import strokes
    from ..training.sequences import sample_strokes

    if args.prompt:
        raise ValueError("--prompt is for text models; a pen-stroke model starts every drawing from the pen lifted")
    norm = ck.extra.get("strokes")
    if not isinstance(norm, dict):
        raise ValueError(
            f"{args.checkpoint} does not record the normalisation of its offsets (it was saved from Python): "
            "train it with multiscale-rnn train --data kanjivg, or draw its samples with msr.plot.strokes"
        )
    out = Path(args.out) if args.out else Path(args.checkpoint).with_name(f"{Path(args.checkpoint).stem}-samples.png")
    figures.output_format(out)
    check_writable(out, "--out drawing")
    drawn = sample_strokes(
        ck.model,
        args.length,
        temperature=args.temperature,
        bias=args.bias,
        num_samples=args.num_samples,
        seed=args.seed,
    )
    n = len(drawn)
    fig, axes = plt.subplots(1, n, figsize=(2.2 * n, 2.4), squeeze=False)
    for i, rows in enumerate(drawn):
        xy, pen = drawing_points(rows, norm["mean"], norm["std"])
        strokes(xy, pen, ax=axes[0, i], title=f"sample {i + 1}")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    print(f"{n} drawing(s) of {args.length} pen offsets (temperature {args.temperature:g}, bias {args.bias:g}): {out}")
    return drawn
