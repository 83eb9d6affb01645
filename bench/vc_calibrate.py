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
import time
from pathlib import Path

import numpy as np

import multiscale_rnn as msr
from multiscale_rnn.models.base import KEEP
from multiscale_rnn.models.vcrnn import sharpness_schedule


def mean_m(model, ids, batch_size: int = 16, chunk: int = 500) -> tuple:
    """(mean m_t, RNN-d) of ``model`` reading ``ids`` in evaluation mode as ``batch_size`` streams."""
    T = len(ids) // batch_size
    streams = np.asarray(ids[: T * batch_size]).reshape(batch_size, T)
    ms, ds = [], []
    state = None
    for t0 in range(0, T, chunk):
        model.forward(streams[:, t0 : t0 + chunk], state)
        state = KEEP
        rec = model.records()
        ms.append(rec["m"][0])
        ds.append(rec["d"][0])
    return float(np.concatenate(ms).mean()), float(model.equivalent_dim(np.concatenate(ds)))


def run(corpus, args, model_name: str, weight: float, seed: int, out: Path) -> list:
    cls = {"vcrnn": msr.VCRNN, "vcgru": msr.VCGRU}[model_name]
    model = cls(
        corpus.vocab_size,
        embed_size=args.hidden,
        hidden_sizes=(args.hidden,),
        target=args.target,
        penalty="l1",
        penalty_weight=weight,
        seed=seed,
    )
    trainer = msr.Trainer(
        model,
        msr.optim.Adam(args.lr),
        clip_norm=1.0,
        batch_size=32,
        bptt=100,
        seed=seed,
        progress=False,
        model_options={"sharpness": sharpness_schedule()},
        divergence=0.1,
    )
    label = f"{model_name}-H{args.hidden}-w{weight:g}-m{args.target:g}-seed{seed}"
    ck = out / f"{label}.npz"
    train = corpus.train[: args.train_chars]
    valid = corpus.valid[: args.valid_chars]
    rows = []
    for epochs in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        history = trainer.fit(train, valid=valid, epochs=epochs, checkpoint=ck, resume="auto")
        m, rnn_d = mean_m(model, valid)
        r = dict(
            label=label,
            model=model_name,
            hidden=args.hidden,
            weight=weight,
            target=args.target,
            seed=seed,
            epoch=epochs,
            valid_bpc=history[-1]["valid_bpc"],
            mean_m=m,
            rnn_d=rnn_d,
            seconds=time.perf_counter() - t0,
            isa=msr._native.ISA,
            threads=msr.get_num_threads(),
        )
        rows.append(r)
        print(
            f"{label} epoch {epochs}: valid {r['valid_bpc']:.3f} bpc, mean m {m:.3f} (m_bar {args.target}), "
            f"RNN-d {rnn_d:.0f} of {args.hidden}",
            flush=True,
        )
    return rows


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
                label = f"{model_name}-H{args.hidden}-w{w:g}-m{args.target:g}-seed{seed}"
                if (label, args.epochs) in done:
                    continue
                rows = run(corpus, args, model_name, w, seed, args.out)
                with open(results, "a") as f:
                    for r in rows:
                        if (r["label"], r["epoch"]) not in done:
                            f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
