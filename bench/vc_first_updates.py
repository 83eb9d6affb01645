"""The first updates of the VC Table 3 recipe under each scheduler initialisation (``scheduler_init``): how
often the scheduler swings to m_t = 0 or 1, the gradient spikes, and the BPC reached. The recipe is that of
``multiscale-rnn reproduce vcrnn-table3`` (D units on PTB characters, the L1 penalty towards m_bar 0.3 with
weight 1, Adam 2e-3, clipping at norm 1, B = 32, T = 100, the paper's sharpness schedule from 0.1), stopped
after --steps updates.

    python bench/vc_first_updates.py --data ../shared/data/ptb --inits target,uniform --seeds 0-7 --steps 100

Prints one JSON line per (init, seed): the mean m_t of the last 10 updates' chunks, its lowest chunk mean,
the updates whose chunk mean m_t is under 0.01 (the scheduler closed), the largest gradient norm before
clipping and the updates above 100, the training BPC of the last 10 updates; then median [range] per init.
Not a benchmark: a few seconds an update at 1024 units on one thread.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

import multiscale_rnn as msr
from multiscale_rnn.models.vcrnn import SCHEDULER_INITS
from multiscale_rnn.reproduce._common import dist
from multiscale_rnn.reproduce.vcrnn import build, recipe_trainer
from multiscale_rnn.training.hooks import Hook


class _Stop(Exception):
    """Raised by the hook after the last update asked for."""


class _Record(Hook):
    """Per update: the chunk's mean m_t, the gradient norm before clipping and the training BPC."""

    def __init__(self, model, steps: int):
        self.model, self.steps, self.rows = model, steps, []

    def on_step(self, run, step) -> None:
        self.rows.append((float(self.model.records()["m"].mean()), float(step.grad_norm), step.loss / np.log(2)))
        if step.step >= self.steps:
            raise _Stop


def first_updates(train, vocab_size: int, unit: str, init: str, seed: int, steps: int, hidden: int) -> dict:
    model = build(unit, vocab_size, hidden, 1.0, 0.3, seed, init=init)
    hook = _Record(model, steps)
    trainer = recipe_trainer(model, 2e-3, seed, hooks=[hook], divergence=None)
    try:
        trainer.fit(train, epochs=1)
    except _Stop:
        pass
    m, g, bpc = (np.array(x) for x in zip(*hook.rows))
    return dict(unit=unit, init=init, seed=seed, steps=len(m), hidden=hidden, m_last10=float(m[-10:].mean()),
                m_min=float(m.min()), closed_updates=int((m < 0.01).sum()), grad_max=float(g.max()),
                spikes_over_100=int((g > 100).sum()), bpc_last10=float(bpc[-10:].mean()),
                isa=msr._native.ISA)  # fmt: skip


def seed_list(text: str):
    if "-" in text:
        a, b = text.split("-")
        return list(range(int(a), int(b) + 1))
    return [int(s) for s in text.split(",")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="folder with ptb.char.{train,valid,test}.txt")
    ap.add_argument("--unit", choices=("vcrnn", "vcgru"), default="vcrnn")
    ap.add_argument("--inits", default="target,uniform", help=f"comma-separated, of {', '.join(SCHEDULER_INITS)}")
    ap.add_argument("--seeds", default="0-7", help="'0-7' or '0,3'")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    msr.set_num_threads(args.threads)
    corpus = msr.data.load("ptb-char", path=args.data)
    summary = {}
    for init in args.inits.split(","):
        for seed in seed_list(args.seeds):
            r = first_updates(
                corpus.train[:1_000_000], corpus.vocab_size, args.unit, init, seed, args.steps, args.hidden
            )
            print(json.dumps(r), flush=True)
            summary.setdefault(init, []).append(r)
    for init, rows in summary.items():
        closed = sum(r["closed_updates"] > 0 for r in rows)
        spiked = sum(r["spikes_over_100"] > 0 for r in rows)
        print(f"{init}: scheduler closed (chunk mean m_t < 0.01) on {closed} of {len(rows)} seeds, gradient norm "
              f"over 100 on {spiked}; largest {dist([r['grad_max'] for r in rows], 1)}; "
              f"BPC of the last 10 updates {dist([r['bpc_last10'] for r in rows], 3)}")  # fmt: skip


if __name__ == "__main__":
    main()
