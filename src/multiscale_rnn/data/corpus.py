"""Corpora: train / valid / test id arrays sharing one vocabulary.

The unseen-symbol rule
----------------------
The vocabulary is built from the **training split only**, its symbols sorted
(code points, byte values, or words in Python string order). A symbol of the
validation or test split that does not occur in training is replaced by the
unknown symbol: ``"<unk>"`` for words, U+FFFD (``"\\ufffd"``) for characters.

The unknown symbol is part of the vocabulary **only when needed**: when some
validation/test symbol is unseen in training (it is then appended, so its id is
``vocab_size - 1``), or when the training text itself contains it (Penn
Treebank's ``<unk>``; it then keeps its sorted place). Otherwise the vocabulary
has no unknown symbol, ``vocab.unk_id`` is ``None``, and the alphabet is exactly
the training alphabet (50 symbols for PTB characters, 27 for text8).

``Corpus.stats()["unknown"]`` counts the replacements per split and
``stats()["unknown_symbols"]`` lists the replaced symbols.
"""

from collections import Counter
from typing import Any, Dict, Optional, Sequence, Tuple, Union, cast

import numpy as np

from .._checks import is_int
from .vocab import UNK_CHAR, UNK_WORD, Replaced, Vocab, describe_symbol, text_codes, tokenize_words

__all__ = ["Corpus", "char_corpus", "word_corpus", "word_boundaries", "clause_boundaries", "split_contiguous", "SPLITS"]

SPLITS = ("train", "valid", "test")

# Every code point for which str.isspace() is true lies below U+3001.
_SPACE_CODES = np.array([c for c in range(0x3001) if chr(c).isspace()], dtype=np.int64)


def as_ids(ids: Any, what: str, vocab_size: Optional[int] = None) -> np.ndarray:
    """Check and convert a 1-D integer id sequence to a contiguous ``int32`` array."""
    from .batching import text_given_for_ids

    hint = text_given_for_ids(ids, what, use="it instead of building Corpus(...) from text")
    if hint is not None:
        raise TypeError(hint)
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be a 1-D sequence of ids, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{what} is empty")
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{what} must hold integer ids, got dtype {arr.dtype}")
    if vocab_size is not None:
        bad = np.flatnonzero((arr < 0) | (arr >= vocab_size))
        if len(bad):
            p = int(bad[0])
            raise ValueError(f"{what}: id {int(arr[p])} at position {p} is out of range for vocab_size {vocab_size}")
    return np.ascontiguousarray(arr, dtype=np.int32)


def _checked_replaced(r: Any, ids: Optional[np.ndarray], unk_id: Optional[int], what: str) -> Replaced:
    """``r`` as a :class:`Replaced` of the split ``ids``, or an exception naming ``what``: its positions lie in
    the split, ascending, and hold the unknown id, one symbol each."""
    if ids is None:
        raise ValueError(f"replaced names {what}, which the corpus does not have")
    if not isinstance(r, Replaced):
        raise TypeError(f"replaced[...] of {what} must be a Replaced, got {type(r).__name__}")
    pos = np.asarray(r.positions, dtype=np.int64)
    if pos.ndim != 1 or len(pos) != len(r.symbols):
        raise ValueError(f"{what}: replaced has {pos.size} position(s) and {len(r.symbols)} symbol(s)")
    if len(pos) == 0:
        return Replaced.none()
    if unk_id is None or pos[0] < 0 or pos[-1] >= len(ids) or np.any(np.diff(pos) <= 0) or np.any(ids[pos] != unk_id):
        raise ValueError(
            f"{what}: replaced positions must be ascending positions of the split ({len(ids):,} ids) holding the "
            f"unknown id ({unk_id})"
        )
    return Replaced(pos, list(r.symbols))


