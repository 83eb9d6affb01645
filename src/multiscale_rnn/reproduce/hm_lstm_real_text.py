"""``hm-lstm-real-text``: the HM-LSTM on real text (the real-text protocol of docs/studies/hm_lstm_real_text.md):
boundaries scored against word and clause ends, validation BPC, the layer updates skipped, and the paper's
Figure 3 (boundary map) and Figure 4 (hidden-state norms), per (corpus, seed, configuration); resumable.

The reproduction trains the protocol's second recipe on Penn Treebank characters, seeds 0, 1, 2: 3 x 128
units, the word recipe with layers 1 and 2 targeted at the word- and clause-end rates of the training text
(``rate_target="text"``: 0.177 and 0.012 on PTB), detector input from below, the switch gradient, rate
weight 0.3, warm-up [250, 750], Adam 2e-3, clip 1, B 64 x T 100, one thread, up to 3,000 chunks a seed
(fewer when the budget is smaller). ``bench/hm_lstm_real_text.py`` runs the same code on every corpus and
configuration from the command line.

Training runs in blocks of chunks, each ending with a Trainer checkpoint in the run's folder and the training
seconds spent beside it (``spent.json``), so a killed run goes on from its last block and, given the same
thread count, gives the losses of an uninterrupted run. The folder follows from every field of the run's key
(``run_folder``), and the checkpoint stores the key: a run of other settings (threads, BPTT, ...) trains in
its own folder, and a checkpoint of another key is refused, never continued as this run's. Then it scores the
validation text (BPC) and traces part of it from a zero state: F1 at tolerance 1 of z^1 against the word ends
and of z^2 against the clause ends (``. , ; : ? !`` and line ends; text8 has none), both as first seen
(``first_seen``), each layer's boundary rate, the z^2 / z^1 rate ratio and the share of layer updates skipped:
one JSON line per run in ``results.jsonl``. z^1 is also scored against the token ends (``f1_l0_tokens``: every
punctuation mark a word of its own, ``word_boundaries(split_marks=True)``), the other reading of "word"; the
targets use the whitespace words. The real-text targets: z^1 F1 >= 0.9; z^2 at most half as often as z^1 with
F1 >= 0.5 against the clause ends.

The functions take the run's settings as one namespace ``a`` (the script's flags: ``settings`` lists them
with the reproduction's values).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import shutil
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict

import numpy as np

from ..data import clause_boundaries, word_boundaries
from ..models.hm_lstm import PHRASE_RECIPE, WORD_RECIPE, boundary_scores, first_seen
from ..storage import atomic_write_text
from ._common import (
    PTB_CHAR_FILES,
    SMOKE_MINUTES,
    Reproduction,
    Results,
    dist,
    machine,
    markdown_table,
    setup,
    setup_labels,
    unit_checkpoint,
)

__all__ = ["REPRODUCTION", "CORPORA", "reference_boundaries", "score_boundaries", "text_rates", "model_options"]


def _say(a, text: str) -> None:
    """A progress line, unless the run is quiet."""
    if not getattr(a, "quiet", False):
        print(text, flush=True)


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
def reference_boundaries(text: str, tokens: bool = True) -> dict:
    """Where word and clause ends can first be read off ``text``: the character after each word's last
    (``word_boundaries``, whitespace-separated words, prose and source code alike), after each token's last
    (the token reading: ``word_boundaries(split_marks=True)``, every mark a word of its own) and after each
    clause's last (``clause_boundaries``: before ``. , ; : ? !`` or a line end), as ``first_seen`` places
    them; without ``tokens``, the word and clause ends only."""
    refs = {"word": first_seen(word_boundaries(text)), "clause": first_seen(clause_boundaries(text))}
    if tokens:
        refs["token"] = first_seen(word_boundaries(text, split_marks=True))
    return refs


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
    tolerance 0, and against the token ends when ``refs`` has them: ``f1_l0_tokens``), z^2 against the
    clause ends (F1, precision and recall None without any clause end), their rates and the ratio of the
    rates."""
    fired = np.asarray(z) > 0.5
    out: dict = {}
    words = boundary_scores(fired[0], refs["word"], tolerance)
    out.update(f1_l0=words["f1"], precision_l0=words["precision"], recall_l0=words["recall"])
    out["f1_l0_exact"] = boundary_scores(fired[0], refs["word"], 0)["f1"]
    if "token" in refs:
        tokens = boundary_scores(fired[0], refs["token"], tolerance)
        out.update(
            f1_l0_tokens=tokens["f1"], precision_l0_tokens=tokens["precision"], recall_l0_tokens=tokens["recall"]
        )
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


