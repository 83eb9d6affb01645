"""HORNN training speed: multiscale-rnn against the same model written the natural way in PyTorch
(a loop over steps, N products W_hn h_{t-n} per step: multiscale_rnn.reference.hornn.TorchHORNN),
same sizes, same thread count.

One training step = forward and backward over a chunk of B streams x T steps, clipping each
gradient entry to [-5, 5] and an SGD update with momentum 0.9 (the paper's recipe); tokens per
second = B * T / (time per step), the fastest of --steps repetitions, ours and PyTorch's
interleaved so the runs see the same load of a shared machine; the CPU-time ratio (process time,
all threads) is printed beside it. Defaults: the paper's PTB sizes (order 3, 400 units, embedding
400, batch 20, BPTT 30, sigmoid), V = 10000, and the class-based softmax (head="class", sqrt(V)
classes binned by a Zipf frequency) on both sides: ours against PyTorch with the same class softmax
written the natural way (per class present among the targets, the rows of those targets times the
class's block of the decoder); PyTorch's tokens/s with the full softmax are printed beside them for
context only (a different model: no ratio is taken). --head linear compares full softmax with full
softmax.

    python bench/bench_hornn.py                               # PTB sizes, class head, 2 threads
    python bench/bench_hornn.py --head linear --vocab 10000,50
    python bench/bench_hornn.py --vocab 50 --poolings gated --steps 10
    python bench/bench_hornn.py --threads 1 --reference       # our plain kernels, for before/after
    python bench/bench_hornn.py --threads 1 --breakdown       # CPU time of the recurrent part and the heads

--breakdown: process CPU time per step (the fastest of --steps) of each side with the class head,
the full softmax and a 50-word vocabulary with the full softmax (about the recurrent part alone),
so the head's share is the difference; then the full head's three products alone (the core's linear
map in float32 on preallocated arrays, no softmax) and each side's class-head step (its products counted,
``class_step_gflop``) as fractions of the sgemm peak measured after them.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from timing import arithmetic_peak, describe_arithmetic_peak, sgemm_peak, timed

import multiscale_rnn as msr
from multiscale_rnn.models.base import _core
from multiscale_rnn.reference.hornn import TorchHORNN


def ours_step_fn(model, tok, tgt, opt):
    impl = model._impl
    impl.reset_state(tok.shape[0])

    def step():
        impl.zero_grad()
        impl.loss_and_grad(tok, tgt, None)  # state carried from the last step, as in training
        opt.step(model, clip_value=5.0)  # clipping by value fused into the step, as the Trainer does

    return step


def class_nll(torch, y, class_decoder, decoder, sizes, targets):
    """Class-based softmax loss (mean over the N targets) the natural way in PyTorch: the class
    log-probabilities of every row, then for each class present among the targets the rows whose
    target is in it times that class's rows of the decoder (``split`` into class blocks once, so the
    backward assembles the decoder's gradient in one pass). ``y`` (N, I), ``targets`` (N,)."""
    starts = np.concatenate([[0], np.cumsum(sizes)])
    cls_of = torch.from_numpy(np.repeat(np.arange(len(sizes)), sizes))
    tc = cls_of[targets]  # (N,) class of each target
    total = -torch.log_softmax(class_decoder(y), dim=1).gather(1, tc.view(-1, 1)).sum()
    w_blocks = decoder.weight.split(list(sizes))  # per class (size of c, I)
    b_blocks = decoder.bias.split(list(sizes))
    for c in torch.unique(tc).tolist():
        rows = (tc == c).nonzero().view(-1)
        z = y[rows] @ w_blocks[c].T + b_blocks[c]  # (n_c, size of c)
        total = total - torch.log_softmax(z, dim=1).gather(1, (targets[rows] - int(starts[c])).view(-1, 1)).sum()
    return total / y.shape[0]


