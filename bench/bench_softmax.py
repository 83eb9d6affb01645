#!/usr/bin/env python
"""Speed of the class-based softmax head against the full softmax, in a word-level language model.

Model: embedding (V, E) -> Elman RNN (H) -> head; B streams, chunks of T steps, state carried
(truncated BPTT). Defaults: the HORNN paper's PTB / text8 setting, H = E = 400, B = 20, T = 30,
V = 10k and 44k.

  full    head="linear": logits (V, N) and the softmax over all V words, for loss and gradient.
  class   head="class": frequency-binned classes (multiscale_rnn.data.class_sizes, ~sqrt(V)
          classes) over a vocabulary in descending frequency; the loss of a target costs the
          C class rows plus the n_c rows of its class.

Targets follow Zipf's law (p(rank r) ~ 1/r, as words do), so the classes the targets fall in are
as they would be on text: frequent words in small classes. Class sizes use the expected counts.

  train   zero_grad, loss_and_grad(tokens, targets, KEEP), SGD step (momentum 0.9): one update.
  eval    model.loss(tokens, targets, KEEP): evaluation cross-entropy, no gradients.
Also reported: one optim.ColumnNorm call (recurrent and input weights) per update, against the
full-softmax update.

Timing: runs of the two heads are interleaved and repeated; the best repeat (least disturbed by
other processes) and the median are shown, in milliseconds per chunk and tokens per second.

  python bench/bench_softmax.py --threads 2 --vocab 10000 44000 --repeats 5
  python bench/bench_softmax.py --threads 1 --cpu-time
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
from timing import cpu_name


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--vocab", type=int, nargs="+", default=[10000, 44000])
    p.add_argument("--hidden", type=int, default=400)
    p.add_argument("--batch", type=int, default=20)
    p.add_argument("--bptt", type=int, default=30)
    p.add_argument("--chunks", type=int, default=5, help="timed chunks per repeat")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--classes", type=int, default=None, help="classes (default round(sqrt(V)))")
    p.add_argument(
        "--cpu-time",
        action="store_true",
        help="time in process CPU seconds (all threads): far less disturbed by other processes; meant for --threads 1",
    )
    return p.parse_args(argv)


def zipf(V):
    p = 1.0 / np.arange(1, V + 1)
    return p / p.sum()


CLOCK = time.perf_counter


def timed(fn, chunks):
    fn()  # warm-up: buffers sized, caches filled
    t0 = CLOCK()
    for _ in range(chunks):
        fn()
    return (CLOCK() - t0) / chunks


def main(argv=None):
    a = parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if a.cpu_time else time.perf_counter
    import multiscale_rnn as msr
    from multiscale_rnn import data, optim

    msr.set_num_threads(a.threads)
    print(f"multiscale_rnn ISA {msr.ISA}, threads {a.threads}, CPU {cpu_name()}, load {os.getloadavg()}")
    print(
        f"Elman RNN H = E = {a.hidden}, B = {a.batch}, T = {a.bptt}; {'CPU' if a.cpu_time else 'wall'} "
        f"times in ms per chunk of "
        f"{a.batch * a.bptt} tokens, best (median) of {a.repeats} repeats of {a.chunks} chunks"
    )
    rng = np.random.default_rng(0)
    for V in a.vocab:
        p = zipf(V)
        sizes = data.class_sizes(np.round(p * 1e9).astype(np.int64), a.classes)
        tok = rng.choice(V, size=(a.batch, a.bptt), p=p).astype(np.int32)
        tgt = rng.choice(V, size=(a.batch, a.bptt), p=p).astype(np.int32)
        cls_of = np.repeat(np.arange(len(sizes)), sizes)
        rows = len(sizes) + np.asarray(sizes)[cls_of[tgt]].mean()
        models = {
            "full": msr.ElmanRNN(V, embed_size=a.hidden, hidden_sizes=(a.hidden,)),
            "class": msr.ElmanRNN(V, embed_size=a.hidden, hidden_sizes=(a.hidden,), head="class", head_classes=sizes),
        }
        opts = {k: optim.SGD(0.1, momentum=0.9) for k in models}
        col = optim.ColumnNorm(2.0)

        def train(k):
            m = models[k]

            def run():
                m.zero_grad()
                m.loss_and_grad(tok, tgt, "keep", copy_grads=False)
                opts[k].step(m)

            return run

        def evaluate(k):
            return lambda: models[k].loss(tok, tgt, "keep")

        for m in models.values():
            m.reset_state(a.batch)
        times = {key: [] for key in ("train full", "train class", "eval full", "eval class", "colnorm")}
        for _ in range(a.repeats):
            for k in ("full", "class"):
                times[f"train {k}"].append(timed(train(k), a.chunks))
                times[f"eval {k}"].append(timed(evaluate(k), a.chunks))
            times["colnorm"].append(timed(lambda: col(models["full"]), a.chunks))
        best = {k: min(v) for k, v in times.items()}
        med = {k: statistics.median(v) for k, v in times.items()}
        n = a.batch * a.bptt
        print(
            f"\nV = {V}: {len(sizes)} classes (sizes {sizes[0]}..{sizes[-1]}); the class loss reads "
            f"{rows:.0f} of {V} output rows per target on average (C + mean class size)"
        )
        for what in ("train", "eval"):
            f, c = f"{what} full", f"{what} class"
            print(
                f"  {what:5s}  full {1e3 * best[f]:8.1f} ({1e3 * med[f]:.1f}) ms  {n / best[f]:9,.0f} tok/s   "
                f"class {1e3 * best[c]:8.1f} ({1e3 * med[c]:.1f}) ms  {n / best[c]:9,.0f} tok/s   "
                f"speedup x{best[f] / best[c]:.1f}"
            )
        print(
            f"  column normalisation: {1e3 * best['colnorm']:.2f} ms per update "
            f"({100 * best['colnorm'] / best['train class']:.1f} % of a class-softmax update)"
        )
    print(f"\nload after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