@functools.lru_cache(maxsize=1)  # every seed's run of a corpus reads the same rates
def text_rates(corpus) -> dict:
    """The word- and clause-end rates (``reference_boundaries``) of the first ``TEXT_RATE_CHARS`` characters
    of ``corpus``'s training split: the targets ``--rate-target text`` gives layers 1 and 2."""
    text = corpus.vocab.decode(np.asarray(corpus.train[:TEXT_RATE_CHARS]))
    return {k: float(v.mean()) for k, v in reference_boundaries(text, tokens=False).items()}


def model_options(a, corpus=None) -> tuple:
    """The model's options, the trainer's annealed options and the configuration's name, from the flags
    (``corpus``: for ``--rate-target text``, whose targets are read off its training text)."""
    import multiscale_rnn as msr

    opts: Dict[str, Any]
    schedules: Dict[str, Any]
    if a.defaults:  # the phrase recipe (the 3-layer defaults when these runs were made), layer norm, slope 1
        opts, schedules, name = dict(PHRASE_RECIPE, layer_norm=True), {}, "defaults"
    elif a.recipe:  # the word recipe: linear head, boundary warm-up, rate target, slope 1 throughout
        opts, schedules, name = dict(WORD_RECIPE, layer_norm=True), {}, "recipe"
        if a.rate_target == "text":  # layer 1 at the word-end rate, layer 2 at the clause-end rate
            name += "+target-text"
            if corpus is not None:
                rates = text_rates(corpus)
                if rates["clause"] == 0.0:
                    raise ValueError(
                        f"rate target 'text': {corpus.name}'s training text has no clause end "
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
            raise ValueError(f'--option {item!r}: expected NAME=JSON, e.g. detector_input="below"')
        opts[key.strip()] = json.loads(value)
        name += f"+{key.strip()}={json.dumps(json.loads(value), separators=(',', ':'))}"
    if a.ramp1 > 0:
        opts["rate_ramp"] = [a.ramp1] + [0] * max(0, a.layers - 2)  # layer 1's target only
        name += f"+ramp{a.ramp1}"
    return opts, schedules, name


#: The fields of a run's key (``run_key``), in the order of its rows: a run with all of them in results.jsonl is
#: skipped, and its folder (``run_folder``) follows from all of them.
RUN_KEY = (
    "data",
    "config",
    "layers",
    "hidden",
    "embed",
    "batch_size",
    "bptt",
    "seed",
    "minutes",
    "max_chunks",
    "threads",
)


def run_key(a, data: str, config: str, seed: int) -> dict:
    """The fields that name a run in results.jsonl (``RUN_KEY``; a run with all of them there is skipped):
    ``data``, ``config`` and ``seed`` as given, the others from the flags of ``a``."""
    given = dict(data=data, config=config, seed=seed)
    return {k: given[k] if k in given else getattr(a, k) for k in RUN_KEY}


def key_hash(key: dict) -> str:
    """Eight hex digits of a hash of ``key``'s ``RUN_KEY`` fields (``key``: a run's key or its results row, which
    holds the key), the same in every process and Python version. A whole float counts as its integer (20.0 as
    20), as ``Results.find`` matches them."""
    fields = {k: int(key[k]) if isinstance(key[k], float) and key[k].is_integer() else key[k] for k in RUN_KEY}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:8]


def _readable_name(key: dict) -> str:
    """The readable part of a run's folder name: corpus, configuration, size, budget and seed (the whole name
    before the key's hash was added)."""
    budget = f"m{key['minutes']:g}" + (f"c{key['max_chunks']}" if key["max_chunks"] else "")
    name = f"{key['data']}-{key['config']}-{key['layers']}x{key['hidden']}-{budget}-seed{key['seed']}"
    return re.sub(r"[^\w.=+-]+", "_", name)


def run_folder(out: Path, key: dict) -> Path:
    """The run's own folder under ``out`` (``key``: its key or results row): checkpoint, spent.json, figures,
    run.json. Named by corpus, configuration, size, budget and seed, then ``key_hash`` of every field of the key,
    so two runs share a folder only when they share a key: one differing only in embedding, batch size, BPTT or
    threads (which change the losses too: other threads sum in another order) trains its own model instead of
    continuing, or reporting, the other's."""
    return Path(out) / f"{_readable_name(key)}-{key_hash(key)}"


