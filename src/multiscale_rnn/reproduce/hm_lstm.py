"""``hm-lstm-boundaries``: the boundary-discovery protocol (docs/studies/boundary_protocol.md) on its
held-out part, with the package's default HM-LSTM recipe.

The languages are those of ``multiscale_rnn.data.languages``; the split (``boundary_split.json`` in
the package's data resources) fixes which languages and text seeds tune recipes and which are held
back. A unit is one (layers, language, seed): the package's defaults for the depth (the protocol
recipe with 2 layers), five restarts compared by ``msr.best_of``, 40 epochs, hidden 32, on
``generate(language, 40_000, seed)`` split 90/10, scored on the first 2,000 validation characters: F1
at tolerance 1 of z^1 against the word ends and of z^2 against the phrase ends (as first seen), each
layer's boundary rate, validation BPC and the share of layer updates skipped. Rows have the layout of
``bench/boundary_protocol.py``'s output, whose ``report`` this module's ``report_table`` is.
"""

from __future__ import annotations

import json
import re
import time
from importlib.resources import files
from pathlib import Path
from typing import Dict

import numpy as np

from ..training.restarts import most_agreed
from ._common import SMOKE_MINUTES, Reproduction, Results, UnitProgress, dist, figure, machine, setup, setup_labels

__all__ = [
    "REPRODUCTION",
    "load_split",
    "score_package_run",
    "word_level_scores",
    "report_table",
    "miss_table",
    "levels_table",
    "tables",
    "dist",
]

RECIPE_EPOCHS = 40  # the default recipe at every depth (880 updates of 32 x 50 characters)
SECONDS_PER_RUN = 8  # measured median of the held-out 2-layer runs, one thread (AMD EPYC Zen 5: 6 s avx512, 8 s avx2)


def load_split() -> dict:
    """The protocol's split: ``tune`` and ``heldout`` (``languages``, ``seeds``), ``n_chars``."""
    return json.loads(files("multiscale_rnn.data").joinpath("resources", "boundary_split.json").read_text())


def score_package_run(text, layers, seed, hidden=32, epochs=RECIPE_EPOCHS, restarts=5, read=2000, progress=False):
    """Train the package's default HM-LSTM for ``layers`` on the ``HierarchicalText`` ``text`` (five
    restarts, the one with the lowest BPC on the validation text after the scored part kept) and score it:
    a dict with ``f1_l{l}``, ``rate_l{l}`` (layers with a detector), ``bpc``, ``reduction``, ``seconds``."""
    import multiscale_rnn as msr

    corpus = text.corpus(valid_fraction=0.1, test_fraction=0.0)
    t0 = time.perf_counter()
    model, _ = msr.best_of(
        lambda s: msr.HMLSTM(corpus.vocab_size, 16, [hidden] * layers, seed=s),
        corpus.train,
        corpus.valid[read:],
        restarts=restarts,
        epochs=epochs,
        seed=seed * restarts,
        select_after="auto",
        make_optimizer=lambda: msr.optim.Adam(5e-3),
        clip_norm=1.0,
        batch_size=32,
        bptt=50,
        progress=progress,
    )
    out = {"seconds": time.perf_counter() - t0, "bpc": msr.evaluate(model, corpus.valid, batch_size=16)["bpc"]}
    tr = model.trace(corpus.valid[:read])
    out["updates"], out["reduction"] = tr.updates.tolist(), tr.reduction
    for l, what in ((0, "word"), (1, "phrase")):
        if l < layers - 1:
            z = tr.z[l] > 0.5
            ref = msr.first_seen(corpus.boundaries["valid"][what][:read])
            out[f"f1_l{l}"] = msr.boundary_scores(z, ref, 1)["f1"]
            out[f"rate_l{l}"] = float(z.mean())
    if layers >= 2:
        out.update(word_level_scores(tr.z[0] > 0.5, corpus.boundaries["valid"], read))
    return out


def word_level_scores(z1, valid_boundaries, read: int) -> Dict[str, float]:
    """What z^1 (bool, one per scored step) marks, beside its F1 against the word ends: its precision and
    recall against them (``prec_l0``, ``rec_l0``: firing inside words lowers the precision, marking a
    subset of the word ends the recall) and, where the text knows its morphemes (the protocol's languages),
    its F1 against the morpheme ends (``f1morph_l0``: every word end, and inside a word the end of a prefix
    and of a stem before a suffix), all where each end can first be seen, tolerance 1."""
    from ..models.hm_lstm import boundary_scores, first_seen

    words = boundary_scores(z1, first_seen(valid_boundaries["word"][:read]), 1)
    out = {"prec_l0": words["precision"], "rec_l0": words["recall"]}
    if "morpheme" in valid_boundaries:
        out["f1morph_l0"] = boundary_scores(z1, first_seen(valid_boundaries["morpheme"][:read]), 1)["f1"]
    return out