class Corpus:
    """Train / valid / test id arrays (1-D ``int32``) and their vocabulary.

    ``valid`` and ``test`` may be ``None``. ``replaced`` (optional) maps a split
    name to a :class:`~multiscale_rnn.data.Replaced`: the positions where the
    unknown id replaced a symbol the vocabulary lacks, and which symbol each
    held (what :meth:`with_vocab` needs to read them with another vocabulary);
    ``unknown`` (optional; by default counted from ``replaced``) maps a split
    name to a :class:`collections.Counter` of the replaced symbols; ``boundaries``
    (optional) holds ground-truth boundary arrays per split, e.g.
    ``{"train": {"word": bool_array, "phrase": bool_array}, ...}``.
    """

    def __init__(
        self,
        train: Any,
        valid: Any,
        test: Any,
        vocab: Vocab,
        name: str = "corpus",
        unit: Optional[str] = None,
        *,
        unknown: Optional[Dict[str, Counter]] = None,
        boundaries: Optional[Dict[str, Dict[str, np.ndarray]]] = None,
        replaced: Optional[Dict[str, Replaced]] = None,
    ):
        if not isinstance(vocab, Vocab):
            raise TypeError(f"vocab must be a Vocab, got {type(vocab).__name__}")
        unit = vocab.unit if unit is None else unit
        if unit != vocab.unit:
            raise ValueError(f"unit {unit!r} does not match the vocabulary's unit {vocab.unit!r}")
        if train is None:
            raise ValueError("a corpus needs a training split")
        self.vocab = vocab
        self.name = str(name)
        self.unit = unit
        self.train = as_ids(train, f"{name} train split", vocab.size)
        self.valid = None if valid is None else as_ids(valid, f"{name} valid split", vocab.size)
        self.test = None if test is None else as_ids(test, f"{name} test split", vocab.size)
        self.replaced: Dict[str, Replaced] = {s: Replaced.none() for s in self.splits}
        for s, r in (replaced or {}).items():
            self.replaced[s] = _checked_replaced(r, self.splits.get(s), vocab.unk_id, f"{name} {s} split")
        given = unknown or {}
        self.unknown: Dict[str, Counter] = {
            s: Counter(given[s]) if s in given else self.replaced[s].counts() for s in self.splits
        }
        self.boundaries = boundaries

    @property
    def vocab_size(self) -> int:
        return self.vocab.size

    @property
    def level(self) -> Optional[str]:
        """``"codepoint"`` or ``"byte"`` for character corpora, ``None`` for words."""
        return self.vocab.level

    @property
    def splits(self) -> Dict[str, np.ndarray]:
        """The splits that are present, by name."""
        return {s: getattr(self, s) for s in SPLITS if getattr(self, s) is not None}

    def stats(self) -> Dict[str, Any]:
        """Sizes and unknown-symbol counts.

        Keys: ``name``, ``unit``, ``level``, ``vocab_size``, ``unk_id``,
        ``tokens`` (tokens per split), ``unknown`` (symbols replaced by the
        unknown id per split), ``unknown_symbols`` (per split, the replaced
        symbols and their counts, most frequent first, at most 20),
        ``unk_tokens`` (occurrences of the unknown id per split, whether
        replaced or already in the text, like PTB's ``<unk>``).
        """
        splits = self.splits
        unk = self.vocab.unk_id
        return {
            "name": self.name,
            "unit": self.unit,
            "level": self.level,
            "vocab_size": self.vocab_size,
            "unk_id": unk,
            "tokens": {s: int(len(a)) for s, a in splits.items()},
            "unknown": {s: int(sum(self.unknown[s].values())) for s in splits},
            "unknown_symbols": {s: dict(self.unknown[s].most_common(20)) for s in splits},
            "unk_tokens": {s: (0 if unk is None else int(np.count_nonzero(a == unk))) for s, a in splits.items()},
        }

    def counts(self) -> np.ndarray:
        """Occurrences of each id in the training split, shape ``(vocab_size,)`` (int64)."""
        return np.bincount(self.train, minlength=self.vocab_size).astype(np.int64)

    def by_frequency(self) -> "Corpus":
        """The same corpus with ids renumbered in descending training frequency
        (ties keep their id order), as the class softmax's frequency binning
        needs; ``self`` is unchanged. The unknown symbol keeps its name."""
        counts = self.counts()
        perm = np.argsort(-counts, kind="stable")  # new id -> old id
        new_of_old = np.empty_like(perm)
        new_of_old[perm] = np.arange(len(perm))
        vocab = Vocab(
            [self.vocab.itos[i] for i in perm], unit=self.vocab.unit, unk=self.vocab.unk, level=self.vocab.level
        )
        return self._renumbered({s: new_of_old[a].astype(np.int32) for s, a in self.splits.items()}, vocab)

    def with_vocab(self, vocab: Vocab) -> "Corpus":
        """The same text with the ids of ``vocab`` (a trained model's vocabulary, to read this corpus with
        it); ``self`` is unchanged. Both vocabularies must have the same unit and level. A symbol ``vocab``
        lacks is read as its unknown symbol and counted in ``unknown``; without an unknown symbol
        ``ValueError`` names the first (split and position) and how many there are."""
        if not isinstance(vocab, Vocab):
            raise TypeError(f"vocab must be a Vocab, got {type(vocab).__name__}")
        if (vocab.unit, vocab.level) != (self.vocab.unit, self.vocab.level):
            raise ValueError(
                f"{self.name} is read as {self.vocab.level or self.vocab.unit} symbols and the vocabulary as "
                f"{vocab.level or vocab.unit} symbols: give a vocabulary of the same unit and level"
            )
        # table (V_self,): the id in vocab of each id of self, -1 where vocab lacks the symbol
        table = np.array([vocab.stoi.get(sym, -1) for sym in self.vocab.itos], dtype=np.int32)
        remap: Dict[str, np.ndarray] = {}
        replaced: Dict[str, Replaced] = {}
        unknown: Dict[str, Counter] = {}
        for split, ids in self.splits.items():
            new = table[ids]  # (n,) ids in vocab
            own = self.replaced[split]  # the symbols self's vocabulary lacked: read them with vocab's
            new[own.positions] = np.array([vocab.stoi.get(sym, -1) for sym in own.symbols], dtype=np.int32)
            originals = dict(zip(own.positions.tolist(), own.symbols))
            missing = np.flatnonzero(new < 0)
            symbols = [originals.get(p, self.vocab.itos[ids[p]]) for p in missing.tolist()]
            if len(missing) and vocab.unk_id is None:
                raise ValueError(
                    f"{self.name} {split} split: symbol {describe_symbol(symbols[0], vocab.level)} "
                    f"at position {int(missing[0])} is not in the vocabulary ({vocab.size} symbols), which has no "
                    f"unknown symbol to read it as; {len(missing)} such symbol(s) in the split"
                )
            if len(missing):
                new[missing] = vocab.unk_id
            remap[split] = new
            replaced[split] = Replaced(missing.astype(np.int64), symbols)
            # counts of replacements self records without their positions (a corpus built from ids) stay
            unknown[split] = replaced[split].counts() + (self.unknown[split] - own.counts())
        return self._renumbered(remap, vocab, unknown, replaced)

    def _renumbered(
        self,
        splits: Dict[str, np.ndarray],
        vocab: Vocab,
        unknown: Optional[Dict[str, Counter]] = None,
        replaced: Optional[Dict[str, Replaced]] = None,
    ) -> "Corpus":
        """This corpus's text as the ids ``splits`` (split name -> 1-D ids) of ``vocab``, with its name,
        boundaries and (unless given) unknown-symbol records."""
        return Corpus(
            splits["train"],
            splits.get("valid"),
            splits.get("test"),
            vocab,
            self.name,
            self.unit,
            unknown=self.unknown if unknown is None else unknown,
            boundaries=self.boundaries,
            replaced=self.replaced if replaced is None else replaced,
        )

    def __repr__(self) -> str:
        sizes = ", ".join(f"{s}={len(a):,}" for s, a in self.splits.items())
        return f"Corpus({self.name!r}, unit={self.unit!r}, vocab_size={self.vocab_size}, {sizes})"


