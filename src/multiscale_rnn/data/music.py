"""Symbolic music from folk tunes in ABC notation: the music task of Section 5.1 and Table 2 of
Jernite et al. (2017), *Variable Computation in Recurrent Neural Networks*, with the Nottingham
Music Database standing in for the paper's Irish tunes.

Each tune's melody becomes a sequence of symbols (strings), one per event:

- a note ``"<pitch>:<length>"``, e.g. ``"F#5:1/2"``: pitch spelled with sharps and the octave
  of scientific notation (ABC ``C`` = ``"C4"``, middle C, MIDI 60; ``c`` = ``"C5"``), length in
  quarter notes as a reduced fraction (``"1/4"`` a sixteenth, ``"1/3"`` a triplet eighth,
  ``"1/2"`` an eighth, ``"3/4"`` a dotted eighth, ``"1"``, ``"3/2"``, ``"2"``: the lengths of the
  paper's Table 2);
- a rest ``"z:<length>"``;
- a bar line ``"|"`` (every kind: ``|``, ``||``, ``|:``, ``:|``, ``::``, ``|]``, ``[|``; a repeat
  ending ``[1`` / ``|2`` counts as part of a bar line; consecutive bar lines with no event between
  count once, and a bar line before the first event of a tune is dropped);
- the tune separator ``"<eot>"`` (end of tune) after each tune.

What the parser honours: ``K:`` key signatures (major, minor and the church modes, ``HP``/``none``
as no accidentals; in the header, on body lines and inline ``[K:...]``); accidentals ``^ ^^ _ __ =``,
which hold for the same written note until the bar line as in ABC 2.1; octave marks ``'`` and
``,``; lengths (``2``, ``/``, ``//``, ``3/2``, ...) against the unit ``L:`` (default 1/8, or 1/16
for meters below 3/4, per ABC 2.1; ``L:`` may also change in the body); broken rhythm ``>`` / ``<``
(and ``>>`` / ``<<``); tuplets ``(p``, ``(p:q``, ``(p:q:r`` (a triplet of eighths gives three
``1/3`` notes).

What it drops: chord symbols in quotes (``"G"``), grace notes ``{...}``, decorations (``~ . H..Y
u v`` and ``!...!`` / ``+...+``), slurs ``( )``, ties ``-`` (tied notes stay separate events),
line continuations, part labels and every other header field (``T: S: R: N: P: Y: Q:``,
comments). Repeats are **not** expanded: the melody is read as written. A chord ``[ceg]`` keeps
its **highest** note (the melody), with the length of its first note times any length after
``]``; a chord left unclosed (a few in the Nottingham files) ends at its last note. ``x`` (invisible rest) is a
rest; ``Z`` (multi-bar rest) gives a rest of the bar's length
times its count. Anything else raises :class:`ValueError` naming the tune and the text.

Tunes are kept whole within one split (80 / 10 / 10 % of the tunes by default, seeded shuffle).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union, cast

import numpy as np

from .corpus import Corpus, split_points
from .vocab import UNK_WORD, Vocab

__all__ = [
    "Tune",
    "MusicSymbol",
    "parse_abc",
    "parse_tune",
    "read_abc_tunes",
    "music_corpus",
    "symbol_info",
    "symbol_classes",
    "BAR",
    "END_OF_TUNE",
    "MUSIC_KINDS",
]

#: The bar-line symbol.
BAR = "|"
#: The tune separator, appended to each tune.
END_OF_TUNE = "<eot>"
#: The kinds of symbols (``symbol_info(s).kind``).
MUSIC_KINDS = ("note", "rest", "bar", "end", "unknown")

_NAMES = ("C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B")
_STEP = {"C": 0, "D": 2, "E": 4, "F": 5, "G": 7, "A": 9, "B": 11}
_SHARP_ORDER = "FCGDAEB"
# Sharps (> 0) or flats (< 0) of each major key; modes shift by their distance from Ionian.
_MAJOR = {
    "C": 0,
    "G": 1,
    "D": 2,
    "A": 3,
    "E": 4,
    "B": 5,
    "F#": 6,
    "C#": 7,
    "F": -1,
    "Bb": -2,
    "Eb": -3,
    "Ab": -4,
    "Db": -5,
    "Gb": -6,
    "Cb": -7,
}
_MODE_SHIFT = {"maj": 0, "ion": 0, "min": -3, "m": -3, "aeo": -3, "dor": -2, "phr": -4, "lyd": 1, "mix": -1, "loc": -5}
_ACCIDENTAL = {"^^": 2, "^": 1, "=": 0, "_": -1, "__": -2}
_DECORATION_LETTERS = set("HIJKLMNOPQRSTUVWYuvy~.")

_NOTE = re.compile(r"(\^\^|\^|__|_|=)?([A-Ga-g])([',]*)(\d*)((?:/+\d*)*)")
_REST = re.compile(r"([zxZ])(\d*)((?:/+\d*)*)")
_CHORD = re.compile(r"(?:[\^_=]*[A-Ga-g][',]*\d*(?:/+\d*)*|[+\- ])*")  # the inside of [ceg]
_FIELD = re.compile(r"^([A-Za-z]):(?![|:])(.*)$")  # "e:|" is music (a note and a repeat sign)


@dataclass(frozen=True)
class MusicSymbol:
    """What a symbol stands for: ``kind`` (one of :data:`MUSIC_KINDS`), ``midi`` (notes) and
    ``length`` in quarter notes (notes and rests; ``None`` otherwise)."""

    kind: str
    midi: Optional[int] = None
    length: Optional[Fraction] = None


@dataclass
class Tune:
    """One parsed tune: its ``X:`` number, title, source file and symbols (ending with
    :data:`END_OF_TUNE`)."""

    number: str
    title: str
    source: str
    symbols: List[str]


def _fmt_length(q: Fraction) -> str:
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


def _pitch_name(midi: int) -> str:
    return f"{_NAMES[midi % 12]}{midi // 12 - 1}"


def symbol_info(symbol: Any) -> MusicSymbol:
    """Decode one music symbol (see the module docstring); anything else is ``kind="unknown"``."""
    if symbol == BAR:
        return MusicSymbol("bar")
    if symbol == END_OF_TUNE:
        return MusicSymbol("end")
    if isinstance(symbol, str) and ":" in symbol:
        head, length = symbol.split(":", 1)
        try:
            q = Fraction(length)
        except (ValueError, ZeroDivisionError):
            return MusicSymbol("unknown")
        if head == "z":
            return MusicSymbol("rest", None, q)
        m = re.fullmatch(r"([A-G]#?)(-?\d+)", head)
        if m:
            return MusicSymbol("note", _NAMES.index(m.group(1)) + 12 * (int(m.group(2)) + 1), q)
    return MusicSymbol("unknown")


def symbol_classes(symbols: Iterable[Any], by: str = "length") -> List[str]:
    """A class label per symbol, for averaging a quantity per class (Table 2).

    ``by="length"``: a note's length in quarter notes (``"1/4"``, ``"1/3"``, ``"1/2"``, ``"1"``,
    ...), ``"rest"``, ``"bar"``, ``"end"`` (tune separator) or ``"unknown"``.
    ``by="kind"``: ``"note"``, ``"rest"``, ``"bar"``, ``"end"`` or ``"unknown"``.
    """
    if by not in ("length", "kind"):
        raise ValueError(f"by must be 'length' or 'kind', got {by!r}")
    out = []
    for s in symbols:
        info = symbol_info(s)
        out.append(_fmt_length(cast(Fraction, info.length)) if by == "length" and info.kind == "note" else info.kind)
    return out


def _key_accidentals(value: str, where: str) -> Dict[str, int]:
    """The key signature of a ``K:`` value: letter -> +1 (sharp) / -1 (flat)."""
    v = value.strip().split("%")[0].strip()
    if v == "" or v.lower() in ("none", "hp") or v.startswith("clef"):
        return {}
    m = re.match(r"^([A-G])([#b]?)\s*([A-Za-z]*)", v)
    if not m:
        raise ValueError(f"{where}: cannot read key {value!r}")
    tonic, mode = m.group(1) + m.group(2), m.group(3).lower()
    mode = "maj" if mode == "" else ("m" if mode == "m" else mode[:3])
    if mode not in _MODE_SHIFT or tonic not in _MAJOR:
        raise ValueError(f"{where}: unsupported key {value!r}")
    n = _MAJOR[tonic] + _MODE_SHIFT[mode]
    if not -7 <= n <= 7:
        raise ValueError(f"{where}: key {value!r} needs {abs(n)} accidentals")
    if n >= 0:
        return {c: 1 for c in _SHARP_ORDER[:n]}
    return {c: -1 for c in _SHARP_ORDER[::-1][:-n]}


def _fraction(value: str, where: str) -> Fraction:
    v = value.strip().split("%")[0].strip()
    if v == "C":
        return Fraction(1)
    if v == "C|":
        return Fraction(1)
    try:
        return Fraction(v)
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"{where}: cannot read {value!r} as a fraction") from None


def _multiplier(digits: str, slashes: str) -> Fraction:
    """The length multiplier written after a note: ``3``, ``/``, ``//``, ``3/2``, ``/4``."""
    num = int(digits) if digits else 1
    q = Fraction(num)
    for part in re.findall(r"/+\d*", slashes):
        n_slash = len(part) - len(part.lstrip("/"))
        rest = part[n_slash:]
        q /= (int(rest) if rest else 2) if n_slash == 1 else 2**n_slash
    return q