def _grouped_table(rows, columns, cells) -> str:
    """A markdown table of one row per (configuration, depth and width, part, set-up: module, threads and CPU) of
    ``rows`` (runs that sum in another order stay apart; ``setup_labels`` names the CPU where there are several;
    rows without a width ran at the recipe's 32, which the table does not repeat): the group's key, then
    ``cells(group_rows)`` under ``columns``; empty when there are no rows."""
    groups: Dict[tuple, list] = {}
    for r in rows:
        groups.setdefault((r["config"], r["layers"], r.get("hidden", 32), r["part"], setup(r)), []).append(r)
    if not groups:
        return ""
    labels = setup_labels(key[-1] for key in groups)
    head = ["configuration", "layers", "part", "module, threads", *columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (config, layers, hidden, part, where), rs in sorted(groups.items()):
        depth = layers if hidden == 32 else f"{layers} x {hidden}"
        lines.append(f"| `{config}` | {depth} | {part} | {labels[where]} | " + " | ".join(cells(rs)) + " |")
    return "\n".join(lines)


def report_table(rows) -> str:
    """Per configuration, depth, part, instruction-set module and threads (runs that sum in another order
    stay apart): the share of spaced (language, seed) pairs with z^1 F1 >= 0.9, and the median and range of
    every figure, spaced and unspaced apart (a markdown table)."""

    def cells(rs):
        spaced = [r for r in rs if r["spaced"]]
        ok = sum(r["f1_l0"] >= 0.9 for r in spaced)
        return [
            str(len(rs)),
            f"{ok}/{len(spaced)} ({100 * ok / max(1, len(spaced)):.0f} %)",
            dist([r["f1_l0"] for r in spaced]),
            dist([r["f1_l0"] for r in rs if not r["spaced"]]),
            dist([r["rate_l0"] for r in rs]),
            dist([r["f1_l1"] for r in rs if "f1_l1" in r]),
            dist([r["rate_l1"] for r in rs if "rate_l1" in r]),
            dist([r["bpc"] for r in rs]),
            dist([r["reduction"] for r in rs]),
        ]

    columns = ["runs", "spaced: z1 F1 >= 0.9", "spaced z1 F1", "unspaced z1 F1", "z1 rate", "z2 F1 (phrases)"]
    return _grouped_table(rows, columns + ["z2 rate", "valid BPC", "update reduction"], cells)


def _units(smoke: bool):
    """(layers, language, seed) of the held-out part (smoke: two languages, one seed, 2,000 characters)."""
    part = load_split()["heldout"]
    if smoke:
        return [(2, language, part["seeds"][0]) for language in part["languages"][:2]]
    return [(2, language, seed) for language in part["languages"] for seed in part["seeds"]]


def run(out_dir: Path, budget, progress: bool, data_path=None) -> None:
    """Train and score every held-out (language, seed) not yet in ``out_dir/results.jsonl``."""
    n_chars = 4_000 if budget.smoke else load_split()["n_chars"]
    units = _units(budget.smoke)
    results = Results(out_dir)
    done = sum(results.find(_base(*u)) is not None for u in units)
    bar = UnitProgress(progress, len(units), done, "hm-lstm-boundaries")
    try:
        for i, unit in enumerate(units, 1):
            if results.find(_base(*unit)) is None:
                budget.check()
                _one_run(results, unit, n_chars, budget.smoke, lambda text: bar.line(f"[{i}/{len(units)}] {text}"))
                bar.advance()
                budget.unit_finished()
    finally:
        bar.close()


def _base(layers, language, seed) -> dict:
    """The fields that name a unit in the results."""
    return dict(config="package", layers=layers, part="heldout", language=language, seed=seed)


def _one_run(results, unit, n_chars, smoke, line) -> None:
    """Train and score one (layers, language, seed), append its row and print its line."""
    from ..data.languages import draw_language, generate

    layers, language, seed = unit
    base = _base(*unit)
    spec = draw_language(language)
    t0 = time.perf_counter()
    kw = dict(hidden=8, epochs=1, restarts=1, read=200) if smoke else {}
    r = score_package_run(generate(spec, n_chars, seed), layers, seed, progress=False, **kw)
    r.update(base, text=f"language{language}", spaced=bool(spec.separator), phrases=spec.phrases)
    r.update(machine(), wall=time.perf_counter() - t0)
    results.append(r)
    line(
        f"language {language} seed {seed}: z1 F1 {r['f1_l0']:.2f} (rate {r['rate_l0']:.2f}), "
        f"BPC {r['bpc']:.3f}, {r['wall']:.0f} s"
    )


def report(out_dir: Path) -> str:
    """The distribution table of the finished runs, and the protocol's target."""
    rows = Results(out_dir).rows()
    return "\n".join(
        [
            "Held-out languages of the protocol (docs/studies/boundary_protocol.md), the package's default "
            "recipe. Target: z^1 F1 >= 0.9 against word ends on >= 80 % of the spaced (language, seed) pairs. "
            "Median [min, max].",
            "",
            tables(rows),
        ]
    )


def tables(rows) -> str:
    """The protocol's runs as tables: :func:`report_table`, then :func:`levels_table` and :func:`miss_table`
    under their titles where they have rows."""
    parts = [report_table(rows)]
    for title, table in (
        ("With a second detector, words and phrases", levels_table(rows)),
        ("Where z^1 misses the words, what it marks instead", miss_table(rows)),
        ("Restarts trained one at a time: which one to keep", selection_table(rows)),
    ):
        if table:
            parts.append(f"\n{title}:\n\n{table}")
    return "\n".join(parts)


def miss_table(rows) -> str:
    """Where z^1 misses the words (spaced pairs with F1 < 0.9), what it marks instead, per configuration, depth,
    part, module and threads (the rows with ``prec_l0``): the words plus boundaries inside them (recall >= 0.9,
    precision < 0.9), a subset of the word ends (precision >= 0.9, recall < 0.9), or neither; and, on the
    languages with affixes, z^1's F1 against the morpheme ends beside its F1 against the word ends. A
    markdown table, empty when no row has the fields."""
    from ..data.languages import draw_language

    def cells(rs):
        miss = [r for r in rs if r["f1_l0"] < 0.9]
        more = sum(r["rec_l0"] >= 0.9 and r["prec_l0"] < 0.9 for r in miss)
        fewer = sum(r["prec_l0"] >= 0.9 and r["rec_l0"] < 0.9 for r in miss)
        affixed = [r for r in rs if "f1morph_l0" in r and draw_language(r["language"]).morphology != "none"]
        counts = [f"{len(miss)}/{len(rs)}", str(more), str(fewer), str(len(miss) - more - fewer)]
        return counts + [dist([r["f1_l0"] for r in affixed]), dist([r["f1morph_l0"] for r in affixed])]

    columns = ["spaced misses", "words and more (inside words)", "a subset of the word ends", "neither"]
    columns += ["with affixes: z1 F1 against words", "against morphemes"]
    return _grouped_table([r for r in rows if r["spaced"] and "prec_l0" in r], columns, cells)


def _z1_select(r) -> np.ndarray:
    """A run's z^1 on the selection text, unpacked from its row (``z1_select``, ``n_select``)."""
    return np.unpackbits(np.frombuffer(bytes.fromhex(r["z1_select"]), dtype=np.uint8), count=r["n_select"]) > 0


def selection_table(rows) -> str:
    """The restarts of a configuration trained one at a time (configurations ``<base>+cand<i>``, the rows with
    ``dl_l0``), per base configuration, depth, part, module and threads: on how many spaced (language, seed)
    pairs z^1 finds the words (F1 >= 0.9) with candidate 0 alone, with any candidate, and with the one kept by
    each rule that reads no labels: the lowest validation BPC (``bpc_select``, as ``best_of`` keeps), the
    shortest description of z^1's segments of the training text (``dl_l0``) and, where the rows keep z^1 on the
    selection text (``z1_select``), the boundaries the other candidates agree with most (:func:`most_agreed`).
    Pairs missing a candidate are left out. A markdown table, empty when no row is a candidate."""
    candidate = re.compile(r"^(.*)\+cand(\d+)$")
    pairs: Dict[tuple, Dict[int, dict]] = {}
    for r in rows:
        m = candidate.match(r["config"])
        if m and r["spaced"] and "dl_l0" in r:
            key = (m.group(1), r["layers"], r["part"], setup(r), r["language"], r["seed"])
            pairs.setdefault(key, {})[int(m.group(2))] = r
    k = max((len(c) for c in pairs.values()), default=0)
    agree = all("z1_select" in r for c in pairs.values() for r in c.values())
    kept = []
    for key, c in pairs.items():
        if len(c) == k:
            rs = [c[i] for i in sorted(c)]
            f1 = {
                "first": rs[0]["f1_l0"],
                "any": max(r["f1_l0"] for r in rs),
                "bpc": min(rs, key=lambda r: r["bpc_select"])["f1_l0"],
                "dl": min(rs, key=lambda r: r["dl_l0"])["f1_l0"],
            }
            if agree:
                f1["agree"] = rs[most_agreed([_z1_select(r) for r in rs])]["f1_l0"]
            kept.append({**rs[0], "config": key[0], "picked": f1})
    rules = ["first", "any", "bpc", "dl"] + (["agree"] if agree else [])

    def cells(ps):
        found = [sum(p["picked"][rule] >= 0.9 for p in ps) for rule in rules]
        return [str(k)] + [f"{n}/{len(ps)}" for n in found] + [dist([p["picked"][rules[-1]] for p in ps])]

    columns = ["candidates", "spaced: z1 F1 >= 0.9, candidate 0 alone", "any candidate", "kept by validation BPC"]
    columns += ["kept by the shortest description"] + (["kept by the most agreement"] if agree else [])
    columns += ["z1 F1, kept by the " + ("most agreement" if agree else "shortest description")]
    return _grouped_table(kept, columns, cells)


def levels_table(rows) -> str:
    """Words and phrases together, per configuration, depth, part, module and threads (the spaced rows with a
    second detector): z^1 F1 >= 0.9 against the word ends, z^2 F1 >= 0.5 against the phrase ends on the
    languages whose phrases end in a mark and on those whose do not, and both levels in one run. A markdown
    table, empty when no row has a second detector."""

    def cells(rs):
        marked = [r["f1_l1"] >= 0.5 for r in rs if r["phrases"] == "marked"]
        unmarked = [r["f1_l1"] >= 0.5 for r in rs if r["phrases"] == "unmarked"]
        words = sum(r["f1_l0"] >= 0.9 for r in rs)
        both = sum(r["f1_l0"] >= 0.9 and r["f1_l1"] >= 0.5 for r in rs)
        return [
            f"{words}/{len(rs)}",
            f"{sum(marked)}/{len(marked)}",
            f"{sum(unmarked)}/{len(unmarked)}",
            f"{both}/{len(rs)}",
        ]

    columns = ["spaced: z1 F1 >= 0.9", "z2 F1 >= 0.5, marked phrases", "the same, unmarked", "words and phrases both"]
    return _grouped_table([r for r in rows if r["spaced"] and "f1_l1" in r], columns, cells)


def figures(out_dir: Path) -> None:
    """``z1_f1.png``: the z^1 F1 of every held-out run, spaced and unspaced languages apart."""
    rows = Results(out_dir).rows()
    if not rows:
        return

    def draw(ax):
        for spaced, name in ((True, "spaced"), (False, "unspaced")):
            values = [r["f1_l0"] for r in rows if r["spaced"] == spaced]
            if values:
                ax.hist(values, bins=np.linspace(0, 1, 21), alpha=0.6, label=f"{name} ({len(values)} runs)")
        ax.axvline(0.9, color="k", linestyle="--", linewidth=1)
        ax.set_xlabel("z¹ F1 against word ends (tolerance 1)")
        ax.set_ylabel("runs")
        ax.legend(fontsize=7)

    figure(out_dir, "z1_f1.png", draw)


def scale(minutes: float) -> str:
    """The scale note of a budget."""
    if minutes < SMOKE_MINUTES:
        return "smoke scale: 2 languages, 1 seed, 4,000 characters, 1 epoch, 1 restart"
    n = len(_units(False))
    return (
        f"the protocol's full held-out part with 2 layers ({n} runs, ~{SECONDS_PER_RUN} s each); 3 layers not included"
    )


REPRODUCTION = Reproduction(
    name="hm-lstm-boundaries",
    paper="Chung, Ahn & Bengio 2017, Hierarchical Multiscale RNNs (boundary discovery)",
    what="the boundary protocol's held-out languages: z^1 F1 against word ends, rates, BPC",
    default_budget=180.0,
    reduced=False,
    scale=scale,
    run=run,
    report=report,
    seeds="text seeds 10-14 of the held-out part; model seeds 5*seed .. 5*seed+4",
    figures=figures,
    estimate=lambda minutes: min(minutes, len(_units(minutes < SMOKE_MINUTES)) * SECONDS_PER_RUN / 60.0),
)
