"""Penalty weight of the VCRNN / VCGRU against the computation it saves (issue: VCRNN defaults that save
computation as the paper does). For each penalty weight w, a model is trained on Penn Treebank
characters with the paper's schedule (symmetric L1 penalty towards m_bar, the mask's sharpness lambda
from 0.1 up by 0.1 per epoch to 1), and the validation text gives the mean m_t, its distance to m_bar,
RNN-d and BPC after every epoch. The Trainer's divergence guard is on (validation BPC 0.1 above its
best: it says so and keeps the best checkpoint).

    python bench/vc_calibrate.py --data ../shared/data/ptb --models vcrnn,vcgru --weights 0.05,0.1,0.2 \\
        --hidden 256 --train-chars 1000000 --epochs 4 --seeds 0 --out runs/vc_calibrate

Resumable: each (model, w, seed) trains one epoch a call from its checkpoint in --out, and its epochs
are lines of --out/results.jsonl. Not a benchmark: it prints a table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import multiscale_rnn as msr
from multiscale_rnn.reproduce._common import Results
from multiscale_rnn.reproduce.vcrnn import mean_m, train_vc, vc_label  # noqa: F401 - the script's names


def run(corpus, args, model_name: str, weight: float, seed: int, out: Path, on_row) -> list:
    """One (model, w, seed), one epoch a call from its checkpoint in ``out``: its rows, one per epoch
    trained, each passed to ``on_row`` when made (``multiscale_rnn.reproduce.vcrnn.train_vc``, which
    ``multiscale-rnn reproduce vcrnn-table3`` runs)."""
    return train_vc(corpus, args, model_name, weight, seed, out, progress=True, on_row=on_row)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="folder with ptb.char.{train,valid,test}.txt")
    ap.add_argument("--models", default="vcrnn,vcgru")
    ap.add_argument("--weights", default="0.05,0.1,0.2")
    ap.add_argument("--target", type=float, default=0.3)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--train-chars", type=int, default=1_000_000)
    ap.add_argument("--valid-chars", type=int, default=100_000)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    msr.set_num_threads(args.threads)
    corpus = msr.data.load("ptb-char", path=args.data)
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / "results.jsonl"
    done = set()
    if results.exists():
        done = {(r["label"], r["epoch"]) for r in map(json.loads, results.read_text().splitlines())}
    for model_name in args.models.split(","):
        for w in [float(x) for x in args.weights.split(",")]:
            for seed in [int(s) for s in args.seeds.split(",")]:
                label = vc_label(model_name, args.hidden, w, args.target, seed)
                if (label, args.epochs) in done:
                    continue
                keep = lambda r: None if (r["label"], r["epoch"]) in done else Results(args.out).append(r)  # noqa: E731
                run(corpus, args, model_name, w, seed, args.out, keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
