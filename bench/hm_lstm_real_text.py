"""The HM-LSTM on real text (the real-text protocol): boundaries scored against word and clause ends,
valid BPC, update counts per layer, and the paper's Figure 3 (boundary map) and Figure 4 (hidden-state
norms), per (corpus, seed, configuration); resumable.

    python bench/hm_lstm_real_text.py run --data ptb-char,text8,shakespeare,python-stdlib --seeds 0,1,2 \\
        --layers 3 --recipe --rate-target 0.18,0.06 --minutes 45 --out runs/real_text
    python bench/hm_lstm_real_text.py report runs/real_text

(``run`` may be left out: ``python bench/hm_lstm_real_text.py --data ptb-char ...``.) Trains the
``ptb-char-hm-lstm`` preset's model reduced to --layers x --hidden (layer norm, gated head, step
boundaries, slope 1 -> 5 by 0.04 per epoch, Adam 2e-3, clip 1, B = 64, T = 100) on one thread, under the
package's default gradient reading and flush cut (``--paper`` for the paper's: gradient "switch", no
flush cut). ``--recipe`` trains the word recipe instead (``WORD_RECIPE``, the package's defaults up to 2
layers: linear head, boundary warm-up, rate target on layer 1 (``--rate-target`` for one value per
detector layer, or ``--rate-target text``: layers 1 and 2 at the word- and clause-end rates of the
corpus's own training text, ``text_rates``), constant slope 1); ``--defaults`` the model's own defaults
for its depth (from 3 layers the phrase recipe), with layer norm and slope 1. ``--option NAME=JSON`` sets
any other model option.

Corpora (``--data``, comma-separated): ``ptb-char``, ``text8`` (the shared prefix), ``shakespeare``
(Tiny Shakespeare) from ``--data-dir`` (``../shared/data``), and ``python-stdlib`` (this interpreter's
standard library; ``multiscale_rnn.data.python_source``). Seeds (``--seeds``) default to the real-text
seeds of the committed split (``boundary_split.json``), whose corpora these are: all held out, no recipe
is tuned on them.

Training runs in blocks of ``--block`` chunks (B x T characters each), each ending with a Trainer
checkpoint in the run's folder under ``--out`` and the training seconds spent so far beside it
(``spent.json``), until ``--minutes`` of training time (only time spent training counts, over every
call) or ``--max-chunks`` chunks. A killed run, started again with the same command, goes on from its
last block (``resume="auto"``); given the same thread count, it gives the losses of an uninterrupted
run. Then it scores --valid-chars validation characters (BPC) and traces --trace-chars from a zero
state: F1 at tolerance 1 of z^1 against the word ends and of z^2 against the clause ends (``. , ; : ? !``
and line ends; text8 has none, so z^2 is scored against nothing and its F1 is left empty), both as first
seen (``first_seen``: the character after a word's or clause's last one), each layer's boundary rate,
the z^2 / z^1 rate ratio, and the share of layer updates skipped. It appends one JSON line to
``--out``/results.jsonl (with CPU, instruction-set module and threads) and draws the run's figures into
its folder. A run already in results.jsonl is skipped.

``report`` prints, per corpus and configuration, the median and range over seeds of every figure, and
how many seeds meet the real-text targets (z^2 firing at most half as often as z^1, with F1 >= 0.5
against the clause ends).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

import multiscale_rnn as msr
from multiscale_rnn.data import clause_boundaries, word_boundaries
from multiscale_rnn.models.hm_lstm import WORD_RECIPE, boundary_scores, first_seen

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

#: --data name -> (the name in boundary_split.json, the folder under --data-dir; None: no folder)
CORPORA = {
    "ptb-char": ("ptb-char", "ptb"),
    "text8": ("text8", "text8_prefix"),
    "shakespeare": ("tinyshakespeare", "tinyshakespeare"),
    "python-stdlib": ("python-stdlib", None),
}

#: The real-text targets (docs/studies/boundary_protocol.md): z^2 at most this share of z^1's rate ...
MAX_RATE_RATIO = 0.5
#: ... with at least this F1 against the clause ends.
MIN_CLAUSE_F1 = 0.5

#: Epochs passed to ``fit``: training stops on the time or chunk budget, never on an epoch count.
EPOCHS = 1_000_000


# ---- known boundaries and scores -----------------------------------------------------------------
def reference_boundaries(text: str) -> dict:
    """Where word and clause ends can first be read off ``text``: the character after each word's last
    (``word_boundaries``, whitespace-separated words, prose and source code alike) and after each clause's
    last (``clause_boundaries``: before ``. , ; : ? !`` or a line end), as ``first_seen`` places them."""
    return {"word": first_seen(word_boundaries(text)), "clause": first_seen(clause_boundaries(text))}


def rate_ratio(rate_upper: float, rate_lower: float):
    """How often z^2 fires against z^1 (their rates' quotient); None when z^1 never fires."""
    return float(rate_upper / rate_lower) if rate_lower > 0 else None


def meets_targets(row: dict):
    """The real-text targets on one run: z^2 at most half as often as z^1 and F1 >= 0.5 against the clause
    ends; None where they cannot be judged (no z^2, or no clause end in the text: text8), False when z^1
    never fires."""
    if row.get("f1_l1") is None:
        return None
    ratio = row.get("rate_ratio")
    return bool(ratio is not None and ratio <= MAX_RATE_RATIO and row["f1_l1"] >= MIN_CLAUSE_F1)


def score_boundaries(z: np.ndarray, refs: dict, tolerance: int = 1) -> dict:
    """Scores of the boundary states ``z`` (one row per layer with a detector, T steps; z > 0.5 is a
    boundary) against ``refs`` (``reference_boundaries``): z^1 against the word ends (also exactly,
    tolerance 0), z^2 against the clause ends (F1, precision and recall None without any clause end),
    their rates and the ratio of the rates."""
    fired = np.asarray(z) > 0.5
    out: dict = {}
    words = boundary_scores(fired[0], refs["word"], tolerance)
    out.update(f1_l0=words["f1"], precision_l0=words["precision"], recall_l0=words["recall"])
    out["f1_l0_exact"] = boundary_scores(fired[0], refs["word"], 0)["f1"]
    out["rate_l0"] = float(fired[0].mean())
    out["word_end_rate"] = float(np.mean(refs["word"]))
    out["clause_end_rate"] = float(np.mean(refs["clause"]))
    if len(fired) > 1:
        out["rate_l1"] = float(fired[1].mean())
        out["rate_ratio"] = rate_ratio(out["rate_l1"], out["rate_l0"])
        clauses = boundary_scores(fired[1], refs["clause"], tolerance) if refs["clause"].any() else None
        for k in ("f1", "precision", "recall"):
            out[f"{k}_l1"] = None if clauses is None else clauses[k]
    out["targets_met"] = meets_targets(out)
    return out


# ---- the configuration ---------------------------------------------------------------------------
#: Characters of the training split whose word- and clause-end rates ``--rate-target text`` reads.
TEXT_RATE_CHARS = 5_000_000


def text_rates(corpus) -> dict:
    """The word- and clause-end rates (``reference_boundaries``) of the first ``TEXT_RATE_CHARS`` characters
    of ``corpus``'s training split: the targets ``--rate-target text`` gives layers 1 and 2."""
    text = corpus.vocab.decode(np.asarray(corpus.train[:TEXT_RATE_CHARS]))
    return {k: float(v.mean()) for k, v in reference_boundaries(text).items()}


def model_options(a, corpus=None) -> tuple:
    """The model's options, the trainer's annealed options and the configuration's name, from the flags
    (``corpus``: for ``--rate-target text``, whose targets are read off its training text)."""
    if a.defaults:  # the model's own defaults for its depth, layer norm on, slope 1 throughout
        opts, schedules, name = dict(layer_norm=True), {}, "defaults"
    elif a.recipe:  # the word recipe: linear head, boundary warm-up, rate target, slope 1 throughout
        opts, schedules, name = dict(WORD_RECIPE, layer_norm=True), {}, "recipe"
        if a.rate_target == "text":  # layer 1 at the word-end rate, layer 2 at the clause-end rate
            name += "+target-text"
            if corpus is not None:
                rates = text_rates(corpus)
                if rates["clause"] == 0.0:
                    raise SystemExit(
                        f"error: --rate-target text: {corpus.name}'s training text has no clause end "
                        "(. , ; : ? ! or line end) to set layer 2's target by; give the targets as numbers"
                    )
                opts["rate_target"] = [round(rates["word"], 4), round(rates["clause"], 4)][: a.layers - 1]
        elif a.rate_target is not None:
            opts["rate_target"] = [float(r) for r in a.rate_target.split(",")]
            name += "+target" + "_".join(f"{r:g}" for r in opts["rate_target"])
    else:  # the model of the first documented runs (before the default recipe: no rate target, no warm-up)
        opts = dict(boundary="step", head="gated", head_size=a.hidden, detector_input="all", rate_target=None)
        opts.update(layer_norm=True, warmup=0)
        schedules, name = {"slope": msr.schedules.linear(1.0, 5.0, per_epoch=0.04)}, "preset"
    if a.rate_penalty:
        opts["rate_penalty"] = a.rate_penalty
        name += f"+penalty{a.rate_penalty:g}"
    if a.paper:
        opts.update(gradient="switch", flush_cut=False)
        name += "+paper"
    for item in a.option:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f'error: --option {item!r}: expected NAME=JSON, e.g. detector_input="below"')
        opts[key.strip()] = json.loads(value)
        name += f"+{key.strip()}={json.dumps(json.loads(value), separators=(',', ':'))}"
    if a.ramp1 > 0:
        opts["rate_ramp"] = [a.ramp1] + [0] * max(0, a.layers - 2)  # layer 1's target only
        name += f"+ramp{a.ramp1}"
    return opts, schedules, name