def _check_text(text: Any, what: str, allow_bytes: bool) -> None:
    kinds = (str, bytes, bytearray) if allow_bytes else (str,)
    if not isinstance(text, kinds):
        expected = "str or bytes" if allow_bytes else "str"
        raise TypeError(f"{what} text must be {expected}, got {type(text).__name__}")
    if len(text) == 0:
        raise ValueError(f"{what} text is empty")


def refuse_blank(text: Union[str, bytes, bytearray], what: str) -> None:
    """``ValueError`` naming ``what`` when ``text`` holds only whitespace (nothing to learn or score)."""
    if text.isspace():
        unit = "characters" if isinstance(text, str) else "bytes"
        raise ValueError(
            f"{what} holds only whitespace ({len(text):,} {unit}): there is nothing to learn or score in it"
        )


def char_corpus(
    train_text: Union[str, bytes],
    valid_text: Union[str, bytes, None] = None,
    test_text: Union[str, bytes, None] = None,
    name: str = "text",
    level: str = "codepoint",
) -> Corpus:
    """A character corpus.

    ``level="codepoint"``: one symbol per Unicode code point (texts are
    ``str``). ``level="byte"``: one symbol per UTF-8 byte (``str`` texts are
    encoded as UTF-8, ``bytes`` taken as they are); ids go only to the byte
    values seen in training.

    The vocabulary holds the training symbols, sorted. Validation/test symbols
    unseen in training map to the unknown symbol U+FFFD, which is added to the
    vocabulary only when needed (see the module docstring);
    ``stats()["unknown"]`` counts the replacements.
    """
    if level not in ("codepoint", "byte"):
        raise ValueError(f"level must be 'codepoint' or 'byte', got {level!r}")
    texts = {"train": train_text, "valid": valid_text, "test": test_text}
    codes = {}
    for split, text in texts.items():
        if text is None and split != "train":
            continue
        _check_text(text, f"{name} {split}", allow_bytes=(level == "byte"))  # refuses None for train
        text = cast(Union[str, bytes], text)
        refuse_blank(text, f"{name} {split} text")
        codes[split] = text_codes(text, level)
    train_codes = codes["train"]
    if train_codes.dtype == np.uint8:
        present = np.flatnonzero(np.bincount(train_codes, minlength=256))
    else:
        present = np.unique(train_codes)
    symbols = [chr(c) for c in present.tolist()] if level == "codepoint" else present.tolist()
    seen = set(present.tolist())
    needs_unk = any(not np.isin(c, present).all() for s, c in codes.items() if s != "train")
    unk = UNK_CHAR if needs_unk or (level == "codepoint" and ord(UNK_CHAR) in seen) else None
    vocab = Vocab(symbols, unit="char", unk=unk, level=level)
    ids, replaced = {}, {}
    for split, c in codes.items():
        ids[split], replaced[split] = vocab._encode_codes(c)
    return Corpus(ids["train"], ids.get("valid"), ids.get("test"), vocab, name, "char", replaced=replaced)


