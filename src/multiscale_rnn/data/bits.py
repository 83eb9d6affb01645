"""Bit-level text: the task of Section 5.2 and Figure 2 of Jernite et al. (2017), *Variable
Computation in Recurrent Neural Networks*.

Each character becomes its 8 ASCII bits, **most significant bit first** (``"a"`` = 0x61 gives
``0 1 1 0 0 0 0 1``), optionally followed by ``buffer_bits`` zero bits (the paper's "8 or 24 0
bits between each character"). Every character therefore occupies one *frame* of
``8 + buffer_bits`` steps, the buffer closing the frame (also after the last character), so step
``n`` of a split is bit ``n % frame`` of character ``n // frame``:

- ``position`` 0..7: the character's bits, 0 the most significant (always 0 for ASCII);
- ``position`` 8..frame-1: buffer bits (always 0).

The vocabulary is ``"0"``, ``"1"`` (ids 0 and 1, so an id is the bit itself); it has no unknown
symbol. Only ASCII text (code points 0..127) is accepted: any other character raises
:class:`ValueError` naming it and its position (map or drop such characters before, e.g.
``text.encode("ascii", "replace").decode()``; ``bytes`` input is taken byte by byte, so a UTF-8
byte string gives the bits of its bytes, values up to 255).

>>> from multiscale_rnn import data
>>> bits = data.bit_corpus("ab", buffer_bits=8)
>>> bits.train.tolist()[:16]
[0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]
>>> bits.positions["train"].tolist()[:10]
[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Union

import numpy as np

from .._checks import is_int
from .corpus import SPLITS, Corpus, refuse_blank
from .vocab import Vocab

__all__ = ["BitCorpus", "bit_corpus", "text_bits", "bit_positions", "BUFFER_CHOICES", "BITS_PER_CHAR"]

#: Bits of one character.
BITS_PER_CHAR = 8
#: The buffer sizes of the paper's Figure 2 (any non-negative integer is accepted).
BUFFER_CHOICES = (0, 8, 24)

_BIT_VOCAB = ("0", "1")
_WEIGHTS = (1 << np.arange(BITS_PER_CHAR - 1, -1, -1)).astype(np.uint8)  # MSB first


def _buffer(buffer_bits: Any) -> int:
    if not is_int(buffer_bits) or buffer_bits < 0:
        raise ValueError(f"buffer_bits must be a non-negative integer (the paper uses 0, 8 or 24), got {buffer_bits!r}")
    return int(buffer_bits)


def _codes(text: Union[str, bytes, bytearray], what: str) -> np.ndarray:
    """The byte values of ``text`` (``uint8``); a ``str`` must be ASCII."""
    if isinstance(text, (bytes, bytearray)):
        return np.frombuffer(bytes(text), dtype=np.uint8)
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a str or bytes, got {type(text).__name__}")
    if not text.isascii():
        p = next(i for i, ch in enumerate(text) if ord(ch) > 127)
        raise ValueError(
            f"{what}: character {text[p]!r} (U+{ord(text[p]):04X}) at position {p} is not ASCII; bit-level "
            "text holds 8-bit ASCII codes only (map or drop such characters first, or pass bytes)"
        )
    return np.frombuffer(text.encode("ascii"), dtype=np.uint8)


def bit_positions(n_steps: int, buffer_bits: int = 0, offset: int = 0) -> np.ndarray:
    """Position of each of ``n_steps`` steps within its character frame (``int16``): 0..7 for
    the character's bits (0 the most significant), 8..7+buffer_bits for the buffer. ``offset``
    is the frame position of the first step (0 when the steps start at a character)."""
    frame = BITS_PER_CHAR + _buffer(buffer_bits)
    if int(n_steps) < 0:
        raise ValueError(f"n_steps must be >= 0, got {n_steps}")
    return ((np.arange(int(n_steps)) + int(offset)) % frame).astype(np.int16)


def text_bits(text: Union[str, bytes, bytearray], buffer_bits: int = 0, what: str = "text") -> np.ndarray:
    """The bits of ``text`` (``uint8`` 0/1), 8 per character, most significant first, each
    character followed by ``buffer_bits`` zeros. Length ``len(text) * (8 + buffer_bits)``."""
    buf = _buffer(buffer_bits)
    codes = _codes(text, what)
    bits = np.zeros((codes.size, BITS_PER_CHAR + buf), dtype=np.uint8)
    bits[:, :BITS_PER_CHAR] = (codes[:, None] & _WEIGHTS[None, :]) != 0
    return bits.reshape(-1)


class BitCorpus(Corpus):
    """A bit-level :class:`Corpus` (vocabulary ``"0"``, ``"1"``) that also holds, per split,
    ``positions[split]``: each step's position within its character frame (see
    :func:`bit_positions`). ``buffer_bits`` and ``frame`` (``8 + buffer_bits``) describe the
    layout; ``boundaries[split]["char"]`` is ``True`` at the last step of every frame. Figures are
    per bit (``token_unit = "bit"``)."""

    token_unit = "bit"

    def __init__(self, splits: Dict[str, np.ndarray], buffer_bits: int, name: str):
        vocab = Vocab(_BIT_VOCAB, unit="char", level="codepoint")
        self.buffer_bits = _buffer(buffer_bits)
        self.frame = BITS_PER_CHAR + self.buffer_bits
        positions = {s: bit_positions(len(a), self.buffer_bits) for s, a in splits.items()}
        boundaries = {s: p == self.frame - 1 for s, p in positions.items()}
        super().__init__(
            splits["train"],
            splits.get("valid"),
            splits.get("test"),
            vocab,
            name,
            "char",
            boundaries={s: {"char": b} for s, b in boundaries.items()},
        )
        self.positions: Dict[str, np.ndarray] = positions

    def is_buffer(self, split: str = "train") -> np.ndarray:
        """``True`` at the buffer steps of ``split``."""
        if split not in self.positions:
            raise ValueError(f"{self.name} has no {split!r} split; it has {', '.join(self.positions)}")
        return self.positions[split] >= BITS_PER_CHAR

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f", buffer_bits={self.buffer_bits})"


def bit_corpus(
    train: Union[str, bytes, Corpus],
    valid: Union[str, bytes, None] = None,
    test: Union[str, bytes, None] = None,
    buffer_bits: int = 0,
    name: Optional[str] = None,
) -> BitCorpus:
    """A :class:`BitCorpus` from texts (``train``, ``valid``, ``test``; ASCII ``str`` or
    ``bytes``) or from a character :class:`Corpus` passed as ``train`` (its splits are decoded
    and kept; ``valid`` / ``test`` must then be omitted). ``name`` defaults to the corpus name +
    ``"-bits"`` (or ``"bits"``)."""
    texts: Dict[str, Any]  # split -> text (str or bytes), train always present
    if isinstance(train, Corpus):
        if valid is not None or test is not None:
            raise ValueError("pass either a Corpus (its splits are used) or texts, not both")
        if train.unit != "char":
            raise ValueError(f"bit-level text needs a character corpus, got unit={train.unit!r} ({train.name})")
        src = train
        decode = (
            (lambda ids: bytes(src.vocab.itos[i] for i in ids.tolist())) if src.level == "byte" else src.vocab.decode
        )
        texts = {s: decode(a) for s, a in src.splits.items()}
        name = f"{src.name}-bits" if name is None else name
    else:
        texts = {s: t for s, t in zip(SPLITS, (train, valid, test)) if t is not None or s == "train"}
        name = "bits" if name is None else name
    splits = {}
    for s, t in texts.items():
        if t is None or len(t) == 0:
            raise ValueError(f"{name} {s} text is empty")
        refuse_blank(t, f"{name} {s} text")
        splits[s] = text_bits(t, buffer_bits, what=f"{name} {s} text")
    return BitCorpus(splits, buffer_bits, name)
