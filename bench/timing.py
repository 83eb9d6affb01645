"""Timing shared by the benchmarks: step functions run interleaved, so that all of them see the
same load of a shared machine."""

from __future__ import annotations

import time

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