def run_key(a, data: str, config: str, seed: int) -> dict:
    """The fields that name a run in results.jsonl (a run with all of them there is skipped)."""
    return dict(
        data=data,
        config=config,
        layers=a.layers,
        hidden=a.hidden,
        embed=a.embed,
        batch_size=a.batch_size,
        bptt=a.bptt,
        seed=seed,
        minutes=a.minutes,
        max_chunks=a.max_chunks,
        threads=a.threads,
    )


def run_folder(out: Path, key: dict) -> Path:
    """The run's own folder under ``out``: checkpoint, spent.json, figures, run.json."""
    budget = f"m{key['minutes']:g}" + (f"c{key['max_chunks']}" if key["max_chunks"] else "")
    name = f"{key['data']}-{key['config']}-{key['layers']}x{key['hidden']}-{budget}-seed{key['seed']}"
    return out / re.sub(r"[^\w.=+-]+", "_", name)


def load_corpus(data: str, data_dir: Path, data_path=None):
    """The corpus ``data`` (a --data name), from ``data_path`` when given, else its folder under ``data_dir``
    (python-stdlib: this interpreter's standard library)."""
    folder = CORPORA[data][1]
    path = data_path if data_path is not None else (None if folder is None else data_dir / folder)
    if data == "python-stdlib":
        return msr.data.load("python-stdlib", path=path)
    return msr.data.load(data, path=path, download=False, progress=False)


