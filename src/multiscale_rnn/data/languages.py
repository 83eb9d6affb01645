"""Random hierarchical languages, for judging boundary discovery on data no recipe was tuned on.

:func:`synthetic_hierarchy` writes one kind of language with a few knobs; a recipe tuned on it can
learn that kind rather than the task. This module draws the *kind* itself at random: every property
a boundary detector could lean on varies from one language to the next, and a language is named by
one integer (its ``language`` id), so a protocol can fix which languages tune recipes and which are
held back before any run sees them (``bench/boundary_protocol.py``, docs/studies/).

A language (:func:`draw_language`, all from ``numpy.random.default_rng(language)``):

- **Alphabet**: 5 to 26 letters drawn from a-z.
- **Stems** (the lexicon): 30 to 3000 distinct stems (log-uniform), their lengths from one of three
  distributions (uniform, geometric, Poisson) with a mean of 2 to 6 letters, at least 1 letter.
- **Zipf's law**: within each word class the stems are drawn with probability proportional to
  1 / rank^s, s from 0 (uniform) to 1.4; the ranks are a random order of the class's stems.
- **Morphology**: ``none``, ``suffix``, ``prefix`` or ``both``: 2 to 6 affixes of 1 to 3 letters
  per side, each word carrying one with probability 0.3 to 0.8 per side. Affixes reuse the
  alphabet, so a word's end is not marked by a letter of its own.
- **Word classes and phrase templates**: 3 to 10 classes (the stems dealt at random), 4 to 30
  templates, each a sequence of 1 to 6 classes.
- **Sentences**: 1 to 4 phrases. ``marked`` phrases end with a mark (``,`` ``;`` ``:``) inside a
  sentence; ``unmarked`` ones end with nothing (the phrase end is then known only from the
  statistics); every sentence ends with ``.``, ``!`` or ``?``.
- **Separator**: a space between words in three languages of four, nothing in the others.

Text (:func:`generate`): ``generate(spec, n_chars, seed)`` writes ``n_chars`` characters of the
language from its own seed (``seed`` varies the text, not the language). Boundaries follow
:func:`synthetic_hierarchy`'s convention: ``word_boundaries[i]`` marks the last character of a word,
or the mark that follows it; ``phrase_boundaries[i]`` the last character of a phrase (its mark, when
it has one); ``sentence_boundaries[i]`` the sentence-ending mark; ``morpheme_boundaries[i]`` the last
character of every prefix, of every stem followed by a suffix, and every word end (a word without affixes is
one morpheme). Separators are never boundaries.
The result is a :class:`HierarchicalText`, so ``.corpus()`` gives a split corpus with boundaries.

>>> spec = draw_language(3)
>>> h = generate(spec, n_chars=200, seed=0)
>>> len(h.text), bool(h.word_boundaries.any())
(200, True)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Tuple

import numpy as np

from .._checks import is_int
from .synthetic import HierarchicalText

__all__ = ["LanguageSpec", "draw_language", "generate", "PHRASE_MARKS", "SENTENCE_MARKS"]

PHRASE_MARKS = ",;:"
SENTENCE_MARKS = ".!?"
LETTERS = "abcdefghijklmnopqrstuvwxyz"
_SENTENCES_PER_BATCH = 128


@dataclass(frozen=True)
class LanguageSpec:
    """One hierarchical language (see the module docstring); ``language`` is the id it was drawn from."""

    language: int
    alphabet: str
    stem_lengths: str  # "uniform" | "geometric" | "poisson"
    mean_stem_length: float  # mean letters per stem (before the minimum of 1)
    n_stems: int
    zipf: float  # s: p(rank k) ~ 1 / k^s within a class
    morphology: str  # "none" | "suffix" | "prefix" | "both"
    n_affixes: int  # per side
    affix_prob: float  # per side and word
    n_classes: int
    n_templates: int
    phrase_len: Tuple[int, int]  # classes per template, inclusive
    sentence_len: Tuple[int, int]  # phrases per sentence, inclusive
    phrases: str  # "marked" | "unmarked"
    separator: str  # " " or ""

    def describe(self) -> str:
        """One line: the properties a reader compares languages by."""
        sep = "spaced" if self.separator else "unspaced"
        return (
            f"language {self.language}: {len(self.alphabet)} letters, {self.n_stems} stems "
            f"({self.stem_lengths}, mean {self.mean_stem_length:.1f}), zipf {self.zipf:.2f}, "
            f"{self.morphology} morphology, {self.n_classes} classes, {self.n_templates} templates, "
            f"{self.phrases} phrases, {sep}"
        )

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["phrase_len"], d["sentence_len"] = list(self.phrase_len), list(self.sentence_len)
        return d


def draw_language(language: int) -> LanguageSpec:
    """The language with id ``language`` (an integer >= 0): every property drawn from its own
    generator, so the same id always names the same language."""
    if not is_int(language) or language < 0:
        raise ValueError(f"language must be an integer >= 0, got {language!r}")
    rng = np.random.default_rng([int(language), 0x1A46])
    k = int(rng.integers(5, 27))
    alphabet = "".join(sorted(rng.choice(list(LETTERS), size=k, replace=False).tolist()))
    morphology = str(rng.choice(["none", "suffix", "prefix", "both"]))
    lo = int(rng.integers(1, 4))
    return LanguageSpec(
        language=int(language),
        alphabet=alphabet,
        stem_lengths=str(rng.choice(["uniform", "geometric", "poisson"])),
        mean_stem_length=float(rng.uniform(2.0, 6.0)),
        n_stems=int(round(float(np.exp(rng.uniform(np.log(30), np.log(3000)))))),
        zipf=float(rng.uniform(0.0, 1.4)),
        morphology=morphology,
        n_affixes=int(rng.integers(2, 7)),
        affix_prob=float(rng.uniform(0.3, 0.8)),
        n_classes=int(rng.integers(3, 11)),
        n_templates=int(rng.integers(4, 31)),
        phrase_len=(lo, int(rng.integers(lo + 1, 7))),
        sentence_len=(1, int(rng.integers(1, 5))),
        phrases=str(rng.choice(["marked", "unmarked"])),
        separator=" " if rng.random() < 0.75 else "",
    )


def _lengths(rng, spec: LanguageSpec, n: int) -> np.ndarray:
    m = spec.mean_stem_length
    if spec.stem_lengths == "uniform":
        out = rng.integers(1, int(round(2 * m)), size=n, endpoint=True)
    elif spec.stem_lengths == "geometric":
        out = rng.geometric(1.0 / m, size=n)
    else:
        out = rng.poisson(m, size=n)
    return np.clip(out, 1, 14)


def _distinct_strings(rng, spec: LanguageSpec, n: int, lengths_from) -> List[str]:
    """``n`` distinct strings over the alphabet, lengths from ``lengths_from(count)``; fewer when the
    alphabet and lengths cannot give that many (after a bounded number of draws)."""
    letters = np.array(list(spec.alphabet))
    seen: Dict[str, None] = {}
    for _ in range(50):
        need = n - len(seen)
        if need <= 0:
            break
        for length in lengths_from(2 * need).tolist():
            s = "".join(rng.choice(letters, size=int(length)).tolist())
            seen.setdefault(s, None)
            if len(seen) == n:
                break
    return list(seen)


def generate(spec: LanguageSpec, n_chars: int = 20000, seed: int = 0) -> HierarchicalText:
    """``n_chars`` characters of the language ``spec`` (from :func:`draw_language`), text seed
    ``seed``; a shorter text is a prefix of a longer one with the same seed."""
    if not is_int(n_chars) or n_chars < 1:
        raise ValueError(f"n_chars must be an integer >= 1, got {n_chars!r}")
    if not is_int(seed) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    grammar = _grammar(spec)
    rng = np.random.default_rng([spec.language, int(seed), 0x7E47])
    text, word_ends, phrase_ends, sentence_ends, morpheme_ends = _sentences(spec, grammar, rng, n_chars)
    return HierarchicalText(
        text=text,
        word_boundaries=_mask(word_ends, n_chars),
        phrase_boundaries=_mask(phrase_ends, n_chars),
        lexicon=grammar["stems"],
        classes=grammar["classes"],
        templates=[(t, "") for t in grammar["templates"]],
        params=dict(spec.to_dict(), n_chars=int(n_chars), seed=int(seed)),
        sentence_boundaries=_mask(sentence_ends, n_chars),
        morpheme_boundaries=_mask(morpheme_ends, n_chars),
    )


def _grammar(spec: LanguageSpec) -> Dict[str, Any]:
    """The grammar of the language (it belongs to the language; the text to the seed): ``stems``, the affix
    ``sides`` and ``affixes`` per side, the word ``classes`` (stem indices), each class's cumulative Zipf
    ``weights``, and the phrase ``templates`` (a class per slot)."""
    g = np.random.default_rng([spec.language, 0x57E5])
    stems = _distinct_strings(g, spec, spec.n_stems, lambda c: _lengths(g, spec, c))
    sides = {"none": (), "suffix": ("suffix",), "prefix": ("prefix",), "both": ("prefix", "suffix")}[spec.morphology]
    affixes = {side: _distinct_strings(g, spec, spec.n_affixes, lambda c: g.integers(1, 4, size=c)) for side in sides}
    order = g.permutation(len(stems))
    classes = [part.tolist() for part in np.array_split(order, min(spec.n_classes, len(stems)))]
    weights = []
    for members in classes:
        ranks = g.permutation(len(members)) + 1.0
        w = ranks**-spec.zipf
        weights.append(np.cumsum(w / w.sum()))  # the class's cumulative distribution
    templates = [
        tuple(
            int(c)
            for c in g.integers(0, len(classes), size=int(g.integers(spec.phrase_len[0], spec.phrase_len[1] + 1)))
        )
        for _ in range(spec.n_templates)
    ]
    return dict(stems=stems, sides=sides, affixes=affixes, classes=classes, weights=weights, templates=templates)


def _sentences(spec: LanguageSpec, grammar: Dict[str, Any], rng, n_chars: int):
    """``(text, word_ends, phrase_ends, sentence_ends, morpheme_ends)``: ``n_chars`` characters of sentences
    drawn from ``rng``, and the position of the last character of every word, phrase, sentence and morpheme
    (in the full text; a word's last morpheme ends where the word does)."""
    sep, templates = spec.separator, grammar["templates"]
    pieces: List[str] = []
    word_ends: List[int] = []
    phrase_ends: List[int] = []
    sentence_ends: List[int] = []
    inner_ends: List[int] = []  # morpheme ends inside words (after a prefix, before a suffix)
    total = 0
    while total <= n_chars:  # one character beyond n_chars tells whether the last one ends a word
        for _ in range(_SENTENCES_PER_BATCH):
            n_phrases = int(rng.integers(spec.sentence_len[0], spec.sentence_len[1] + 1))
            for p in range(n_phrases):
                slots = templates[int(rng.integers(len(templates)))]
                last_phrase = p == n_phrases - 1
                for j, c in enumerate(slots):
                    w, inner = _word(spec, grammar, rng, c)
                    inner_ends.extend(total + k for k in inner)
                    pieces.append(w)
                    total += len(w)
                    end = total - 1
                    if j == len(slots) - 1:
                        mark = (
                            SENTENCE_MARKS[int(rng.integers(3))]
                            if last_phrase
                            else PHRASE_MARKS[int(rng.integers(3))]
                            if spec.phrases == "marked"
                            else ""
                        )
                        if mark:
                            pieces.append(mark)
                            total += 1
                            end = total - 1
                        phrase_ends.append(end)
                        if last_phrase:
                            sentence_ends.append(end)
                    word_ends.append(end)
                    if sep:
                        pieces.append(sep)
                        total += len(sep)
    return "".join(pieces)[:n_chars], word_ends, phrase_ends, sentence_ends, sorted(inner_ends + word_ends)


def _word(spec: LanguageSpec, grammar: Dict[str, Any], rng, c: int) -> Tuple[str, List[int]]:
    """A word of class ``c``: a stem drawn by its Zipf weight, with each affix side added with ``affix_prob``;
    and the offsets, within the word, of the last character of each morpheme but the last."""
    weights, classes, affixes = grammar["weights"], grammar["classes"], grammar["affixes"]
    k = min(int(np.searchsorted(weights[c], rng.random(), side="right")), len(classes[c]) - 1)
    word = grammar["stems"][classes[c][k]]
    prefix = suffix = 0  # affix lengths
    for side in grammar["sides"]:
        if rng.random() < spec.affix_prob:
            a = affixes[side][int(rng.integers(len(affixes[side])))]
            if side == "prefix":
                word, prefix = a + word, len(a)
            else:
                word, suffix = word + a, len(a)
    inner = ([prefix - 1] if prefix else []) + ([len(word) - suffix - 1] if suffix else [])
    return word, inner


def _mask(ends: List[int], n_chars: int) -> np.ndarray:
    """A boolean array of ``n_chars`` that is True at the ``ends`` below ``n_chars``."""
    out = np.zeros(n_chars, dtype=bool)
    e = np.asarray(ends, dtype=np.int64)
    out[e[e < n_chars]] = True
    return out
