"""Reduced-scale reproductions of Jernite et al. 2017, Table 3 (right): VCGRU with m_bar 0.3 / 0.4 / 0.5 on
a text8 prefix against GRUs, reporting test bits per character and the equivalent RNN dimension (RNN-d,
GRU counted as 2 Elman RNNs as in the paper's table).

Every model is trained for the same number of chunks (--chunks, batch 32 x 100 steps) with Adam 2e-3 and
gradient norm clipped to 1; the VC models use the l1 penalty (weight 0.01) and a sharpness raised linearly
from 0.5 to 1 over the run (the paper: 0.1, +0.1 per epoch, up to 1, over far longer runs). Validation and
test are the first --eval characters of their splits.

Usage: python bench/repro_vcrnn.py --data-path ../shared/data/text8_prefix [--hidden 128] [--chunks 600]
"""
from __future__ import annotations

import argparse
import math
import time

import multiscale_rnn as msr
from multiscale_rnn.models.vcrnn import corpus_equivalent_dim
from multiscale_rnn.trainer import evaluate


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-path", required=True)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--chunks", type=int, default=600)
    ap.add_argument("--eval", type=int, default=200_000)
    ap.add_argument("--targets", default="0.3,0.4,0.5")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    msr.set_num_threads(args.threads)
    corpus = msr.data.load("text8", path=args.data_path)
    D, V = args.hidden, corpus.vocab_size
    valid, test = corpus.valid[:args.eval], corpus.test[:args.eval]
    print(f"# text8 prefix: {len(corpus.train):,} training characters; {args.chunks} chunks of 32 x 100 per model "
          f"({32 * 100 * args.chunks:,} characters), {args.threads} thread(s)")
    print(f"# command: python bench/repro_vcrnn.py --data-path {args.data_path} --hidden {D} --chunks {args.chunks} "
          f"--eval {args.eval} --targets {args.targets}")
    runs = [("GRU", D, None), ("GRU", int(round(D * 0.6)), None)] + [
        ("VCGRU", D, float(t)) for t in args.targets.split(",")]
    print("\n| unit | m_bar | RNN-d | test bpc | mean m | seconds |\n| --- | --- | --- | --- | --- | --- |")
    for kind, H, target in runs:
        t0 = time.perf_counter()
        if kind == "GRU":
            model = msr.GRU(V, embed_size=H, hidden_sizes=(H,), seed=0)
            opts = {}
        else:
            model = msr.VCGRU(V, hidden_sizes=(H,), target=target, penalty_weight=0.01, seed=0)
            opts = {"sharpness": lambda epoch, step: min(1.0, 0.5 + 0.5 * step / args.chunks)}
        trainer = msr.Trainer(model, optimizer=msr.optim.Adam(2e-3), clip_norm=1.0, batch_size=32, bptt=100,
                              progress=False, model_options=opts or None)
        trainer.fit(corpus.train, epochs=1, max_chunks=args.chunks)
        bpc = evaluate(model, test, batch_size=16, bptt=100)["bpc"]
        if kind == "GRU":
            rnn_d, m = math.sqrt(2) * H, float("nan")
        else:
            rnn_d = corpus_equivalent_dim(model, test, batch_size=16, gates=2)
            model.forward(test[:2000][None])
            m = float(model.records()["m"].mean())
        print(f"| {kind}-{H} | {'-' if target is None else target} | {rnn_d:.0f} | {bpc:.3f} | "
              f"{'-' if m != m else f'{m:.2f}'} | {time.perf_counter() - t0:.0f} |", flush=True)


if __name__ == "__main__":
    main()
