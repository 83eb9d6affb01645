"""Timing shared by the benchmarks: step functions run interleaved, so that all of them see the
same load of a shared machine."""

from __future__ import annotations

import os
import subprocess
import sys
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


def sgemm_peak(n: int, threads: int, reps: int = 5, torch=None, bf16: bool = False):
    """This machine's matrix-product peak, GFLOP/s: the fastest of ``reps`` (after a warm-up) square
    float32 products C (n, n) = A B through NumPy (OpenBLAS) on ``threads`` threads and, given ``torch``,
    ``torch.mm`` (MKL) on torch's thread count, with ``bf16`` also ``torch.mm`` in bfloat16;
    {"numpy": ..., "torch": ..., "torch-bf16": ...}. Run it with the thread count of the figures it is
    compared with. NumPy's product runs in a child process: OpenBLAS reads its thread count once, when it
    loads, and a benchmark's NumPy has loaded by then (with every core)."""
    out = {"numpy": _numpy_sgemm_rate(n, threads, reps)}
    if torch is not None:
        a, b = _square_operands(n)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        tc = torch.empty(n, n)
        out["torch"] = _best_rate(lambda: torch.mm(ta, tb, out=tc), n, reps)
        if bf16:
            ha, hb = ta.to(torch.bfloat16), tb.to(torch.bfloat16)
            hc = torch.empty(n, n, dtype=torch.bfloat16)
            out["torch-bf16"] = _best_rate(lambda: torch.mm(ha, hb, out=hc), n, reps)
    return out


def _square_operands(n: int):
    """Two seeded (n, n) float32 matrices."""
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)


def _best_rate(product, n: int, reps: int) -> float:
    """GFLOP/s of an (n, n) by (n, n) ``product``: the fastest of ``reps`` calls after a warm-up."""
    ((wall, _),) = timed([product], reps)
    return 2.0 * n**3 / wall / 1e9


def numpy_sgemm_rate_here(n: int, reps: int) -> float:
    """NumPy's (n, n) float32 product in this process, GFLOP/s (the child of ``_numpy_sgemm_rate``)."""
    a, b = _square_operands(n)
    c = np.empty((n, n), dtype=np.float32)
    return _best_rate(lambda: np.matmul(a, b, out=c), n, reps)


def _numpy_sgemm_rate(n: int, threads: int, reps: int) -> float:
    """GFLOP/s of NumPy's (n, n) float32 product on ``threads`` BLAS threads, in a child process."""
    here = os.path.dirname(os.path.abspath(__file__))
    code = f"import sys; sys.path.insert(0, {here!r}); import timing; print(timing.numpy_sgemm_rate_here({n}, {reps}))"
    env = dict(os.environ, **{v: str(threads) for v in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")})
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def arithmetic_peak(seconds: float = 0.3, reps: int = 3):
    """The loaded core module's arithmetic peak, GFLOP/s, on the core's current thread count: independent
    vector multiply-adds in the module's widest vectors (``multiply_add_peak``, cpp/include/msrnn/kernels/
    peak.hpp), no memory traffic. No float32 product of that module can run faster, whatever a BLAS reaches
    (on an AMD Zen 5, NumPy's and PyTorch's 4096^2 sgemm stay well below it). The fastest of ``reps`` calls
    of about ``seconds`` each; {"gflops", "isa", "threads", "vector_floats", "fused"}."""
    import multiscale_rnn as msr

    peak = msr.testing.blocks().multiply_add_peak
    n = 1 << 14
    while True:  # calibrate: a call of about `seconds`
        t0 = time.perf_counter()
        run = peak(n)
        dt = time.perf_counter() - t0
        if dt >= seconds / 4:
            break
        n *= 4
    n = max(1, int(n * seconds / dt))
    run = peak(n)
    ((best, _),) = timed([lambda: peak(n)], reps)
    keys = ("threads", "vector_floats", "fused")
    return dict(gflops=run["flops"] / best / 1e9, isa=msr.ISA, **{k: run[k] for k in keys})


def describe_arithmetic_peak(p) -> str:
    """One line for a benchmark's output: the figure and what it is."""
    kind = "fused multiply-adds" if p["fused"] else "multiplies and adds"
    return (
        f"arithmetic peak of the {p['isa']} module: {p['gflops']:.1f} GFLOP/s ({p['threads']} thread(s), "
        f"{p['vector_floats']}-float {kind})"
    )
