"""A generator of hierarchical text (characters -> words -> phrases) whose true
boundaries are known, so learned boundaries can be scored.

The generative process, all drawn from one seeded ``numpy.random.Generator``:

1. **Lexicon** (``lexicon="trie"``, the default): the ``n_words`` leaves of a
   random trie over ``alphabet``: every node above depth ``word_len[0]`` has
   ``branching`` (inclusive range) children, then randomly drawn leaves
   shallower than ``word_len[1]`` are split the same way until there are
   ``n_words``. No word is a prefix of another and every proper prefix of a
   word is shared by at least two words, so **a word is known only at its last
   letter** (which also ends it, with or without separators).
   ``lexicon="random"`` (the generator before the trie, kept to reproduce
   earlier results): ``n_words`` distinct words of lengths drawn uniformly from
   ``word_len`` and letters drawn uniformly from ``alphabet``; a word of that
   lexicon is usually known from its first one or two letters.
2. **Word classes**: ``"trie"``: the words, in the trie's (alphabetical) order,
   are dealt round robin into ``n_classes`` classes, so words that differ only
   in their last letter fall in different classes and the class too is known
   only at a word's last letter. ``"random"``: the words are shuffled and dealt
   into ``n_classes`` classes of (nearly) equal size.
3. **Phrase templates**: ``n_templates`` templates, each a sequence of word
   classes of a length drawn from ``phrase_len`` (inclusive) and one closing
   punctuation mark drawn from ``punctuation``.
4. **Text**: phrases one after another, separated by ``separator`` (a space).
   A phrase picks a template uniformly, fills each slot with a word drawn
   uniformly from the slot's class, joins the words with ``separator`` and
   ends with the template's punctuation mark. With ``separator=""`` the words
   follow each other with nothing between them (``"thecatsat."``): a model
   must then find the words from the statistics of the letters alone.

So within a word the next character is constrained by the word read so far,
the next word's class is determined by the template and the position in the
phrase, and the closing mark depends on a choice made at the start of the
phrase: structure at three time scales for a multiscale model to find.

Why the trie is the default: a model with a boundary detector (the HM-LSTM)
should find the word ends. In the random lexicon a word is identified by its
first letters, so a detector that fires once per word anywhere after that
point passes the same information upward as one at the word's end, and a flush
in the middle of a word costs nothing because the rest of the word is
determined; the likelihood then does not single out the ends. In the trie a
boundary before the last letter passes up an unresolved word (and class), and a
flush there throws away the prefix that the remaining letters depend on, so the
one place where a single boundary per word carries the word and its class is
its end. (See docs/models/hm_lstm.md for what this does and does not buy.)

Boundaries: ``word_boundaries[i]`` is true when character ``i`` is the last
character of a word, the last word of a phrase ending at the punctuation mark
(with the space separator this is what :func:`multiscale_rnn.data.word_boundaries`
says of maximal runs of non-space characters); ``phrase_boundaries[i]`` is true
at each punctuation mark. Every phrase boundary is also a word boundary.
Separators are never boundaries. Text cut at ``n_chars`` does not mark the cut
word or phrase as ended. The generator records the boundaries as it writes the
words, so they are known without separators too.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .._checks import int_at_least
from .corpus import Corpus, char_corpus, split_points
from .vocab import text_codes

__all__ = ["synthetic_hierarchy", "HierarchicalText"]

_PHRASES_PER_BATCH = 256


@dataclass
class HierarchicalText:
    """Output of :func:`synthetic_hierarchy`."""

    text: str
    word_boundaries: np.ndarray
    phrase_boundaries: np.ndarray
    lexicon: List[str]
    classes: List[List[int]]  # indices into lexicon, one list per class
    templates: List[Tuple[Tuple[int, ...], str]]  # (class sequence, closing mark)
    params: Dict[str, Any] = field(default_factory=dict)
    sentence_boundaries: Optional[np.ndarray] = None  # the sentence ends, where the generator has them
    morpheme_boundaries: Optional[np.ndarray] = None  # the morpheme ends (every word end too), where it has them

    def __len__(self) -> int:
        return len(self.text)

    def corpus(self, valid_fraction: float = 0.1, test_fraction: float = 0.1, name: str = "synthetic") -> Corpus:
        """A code-point character corpus of the text, split contiguously into
        train / valid / test (a fraction of 0 gives no such split), with
        ``corpus.boundaries = {split: {"word": bool array, "phrase": bool
        array}}`` aligned with each split's ids (and ``"morpheme"`` where the text has them)."""
        n = len(self.text)
        a, b = split_points(n, valid_fraction, test_fraction)
        cuts = {"train": (0, a), "valid": (a, b), "test": (b, n)}
        cuts = {s: c for s, c in cuts.items() if c[1] > c[0]}
        parts = {s: self.text[i:j] for s, (i, j) in cuts.items()}
        corpus = char_corpus(parts["train"], parts.get("valid"), parts.get("test"), name=name)
        corpus.boundaries = {
            s: {"word": self.word_boundaries[i:j].copy(), "phrase": self.phrase_boundaries[i:j].copy()}
            for s, (i, j) in cuts.items()
        }
        if self.morpheme_boundaries is not None:
            for s, (i, j) in cuts.items():
                corpus.boundaries[s]["morpheme"] = self.morpheme_boundaries[i:j].copy()
        return corpus


