"""The HM-LSTM on real text (the real-text protocol): boundaries scored against word and clause ends,
valid BPC, update counts per layer, and the paper's Figure 3 (boundary map) and Figure 4 (hidden-state
norms), per (corpus, seed, configuration); resumable.

    python bench/hm_lstm_real_text.py run --data ptb-char,text8,shakespeare,python-stdlib --seeds 0,1,2 \\
        --layers 3 --recipe --rate-target 0.18,0.06 --minutes 45 --out runs/real_text
    python bench/hm_lstm_real_text.py report runs/real_text

(``run`` may be left out: ``python bench/hm_lstm_real_text.py --data ptb-char ...``.) The code is
``multiscale_rnn.reproduce.hm_lstm_real_text``'s, whose reproduction (``multiscale-rnn reproduce
hm-lstm-real-text``) runs the protocol's second recipe on PTB; this script runs any corpus and
configuration. Trains the
``ptb-char-hm-lstm`` preset's model reduced to --layers x --hidden (layer norm, gated head, step
boundaries, slope 1 -> 5 by 0.04 per epoch, Adam 2e-3, clip 1, B = 64, T = 100) on one thread, under the
package's default gradient reading and flush cut (``--paper`` for the paper's: gradient "switch", no
flush cut). ``--recipe`` trains the word recipe instead (``WORD_RECIPE``, the package's defaults up to 2
layers: linear head, boundary warm-up, rate target on layer 1 (``--rate-target`` for one value per
detector layer, or ``--rate-target text``: layers 1 and 2 at the word- and clause-end rates of the
corpus's own training text, ``text_rates``), constant slope 1); ``--defaults`` the phrase recipe
(``PHRASE_RECIPE``, the 3-layer defaults when its runs were made; rows named "defaults"), with layer norm and
slope 1. ``--option NAME=JSON`` sets
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
its folder. A run already in results.jsonl is skipped. A run's folder is named by its corpus, configuration,
size, budget and seed and a hash of every setting that names the run in results.jsonl (``run_folder``), so a
run differing only in --threads, --bptt, --batch-size or --embed trains its own model; a checkpoint written
with other settings is refused, naming them.

``report`` prints, per corpus and configuration, the median and range over seeds of every figure, and
how many seeds meet the real-text targets (z^2 firing at most half as often as z^1, with F1 >= 0.5
against the clause ends). ``report --rescore`` traces each run's checkpoint again first, for the scores
added after a run was recorded (z^1 against the token ends, every punctuation mark a word of its own:
``f1_l0_tokens``; ``--data-path`` for runs given one); run it with the run's instruction-set module and thread
count to get its trace back. ``report --states`` prints instead z^1's state over each run's last 1,000 chunks
from the probes the runs kept (``probe_states``: the share of probes on the words, the changes of state, the
runs that end on the words); it also reads docs/studies/data/real_text_probes.jsonl.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import multiscale_rnn as msr
from multiscale_rnn.reproduce.hm_lstm_real_text import (  # noqa: F401 - the script's names, used by the tests
    CORPORA,
    MAX_RATE_RATIO,
    MIN_CLAUSE_F1,
    TEXT_RATE_CHARS,
    load_corpus,
    meets_targets,
    model_options,
    one_run,
    rate_ratio,
    reference_boundaries,
    report_table,
    rescore,
    score_boundaries,
    state_table,
    text_rates,
)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


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


def cmd_report(a) -> int:
    """The table of the finished runs in the given results files or --out folders."""
    from multiscale_rnn.reproduce._common import machine_line
    from multiscale_rnn.storage import read_json_lines

    rows = []
    for f in a.files:
        path = Path(f) / "results.jsonl" if Path(f).is_dir() else Path(f)
        if not path.is_file():
            raise SystemExit(f"error: no results at {path}: give a results.jsonl file or a run's --out folder")
        found = read_json_lines(path)
        rows += rescore(found, path.parent, a.data_dir, a.data_path) if a.rescore else found
    if a.states:
        print(state_table(rows))
        return 0
    print(report_table(rows))
    print()
    print(machine_line(rows))
    if a.rescore:
        again = [r for r in rows if "rescored_f1_l0" in r]
        same = sum(abs(r["rescored_f1_l0"] - r["f1_l0"]) < 1e-12 for r in again)
        print(
            f"\nRescored from their checkpoints: {len(again)} of {len(rows)} runs; the word F1 as recorded on {same}."
        )
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
    s.add_argument("--rescore", action="store_true", help="trace each run's checkpoint again (scores added later)")
    s.add_argument(
        "--states", action="store_true", help="z1's state over the last 1,000 chunks, from the runs' probes, instead"
    )
    s.add_argument("--data-dir", type=Path, default=DATA, help="with --rescore: the corpora's folder")
    s.add_argument("--data-path", type=Path, default=None, help="with --rescore: the runs' own --data-path")
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
    r.add_argument(
        "--defaults", action="store_true", help="the phrase recipe (the 3-layer defaults of its runs), layer norm"
    )
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
    try:
        return a.fn(a)
    except ValueError as e:  # a bad option or corpus, named by the reproduction's code
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    sys.exit(main())
