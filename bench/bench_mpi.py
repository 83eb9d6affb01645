#!/usr/bin/env python
"""Data-parallel training over MPI: 1 against 2 processes (1 thread each) on this machine, and a
model of the communication cost per step that says when K machines pay off.

Measured (``mpiexec -n K python bench/bench_mpi.py --worker``, K = 1 and 2, interleaved and repeated):
  an LSTM language model (embedding E -> L x LSTM(H) -> linear V) trained by ``Trainer(distributed=True)``
  with the same global batch B for both K, T steps per chunk; tokens per second over the timed
  chunks (after warm-up chunks), and the time of the gradient all-reduce alone (one in-place
  ``MPI_Allreduce`` of the flat float32 gradient buffer, the only communication of a step besides
  a 16-byte reduction of the loss).

Model (printed as a table): a step of a K-way run costs
    t_K = t_1 / K + t_comm,     t_comm = 2 (K-1)/K * 4P / bw + 2 (K-1) * lat      (ring all-reduce)
with t_1 the step time of one process (B T tokens; proportional to P B T: measured here as
c = t_1 / (P B T) seconds per parameter-token), P parameters (4P bytes of gradient), bw the link's
bandwidth and lat its latency. The speed-up is t_1 / t_K; K machines pay off when t_comm is small
against t_1 / K. As both t_1 and the bytes grow with P, the ratio t_comm / (t_1 / K) depends on
the tokens per rank per step (B T / K), the speed of a rank and the network, far more than on
the model size; the latency term decides only for small models. Two tables: a rank as fast as one
core here (c measured), and a rank --node-speedup times faster (a cluster node).

  python bench/bench_mpi.py                       # both K, 3 repeats; prints figures and the model
  python bench/bench_mpi.py --hidden 256 --layers 2 --batch 32 --bptt 100 --chunks 6 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np


def _median_speed(rows) -> float:
    """The median tokens per second of a row of runs."""
    return statistics.median(x["tokens_per_s"] for x in rows)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--vocab", type=int, default=50)
    p.add_argument("--embed", type=int, default=64)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--batch", type=int, default=32, help="global batch B (streams over all ranks)")
    p.add_argument("--bptt", type=int, default=50)
    p.add_argument("--chunks", type=int, default=6, help="timed chunks per run")
    p.add_argument("--warmup", type=int, default=2, help="untimed chunks first")
    p.add_argument("--repeats", type=int, default=3, help="interleaved runs of K = 1 and 2")
    p.add_argument("--reduces", type=int, default=20, help="timed all-reduces of the gradient buffer")
    p.add_argument(
        "--node-speedup",
        type=float,
        default=30.0,
        help="second cost table: a rank computes this many times faster than one core here (default 30, "
        "a many-core cluster node)",
    )
    return p.parse_args(argv)


def worker(a) -> None:
    import multiscale_rnn as msr
    from multiscale_rnn.distributed import DataParallel

    msr.set_num_threads(1)
    dist = DataParallel()
    rng = np.random.default_rng(0)
    ids = rng.integers(0, a.vocab, a.batch * (a.bptt * (a.warmup + a.chunks) + 1)).astype(np.int32)
    model = msr.LSTM(a.vocab, embed_size=a.embed, hidden_sizes=(a.hidden,) * a.layers, seed=0)
    tr = msr.Trainer(model, clip_norm=1.0, batch_size=a.batch, bptt=a.bptt, progress=False, distributed=dist)
    tr.fit(ids, epochs=1, max_chunks=a.warmup)
    dist.comm.Barrier()
    t0 = time.perf_counter()
    tr.fit(ids, epochs=1, max_chunks=a.chunks)
    dist.comm.Barrier()
    seconds = time.perf_counter() - t0
    g = model.flat_gradients()
    times = []
    for _ in range(a.reduces):
        dist.comm.Barrier()
        t = time.perf_counter()
        dist.comm.Allreduce(dist.MPI.IN_PLACE, g, op=dist.MPI.SUM)
        times.append(time.perf_counter() - t)
    if dist.root:
        print(
            json.dumps(
                {
                    "ranks": dist.size,
                    "params": model.num_parameters,
                    "bytes": int(g.nbytes),
                    "tokens_per_s": a.batch * a.bptt * a.chunks / seconds,
                    "step_s": seconds / a.chunks,
                    "allreduce_s": statistics.median(times),
                }
            )
        )


def run(k: int, argv) -> dict:
    mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
    if mpiexec is None:
        sys.exit("no mpiexec: pip install mpi4py mpich (or the 'mpi' extra)")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run(
        [mpiexec, "-n", str(k), sys.executable, os.path.abspath(__file__), "--worker", *argv],
        capture_output=True,
        text=True,
        env=env,
    )
    if p.returncode:
        sys.exit(f"mpiexec -n {k} failed:\n{p.stdout}\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


NETWORKS = (
    ("1 Gb/s Ethernet", 0.125e9, 50e-6),
    ("10 Gb/s Ethernet", 1.25e9, 20e-6),
    ("100 Gb/s InfiniBand", 12.5e9, 2e-6),
)


def model_table(c: float, tokens: int, title: str) -> str:
    """Speed-up t_1 / t_K of the cost model for sizes, networks and K, at ``tokens`` = B T per step."""
    lines = [
        f"{title}: c = {c:.3g} s per parameter-token, B T = {tokens:,} tokens per step (global)",
        "",
        "| parameters | network | t_1 (ms) | K = 2 | K = 4 | K = 8 | K = 16 |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for P in (1e5, 1e6, 1e7, 5e7):
        t1 = c * P * tokens
        for name, bw, lat in NETWORKS:
            cells = []
            for k in (2, 4, 8, 16):
                comm = 2 * (k - 1) / k * 4 * P / bw + 2 * (k - 1) * lat
                cells.append(f"{t1 / (t1 / k + comm):.2f}")
            lines.append(f"| {P:,.0f} | {name} | {t1 * 1e3:,.1f} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "break-even: the bandwidth term equals t_1 / K at B T / K = 8 (K-1) / (K bw c) tokens per rank per step:",
    ]
    for name, bw, lat in NETWORKS:
        lines.append(f"  {name}: K = 2: {4 / (bw * c):,.0f} tokens per rank; large K: {8 / (bw * c):,.0f}")
    return "\n".join(lines)


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    a = parse_args(argv)
    if a.worker:
        return worker(a)
    print(
        f"LSTM V={a.vocab} E={a.embed} {a.layers} x H={a.hidden}, global batch B={a.batch}, T={a.bptt}, "
        f"{a.chunks} timed chunks, 1 thread per process; load average {os.getloadavg()[0]:.2f}"
    )
    rows = {1: [], 2: []}
    for _ in range(a.repeats):
        for k in (1, 2):
            rows[k].append(run(k, argv))
    best = {k: max(r, key=lambda x: x["tokens_per_s"]) for k, r in rows.items()}
    for k in (1, 2):
        med = statistics.median(x["tokens_per_s"] for x in rows[k])
        print(
            f"K={k}: {best[k]['tokens_per_s']:,.0f} tokens/s best, {med:,.0f} median; step "
            f"{best[k]['step_s'] * 1e3:.1f} ms; all-reduce of {best[k]['bytes']:,} bytes "
            f"{best[k]['allreduce_s'] * 1e6:,.0f} us"
        )
    print(
        f"speed-up K=2 / K=1: {best[2]['tokens_per_s'] / best[1]['tokens_per_s']:.2f} (best), "
        f"{_median_speed(rows[2]) / _median_speed(rows[1]):.2f} (median); "
        f"all-reduce share of a K=2 step: {best[2]['allreduce_s'] / best[2]['step_s']:.1%}; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    c = best[1]["step_s"] / (best[1]["params"] * a.batch * a.bptt)
    bw = best[2]["bytes"] / best[2]["allreduce_s"]
    print(f"all-reduce here (2 ranks, shared memory): {bw / 1e9:.2f} GB/s of gradient")
    print()
    print(model_table(c, 64 * 100, "cost model, a rank = one core of this machine (c measured above)"))
    print()
    print(
        model_table(
            c / a.node_speedup, 64 * 100, f"cost model, a rank = a node {a.node_speedup:g}x faster than one core here"
        )
    )


if __name__ == "__main__":
    main()
