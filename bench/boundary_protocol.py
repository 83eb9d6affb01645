"""The boundary-discovery protocol: HM-LSTM recipes judged on random languages no recipe was tuned on.

The languages are those of ``multiscale_rnn.data.languages`` (every property drawn per language id);
the split (``boundary_split.json`` in the package's data resources, read by
``multiscale_rnn.reproduce.hm_lstm.load_split``) fixes, before any held-out run, which languages and text seeds tune
recipes (``--part tune``) and which are held back (``--part heldout``). Choose recipes on the tune
part only; report every held-out run (docs/studies/boundary_protocol.md).

    python bench/boundary_protocol.py run --part tune --config package --layers 2 --out runs/protocol.jsonl
    python bench/boundary_protocol.py run --part heldout --config package --layers 2,3 --out runs/protocol.jsonl
    python bench/boundary_protocol.py report runs/protocol.jsonl

A run is one (configuration, layers, language, seed): the configuration's training of
``bench/study_hm_boundaries.py`` (``configuration``: ``package`` is the package's defaults by depth
with five restarts) on ``generate(language, n_chars, seed)`` split 90/10, scored on the first 2000
validation characters: F1 at tolerance 1 of z^1 against the word ends and of z^2 against the phrase
ends (as first seen: ``first_seen``), each layer's boundary rate, validation BPC, the layer-update
reduction (skipped work) and the time. Each finished run is appended to ``--out`` (JSON lines) with
the CPU, the instruction-set module and the thread count; a run already in the file with the same
set-up (module, threads and CPU) is skipped, so an interrupted ``run`` resumes where it stopped.
``--limit N`` stops after N new runs.

``report`` prints, per configuration, depth and part, the share of spaced (language, seed) pairs with
z^1 F1 >= 0.9, and the median and range of every figure, spaced and unspaced apart; with 3 layers, how often
z^2 finds the phrases beside z^1's words; and where z^1 misses the words, what it marks instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SPLIT = HERE.parent / "src" / "multiscale_rnn" / "data" / "resources" / "boundary_split.json"  # for messages


def _key(r) -> tuple:
    """A run: configuration, depth, width (rows without one ran at the default, 32), part, language, seed and
    set-up (module, threads and CPU)."""
    from multiscale_rnn.reproduce._common import setup

    return (r["config"], r["layers"], r.get("hidden", 32), r["part"], r["language"], r["seed"], setup(r))


def _done(path: Path) -> set:
    from multiscale_rnn.storage import read_json_lines

    return {_key(r) for r in read_json_lines(path)}


def cmd_run(args) -> int:
    from study_hm_boundaries import run
    from timing import cpu_name

    import multiscale_rnn as msr
    from multiscale_rnn.data.languages import draw_language, generate
    from multiscale_rnn.reproduce.hm_lstm import load_split

    split = load_split()
    part = split[args.part]
    msr.set_num_threads(args.threads)
    from multiscale_rnn._native import ISA as isa
    from multiscale_rnn.storage import append_lines

    done = _done(args.out)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    languages = part["languages"] if args.languages is None else [int(x) for x in args.languages.split(",")]
    seeds = part["seeds"] if args.seeds is None else [int(x) for x in args.seeds.split(",")]
    if not set(seeds) <= set(part["seeds"]):
        raise SystemExit(
            f"error: seeds {sorted(set(seeds) - set(part['seeds']))} are not in the {args.part} part of {SPLIT}"
        )
    new = 0
    for config in args.config.split(","):
        for layers in [int(x) for x in args.layers.split(",")]:
            for language in languages:
                if language not in part["languages"]:
                    raise SystemExit(f"error: language {language} is not in the {args.part} part of {SPLIT}")
                spec = draw_language(language)
                for seed in seeds:
                    base = {
                        "config": config,
                        "layers": layers,
                        "hidden": args.hidden,
                        "part": args.part,
                        "language": language,
                        "seed": seed,
                        "isa": isa,
                        "threads": args.threads,
                        "cpu": cpu_name(),
                    }
                    if _key(base) in done:
                        continue
                    if args.limit is not None and new >= args.limit:
                        return 0
                    h = generate(spec, split["n_chars"], seed)
                    t0 = time.perf_counter()
                    r = run(config, layers, f"language{language}", 0, hidden=args.hidden, text=h)
                    r.update(
                        base,
                        spaced=bool(spec.separator),
                        phrases=spec.phrases,
                        wall=time.perf_counter() - t0,
                    )
                    append_lines(args.out, json.dumps(r) + "\n")
                    new += 1
                    f1 = f"z1 F1 {r['f1_l0']:.2f} (rate {r['rate_l0']:.2f})"
                    if layers >= 3:
                        f1 += f", z2 F1 {r['f1_l1']:.2f} (rate {r['rate_l1']:.2f})"
                    print(
                        f"{config} {layers}L {args.part} language {language} seed {seed}: {f1}, "
                        f"BPC {r['bpc']:.3f}, {r['wall']:.0f} s",
                        flush=True,
                    )
    return 0


def cmd_report(args) -> int:
    """The tables of the finished runs (``multiscale_rnn.reproduce.hm_lstm.tables``)."""
    from multiscale_rnn.reproduce.hm_lstm import tables
    from multiscale_rnn.storage import read_json_lines

    rows = [r for path in args.files for r in read_json_lines(path)]
    print(tables(rows))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="train and score every (language, seed) of a part, resuming")
    r.add_argument("--part", choices=("tune", "heldout"), required=True)
    r.add_argument("--config", default="package", help="configurations of study_hm_boundaries.py, comma-separated")
    r.add_argument("--layers", default="2")
    r.add_argument("--languages", default=None, help="a subset of the part's languages, comma-separated")
    r.add_argument("--seeds", default=None, help="a subset of the part's text seeds, comma-separated (a first screen)")
    r.add_argument("--hidden", type=int, default=32)
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--limit", type=int, default=None, help="stop after this many new runs")
    r.add_argument("--out", type=Path, required=True)
    r.set_defaults(fn=cmd_run)
    s = sub.add_parser("report", help="the distributions of finished runs")
    s.add_argument("files", nargs="+")
    s.set_defaults(fn=cmd_report)
    args = p.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
