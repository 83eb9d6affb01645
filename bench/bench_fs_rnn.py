"""FS-LSTM-2 training speed: multiscale-rnn against the same model in PyTorch, same sizes, same threads.

One training step = forward and backward over a chunk of B streams x T steps, global-norm
clipping to 1 and an Adam update; characters per second = B * T / (time per step), the fastest of
--steps repetitions, ours and PyTorch's interleaved so both see the same load of a shared machine;
the CPU-time ratio (process time, all threads) is printed beside it. Two models:

  paper   the paper's FS-LSTM-2: layer norm on each gate and on the cell state, zoneout on c and h,
          dropout on the non-recurrent connections. PyTorch: Linear + LayerNorm per cell, zoneout
          and dropout masks drawn each step.
  plain   FS-LSTM-2 without layer norm, zoneout or dropout. PyTorch: three torch.nn.LSTMCell.

    python bench/bench_fs_rnn.py                       # the default sizes, 2 threads
    python bench/bench_fs_rnn.py --fast 700 --slow 400 --batch 128 --bptt 150 --embed 128 --steps 3
    python bench/bench_fs_rnn.py --threads 1 --reference   # our plain kernels, for before/after
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

import multiscale_rnn as msr
from multiscale_rnn.models.base import _core


def ours_step_fn(model, tok, tgt, opt):
    impl = model._impl
    flat_g = model.flat_gradients()
    impl.reset_state(tok.shape[0])

    def step():
        impl.zero_grad()
        impl.loss_and_grad(tok, tgt, None)
        _core.clip_by_norm(flat_g, 1.0)
        opt.step(model)
    return step


def torch_model(torch, V, E, HF, HS, layer_norm, zc, zh, p):
    nn = torch.nn

    class LNLSTMCell(nn.Module):
        """LSTM cell with layer norm on each gate and on the cell state (the paper's cell)."""

        def __init__(self, E, H):
            super().__init__()
            self.H = H
            self.ih = nn.Linear(E, 4 * H, bias=False)
            self.hh = nn.Linear(H, 4 * H, bias=False)
            self.ln_gates = nn.ModuleList([nn.LayerNorm(H) for _ in range(4)])
            self.ln_cell = nn.LayerNorm(H)

        def forward(self, x, state):
            h, c = state
            a = self.ih(x) + self.hh(h)
            i, f, g, o = (ln(a_k) for ln, a_k in zip(self.ln_gates, a.chunk(4, 1)))
            c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            return torch.sigmoid(o) * torch.tanh(self.ln_cell(c_new)), c_new

    class FSLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(V, E)
            cell = LNLSTMCell if layer_norm else nn.LSTMCell
            self.f1, self.s, self.f2 = cell(E, HF), cell(HF, HS), cell(HS, HF)
            self.decoder = nn.Linear(HF, V)

        def zoneout(self, new, old, z):
            if z == 0.0:
                return new
            m = torch.empty_like(new).bernoulli_(1 - z)
            return m * new + (1 - m) * old

        def cell(self, cell, x, state):
            h, c = cell(x, state)
            return self.zoneout(h, state[0], zh), self.zoneout(c, state[1], zc)

        def forward(self, tok, state):
            drop = nn.functional.dropout
            x = drop(self.embedding(tok), p, self.training)
            (hf, cf), (hs, cs) = state
            out = []
            for t in range(tok.shape[1]):
                hf, cf = self.cell(self.f1, x[:, t], (hf, cf))
                hs, cs = self.cell(self.s, drop(hf, p, self.training), (hs, cs))
                hf, cf = self.cell(self.f2, drop(hs, p, self.training), (hf, cf))
                out.append(hf)
            y = drop(torch.stack(out, 1), p, self.training)
            return self.decoder(y), ((hf.detach(), cf.detach()), (hs.detach(), cs.detach()))

    return FSLSTM()


def torch_step_fn(torch, model, tok, tgt, HF, HS):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    tok_t, tgt_t = torch.from_numpy(tok.astype(np.int64)), torch.from_numpy(tgt.astype(np.int64)).reshape(-1)
    B = tok.shape[0]
    z = lambda H: torch.zeros(B, H)
    state = [((z(HF), z(HF)), (z(HS), z(HS)))]

    def step():
        opt.zero_grad()
        logits, state[0] = model(tok_t, state[0])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_t)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return step


def timed(steps_a, steps_b, reps):
    """Interleaved repetitions of two step functions (so both see the same machine load); the
    fastest wall-clock time and the fastest process CPU time of each, in seconds per step."""
    steps_a(), steps_b()                       # warm up: allocations, first-touch pages
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
    ap.add_argument("--fast", type=int, default=256)
    ap.add_argument("--slow", type=int, default=128)
    ap.add_argument("--embed", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=50)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--bptt", type=int, default=100)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--models", default="paper,plain")
    ap.add_argument("--reference", action="store_true",
                    help="our plain reference kernels (Eigen products step by step, no threads over streams)")
    args = ap.parse_args(argv)
    _core.set_reference_kernels(args.reference)
    import torch
    torch.set_num_threads(args.threads)
    msr.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    V, E, HF, HS, B, T = args.vocab, args.embed, args.fast, args.slow, args.batch, args.bptt
    tok, tgt = rng.integers(0, V, (B, T)).astype(np.int32), rng.integers(0, V, (B, T)).astype(np.int32)
    settings = {"paper": dict(layer_norm=True, zc=0.5, zh=0.1, p=0.35), "plain": dict(layer_norm=False, zc=0.0,
                                                                                        zh=0.0, p=0.0)}
    print(f"FS-LSTM-2  fast {HF}  slow {HS}  embed {E}  vocab {V}  batch {B}  bptt {T}  threads {args.threads}  "
          f"ISA {msr.ISA}  torch {torch.__version__}{'  reference kernels' if args.reference else ''}")
    print(f"{'model':8s} {'ours chars/s':>13s} {'torch chars/s':>14s} {'ratio':>6s}   "
          f"{'CPU-time ratio':>14s}   (fastest of {args.steps} interleaved steps; load {os.getloadavg()[0]:.1f})")
    for name in args.models.split(","):
        s = settings[name]
        ours = msr.FSRNN(V, E, HF, HS, layer_norm=s["layer_norm"], zoneout_c=s["zc"], zoneout_h=s["zh"],
                         dropout=s["p"], seed=0)
        theirs = torch_model(torch, V, E, HF, HS, s["layer_norm"], s["zc"], s["zh"], s["p"])
        theirs.train()
        (w_ours, c_ours), (w_torch, c_torch) = timed(ours_step_fn(ours, tok, tgt, msr.optim.Adam(lr=1e-3)),
                                                     torch_step_fn(torch, theirs, tok, tgt, HF, HS), args.steps)
        print(f"{name:8s} {B * T / w_ours:13,.0f} {B * T / w_torch:14,.0f} {w_torch / w_ours:5.2f}x   "
              f"{c_torch / c_ours:13.2f}x", flush=True)


if __name__ == "__main__":
    main()
