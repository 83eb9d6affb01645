"""The commands that read a checkpoint, ``multiscale-rnn evaluate``, ``sample`` and ``plot`` (with finding the
corpus and vocabulary to read it with), ``presets`` and ``reproduce``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Tuple

import numpy as np

from .. import presets as _presets
from .._checks import non_negative_int, positive_int, positive_number
from ..checkpoint import load
from ..data.classes import class_sizes
from ..data.text import decode_utf8
from ..data.vocab import describe_symbol, tokenize_words
from ..storage import check_writable
from ..training import evaluate, sample
from . import strokes
from .build import corpus_bits_label, load_corpus, set_threads
from .settings import config_text, key_values, resolve_data

__all__ = ["cmd_evaluate", "cmd_sample", "cmd_plot", "cmd_presets", "cmd_reproduce"]


def _load_checkpoint(path, best: bool):
    """The checkpoint at ``path``, its model holding the best parameters with ``--best``."""
    ck = load(path)
    if best:
        state = ck.trainer_state or {}
        if state.get("best_params") is None:
            raise ValueError(
                f"{path} holds no best parameters (no epoch was completed): leave --best out to use the last parameters"
            )
        ck.model.flat_parameters()[...] = state["best_params"]
        for name, value in (state.get("best_options") or {}).items():  # the options' values at that epoch
            ck.model.set_option(name, float(value))
    return ck


def _set_precision(model, precision: str) -> None:
    """``--precision``: the model's inference precision; a refusal becomes a clear error."""
    try:
        model.inference_precision = precision
    except (ValueError, RuntimeError) as e:
        raise ValueError(f"--precision {precision}: {e}") from e


def _checkpoint_data(args, ck, need_corpus: bool):
    """The corpus (None when not needed and not given) and the vocabulary to read ``ck``'s model with.

    The corpus is ``--data`` / ``--data-path`` / ``--data-option`` when given, else the one the checkpoint's
    settings name (written by ``train``). The vocabulary is the checkpoint's, else the corpus's. Refused
    (``ValueError`` naming the fix): a checkpoint with no vocabulary and no data given; a checkpoint that
    does not record its corpus when one is needed; with no stored vocabulary, a corpus whose vocabulary size is
    not the model's vocab_size; a corpus with symbols the stored vocabulary lacks and has no unknown symbol
    for. A corpus whose vocabulary differs from the stored one (another text than the training corpus) is read
    with the stored one (``Corpus.with_vocab``), and a note says so."""
    path, model_v = args.checkpoint, int(ck.model.vocab_size)
    given = args.data is not None or args.data_path is not None or bool(args.data_option)
    stored = ck.extra.get("settings") if isinstance(ck.extra.get("settings"), dict) else None
    vocab = ck.vocab if ck.vocab is not None and hasattr(ck.vocab, "itos") else None
    if vocab is None and not given:
        raise ValueError(
            f"{path} holds no vocabulary (it was saved from Python without one), so its model's "
            f"{model_v} token ids cannot be matched to symbols: give the corpus it was trained on (--data "
            f"NAME, with --data-path for a corpus read from files, or --data FILE for your own text), or "
            f"store the vocabulary when training: Trainer.fit(corpus, ...) or fit(..., "
            f"vocab=corpus.vocab)"
        )
    corpus = None
    if given or need_corpus:
        if not given and stored is None:
            raise ValueError(
                f"{path} does not record the corpus it was trained on (it was saved from Python): give "
                f"--data NAME (with --data-path for a corpus read from files, or --data FILE for your "
                f"own text)"
            )
        s = dict(_presets.DEFAULTS)
        s.update(stored or {})
        if given:
            options = key_values(args.data_option or [], "--data-option")
            if args.data is not None:  # another corpus: none of the stored one's path and options
                s["data"], s["data_path"], s["data_options"] = args.data, args.data_path, options
            else:
                if args.data_path is not None:
                    s["data_path"] = args.data_path
                s["data_options"] = {**s.get("data_options", {}), **options}
            resolve_data(s, args.data is not None, options, args.data_path is not None)
        try:
            corpus = load_corpus(s)
        except FileNotFoundError as e:
            if given:
                raise
            raise FileNotFoundError(
                f"{e} (the corpus {path} was trained on, where it was then: give --data-path where it is now)"
            ) from None
        if vocab is None:
            if corpus.vocab_size != model_v:
                raise ValueError(
                    f"the vocabulary of {corpus.name} has {corpus.vocab_size} symbols and the model in {path} "
                    f"has {model_v}: give --data (and --data-path) of the corpus the model was trained on"
                )
            corpus, order = _in_training_order(ck.model, corpus, path)
            print(
                f"note: {path} holds no vocabulary; reading it with the vocabulary of {corpus.name} ({model_v} "
                f"symbols, as many as the model has{order})",
                file=sys.stderr,
                flush=True,
            )
            vocab = corpus.vocab
        elif list(vocab.itos) != list(corpus.vocab.itos) or vocab.unit != corpus.vocab.unit:
            # another text than the training corpus (or its symbols in another order): read with the model's ids
            try:
                corpus = corpus.with_vocab(vocab)
            except ValueError as e:
                raise ValueError(f"{e}: the model of {path} cannot read this text") from None
            unknown = sum(sum(c.values()) for c in corpus.unknown.values())
            print(
                f"note: reading {corpus.name} with the vocabulary of {path} ({vocab.size} symbols)"
                + (f"; {unknown:,} symbol(s) it lacks read as {vocab.unk!r}" if unknown else ""),
                file=sys.stderr,
                flush=True,
            )
    assert vocab is not None  # the corpus's when none was stored
    if vocab.size != model_v:  # a stored vocabulary (the checkpoint's own check covers this too)
        raise ValueError(f"the vocabulary stored in {path} has {vocab.size} symbols and its model {model_v}")
    return corpus, vocab