class _Parser:
    def __init__(self, header: Dict[str, str], where: str):
        self.where = where
        meter = header.get("M", "4/4")
        self.meter = _fraction(meter, where) if meter.strip().lower() not in ("none", "") else Fraction(1)
        self.unit = (
            _fraction(header["L"], where)
            if "L" in header
            else (Fraction(1, 16) if self.meter < Fraction(3, 4) else Fraction(1, 8))
        )
        self.key = _key_accidentals(header.get("K", ""), where)
        self.bar_acc: Dict[Tuple[str, int], int] = {}
        self.out: List[str] = []
        self.tuplet: List[Fraction] = []  # pending tuplet factors, one per note still to come
        self.broken: Optional[Fraction] = None  # factor for the next note after > or <

    def field(self, letter: str, value: str) -> None:
        if letter == "K":
            self.key = _key_accidentals(value, self.where)
            self.bar_acc = {}
        elif letter == "L":
            self.unit = _fraction(value, self.where)
        elif letter == "M":
            v = value.strip()
            self.meter = _fraction(v, self.where) if v.lower() not in ("none", "") else self.meter

    def bar(self) -> None:
        self.bar_acc = {}
        if self.out and self.out[-1] != BAR:
            self.out.append(BAR)

    def _length(self, mult: Fraction) -> Fraction:
        q = mult * self.unit * 4
        if self.broken is not None:
            q *= self.broken
            self.broken = None
        if self.tuplet:
            q *= self.tuplet.pop(0)
        return q

    def _midi(self, acc: Optional[str], letter: str, octave: str) -> int:
        base = 60 + _STEP[letter.upper()] + (12 if letter.islower() else 0)
        base += 12 * octave.count("'") - 12 * octave.count(",")
        key = (letter.upper(), base)
        if acc is not None:
            self.bar_acc[key] = _ACCIDENTAL[acc]
        shift = self.bar_acc.get(key, self.key.get(letter.upper(), 0))
        return base + shift

    def emit(self, symbol: str) -> int:
        self.out.append(symbol)
        return len(self.out) - 1

    def apply_broken(self, op: str) -> None:
        """``>`` lengthens the previous event by 1/2 (``>>`` 3/4) and shortens the next one."""
        k = Fraction(1, 2 ** len(op))
        first, second = (1 + (1 - k), k) if op[0] == ">" else (k, 1 + (1 - k))
        i = len(self.out) - 1
        while i >= 0 and symbol_info(self.out[i]).kind not in ("note", "rest"):
            i -= 1
        if i < 0:
            raise ValueError(f"{self.where}: broken rhythm {op!r} with no note before it")
        head, length = self.out[i].split(":")
        self.out[i] = f"{head}:{_fmt_length(Fraction(length) * first)}"
        self.broken = second

    def parse_line(self, line: str) -> None:
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if c in " \t\\-)`":
                i += 1
            elif c == "%":
                return
            elif c == '"':
                j = line.find('"', i + 1)
                if j < 0:
                    raise ValueError(f"{self.where}: unclosed chord symbol in {line!r}")
                i = j + 1
            elif c in "!+" and line.find(c, i + 1) > i:
                j = line.find(c, i + 1)
                if c == "+" and j - i > 20:
                    raise ValueError(f"{self.where}: unclosed decoration in {line!r}")
                i = j + 1
            elif c == "+":
                i += 1
            elif c == "{":
                j = line.find("}", i + 1)
                if j < 0:
                    raise ValueError(f"{self.where}: unclosed grace notes in {line!r}")
                i = j + 1
            elif c in _DECORATION_LETTERS:
                i += 1
            elif c == "(":
                i = self._tuplet(line, i)
            elif c in "<>":
                m = re.match(r"[<>]{1,3}", line[i:])
                assert m is not None  # c is one of them
                self.apply_broken(m.group(0))
                i += m.end()
            elif c in "|:" or (c == "[" and i + 1 < n and line[i + 1] in "|123456789"):
                i = self._bar_line(line, i)
            elif c == "[" and i + 2 < n and line[i + 1].isalpha() and line[i + 2] == ":":
                j = line.find("]", i)
                if j < 0:
                    raise ValueError(f"{self.where}: unclosed inline field in {line!r}")
                self.field(line[i + 1], line[i + 3 : j])
                i = j + 1
            elif c == "[":
                i = self._chord(line, i)
            elif c in "zxZ":
                i = self._rest(line, i)
            else:
                i = self._note(line, i)

    # The music of a line, one item at line[i] each: it is read (a symbol emitted, the state changed) and the
    # position after it returned.

    def _tuplet(self, line: str, i: int) -> int:
        """A tuplet (p:q:r), p notes in the time of q for the next r notes (q by ABC's default for the meter when
        not given, r = p), or else a slur."""
        m = re.match(r"\((\d)(?::(\d?)(?::(\d?))?)?", line[i:])
        if not m:
            return i + 1  # a slur
        p = int(m.group(1))
        tq = (  # ABC's (p:q:r): p notes in the time of q, for the next r notes
            int(m.group(2))
            if m.group(2)
            else (
                3
                if p in (2, 4, 8)
                else 2
                if p in (3, 6)
                else (3 if self.meter.numerator % 3 == 0 and self.meter.numerator > 3 else 2)
            )
        )
        r = int(m.group(3)) if m.group(3) else p
        self.tuplet = [Fraction(tq, p)] * r
        return i + m.end()

    def _bar_line(self, line: str, i: int) -> int:
        """A bar line, with its repeat signs and ending numbers."""
        m = re.match(r"(?:\[?[|:\]]+)?\s*(?:\[?\d+(?:[-,]\d+)*)?", line[i:])
        if not m or m.end() == 0:
            raise ValueError(f"{self.where}: cannot read bar line at {line[i : i + 10]!r}")
        self.bar()
        return i + m.end()

    def _chord(self, line: str, i: int) -> int:
        """A chord [ceg], read as its highest note, of the first note's length times the length after "]"."""
        n = len(line)
        body = _CHORD.match(line, i + 1)
        assert body is not None  # the pattern matches the empty string too
        j = body.end()
        notes = [
            (m.group(1), m.group(2), m.group(3), _multiplier(m.group(4), m.group(5)))
            for m in _NOTE.finditer(body.group(0))
        ]
        if not notes:
            raise ValueError(f"{self.where}: chord with no note at {line[i : i + 10]!r}")
        closed = j < n and line[j] == "]"  # an unclosed chord ends at its last note
        after = re.match(r"(\d*)((?:/+\d*)*)", line[j + 1 :]) if closed else None
        midis = [self._midi(a, l, o) for a, l, o, _ in notes]
        q = self._length(notes[0][3] * (_multiplier(after.group(1), after.group(2)) if after else 1))
        self.emit(f"{_pitch_name(max(midis))}:{_fmt_length(q)}")
        return j + 1 + after.end() if after else j

    def _rest(self, line: str, i: int) -> int:
        """A rest: z or x of a length, or Z, whole bars of rest."""
        c = line[i]
        m = _REST.match(line, i)
        assert m is not None  # c starts a rest
        if c == "Z":
            count = int(m.group(2)) if m.group(2) else 1
            q = self.meter * 4 * count
        else:
            q = self._length(_multiplier(m.group(2), m.group(3)))
        self.emit(f"z:{_fmt_length(q)}")
        return m.end()

    def _note(self, line: str, i: int) -> int:
        """A note: accidental, letter, octave marks and length; anything else is refused."""
        m = _NOTE.match(line, i)
        if not m:
            raise ValueError(f"{self.where}: unexpected {line[i]!r} in {line.strip()!r}")
        midi = self._midi(m.group(1), m.group(2), m.group(3))
        q = self._length(_multiplier(m.group(4), m.group(5)))
        self.emit(f"{_pitch_name(midi)}:{_fmt_length(q)}")
        return m.end()


