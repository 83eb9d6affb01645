"""Penalty weight of the VCRNN / VCGRU against the computation it saves (issue: VCRNN defaults that save
computation as the paper does). For each penalty weight w, a model is trained on Penn Treebank
characters with the paper's schedule (symmetric L1 penalty towards m_bar, the mask's sharpness lambda
from 0.1 up by 0.1 per epoch to 1), and the validation text gives the mean m_t, its distance to m_bar,
RNN-d and BPC after every epoch. The Trainer's divergence guard is on (validation BPC 0.1 above its
best: it says so and keeps the best checkpoint); a diverged run ends there, with a row marked diverged
that holds the best epoch's figures, and is not trained again.

    python bench/vc_calibrate.py --data ../shared/data/ptb --models vcrnn,vcgru --weights 0.05,0.1,0.2 \\
        --hidden 256 --train-chars 1000000 --epochs 4 --seeds 0 --out runs/vc_calibrate

Resumable: each (model, w, seed) trains one epoch a call from its checkpoint in --out, and its epochs
are lines of --out/results.jsonl. Not a benchmark: it prints a table. A model's name holds neither --lr nor
--train-chars nor --valid-chars, so its checkpoint holds them: a call with other values that would train it
stops with an error naming them and the checkpoint, and records nothing; so does a call with other values
for a model whose run has ended. A larger --epochs goes on with the models (the schedules count epochs
from the start); a smaller one than a model's checkpoint holds is refused unless a row ended its run there.

--profile reads the trained models back instead (the paper's Figure 3 over seeds): the mean m_t on the
first --profile-chars characters of the test text where the input is a space, where it is the first
character of a word (the input after a space) and elsewhere, and the test BPC there, per seed and as
median [min, max]; with
--figure F, the computation profile of each model's first seed on the start of the test text.

    python bench/vc_calibrate.py --data ../shared/data/ptb --models vcrnn,vcgru --weights 1 --hidden 512 \
        --seeds 0,1,2 --out runs/vc-calibrate --profile --figure docs/models/figures/vcrnn_ptb_fig3.png

--models elman or gru trains the constant unit of --hidden units (no penalty weight) the same way and
tests it at its last epoch: the baselines of a VC model's measured RNN-d.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import multiscale_rnn as msr
from multiscale_rnn.models.vcrnn import SCHEDULER_INITS
from multiscale_rnn.reproduce._common import Results, unit_checkpoint
from multiscale_rnn.reproduce.vcrnn import (  # noqa: F401 - the script's names
    finished,
    mean_m,
    train_vc,
    vc_label,
    vc_settings,
)


def label_of(args, model_name: str, weight, seed: int) -> str:
    """The results label of one VC model of this script's settings (``vc_label``)."""
    return vc_label(model_name, args.hidden, weight, args.target, seed, args.penalty_scope, args.scheduler_init)


def run(corpus, args, model_name: str, weight: float, seed: int, out: Path, on_row) -> list:
    """One (model, w, seed), one epoch a call from its checkpoint in ``out``: its rows, one per epoch
    trained, each passed to ``on_row`` when made (``multiscale_rnn.reproduce.vcrnn.train_vc``, which
    ``multiscale-rnn reproduce vcrnn-table3`` runs)."""
    return train_vc(corpus, args, model_name, weight, seed, out, progress=True, test=weight is None, on_row=on_row)


def space_profile(model, ids, space: int, batch_size: int = 16, chunk: int = 500) -> dict:
    """Mean m_t where the input is a space, the first character of a word (after a space) and elsewhere,
    ``model`` reading ``ids`` as ``batch_size`` streams (m_t belongs to the input x_t)."""
    import numpy as np

    from multiscale_rnn.models.vcrnn import corpus_trace

    m, _ = corpus_trace(model, ids, batch_size, chunk)
    T = len(ids) // batch_size
    tok = np.asarray(ids)[: T * batch_size].reshape(batch_size, T).T.reshape(-1)  # the trace's order: time-major
    at_space = tok == space
    prev = np.r_[np.zeros(batch_size, dtype=bool), at_space[:-batch_size]]  # the same stream's previous input
    start = prev & ~at_space
    rest = ~at_space & ~start
    return {
        "space": float(m[at_space].mean()),
        "word start": float(m[start].mean()),
        "elsewhere": float(m[rest].mean()),
    }