def _in_training_order(model, corpus, path):
    """``(corpus, words)`` for a checkpoint without vocabulary: a class-softmax model was trained on ids in
    descending training frequency (``Corpus.by_frequency()``, whose counts give its class sizes), so the
    corpus is renumbered so when the model's class sizes are that order's, and refused (``ValueError``) when
    they are not; ``words`` says so for the note. Other models read the corpus's own ids."""
    classes = model.config.get("head_classes") if model.config.get("head") == "class" else None
    if not classes:
        return corpus, ""
    ranked = corpus.by_frequency()
    counts = ranked.counts()
    if list(classes) not in (class_sizes(counts), class_sizes(counts, len(classes))):
        raise ValueError(
            f"{path} holds no vocabulary, and its class softmax's {len(classes)} class sizes are not those of "
            f"{corpus.name} in descending training frequency: the ids it was trained on cannot be recovered (give "
            f"--data of the corpus it was trained on, or store the vocabulary when training: fit(..., vocab=...))"
        )
    return ranked, ", in descending training frequency: the order its class sizes come from"


def cmd_evaluate(args) -> int:
    """``multiscale-rnn evaluate``: loss, bits per token and perplexity of a checkpoint on a split."""
    positive_int(args.batch_size, "--batch-size", allow_none=True)
    positive_int(args.bptt, "--bptt", allow_none=True)
    set_threads(args.threads)
    ck = _load_checkpoint(args.checkpoint, args.best)
    _set_precision(ck.model, args.precision)
    if ck.model.vocab_size is None:  # a pen-stroke model (head="mdn"): nats per sequence
        r = strokes.evaluate_checkpoint(args, ck)
        print(json.dumps(r) if args.json else f"{r['data']} {strokes.report_line(args.split, r)}")
        return 0
    corpus, _ = _checkpoint_data(args, ck, need_corpus=True)
    s = dict(_presets.DEFAULTS)
    s.update(ck.extra.get("settings") or {})
    if args.split == "all":  # one file of the user's: the whole of it, its cut undone
        ids = np.concatenate(list(corpus.splits.values()))
    else:
        ids = getattr(corpus, args.split)
    if ids is None or len(ids) < 2:
        what = "no" if ids is None else f"only {len(ids)} token in its"
        share = (
            f" (--data-option {args.split}_fraction=0.5 gives {args.split} half of it; --split all scores all of it)"
            if args.split in ("valid", "test")
            else ""
        )
        cut = (
            f"; {args.data} is one file, cut 90 % / 5 % / 5 % into train, valid and test{share}"
            if args.data and Path(args.data).expanduser().is_file()
            else ""
        )
        raise ValueError(
            f"{corpus.name} has {what} {args.split} split, and scoring needs 2 tokens or more "
            f"(--split chooses train, valid, test or all){cut}"
        )
    bptt = args.bptt if args.bptt is not None else s["bptt"]
    batch = args.batch_size if args.batch_size is not None else s["eval_batch_size"]
    r = evaluate(ck.model, ids, batch_size=batch, bptt=bptt)
    if args.json:
        print(json.dumps({"split": args.split, "data": corpus.name, **r}))
    else:
        label = corpus_bits_label(corpus)
        print(
            f"{corpus.name} {args.split}: loss {r['loss']:.4f} nats, {label} {r['bpc']:.4f}, "
            f"perplexity {r['perplexity']:.2f} ({r['tokens']:,} tokens)"
        )
    return 0