def parse_tune(lines: Sequence[str], where: str = "tune", source: str = "") -> Tune:
    """Parse one tune (its lines, from ``X:`` to before the next ``X:``); ``where`` names it in
    error messages, ``source`` is the file it came from."""
    header: Dict[str, str] = {}
    parser: Optional[_Parser] = None
    for raw in lines:
        line = raw.rstrip("\n\r")
        if not line.strip() or line.lstrip().startswith("%"):
            continue
        m = _FIELD.match(line)
        if m:
            letter, value = m.group(1), m.group(2)
            if parser is None:
                header.setdefault(letter, value.strip())
                if letter == "K":
                    parser = _Parser(header, f"{where} ({header.get('T', '?')})")
            else:
                parser.field(letter, value)
            continue
        if parser is None:
            raise ValueError(f"{where}: music before the K: field (the header ends with K:): {line!r}")
        parser.parse_line(line)
    if parser is None:
        raise ValueError(f"{where}: no K: field, so no tune body")
    symbols = parser.out
    if not any(symbol_info(s).kind == "note" for s in symbols):
        raise ValueError(f"{where}: the tune has no notes")
    return Tune(header.get("X", "?"), header.get("T", ""), source, symbols + [END_OF_TUNE])


def parse_abc(text: str, source: str = "abc") -> List[Tune]:
    """Every tune of an ABC text (tunes start with an ``X:`` line; text before the first is
    ignored as the file header)."""
    if not isinstance(text, str):
        raise TypeError(f"ABC text must be a str, got {type(text).__name__}")
    tunes, current = [], None
    for line in text.splitlines():
        if re.match(r"^X:", line):
            if current:
                tunes.append(current)
            current = [line]
        elif current is not None:
            current.append(line)
    if current:
        tunes.append(current)
    out = []
    for lines in tunes:
        number = lines[0][2:].strip()
        out.append(parse_tune(lines, f"{source} X:{number}", source))
    return out


