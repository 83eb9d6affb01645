#!/usr/bin/env python
"""Speed of the LSTM language model: multiscale_rnn's C++ core against PyTorch on the same machine.

Model: embedding (V, E) -> L-layer LSTM (H) -> linear (V); batch B streams, chunks of T steps,
state carried from chunk to chunk (truncated BPTT), Adam after every chunk.

  ours     multiscale_rnn.LSTM driven through its core: zero_grad, loss_and_grad(tokens, targets)
           on int32 (B, T) arrays (the core carries the state), and the core's Adam step on the
           flat parameter and gradient buffers.
  pytorch  torch.nn.Embedding + torch.nn.LSTM + torch.nn.Linear, cross-entropy, torch.optim.Adam,
           state detached between chunks; torch.set_num_threads(threads).

Inference also runs in bfloat16 (``--precisions float32 bfloat16``, the default; CPUs with AMX or
AVX512-BF16 only):
  ours     model.inference_precision = "bfloat16": LSTM weights and step inputs rounded to
           bfloat16, products accumulated in float32 on AMX tiles, or with VDPBF16PS where there is
           no AMX (AMD Zen 4, Intel Cooper Lake); gates, state and head float32. The kernel used
           (msr.bf16_kernel()) is printed and written into the markdown summary.
  pytorch  the float32 model above (the ratio the target is about), and PyTorch in bfloat16
           (--torch-bf16: "cast", the modules cast to bfloat16, default; or "autocast",
           torch.autocast("cpu", dtype=torch.bfloat16) around the float32 modules).

Reported: characters (= tokens) per second, ours / PyTorch, and achieved GFLOP/s as a fraction of
this machine's matrix-product peak, measured here with a large square sgemm through torch.mm (MKL)
and through NumPy (OpenBLAS); "peak" is the higher of the two. bfloat16 rows are compared with a
bfloat16 torch.mm of the same size (oneDNN: AMX or AVX512-BF16).

FLOPs are counted analytically per column (one stream, one step):
  forward  = sum over layers of 2 * 4H * (E_l + H)  +  2 * V * H     (E_0 = E, E_l = H above)
  training = 3 * forward (backward counted as twice the forward); inference = forward.
Inference from token ids reads layer 1's input term from a per-token table (P = W_ih E + b, built
once per chunk; --no-input-tables for the plain path), so it does less arithmetic than counted:
its "% of peak" is the plain model's FLOPs per second, an equivalent rate.

Timing: other processes may share the cores, so runs of ours and PyTorch's are interleaved and
repeated; the table shows the best repeat (least disturbed) and the median. The peak is measured
at the start and at the end and the higher kept. Load averages are printed before and after.

With --cpu-time, rates are characters per second of process CPU time (all threads), which other
processes on the machine disturb far less than wall time; meant for --threads 1.

  python bench/bench_lstm.py --threads 2 --layers 1 3 --chunks 4 --repeats 5 --markdown out.md
  python bench/bench_lstm.py --threads 1 --modes infer --cpu-time
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2, help="threads for both libraries (default 2)")
    p.add_argument("--layers", type=int, nargs="+", default=[1, 3], help="layer counts to run (default 1 3)")
    p.add_argument("--chunks", type=int, default=4, help="timed chunks per repeat (default 4)")
    p.add_argument("--warmup", type=int, default=1, help="untimed chunks before each repeat (default 1)")
    p.add_argument("--repeats", type=int, default=5, help="interleaved repeats (default 5)")
    p.add_argument("--vocab", type=int, default=50)
    p.add_argument("--embed", type=int, default=128)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--bptt", type=int, default=100)
    p.add_argument("--modes", nargs="+", default=["train", "infer"], choices=["train", "infer"])
    p.add_argument(
        "--precisions",
        nargs="+",
        default=["float32", "bfloat16"],
        choices=["float32", "bfloat16"],
        help="inference precisions (training is always float32; bfloat16 needs AMX or AVX512-BF16)",
    )
    p.add_argument(
        "--torch-bf16",
        choices=["cast", "autocast"],
        default="cast",
        help="how PyTorch runs in bfloat16 (default: modules cast to bfloat16)",
    )
    p.add_argument("--cpu-time", action="store_true", help="rates from process CPU time instead of wall time")
    p.add_argument("--isa", choices=["baseline", "avx2", "avx512"], help="force the core's instruction-set variant")
    p.add_argument("--no-torch", action="store_true", help="time only our core")
    p.add_argument(
        "--reference",
        action="store_true",
        help="run our core with its plain reference kernels (to measure the fast paths' speedup)",
    )
    p.add_argument(
        "--no-input-tables",
        action="store_true",
        help="inference without the LSTM's per-token input table (the plain path, for comparison)",
    )
    p.add_argument("--peak-size", type=int, default=4096, help="side of the square sgemm measuring the peak")
    p.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown to FILE")
    return p.parse_args(argv)


ARGS = parse_args()
# Thread counts of the BLAS libraries must be set before they load.
for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)
if ARGS.isa:
    os.environ["MULTISCALE_RNN_ISA"] = ARGS.isa

import numpy as np  # noqa: E402
from timing import arithmetic_peak, describe_arithmetic_peak, sgemm_peak  # noqa: E402

import multiscale_rnn as msr  # noqa: E402

# bfloat16 inference rows: requested, and a bfloat16 kernel (AMX or AVX512-BF16) can run here.
ARGS.bf16 = "bfloat16" in ARGS.precisions and "infer" in ARGS.modes and msr.bf16_kernel() is not None

try:
    import torch  # noqa: E402
except ImportError:  # pragma: no cover
    torch = None


def load():
    return os.getloadavg()


def pause():
    """Let the other library's OpenMP threads stop spinning before the next timing."""
    time.sleep(0.3)