def _unknown_symbols(vocab, prompt: str):
    """The symbols of ``prompt`` that ``vocab`` lacks, as (position, description) in prompt order: a
    character's position for character vocabularies, a byte's for byte ones, a word's for word ones."""
    if vocab.unit == "word":
        return [(i, repr(w)) for i, w in enumerate(tokenize_words(prompt)) if w not in vocab.stoi]
    if vocab.level == "byte":
        return [
            (i, describe_symbol(b, "byte"))
            for i, b in enumerate(prompt.encode("utf-8", "surrogatepass"))
            if b not in vocab.stoi
        ]
    return [(i, describe_symbol(c, "codepoint")) for i, c in enumerate(prompt) if c not in vocab.stoi]


def _check_symbols(args, vocab, text: str, flag: str) -> None:
    """Refuse a text (``--prompt``, ``--text``) with symbols the vocabulary lacks (naming them and where they
    are), unless ``--allow-unknown`` and the vocabulary has an unknown symbol to read them as (then a note says
    so)."""
    unknown = _unknown_symbols(vocab, text)
    if not unknown:
        return
    unit = "word" if vocab.unit == "word" else "byte" if vocab.level == "byte" else "character"
    listed = ", ".join(f"{d} at {unit} {i}" for i, d in unknown[:10]) + (
        f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
    )
    what = f"{len(unknown)} {unit}(s) the vocabulary of {args.checkpoint} lacks ({vocab.size} symbols): {listed}"
    where = "the prompt" if flag == "--prompt" else "the text"
    if vocab.unk is None:
        raise ValueError(
            f"{flag} has {what}; the vocabulary has no unknown symbol to read them as: leave them out of {where}"
        )
    if not args.allow_unknown:
        raise ValueError(
            f"{flag} has {what}: leave them out of {where}, or pass --allow-unknown to read them "
            f"as the unknown symbol {vocab.unk!r}"
        )
    print(f"note: {flag}: read as the unknown symbol {vocab.unk!r}: {listed}", file=sys.stderr, flush=True)


def cmd_sample(args) -> int:
    """``multiscale-rnn sample``: text generated by a checkpoint's model after ``--prompt``."""
    if args.length < 0:
        raise ValueError(f"--length must be an integer >= 0, got {args.length}")
    if args.temperature == 0:
        raise ValueError("--temperature must be > 0; for the most likely symbol at each step (greedy), give --top-k 1")
    positive_number(args.temperature, "--temperature")
    non_negative_int(args.seed, "--seed")
    if args.top_k is not None and args.top_k < 1:
        raise ValueError(f"--top-k must be an integer >= 1 (the most likely symbols drawn from), got {args.top_k}")
    if args.top_p is not None and not 0 < args.top_p <= 1:
        raise ValueError(f"--top-p must be a number in (0, 1] (a probability mass), got {args.top_p}")
    positive_int(args.num_samples, "--num-samples")
    set_threads(args.threads)
    ck = _load_checkpoint(args.checkpoint, args.best)
    _set_precision(ck.model, args.precision)
    if ck.model.vocab_size is None:  # a pen-stroke model (head="mdn"): drawings
        strokes.sample_checkpoint(args, ck)
        return 0
    if args.out is not None or args.bias:
        raise ValueError("--out and --bias are for pen-stroke models (head='mdn'); a text model prints its samples")
    _, vocab = _checkpoint_data(args, ck, need_corpus=False)
    _check_symbols(args, vocab, args.prompt, "--prompt")
    n = args.num_samples
    texts = sample(
        ck.model,
        vocab,
        prompt=args.prompt,
        length=args.length,
        temperature=args.temperature,
        seed=args.seed,
        top_k=args.top_k,
        top_p=args.top_p,
        num_samples=n,
    )
    for i, text in enumerate(texts):
        if n > 1:
            print(f"--- sample {i + 1}/{n} (seed {args.seed + i}) ---")
        print(text)
    return 0