def word_corpus(
    train_text: str,
    valid_text: Optional[str] = None,
    test_text: Optional[str] = None,
    name: str = "words",
    *,
    min_count: int = 1,
    order: str = "sorted",
) -> Corpus:
    """A word corpus: tokens split on whitespace, ``"<eos>"`` at each newline
    (see :func:`multiscale_rnn.data.tokenize_words`).

    The vocabulary holds the training tokens seen at least ``min_count`` times;
    rarer training tokens, and validation/test tokens not in it, map to
    ``"<unk>"``, which is in the vocabulary only when needed or when the
    training text already contains it. ``order="sorted"`` (the default) gives
    ids in string order; ``order="frequency"`` gives ids in descending training
    frequency (ties in string order; ``"<unk>"`` placed by the count of training
    tokens it stands for), which the class softmax's frequency binning needs
    (:func:`multiscale_rnn.data.class_sizes`).
    """
    if not is_int(min_count) or min_count < 1:
        raise ValueError(f"min_count must be a positive integer, got {min_count!r}")
    if order not in ("sorted", "frequency"):
        raise ValueError(f"order must be 'sorted' or 'frequency', got {order!r}")
    tokens = {}
    for split, text in (("train", train_text), ("valid", valid_text), ("test", test_text)):
        if text is None and split != "train":
            continue
        _check_text(text, f"{name} {split}", allow_bytes=False)  # refuses None for train
        refuse_blank(cast(str, text), f"{name} {split} text")  # line ends alone would be "<eos>" tokens
        tokens[split] = tokenize_words(cast(str, text))
    counts = Counter(tokens["train"])
    known = {w for w, n in counts.items() if n >= min_count}
    if not known:
        raise ValueError(f"no training word of {name} occurs {min_count} times or more")
    needs_unk = (
        UNK_WORD in counts
        or len(known) < len(counts)
        or any(t not in known for s, toks in tokens.items() if s != "train" for t in toks)
    )
    if order == "sorted":
        symbols = sorted(known)
    else:
        unk_count = sum(n for w, n in counts.items() if w not in known or w == UNK_WORD)
        ranked = {w: counts[w] for w in known if w != UNK_WORD}
        if needs_unk:
            ranked[UNK_WORD] = unk_count
        symbols = sorted(ranked, key=lambda w: (-ranked[w], w))
    vocab = Vocab(symbols, unit="word", unk=UNK_WORD if needs_unk else None)
    ids, replaced = {}, {}
    for split, toks in tokens.items():
        ids[split], replaced[split] = vocab.encode_replacing(toks)
    return Corpus(ids["train"], ids.get("valid"), ids.get("test"), vocab, name, "word", replaced=replaced)