def torch_step_fn(torch, model, tok, tgt, sizes=None):
    """One training step of the PyTorch model; ``sizes``: class sizes (class softmax), else the
    full softmax. The model needs a ``class_decoder`` (torch.nn.Linear(I, C)) for the class loss."""
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    tok_t, tgt_t = torch.from_numpy(tok.astype(np.int64)), torch.from_numpy(tgt.astype(np.int64)).reshape(-1)
    state = [model.initial_state(tok.shape[0])]

    def step():
        opt.zero_grad()
        y, new = model.hidden(tok_t, state[0])
        state[0] = {k: v.detach() for k, v in new.items()}
        y = y.reshape(-1, y.shape[-1])
        if sizes is None:
            loss = torch.nn.functional.cross_entropy(model.decoder(y), tgt_t)
        else:
            loss = class_nll(torch, y, model.class_decoder, model.decoder, sizes, tgt_t)
        loss.backward()
        torch.nn.utils.clip_grad_value_(model.parameters(), 5.0)
        opt.step()

    return step


def check_class_nll(torch, V, sizes):
    """class_nll against the package's reference class softmax (all V log-probabilities)."""
    from multiscale_rnn.reference import class_softmax

    g = torch.Generator().manual_seed(0)
    y = torch.randn(64, 8, generator=g, dtype=torch.float64)
    cd, dec = torch.nn.Linear(8, len(sizes)).double(), torch.nn.Linear(8, V).double()
    t = torch.randint(0, V, (64,), generator=g)
    params = {
        "class_decoder.weight": cd.weight,
        "class_decoder.bias": cd.bias,
        "decoder.weight": dec.weight,
        "decoder.bias": dec.bias,
    }
    want = class_softmax.nll(y, params, sizes, t).mean()
    got = class_nll(torch, y, cd, dec, sizes, t)
    assert abs((want - got).item()) < 1e-10, (float(want), float(got))


def zipf_chunk(V, B, T, seed=0):
    """Tokens and targets (B, T) drawn from a Zipf law over V words, and its class sizes."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, V + 1)
    p /= p.sum()
    tok, tgt = (rng.choice(V, size=(B, T), p=p).astype(np.int32) for _ in range(2))
    return tok, tgt, msr.data.class_sizes(np.round(p * 1e9).astype(np.int64))


def class_step_gflop(H, E, K, pooling, sizes, tgt) -> float:
    """GFLOP of one training step with the class head, its products counted analytically (3x the forward):
    per token the input product 2 H E, the K recurrent paths 2 H H each (gated pooling: K gates more, from
    x_t and h_{t-n}), the class logits 2 H C and the target class's word logits 2 H |class|."""
    sizes = np.asarray(sizes)
    in_class = sizes[np.repeat(np.arange(len(sizes)), sizes)[np.asarray(tgt).reshape(-1)]]  # (B T,)
    per_token = 2 * H * E + K * 2 * H * H + (K * 2 * H * (E + H) if pooling == "gated" else 0)
    forward = per_token * in_class.size + 2 * H * (len(sizes) * in_class.size + in_class.sum())
    return 3.0 * forward / 1e9


def head_products(H, V, N, reps):
    """The full head's three products alone, in float32 through the core's own linear map (the functions the
    head runs, on preallocated arrays: nothing else timed): {name: (CPU ms, GFLOP/s)}, fastest of 3 rounds of
    ``reps``."""
    rng = np.random.default_rng(0)
    W, dW = (np.asfortranarray(rng.standard_normal((V, H), dtype=np.float32)) for _ in range(2))
    X, dX = (np.asfortranarray(rng.standard_normal((H, N), dtype=np.float32)) for _ in range(2))
    Y, dY = (np.asfortranarray(rng.standard_normal((V, N), dtype=np.float32)) for _ in range(2))
    b, db = np.zeros((V, 1), np.float32, order="F"), np.zeros((V, 1), np.float32, order="F")
    blocks = _core.blocks
    steps = [lambda: blocks.linear_forward_into(Y, W, b, X), lambda: blocks.linear_backward_into(dX, dW, db, dY, W, X)]
    rounds = [timed(steps, reps) for _ in range(3)]  # a disturbance on a shared machine lasts seconds
    fwd, bwd = (min(r[i][1] for r in rounds) for i in range(2))
    gflop = 2.0 * V * H * N / 1e9
    return {
        "forward W X": (fwd * 1e3, gflop / fwd),
        "backward dY X^T, W^T dY": (bwd * 1e3, 2 * gflop / bwd),
        "three products": ((fwd + bwd) * 1e3, 3 * gflop / (fwd + bwd)),
    }