def load_corpus(data: str, data_dir: Path, data_path=None):
    """The corpus ``data`` (a --data name), from ``data_path`` when given, else its folder under ``data_dir``
    (python-stdlib: this interpreter's standard library)."""
    import multiscale_rnn as msr

    folder = CORPORA[data][1]
    path = data_path if data_path is not None else (None if folder is None else data_dir / folder)
    if data == "python-stdlib":
        return msr.data.load("python-stdlib", path=path)
    return msr.data.load(data, path=path, download=False, progress=False)


# ---- training, resumable -------------------------------------------------------------------------
def read_spent(folder: Path) -> dict:
    """The training seconds (wall clock, which counts a paused process's pauses, and the process's CPU
    seconds), chunks spent so far and the boundary rates on the probe characters after each block
    (``spent.json``; none before the first block)."""
    f = folder / "spent.json"
    return json.loads(f.read_text()) if f.exists() else {"seconds": 0.0, "chunks": 0}


def write_spent(folder: Path, spent: dict) -> None:
    """``spent.json``, written atomically (a kill leaves the old one or the new one)."""
    atomic_write_text(folder / "spent.json", json.dumps(spent) + "\n")


def budget_left(a, spent: dict, chunks: int) -> bool:
    """True while the run has training time and chunks left."""
    if a.max_chunks is not None and chunks >= a.max_chunks:
        return False
    return spent["seconds"] < 60 * a.minutes


def train_blocks(a, trainer, corpus, folder: Path, key: dict) -> bool:
    """Train block after block until the budget is spent; True when it is (False: stopped after
    ``--stop-after`` blocks of this call, to be resumed). The first block resumes from the checkpoint, which
    stores the run's ``key`` (``run_key``); a checkpoint there of another key is refused (``unit_checkpoint``:
    ValueError naming the fields that differ) rather than continued and reported as this run's."""
    checkpoint = folder / "checkpoint.npz"
    spent = read_spent(folder)
    # every fit below writes the checkpoint with this extra (each write replaces the stored one), so it keeps the key
    extra = unit_checkpoint(checkpoint, key)
    if checkpoint.exists():
        trainer.resume_from(checkpoint)  # where the last block ended (also when nothing is left to train)
    blocks = 0
    while budget_left(a, spent, trainer.step):
        if a.stop_after is not None and blocks >= a.stop_after:
            return False
        t0, c0 = time.perf_counter(), time.process_time()
        seen: list = []
        block = a.block if a.max_chunks is None else min(a.block, a.max_chunks - trainer.step)
        trainer.fit(
            corpus.train,
            epochs=EPOCHS,
            max_chunks=block,
            checkpoint=checkpoint,
            resume="auto",
            log=lambda e: seen.append(e) if e["event"] == "chunk" else None,
            vocab=corpus.vocab,
            extra=extra,
        )
        rates = (trainer.model.trace(corpus.valid[: a.probe_chars]).z > 0.5).mean(axis=1)
        spent = {
            "seconds": spent["seconds"] + time.perf_counter() - t0,  # wall: counts pauses and other load
            "cpu_seconds": spent.get("cpu_seconds", 0.0) + time.process_time() - c0,  # this process's work
            "chunks": trainer.step,
            # after each block: the chunks trained and each layer's boundary rate on the probe characters
            "probes": spent.get("probes", []) + [[trainer.step, *(round(float(r), 5) for r in rates)]],
        }
        write_spent(folder, spent)
        blocks += 1
        bpc = np.mean([e["bpc"] for e in seen]) if seen else float("nan")
        _say(
            a,
            f"{folder.name}: {spent['seconds']:7.0f} s  {trainer.step} chunks  train bpc {bpc:.3f}  "
            f"z rate {' '.join(f'{r:.3f}' for r in rates)}",
        )
        if getattr(a, "check", None) is not None:
            a.check()  # a reproduction's budget: raises BudgetSpent when it is spent
    return True


def build(a, corpus, seed: int):
    """The model and its trainer for one run."""
    import multiscale_rnn as msr

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
    import multiscale_rnn as msr

    valid = corpus.valid[: a.valid_chars]
    out = {"valid_chars": int(len(valid)), "valid_bpc": msr.evaluate(model, valid, batch_size=16)["bpc"]}
    scores, tr, refs = score_trace(model, corpus, a.trace_chars)
    out.update(scores)
    return out, tr, refs