# ---- training, resumable -------------------------------------------------------------------------
def read_spent(folder: Path) -> dict:
    """The training seconds and chunks spent so far (``spent.json``; none before the first block)."""
    f = folder / "spent.json"
    return json.loads(f.read_text()) if f.exists() else {"seconds": 0.0, "chunks": 0}


def write_spent(folder: Path, spent: dict) -> None:
    """``spent.json``, written to a temporary file and renamed (a kill leaves the old one or the new one)."""
    tmp = folder / ".spent.json.tmp"
    tmp.write_text(json.dumps(spent) + "\n")
    tmp.replace(folder / "spent.json")


def budget_left(a, spent: dict, chunks: int) -> bool:
    """True while the run has training time and chunks left."""
    if a.max_chunks is not None and chunks >= a.max_chunks:
        return False
    return spent["seconds"] < 60 * a.minutes


def train_blocks(a, trainer, corpus, folder: Path) -> bool:
    """Train block after block until the budget is spent; True when it is (False: stopped after
    ``--stop-after`` blocks of this call, to be resumed). The first block resumes from the checkpoint."""
    checkpoint = folder / "checkpoint.npz"
    spent = read_spent(folder)
    if checkpoint.exists():
        trainer.resume_from(checkpoint)  # where the last block ended (also when nothing is left to train)
    blocks = 0
    while budget_left(a, spent, trainer.step):
        if a.stop_after is not None and blocks >= a.stop_after:
            return False
        t0 = time.perf_counter()
        seen: list = []
        block = a.block if a.max_chunks is None else min(a.block, a.max_chunks - trainer.step)
        trainer.fit(
            corpus.train,
            epochs=EPOCHS,
            max_chunks=block,
            checkpoint=checkpoint,
            resume="auto",
            log=lambda e: seen.append(e) if e["event"] == "chunk" else None,
        )
        rates = (trainer.model.trace(corpus.valid[: a.probe_chars]).z > 0.5).mean(axis=1)
        spent = {"seconds": spent["seconds"] + time.perf_counter() - t0, "chunks": trainer.step}
        write_spent(folder, spent)
        blocks += 1
        bpc = np.mean([e["bpc"] for e in seen]) if seen else float("nan")
        print(
            f"{folder.name}: {spent['seconds']:7.0f} s  {trainer.step} chunks  train bpc {bpc:.3f}  "
            f"z rate {' '.join(f'{r:.3f}' for r in rates)}",
            flush=True,
        )
    return True


