"""Reduced-scale reproductions of Jernite et al. 2017 (VCRNN/VCGRU), one task per run (--task):

- ``ptb``: Table 3 left, character-level Penn Treebank: VCRNN-D and VCGRU-D against Elman, GRU and LSTM
  of size D and of the VC models' measured equivalent dimension (RNN-d: an Elman RNN of size n counts
  n, a GRU of size n counts sqrt(2) n and an LSTM 2 n, as in the paper's table).
- ``text8``: Table 3 right, VCGRU-D with m_bar 0.3 / 0.4 / 0.5 on the text8 prefix against GRU-D and a
  smaller GRU.
- ``music``: Table 1 and Table 2, Nottingham folk tunes (standing in for the paper's Irish tunes):
  VCRNN-D against Elman RNNs of size D/2 and of its RNN-d, test perplexity per symbol, and the mean m_t
  per symbol class (bar lines, rests, note lengths) on the validation tunes.
- ``bits``: Table 3 middle and Figure 2, bit-level Penn Treebank with 0, 8 and 24 buffer bits: VCRNN-D
  (and, without buffer, Elman RNNs of size D and of the VCRNN's RNN-d), bits per bit, and the per-bit
  profile (activity of the top 5 % of the dimensions, and m_t) drawn to --figure (a PNG).

Every model is trained for the same number of chunks (--chunks of --batch x --bptt steps: a prefix of the
training split, or several passes over a small one; not to convergence) with Adam --lr and the
gradient norm clipped to 1.
The VC models use the symmetric l1 penalty (weight --penalty-weight, target m_bar) and a sharpness
raised linearly from 0.5 to 1 over the run (the paper: 0.1, +0.1 per epoch, up to 1, over full runs).
Validation and test figures are on the first --eval tokens of their splits.

Usage: python bench/repro_vcrnn.py --task ptb --data-path ../shared/data/ptb [--hidden 128] [--chunks 300]
"""

from __future__ import annotations

import argparse
import math
import time

import multiscale_rnn as msr
from multiscale_rnn import analysis
from multiscale_rnn.models.vcrnn import corpus_equivalent_dim
from multiscale_rnn.trainer import evaluate

GATES = {"Elman": 1.0, "GRU": math.sqrt(2), "LSTM": 2.0}  # RNN-d of a unit of size n, in units of n


def build(kind, V, H, seed, target=None):
    if kind == "VCRNN":
        return msr.VCRNN(V, hidden_sizes=(H,), target=target, penalty_weight=ARGS.penalty_weight, seed=seed)
    if kind == "VCGRU":
        return msr.VCGRU(V, hidden_sizes=(H,), target=target, penalty_weight=ARGS.penalty_weight, seed=seed)
    cls = {"Elman": msr.ElmanRNN, "GRU": msr.GRU, "LSTM": msr.LSTM}[kind]
    return cls(V, embed_size=H, hidden_sizes=(H,), seed=seed)


