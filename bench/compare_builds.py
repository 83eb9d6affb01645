#!/usr/bin/env python
"""Two builds of the package timed on the same workloads, interleaved: is the new one slower?

A refactor that moves code must not cost speed. This runs the core workloads of bench/bench_lstm.py,
bench/bench_hm_lstm.py and bench/bench_vcrnn.py (their default sizes, random tokens, weights seeded, the
public API only, so any two builds can run them) in a fresh process per (build, round). The builds
alternate within each round and swap order from one round to the next, so both see the same load of a
shared machine. Reported per workload: the fastest and the median time per call of each build, and the
new build's time over the old one's (< 1: faster).

A build is ``LABEL=PYTHON`` or ``LABEL=PYTHON:SRC``: the interpreter to run, and optionally a source tree
with the compiled modules beside the Python files, put first on PYTHONPATH (an installed copy of a fixed
commit):

    python bench/compare_builds.py --build old=/work/runs/venv/bin/python:/work/runs/src-2f8a155/src \\
        --build new=.venv/bin/python --rounds 5 --threads 1

Workloads (per call; B streams of T steps, vocabulary 50):
  lstm-train    LSTM E128 H512, B64 T100: loss_and_grad, state carried (bench_lstm.py's training step
                without the optimiser)
  lstm-infer    the same model: loss, state carried
  hm-lstm-train HM-LSTM E64 3 x 128, gradient "switch", boundary bias -2 (sparse upper layers, COPY
                skipped), B64 T100: loss_and_grad
  hm-lstm-infer the same: forward
  vcrnn-train   VCRNN D1024, B32 T50, skipping on: loss_and_grad
  vcrnn-infer   the same: forward
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

WORKLOADS = ["lstm-train", "lstm-infer", "hm-lstm-train", "hm-lstm-infer", "vcrnn-train", "vcrnn-infer"]
V = 50


def _model(name: str):
    import multiscale_rnn as msr

    family = name.rsplit("-", 1)[0]
    if family == "lstm":
        return msr.LSTM(vocab_size=V, embed_size=128, hidden_sizes=(512,), seed=0), 64, 100
    if family == "hm-lstm":
        model = msr.HMLSTM(V, 64, (128, 128, 128), gradient="switch", boundary_bias=-2.0, seed=0)
        return model, 64, 100
    return msr.VCRNN(vocab_size=V, hidden_sizes=(1024,), seed=0), 32, 50


def worker(name: str, calls: int) -> dict:
    """Times ``calls`` calls of one workload after one warm-up call; the times in seconds per call."""
    import numpy as np

    model, B, T = _model(name)
    data = np.random.default_rng(0).integers(0, V, (B, T + 1)).astype(np.int32)
    tok, tgt = np.ascontiguousarray(data[:, :T]), np.ascontiguousarray(data[:, 1:])
    model.reset_state(B)
    if name.endswith("train"):
        step = lambda: model.loss_and_grad(tok, tgt, "keep", copy_grads=False)  # noqa: E731
    elif name.startswith("hm-lstm") or name.startswith("vcrnn"):
        step = lambda: model.forward(tok)  # noqa: E731
    else:
        step = lambda: model.loss(tok, tgt, "keep")  # noqa: E731
    step()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return {"workload": name, "times": times}


def _run(build: str, name: str, calls: int, threads: int) -> list[float]:
    label, _, spec = build.partition("=")
    python, _, src = spec.partition(":")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    if src:
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    code = (
        f"import sys, json; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
        f"import multiscale_rnn as msr; msr.set_num_threads({threads}); "
        f"from compare_builds import worker; print(json.dumps(worker({name!r}, {calls})))"
    )
    p = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"error: build {label} ({python}) failed on {name}:\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])["times"]


def _where(build: str) -> str:
    python, _, src = build.partition("=")[2].partition(":")
    env = dict(os.environ, PYTHONPATH=src) if src else None
    code = "import multiscale_rnn as m, multiscale_rnn._native as n; print(m.__file__, n.ISA)"
    return subprocess.run([python, "-c", code], env=env, capture_output=True, text=True).stdout.strip()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", action="append", required=True, help="LABEL=PYTHON[:SRC], given twice: old, then new")
    p.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma-separated, of {', '.join(WORKLOADS)}")
    p.add_argument("--rounds", type=int, default=5, help="rounds, each running every build once (default 5)")
    p.add_argument("--calls", type=int, default=5, help="timed calls per process (default 5)")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    if len(a.build) != 2 or any("=" not in b for b in a.build):
        p.error("give --build LABEL=PYTHON[:SRC] twice: the old build, then the new one")
    names = a.workloads.split(",")
    unknown = sorted(set(names) - set(WORKLOADS))
    if unknown:
        p.error(f"unknown workloads {unknown}; choose from {WORKLOADS}")
    labels = [b.partition("=")[0] for b in a.build]
    from timing import cpu_name

    print(f"# {cpu_name()}, {a.threads} thread(s), {a.rounds} rounds x {a.calls} calls, builds interleaved")
    for label, b in zip(labels, a.build):
        print(f"#   {label}: {_where(b)}")
    times = {(n, label): [] for n in names for label in labels}
    for r in range(a.rounds):
        for n in names:
            order = list(zip(labels, a.build))
            for label, b in order if r % 2 == 0 else order[::-1]:
                times[(n, label)] += _run(b, n, a.calls, a.threads)
    old, new = labels
    print(f"| workload | {old} best (ms) | {old} median | {new} best (ms) | {new} median | {new}/{old} best | median |")
    print("|---|---|---|---|---|---|---|")
    for n in names:
        to, tn = times[(n, old)], times[(n, new)]
        bo, bn, mo, mn = min(to), min(tn), statistics.median(to), statistics.median(tn)
        ms = " | ".join(f"{1e3 * t:.1f}" for t in (bo, mo, bn, mn))
        print(f"| {n} | {ms} | {bn / bo:.3f} | {mn / mo:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