def build(a, corpus, seed: int):
    """The model and its trainer for one run."""
    opts, schedules, _ = model_options(a, corpus)
    model = msr.HMLSTM(corpus.vocab_size, a.embed, (a.hidden,) * a.layers, seed=seed, **opts)
    trainer = msr.Trainer(
        model,
        optimizer=msr.optim.Adam(2e-3),
        clip_norm=1.0,
        batch_size=a.batch_size,
        bptt=a.bptt,
        progress=False,
        seed=seed,
        model_options=schedules,
    )
    return model, trainer


# ---- scoring and figures -------------------------------------------------------------------------
def score_run(a, model, corpus) -> tuple:
    """Validation BPC on --valid-chars characters, the trace of --trace-chars and its scores."""
    valid = corpus.valid[: a.valid_chars]
    out = {"valid_chars": int(len(valid)), "valid_bpc": msr.evaluate(model, valid, batch_size=16)["bpc"]}
    tr = model.trace(corpus.valid[: a.trace_chars], corpus.vocab)
    text = corpus.vocab.decode(np.asarray(tr.tokens))
    refs = reference_boundaries(text)
    out.update(trace_chars=len(tr), updates=tr.updates.tolist(), reduction=float(tr.reduction))
    with_detector = np.arange(len(tr.z)) < len(tr.z) - 1 if tr.detectors is None else np.asarray(tr.detectors)
    out["z_rate"] = (tr.z > 0.5).mean(axis=1).tolist()
    out.update(score_boundaries(tr.z[with_detector], refs))
    out.update(clause_ends=int(refs["clause"].sum()), word_ends=int(refs["word"].sum()))
    return out, tr, refs


