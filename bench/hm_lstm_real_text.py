"""The HM-LSTM on real text at a reduced budget: valid BPC, update counts per layer, precision /
recall of z^1 against word ends, and the paper's Figure 3 (boundary map) and Figure 4 (hidden-state
norms) drawn from the trained model.

    python bench/hm_lstm_real_text.py --data ptb-char --minutes 45 --out docs/models/figures/ptb
    python bench/hm_lstm_real_text.py --data text8 --minutes 45 --out docs/models/figures/text8

Trains the ``ptb-char-hm-lstm`` preset's model reduced to --layers x --hidden (layer norm, gated head,
step boundaries, slope 1 -> 5 by 0.04 per epoch, Adam 2e-3, clip 1, B = 64, T = 100) for --minutes of
wall time on one thread, under the package's default gradient reading and flush cut (``--paper`` for the
paper's: gradient "switch", no flush cut). Word ends are scored as where they can first be seen: the
space after each word (tolerance 1 also accepts the word's last character and the next word's first).
``--recipe`` trains the word recipe instead (``WORD_RECIPE``, the package's defaults up to 2 layers: linear
head, boundary warm-up, rate target on layer 1 (``--rate-target`` for one value per detector layer),
constant slope 1); ``--defaults`` the model's own defaults for its depth (from 3 layers the phrase recipe),
with layer norm and slope 1; the rest is the same.
``--option NAME=JSON`` sets any other model option (e.g. the phrase recipe's ``detector_input="below"``).
Writes ``<out>_fig3.png``, ``<out>_fig4.png`` and ``<out>.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from timing import cpu_name

import multiscale_rnn as msr
from multiscale_rnn.models.hm_lstm import WORD_RECIPE, boundary_scores

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="ptb-char", choices=("ptb-char", "text8"))
    p.add_argument("--minutes", type=float, default=20.0)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--embed", type=int, default=64)
    p.add_argument("--paper", action="store_true", help="gradient 'switch', no flush cut")
    p.add_argument(
        "--rate-penalty",
        type=float,
        default=0.0,
        help="lambda of the boundary-rate term (HMLSTM rate_penalty; default 0, off)",
    )
    p.add_argument(
        "--recipe",
        action="store_true",
        help="the word recipe (linear head, warm-up, rate target, slope 1: the package's defaults up to "
        "2 layers, written out)",
    )
    p.add_argument(
        "--defaults",
        action="store_true",
        help="the package's defaults for the depth (from 3 layers the phrase recipe), with layer norm",
    )
    p.add_argument(
        "--rate-target",
        default=None,
        help="with --recipe: comma-separated boundary-rate targets, one per detector layer "
        "(default: the model's, 0.18 on layer 1)",
    )
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help="any HMLSTM option, its value in JSON (e.g. --option 'warmup=[500, 1500]'); repeatable",
    )
    p.add_argument(
        "--ramp1",
        type=int,
        default=0,
        metavar="N",
        help="layer 1's rate target from 0 at its detector's start to its value over N updates: the "
        "model's rate_ramp=[N, 0] (0: none)",
    )
    p.add_argument("--valid-chars", type=int, default=100_000, help="validation characters scored")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    msr.set_num_threads(1)
    path = DATA / ("ptb" if a.data == "ptb-char" else "text8_prefix")
    corpus = msr.data.load(a.data, path=path, download=False, progress=False)
    if a.defaults:
        # the model's own defaults for its depth, layer norm on, slope 1 throughout
        opts = dict(layer_norm=True)
        schedules = {}
    elif a.recipe:
        # the word recipe: linear head, boundary warm-up, rate target, slope 1 throughout
        opts = dict(WORD_RECIPE, layer_norm=True, rate_penalty=a.rate_penalty)
        if a.rate_target is not None:
            opts["rate_target"] = [float(r) for r in a.rate_target.split(",")]
        schedules = {}
    else:
        # the model of the first documented runs (before the default recipe: no rate target, no warm-up)
        opts = dict(
            layer_norm=True,
            boundary="step",
            head="gated",
            head_size=a.hidden,
            detector_input="all",
            rate_penalty=a.rate_penalty,
            rate_target=None,
            warmup=0,
        )
        schedules = {"slope": msr.schedules.linear(1.0, 5.0, per_epoch=0.04)}
    if a.paper:
        opts.update(gradient="switch", flush_cut=False)
    for item in a.option:
        name, sep, value = item.partition("=")
        if not sep:
            p.error(f'--option {item!r}: expected NAME=JSON, e.g. detector_input="below"')
        opts[name.strip()] = json.loads(value)
    if a.ramp1 > 0:
        opts["rate_ramp"] = [a.ramp1] + [0] * max(0, a.layers - 2)  # layer 1's target only
    model = msr.HMLSTM(corpus.vocab_size, a.embed, (a.hidden,) * a.layers, seed=a.seed, **opts)
    trainer = msr.Trainer(
        model,
        optimizer=msr.optim.Adam(2e-3),
        clip_norm=1.0,
        batch_size=64,
        bptt=100,
        progress=False,
        seed=a.seed,
        model_options=schedules,
    )
    t0 = time.perf_counter()
    chunks = 0
    while time.perf_counter() - t0 < 60 * a.minutes:
        seen = []  # the chunk events of these 20 chunks: their mean training BPC and auxiliary terms
        trainer.fit(
            corpus.train,
            epochs=trainer.epoch + 1,
            max_chunks=20,
            log=lambda e: seen.append(e) if e["event"] == "chunk" else None,
        )
        chunks += 20
        terms = {k: np.mean([e["aux"][k] for e in seen]) for k in seen[0]["aux"]} if seen else {}
        aux = "".join(f"  {k} {v:.4f}" for k, v in terms.items())
        bpc_now = np.mean([e["bpc"] for e in seen]) if seen else float("nan")
        rates = (model.trace(corpus.valid[:2000]).z > 0.5).mean(axis=1)  # z^l on a slice of validation text
        print(
            f"{time.perf_counter() - t0:7.0f} s  {chunks} chunks  train bpc {bpc_now:.3f}{aux}  "
            f"z rate {' '.join(f'{r:.3f}' for r in rates)}",
            flush=True,
        )
    seconds = time.perf_counter() - t0
    valid = corpus.valid[: a.valid_chars]
    bpc = msr.evaluate(model, valid, batch_size=16)["bpc"]
    tr = model.trace(valid[:20_000], corpus.vocab)
    space = corpus.vocab.stoi[" "]
    spaces = np.asarray(tr.tokens) == space
    words_end = np.zeros_like(spaces)
    words_end[:-1] = spaces[1:]
    score = {name: boundary_scores(tr.z[0] > 0.5, ref, 1) for name, ref in (("space_tol1", spaces),)}
    score["space_exact"] = boundary_scores(tr.z[0] > 0.5, spaces, 0)
    score["word_end_exact"] = boundary_scores(tr.z[0] > 0.5, words_end, 0)
    out = {
        "data": a.data,
        "layers": a.layers,
        "hidden": a.hidden,
        "paper": a.paper,
        "rate_penalty": a.rate_penalty,
        "recipe": a.recipe,
        "defaults": a.defaults,
        "ramp1": a.ramp1,
        "rate_target": model.config.get("rate_target"),
        "warmup": model.config.get("warmup"),
        "options": {k: model.config.get(k) for k in ("detector_input", "gradient", "rate_weight")},
        "minutes": seconds / 60,
        "chunks": chunks,
        "chars_trained": chunks * 64 * 100,
        "valid_chars": int(len(valid)),
        "valid_bpc": bpc,
        "trace_chars": len(tr),
        "updates": tr.updates.tolist(),
        "reduction": tr.reduction,
        "z_rate": (tr.z > 0.5).mean(axis=1).tolist(),
        "space_rate": float(spaces.mean()),
        "scores": score,
        "cpu": f"{cpu_name()} ({msr.ISA} module), 1 thread of 2 cores",
        "slope": model.slope,
    }
    print(json.dumps(out, indent=1))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{a.out}.json").write_text(json.dumps(out, indent=1) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    start = int(np.flatnonzero(spaces[:400])[0]) + 1 if spaces[:400].any() else 0
    w = tr.window(start, start + 270)  # the paper's Figure 3 shows about 270 characters
    ax = msr.plot.boundaries(w, width=90, fontsize=8)
    ax.figure.savefig(f"{a.out}_fig3.png", dpi=130, bbox_inches="tight")
    plt.close("all")
    w = tr.window(start, start + 180)
    ax = msr.plot.hidden_norms(w, fontsize=7)
    ax.figure.set_size_inches(18, 0.45 * (2 * a.layers) + 1.2)
    ax.figure.savefig(f"{a.out}_fig4.png", dpi=130, bbox_inches="tight")
    plt.close("all")


if __name__ == "__main__":
    main()