def train_and_test(kind, corpus, H, target=None, label=None):
    """Train one model; returns (model, row dict) with the test bits, RNN-d, mean m and seconds."""
    t0 = time.perf_counter()
    model = build(kind, corpus.vocab_size, H, ARGS.seed, target)
    opts = None
    if kind.startswith("VC"):
        opts = {"sharpness": lambda epoch, step: min(1.0, 0.5 + 0.5 * step / ARGS.chunks)}
    trainer = msr.Trainer(
        model,
        optimizer=msr.optim.Adam(ARGS.lr),
        clip_norm=1.0,
        batch_size=ARGS.batch,
        bptt=ARGS.bptt,
        progress=False,
        model_options=opts,
    )
    per_epoch = max(1, len(corpus.train) // (ARGS.batch * ARGS.bptt))  # a small corpus: several passes
    trainer.fit(corpus.train, epochs=ARGS.chunks // per_epoch + 1, max_chunks=ARGS.chunks)
    test = corpus.test[: ARGS.eval]
    r = evaluate(model, test, batch_size=16, bptt=100)
    row = dict(unit=label or f"{kind}-{H}", target=target, bits=r["bpc"], perplexity=r["perplexity"])
    if kind.startswith("VC"):
        row["rnn_d"] = corpus_equivalent_dim(model, test, batch_size=16, gates=2 if kind == "VCGRU" else None)
        model.forward(test[:4000][None])
        row["m"] = float(model.records()["m"].mean())
    else:
        row["rnn_d"], row["m"] = GATES[kind] * H, float("nan")
    row["seconds"] = time.perf_counter() - t0
    print(
        f"| {row['unit']} | {'-' if target is None else target} | {row['rnn_d']:.0f} | {row['bits']:.3f} | "
        f"{row['perplexity']:.2f} | {'-' if row['m'] != row['m'] else format(row['m'], '.2f')} | "
        f"{row['seconds']:.0f} |",
        flush=True,
    )
    return model, row


def header():
    print(
        "\n| unit | m_bar | RNN-d | test bits/token | test perplexity | mean m | seconds |\n"
        "| --- | --- | --- | --- | --- | --- | --- |",
        flush=True,
    )


def task_ptb():
    corpus = msr.data.load("ptb-char", path=ARGS.data_path)
    D = ARGS.hidden
    header()
    for kind in ("Elman", "GRU", "LSTM"):
        train_and_test(kind, corpus, D)
    for kind, others in (("VCRNN", ("Elman", "GRU", "LSTM")), ("VCGRU", ("GRU", "LSTM"))):
        _, row = train_and_test(kind, corpus, D, ARGS.target)
        for other in others:  # the same equivalent dimension
            H = max(1, int(round(row["rnn_d"] / GATES[other])))
            train_and_test(other, corpus, H, label=f"{other}-{H} (RNN-d of {kind})")


def task_text8():
    corpus = msr.data.load("text8", path=ARGS.data_path)
    D = ARGS.hidden
    header()
    train_and_test("GRU", corpus, D)
    train_and_test("GRU", corpus, int(round(0.6 * D)))
    for t in ARGS.targets.split(","):
        train_and_test("VCGRU", corpus, D, float(t))


def task_music():
    corpus = msr.data.load("nottingham", path=ARGS.data_path)
    D = ARGS.hidden
    header()
    model, row = train_and_test("VCRNN", corpus, D, ARGS.target)
    train_and_test("Elman", corpus, D // 2)
    train_and_test("Elman", corpus, max(1, int(round(row["rnn_d"]))))
    trace = model.trace(corpus.valid[: ARGS.eval])
    for by in ("kind", "length"):
        means, counts = analysis.music_computation(trace, corpus.vocab, by=by, counts=True)
        print(f"\nmean m_t per symbol {by} (validation, {len(trace.m)} symbols):\n")
        print("| class | " + " | ".join(map(str, means)) + " |")
        print("| --- | " + " | ".join("---" for _ in means) + " |")
        print("| mean m | " + " | ".join(f"{v:.2f}" for v in means.values()) + " |")
        print("| steps | " + " | ".join(str(counts[k]) for k in means) + " |", flush=True)


def task_bits():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from multiscale_rnn import plot

    buffers = [int(b) for b in ARGS.buffers.split(",")]
    fig, axes = plt.subplots(len(buffers), 2, figsize=(13, 2.6 * len(buffers)), squeeze=False)
    header()
    for (a1, a2), buf in zip(axes, buffers):
        corpus = msr.data.load("ptb-bits", path=ARGS.data_path, buffer_bits=buf)
        model, row = train_and_test(
            "VCRNN", corpus, ARGS.hidden, ARGS.target, label=f"VCRNN-{ARGS.hidden}, {buf} buffer bits"
        )
        if buf == 0:
            train_and_test("Elman", corpus, ARGS.hidden)
            H = max(1, int(round(row["rnn_d"])))
            train_and_test("Elman", corpus, H, label=f"Elman-{H} (RNN-d of the VCRNN)")
        n = min(ARGS.eval, len(corpus.valid))
        trace = model.trace(corpus.valid[:n])
        pos = corpus.positions["valid"][:n]
        for top, what in ((0.05, "activity of the top 5 % of the dimensions"), (None, "m_t")):
            prof = analysis.bit_position_profile(trace, positions=pos, buffer_bits=buf, top=top)
            print(
                f"{buf} buffer bits, {what} by position in the frame: "
                + ", ".join(f"{k}: {v:.2f}" for k, v in prof.items()),
                flush=True,
            )
        plot.bit_profile(trace, positions=pos, buffer_bits=buf, ax=a1)
        a1.set_title(f"VCRNN-{ARGS.hidden}, bit-level PTB, {buf} buffer bits: top 5 % of the dimensions", fontsize=9)
        plot.bit_profile(trace, positions=pos, buffer_bits=buf, top=None, ax=a2)
        a2.set_title(f"{buf} buffer bits: mean m_t", fontsize=9)
    fig.tight_layout()
    fig.savefig(ARGS.figure, dpi=90)
    print(f"figure: {ARGS.figure}")


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", required=True, choices=("ptb", "text8", "music", "bits"))
    ap.add_argument("--data-path", required=True)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--chunks", type=int, default=300)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--bptt", type=int, default=100)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--penalty-weight", type=float, default=0.05)
    ap.add_argument("--target", type=float, default=0.3, help="m_bar (ptb, music, bits)")
    ap.add_argument("--targets", default="0.3,0.4,0.5", help="m_bar values (text8)")
    ap.add_argument("--buffers", default="0,8,24", help="buffer bits (bits)")
    ap.add_argument("--figure", default="docs/models/figures/vcrnn_bits.png", help="PNG of the per-bit profiles")
    ap.add_argument("--eval", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ARGS = ap.parse_args()
    msr.set_num_threads(ARGS.threads)
    tokens = ARGS.chunks * ARGS.batch * ARGS.bptt
    print(
        f"# task {ARGS.task}: every model {ARGS.chunks} chunks of {ARGS.batch} x {ARGS.bptt} ({tokens:,} tokens), "
        f"D = {ARGS.hidden}, {ARGS.threads} thread(s)"
    )
    print(
        "# command: python bench/repro_vcrnn.py "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(ARGS).items())
    )
    {"ptb": task_ptb, "text8": task_text8, "music": task_music, "bits": task_bits}[ARGS.task]()


ARGS = None

if __name__ == "__main__":
    main()
