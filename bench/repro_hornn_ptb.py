"""Reduced-scale reproduction of the HORNN paper's PTB experiments (Soltani & Jiang 2016): test
perplexity against order for each pooling (Table 2, with the order-1 RNN of Table 3) and against
FOFE's forgetting factor alpha (Figure 6), on PTB words with the class-based softmax and the
paper's recipe (docs/training.md): N(0, 0.1^2) init, SGD with momentum 0.9 (lr 0.05, the paper's
0.5 without momentum), weight decay 1e-5, clipping by value at 5, column normalisation at 2.0,
batch 20, BPTT 30, learning rate halved when the validation loss does not decrease.

Reduced: H units (default 100, the paper's 400), the first --train-tokens training words, --epochs
epochs; the full validation and test sets. Not a benchmark: it prints a table of perplexities.

    python bench/repro_hornn_ptb.py --data ../shared/data/ptb                 # Table 2 and Figure 6
    python bench/repro_hornn_ptb.py --data ../shared/data/ptb --only table2 --orders 1,2,3
    python bench/repro_hornn_ptb.py --data ../shared/data/ptb --only reach --figure reach.png

``--only reach`` measures the motivation of the paper's Figures 2-3 instead: ||dL_t/dh_{t-k}||
against k (``analysis.gradient_reach``) of an RNN and plain HORNNs of order 2-4 at the paper's
initialisation (no training), printed relative to k = 0 and drawn with ``--figure``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import multiscale_rnn as msr
from multiscale_rnn import data, init, optim, schedules

STOP_IMPROVEMENT = math.log(1.003)  # an epoch "improves" when valid perplexity falls by more than 0.3 %


def should_stop(valid_losses) -> bool:
    """The stopping rule (our reading; the paper names the halving, not when to stop): the learning
    rate is halved after every epoch whose validation loss does not improve (ReduceOnPlateau), and
    training stops after the second epoch that improves the validation perplexity by less than 0.3 %
    (as Mikolov's RNNLM toolkit, whose schedule the paper follows on text8), or after --epochs."""
    misses = sum(1 for a, b in zip(valid_losses, valid_losses[1:]) if a - b < STOP_IMPROVEMENT)
    return misses >= 2


def run(corpus, classes, args, pooling="plain", order=1, alpha=None):
    kw = dict(order=order, pooling=pooling, activation="sigmoid", seed=args.seed, head="class", head_classes=classes)
    if alpha is not None:
        kw["alpha"] = alpha
    model = msr.HORNN(corpus.vocab_size, args.hidden, (args.hidden,), **kw)
    init.gaussian(model, 0.1, rng=args.seed)
    trainer = msr.Trainer(
        model,
        optim.SGD(args.lr, momentum=0.9, weight_decay=1e-5),
        clip_value=5.0,
        batch_size=20,
        bptt=30,
        unit="word",
        progress=args.progress,
        lr_schedule=schedules.ReduceOnPlateau(factor=2.0, patience=0),
        constraint=optim.ColumnNorm(2.0),
    )
    t0 = time.perf_counter()
    train = corpus.train[: args.train_tokens]
    if args.checkpoints is None:
        trainer.fit(train, valid=corpus.valid, epochs=args.epochs)
        epochs = args.epochs
    else:  # one epoch a call, from the model's checkpoint: an interrupted run goes on where it stopped
        label = f"{pooling}-N{order}" + ("" if alpha is None else f"-alpha{alpha}")
        ck = Path(args.checkpoints) / f"{label}-H{args.hidden}-seed{args.seed}.npz"
        for epochs in range(1, args.epochs + 1):
            history = trainer.fit(train, valid=corpus.valid, epochs=epochs, checkpoint=ck, resume="auto")
            if should_stop([r["valid_loss"] for r in history]):
                break
    valid = msr.evaluate(model, corpus.valid, batch_size=20, bptt=30)["perplexity"]
    test = msr.evaluate(model, corpus.test, batch_size=20, bptt=30)["perplexity"]
    return valid, test, time.perf_counter() - t0, epochs


def finished(corpus, classes, args, pooling, order, alpha=None):
    """``run``'s (valid, test, seconds); with --checkpoints, read from DIR/results.jsonl when that model
    finished before, else trained and appended there (with its epochs, CPU and module)."""
    if args.checkpoints is None:
        return run(corpus, classes, args, pooling, order, alpha)[:3]
    from timing import cpu_name

    from multiscale_rnn._native import ISA

    key = dict(
        pooling=pooling,
        order=order,
        alpha=alpha,
        hidden=args.hidden,
        seed=args.seed,
        train_tokens=min(args.train_tokens, len(corpus.train)),
        max_epochs=args.epochs,
        lr=args.lr,
    )
    results = Path(args.checkpoints) / "results.jsonl"
    if results.exists():
        for line in results.read_text().splitlines():
            r = json.loads(line)
            if all(r.get(k) == v for k, v in key.items()):
                return r["valid"], r["test"], r["seconds"]
    Path(args.checkpoints).mkdir(parents=True, exist_ok=True)
    valid, test, sec, epochs = run(corpus, classes, args, pooling, order, alpha)
    with open(results, "a") as f:
        f.write(
            json.dumps(
                dict(
                    key,
                    valid=valid,
                    test=test,
                    seconds=sec,
                    epochs=epochs,
                    cpu=cpu_name(),
                    isa=ISA,
                    threads=args.threads,
                )
            )
            + "\n"
        )
    return valid, test, sec


def reach(corpus, classes, args, orders, max_lag=20):
    """Gradient reach at initialisation, the same 32 positions of the validation text for every order."""
    from multiscale_rnn import analysis

    models = {}
    for order in orders:
        m = msr.HORNN(
            corpus.vocab_size,
            args.hidden,
            (args.hidden,),
            order=order,
            activation="sigmoid",
            seed=args.seed,
            head="class",
            head_classes=classes,
        )
        init.gaussian(m, 0.1, rng=args.seed)
        models["RNN" if order == 1 else f"HORNN N={order}"] = m
    curves = analysis.compare_reach(models, corpus.valid, max_lag=max_lag, num_samples=32, warmup=20, seed=args.seed)
    lags = [k for k in (1, 2, 5, 10, 15, 20) if k <= max_lag]
    print(
        f"\n||dL_t/dh_(t-k)|| / (k = 0) at initialisation, mean of 32 positions\n{'model':12s} "
        + " ".join(f"{'k=' + str(k):>8s}" for k in lags)
    )
    for label, curve in curves.items():
        rel = analysis.relative_reach(curve)
        print(f"{label:12s} " + " ".join(f"{rel[k]:8.1e}" for k in lags))
    if args.figure:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3.2))
        msr.plot.gradient_reach(curves, ax=ax).set_title(f"PTB words, H = {args.hidden}, sigmoid, N(0, 0.1²) init")
        fig.tight_layout()
        fig.savefig(args.figure, dpi=80)
        print(f"wrote {args.figure}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="../shared/data/ptb", help="folder of ptb.{train,valid,test}.txt")
    ap.add_argument("--hidden", type=int, default=100)
    ap.add_argument("--train-tokens", type=int, default=300_000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--orders", default="1,2,3,4")
    ap.add_argument("--poolings", default="plain,max,fofe,gated")
    ap.add_argument("--alphas", default="0.2,0.4,0.6,0.8,0.9")
    ap.add_argument("--only", choices=["table2", "figure6", "reach"], default=None)
    ap.add_argument("--figure", default=None, help="with --only reach: write the plot to this PNG")
    ap.add_argument(
        "--checkpoints",
        default=None,
        metavar="DIR",
        help="train one epoch a call from a checkpoint per model in DIR (resumes after an interruption), "
        "stop by the stopping rule (should_stop), and append each finished model's figures to "
        "DIR/results.jsonl; models already there are not trained again",
    )
    ap.add_argument("--progress", action="store_true", help="a progress bar per epoch")
    args = ap.parse_args(argv)
    msr.set_num_threads(args.threads)
    corpus = data.load("ptb-word", path=args.data).by_frequency()
    classes = data.class_sizes(corpus.counts())
    print(
        f"PTB words: vocabulary {corpus.vocab_size}, {len(classes)} classes; training on the first "
        f"{min(args.train_tokens, len(corpus.train)):,} of {len(corpus.train):,} words, {args.epochs} epochs, "
        f"H = {args.hidden}, sigmoid, lr {args.lr} momentum 0.9, {args.threads} thread(s), seed {args.seed}"
    )
    orders = [int(o) for o in args.orders.split(",")]
    if args.only == "reach":
        return reach(corpus, classes, args, orders)
    if args.only in (None, "table2"):
        print(
            f"\nTable 2: test perplexity (valid in brackets) against order\n{'pooling':8s} "
            + " ".join(f"{'N=' + str(o):>16s}" for o in orders)
        )
        done_rnn = None
        for pooling in args.poolings.split(","):
            cells = []
            for order in orders:
                if order == 1 and done_rnn is not None:  # every pooling of one path is the RNN (FOFE: alpha h)
                    if pooling in ("plain", "max"):
                        cells.append(done_rnn)
                        continue
                valid, test, sec = finished(corpus, classes, args, pooling, order)
                cell = f"{test:7.1f} ({valid:6.1f})"
                if order == 1 and pooling == "plain":
                    done_rnn = cell
                cells.append(cell)
                print(f"  [{pooling} N={order}: test {test:.1f} valid {valid:.1f}, {sec:.0f} s]", flush=True)
            print(f"{pooling:8s} " + " ".join(f"{c:>16s}" for c in cells), flush=True)
    if args.only in (None, "figure6"):
        print("\nFigure 6: 3rd-order FOFE HORNN, test perplexity (valid) against alpha")
        for a in (float(a) for a in args.alphas.split(",")):
            valid, test, sec = finished(corpus, classes, args, "fofe", 3, alpha=a)
            print(f"alpha {a:4.2f} {test:7.1f} ({valid:6.1f})   [{sec:.0f} s]", flush=True)


if __name__ == "__main__":
    main()