def cmd_plot(args) -> int:
    """``multiscale-rnn plot``: the figure ``--kind`` of a checkpoint's model reading ``--text``, written as PNG
    or SVG (``multiscale_rnn.plot.figure``, drawn by the family's own plot function)."""
    from ..plot import figures

    out = (
        Path(args.out) if args.out else Path(args.checkpoint).with_name(f"{Path(args.checkpoint).stem}-{args.kind}.png")
    )
    figures.output_format(out)  # before any work: an extension the command does not write, a path it cannot
    check_writable(out, "--out figure")
    if args.kind in strokes.PLOT_KINDS:  # a drawing of a pen-stroke HM-LSTM's corpus
        strokes.plot_checkpoint(args, _load_checkpoint(args.checkpoint, args.best), out)
        return 0
    if args.kind == "training":  # any run's curves, from the CSV of steps and the history beside the checkpoint
        _plot_training(args.checkpoint, out)
        return 0
    try:
        figures.check_kind(args.kind)
    except ValueError as e:
        raise ValueError(f"--kind {args.kind}: {e}") from None
    set_threads(args.threads)
    ck = _load_checkpoint(args.checkpoint, args.best)
    try:  # a kind the model does not draw is named before a missing text: no text would make it draw
        figures.check_kind(args.kind, ck.model)
    except ValueError as e:
        raise ValueError(f"--kind {args.kind} for {args.checkpoint}: {e}") from None
    text, flag = _plot_text(args)
    _, vocab = _checkpoint_data(args, ck, need_corpus=False)
    _check_symbols(args, vocab, text, flag)
    import matplotlib

    matplotlib.use("Agg")  # a file, no window
    import matplotlib.pyplot as plt

    fig = figures.figure(ck.model, args.kind, text, vocab, strict=False)
    figures.save(fig, out)
    plt.close(fig)
    name = type(ck.model).__name__
    print(f"{out}: {args.kind} of the {name} in {args.checkpoint} reading {len(text):,} characters")
    return 0


def _plot_text(args) -> Tuple[str, str]:
    """``(text, flag)``: the text ``plot`` draws and the flag that gave it, ``--text`` or the UTF-8 file
    ``--text-file``; a ``--text`` that is the name of a file is drawn as given, with a note naming ``--text-file``."""
    if args.text_file is not None:
        if args.text is not None:
            raise ValueError("give --text or --text-file, not both")
        path = Path(args.text_file).expanduser()
        if not path.is_file():
            raise ValueError(f"--text-file {args.text_file}: " + ("a folder" if path.is_dir() else "no such file"))
        text = decode_utf8(path.read_bytes(), f"--text-file {args.text_file}", advice=None)
        if not text:
            raise ValueError(f"--text-file {args.text_file} is empty: give a file of the text the model reads")
        return text, "--text-file"
    if not args.text:
        given = "is empty" if args.text is not None else "is missing"
        raise ValueError(
            f'--text {given}: give the text the model reads, e.g. --text "the cat sat on the mat", or a file of it '
            "with --text-file PATH"
        )
    try:
        names_a_file = Path(args.text).expanduser().is_file()
    except (OSError, ValueError):  # too long a name, a NUL: not a file
        names_a_file = False
    if names_a_file:
        print(
            f"note: --text {args.text} is drawn as the {len(args.text)} characters it holds; to draw the file's text, "
            f"give --text-file {args.text}",
            file=sys.stderr,
            flush=True,
        )
    return args.text, "--text"


def _plot_training(checkpoint: str, out: Path) -> None:
    """``plot CKPT --kind training``: ``multiscale_rnn.plot.training_curves`` of the run, written to ``out``."""
    import matplotlib

    matplotlib.use("Agg")  # a file, no window
    import matplotlib.pyplot as plt

    from ..plot import figures, training_curves

    fig = training_curves(checkpoint).figure
    figures.save(fig, out)
    plt.close(fig)
    print(f"{out}: training curves of {checkpoint}")


def cmd_presets(args) -> int:
    """``multiscale-rnn presets``: the named presets, one line each; ``presets NAME``: that preset as a TOML
    config, to save, edit and pass to ``train --config``."""
    if args.name is not None:
        print(config_text(args.name), end="")
        return 0
    for name, p in sorted(_presets.PRESETS.items()):
        default = " (default)" if name == _presets.DEFAULT_PRESET else ""
        print(f"{name}{default}: {p.get('about', '')}")
    return 0


def cmd_reproduce(args) -> int:
    """``multiscale-rnn reproduce``: ``--list``, a run (resumed where it stopped) and its report, or
    ``--report`` of a results folder."""
    from .. import reproduce

    if args.list:
        print(reproduce.listing())
        return 0
    if args.name is None:
        raise ValueError("reproduce needs a NAME (or --list): one of " + ", ".join(reproduce.REPRODUCTIONS))
    if args.report:
        out = args.out or f"runs/reproduce/{reproduce.get(args.name).name}"
        print(reproduce.report(args.name, out))
        return 0
    if args.max_units is not None:
        positive_int(args.max_units, "max_units")
    set_threads(args.threads)
    path = reproduce.run(args.name, args.budget, args.out, args.data_path, not args.quiet, args.max_units)
    print(path.read_text())
    return 0