def score_trace(model, corpus, trace_chars: int) -> tuple:
    """The trace of the first ``trace_chars`` validation characters from a zero state, its boundary scores
    (``score_boundaries``), rates and layer updates; with the trace and the references."""
    tr = model.trace(corpus.valid[:trace_chars], corpus.vocab)
    text = corpus.vocab.decode(np.asarray(tr.tokens))
    refs = reference_boundaries(text)
    out = dict(trace_chars=len(tr), updates=tr.updates.tolist(), reduction=float(tr.reduction))
    with_detector = np.arange(len(tr.z)) < len(tr.z) - 1 if tr.detectors is None else np.asarray(tr.detectors)
    out["z_rate"] = (tr.z > 0.5).mean(axis=1).tolist()
    out.update(score_boundaries(tr.z[with_detector], refs))
    out.update(clause_ends=int(refs["clause"].sum()), word_ends=int(refs["word"].sum()))
    return out, tr, refs


def rescore(rows: list, out: Path, data_dir: Path, data_path=None) -> list:
    """``rows`` (finished runs of ``out``'s results.jsonl) scored again from their checkpoints, with the
    scores added since they were recorded (the token reading, ``f1_l0_tokens``); each row gets
    ``rescored_f1_l0``, the word F1 of the new trace, which equals the recorded ``f1_l0`` when the trace ran
    on the instruction-set module and thread count of the run (another sums in another order, which can
    move a z near 0.5). The corpora are read as ``load_corpus`` reads them (``data_path``: the one corpus
    the runs were given with --data-path). A row whose folder has no checkpoint is looked for in the folder the
    runs had before their names held the key's hash (``_readable_name``), else left as it is."""
    from ..checkpoint import load

    corpora: dict = {}
    new = []
    for r in rows:
        checkpoint = run_folder(out, r) / "checkpoint.npz"
        if not checkpoint.exists():  # a run recorded before the folder names held the key's hash: its old folder
            checkpoint = Path(out) / _readable_name(r) / "checkpoint.npz"
        if not checkpoint.exists():
            new.append(r)
            continue
        if r["data"] not in corpora:
            corpora[r["data"]] = load_corpus(r["data"], data_dir, data_path)
        scores, _, _ = score_trace(load(checkpoint).model, corpora[r["data"]], r["trace_chars"])
        new.append(dict(r, **{k: v for k, v in scores.items() if k not in r}, rescored_f1_l0=scores["f1_l0"]))
    return new


def draw(tr, refs, folder: Path, layers: int) -> list:
    """Figure 3 (270 characters, 3 rows of 90) and Figure 4 (180 characters) of the trace, from just after
    the first word end of its first 400 characters; the files written."""
    import matplotlib

    import multiscale_rnn as msr

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
    key = run_key(a, data, model_options(a)[2], seed)
    if results.find(key) is not None:
        _say(a, f"{data} seed {seed} ({key['config']}): in {results.path} already")
        return True
    folder = run_folder(a.out, key)
    folder.mkdir(parents=True, exist_ok=True)
    model, trainer = build(a, corpus, seed)
    if not train_blocks(a, trainer, corpus, folder, key):
        return False
    row = dict(key, corpus=CORPORA[data][0])
    row.update((k, v) for k, v in machine().items() if k != "threads")  # the threads asked for are in the key
    spent = read_spent(folder)
    row.update(
        seconds=spent["seconds"],
        cpu_seconds=spent.get("cpu_seconds"),
        probes=spent.get("probes"),  # [chunks, rate of z^1, z^2, ...] after each block (none before 2026-11-27)
        chunks=trainer.step,
        chars_trained=trainer.step * a.batch_size * a.bptt,
    )
    row["options"] = {k: model.config.get(k) for k in ("detector_input", "gradient", "rate_target", "rate_weight")}
    row.update(warmup=model.config.get("warmup"), slope=model.slope, python=sys.version.split()[0])
    scores, tr, refs = score_run(a, model, corpus)
    row.update(scores)
    if not a.no_figures:
        row["figures"] = draw(tr, refs, folder, a.layers)
    atomic_write_text(folder / "run.json", json.dumps(row, indent=1) + "\n")
    results.append(row)
    z2 = "-" if row.get("f1_l1") is None else f"{row['f1_l1']:.2f}"
    _say(
        a,
        f"{data} seed {seed} ({key['config']}): z1 F1 {row['f1_l0']:.2f} (rate {row['rate_l0']:.3f}), z2 F1 {z2} "
        f"(ratio {row.get('rate_ratio')}), valid BPC {row['valid_bpc']:.3f}, reduction {row['reduction']:.2f}",
    )
    return True


