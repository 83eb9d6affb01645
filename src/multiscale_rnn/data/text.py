"""Your own text as a corpus: one plain-text file, or a folder of ``train.txt`` / ``valid.txt`` /
``test.txt``.

The split rule: a single file is cut into contiguous parts, the first 90 % for training, the next
5 % for validation and the last 5 % for testing (``valid_fraction`` / ``test_fraction`` change the
shares; a share of 0 leaves the split out). A folder gives its files as they are: ``train.txt`` is
required, ``valid.txt`` and ``test.txt`` are used when present. The corpus is named after the file
(without its suffix) or the folder.

Text must be UTF-8 (a file that is not is refused naming the file, the split and the byte offset
of the first bad byte) unless ``level="byte"``, which reads the bytes as they are, one symbol per
byte value. ``unit="word"`` splits on whitespace with ``<eos>`` at each newline
(:func:`multiscale_rnn.data.tokenize_words`); text with no word in it is refused.
"""

import codecs
from pathlib import Path
from typing import Any, Dict, Optional, Union, cast

from .._checks import is_number
from .corpus import Corpus, char_corpus, refuse_blank, split_points, word_corpus

__all__ = ["text_corpus", "decode_utf8", "TEXT_SPLIT_FILES"]

#: The files of a corpus folder, by split.
TEXT_SPLIT_FILES = {"train": "train.txt", "valid": "valid.txt", "test": "test.txt"}


def decode_utf8(
    raw: bytes,
    source: Union[str, Path],
    split: Optional[str] = None,
    advice: Optional[str] = "pass level='byte' (--data-option level=byte) to read it as bytes",
) -> str:
    """``raw`` decoded as UTF-8, without the byte-order mark some editors put first (it is not part of the text), or
    ``ValueError`` naming ``source``, ``split`` and the byte offset of the first byte that is not UTF-8, then
    ``advice`` (None: only how to convert the file to UTF-8)."""
    bom = len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0
    try:
        return raw[bom:].decode("utf-8")
    except UnicodeDecodeError as e:
        where = f" ({split} split)" if split else ""
        start = e.start + bom  # in the file
        bad = raw[start : start + 4].hex(" ")
        if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):  # a UTF-16 byte-order mark (UTF-32's little-endian one too)
            utf16 = "it starts with a UTF-16 byte-order mark: convert it to UTF-8 (iconv -f UTF-16 -t UTF-8)"
            advice = utf16 if advice is None else f"{utf16}, or {advice}"
        elif advice is None:
            advice = "convert it to UTF-8 (iconv -f ITS-ENCODING -t UTF-8)"
        raise ValueError(
            f"{source}{where} is not valid UTF-8: byte offset {start:,} (bytes {bad}): {e.reason}; {advice}"
        ) from None


def _read_file(path: Path, split: str) -> bytes:
    if path.is_dir():
        raise IsADirectoryError(f"{path} ({split} split) is a folder, not a text file")
    with open(path, "rb") as f:
        return f.read()


def text_corpus(
    path: Union[str, Path],
    unit: str = "char",
    level: str = "codepoint",
    valid_fraction: float = 0.05,
    test_fraction: float = 0.05,
    name: Optional[str] = None,
) -> Corpus:
    """A corpus from a plain-text file or a folder of ``train.txt`` / ``valid.txt`` / ``test.txt``
    (see the module docstring for the split rule)."""
    if unit not in ("char", "word"):
        raise ValueError(f"unit must be 'char' or 'word', got {unit!r}")
    if level not in ("codepoint", "byte"):
        raise ValueError(f"level must be 'codepoint' or 'byte', got {level!r}")
    if unit == "word" and level == "byte":
        raise ValueError("level='byte' is for character corpora (unit='char')")
    for what, f in (("valid_fraction", valid_fraction), ("test_fraction", test_fraction)):
        if not is_number(f):
            raise TypeError(f"{what} must be a number in [0, 1), got {f!r}")
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"text corpus not found: {path}")
    raw: Dict[str, Optional[bytes]]
    if path.is_dir():
        files = {s: path / n for s, n in TEXT_SPLIT_FILES.items()}
        if not files["train"].is_file():
            found = sorted(p.name for p in path.glob("*.txt"))
            joined = (
                f"; to train on its {len(found)} .txt files ({', '.join(found[:3])}{', ...' if len(found) > 3 else ''})"
                f" as one text, join them into one file (cat {path}/*.txt > all.txt) and give that file"
                if found
                else ""
            )
            raise FileNotFoundError(
                f"{path} is a folder without {TEXT_SPLIT_FILES['train']}: a text corpus folder "
                f"holds {', '.join(TEXT_SPLIT_FILES.values())} (valid and test optional){joined}"
            )
        raw = {s: (_read_file(p, s) if p.exists() else None) for s, p in files.items()}
        sources = files
        label = name or path.resolve().name
    else:
        whole = _read_file(path, "whole")
        raw, sources = {"train": whole, "valid": None, "test": None}, {s: path for s in TEXT_SPLIT_FILES}
        label = name or path.stem
    if raw["train"] is not None and len(raw["train"]) == 0:
        raise ValueError(f"{sources['train']} is empty")
    texts: Dict[str, Any]  # the splits as str (bytes at level 'byte'), None where absent
    if level == "byte":
        texts = cast(Dict[str, Any], raw)
    else:
        texts = {
            s: (None if r is None else decode_utf8(r, sources[s], s if path.is_dir() else None)) for s, r in raw.items()
        }
    if not path.is_dir():
        full = texts["train"]
        refuse_blank(full, str(path))
        a, b = split_points(len(full), valid_fraction, test_fraction)
        texts = {"train": full[:a], "valid": full[a:b] or None, "test": full[b:] or None}
        unit_name = "characters" if isinstance(full, str) else "bytes"
        where = {
            s: f"{path}: its {s} split ({unit_name} {i:,} to {j:,})"
            for s, i, j in (("train", 0, a), ("valid", a, b), ("test", b, len(full)))
        }
    else:
        where = {s: f"{p} ({s} split)" for s, p in sources.items()}
    for s, t in texts.items():
        if t is not None and len(t) == 0:
            texts[s] = None if s != "train" else t
        elif t is not None:
            refuse_blank(t, where[s])
    if unit == "word":
        return word_corpus(texts["train"], texts["valid"], texts["test"], name=label)
    return char_corpus(texts["train"], texts["valid"], texts["test"], name=label, level=level)
