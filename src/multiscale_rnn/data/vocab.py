"""Vocabularies: the map between symbols and integer ids.

A :class:`Vocab` is either character level (``unit="char"``) or word level
(``unit="word"``). Character vocabularies come in two flavours (``level``):

- ``"codepoint"``: one symbol per Unicode code point, each a 1-character ``str``;
- ``"byte"``: one symbol per UTF-8 byte, each an ``int`` in 0..255.

The unknown symbol (``unk``) is optional. When a vocabulary has one, symbols
it does not know map to ``unk_id``; when it has none, encoding an unknown
symbol raises :class:`ValueError`. ``encode(..., strict=True)`` raises on any
unknown symbol even when there is an unknown id.
"""

from collections import Counter
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Tuple, Union, cast

import numpy as np

from .._checks import is_int

__all__ = ["Vocab", "Replaced", "tokenize_words", "EOS", "UNK_WORD", "UNK_CHAR"]

#: End-of-line token of word corpora: one per newline of the text.
EOS = "<eos>"
#: Unknown symbol of word vocabularies.
UNK_WORD = "<unk>"
#: Unknown symbol of character vocabularies: U+FFFD REPLACEMENT CHARACTER.
UNK_CHAR = "\ufffd"

_UNITS = ("char", "word")


class Replaced(NamedTuple):
    """Where an encoding wrote the unknown id for a symbol the vocabulary lacks, and which symbol it was:
    what reading the same text with another vocabulary needs (:meth:`Corpus.with_vocab`)."""

    positions: np.ndarray  # (K,) int64, ascending: the replaced positions of the encoded sequence
    symbols: List[Any]  # (K,) the symbol each of them held

    @classmethod
    def none(cls) -> "Replaced":
        """No position replaced."""
        return cls(np.zeros(0, dtype=np.int64), [])

    def counts(self) -> Counter:
        """How many times each symbol was replaced."""
        return Counter(self.symbols)


_LEVELS = ("codepoint", "byte")