# ---- the report ----------------------------------------------------------------------------------
def report_table(rows: list) -> str:
    """Per corpus and configuration (and size, budget and set-up: module, threads and CPU, so runs that sum
    in another order stay apart): runs, seeds, and the median and range over them of every figure; the
    targets met as a count (a markdown table)."""
    groups: dict = {}
    for r in rows:
        key = (r["corpus"], r["config"], r["layers"], r["hidden"], r["minutes"], setup(r))
        groups.setdefault(key, []).append(r)
    labels = setup_labels(key[-1] for key in groups)
    header = [
        "corpus",
        "configuration",
        "size",
        "minutes",
        "module, threads",
        "seeds",
        "z1 F1 (words)",
        "z1 F1 (tokens)",
    ]
    header += ["z1 rate", "z2 F1 (clauses)", "z2 rate", "z2 / z1", "targets met", "valid BPC", "update reduction"]
    table = []
    for (corpus, config, layers, hidden, minutes, where), rs in sorted(groups.items()):
        judged = [r["targets_met"] for r in rs if r.get("targets_met") is not None]
        none = "- (no clause ends)" if all(r.get("clause_ends") == 0 for r in rs) else "-"
        met = f"{sum(judged)}/{len(judged)}" if judged else none
        d = [dist([r[k] for r in rs if r.get(k) is not None]) for k in ("f1_l0", "f1_l0_tokens", "rate_l0", "f1_l1")]
        d += [dist([r[k] for r in rs if r.get(k) is not None]) for k in ("rate_l1",)]
        d += [dist([r[k] for r in rs if r.get(k) is not None]) for k in ("rate_ratio", "valid_bpc", "reduction")]
        seeds = ",".join(str(r["seed"]) for r in sorted(rs, key=lambda r: r["seed"]))
        table.append(
            [corpus, f"`{config}`", f"{layers} x {hidden}", f"{minutes:g}", labels[where], seeds]
            + d[:6]
            + [met]
            + d[6:]
        )
    return markdown_table(header, table)


#: z^1's rate on the probe characters above which a probe counts as "on the words" (the word state: 0.17-0.33
#: on the four corpora; the sparse state, line ends and marks or nothing, stays at 0.00-0.11).
WORD_STATE = 0.12


def probe_states(probes: list, last: int = 1000) -> dict:
    """z^1's state over a run's last ``last`` chunks from its probes (``[chunks, z^1 rate, ...]`` after each
    block): ``share``, the fraction of those probes on the words (rate above ``WORD_STATE``); ``changes``,
    how often the state changes between consecutive probes; ``ends_on_words``, the last probe's state."""
    p = np.asarray(probes, dtype=float)  # (blocks, 1 + layers with a detector)
    on = p[p[:, 0] > p[-1, 0] - last, 1] > WORD_STATE
    return {"share": float(on.mean()), "changes": int((on[1:] != on[:-1]).sum()), "ends_on_words": bool(on[-1])}


def state_table(rows: list, last: int = 1000) -> str:
    """Per corpus and configuration (and set-up: module, threads and CPU), over the runs that kept their
    probes: the share of the last ``last`` chunks' probes with z^1 on the words, the changes of state (median
    [min, max]) and the runs whose last probe is on the words (a markdown table)."""
    groups: dict = {}
    for r in rows:
        if r.get("probes"):
            key = (r.get("corpus", r.get("data")), r["config"], setup(r))
            groups.setdefault(key, []).append(probe_states(r["probes"], last))
    labels = setup_labels(key[-1] for key in groups)
    header = ["corpus", "configuration", "module, threads", "runs", "z1 on the words, share of the probes"]
    header += ["changes of state", "runs ending on the words"]
    table = [
        [corpus, f"`{config}`", labels[where], len(st), dist([x["share"] for x in st])]
        + [dist([x["changes"] for x in st], digits=0), f"{sum(x['ends_on_words'] for x in st)} of {len(st)}"]
        for (corpus, config, where), st in sorted(groups.items())
    ]
    return markdown_table(header, table)


# ---- the reproduction ----------------------------------------------------------------------------
#: Seeds of the reproduction (the real-text seeds of boundary_split.json).
SEEDS = (0, 1, 2)
#: Training chunks per seed at full scale (the study's runs) and the chunks per second one thread trains
#: at 3 x 128 (3,000 chunks took 70-85 minutes on the AMD EPYC).
FULL_CHUNKS = 3_000
CHUNKS_PER_SECOND = 0.6