# ---------------------------------------------------------------------------------------------
def flops_per_column(V, E, H, L, train):
    fwd = sum(2 * 4 * H * ((E if l == 0 else H) + H) for l in range(L)) + 2 * V * H
    return 3 * fwd if train else fwd


def make_data(V, B, T, chunks, seed=0):
    """Token stream (B, chunks*T + 1) of random ids; chunk k is columns [kT, (k+1)T] (+1 for targets)."""
    return np.random.default_rng(seed).integers(0, V, (B, chunks * T + 1)).astype(np.int32)


class Ours:
    def __init__(self, a, L, precision="float32"):
        self.model = msr.LSTM(vocab_size=a.vocab, embed_size=a.embed, hidden_sizes=(a.hidden,) * L, seed=0)
        self.model.inference_precision = precision
        self.w = self.model.flat_parameters()
        self.g = self.model.flat_gradients()
        self.m = np.zeros_like(self.w)
        self.v = np.zeros_like(self.w)
        self.step = 0
        self.B, self.T = a.batch, a.bptt

    def run(self, data, chunks, train):
        self.model.reset_state(self.B)
        T = self.T
        for k in range(chunks):
            tok = np.ascontiguousarray(data[:, k * T : (k + 1) * T])
            tgt = np.ascontiguousarray(data[:, k * T + 1 : (k + 1) * T + 1])
            if train:
                self.model.loss_and_grad(tok, tgt, "keep", copy_grads=False)
                self.step += 1
                msr._core.adam_step(self.w, self.g, self.m, self.v, self.step, 1e-3, 0.9, 0.999, 1e-8, 0.0)
            else:
                self.model.loss(tok, tgt, "keep")


class Torch:
    def __init__(self, a, L, precision="float32"):
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(a.vocab, a.embed)
        self.rnn = torch.nn.LSTM(a.embed, a.hidden, num_layers=L, batch_first=True)
        self.dec = torch.nn.Linear(a.hidden, a.vocab)
        self.autocast = precision == "bfloat16" and a.torch_bf16 == "autocast"
        if precision == "bfloat16" and not self.autocast:
            for m in (self.emb, self.rnn, self.dec):
                m.to(torch.bfloat16)
        self.params = [*self.emb.parameters(), *self.rnn.parameters(), *self.dec.parameters()]
        self.opt = torch.optim.Adam(self.params, lr=1e-3)
        self.B, self.T, self.V = a.batch, a.bptt, a.vocab

    def _loss(self, tok, tgt, state):
        if self.autocast:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                y, state = self.rnn(self.emb(tok), state)
                z = self.dec(y)
        else:
            y, state = self.rnn(self.emb(tok), state)
            z = self.dec(y)
        return torch.nn.functional.cross_entropy(z.float().reshape(-1, self.V), tgt.reshape(-1)), state

    def run(self, data, chunks, train):
        data = torch.from_numpy(data).long()
        T, state = self.T, None
        for k in range(chunks):
            tok, tgt = data[:, k * T : (k + 1) * T], data[:, k * T + 1 : (k + 1) * T + 1]
            if train:
                self.opt.zero_grad(set_to_none=True)
                loss, state = self._loss(tok, tgt, state)
                loss.backward()
                self.opt.step()
                state = tuple(s.detach() for s in state)
            else:
                with torch.inference_mode():
                    loss, state = self._loss(tok, tgt, state)


