"""Boundary discovery of the HM-LSTM on the generated hierarchical text: options x seeds.

For each configuration and seed, trains a small HM-LSTM on ``synthetic_hierarchy(40_000, seed=0)``
(with spaces, or with ``--text nosep`` the same process with no separator between words), then reads
the first 2000 validation characters from a zero state and reports, per layer with a detector:

- F1 of z^l against the reference boundaries at tolerance 1 (``boundary_scores``). The reference is
  where a boundary can first be seen: one step after the end of each word (layer 1) or phrase
  (layer 2), i.e. the separator after it (the first letter of the next word without separators);
  tolerance 1 also accepts a boundary on the last character itself;
- the fraction of steps with z^l = 1;
- the validation bits per character, and the training time (one thread).

    python bench/study_hm_boundaries.py            # the package's default recipe, 2 and 3 layers, 5 seeds
    python bench/study_hm_boundaries.py --configs paper,blend+cut+rate0.05 --seeds 0,1,2 --layers 2
    python bench/study_hm_boundaries.py --layers 3 \
        --configs default+target0.18_0.05+below+switch2+mu20+warm500_1500+ep100+best5@65   # the phrase recipe

Configuration names: see ``configuration`` (e.g. ``default`` for one run of the defaults, ``paper``,
``blend+cut``, ``switch+cut+rate0.05+bias-1``).

Prints one markdown row per (configuration, layers, text) with every seed's "F1 (rate)" and the
count of seeds reaching F1 >= 0.9 in layer 1 (and 0.7 in layer 2 of 3-layer models).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

import multiscale_rnn as msr
from multiscale_rnn.models.hm_lstm import WORD_RECIPE, boundary_scores, first_seen
from multiscale_rnn.reproduce.hm_lstm import RECIPE_EPOCHS, word_level_scores
from multiscale_rnn.storage import append_lines, read_json_lines

EPOCHS = 8  # the earlier study's configurations


def configuration(name: str):
    """(model options, trainer settings, model-option schedules) of a configuration name.

    ``package``: the package's default recipe for the model's depth (the model's own defaults, five
    restarts compared where ``best_of`` chooses, 40 epochs with 2 layers, 100 with 3). ``default``: one
    run of the word recipe (the defaults up to 2 layers, written out: ``WORD_RECIPE`` with the
    Trainer's boundary warm-up, no option schedule, 40 epochs), then any words after ``default+``;
    ``default+best5`` is the word recipe with restarts (five such runs, the lowest validation BPC kept). Otherwise
    the earlier study's base
    (gated head, no rate target, no warm-up) and words joined by ``+``:
    ``paper`` (gradient switch, no flush cut, no rate term, slope 1 -> 5 by 1 per epoch), ``switch``,
    ``blend``, ``cut`` (flush_cut), ``nocut``, ``ln`` (layer_norm), ``sample`` (Bernoulli boundaries),
    ``soft`` (z = zhat),
    ``rate<x>`` (rate_penalty; ``rate<x>@<e>`` from epoch e on; ``ramp<a>_<b>_<p>``: from a to b by p per epoch),
    ``bias<x>`` (boundary_bias), ``lr<x>``, ``ep<n>`` (epochs), ``h<a>_<b>..`` (layer sizes, the last repeated to
    the model's depth),
    ``slope<a0>_<a1>`` (linear, 1 per epoch) or ``slope<a>`` (constant), ``halve<n>`` (the learning rate
    halved after every epoch from epoch n on, ``schedules.HalveAfter``), ``b2s<e>`` (blend until epoch e,
    then switch), ``oracle`` (layer 1's boundaries fixed on the spaces, for comparison; ``oracle2phrase``,
    ``oracle2word``, ``oracle2never``: layer 2's fixed too, at the phrase ends, every word end, nowhere), ``notd``
    (``top_down=False``: no top-down term), ``notd2`` (the top-down weights of layers 2 and above held at
    zero; layer 1 keeps its top-down term), ``below2`` (``detector_input=["all", "below"]``: layer 2's
    boundary row reads only the layer below), ``below`` (``detector_input="below"``: every boundary row
    does, z^1's reads only the symbol), ``freeze1@<n>`` (layer 1's boundary row held after n updates), ``switch2``
    (``gradient=["blend", "switch"]``: z^1 read as a
    blend, z^2 as a switch; 3 layers), ``step`` (threshold boundaries, the default); and
    the recipe's words ``target<r1>[_<r2>]`` (``rate_target``,
    ``targetnone`` for none), ``mu<x>`` (``rate_weight``), ``slack<s>_<t>`` (``rate_slack_below``,
    ``rate_slack_above``: ``slack0_1`` makes the target a floor; ``slack<s1>_<t1>_<s2>_<t2>`` per layer),
    ``warm<n>`` (``warmup``: detectors held off for n updates; ``warm<n1>_<n2>``: layer 1's for n1, layer 2's
    for n2), ``t1ramp<a>_<b>_<n>`` / ``t2ramp<a>_<b>_<n>`` (layer 1's / layer 2's target from a at the
    warm-up's end to b over n updates),
    ``linear`` / ``gated`` (the head), ``slope1`` (no slope schedule), ``best<k>`` (k restarts with
    ``msr.best_of``, model seeds k*seed .. k*seed + k-1, chosen on the validation text after the scored part;
    ``best<k>@<e>``: chosen after e epochs, the chosen run then trained on alone).
    """
    if name == "package" or name.startswith("package+"):
        # the package's defaults for the model's depth (the protocol recipe up to 2 layers, the band recipe
        # from 3; in rows made before the band recipe became the 3-layer default, the phrase recipe for 100
        # epochs), trained as docs/models/hm_lstm.md's default recipe: five restarts compared where best_of
        # chooses by itself (at the end), 40 epochs
        opts, train, sched = {}, dict(lr=5e-3, epochs=RECIPE_EPOCHS, restarts=5, select_after="auto"), {}
        words = name.split("+")[1:]
    elif name == "default" or name.startswith("default+"):
        # the word recipe (the 2-layer defaults before the protocol recipe, written out so that these rows mean
        # the same for 3 layers): rate target, linear head, flush cut, "blend", the Trainer's boundary warm-up,
        # no option schedule (slope 1), 40 epochs; words after "default+" change it (e.g. default+ep60,
        # default+target0.2, default+warm250)
        opts, train, sched = dict(WORD_RECIPE), dict(lr=5e-3, epochs=RECIPE_EPOCHS), {}
        words = name.split("+")[1:]
    else:
        # the earlier study's base (the defaults before the recipe: gated head, no rate target, no warm-up)
        opts = dict(
            gradient="switch",
            flush_cut=False,
            rate_penalty=0.0,
            boundary_bias=0.0,
            head="gated",
            detector_input="all",
            rate_target=None,
            warmup=0,
        )
        train = dict(lr=5e-3, epochs=EPOCHS)
        sched = {"slope": msr.schedules.linear(1.0, 5.0, per_epoch=1.0)}
        words = name.split("+")
    return _words(words, opts, train, sched, name)


def _words(words, opts, train, sched, name):
    for word in words:
        if word == "linear" or word == "gated":
            opts["head"] = word
            continue
        if word.startswith("target"):  # rate_target: target<r1>[_<r2>...], "targetnone" for none
            v = word[6:]
            opts["rate_target"] = None if v == "none" else [float(x) for x in v.split("_")]
            opts.setdefault("rate_weight", 5.0)
            continue
        if word.startswith("mu"):
            opts["rate_weight"] = float(word[2:])
            continue
        if word.startswith("slack"):  # slack<below>_<above>: the band around the target that costs nothing
            values = [float(x) for x in word[5:].split("_")]  # or per layer: slack<b1>_<a1>_<b2>_<a2>..
            if len(values) % 2:
                raise ValueError(f"{word!r} in {name!r}: slack takes pairs <below>_<above>, got {len(values)} numbers")
            below, above = values[0::2], values[1::2]
            opts["rate_slack_below"] = below[0] if len(below) == 1 else below
            opts["rate_slack_above"] = above[0] if len(above) == 1 else above
            continue
        if word.startswith("warm"):  # warm<n>: the detectors held off for n updates; warm<n1>_<n2>: per layer
            counts = [int(x) for x in word[4:].split("_")]
            opts["warmup"] = counts[0] if len(counts) == 1 else counts
            continue
        if word[:1] == "t" and word[2:6] == "ramp" and word[1] in "12":
            # t<k>ramp<a>_<b>_<n>: layer k's target from a (at its warm-up's end) to b over n updates
            k = int(word[1]) - 1
            a, b, n = (float(x) for x in word[6:].split("_"))
            w0 = opts.get("warmup", 500)
            w0 = w0[min(k, len(w0) - 1)] if isinstance(w0, list) else w0  # layer k's
            sched[f"rate_target_l{k}"] = lambda epoch, step, a=a, b=b, n=n, w0=w0: (
                a + (b - a) * min(1.0, max(0.0, step - w0) / n)
            )
            continue
        if word == "slope1":
            sched.pop("slope", None)
            continue
        if word.startswith("halve"):  # halve<n>: the learning rate halved after every epoch from epoch n on
            train["halve"] = int(word[5:])
            continue
        if word.startswith("cand"):  # cand<i>: candidate i of the restarts alone (model and trainer seed i)
            train["restarts"], train["candidate"] = 1, int(word[4:])
            continue
        if word.startswith("best"):  # best<k>[@<e>]: k restarts, the lowest validation BPC (after e epochs) kept
            k, _, e = word[4:].partition("@")
            train["restarts"] = int(k)
            if e:
                train["select_after"] = int(e)
            continue
        if not _paper_word(word, opts, train, sched):
            raise ValueError(f"unknown configuration word {word!r} in {name!r}")
    return opts, train, sched


def _paper_word(word, opts, train, sched) -> bool:
    """The words of the earlier study; False for a word it does not know."""
    if word in ("paper", "switch"):
        opts["gradient"] = "switch"
    elif word == "blend":
        opts["gradient"] = "blend"
    elif word == "cut":
        opts["flush_cut"] = True
    elif word == "nocut":
        opts["flush_cut"] = False
    elif word == "ln":
        opts["layer_norm"] = True
    elif word == "step":
        opts["boundary"] = "step"
    elif word == "sample":
        opts["boundary"] = "sample"
    elif word == "soft":
        opts["boundary"] = "soft"
        opts["gradient"] = "blend"
    elif word == "oracle":
        train["oracle"] = True
    elif word in ("oracle2phrase", "oracle2word", "oracle2never"):  # layer 2's boundaries fixed too
        train["oracle"] = True
        train["oracle2"] = word[len("oracle2") :]
    elif word == "notd":
        opts["top_down"] = False
    elif word == "notd2":  # no top-down term into layers 2 and above (weights held at 0); layer 1 keeps it
        train["notd2"] = True
    elif word.startswith("freeze1@"):  # layer 1's boundary row held as it is after n updates
        train["freeze1"] = int(word[len("freeze1@") :])
    elif word == "below":  # every boundary row reads only the layer below (z^1: the symbol's embedding)
        opts["detector_input"] = "below"
    elif word == "below2":  # layer 2's boundary row reads only the layer below
        opts["detector_input"] = ["all", "below"]
    elif word == "switch2":  # z^1 read as a blend, z^2 as a switch
        opts["gradient"] = ["blend", "switch"]
    elif word.startswith("ramp"):  # the rate term rising linearly: ramp<start>_<end>_<per epoch>
        a0, a1, per = (float(x) for x in word[4:].split("_"))
        sched["rate_penalty"] = msr.schedules.linear(a0, a1, per_epoch=per)
        opts["rate_penalty"] = a0
    elif word.startswith("rate"):
        value, _, start = word[4:].partition("@")
        if start:  # the term switched on at an epoch
            sched["rate_penalty"] = msr.schedules.step(0.0, float(value), at_epoch=float(start))
            opts["rate_penalty"] = 0.0
        else:
            opts["rate_penalty"] = float(value)
    elif word.startswith("bias"):
        opts["boundary_bias"] = float(word[4:])
    elif word.startswith("h") and word[1:2].isdigit():
        train["hidden"] = [int(x) for x in word[1:].split("_")]
    elif word.startswith("lr"):
        train["lr"] = float(word[2:])
    elif word.startswith("ep"):
        train["epochs"] = int(word[2:])
    elif word.startswith("slope"):
        a = word[5:].split("_")
        sched["slope"] = float(a[0]) if len(a) == 1 else msr.schedules.linear(float(a[0]), float(a[1]), per_epoch=1.0)
    elif word.startswith("b2s"):
        sched["blend"] = msr.schedules.step(1.0, 0.0, at_epoch=float(word[3:]))
        opts["gradient"] = "blend"
    else:
        return False
    return True


def oracle_boundaries(model, vocab, layer2=None):
    """A constraint that fixes layer 1's boundary row to fire exactly on the spaces (the reference),
    whatever the rest of the network learns: embedding dimension 0 is 1 for those
    symbols and 0 for others, the boundary row reads only it (s = 20 x_0 - 10). For comparison only.

    ``layer2`` also fixes layer 2's boundary row (3 layers or more), so that the likelihood of models
    that differ only in where z^2 fires can be compared: ``"phrase"`` fires at the space after each
    punctuation mark (the phrase ends as first seen), ``"word"`` at every update of layer 2 (every
    space), ``"never"`` nowhere. Two units of layer 1 are given over to it: unit 0 holds "the
    symbol before this space was a mark" (embedding dimension 1 marks the punctuation; the input gate
    closes and the forget gate opens on a space, g = +1 on a mark and -1 elsewhere), unit 1 is constant
    (h = tanh(1)); z^2's row reads unit 0 (phrase) or unit 1 (word) through the bottom-up term, which
    is zero except where layer 1 has a boundary."""
    marks = [vocab.stoi[" "]]
    H = model.config["hidden_sizes"][0]
    H2 = model.config["hidden_sizes"][1] if layer2 else 0
    punct = [i for i, ch in enumerate(vocab.itos) if ch in ".!?;"]
    big = 20.0

    def fix(m):
        P = m.parameters()
        P["embedding.weight"][:, 0] = 0.0
        P["embedding.weight"][marks, 0] = 1.0
        for k in ("weight_ih_l0", "weight_hh_l0", "weight_td_l0"):
            if k in P:
                P[k][4 * H, :] = 0.0
        P["weight_ih_l0"][4 * H, 0] = 20.0
        P["bias_l0"][4 * H] = -10.0
        if not layer2:
            return
        P["embedding.weight"][:, 1] = 0.0
        P["embedding.weight"][punct, 1] = 1.0
        W, b = P["weight_ih_l0"], P["bias_l0"]
        for unit in (0, 1):  # rows i, f, g, o of units 0 and 1 read only what is set below
            for gate in range(4):
                for k in ("weight_ih_l0", "weight_hh_l0", "weight_td_l0"):
                    if k in P:  # no weight_td with top_down=False
                        P[k][gate * H + unit, :] = 0.0
                b[gate * H + unit] = 0.0
        W[0 * H, 0], b[0 * H] = -big, big / 2  # unit 0, i: closed on a space
        W[1 * H, 0], b[1 * H] = big, -big / 2  # unit 0, f: open on a space (keeps the symbol before it)
        W[2 * H, 1], b[2 * H] = big, -big / 2  # unit 0, g: +1 on a mark, -1 elsewhere
        b[3 * H] = big  # unit 0, o: open
        b[0 * H + 1], b[1 * H + 1], b[2 * H + 1], b[3 * H + 1] = big, -big, big, big  # unit 1: c = 1
        for k in ("weight_ih_l1", "weight_hh_l1", "weight_td_l1"):
            if k in P:
                P[k][4 * H2, :] = 0.0
        P["bias_l1"][4 * H2] = -10.0
        if layer2 in ("phrase", "word"):
            P["weight_ih_l1"][4 * H2, 0 if layer2 == "phrase" else 1] = 20.0

    fix(model)
    return fix


def no_top_down_above(model):
    """A constraint holding the top-down weights of layers 2 and above at zero (layer 1 keeps its
    top-down term from layer 2)."""

    def fix(m):
        P = m.parameters()
        for l in range(1, len(m.config["hidden_sizes"])):
            if f"weight_td_l{l}" in P:
                P[f"weight_td_l{l}"][...] = 0.0

    fix(model)
    return fix


def frozen_row(model, layer, after):
    """A constraint holding ``layer``'s boundary row (weights and bias) as it is after ``after`` updates."""
    h = model.config["hidden_sizes"][layer]
    keys = [f"{k}_l{layer}" for k in ("weight_ih", "weight_hh", "weight_td", "bias")]
    state = {"updates": 0, "rows": None}

    def fix(m):
        state["updates"] += 1
        P = m.parameters()
        if state["updates"] == after:
            state["rows"] = {k: P[k][4 * h].copy() for k in keys if k in P}
        elif state["rows"] is not None:
            for k, row in state["rows"].items():
                P[k][4 * h] = row

    return fix


def make_text(kind: str):
    """``sep`` / ``nosep``: the default (trie) lexicon with / without spaces; ``old-sep`` / ``old-nosep``:
    the random lexicon of the earlier study (``lexicon="random"``); ``chain``: with spaces, each
    phrase's template drawn among 2 successors of the previous one (``phrase_successors=2``)."""
    if kind == "chain":
        return msr.data.synthetic_hierarchy(n_chars=40_000, seed=0, phrase_successors=2)
    lexicon = "random" if kind.startswith("old-") else "trie"
    sep = {"sep": " ", "nosep": ""}[kind.removeprefix("old-")]
    return msr.data.synthetic_hierarchy(n_chars=40_000, seed=0, separator=sep, lexicon=lexicon)


def likelihood_probes(model, ids, ref):
    """F1 (tolerance 1) against ``ref`` of boundaries read off the trained model's predictions instead of
    its detectors: the steps with the highest next-character entropy H(p(. | x_<=t)), and those with the
    highest surprisal -log p(x_t | x_<t), as many of each as ``ref`` has boundaries (a count the
    detectors are not given). What likelihood alone says about where the segments end."""
    logits = model.forward(np.asarray(ids)[None])[0][0].astype(np.float64)  # (T, V)
    logp = logits - logits.max(axis=1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(axis=1, keepdims=True))
    entropy = -(np.exp(logp) * logp).sum(axis=1)  # (T,): at t, of x_{t+1}
    surprisal = np.zeros(len(ids))  # (T,): of x_t
    surprisal[1:] = -logp[np.arange(len(ids) - 1), np.asarray(ids)[1:]]
    k = int(ref.sum())
    out = {}
    for name, signal in (("entropy", entropy), ("surprisal", surprisal)):
        top = np.zeros(len(ids), dtype=bool)
        top[np.argsort(-signal, kind="stable")[:k]] = True
        out[f"f1_{name}"] = boundary_scores(top, ref, 1)["f1"]
    return out


def segment_description_length(ids, ends, vocab_size: int) -> float:
    """Bits per symbol to transmit ``ids`` (1-D) cut into segments after every step where ``ends`` is true:
    the lexicon (each distinct segment spelled out, with an end mark: log2(vocab_size + 1) bits a symbol) plus
    the segments as a sequence, each coded by its frequency (-sum of n log2(n / N) over the distinct segments).
    Uses no labels: of two segmentations at about the same rate, the one whose segments repeat costs less."""
    cuts = np.flatnonzero(np.asarray(ends, dtype=bool)) + 1
    segments = [tuple(s) for s in np.split(np.asarray(ids), cuts) if len(s)]
    counts = np.array(list(Counter(segments).values()), dtype=float)
    n = counts.sum()
    sequence = -float(np.sum(counts * np.log2(counts / n)))
    lexicon = sum(len(s) + 1 for s in set(segments)) * float(np.log2(vocab_size + 1))
    return (sequence + lexicon) / len(ids)


def run(name, layers, kind, seed, hidden=32, read=2000, figure=None, text=None):
    """One configuration's run on the text ``kind`` (``make_text``), or on ``text`` (a
    ``HierarchicalText``, e.g. a language of ``multiscale_rnn.data.languages``; ``kind`` then only
    labels the result)."""
    opts, train, sched = configuration(name)
    h = make_text(kind) if text is None else text
    corpus = h.corpus(valid_fraction=0.1, test_fraction=0.0)
    sizes = [hidden] * layers
    if train is not None and "hidden" in train:
        given = train["hidden"]
        sizes = [given[min(l, len(given) - 1)] for l in range(layers)]
    ids = corpus.valid[:read]
    kw = dict(clip_norm=1.0, batch_size=32, bptt=50, model_options=sched, progress=False)
    if train.get("halve") is not None:
        kw["lr_schedule"] = msr.schedules.HalveAfter(train["halve"])
    t0 = time.perf_counter()
    if train.get("restarts") and train.get("oracle"):
        raise ValueError(f"{name!r}: the oracles fix one model's rows; they do not combine with best<k>")
    if train.get("restarts"):
        # k candidates (model and trainer seeds seed*k .. seed*k + k-1), the one with the lowest BPC on the
        # validation text after the first `read` characters kept: the scored text plays no part in the choice
        k = train["restarts"]
        model, _ = msr.best_of(
            lambda s: msr.HMLSTM(corpus.vocab_size, 16, sizes, seed=s, **opts),
            corpus.train,
            corpus.valid[read:],
            restarts=k,
            epochs=train["epochs"],
            seed=train.get("candidate", seed * k),
            select_after=train.get("select_after"),
            make_optimizer=lambda: msr.optim.Adam(train["lr"]),
            **kw,
        )
    else:
        model = msr.HMLSTM(corpus.vocab_size, 16, sizes, seed=seed, **opts)
        fixes = []
        if train.get("oracle"):  # z^1 held at 1 on the separators and 0 elsewhere (the boundaries given)
            fixes.append(oracle_boundaries(model, corpus.vocab, train.get("oracle2")))
        if train.get("notd2"):
            fixes.append(no_top_down_above(model))
        if train.get("freeze1"):
            fixes.append(frozen_row(model, 0, train["freeze1"]))
        if fixes:
            kw["constraint"] = lambda m: [fix(m) for fix in fixes]
        msr.Trainer(model, optimizer=msr.optim.Adam(train["lr"]), seed=seed, **kw).fit(
            corpus.train, epochs=train["epochs"]
        )
    seconds = time.perf_counter() - t0
    word = first_seen(corpus.boundaries["valid"]["word"][:read])
    phrase = first_seen(corpus.boundaries["valid"]["phrase"][:read])
    tr = model.trace(ids)
    out = {
        "config": name,
        "layers": layers,
        "text": kind,
        "seed": seed,
        "seconds": seconds,
        "bpc": msr.evaluate(model, corpus.valid, batch_size=16)["bpc"],
        "updates": tr.updates.tolist(),
        "reduction": tr.reduction,
    }  # layer updates on the scored text
    ends = {0: corpus.boundaries["valid"]["word"][:read], 1: corpus.boundaries["valid"]["phrase"][:read]}
    for l, ref in ((0, word), (1, phrase)):
        if l < layers - 1:
            z = tr.z[l] > 0.5
            out[f"f1_l{l}"] = boundary_scores(z, ref, 1)["f1"]
            out[f"f1end_l{l}"] = boundary_scores(z, ends[l], 1)["f1"]  # against the last character
            out[f"rate_l{l}"] = float(z.mean())
    if layers >= 2:
        out.update(word_level_scores(tr.z[0] > 0.5, corpus.boundaries["valid"], read))
        # no labels: z^1's segments of the training text, their description length (bits per character), and
        # the BPC on the validation text restarts are chosen on
        out["dl_l0"] = segment_description_length(corpus.train, model.trace(corpus.train).z[0] > 0.5, corpus.vocab_size)
        out["bpc_select"] = msr.evaluate(model, corpus.valid[read:], batch_size=16)["bpc"]
        z1 = model.trace(corpus.valid[read:]).z[0] > 0.5  # z^1 on the selection text, bit-packed (hex)
        out["z1_select"], out["n_select"] = np.packbits(z1).tobytes().hex(), int(len(z1))
    out.update(likelihood_probes(model, ids, word))
    if figure is not None:  # Figure 3 on the first 270 scored characters, the reference row z^2's (else z^1's)
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        ref = phrase if layers >= 3 else word
        ax = msr.plot.boundaries(model.trace(ids[:270], corpus.vocab, reference_boundaries=ref[:270]), width=90)
        path = f"{figure}/{name}-{layers}-{kind}-seed{seed}.png"
        ax.figure.savefig(path, dpi=110, bbox_inches="tight")
        plt.close("all")
    return out


HEADER = (
    "| configuration | layers | text | seed 0 | seed 1 | seed 2 | seed 3 | seed 4 | F1 >= 0.9 (z^1)"
    "[, >= 0.7 (z^2)] | mean valid BPC | slowest run (s) |\n|---|---|---|---|---|---|---|---|---|---|---|"
)


def row(results, config, layers, kind):
    rs = sorted(
        (r for r in results if (r["config"], r["layers"], r["text"]) == (config, layers, kind)), key=lambda r: r["seed"]
    )
    rs = list({r["seed"]: r for r in rs}.values())
    cells = []
    for r in rs:
        c = f"{r['f1_l0']:.2f} ({r['rate_l0']:.2f})"
        if layers >= 3:
            c += f" / {r['f1_l1']:.2f} ({r['rate_l1']:.2f})"
        cells.append(c)
    ok1 = sum(r["f1_l0"] >= 0.9 for r in rs)
    ok = f"{ok1}/{len(rs)}"
    if layers >= 3:
        ok += f", {sum(r['f1_l1'] >= 0.7 for r in rs)}/{len(rs)}"
    bpc = np.mean([r["bpc"] for r in rs])
    sec = max(r["seconds"] for r in rs)
    cells += ["-"] * (5 - len(cells))
    return f"| `{config}` | {layers} | {kind} | " + " | ".join(cells[:5]) + f" | {ok} | {bpc:.3f} | {sec:.0f} |"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", default="package")
    p.add_argument("--layers", default="2,3")
    p.add_argument("--text", default="sep")
    p.add_argument("--seeds", default="0,1,2,3,4")
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--threads", type=int, default=1, help="threads per run (msr.set_num_threads)")
    p.add_argument(
        "--json",
        default=None,
        help="append every run's figures to this file (JSON lines, with the module and threads); runs already "
        "in it (same configuration, depth, text, seed, module and threads) are read back, not trained again",
    )
    p.add_argument(
        "--figure",
        default=None,
        metavar="DIR",
        help="draw each run's boundary map (Figure 3, 270 characters) into DIR/<config>-<layers>-<text>-seed<s>.png",
    )
    p.add_argument(
        "--table", nargs="+", default=None, metavar="FILE", help="print the table of runs saved by --json (no training)"
    )
    a = p.parse_args(argv)
    if a.table:
        results = [r for f in a.table for r in read_json_lines(f)]
        keys = list(dict.fromkeys((r["config"], r["layers"], r["text"]) for r in results))
        print(HEADER)
        for config, layers, kind in keys:
            print(row(results, config, layers, kind))
        return
    msr.set_num_threads(a.threads)
    setup = dict(isa=msr._native.ISA, threads=a.threads)

    def key(r):
        return (r["config"], r["layers"], r["text"], r["seed"], r.get("isa"), r.get("threads"))

    done = {}
    if a.json and Path(a.json).exists():
        done = {key(r): r for r in read_json_lines(a.json)}
    print(HEADER)
    results = []
    for kind in a.text.split(","):
        for layers in (int(x) for x in a.layers.split(",")):
            for config in a.configs.split(","):
                for seed in (int(x) for x in a.seeds.split(",")):
                    kept = done.get(key(dict(config=config, layers=layers, text=kind, seed=seed, **setup)))
                    if kept is not None:
                        results.append(kept)
                        continue
                    r = dict(run(config, layers, kind, seed, a.hidden, figure=a.figure), **setup)
                    results.append(r)
                    print(json.dumps(r), file=sys.stderr, flush=True)
                    if a.json:
                        append_lines(a.json, json.dumps(r) + "\n")
                print(row(results, config, layers, kind), flush=True)


if __name__ == "__main__":
    main()
