"""Continue a finished HORNN Table 2 model from its best epoch with the rate halved after every epoch
(the RNNLM toolkit's annealing, ``schedules.NewBob`` once it has started), printing validation and test
perplexity after each epoch: how much a schedule that halves only after the epochs that miss leaves
on the table (docs/studies/hornn_ptb.md, "Why the schedule changed").

    python bench/hornn_anneal.py runs/hornn-table2/plain-N1-H400-seed0.npz --data ../shared/data/ptb \\
        --lr 0.25 --epochs 5

The checkpoint is one of ``repro_hornn_ptb.py --checkpoints DIR`` (or ``reproduce hornn-table2``): its
model, its best parameters (``Trainer.restore_best``) and its recipe's optimiser, clipping and column
normalisation; the checkpoint itself is not written to.
"""

from __future__ import annotations

import argparse
import time

import multiscale_rnn as msr
from multiscale_rnn import checkpoint, data
from multiscale_rnn.reproduce.hornn import recipe_trainer


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", help="a Table 2 model's checkpoint (.npz)")
    ap.add_argument("--data", default="../shared/data/ptb", help="folder of ptb.{train,valid,test}.txt")
    ap.add_argument("--lr", type=float, default=0.25, help="the rate of the first epoch, halved after each")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    msr.set_num_threads(args.threads)
    corpus = data.load("ptb-word", path=args.data).by_frequency()
    ck = checkpoint.load(args.checkpoint)
    model = ck.model
    saved = ck.trainer_state.get("lr_schedule") if ck.trainer_state else None  # NewBob, or ReduceOnPlateau before it
    if saved is None:
        raise SystemExit(f"{args.checkpoint} holds no learning-rate schedule: not a Table 2 model's checkpoint")
    saved_schedule = msr.schedules.LR_SCHEDULES[saved["name"]](**saved["params"])

    first = recipe_trainer(model, 1.0, saved_schedule)
    first.resume_from(args.checkpoint)
    first.restore_best()

    def perplexities():
        return [msr.evaluate(model, ids, batch_size=20, bptt=30)["perplexity"] for ids in (corpus.valid, corpus.test)]

    valid, test = perplexities()
    print(f"best epoch {first.best_epoch}: valid {valid:.1f} test {test:.1f}", flush=True)
    lr = args.lr
    for e in range(1, args.epochs + 1):
        t0 = time.process_time()
        recipe_trainer(model, lr, msr.schedules.Constant()).fit(corpus.train, epochs=1)
        valid, test = perplexities()
        print(f"halving epoch {e}: lr {lr:g}  valid {valid:.1f} test {test:.1f}  "
              f"({time.process_time() - t0:.0f} CPU-s)", flush=True)  # fmt: skip
        lr /= 2


if __name__ == "__main__":
    main()