def read_abc_tunes(path: Union[str, Path]) -> List[Tune]:
    """The tunes of an ``.abc`` file, or of every ``.abc`` file in a folder (sorted by name). A
    folder holding ``ABC_cleaned`` (the Nottingham layout) is read from that sub-folder."""
    p = Path(path).expanduser()
    if not p.exists():
        raise FileNotFoundError(f"nottingham: path {p} does not exist")
    if p.is_dir():
        if (p / "ABC_cleaned").is_dir():
            p = p / "ABC_cleaned"
        files = sorted(f for f in p.iterdir() if f.suffix.lower() == ".abc" and f.is_file())
        if not files:
            raise FileNotFoundError(f"nottingham: folder {p} holds no .abc file")
    else:
        files = [p]
    tunes: List[Tune] = []
    for f in files:
        tunes.extend(parse_abc(f.read_bytes().decode("latin-1"), str(f)))  # messages name the path given
    if not tunes:
        raise ValueError(f"nottingham: no tune (X: line) in {path}")
    return tunes


def music_corpus(
    tunes: Sequence[Tune],
    valid_fraction: float = 0.1,
    test_fraction: float = 0.1,
    seed: int = 0,
    name: str = "music",
) -> Corpus:
    """A word-level :class:`Corpus` of music symbols: the tunes shuffled with ``seed`` and cut
    into train / valid / test by tune (each tune whole in one split), each split the
    concatenation of its tunes' symbols (each ending with :data:`END_OF_TUNE`).

    The vocabulary is the training symbols, sorted; a valid/test symbol unseen in training maps
    to ``"<unk>"`` (added only when needed). ``corpus.tunes[split]`` lists the split's tunes in
    order, ``corpus.boundaries[split]["bar"]`` / ``["tune"]`` mark bar lines and tune ends."""
    tunes = list(tunes)
    if not tunes:
        raise ValueError("music_corpus needs at least one tune")
    a, b = split_points(len(tunes), valid_fraction, test_fraction)
    order = np.random.default_rng(seed).permutation(len(tunes))
    parts = {"train": order[:a], "valid": order[a:b], "test": order[b:]}
    by_split = {s: [tunes[i] for i in idx] for s, idx in parts.items() if len(idx)}
    symbols = {s: [x for t in ts for x in t.symbols] for s, ts in by_split.items()}
    known = set(symbols["train"])
    needs_unk = any(x not in known for s, xs in symbols.items() if s != "train" for x in xs)
    vocab = Vocab(sorted(known), unit="word", unk=UNK_WORD if needs_unk else None)
    ids, replaced, bounds = {}, {}, {}
    for s, xs in symbols.items():
        ids[s], replaced[s] = vocab.encode_replacing(xs)
        arr = np.array(xs, dtype=object)
        bounds[s] = {"bar": arr == BAR, "tune": arr == END_OF_TUNE}
    corpus = Corpus(
        ids["train"], ids.get("valid"), ids.get("test"), vocab, name, "word", boundaries=bounds, replaced=replaced
    )
    setattr(corpus, "tunes", by_split)
    setattr(corpus, "token_unit", "symbol")  # figures are per music symbol (bits/symbol), not per word
    return corpus
