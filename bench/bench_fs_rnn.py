"""FS-LSTM-2 training speed: multiscale-rnn against the same model in PyTorch, same sizes, same threads.

One training step = forward and backward over a chunk of B streams x T steps, global-norm
clipping to 1 and an Adam update; characters per second = B * T / (time per step), the fastest of
--steps repetitions, ours and PyTorch's interleaved so both see the same load of a shared machine;
the CPU-time ratio (process time, all threads) is printed beside it, and each side's GFLOP/s
(``train_flops_per_char``: the products counted analytically; layer norm, gates and masks not
counted) as a share of the sgemm peak measured after the runs. Two models:

  paper   the paper's FS-LSTM-2: layer norm on each gate and on the cell state, zoneout on c and h,
          dropout on the non-recurrent connections. PyTorch (multiscale_rnn.reference.fs_rnn):
          products + layer_norm per gate block, zoneout and dropout masks drawn each step.
  plain   FS-LSTM-2 without layer norm, zoneout or dropout. PyTorch: torch.lstm_cell (nn.LSTMCell's
          kernel) for each of the three cells.

    python bench/bench_fs_rnn.py                       # the default sizes, 2 threads
    python bench/bench_fs_rnn.py --fast 700 --slow 400 --batch 128 --bptt 150 --embed 128 --steps 3
    python bench/bench_fs_rnn.py --threads 1 --reference   # our plain kernels, for before/after
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from timing import arithmetic_peak, describe_arithmetic_peak, sgemm_peak, timed

import multiscale_rnn as msr
from multiscale_rnn.models.base import _core
from multiscale_rnn.reference import fs_rnn as reference
from multiscale_rnn.reference import tensors


def ours_step_fn(model, tok, tgt, opt):
    flat_g = model.flat_gradients()

    def step():
        model.loss_and_grad(tok, tgt, None, copy_grads=False)
        _core.clip_by_norm(flat_g, 1.0)
        opt.step(model)

    return step


def torch_step_fn(torch, ours, tok, tgt):
    """A training step of the FS-LSTM written the natural way in PyTorch (multiscale_rnn.reference.fs_rnn,
    float32, training-mode zoneout and dropout), from the same initial weights as ``ours``."""
    P = tensors(ours, np.float32)
    opt = torch.optim.Adam(list(P.values()), lr=1e-3)
    tok_t, tgt_t = torch.from_numpy(tok.astype(np.int64)), torch.from_numpy(tgt.astype(np.int64)).reshape(-1)
    options = reference.options(ours)

    def step():
        opt.zero_grad()
        logits, _ = reference.forward(P, tok_t, None, train=True, **options)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_t)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(P.values()), 1.0)
        opt.step()

    return step


def train_flops_per_char(V, E, HF, HS) -> float:
    """Training FLOPs per character, counted analytically: 3x the forward products of the FS-LSTM-2's chain
    F1 (input E), S (input HF), F2 (input HS) and the head, 2 * 4H * (input + H) per cell and 2 * V * HF."""
    forward = 2 * 4 * HF * (E + HF) + 2 * 4 * HS * (HF + HS) + 2 * 4 * HF * (HS + HF) + 2 * V * HF
    return 3.0 * forward


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fast", type=int, default=256)
    ap.add_argument("--slow", type=int, default=128)
    ap.add_argument("--embed", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=50)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--bptt", type=int, default=100)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--models", default="paper,plain")
    ap.add_argument(
        "--reference",
        action="store_true",
        help="our plain reference kernels (Eigen products step by step, no threads over streams)",
    )
    args = ap.parse_args(argv)
    _core.set_reference_kernels(args.reference)
    import torch

    torch.set_num_threads(args.threads)
    msr.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    V, E, HF, HS, B, T = args.vocab, args.embed, args.fast, args.slow, args.batch, args.bptt
    tok, tgt = rng.integers(0, V, (B, T)).astype(np.int32), rng.integers(0, V, (B, T)).astype(np.int32)
    settings = {
        "paper": dict(layer_norm=True, zc=0.5, zh=0.1, p=0.35),
        "plain": dict(layer_norm=False, zc=0.0, zh=0.0, p=0.0),
    }
    print(
        f"FS-LSTM-2  fast {HF}  slow {HS}  embed {E}  vocab {V}  batch {B}  bptt {T}  threads {args.threads}  "
        f"ISA {msr.ISA}  torch {torch.__version__}{'  reference kernels' if args.reference else ''}"
    )
    print(
        f"{'model':8s} {'ours chars/s':>13s} {'torch chars/s':>14s} {'ratio':>6s}   {'CPU-time ratio':>14s}   "
        f"{'ours GFLOP/s':>12s} {'torch GFLOP/s':>13s}   (fastest of {args.steps} interleaved steps; "
        f"load {os.getloadavg()[0]:.1f})"
    )
    flops = train_flops_per_char(V, E, HF, HS)
    rates = []
    for name in args.models.split(","):
        s = settings[name]
        ours = msr.FSRNN(
            V, E, HF, HS, layer_norm=s["layer_norm"], zoneout_c=s["zc"], zoneout_h=s["zh"], dropout=s["p"], seed=0
        )
        (w_ours, c_ours), (w_torch, c_torch) = timed(
            [ours_step_fn(ours, tok, tgt, msr.optim.Adam(lr=1e-3)), torch_step_fn(torch, ours, tok, tgt)], args.steps
        )
        g_ours, g_torch = flops * B * T / w_ours / 1e9, flops * B * T / w_torch / 1e9
        rates.append((name, g_ours, g_torch))
        print(
            f"{name:8s} {B * T / w_ours:13,.0f} {B * T / w_torch:14,.0f} {w_torch / w_ours:5.2f}x   "
            f"{c_torch / c_ours:13.2f}x   {g_ours:12.1f} {g_torch:13.1f}",
            flush=True,
        )
    peak = sgemm_peak(4096, args.threads, torch=torch)
    best = max(peak.values())
    print("sgemm 4096^3 peak: " + ", ".join(f"{k} {v:.1f}" for k, v in peak.items()) + " GFLOP/s (same threads)")
    for name, g_ours, g_torch in rates:
        print(
            f"{name:8s} % of the peak: ours {100 * g_ours / best:3.0f} %, torch {100 * g_torch / best:3.0f} %; "
            f"2x torch would need {200 * g_torch / best:3.0f} % of it"
        )
    arith = arithmetic_peak()
    print(describe_arithmetic_peak(arith))
    for name, g_ours, g_torch in rates:
        a = arith["gflops"]
        print(
            f"{name:8s} % of the arithmetic peak: ours {100 * g_ours / a:3.0f} %, torch {100 * g_torch / a:3.0f} %; "
            f"2x torch would need {200 * g_torch / a:3.0f} % of it"
        )


if __name__ == "__main__":
    main()