def settings(minutes: float, out_dir=None, data_path=None) -> SimpleNamespace:
    """The run's settings (the script's flags) at a budget: below a minute the smoke scale (3 x 12, 6
    chunks, seed 0), else the second recipe at 3 x 128 for as many chunks per seed as the budget gives
    (at most ``FULL_CHUNKS``)."""
    smoke = minutes < SMOKE_MINUTES
    chunks = 6 if smoke else max(20, int(min(FULL_CHUNKS, 60.0 * minutes / len(SEEDS) * CHUNKS_PER_SECOND)) // 20 * 20)
    return SimpleNamespace(
        data="ptb-char", seeds=SEEDS[:1] if smoke else SEEDS, minutes=minutes, max_chunks=chunks,
        block=3 if smoke else 20, stop_after=None, layers=3, hidden=12 if smoke else 128, embed=8 if smoke else 64,
        batch_size=4 if smoke else 64, bptt=10 if smoke else 100, threads=1, paper=False, rate_penalty=0.0,
        recipe=True, defaults=False, rate_target="text", ramp1=0,
        option=['detector_input="below"', 'gradient="switch"', "rate_weight=0.3", "warmup=[250,750]"],
        valid_chars=300 if smoke else 100_000, trace_chars=300 if smoke else 20_000, probe_chars=50 if smoke else 2_000,
        data_dir=None, data_path=data_path, no_figures=False, out=Path(out_dir) if out_dir else None, quiet=False,
    )  # fmt: skip


def run(out_dir: Path, budget, progress: bool, data_path) -> None:
    """Each seed's run on PTB characters, resuming from its folder's checkpoint."""
    import multiscale_rnn as msr

    a = settings(budget.minutes, out_dir, data_path)
    a.quiet, a.check = not progress, budget.check
    corpus = load_corpus("ptb-char", Path(), data_path)
    results = Results(out_dir)
    msr.set_num_threads(a.threads)
    for seed in a.seeds:
        budget.check()
        one_run(a, "ptb-char", seed, corpus, results)
        budget.unit_finished()


def report(out_dir: Path) -> str:
    """The runs' table (median and range over seeds) with the targets."""
    rows = [r for r in Results(out_dir).rows() if "f1_l0" in r]
    return "\n".join(
        [
            "PTB characters, 3 layers: z¹ scored against the word ends and z² against the clause ends (both "
            "as first seen, tolerance 1) on the validation text. The paper shows its boundaries qualitatively "
            "(Figure 3) and reports no F1; the targets here are the protocol's: z¹ F1 >= 0.9; z² at most half "
            f"as often as z¹ with F1 >= {MIN_CLAUSE_F1} against the clause ends.",
            "",
            report_table(rows) if rows else "(no finished run yet)",
        ]
    )


def figures(out_dir: Path) -> None:
    """Each finished run's Figure 3, copied next to the report."""
    for r in Results(out_dir).rows():
        for f in r.get("figures", []):
            if f.endswith("fig3.png") and (Path(out_dir) / f).is_file():
                shutil.copyfile(Path(out_dir) / f, Path(out_dir) / f"seed{r['seed']}-fig3.png")


def estimate(minutes: float) -> float:
    """Expected minutes: every seed's chunks at ``CHUNKS_PER_SECOND``, at most the budget."""
    a = settings(minutes)
    if minutes < SMOKE_MINUTES:
        return minutes
    return min(minutes, len(a.seeds) * a.max_chunks / CHUNKS_PER_SECOND / 60.0)


def scale(minutes: float) -> str:
    """The scale note of a budget."""
    a = settings(minutes)
    if minutes < SMOKE_MINUTES:
        return "smoke scale: 3 x 12 units, 6 chunks of 4 x 10 characters, seed 0"
    reduced = "" if a.max_chunks >= FULL_CHUNKS else f" (the study's {FULL_CHUNKS:,})"
    return f"3 x 128 units, {a.max_chunks:,} chunks of 64 x 100 characters per seed{reduced}, seeds 0, 1, 2"


REPRODUCTION = Reproduction(
    name="hm-lstm-real-text",
    paper="Chung, Ahn & Bengio 2017, Hierarchical Multiscale RNNs (Figure 3, on real text)",
    what="z¹ against word ends and z² against clause ends on PTB characters, with BPC and the updates skipped",
    default_budget=180.0,
    reduced=True,
    scale=scale,
    run=run,
    report=report,
    data_files=PTB_CHAR_FILES,
    seeds="0, 1, 2",
    figures=figures,
    estimate=estimate,
)
