"""Timing shared by the benchmarks: step functions run interleaved, so that all of them see the
same load of a shared machine."""

from __future__ import annotations

import time

import numpy as np

from multiscale_rnn.reproduce._common import cpu_name  # noqa: F401  (the benchmarks' records name the CPU)


def timed(steps, reps):
    """Interleaved repetitions of the step functions (after one warm-up call each: allocations,
    first-touch pages); the fastest wall-clock time and the fastest process CPU time of each, in
    seconds per step, as a list of (wall, cpu) pairs in the order of ``steps``."""
    for step in steps:
        step()
    wall, cpu = [[] for _ in steps], [[] for _ in steps]
    for _ in range(reps):
        for i, step in enumerate(steps):
            w0, c0 = time.perf_counter(), time.process_time()
            step()
            wall[i].append(time.perf_counter() - w0)
            cpu[i].append(time.process_time() - c0)
    return [(min(w), min(c)) for w, c in zip(wall, cpu)]


def sgemm_peak(n: int, reps: int = 5, torch=None, bf16: bool = False):
    """This machine's matrix-product peak, GFLOP/s: the fastest of ``reps`` (after a warm-up) square
    float32 products C (n, n) = A B through NumPy (OpenBLAS) and, given ``torch``, ``torch.mm`` (MKL), with
    ``bf16`` also ``torch.mm`` in bfloat16; {"numpy": ..., "torch": ..., "torch-bf16": ...}. Run it with the
    thread count of the figures it is compared with."""
    flops = 2.0 * n**3
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)

    def rate(product):
        product()
        best = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            product()
            best = min(best, time.perf_counter() - t0)
        return flops / best / 1e9

    c = np.empty((n, n), dtype=np.float32)
    out = {"numpy": rate(lambda: np.matmul(a, b, out=c))}
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        tc = torch.empty(n, n)
        out["torch"] = rate(lambda: torch.mm(ta, tb, out=tc))
        if bf16:
            ha, hb = ta.to(torch.bfloat16), tb.to(torch.bfloat16)
            hc = torch.empty(n, n, dtype=torch.bfloat16)
            out["torch-bf16"] = rate(lambda: torch.mm(ha, hb, out=hc))
    return out
