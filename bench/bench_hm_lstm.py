"""Benchmark: HM-LSTM skipped COPY work against the masked path, and against a masked PyTorch HM-LSTM.

1. Train a small HM-LSTM on Penn Treebank characters (../shared/data/ptb) until its upper layers update
   sparsely (or the time budget ends).
2. Count UPDATE/FLUSH operations per layer on held-out text and derive the ideal speedup of skipping
   from the layers' matrix costs (multiply-adds per column):
       layer l:  G_l (H_{l-1} + H_l + H_{l+1}),  G_l = 4 H_l (+1)      (layer 1's input term included)
       head:     (L + He) sum_l H_l + V He                              (never skipped)
   ideal = (sum_l cost_l + head) / (sum_l frac_l cost_l + head), frac_l the active fraction of layer l.
3. Time inference (evaluation forward) and a training step (forward + backward) with skipping
   (``skip=1``) and through the masked path (``skip=0``) on the same network and data, and report
   measured speedup / ideal speedup (best wall time of --repeat alternating runs, and the best process
   CPU time, which other processes on the cores disturb less).
   The training step of the blend reading (``gradient="blend"``: the word recipe's, and z^1's in the
   3-layer defaults), which computes every column in training (it skips nothing until switched to
   "switch", e.g. by ``schedules.step``), is timed beside them: it is the training-time skipping a
   recipe gives up while it blends. The 2-layer defaults read z as a switch and skip in training.
4. Time the same HM-LSTM written in PyTorch the way public implementations do (every gate of every
   column computed, the operations selected by masks), and report the ratio.

Usage: python bench/bench_hm_lstm.py [--train-seconds 240] [--hidden 256] [--threads 2]
Prints a Markdown table for docs/performance.md.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import multiscale_rnn as msr

PTB = Path(__file__).resolve().parents[2] / "shared" / "data" / "ptb"


def load_ptb(path: Path):
    parts = {}
    for split in ("train", "valid", "test"):
        f = path / f"ptb.char.{split}.txt"
        if not f.exists():
            raise SystemExit(f"Penn Treebank characters not found: {f} (pass --data)")
        text = f.read_text()
        # "a e r _ b a n k" -> "aer bank": symbols are space-separated, '_' marks a word space.
        parts[split] = "\n".join(line.strip().replace(" ", "").replace("_", " ") for line in text.splitlines())
    return msr.data.char_corpus(parts["train"], parts["valid"], parts["test"], name="ptb-char")


def costs(model):
    H = model.config["hidden_sizes"]
    E = model.config["embed_size"]
    L = len(H)
    per_layer = []
    for l in range(L):
        G = 4 * H[l] + (1 if l < L - 1 or model.config["top_boundary"] else 0)
        below = E if l == 0 else H[l - 1]
        above = H[l + 1] if l + 1 < L else 0
        per_layer.append(G * (below + H[l] + above))
    He = model.config["head_size"]
    head = (L + He) * sum(H) + model.vocab_size * He
    return np.array(per_layer, float), float(head)


def timed(fn, repeat, cpu=None):
    """The fastest of ``repeat`` runs after one warm-up run (seconds of wall time). When a list is
    given as ``cpu``, the process CPU time of each run is appended to it."""
    fn()
    best = []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        best.append(time.perf_counter() - t0)
        if cpu is not None:
            cpu.append(time.process_time() - c0)
    return float(min(best))


def torch_masked_model(model):
    """The HM-LSTM written the natural way in PyTorch (multiscale_rnn.reference.hm_lstm, float32): all
    gates for all columns, the boundary weights select; a training call also runs backward."""
    import torch

    from multiscale_rnn.reference import hm_lstm as reference
    from multiscale_rnn.reference import tensors

    P = tensors(model, np.float32)

    def run(tok, targets=None):
        logits, _ = reference.forward(P, model.config, tok)
        if targets is None:
            return logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        loss.backward()
        return loss

    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=PTB)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--embed", type=int, default=64)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--bptt", type=int, default=100)
    ap.add_argument("--train-seconds", type=float, default=240.0)
    ap.add_argument(
        "--target-fraction",
        type=float,
        default=0.5,
        help="stop training once layers 2..L are active on at most this fraction of steps",
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="an .npz of trained parameters: loaded when it exists (no training), else written",
    )
    args = ap.parse_args()

    msr.set_num_threads(args.threads)
    corpus = load_ptb(args.data)
    H = (args.hidden,) * 3
    # Trained under the "blend" reading (it keeps boundaries sparse; "switch" drifts towards z = 1 early
    # in training).
    # the documented setting (docs/performance.md): gated head, no rate target, no boundary warm-up
    paper_head = dict(head="gated", detector_input="all", rate_target=None, warmup=0)
    model = msr.HMLSTM(corpus.vocab_size, args.embed, H, flush_cut=True, gradient="blend", seed=args.seed, **paper_head)
    trainer = msr.Trainer(
        model,
        optimizer=msr.optim.Adam(2e-3),
        clip_norm=1.0,
        batch_size=args.batch,
        bptt=args.bptt,
        progress=False,
        model_options={"slope": msr.schedules.linear(1.0, 5.0, per_epoch=0.04)},
    )
    probe = corpus.valid[:2000]
    t0 = time.perf_counter()
    chunks = 0
    frac = np.ones(3)
    if args.cache is not None and args.cache.exists():
        saved = np.load(args.cache)
        model.load_parameters({k: saved[k] for k in model.parameters()})
        model.set_option("slope", float(saved["__slope"]))
        args.train_seconds = 0.0
        print(f"  loaded trained parameters from {args.cache}")
    while time.perf_counter() - t0 < args.train_seconds:
        trainer.fit(corpus.train, epochs=trainer.epoch + 1, max_chunks=10)
        chunks += 10
        tr = model.trace(probe)
        frac = tr.updates / len(probe)
        print(
            f"  trained {time.perf_counter() - t0:6.0f} s, {chunks} chunks: active fraction per layer "
            f"{np.round(frac, 3).tolist()}",
            flush=True,
        )
        if np.all(frac[1:] <= args.target_fraction) and np.all(frac[1:] >= 0.02):
            break
    if args.cache is not None and not args.cache.exists():
        np.savez(args.cache, __slope=model.slope, **model.parameters())
    tr = model.trace(corpus.valid[:5000])
    frac = tr.updates / len(tr)
    layer_cost, head_cost = costs(model)
    ideal = (layer_cost.sum() + head_cost) / ((frac * layer_cost).sum() + head_cost)

    rng = np.random.default_rng(1)
    B, T = args.batch, args.bptt
    starts = rng.integers(0, len(corpus.valid) - T - 1, B)
    tok = np.stack([corpus.valid[s : s + T] for s in starts])
    tgt = np.stack([corpus.valid[s + 1 : s + T + 1] for s in starts])
    # the same state for every timing: the state after reading the preceding text
    blend_model = model
    _, state = blend_model.forward(
        np.stack([corpus.valid[s - 200 : s] if s >= 200 else corpus.valid[s : s + 200] for s in starts])
    )
    # The same network under the "switch" reading, whose training step can skip COPY columns too.
    model = msr.HMLSTM(
        corpus.vocab_size, args.embed, H, flush_cut=True, gradient="switch", seed=args.seed, **paper_head
    )
    model.load_parameters(blend_model.parameters())
    model.set_option("slope", blend_model.slope)
    # Skipping and masked runs alternate, and each figure is the fastest of its repeats, so load
    # from other processes on the machine disturbs both alike and as little as possible.
    res = {}
    for what, fn in (
        ("infer", lambda: model.forward(tok, state)),
        ("train", lambda: model.loss_and_grad(tok, tgt, state)),
    ):
        times, cpu = {0: [], 1: []}, {0: [], 1: []}
        for _ in range(args.repeat):
            for skip in (1, 0):
                model.set_option("skip", skip)
                times[skip].append(timed(fn, 1, cpu[skip]))
        for skip in (0, 1):
            res[(what, skip)] = min(times[skip])
            res[(what, skip, "cpu")] = min(cpu[skip])
    # The package's default reading ("blend") computes every column in training: its training step,
    # against the masked and skipping "switch" steps above.
    blend_model.set_option("skip", 1)
    blend_times, blend_cpu = [], []
    for _ in range(args.repeat):
        blend_times.append(timed(lambda: blend_model.loss_and_grad(tok, tgt, state), 1, blend_cpu))
    res[("train-blend", 1)] = min(blend_times)
    res[("train-blend", 1, "cpu")] = min(blend_cpu)
    model.set_option("skip", 1)
    model.forward(tok, state)
    rec = model.records()
    frac_batch = np.array([(rec[f"op_l{l}"] != 0).mean() for l in range(3)])
    ideal_batch = (layer_cost.sum() + head_cost) / ((frac_batch * layer_cost).sum() + head_cost)

    torch_res = {}
    try:
        import torch

        torch.set_num_threads(args.threads)
        run = torch_masked_model(model)
        tt, yt = torch.tensor(tok, dtype=torch.long), torch.tensor(tgt, dtype=torch.long)
        with torch.no_grad():
            torch_res["infer"] = timed(lambda: run(tt), args.repeat)
        torch_res["train"] = timed(lambda: run(tt, yt), args.repeat)
    except ImportError:
        pass

    print()
    print(
        f"HM-LSTM 3 x {args.hidden}, embedding {args.embed}, head {model.config['head_size']}, "
        f"B={B}, T={T}, {args.threads} threads, ISA {msr.ISA}; trained {chunks} chunks"
    )
    print(
        f"active (UPDATE+FLUSH) fraction per layer on 5000 valid chars: {np.round(frac, 3).tolist()}; "
        f"on the timed batch: {np.round(frac_batch, 3).tolist()}"
    )
    print(f"ideal speedup from the counted operations: {ideal_batch:.2f}x (timed batch), {ideal:.2f}x (valid text)")
    print()
    print(
        "| pass | masked (ms) | skipping (ms) | speedup | ideal | % of ideal "
        "| PyTorch masked (ms) | PyTorch / skipping |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for what in ("infer", "train"):
        m, s = res[(what, 0)] * 1e3, res[(what, 1)] * 1e3
        sp = m / s
        pt = torch_res.get(what)
        pts = f"{pt * 1e3:.1f} | {pt * 1e3 / s:.2f}x" if pt else "- | -"
        label = "inference (forward)" if what == "infer" else "training step (forward + backward)"
        print(
            f"| {label} | {m:.1f} | {s:.1f} | {sp:.2f}x | {ideal_batch:.2f}x | "
            f"{100 * (sp - 1) / max(ideal_batch - 1, 1e-9):.0f}% | {pts} |"
        )
    b = res[("train-blend", 1)] * 1e3
    print(
        '| training step, gradient "blend" (the word recipe\'s, z¹ of the phrase recipe) | '
        f"{res[('train', 0)] * 1e3:.1f} | {b:.1f} | "
        f"{res[('train', 0)] * 1e3 / b:.2f}x | {ideal_batch:.2f}x | "
        f"{100 * (res[('train', 0)] * 1e3 / b - 1) / max(ideal_batch - 1, 1e-9):.0f}% | - | - |"
    )
    print()
    print("Process CPU time (all threads; steadier than wall time when other processes share the cores):")
    for what in ("infer", "train"):
        m, s = res[(what, 0, "cpu")] * 1e3, res[(what, 1, "cpu")] * 1e3
        print(
            f"  {what}: masked {m:.1f} ms, skipping {s:.1f} ms, speedup {m / s:.2f}x = "
            f"{100 * m / s / ideal_batch:.0f} % of ideal"
        )
    print(
        f"  train, gradient blend (the word recipe's): {res[('train-blend', 1, 'cpu')] * 1e3:.1f} ms "
        f"({res[('train', 0, 'cpu')] / res[('train-blend', 1, 'cpu')]:.2f}x the masked switch step)"
    )
    print(
        "\n% of ideal = (speedup - 1) / (ideal - 1): the fraction of the possible saving realised; "
        f"speedup / ideal = {res[('infer', 0)] / res[('infer', 1)] / ideal_batch:.2f} (inference), "
        f"{res[('train', 0)] / res[('train', 1)] / ideal_batch:.2f} (training)"
    )


if __name__ == "__main__":
    main()
