"""Each model's training speedup from one thread to two, at Penn Treebank character sizes: the same
model's training step (forward, backward, gradient-norm clipping to 1, Adam) run on 1 and on 2 threads,
interleaved (``timed``: the fastest of --steps wall-clock repetitions of each), in one process.

    python bench/bench_threads.py                          # every model below
    python bench/bench_threads.py --models hm-lstm,vcrnn --steps 5

Sizes (vocabulary 50, embedding 128, B streams x T steps), each from its paper's PTB setting where it
has one: HM-LSTM 3 x 512 (B 64, T 100); VCRNN and VCGRU 1024 units, m_bar 0.3 (B 32, T 100); the Elman
RNN of 760 and the GRU of 458 units (the VCRNN paper's Table 3 baselines; B 32, T 100); Clockwork RNN 1024
units in its default 4 modules (B 32, T 100); LSTM 512 (B 64, T 100). The VCRNN and VCGRU are untrained
(their scheduler's start; the mean m of the 1-thread model's last chunk is printed): their work per step
depends on m, so their speedup is for that m. The LSTM, the HORNN and the
FS-LSTM-2 have their own benchmarks, which docs/performance.md quotes for this row as well.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from timing import cpu_name, timed

import multiscale_rnn as msr

V, E = 50, 128

#: name -> (builder, B, T)
MODELS = {
    "hm-lstm": (lambda: msr.HMLSTM(V, E, (512, 512, 512), seed=0), 64, 100),
    "vcrnn": (lambda: msr.VCRNN(V, hidden_sizes=(1024,), seed=0), 32, 100),
    "vcgru": (lambda: msr.VCGRU(V, hidden_sizes=(1024,), seed=0), 32, 100),
    "elman": (lambda: msr.ElmanRNN(V, E, (760,), seed=0), 32, 100),
    "gru": (lambda: msr.GRU(V, E, (458,), seed=0), 32, 100),
    "clockwork": (lambda: msr.ClockworkRNN(V, E, (1024,), seed=0), 32, 100),
    "lstm": (lambda: msr.LSTM(V, E, (512,), seed=0), 64, 100),
}


def step_fn(model, tok, tgt, threads):
    """One training step on ``threads`` threads (the thread count set before every call)."""
    opt, g = msr.optim.Adam(lr=1e-3), model.flat_gradients()

    def step():
        msr.set_num_threads(threads)
        model.loss_and_grad(tok, tgt, None, copy_grads=False)
        msr.optim.clip_by_norm(g, 1.0)
        opt.step(model)

    return step


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated: {', '.join(MODELS)}")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--bptt", type=int, default=None, help="steps per chunk for every model (default: each its own)")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.models.split(",")]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise SystemExit(f"error: unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    print(f"{cpu_name()}, ISA {msr.ISA}; fastest of {args.steps} interleaved steps; load {os.getloadavg()[0]:.1f}")
    print(f"{'model':10s} {'sizes':>22s} {'1 thread':>12s} {'2 threads':>12s} {'speedup':>8s}   (characters/s)")
    rng = np.random.default_rng(0)
    for name in names:
        build, B, T = MODELS[name]
        T = args.bptt or T
        tok, tgt = (rng.integers(0, V, (B, T)).astype(np.int32) for _ in range(2))
        models = [build(), build()]  # one per thread count: each carries its own state and optimiser
        (w1, _), (w2, _) = timed([step_fn(models[0], tok, tgt, 1), step_fn(models[1], tok, tgt, 2)], args.steps)
        sizes = f"{'x'.join(map(str, models[0].config['hidden_sizes']))} B{B} T{T}"
        records = models[0].records() if name.startswith("vc") else {}
        m = f"   mean m {float(np.mean(records['m'])):.2f}" if "m" in records else ""
        print(f"{name:10s} {sizes:>22s} {B * T / w1:12,.0f} {B * T / w2:12,.0f} {w1 / w2:7.2f}x{m}", flush=True)


if __name__ == "__main__":
    main()