def tokenize_words(text: str) -> List[str]:
    """Split ``text`` into word tokens: whitespace separates tokens and every
    newline becomes one ``"<eos>"`` token.

    ``"a b\\nc"`` gives ``["a", "b", "<eos>", "c"]`` and ``"a b\\nc\\n"`` gives
    ``["a", "b", "<eos>", "c", "<eos>"]``; a blank line gives an ``"<eos>"`` of
    its own, as in the usual Penn Treebank preprocessing.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    lines = text.split("\n")
    tokens: List[str] = []
    for line in lines[:-1]:
        tokens.extend(line.split())
        tokens.append(EOS)
    tokens.extend(lines[-1].split())
    return tokens


def text_codes(text: Union[str, bytes, bytearray], level: str) -> np.ndarray:
    """The code values of ``text``: UTF-8 bytes (``uint8``) for ``level="byte"``,
    code points (``uint8`` for ASCII text, else ``uint32``) for ``"codepoint"``."""
    if level == "byte":
        if isinstance(text, str):
            text = text.encode("utf-8", errors="surrogatepass")
        if not isinstance(text, (bytes, bytearray, memoryview)):
            raise TypeError(f"byte-level text must be str or bytes, got {type(text).__name__}")
        return np.frombuffer(bytes(text), dtype=np.uint8)
    if not isinstance(text, str):
        raise TypeError(f"code-point text must be a str, got {type(text).__name__}")
    if text.isascii():
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    return np.frombuffer(text.encode("utf-32-le", errors="surrogatepass"), dtype=np.uint32)


def describe_symbol(symbol: Any, level: Optional[str]) -> str:
    """A readable name for a symbol, for error messages."""
    if level == "byte" and isinstance(symbol, (int, np.integer)):
        return f"byte 0x{int(symbol):02X}"
    if level == "codepoint" and isinstance(symbol, str) and len(symbol) == 1:
        return f"{symbol!r} (U+{ord(symbol):04X})"
    return repr(symbol)


class Vocab:
    """A vocabulary: ``itos[id]`` is the symbol of ``id``, ``stoi[symbol]`` its id.

    Parameters
    ----------
    symbols:
        The symbols in id order. Code-point symbols are 1-character strings,
        byte symbols ints in 0..255, word symbols non-empty strings without
        whitespace. No duplicates.
    unit:
        ``"char"`` or ``"word"``.
    unk:
        The unknown symbol, or ``None`` for a vocabulary without one. If it is
        not among ``symbols`` it is appended, so its id is then ``size - 1``.
    level:
        For ``unit="char"``: ``"codepoint"`` (default) or ``"byte"``. Must be
        ``None`` for words.
    """

    def __init__(
        self,
        symbols: Iterable[Any],
        unit: str = "char",
        unk: Optional[str] = None,
        level: Optional[str] = None,
    ):
        if unit not in _UNITS:
            raise ValueError(f"unit must be 'char' or 'word', got {unit!r}")
        if unit == "word":
            if level is not None:
                raise ValueError(f"a word vocabulary takes no level, got level={level!r}")
        else:
            level = "codepoint" if level is None else level
            if level not in _LEVELS:
                raise ValueError(f"level must be 'codepoint' or 'byte', got {level!r}")
        if unk is not None and (not isinstance(unk, str) or not unk):
            raise TypeError(f"unk must be a non-empty str or None, got {unk!r}")
        if isinstance(symbols, (str, bytes)):
            symbols = list(symbols)
        itos = [int(s) if isinstance(s, np.integer) else s for s in symbols]
        if unk is not None and unk not in itos:
            itos.append(unk)
        if not itos:
            raise ValueError("a vocabulary needs at least one symbol")
        for position, symbol in enumerate(itos):
            if symbol != unk or not isinstance(symbol, str):
                self._check_symbol(symbol, position, unit, level)
        stoi: Dict[Any, int] = {}
        for i, symbol in enumerate(itos):
            if symbol in stoi:
                raise ValueError(f"duplicate symbol {describe_symbol(symbol, level)} at ids {stoi[symbol]} and {i}")
            stoi[symbol] = i
        self.unit = unit
        self.level = level
        self.unk = unk
        self.itos: List[Any] = itos
        self.stoi: Dict[Any, int] = stoi
        self.unk_id: Optional[int] = None if unk is None else stoi[unk]
        if unit == "char":
            # Code value -> id, for fast mapping of whole texts.
            pairs = sorted(
                (ord(s) if isinstance(s, str) else s, i)
                for i, s in enumerate(itos)
                if isinstance(s, int) or (level == "codepoint" and len(s) == 1)
            )
            self._codes = np.array([c for c, _ in pairs], dtype=np.int64)
            self._code_ids = np.array([i for _, i in pairs], dtype=np.int32)

    @staticmethod
    def _check_symbol(symbol: Any, position: int, unit: str, level: Optional[str]) -> None:
        if level == "byte":
            ok = is_int(symbol) and 0 <= symbol <= 255
            expected = "an int in 0..255"
        elif level == "codepoint":
            ok = isinstance(symbol, str) and len(symbol) == 1
            expected = "a 1-character str"
        else:
            ok = isinstance(symbol, str) and bool(symbol) and not any(c.isspace() for c in symbol)
            expected = "a non-empty str without whitespace"
        if not ok:
            raise TypeError(f"symbol {symbol!r} at id {position} must be {expected} for a {level or unit} vocabulary")

    # -- basic protocol -------------------------------------------------------------

    @property
    def size(self) -> int:
        """Number of symbols, the unknown symbol included."""
        return len(self.itos)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, symbol: Any) -> bool:
        return symbol in self.stoi

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocab):
            return NotImplemented
        return (self.unit, self.level, self.unk, self.itos) == (other.unit, other.level, other.unk, other.itos)

    __hash__ = None  # type: ignore[assignment]  # mutable-looking container; compare by value only

    def __repr__(self) -> str:
        level = f", level={self.level!r}" if self.level else ""
        return f"Vocab(size={self.size}, unit={self.unit!r}{level}, unk={self.unk!r})"

    # -- encoding -------------------------------------------------------------------

    def encode(self, data: Union[str, bytes, Iterable[Any]], strict: bool = False) -> np.ndarray:
        """Ids (1-D ``int32``) of a text or a sequence of symbols.

        Character vocabularies take a ``str`` (bytes-level ones also ``bytes``,
        and encode a ``str`` as UTF-8) or a sequence of symbols; word
        vocabularies take a ``str``, split by :func:`tokenize_words`, or a
        sequence of tokens.

        A symbol not in the vocabulary maps to ``unk_id``, unless ``strict`` is
        true or the vocabulary has no unknown symbol: then :class:`ValueError`
        names the first such symbol and its position.
        """
        return self.encode_replacing(data, strict=strict)[0]

    def encode_counted(
        self, data: Union[str, bytes, Iterable[Any]], strict: bool = False
    ) -> Tuple[np.ndarray, Counter]:
        """Like :meth:`encode`, also returning a :class:`collections.Counter` of
        the symbols that were replaced by the unknown id."""
        ids, replaced = self.encode_replacing(data, strict=strict)
        return ids, replaced.counts()

    def encode_replacing(
        self, data: Union[str, bytes, Iterable[Any]], strict: bool = False
    ) -> Tuple[np.ndarray, Replaced]:
        """Like :meth:`encode`, also returning where the unknown id replaced a symbol and which
        (a :class:`Replaced`)."""
        if self.unit == "char" and isinstance(data, (str, bytes, bytearray, memoryview)):
            return self._encode_codes(text_codes(data, cast(str, self.level)), strict)  # a char vocabulary has a level
        if isinstance(data, str):
            seq: List[Any] = tokenize_words(data)
        elif isinstance(data, (bytes, bytearray, memoryview)) and self.unit == "word":
            raise TypeError("a word vocabulary encodes a str or a sequence of tokens, not bytes")
        elif isinstance(data, (bytes, bytearray)) and self.level == "byte":
            seq = list(data)
        else:
            if isinstance(data, np.ndarray) and data.ndim != 1:
                raise ValueError(f"expected a 1-D sequence of symbols, got an array of shape {data.shape}")
            seq = list(data)
        get = self.stoi.get
        ids = np.fromiter((get(s, -1) for s in seq), dtype=np.int32, count=len(seq))
        return self._replacing(ids, ids >= 0, seq.__getitem__, strict)

    def _encode_codes(self, codes: np.ndarray, strict: bool = False) -> Tuple[np.ndarray, Replaced]:
        """:meth:`encode_replacing` of a character vocabulary's code values (``text_codes`` of a text at its
        level), for callers that already hold them."""
        ids, found = self._map_codes(codes)
        symbols_at = (lambda p: chr(int(codes[p]))) if self.level == "codepoint" else (lambda p: int(codes[p]))
        return self._replacing(ids, found, symbols_at, strict)

    def _replacing(
        self, ids: np.ndarray, found: np.ndarray, symbols_at: Callable[[int], Any], strict: bool
    ) -> Tuple[np.ndarray, Replaced]:
        """``ids`` with the unknown id where ``found`` is false, and where and which symbols (``symbols_at``
        of a position) it replaced; ``ValueError`` naming the first when ``strict`` or without an unknown id."""
        if found.all():
            return ids, Replaced.none()
        missing = np.flatnonzero(~found)
        first = int(missing[0])
        if strict or self.unk_id is None:
            reason = (
                "and the vocabulary has no unknown symbol"
                if self.unk_id is None
                else f"(strict=True; with strict=False it would map to the unknown symbol {self.unk!r})"
            )
            raise ValueError(
                f"symbol {describe_symbol(symbols_at(first), self.level)} at position {first} is not in the "
                f"vocabulary {reason}; {len(missing)} unknown symbol(s) in total"
            )
        ids[missing] = self.unk_id
        return ids, Replaced(missing.astype(np.int64), [symbols_at(int(p)) for p in missing])

    def _map_codes(self, codes: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Map code values to ids; returns ``(ids, found)`` where ``ids`` is -1
        where ``found`` is false."""
        if codes.dtype == np.uint8:
            table = np.full(256, -1, dtype=np.int32)
            small = self._codes < 256
            table[self._codes[small]] = self._code_ids[small]
            ids = table[codes]
            return ids, ids >= 0
        if len(self._codes) == 0:
            return np.full(len(codes), -1, dtype=np.int32), np.zeros(len(codes), dtype=bool)
        pos = np.searchsorted(self._codes, codes)
        pos = np.minimum(pos, len(self._codes) - 1)
        found = self._codes[pos] == codes
        ids = np.where(found, self._code_ids[pos], -1).astype(np.int32)
        return ids, found

    # -- decoding -------------------------------------------------------------------

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``: characters joined with ``""`` (byte vocabularies
        decode the bytes as UTF-8, with U+FFFD for invalid sequences and for the
        unknown id), words joined with ``" "``."""
        arr = np.asarray(ids)
        if arr.ndim != 1:
            raise ValueError(f"decode expects a 1-D sequence of ids, got shape {arr.shape}")
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"ids must be integers, got dtype {arr.dtype}")
        bad = np.flatnonzero((arr < 0) | (arr >= self.size)) if arr.size else np.zeros(0, dtype=np.intp)
        if len(bad):
            p = int(bad[0])
            raise ValueError(f"id {int(arr[p])} at position {p} is out of range for a vocabulary of size {self.size}")
        symbols = [self.itos[i] for i in arr.tolist()]
        if self.unit == "word":
            return " ".join(symbols)
        if self.level == "byte":
            raw = b"".join(bytes((s,)) if isinstance(s, int) else s.encode("utf-8") for s in symbols)
            return raw.decode("utf-8", errors="replace")
        return "".join(symbols)

    # -- serialisation --------------------------------------------------------------

    def to_json(self) -> Dict[str, Any]:
        """A JSON-serialisable dict; :meth:`from_json` rebuilds the same vocabulary."""
        return {"unit": self.unit, "level": self.level, "unk": self.unk, "itos": list(self.itos)}

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Vocab":
        """Rebuild a vocabulary from :meth:`to_json` output."""
        if not isinstance(d, dict):
            raise TypeError(f"expected a dict from Vocab.to_json(), got {type(d).__name__}")
        missing = [k for k in ("unit", "itos") if k not in d]
        if missing:
            raise ValueError(f"vocabulary JSON lacks the key(s) {', '.join(missing)}")
        if not isinstance(d["itos"], list):
            raise TypeError(f"vocabulary JSON 'itos' must be a list, got {type(d['itos']).__name__}")
        return cls(d["itos"], unit=d["unit"], unk=d.get("unk"), level=d.get("level"))
