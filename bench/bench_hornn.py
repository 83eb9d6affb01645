"""HORNN training speed: multiscale-rnn against the same model written the natural way in PyTorch
(a loop over steps, N products W_hn h_{t-n} per step: multiscale_rnn.reference.hornn.TorchHORNN),
same sizes, same thread count.

One training step = forward and backward over a chunk of B streams x T steps, clipping each
gradient entry to [-5, 5] and an SGD update with momentum 0.9 (the paper's recipe); tokens per
second = B * T / (time per step), the fastest of --steps repetitions, ours and PyTorch's
interleaved so both see the same load of a shared machine; the CPU-time ratio (process time, all
threads) is printed beside it. Defaults: the paper's PTB sizes (order 3, 400 units, embedding 400,
batch 20, BPTT 30, sigmoid) with the full 10k softmax, then a 50-symbol vocabulary so that the
recurrent part, not the softmax, dominates.

    python bench/bench_hornn.py                               # PTB sizes, V = 10000 and V = 50, 2 threads
    python bench/bench_hornn.py --vocab 50 --poolings gated --steps 10
    python bench/bench_hornn.py --threads 1 --reference       # our plain kernels, for before/after
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

import multiscale_rnn as msr
from multiscale_rnn.models.base import _core
from multiscale_rnn.reference.hornn import TorchHORNN


def ours_step_fn(model, tok, tgt, opt):
    impl = model._impl
    flat_g = model.flat_gradients()
    impl.reset_state(tok.shape[0])

    def step():
        impl.zero_grad()
        impl.loss_and_grad(tok, tgt, None)   # state carried from the last step, as in training
        _core.clip_by_value(flat_g, 5.0)
        opt.step(model)
    return step


def torch_step_fn(torch, model, tok, tgt):
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    tok_t, tgt_t = torch.from_numpy(tok.astype(np.int64)), torch.from_numpy(tgt.astype(np.int64)).reshape(-1)
    state = [model.initial_state(tok.shape[0])]

    def step():
        opt.zero_grad()
        logits, new = model(tok_t, state[0])
        state[0] = {k: v.detach() for k, v in new.items()}
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_t)
        loss.backward()
        torch.nn.utils.clip_grad_value_(model.parameters(), 5.0)
        opt.step()
    return step


def timed(steps_a, steps_b, reps):
    """Interleaved repetitions of two step functions; the fastest wall-clock and process CPU time
    of each, in seconds per step."""
    steps_a(), steps_b()                       # warm up
    wall, cpu = {0: [], 1: []}, {0: [], 1: []}
    for _ in range(reps):
        for i, step in enumerate((steps_a, steps_b)):
            w0, c0 = time.perf_counter(), time.process_time()
            step()
            wall[i].append(time.perf_counter() - w0)
            cpu[i].append(time.process_time() - c0)
    return [(min(wall[i]), min(cpu[i])) for i in (0, 1)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hidden", type=int, default=400)
    ap.add_argument("--embed", type=int, default=400)
    ap.add_argument("--vocab", default="10000,50", help="comma-separated vocabulary sizes")
    ap.add_argument("--order", type=int, default=3)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--bptt", type=int, default=30)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--poolings", default="plain,fofe,max,gated")
    ap.add_argument("--reference", action="store_true",
                    help="our plain reference kernels (N Eigen products per step, no threads over streams)")
    args = ap.parse_args(argv)
    _core.set_reference_kernels(args.reference)
    import torch
    torch.set_num_threads(args.threads)
    msr.set_num_threads(args.threads)
    H, E, K, B, T = args.hidden, args.embed, args.order, args.batch, args.bptt
    print(f"HORNN order {K}  hidden {H}  embed {E}  batch {B}  bptt {T}  threads {args.threads}  ISA {msr.ISA}  "
          f"torch {torch.__version__}{'  reference kernels' if args.reference else ''}")
    print(f"{'vocab':>6s} {'pooling':8s} {'ours tok/s':>11s} {'torch tok/s':>12s} {'ratio':>6s}   "
          f"{'CPU-time ratio':>14s}   (fastest of {args.steps} interleaved steps; load {os.getloadavg()[0]:.1f})")
    for V in (int(v) for v in args.vocab.split(",")):
        rng = np.random.default_rng(0)
        tok, tgt = rng.integers(0, V, (B, T)).astype(np.int32), rng.integers(0, V, (B, T)).astype(np.int32)
        for pooling in args.poolings.split(","):
            ours = msr.HORNN(V, E, (H,), order=K, pooling=pooling, seed=0)
            msr.init.gaussian(ours, 0.1, rng=0)
            theirs = TorchHORNN(V, E, (H,), order=K, pooling=pooling)
            (w_o, c_o), (w_t, c_t) = timed(ours_step_fn(ours, tok, tgt, msr.optim.SGD(lr=0.5, momentum=0.9)),
                                           torch_step_fn(torch, theirs, tok, tgt), args.steps)
            print(f"{V:6d} {pooling:8s} {B * T / w_o:11,.0f} {B * T / w_t:12,.0f} {w_t / w_o:5.2f}x   "
                  f"{c_t / c_o:13.2f}x", flush=True)


if __name__ == "__main__":
    main()
