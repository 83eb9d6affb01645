#!/usr/bin/env python
"""Speed of the mixture density head (Graves 2013; cpp/include/msrnn/heads/mdn.hpp) against the same head
written plainly in PyTorch, forward and backward.

The head alone: a linear map of the core's output y (N, I) to the 6M + 1 raw parameters, the mixture's
transforms and its negative log-likelihood of the targets x (N, 3), the mean over the N = T * B rows,
and the gradients of the linear map's weights and of y. Defaults: the HM-LSTM paper's handwriting
setting, T = 300 steps, batch B = 32, head input I = 400, M = 20 components (Graves's count).

  ours    multiscale_rnn._core.MixtureHeadF32: one call, loss and gradients.
  torch   the closed forms written plainly (log_softmax, logsumexp over the components, softplus for
          the pen bit), autograd for the backward: what a PyTorch user writes.

Both sides get the same weights and data; the losses are compared. Runs are interleaved and repeated;
the best repeat and the median are shown, with the ratio torch / ours.

  python bench/bench_mdn.py --threads 1 2 --repeats 7
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

import numpy as np
from timing import cpu_name


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300, help="T")
    p.add_argument("--batch", type=int, default=32, help="B")
    p.add_argument("--input", type=int, default=400, help="I, the head's input size")
    p.add_argument("--mixtures", type=int, default=20, help="M")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--calls", type=int, default=5, help="calls per repeat")
    return p.parse_args(argv)


def torch_head(torch, W, b, y, x, M):
    """The plain PyTorch head: mean -log Pr(x | W y + b) over the rows."""
    z = y @ W.T + b  # (N, 6M + 1)
    e_hat, pi_hat = z[:, 0], z[:, 1 : 1 + M]
    mu1, mu2 = z[:, 1 + M : 1 + 2 * M], z[:, 1 + 2 * M : 1 + 3 * M]
    ls1, ls2, rho = z[:, 1 + 3 * M : 1 + 4 * M], z[:, 1 + 4 * M : 1 + 5 * M], torch.tanh(z[:, 1 + 5 * M :])
    d1 = (x[:, :1] - mu1) * torch.exp(-ls1)
    d2 = (x[:, 1:2] - mu2) * torch.exp(-ls2)
    one_m = 1 - rho * rho
    q = d1 * d1 + d2 * d2 - 2 * rho * d1 * d2
    log_n = -math.log(2 * math.pi) - ls1 - ls2 - 0.5 * torch.log(one_m) - q / (2 * one_m)
    log_mix = torch.logsumexp(torch.log_softmax(pi_hat, dim=1) + log_n, dim=1)
    pen = x[:, 2]
    log_e = -(pen * torch.nn.functional.softplus(e_hat) + (1 - pen) * torch.nn.functional.softplus(-e_hat))
    return -(log_mix + log_e).mean()


def main(argv=None):
    a = parse_args(argv)
    import torch

    import multiscale_rnn as msr
    from multiscale_rnn._native import core as _core

    N, I, M = a.steps * a.batch, a.input, a.mixtures
    rng = np.random.default_rng(0)
    y = rng.normal(scale=0.5, size=(N, I)).astype(np.float32)
    x = np.column_stack([rng.normal(size=(N, 2)), rng.random(N) < 0.2]).astype(np.float32)
    ours = _core.MixtureHeadF32(I, M)
    flat = ours.flat_params()
    flat[:] = rng.normal(scale=0.05, size=flat.size)
    info = ours.param_info()  # name -> (offset, rows, cols), column-major
    (ow, rw, cw), (ob, rb, _) = info["decoder.weight"], info["decoder.bias"]
    W = flat[ow : ow + rw * cw].reshape(cw, rw).T.copy()  # decoder.weight (6M + 1, I)
    b = flat[ob : ob + rb].copy()
    tW, tb = torch.tensor(W, requires_grad=True), torch.tensor(b, requires_grad=True)
    ty, tx = torch.tensor(y, requires_grad=True), torch.tensor(x)
    print(f"multiscale_rnn ISA {msr.ISA}, torch {torch.__version__}, CPU {cpu_name()}, load {os.getloadavg()}")
    print(f"T = {a.steps}, B = {a.batch}, I = {I}, M = {M}; ms per forward + backward, best (median) of "
          f"{a.repeats} repeats of {a.calls} calls")  # fmt: skip

    def run_ours():
        ours.zero_grad()
        return ours.loss_and_grad(y, x)[0]

    def run_torch():
        for t in (tW, tb, ty):
            t.grad = None
        loss = torch_head(torch, tW, tb, ty, tx, M)
        loss.backward()
        return float(loss.detach())

    diff = abs(run_ours() - run_torch())
    print(f"losses agree to {diff:.2e} (float32)")
    assert diff < 1e-3 * abs(run_torch()), "the two heads compute different losses"
    for threads in a.threads:
        msr.set_num_threads(threads)
        torch.set_num_threads(threads)
        times = {"ours": [], "torch": []}
        for _ in range(a.repeats):
            for name, fn in (("ours", run_ours), ("torch", run_torch)):
                fn()
                t0 = time.perf_counter()
                for _ in range(a.calls):
                    fn()
                times[name].append((time.perf_counter() - t0) / a.calls)
        best = {k: min(v) for k, v in times.items()}
        med = {k: statistics.median(v) for k, v in times.items()}
        print(
            f"threads {threads}: ours {1e3 * best['ours']:.1f} ({1e3 * med['ours']:.1f}) ms, torch "
            f"{1e3 * best['torch']:.1f} ({1e3 * med['torch']:.1f}) ms: torch / ours "
            f"x{best['torch'] / best['ours']:.2f} best, x{med['torch'] / med['ours']:.2f} median"
        )


if __name__ == "__main__":
    main()