def profile(corpus, args) -> int:
    """The --profile table and figure (see the module's text)."""
    import numpy as np

    from multiscale_rnn.checkpoint import load

    ids = corpus.test[: args.profile_chars]
    space = corpus.vocab.stoi[" "]
    first = {}
    print(f"mean m_t on the first {len(ids):,} test characters (input x_t: space / word start / elsewhere)")
    for model_name in args.models.split(","):
        for w in [float(x) for x in args.weights.split(",")]:
            rows = []
            for seed in [int(s) for s in args.seeds.split(",")]:
                path = args.out / f"{label_of(args, model_name, w, seed)}.npz"
                model = load(path).model
                first.setdefault(model_name, model)
                r = space_profile(model, ids, space)
                r["test bpc"] = msr.evaluate(model, ids, batch_size=16)["bpc"]  # as train_vc scores the baselines
                rows.append(r)
                print(f"  {path.stem}: " + ", ".join(f"{k} {v:.3f}" for k, v in r.items()))
            spread = {k: [r[k] for r in rows] for k in rows[0]}
            above = sum(r["word start"] > r["elsewhere"] for r in rows)
            print(f"{model_name} w{w:g}: " + ", ".join(
                f"{k} {np.median(v):.3f} [{min(v):.3f}, {max(v):.3f}]" for k, v in spread.items()
            ) + f"; word start above elsewhere on {above} of {len(rows)} seeds")  # fmt: skip
    if args.figure is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        text = corpus.vocab.decode(corpus.test[:160])
        fig, axes = plt.subplots(len(first), 1, figsize=(11, 2.6 * len(first)), squeeze=False)
        for ax, (name, model) in zip(axes[:, 0], first.items()):
            msr.plot.computation_profile(model.trace(text, corpus.vocab), width=80, ax=ax)
            ax.set_title(f"{name.upper()}-{args.hidden}, first seed: " + ax.get_title(), fontsize=9)
        fig.tight_layout()
        fig.savefig(args.figure, dpi=90)
        print(f"figure: {args.figure}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="folder with ptb.char.{train,valid,test}.txt")
    ap.add_argument("--models", default="vcrnn,vcgru")
    ap.add_argument("--weights", default="0.05,0.1,0.2")
    ap.add_argument("--target", type=float, default=0.3)
    ap.add_argument(
        "--penalty-scope",
        default="step",
        choices=("step", "batch"),
        help="the penalty on every m_t (the paper's reading) or on the batch's mean m_t",
    )
    ap.add_argument(
        "--scheduler-init",
        choices=SCHEDULER_INITS,
        default="target",
        help="the scheduler's initialisation (runs before 2026-11-27: 'uniform', the default then)",
    )
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--train-chars", type=int, default=1_000_000)
    ap.add_argument("--valid-chars", type=int, default=100_000)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--profile", action="store_true", help="read the trained models: Figure 3 over seeds")
    ap.add_argument("--profile-chars", type=int, default=100_000)
    ap.add_argument("--figure", type=Path, help="with --profile: the computation profile's PNG")
    args = ap.parse_args(argv)
    msr.set_num_threads(args.threads)
    corpus = msr.data.load("ptb-char", path=args.data)
    if args.profile:
        return profile(corpus, args)
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        return train_all(corpus, args, ap)
    except ValueError as e:  # a model of other settings or past --epochs, named with its checkpoint
        raise SystemExit(f"error: {e}") from None


def train_all(corpus, args, ap) -> int:
    """Train what --out lacks of the models of ``args`` (``run``, whose ``train_vc`` refuses a checkpoint of other
    settings). A model whose run has ended is skipped when its checkpoint holds this call's settings, and refused
    otherwise: the label holds neither the rate nor the characters, so the model there would be taken for this
    call's."""
    results = args.out / "results.jsonl"
    done, ended = set(), set()  # (label, epoch) of every row; the labels whose run has ended
    if results.exists():
        for r in map(json.loads, results.read_text().splitlines()):
            done.add((r["label"], r["epoch"]))
            if finished(r, args.epochs):
                ended.add(r["label"])
    for model_name in args.models.split(","):
        if model_name not in ("vcrnn", "vcgru", "elman", "gru"):
            ap.error(f"--models: unknown model {model_name!r}; choose from vcrnn, vcgru, elman, gru")
        baseline = model_name in ("elman", "gru")  # a constant unit: no penalty weight, tested at its last epoch
        for w in [None] if baseline else [float(x) for x in args.weights.split(",")]:
            for seed in [int(s) for s in args.seeds.split(",")]:
                label = label_of(args, model_name, w, seed)
                if label in ended:  # its checkpoint must hold this call's settings (ValueError naming them)
                    unit_checkpoint(args.out / f"{label}.npz", vc_settings(corpus, args, model_name, w, seed))
                    continue
                keep = lambda r: None if (r["label"], r["epoch"]) in done else Results(args.out).append(r)  # noqa: E731
                run(corpus, args, model_name, w, seed, args.out, keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