def word_boundaries(text: str, split_marks: bool = False) -> np.ndarray:
    """Boolean array of ``len(text)``: ``True`` at the last character of every
    word, a word being a maximal run of non-whitespace characters (so a
    punctuation mark glued to a word ends that word).

    With ``split_marks`` a word is instead a maximal run of letters, digits and ``_``, and every other
    non-whitespace character (a mark) is a word of its own, as a tokenizer splits ``you,`` into ``you``
    and ``,`` and ``f(x)`` into four: the token reading of the HM-LSTM's boundary scores.

    >>> word_boundaries("ab c.").astype(int).tolist()
    [0, 1, 0, 0, 1]
    >>> word_boundaries("ab c.", split_marks=True).astype(int).tolist()
    [0, 1, 0, 1, 1]
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    codes = text_codes(text, "codepoint")
    space = np.isin(codes, _SPACE_CODES)
    if not split_marks:
        ends = ~space
        ends[:-1] &= space[1:]
        return ends
    uniq, inverse = np.unique(codes, return_inverse=True)
    word = np.array([chr(c).isalnum() or chr(c) == "_" for c in uniq], dtype=bool)[inverse]  # letters, digits, _
    mark = ~space & ~word
    ends = mark.copy()  # every mark is a token of its own
    ends[:-1] |= word[:-1] & ~word[1:]  # a run of word characters ends before any other character
    ends[-1:] |= word[-1:]
    return ends


#: The marks that end a clause (with the end of a line) for :func:`clause_boundaries`.
CLAUSE_MARKS = ".,;:?!\n"


def clause_boundaries(text: str, marks: str = CLAUSE_MARKS) -> np.ndarray:
    """Boolean array of ``len(text)``: ``True`` at the last character of every clause, a clause ending
    where one of ``marks`` (by default ``. , ; : ? !`` and the end of a line) follows, spaces and tabs
    between them allowed. That last character is neither whitespace nor a mark, so a run of marks
    (``"?\\n"``, ``".\\n\\n"``) ends one clause, and a text without marks (text8) has none.

    >>> clause_boundaries("ab, c.\\nd").astype(int).tolist()
    [0, 1, 0, 0, 1, 0, 0, 0]
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not isinstance(marks, str) or not marks:
        raise ValueError(f"marks must be a non-empty str, got {marks!r}")
    codes = text_codes(text, "codepoint")
    is_mark = np.isin(codes, text_codes(marks, "codepoint"))
    blank = np.isin(codes, _SPACE_CODES) & ~is_mark  # whitespace that is not itself a mark
    out = np.zeros(len(codes), dtype=bool)
    kept = np.flatnonzero(~blank)  # the positions that are not blank, in order
    # a clause ends at a kept position that is not a mark when the next kept one is a mark
    out[kept[:-1]] = ~is_mark[kept[:-1]] & is_mark[kept[1:]]
    return out


def split_points(n: int, valid_fraction: float, test_fraction: float) -> Tuple[int, int]:
    """Cut points ``(a, b)`` so that ``[0:a]``, ``[a:b]``, ``[b:n]`` are train,
    valid and test; valid and test get ``round(n * fraction)`` items each."""
    for what, f in (("valid_fraction", valid_fraction), ("test_fraction", test_fraction)):
        if not 0 <= f < 1:
            raise ValueError(f"{what} must be in [0, 1), got {f}")
    n_valid, n_test = round(n * valid_fraction), round(n * test_fraction)
    if n - n_valid - n_test < 1:
        raise ValueError(
            f"valid_fraction={valid_fraction} and test_fraction={test_fraction} leave no training data out of {n}"
        )
    return n - n_valid - n_test, n - n_test


def split_contiguous(
    seq: Sequence[Any], valid_fraction: float = 0.05, test_fraction: float = 0.05
) -> Tuple[Any, Optional[Any], Optional[Any]]:
    """Split a text (or any sequence) into contiguous train, valid and test
    parts, in that order. Valid and test get ``round(len * fraction)`` items; a
    part of size zero is returned as ``None``."""
    a, b = split_points(len(seq), valid_fraction, test_fraction)
    return seq[:a], (seq[a:b] if b > a else None), (seq[b:] if len(seq) > b else None)
