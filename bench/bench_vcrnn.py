"""Benchmark: VCRNN/VCGRU skipped work (leading d_t x d_t blocks) against the same model computed densely
(every d_t = D) by the same kernels, against the masked full path, and against the masked model in PyTorch.

The model reads the text shipped with the package (The Devil's Dictionary), as bits (--bits) or
characters, lambda 1, eps 0.01. It is first TRAINED until its mean m_t is about --mean-m (0.3): Adam
(--lr), gradient norm clipped to 1, the symmetric l1 penalty with m_bar = --mean-m and weight
--penalty-weight, --train-chunks chunks of B x T on the first 90 % of the text (--checkpoint PATH keeps the
trained model: a path with {unit} in it, loaded when it exists, else written after training). The timed
batch comes from the last 10 % (not trained on). Then:

1. d_t is measured on the timed batch (``records()["d"]``) and the ideal speedup of skipping over
   masking is sum_t D^2 / sum_t d_t^2 (the recurrent matrix work; the scheduler, elementwise work,
   embedding and softmax are not skipped). A second ideal also counts the softmax head (V D per column
   in the forward) and the scheduler (2 D), both never skipped:
   ideal_model = (G D^2 + 2 D + V D) / (G mean d_t^2 + 2 D + V D)   (per column, forward multiplications).
2. Inference (evaluation forward) and a training step (forward + backward) are timed with ``skip``
   on and off on the same model and data (best of --repeat, the two alternating), and the masked model in PyTorch
   (``multiscale_rnn.reference.vcrnn``, float32, the same thread count).
3. --staircase also times the skipped path through the plain kernels (``set_reference_kernels``: the
   staircase of Eigen products, one thread), interleaved with the others: the skipped path before the
   packed leading-block products of the VCRNN.
4. The same model with every d_t forced to D ("dense": the scheduler bias set to +50, so m_t = 1, through
   the same skipped path and kernels with nothing to skip) is timed interleaved with the others: the
   fastest dense computation of the same model, the fair baseline of the skipping. The "% of ideal vs
   dense" columns give (dense / skip) / ideal from the best times of the repeats and from their medians.
5. --breakdown prints where the time of each path goes, from the core's "time" record (seconds per phase:
   scheduler, operands, recurrent products, pointwise, weight packing, weight gradients), with the rate of
   the recurrent products (multiplications of the leading q x q blocks, q = d_t rounded up to the block).

Usage: python bench/bench_vcrnn.py [--hidden 1024] [--batch 32] [--bptt 50] [--threads 1] [--bits]
       [--train-chunks 200] [--checkpoint /tmp/vc_{unit}.npz] [--staircase] [--breakdown]
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

import multiscale_rnn as msr
from multiscale_rnn import checkpoint as ckpt
from multiscale_rnn._native import ISA
from multiscale_rnn._native import core as _core
from multiscale_rnn.data.loaders import embedded_text

# Rows of the core's "time" record (VCPhase in cpp/include/msrnn/cores/vcrnn.hpp), forward then backward.
PHASES = ("scheduler", "operands", "products", "pointwise", "pack")
FWD_ROWS = dict(zip(PHASES, range(5)))
BWD_ROWS = dict(zip(PHASES + ("weight grads",), range(5, 11)))


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def train_model(cls, unit, V, D, train_ids, args):
    """The unit trained towards mean m = args.mean_m (or loaded from args.checkpoint)."""
    path = args.checkpoint.format(unit=unit) if args.checkpoint else None
    if path and os.path.exists(path):
        model = ckpt.load(path).model
        if (model.core_name, model.hidden_size, model.vocab_size) != (unit, D, V):
            raise SystemExit(
                f"{path} holds {model.core_name} D={model.hidden_size} V={model.vocab_size}, "
                f"not {unit} D={D} V={V}: remove it or give another --checkpoint"
            )
        model.train_bits = float("nan")
        print(f"# {unit}: loaded {path}", flush=True)
        return model
    model = cls(
        V, hidden_sizes=(D,), seed=0, target=args.mean_m, penalty_weight=args.penalty_weight, sharpness=1.0, eps=0.01
    )
    trainer = msr.Trainer(
        model, optimizer=msr.optim.Adam(args.lr), clip_norm=1.0, batch_size=args.batch, bptt=args.bptt, progress=False
    )
    t0 = time.perf_counter()
    events = []
    trainer.fit(train_ids, epochs=1, max_chunks=args.train_chunks, log=events.append)
    last = [e["bpc"] for e in events if e.get("event") == "chunk"][-10:]
    model.train_bits = float(np.mean(last)) if last else float("nan")
    model.forward(train_ids[: 20 * args.bptt].reshape(20, -1))
    print(
        f"# {unit}: trained {args.train_chunks} chunks in {time.perf_counter() - t0:.0f} s; bits/token over the "
        f"last 10 chunks {model.train_bits:.3f}; mean m on training text {model.records()['m'].mean():.3f}",
        flush=True,
    )
    if path:
        ckpt.save(path, model)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--bptt", type=int, default=50)
    ap.add_argument("--mean-m", type=float, default=0.3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--units", default="vcrnn,vcgru")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--train-chunks", type=int, default=200, help="training chunks (B x T) before timing")
    ap.add_argument(
        "--lr",
        type=float,
        default=1e-4,
        help="Adam step; an Elman unit of 1024 on bits diverges at 1e-3 (m then collapses to 0)",
    )
    ap.add_argument(
        "--penalty-weight",
        type=float,
        default=1.0,
        help="weight of the l1 penalty; 0.01 lets m drift far from m_bar in so short a run",
    )
    ap.add_argument(
        "--checkpoint",
        default=None,
        help="trained model per unit, e.g. /tmp/vc_{unit}.npz: loaded when present, else saved",
    )
    ap.add_argument(
        "--staircase",
        action="store_true",
        help="also time the skipped path through the plain kernels (the staircase of Eigen products)",
    )
    ap.add_argument("--breakdown", action="store_true", help="print the time per phase of each path")
    ap.add_argument(
        "--bits",
        action="store_true",
        help="read the text as bits (8 per character, V = 2, the paper's bit-level task): the "
        "softmax head becomes negligible and the timings show the recurrent core",
    )
    args = ap.parse_args()
    msr.set_num_threads(args.threads)

    text = embedded_text()
    if args.bits:
        symbols = ["0", "1"]
        ids = np.unpackbits(np.frombuffer(text[:200_000].encode("ascii", "replace"), dtype=np.uint8)).astype(np.int64)
    else:
        symbols = sorted(set(text))
        ids = np.array([symbols.index(c) for c in text[:200_000]], dtype=np.int64)
    V, D, B, T = len(symbols), args.hidden, args.batch, args.bptt
    rng = np.random.default_rng(0)
    split = int(0.9 * len(ids))
    train_ids, held = ids[:split], ids[split:]
    starts = split + rng.integers(0, len(held) - T - 1, B)
    tok = np.stack([ids[s : s + T] for s in starts])
    tgt = np.stack([ids[s + 1 : s + T + 1] for s in starts])
    print(
        f"# VC benchmark: D={D}, B={B}, T={T}, V={V}, threads={args.threads}, trained towards mean m {args.mean_m};"
        f" module {ISA}; load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"# command: python bench/bench_vcrnn.py --hidden {D} --batch {B} --bptt {T} --threads {args.threads}"
        f" --repeat {args.repeat} --train-chunks {args.train_chunks} --lr {args.lr} --penalty-weight"
        f" {args.penalty_weight} --mean-m {args.mean_m}"
        + (" --bits" if args.bits else "")
        + (f" --checkpoint {args.checkpoint}" if args.checkpoint else "")
        + (" --staircase" if args.staircase else "")
        + (" --breakdown" if args.breakdown else "")
    )
    rows = []
    breakdowns = []
    for unit in args.units.split(","):
        cls = {"vcrnn": msr.VCRNN, "vcgru": msr.VCGRU}[unit]
        G = 3 if unit == "vcgru" else 1
        model = train_model(cls, unit, V, D, train_ids, args)
        _, state = model.forward(tok)  # a realistic state: after reading the batch once
        model.forward(tok, state)
        d = model.records()["d"][0].astype(np.float64)
        m = model.records()["m"][0]
        ideal = D * D / np.mean(d * d)
        ideal_model = (G * D * D + 2 * D + V * D) / (G * np.mean(d * d) + 2 * D + V * D)
        # skip and mask alternate within each repeat, so that a burst of load from other work on a shared
        # machine slows both alike; the best of each is kept
        q = np.minimum(D, np.ceil(d / model.config["block"]) * model.config["block"])
        # paths: (name, skip, plain kernels, scheduler bias or None); "dense" is the skipped path with every
        # d_t = D (the scheduler bias set to +50 so that m_t = 1): the same code and kernels, nothing to skip
        paths = [("skip", True, False, None), ("dense", True, False, 50.0), ("mask", False, False, None)]
        paths += [("stair", True, True, None)] if args.staircase else []
        bias = model.parameters()["sched_bias_l0"]
        bias0 = bias.copy()
        res, phases, walls = {}, {}, {}  # best seconds, its phase record, every repeat's seconds
        try:
            for _ in range(args.repeat):
                for path, skip, plain, b in paths:
                    model.set_option("skip", float(skip))
                    _core.set_reference_kernels(plain)
                    bias[...] = bias0 if b is None else b
                    for k, fn in (
                        ("infer", lambda: model.forward(tok, state)),
                        ("train", lambda: model.loss_and_grad(tok, tgt, state, copy_grads=False)),
                    ):
                        wall = best(fn, 1)
                        walls.setdefault((k, path), []).append(wall)
                        if wall < res.get((k, path), math.inf):
                            res[(k, path)] = wall
                            phases[(k, path)] = model.records()["time"].sum(axis=1)
                    if b is not None:
                        assert (model.records()["d"] == D).all()
        finally:
            _core.set_reference_kernels(False)
            model.set_option("skip", 1.0)
            bias[...] = bias0
        line = dict(
            unit=unit,
            train_bits=model.train_bits,
            m=float(m.mean()),
            d=float(d.mean()),
            ideal=ideal,
            ideal_model=ideal_model,
            **{f"{k}_{p}": v for (k, p), v in res.items()},
            **{f"{k}_{p}_median": float(np.median(v)) for (k, p), v in walls.items()},
        )
        for (k, path), sec in phases.items():
            # multiplications of the recurrent products per pass: G (U and W) blocks per column, forward and
            # (training) backward; the rate counts 2 flops per multiplication
            qq = q if path not in ("mask", "dense") else np.full_like(q, D)
            mults = 2 * G * np.sum(qq * qq) * (2 if k == "train" else 1)
            breakdowns.append((unit, k, path, res[(k, path)], sec, mults))
        if not args.no_torch:
            import torch

            from multiscale_rnn.reference import vcrnn as ref

            torch.set_num_threads(args.threads)
            P = ref.tensors(model.parameters(), torch.float32, requires_grad=True)
            tk = torch.as_tensor(tok)
            tg = torch.as_tensor(tgt).reshape(-1)
            st = {"h_l0": torch.tensor(state["h_l0"], dtype=torch.float32)}

            def t_infer():
                with torch.no_grad():
                    ref.forward(P, model.config, tk, st)

            def t_train():
                for p in P.values():
                    p.grad = None
                logits, _, rec = ref.forward(P, model.config, tk, st)
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), tg)
                loss = (
                    loss + model.config["penalty_weight"] * ref.penalty(rec["m"], "l1", model.config["target"]).mean()
                )
                loss.backward()

            line["infer_torch"] = best(t_infer, max(2, args.repeat // 2))
            line["train_torch"] = best(t_train, max(2, args.repeat // 2))
        rows.append(line)

    print()
    print(
        f"Skipped path against the same model with every d_t = D through the same kernels (dense), best of "
        f"{args.repeat} interleaved repeats (median in brackets):"
    )
    print()
    print("| unit | mean m | ideal (D²/d²) | pass | skip ms | dense ms | dense / skip | % of ideal vs dense |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        for k in ("infer", "train"):
            sp, spm = (r[f"{k}_dense{x}"] / r[f"{k}_skip{x}"] for x in ("", "_median"))
            print(
                f"| {r['unit']} | {r['m']:.3f} | {r['ideal']:.2f} | {k} | {1e3 * r[f'{k}_skip']:.1f} "
                f"({1e3 * r[f'{k}_skip_median']:.1f}) | {1e3 * r[f'{k}_dense']:.1f} "
                f"({1e3 * r[f'{k}_dense_median']:.1f}) | {sp:.2f} ({spm:.2f}) | "
                f"{100 * sp / r['ideal']:.0f} % ({100 * spm / r['ideal']:.0f} %) |"
            )
    print()
    print("Skipped path against the masked full path (skip=False) and against PyTorch, best of the repeats:")
    print()
    print(
        "| unit | mean m | mean d_t | ideal (D²/d²) | ideal incl. head | pass | skip ms | mask ms | speedup | "
        "% of ideal | PyTorch ms | skip vs PyTorch |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        for k in ("infer", "train"):
            sp = r[f"{k}_mask"] / r[f"{k}_skip"]
            tt = r.get(f"{k}_torch")
            print(
                f"| {r['unit']} | {r['m']:.3f} | {r['d']:.1f} | {r['ideal']:.2f} | {r['ideal_model']:.2f} | {k} | "
                f"{1e3 * r[f'{k}_skip']:.1f} | {1e3 * r[f'{k}_mask']:.1f} | {sp:.2f} | {100 * sp / r['ideal']:.0f} % | "
                + (f"{1e3 * tt:.1f} | {tt / r[f'{k}_skip']:.1f}x |" if tt else "- | - |")
            )
    if args.staircase:
        print()
        print("Skipped path through the plain kernels (staircase of Eigen products) against the default one:")
        print()
        print("| unit | pass | plain skip ms | skip ms | plain % of ideal | % of ideal |")
        print("| --- | --- | --- | --- | --- | --- |")
        for r in rows:
            for k in ("infer", "train"):
                print(
                    f"| {r['unit']} | {k} | {1e3 * r[f'{k}_stair']:.1f} | {1e3 * r[f'{k}_skip']:.1f} | "
                    f"{100 * r[f'{k}_mask'] / r[f'{k}_stair'] / r['ideal']:.0f} % | "
                    f"{100 * r[f'{k}_mask'] / r[f'{k}_skip'] / r['ideal']:.0f} % |"
                )
    if args.breakdown:
        print()
        print('Time per phase (ms, from the core\'s "time" record, forward + backward; the fastest repeat):')
        print()
        names = PHASES + ("weight grads",)
        print("| unit | pass | path | wall ms | " + " | ".join(names) + " | rest | product GFLOP/s |")
        print("| --- | --- | --- | --- | " + " | ".join("---" for _ in names) + " | --- | --- |")
        for unit, k, path, wall, sec, mults in breakdowns:
            per = {
                n: sec[FWD_ROWS[n]] + (sec[BWD_ROWS[n]] if k == "train" else 0.0)
                if n in FWD_ROWS
                else (sec[BWD_ROWS[n]] if k == "train" else 0.0)
                for n in names
            }
            rest = wall - sum(per.values())
            rate = 2 * mults / per["products"] / 1e9 if per["products"] > 0 else float("nan")
            print(
                f"| {unit} | {k} | {path} | {1e3 * wall:.1f} | "
                + " | ".join(f"{1e3 * per[n]:.1f}" for n in names)
                + f" | {1e3 * rest:.1f} | {rate:.1f} |"
            )


if __name__ == "__main__":
    main()