def timed(runner, data, a, train):
    runner.run(data, a.warmup, train)
    clock = time.process_time if a.cpu_time else time.perf_counter
    t0 = clock()
    runner.run(data, a.chunks, train)
    return a.chunks * a.batch * a.bptt / (clock() - t0)  # chars/s


def main():
    a = ARGS
    msr.set_num_threads(a.threads)
    msr._core.set_reference_kernels(a.reference)
    msr._core.set_input_tables(not a.no_input_tables)
    if torch is not None:
        torch.set_num_threads(a.threads)
    use_torch = torch is not None and not a.no_torch
    load0 = load()
    print(
        f"multiscale_rnn ISA {msr.ISA}{' (reference kernels)' if a.reference else ''}"
        f"{' (no input tables)' if a.no_input_tables else ''}, threads {a.threads} "
        f"(core reports {msr.get_num_threads()})"
        + (f", torch {torch.__version__} threads {torch.get_num_threads()}" if torch is not None else "")
    )
    print(
        f"load average before: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}; "
        f"rates from {'process CPU' if a.cpu_time else 'wall'} time"
    )
    if "bfloat16" in a.precisions and not a.bf16:
        print(f"bfloat16 rows left out: {msr.bf16_unavailable_reason() or 'inference not timed'}")
    elif a.bf16:
        print(f"bfloat16 kernel: {msr.bf16_kernel()}")
    peak = sgemm_peak(a.peak_size, a.threads, torch=torch, bf16=ARGS.bf16)
    for k, v in peak.items():
        print(f"sgemm {a.peak_size}^3 peak via {k}: {v:.1f} GFLOP/s")
    arith = arithmetic_peak()
    print(describe_arithmetic_peak(arith))
    pause()

    data = make_data(a.vocab, a.batch, a.bptt, max(a.chunks, a.warmup))
    rows = []
    for L in a.layers:
        for mode in a.modes:
            train = mode == "train"
            precisions = ["float32"] + (["bfloat16"] if not train and a.bf16 else [])
            ours = {p: Ours(a, L, p) for p in precisions}
            theirs = {p: Torch(a, L, p) for p in precisions} if use_torch else {}
            fl = flops_per_column(a.vocab, a.embed, a.hidden, L, train)
            res = {(who, p): [] for p in precisions for who in ("ours", "torch")}
            for r in range(a.repeats):  # interleaved, so all see the same load
                for p in precisions:
                    res["ours", p].append(timed(ours[p], data, a, train))
                    pause()
                    if p in theirs:
                        res["torch", p].append(timed(theirs[p], data, a, train))
                        pause()
            for p in precisions:
                row = dict(layers=L, mode=mode, precision=p, flops=fl)
                row["ours"] = summary(res["ours", p])
                if res["torch", "float32"]:
                    row["torch"] = summary(res["torch", "float32"])
                if p == "bfloat16" and res["torch", p]:
                    row["torch_bf16"] = summary(res["torch", p])
                rows.append(row)
                print_row(row, peak, header=len(rows) == 1)
    # The peak again at the end: when other processes share the cores, the higher value is nearer
    # the machine's true peak.
    pause()
    raised = False
    for k, v in sgemm_peak(a.peak_size, a.threads, torch=torch, bf16=ARGS.bf16).items():
        print(f"sgemm {a.peak_size}^3 peak via {k} (end): {v:.1f} GFLOP/s")
        raised |= v > peak[k]
        peak[k] = max(peak[k], v)
    if raised:
        print("peak raised; % of peak with it:")
        for i, row in enumerate(rows):
            print_row(row, peak, header=i == 0)
    arith = max(arith, arithmetic_peak(), key=lambda p: p["gflops"])
    print(describe_arithmetic_peak(arith) + "; the float32 rows against it (ours, best repeat):")
    for row in rows:
        if row["precision"] == "float32":
            gf = row["ours"][0] * row["flops"] / 1e9
            print(f"  {row['layers']} layer(s) {row['mode']}: {gf:.1f} GFLOP/s = {100 * gf / arith['gflops']:.0f} %")
    load1 = load()
    print(f"load average after: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    if a.markdown:
        write_markdown(a.markdown, rows, peak, load0, load1, arith)


def summary(values):
    return max(values), statistics.median(values)


def peak_for(row, peak):
    """The float32 peak (higher of torch and NumPy), or the bfloat16 torch.mm peak for bf16 rows."""
    if row["precision"] == "bfloat16" and "torch-bf16" in peak:
        return peak["torch-bf16"]
    return max(v for k, v in peak.items() if k != "torch-bf16")


def fmt_row(row, peak):
    pk = peak_for(row, peak)
    o_best, o_med = row["ours"]
    gf = o_best * row["flops"] / 1e9
    cells = [str(row["layers"]), row["mode"], row["precision"], f"{o_best:,.0f}", f"{o_med:,.0f}"]
    for key in ("torch", "torch_bf16"):
        if key in row:
            t_best, t_med = row[key]
            cells += [f"{t_best:,.0f}", f"{t_med:,.0f}", f"{o_best / t_best:.2f}", f"{o_med / t_med:.2f}"]
        else:
            cells += ["-"] * 4
    tkey = "torch_bf16" if row["precision"] == "bfloat16" else "torch"  # % of peak: same precision
    tgf = row[tkey][0] * row["flops"] / 1e9 if tkey in row else None
    cells += [f"{gf:.1f}", f"{100 * gf / pk:.0f}%", "-" if tgf is None else f"{100 * tgf / pk:.0f}%"]
    return cells


HEAD = [
    "layers",
    "mode",
    "precision",
    "ours best",
    "ours median",
    "torch best",
    "torch median",
    "ratio best",
    "ratio median",
    "torch bf16 best",
    "torch bf16 median",
    "ratio bf16 best",
    "ratio bf16 median",
    "ours GFLOP/s",
    "ours % peak",
    "torch % peak",
]


def print_row(row, peak, header):
    widths = [6, 5, 9, 10, 11, 10, 12, 10, 12, 15, 17, 15, 17, 12, 11, 12]
    if header:
        print(
            "chars/s; ratio = ours / torch (float32), ratio bf16 = ours / torch in bfloat16; GFLOP/s and % of "
            "peak from the best repeat (bfloat16 rows: ours and torch in bfloat16, % of the bfloat16 peak)"
        )
        print("  ".join(h.rjust(w) for h, w in zip(HEAD, widths)))
    print("  ".join(c.rjust(w) for c, w in zip(fmt_row(row, peak), widths)), flush=True)


def write_markdown(path, rows, peak, load0, load1, arith):
    a = ARGS
    lines = [
        f"Command: `python {' '.join(sys.argv)}`",
        "",
        f"ISA variant `{msr.ISA}`{' with the reference kernels' if a.reference else ''}, {a.threads} threads; "
        f"V={a.vocab} E={a.embed} H={a.hidden} B={a.batch} "
        f"T={a.bptt}; {a.chunks} timed chunks per repeat, {a.repeats} interleaved repeats; rates from "
        f"{'process CPU' if a.cpu_time else 'wall'} time; PyTorch bfloat16: {a.torch_bf16}"
        + (f"; our bfloat16 kernel: {msr.bf16_kernel()}. " if a.bf16 else ". ")
        + "Matrix-product peak "
        + ", ".join(f"{k} {v:.1f}" for k, v in peak.items())
        + f" GFLOP/s; {describe_arithmetic_peak(arith)}. Load average before {load0[0]:.2f}, after {load1[0]:.2f}.",
        "",
        "| " + " | ".join(HEAD) + " |",
        "|" + "---|" * len(HEAD),
    ]
    for row in rows:
        lines.append("| " + " | ".join(fmt_row(row, peak)) + " |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