def draw(tr, refs, folder: Path, layers: int) -> list:
    """Figure 3 (270 characters, 3 rows of 90) and Figure 4 (180 characters) of the trace, from just after
    the first word end of its first 400 characters; the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ends = np.flatnonzero(refs["word"][:400])
    start = int(ends[0]) + 1 if len(ends) else 0
    w = tr.window(start, min(len(tr), start + 270))
    ax = msr.plot.boundaries(w, width=90, fontsize=8)
    ax.figure.savefig(folder / "fig3.png", dpi=130, bbox_inches="tight")
    plt.close("all")
    w = tr.window(start, min(len(tr), start + 180))
    ax = msr.plot.hidden_norms(w, fontsize=7)
    ax.figure.set_size_inches(18, 0.45 * (2 * layers) + 1.2)
    ax.figure.savefig(folder / "fig4.png", dpi=130, bbox_inches="tight")
    plt.close("all")
    return [f"{folder.name}/fig3.png", f"{folder.name}/fig4.png"]  # under --out


def one_run(a, data: str, seed: int, corpus, results) -> bool:
    """Train (resuming), score and record one (corpus, seed, configuration); False when stopped early."""
    from multiscale_rnn.reproduce._common import machine

    key = run_key(a, data, model_options(a)[2], seed)
    if results.find(key) is not None:
        print(f"{data} seed {seed} ({key['config']}): in {results.path} already", flush=True)
        return True
    folder = run_folder(a.out, key)
    folder.mkdir(parents=True, exist_ok=True)
    model, trainer = build(a, corpus, seed)
    if not train_blocks(a, trainer, corpus, folder):
        return False
    row = dict(key, corpus=CORPORA[data][0])
    row.update((k, v) for k, v in machine().items() if k != "threads")  # the threads asked for are in the key
    spent = read_spent(folder)
    row.update(seconds=spent["seconds"], chunks=trainer.step, chars_trained=trainer.step * a.batch_size * a.bptt)
    row["options"] = {k: model.config.get(k) for k in ("detector_input", "gradient", "rate_target", "rate_weight")}
    row.update(warmup=model.config.get("warmup"), slope=model.slope, python=sys.version.split()[0])
    scores, tr, refs = score_run(a, model, corpus)
    row.update(scores)
    if not a.no_figures:
        row["figures"] = draw(tr, refs, folder, a.layers)
    (folder / "run.json").write_text(json.dumps(row, indent=1) + "\n")
    results.append(row)
    z2 = "-" if row.get("f1_l1") is None else f"{row['f1_l1']:.2f}"
    print(
        f"{data} seed {seed} ({key['config']}): z1 F1 {row['f1_l0']:.2f} (rate {row['rate_l0']:.3f}), z2 F1 {z2} "
        f"(ratio {row.get('rate_ratio')}), valid BPC {row['valid_bpc']:.3f}, reduction {row['reduction']:.2f}",
        flush=True,
    )
    return True


def cmd_run(a) -> int:
    """Every (corpus, seed) asked for, each skipped when its line is in results.jsonl."""
    from multiscale_rnn.reproduce._common import Results
    from multiscale_rnn.reproduce.hm_lstm import load_split

    split = load_split()["real_text"]
    datas = [d.strip() for d in a.data.split(",")]
    seeds = split["seeds"] if a.seeds is None else [int(s) for s in a.seeds.split(",")]
    bad = [d for d in datas if d not in CORPORA] + [str(s) for s in seeds if s not in split["seeds"]]
    if bad:
        raise SystemExit(
            f"error: {', '.join(bad)}: not a real-text corpus or seed of boundary_split.json "
            f"(corpora {', '.join(CORPORA)}; seeds {split['seeds']})"
        )
    if a.data_path is not None and len(datas) > 1:
        raise SystemExit("error: --data-path reads one corpus: give one --data with it")
    msr.set_num_threads(a.threads)
    results = Results(a.out)
    for data in datas:
        corpus = load_corpus(data, a.data_dir, a.data_path)
        for seed in seeds:
            if not one_run(a, data, seed, corpus, results):
                return 0
    return 0


# ---- the report ----------------------------------------------------------------------------------
def report_table(rows: list) -> str:
    """Per corpus and configuration (and size, budget, threads): runs, seeds, and the median and range
    over them of every figure; the targets met as a count (a markdown table)."""
    from multiscale_rnn.reproduce._common import markdown_table
    from multiscale_rnn.reproduce.hm_lstm import dist

    groups: dict = {}
    for r in rows:
        groups.setdefault((r["corpus"], r["config"], r["layers"], r["hidden"], r["minutes"]), []).append(r)
    header = ["corpus", "configuration", "size", "minutes", "seeds", "z1 F1 (words)", "z1 rate", "z2 F1 (clauses)"]
    header += ["z2 rate", "z2 / z1", "targets met", "valid BPC", "update reduction"]
    table = []
    for (corpus, config, layers, hidden, minutes), rs in sorted(groups.items()):
        judged = [r["targets_met"] for r in rs if r.get("targets_met") is not None]
        none = "- (no clause ends)" if all(r.get("clause_ends") == 0 for r in rs) else "-"
        met = f"{sum(judged)}/{len(judged)}" if judged else none
        d = [dist([r[k] for r in rs if r.get(k) is not None]) for k in ("f1_l0", "rate_l0", "f1_l1", "rate_l1")]
        d += [dist([r[k] for r in rs if r.get(k) is not None]) for k in ("rate_ratio", "valid_bpc", "reduction")]
        seeds = ",".join(str(r["seed"]) for r in sorted(rs, key=lambda r: r["seed"]))
        table.append([corpus, f"`{config}`", f"{layers} x {hidden}", f"{minutes:g}", seeds] + d[:5] + [met] + d[5:])
    return markdown_table(header, table)


def cmd_report(a) -> int:
    """The table of the finished runs in the given results files or --out folders."""
    from multiscale_rnn.reproduce._common import machine_line

    rows = []
    for f in a.files:
        path = Path(f) / "results.jsonl" if Path(f).is_dir() else Path(f)
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    print(report_table(rows))
    print()
    print(machine_line(rows))
    return 0


def parser() -> argparse.ArgumentParser:
    """The command line: ``run`` (the default) and ``report``."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="train, score and record each (corpus, seed), resuming")
    add_run_flags(r)
    r.set_defaults(fn=cmd_run)
    s = sub.add_parser("report", help="median and range over seeds per corpus and configuration")
    s.add_argument("files", nargs="+", help="results.jsonl files or --out folders")
    s.set_defaults(fn=cmd_report)
    return p