def breakdown(torch, args):
    """Process CPU time per step, ms: class head, full softmax, and V = 50 (about the recurrent part)."""
    H, E, K, B, T, V = args.hidden, args.embed, args.order, args.batch, args.bptt, int(args.vocab.split(",")[0])
    tok, tgt, sizes = zipf_chunk(V, B, T)
    print(f"CPU ms per step, {args.threads} thread(s), V = {V} ({len(sizes)} classes); load {os.getloadavg()[0]:.1f}")
    print(
        f"{'pooling':8s} {'side':6s} {'class':>7s} {'full':>7s} {'V=50':>7s}   {'class head':>10s} {'full head':>10s}"
    )
    class_rates = []
    for pooling in args.poolings.split(","):
        cols = {}
        for side in ("ours", "torch"):
            steps = []
            for v, cls in ((V, True), (V, False), (50, False)):
                if side == "ours":
                    m = msr.HORNN(
                        v,
                        E,
                        (H,),
                        order=K,
                        pooling=pooling,
                        seed=0,
                        **(dict(head="class", head_classes=sizes) if cls else {}),
                    )
                    msr.init.gaussian(m, 0.1, rng=0)
                    steps.append(ours_step_fn(m, tok % v, tgt % v, msr.optim.SGD(lr=0.5, momentum=0.9)))
                else:
                    m = TorchHORNN(v, E, (H,), order=K, pooling=pooling)
                    if cls:
                        m.class_decoder = torch.nn.Linear(H, len(sizes))
                    steps.append(torch_step_fn(torch, m, tok % v, tgt % v, sizes if cls else None))
            cols[side] = [c * 1e3 for _, c in timed(steps, args.steps)]
        for side, (c, f, r) in cols.items():
            print(f"{pooling:8s} {side:6s} {c:7.0f} {f:7.0f} {r:7.0f}   {c - r:10.0f} {f - r:10.0f}", flush=True)
        o, t = cols["ours"], cols["torch"]
        print(f"{pooling:8s} {'ratio':6s} {t[0] / o[0]:6.2f}x {t[1] / o[1]:6.2f}x {t[2] / o[2]:6.2f}x", flush=True)
        class_gflop = class_step_gflop(H, E, K, pooling, sizes, tgt)
        class_rates.append((pooling, class_gflop / o[0] * 1e3, class_gflop / t[0] * 1e3))
        head_gflop = 6.0 * B * T * H * (V - 50) / 1e9  # the full head's three products (forward, dX, dW)
        for side in ("ours", "torch"):
            rate = head_gflop / max(cols[side][1] - cols[side][2], 1e-9) * 1e3
            print(f"{pooling:8s} {side:6s} full head's products: {rate:6.1f} GFLOP/s of CPU time", flush=True)
    products = head_products(H, V, B * T, args.steps)
    peak = sgemm_peak(4096, args.threads, torch=torch)
    best = max(peak.values())
    for name, (ms, rate) in products.items():
        print(
            f"head's {name:24s} {ms:7.1f} ms  {rate:6.1f} GFLOP/s = {100 * rate / best:3.0f} % of the peak", flush=True
        )
    for pooling, ours, theirs in class_rates:
        print(
            f"{pooling:8s} class-head step, products counted: ours {ours:5.1f} GFLOP/s ({100 * ours / best:3.0f} % of "
            f"the peak), torch {theirs:5.1f} ({100 * theirs / best:3.0f} %); 2x torch needs {200 * theirs / best:3.0f}%"
        )
    print(
        "sgemm 4096^3 peak: "
        + ", ".join(f"{k} {v:.1f}" for k, v in peak.items())
        + f" GFLOP/s ({args.threads} thread(s))"
    )
    arith = arithmetic_peak()
    print(describe_arithmetic_peak(arith))
    a = arith["gflops"]
    for name, (ms, rate) in products.items():
        print(f"head's {name:24s} {rate:6.1f} GFLOP/s = {100 * rate / a:3.0f} % of the arithmetic peak", flush=True)
    for pooling, ours, theirs in class_rates:
        print(
            f"{pooling:8s} class-head step: ours {100 * ours / a:3.0f} % of the arithmetic peak, torch "
            f"{100 * theirs / a:3.0f} %; 2x torch needs {200 * theirs / a:3.0f}%"
        )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hidden", type=int, default=400)
    ap.add_argument("--embed", type=int, default=400)
    ap.add_argument("--vocab", default="10000", help="comma-separated vocabulary sizes")
    ap.add_argument(
        "--head",
        choices=["class", "linear"],
        default="class",
        help="class: ours and PyTorch with the class softmax, and PyTorch with the full one",
    )
    ap.add_argument("--order", type=int, default=3)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--bptt", type=int, default=30)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--poolings", default="plain,fofe,max,gated")
    ap.add_argument("--breakdown", action="store_true", help="CPU time per step: recurrent part and heads")
    ap.add_argument(
        "--reference",
        action="store_true",
        help="our plain reference kernels (N Eigen products per step, no threads over streams)",
    )
    args = ap.parse_args(argv)
    _core.set_reference_kernels(args.reference)
    import torch

    torch.set_num_threads(args.threads)
    msr.set_num_threads(args.threads)
    H, E, K, B, T = args.hidden, args.embed, args.order, args.batch, args.bptt
    print(
        f"HORNN order {K}  hidden {H}  embed {E}  batch {B}  bptt {T}  threads {args.threads}  ISA {msr.ISA}  "
        f"torch {torch.__version__}{'  reference kernels' if args.reference else ''}"
    )
    cls = args.head == "class"
    if args.breakdown:
        return breakdown(torch, args)
    print(
        f"{'vocab':>6s} {'pooling':8s} {'ours tok/s':>11s} {'torch tok/s':>12s} {'ratio':>6s}   "
        f"{'CPU-time ratio':>14s}"
        + (f"   {'torch full-softmax tok/s (context)':>35s}" if cls else "")
        + f"   (fastest of {args.steps} interleaved steps; load {os.getloadavg()[0]:.1f})"
    )
    for V in (int(v) for v in args.vocab.split(",")):
        tok, tgt, sizes = zipf_chunk(V, B, T)
        sizes = sizes if cls else None
        if cls:
            check_class_nll(torch, V, sizes)
            print(f"V = {V}: {len(sizes)} classes, Zipf-distributed tokens and targets")
        for pooling in args.poolings.split(","):
            head = dict(head="class", head_classes=sizes) if cls else {}
            ours = msr.HORNN(V, E, (H,), order=K, pooling=pooling, seed=0, **head)
            msr.init.gaussian(ours, 0.1, rng=0)
            steps = [ours_step_fn(ours, tok, tgt, msr.optim.SGD(lr=0.5, momentum=0.9))]
            theirs = TorchHORNN(V, E, (H,), order=K, pooling=pooling)
            if cls:
                theirs.class_decoder = torch.nn.Linear(H, len(sizes))
                steps.append(torch_step_fn(torch, theirs, tok, tgt, sizes))
                full = TorchHORNN(V, E, (H,), order=K, pooling=pooling)
                steps.append(torch_step_fn(torch, full, tok, tgt))
            else:
                steps.append(torch_step_fn(torch, theirs, tok, tgt))
            res = timed(steps, args.steps)
            (w_o, c_o), (w_t, c_t) = res[:2]
            line = (
                f"{V:6d} {pooling:8s} {B * T / w_o:11,.0f} {B * T / w_t:12,.0f} {w_t / w_o:5.2f}x   {c_t / c_o:13.2f}x"
            )
            if cls:
                w_f = res[2][0]
                line += f"   {B * T / w_f:35,.0f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
