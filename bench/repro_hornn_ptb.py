"""Reduced-scale reproduction of the HORNN paper's PTB experiments (Soltani & Jiang 2016): test perplexity
against order for each pooling (Table 2, with the order-1 RNN of Table 3) and against FOFE's forgetting
factor alpha (Figure 6), on PTB words with the class-based softmax (``--head linear``: the full softmax of
the paper's eq. 2) and the paper's recipe (docs/training.md): N(0, 0.1^2) init, SGD with momentum 0.9 and
the paper's lr 0.5 (``reproduce.hornn.HornnSettings.lr``), weight decay 1e-5, clipping by value at 5, column
normalisation at 4.0, batch 20, BPTT 30, the RNNLM toolkit's schedule (reproduce.hornn.schedule: halved
after the first miss and every epoch after).

The training, its stopping rule and the checkpoint layout are ``multiscale_rnn.reproduce.hornn``'s, which
``multiscale-rnn reproduce hornn-table2`` runs at the paper's size. Here reduced: H units (default 100,
the paper's 400), the first --train-tokens training words, --epochs
epochs; the full validation and test sets. Not a benchmark: it prints a table of perplexities.

    python bench/repro_hornn_ptb.py --data ../shared/data/ptb                 # Table 2 and Figure 6
    python bench/repro_hornn_ptb.py --data ../shared/data/ptb --only table2 --orders 1,2,3
    python bench/repro_hornn_ptb.py --data ../shared/data/ptb --only reach --figure reach.png
    python bench/repro_hornn_ptb.py --corpus text8-word --data ../shared/data/text8_prefix --hidden 500 \
        --epochs 10 --train-tokens 100000000 --only table2 --orders 1,3   # Table 4's models on text8

``--corpus text8-word`` trains on text8 words (Table 4 of the paper) with the paper's text8 schedule
(``models.hornn.CORPUS_SETTINGS``: 5 epochs at the initial rate, then halved after every epoch, all epochs
trained), the layout of ``multiscale-rnn reproduce hornn-table4``'s folder.

``--only reach`` measures the motivation of the paper's Figures 2-3 instead: ||dL_t/dh_{t-k}||
against k (``analysis.gradient_reach``) of an RNN and plain HORNNs of order 2-4 at the paper's
initialisation (no training), printed relative to k = 0 and drawn with ``--figure``.
"""

from __future__ import annotations

import argparse

import multiscale_rnn as msr
from multiscale_rnn import data, init
from multiscale_rnn.models.hornn import RECIPE, RECIPE_OPTIONS
from multiscale_rnn.reproduce.hornn import (  # noqa: F401
    CORPORA,
    HornnSettings,
    finished,
    regularisation,
    should_stop,
    train_model,
)


def run(corpus, classes, args, pooling="plain", order=1, alpha=None):
    """One model with the paper's recipe: (valid, test perplexity, seconds, epochs, best epoch)."""
    return train_model(corpus, classes, args, pooling, order, alpha)


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
            seed=args.seed,
            head_classes=classes,
            **RECIPE_OPTIONS,
        )
        init.gaussian(m, RECIPE["init_std"], rng=args.seed)
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
    ap.add_argument("--corpus", choices=sorted(CORPORA), default="ptb-word", help="PTB words or text8 words")
    ap.add_argument(
        "--data", default="../shared/data/ptb", help="the corpus's folder (PTB: ptb.{train,valid,test}.txt)"
    )
    ap.add_argument("--hidden", type=int, default=100)
    ap.add_argument("--train-tokens", type=int, default=300_000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=HornnSettings.lr)
    recipe = msr.models.hornn.RECIPE
    ap.add_argument(
        "--weight-decay", type=float, default=None, help=f"in place of the recipe's {recipe['weight_decay']}"
    )
    ap.add_argument(
        "--column-norm",
        type=float,
        default=None,
        help=f"in place of the recipe's {recipe['column_norm']} (models.hornn.RECIPE; 2.0 until 2026-12-02)",
    )
    ap.add_argument(
        "--head",
        choices=["class", "linear"],
        default=HornnSettings.head,
        help="the output layer: the class softmax (the recipe's, Mikolov et al. 2011) or the full softmax over all "
        "V words (linear, the paper's eq. 2; about 4 times the training time at V = 10,000)",
    )
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
        "stop by the stopping rule (reproduce.hornn.should_stop), and append each finished model's figures to "
        "DIR/results.jsonl; models already there are not trained again",
    )
    ap.add_argument("--progress", action="store_true", help="a progress bar per epoch")
    args = ap.parse_args(argv)
    msr.set_num_threads(args.threads)
    corpus = data.load(args.corpus, path=args.data).by_frequency()
    classes = data.class_sizes(corpus.counts())
    table = "Table 2" if args.corpus == "ptb-word" else "Table 4"
    print(
        f"{corpus.name}: vocabulary {corpus.vocab_size}, {len(classes)} classes; training on the first "
        f"{min(args.train_tokens, len(corpus.train)):,} of {len(corpus.train):,} words, {args.epochs} epochs, "
        f"H = {args.hidden}, sigmoid, {'class' if args.head == 'class' else 'full'} softmax, lr {args.lr} momentum "
        f"0.9, {args.threads} thread(s), seed {args.seed}"
        + "".join(f", {k} {v:g}" for k, v in regularisation(args).items())
    )
    orders = [int(o) for o in args.orders.split(",")]
    if args.only == "reach":
        return reach(corpus, classes, args, orders)
    if args.only in (None, "table2"):
        print(
            f"\n{table}: test perplexity (valid in brackets) against order\n{'pooling':8s} "
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