def add_run_flags(r: argparse.ArgumentParser) -> None:
    """The flags of ``run``: what to train, the budget, the scoring, where."""
    r.add_argument("--data", default="ptb-char", help=f"corpora, comma-separated: {', '.join(CORPORA)}")
    r.add_argument("--seeds", default=None, help="comma-separated (default: the split's real-text seeds, 0,1,2)")
    r.add_argument("--minutes", type=float, default=20.0, help="training time per run (over all calls)")
    r.add_argument("--max-chunks", type=int, default=None, help="stop training after this many chunks as well")
    r.add_argument("--block", type=int, default=20, help="chunks between checkpoints")
    r.add_argument("--stop-after", type=int, default=None, help="stop after this many blocks in this call")
    r.add_argument("--layers", type=int, default=3)
    r.add_argument("--hidden", type=int, default=128)
    r.add_argument("--embed", type=int, default=64)
    r.add_argument("--batch-size", type=int, default=64)
    r.add_argument("--bptt", type=int, default=100)
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--paper", action="store_true", help="gradient 'switch', no flush cut")
    r.add_argument("--rate-penalty", type=float, default=0.0, help="lambda of the boundary-rate term (0: off)")
    r.add_argument("--recipe", action="store_true", help="the word recipe (WORD_RECIPE, slope 1)")
    r.add_argument("--defaults", action="store_true", help="the model's defaults for the depth, layer norm")
    r.add_argument(
        "--rate-target",
        default=None,
        help="with --recipe: targets per detector layer, comma-separated, or 'text': layers 1 and 2 at the "
        "word- and clause-end rates of the corpus's training text",
    )
    r.add_argument("--option", action="append", default=[], metavar="NAME=JSON", help="any HMLSTM option")
    r.add_argument("--ramp1", type=int, default=0, metavar="N", help="rate_ramp=[N, 0]: layer 1's target ramped")
    r.add_argument("--valid-chars", type=int, default=100_000, help="validation characters scored (BPC)")
    r.add_argument("--trace-chars", type=int, default=20_000, help="validation characters traced and scored")
    r.add_argument("--probe-chars", type=int, default=2_000, help="characters traced after each block (rates)")
    r.add_argument("--data-dir", type=Path, default=DATA, help="the folder of ptb/, text8_prefix/, tinyshakespeare/")
    r.add_argument("--data-path", type=Path, default=None, help="the corpus's own path (one --data only)")
    r.add_argument("--no-figures", action="store_true", help="draw no figures")
    r.add_argument("--out", type=Path, required=True, help="folder: results.jsonl and one folder per run")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in ("run", "report", "-h", "--help"):
        argv = ["run"] + argv  # the earlier form, without a command
    a = parser().parse_args(argv)
    return a.fn(a)


if __name__ == "__main__":
    sys.exit(main())