def _range_arg(value: Any, name: str, minimum: int) -> Tuple[int, int]:
    try:
        if isinstance(value, str):
            raise TypeError
        lo, hi = (int(v) for v in value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a pair (min, max) of integers, got {value!r}") from None
    if not minimum <= lo <= hi:
        raise ValueError(f"{name} must satisfy {minimum} <= min <= max, got {value!r}")
    return lo, hi


def _random_lexicon(rng, n_words, word_lo, word_hi, alphabet) -> List[str]:
    """``n_words`` distinct words of uniform lengths and uniform letters (``lexicon="random"``)."""
    letters = np.array(list(alphabet))
    words: List[str] = []
    seen = set()
    while len(words) < n_words:
        length = int(rng.integers(word_lo, word_hi + 1))
        word = "".join(letters[rng.integers(0, len(letters), size=length)])
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def _trie_lexicon(rng, n_words, word_lo, word_hi, branch_lo, branch_hi, alphabet) -> List[str]:
    """The ``n_words`` leaves of a random trie (``lexicon="trie"``), in the trie's order.

    Every node above depth ``word_lo`` is split into ``branch_lo..branch_hi`` children (distinct
    letters of ``alphabet``); then leaves shallower than ``word_hi``, drawn at random, are split
    the same way until there are ``n_words`` (the last split may have fewer children, never fewer
    than 2). So no word is a prefix of another, and every proper prefix of a word is shared by at
    least two words: a word is known only at its last letter, which also ends it.
    """

    def split(word: str, most: int) -> List[str]:
        k = int(rng.integers(branch_lo, branch_hi + 1))
        k = max(2, min(k, most))
        return [word + c for c in sorted(rng.choice(list(alphabet), size=k, replace=False).tolist())]

    leaves = [""]
    for depth in range(word_lo):  # every node above word_lo splits; no more leaves than n_words at the end
        below = branch_lo ** (word_lo - depth - 1)  # the fewest leaves a child at depth + 1 will have
        children: List[str] = []
        for j, w in enumerate(leaves):
            others = len(children) * below + (len(leaves) - j - 1) * below * branch_lo
            children += split(w, (n_words - others) // below)
        leaves = children
    while len(leaves) < n_words:
        open_ = [i for i, w in enumerate(leaves) if len(w) < word_hi]
        if not open_:
            raise ValueError(f"could not grow a trie of {n_words} words with depths up to {word_hi}")
        i = open_[int(rng.integers(0, len(open_)))]
        leaves[i : i + 1] = split(leaves[i], n_words - len(leaves) + 1)
    return sorted(leaves)


def synthetic_hierarchy(
    n_chars: int = 20000,
    seed: int = 0,
    n_words: int = 48,
    word_len: Tuple[int, int] = (2, 8),
    phrase_len: Tuple[int, int] = (2, 5),
    n_classes: int = 6,
    n_templates: int = 12,
    alphabet: str = "abcdefghijklmnopqrstuvwxyz",
    punctuation: str = ".!?;",
    separator: str = " ",
    lexicon: str = "trie",
    branching: Tuple[int, int] = (2, 3),
    phrase_successors: Optional[int] = None,
) -> HierarchicalText:
    """Generate ``n_chars`` characters of hierarchical text (see the module
    docstring for the process and the meaning of the boundary arrays).
    ``lexicon`` is ``"trie"`` (default: words known only at their last letter,
    ``branching`` children per trie node) or ``"random"`` (the earlier
    generator: same seed, same text as before the trie; ``branching`` unused).
    ``phrase_successors``: None (default) draws every phrase's template
    uniformly, independently of the phrases before it; an integer k gives each
    template k successor templates (drawn once, distinct) and draws the next
    phrase's template uniformly among the successors of the previous one, so
    that a phrase tells something about the next (structure above the phrase).

    The same arguments give the same text; with the same seed and other
    arguments a shorter text is a prefix of a longer one.

    >>> h = synthetic_hierarchy(n_chars=60, seed=1)
    >>> len(h.text), h.word_boundaries.shape, h.phrase_boundaries.dtype
    (60, (60,), dtype('bool'))
    """
    p = _checked_params(
        n_chars,
        seed,
        n_words,
        word_len,
        phrase_len,
        n_classes,
        n_templates,
        alphabet,
        punctuation,
        separator,
        lexicon,
        branching,
        phrase_successors,
    )
    rng = np.random.default_rng(p["seed"])
    words, classes, templates, successors = _grammar(rng, p)
    text, ends = _phrases(rng, p, words, classes, templates, successors)
    n_chars = p["n_chars"]
    is_mark = np.isin(text_codes(text, "codepoint"), [ord(c) for c in punctuation])
    words_end = np.zeros(n_chars, dtype=bool)
    ends_arr = np.asarray(ends, dtype=np.int64)
    words_end[ends_arr[ends_arr < n_chars]] = True
    return HierarchicalText(
        text=text,
        word_boundaries=words_end,
        phrase_boundaries=is_mark,
        lexicon=words,
        classes=classes,
        templates=templates,
        params=p,
    )


def _checked_params(
    n_chars,
    seed,
    n_words,
    word_len,
    phrase_len,
    n_classes,
    n_templates,
    alphabet,
    punctuation,
    separator,
    lexicon,
    branching,
    phrase_successors,
) -> Dict[str, Any]:
    """The arguments of :func:`synthetic_hierarchy` checked (``ValueError`` / ``TypeError`` naming the
    argument), as the ``params`` of its result: ranges as ``(min, max)``, ``lexicon`` its kind."""
    kind = lexicon
    if kind not in ("trie", "random"):
        raise ValueError(f"lexicon must be 'trie' or 'random', got {kind!r}")
    n_chars = int_at_least(n_chars, "n_chars", 1)
    seed = int_at_least(seed, "seed", 0)
    n_words = int_at_least(n_words, "n_words", 1)
    n_classes = int_at_least(n_classes, "n_classes", 1)
    n_templates = int_at_least(n_templates, "n_templates", 1)
    word_lo, word_hi = _range_arg(word_len, "word_len", 1)
    phrase_lo, phrase_hi = _range_arg(phrase_len, "phrase_len", 1)
    _check_characters(alphabet, punctuation, separator)
    if n_classes > n_words:
        raise ValueError(f"n_classes={n_classes} exceeds n_words={n_words}: every class needs a word")
    branch_lo, branch_hi = _range_arg(branching, "branching", 2)
    if phrase_successors is not None:
        phrase_successors = int_at_least(phrase_successors, "phrase_successors", 1)
        if phrase_successors > n_templates:
            raise ValueError(
                f"phrase_successors={phrase_successors} exceeds n_templates={n_templates}: "
                f"the successors of a template are distinct templates"
            )
    if kind == "trie":
        if branch_hi > len(alphabet):
            raise ValueError(
                f"branching={branching!r} needs at least {branch_hi} letters, the alphabet has {len(alphabet)}"
            )
        if not branch_lo**word_lo <= n_words <= branch_hi**word_hi:
            raise ValueError(
                f"n_words={n_words} cannot be the leaves of a trie with {branch_lo}..{branch_hi} children per "
                f"node and depths {word_lo}..{word_hi} (between {branch_lo**word_lo} and {branch_hi**word_hi})"
            )
    capacity = sum(len(alphabet) ** k for k in range(word_lo, word_hi + 1))
    if kind == "random" and n_words > capacity // 2:
        raise ValueError(
            f"n_words={n_words} is too many for an alphabet of {len(alphabet)} letters and word lengths "
            f"{word_lo}..{word_hi} ({capacity} possible words; at most half of them may be used)"
        )
    return {
        "n_chars": n_chars,
        "seed": seed,
        "n_words": n_words,
        "word_len": (word_lo, word_hi),
        "phrase_len": (phrase_lo, phrase_hi),
        "n_classes": n_classes,
        "n_templates": n_templates,
        "alphabet": alphabet,
        "punctuation": punctuation,
        "separator": separator,
        "lexicon": kind,
        "branching": (branch_lo, branch_hi),
        "phrase_successors": phrase_successors,
    }


def _check_characters(alphabet, punctuation, separator) -> None:
    """The alphabet and punctuation: non-empty, distinct, no spaces, disjoint; the separator '' or one
    character of neither."""
    for what, chars in (("alphabet", alphabet), ("punctuation", punctuation)):
        if not isinstance(chars, str) or not chars:
            raise ValueError(f"{what} must be a non-empty str, got {chars!r}")
        if any(c.isspace() for c in chars) or len(set(chars)) != len(chars):
            raise ValueError(f"{what} must hold distinct non-space characters, got {chars!r}")
    if not isinstance(separator, str) or len(separator) > 1 or (separator and separator in alphabet + punctuation):
        raise ValueError(
            f"separator must be '' or one character outside the alphabet and punctuation, got {separator!r}"
        )
    if set(alphabet) & set(punctuation):
        raise ValueError(f"alphabet and punctuation share {''.join(sorted(set(alphabet) & set(punctuation)))!r}")


def _grammar(rng, p: Dict[str, Any]):
    """``(lexicon, classes, templates, successors)`` drawn from ``rng``: the words, the word classes, the
    phrase templates ((class per slot), mark), and each template's successors (None: templates drawn
    independently)."""
    n_words, n_classes, n_templates = p["n_words"], p["n_classes"], p["n_templates"]
    (word_lo, word_hi), (phrase_lo, phrase_hi) = p["word_len"], p["phrase_len"]
    alphabet, punctuation = p["alphabet"], p["punctuation"]
    if p["lexicon"] == "trie":
        branch_lo, branch_hi = p["branching"]
        lexicon = _trie_lexicon(rng, n_words, word_lo, word_hi, branch_lo, branch_hi, alphabet)
        # dealt in the trie's order, round robin: words that share every letter but the last
        # (siblings) fall in different classes, so the class too is known only at the last letter
        classes = [list(range(c, n_words, n_classes)) for c in range(n_classes)]
    else:
        lexicon = _random_lexicon(rng, n_words, word_lo, word_hi, alphabet)
        order = rng.permutation(n_words)
        classes = [part.tolist() for part in np.array_split(order, n_classes)]
    templates = []
    for _ in range(n_templates):
        length = int(rng.integers(phrase_lo, phrase_hi + 1))
        slots = tuple(int(c) for c in rng.integers(0, n_classes, size=length))
        templates.append((slots, punctuation[int(rng.integers(0, len(punctuation)))]))
    successors = None
    if p["phrase_successors"] is not None:  # (n_templates, k): the templates that may follow each template
        successors = np.stack(
            [rng.choice(n_templates, size=p["phrase_successors"], replace=False) for _ in range(n_templates)]
        )
    return lexicon, classes, templates, successors


def _phrases(rng, p: Dict[str, Any], lexicon, classes, templates, successors) -> Tuple[str, List[int]]:
    """The text (``p["n_chars"]`` characters) and the position of the last character of every word in the
    phrases drawn from ``rng``.

    Phrases are drawn in fixed-size batches so that the text for a given seed does not depend on n_chars
    (a shorter text is a prefix of a longer one)."""
    n_chars, n_templates, separator = p["n_chars"], p["n_templates"], p["separator"]
    class_words = [[lexicon[i] for i in members] for members in classes]
    class_sizes = np.array([len(members) for members in classes])
    previous = 0  # the template before the first phrase (chained templates only)
    pieces: List[str] = []
    ends: List[int] = []  # position of the last character of every word (in the full text)
    total = 0
    while total <= n_chars:  # one character beyond n_chars tells whether the last one ends a word
        if successors is None:
            chosen = rng.integers(0, n_templates, size=_PHRASES_PER_BATCH)
        else:
            chosen = np.empty(_PHRASES_PER_BATCH, dtype=np.int64)
            for j, pick in enumerate(rng.integers(0, p["phrase_successors"], size=_PHRASES_PER_BATCH).tolist()):
                previous = chosen[j] = successors[previous, pick]
        slot_classes = np.concatenate([templates[t][0] for t in chosen])
        picks = rng.integers(0, class_sizes[slot_classes]).tolist()
        k = 0
        for t in chosen.tolist():
            slots, mark = templates[t]
            words = [class_words[c][picks[k + j]] for j, c in enumerate(slots)]
            k += len(slots)
            pos = total
            for w in words[:-1]:
                ends.append(pos + len(w) - 1)
                pos += len(w) + len(separator)
            ends.append(pos + len(words[-1]))  # the last word ends at the mark
            phrase = separator.join(words) + mark + separator
            pieces.append(phrase)
            total += len(phrase)
    return "".join(pieces)[:n_chars], ends
