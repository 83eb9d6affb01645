"""Named corpora: ``load(name)``.

=============  ======================================================================
name           corpus
=============  ======================================================================
ptb-char       Penn Treebank, characters: 50 symbols (49 + end of line), Mikolov's split
ptb-word       Penn Treebank, words: 10,000 words with ``<eos>``, Mikolov's split
text8          text8: 27 symbols, 90M / 5M / 5M characters
text8-word     text8, words: the same split (cut at spaces), words seen < 10 times in training -> ``<unk>``,
               ids in descending training frequency (about 44k words on the full text8)
enwik8         enwik8: UTF-8 bytes, 90M / 5M / 5M bytes
shakespeare    Tiny Shakespeare: code points, 90 % / 5 % / 5 % contiguous split
embedded       the text shipped with the package (public domain), 90 % / 5 % / 5 %
synthetic      the hierarchical generator (characters, words, phrases) with boundaries
ptb-bits       ptb-char as 8 ASCII bits per character (+ ``buffer_bits`` zero bits), 2 symbols
embedded-bits  embedded as bits, the same way
nottingham     folk tunes in ABC (local ``path`` only): one symbol per (pitch, length), rest,
               bar line, tune end; 80 % / 10 % / 10 % of the tunes, seeded
python-stdlib  the running Python's standard library as source code (or ``path``, a source tree): the
               first 5M characters of its .py files, 90 % / 5 % / 5 % (``data.python_source``)
kanjivg        KanjiVG's ordered kanji strokes (the ``kanjivg`` package, or ``path``, a folder of its SVG
               files) as pen offsets: 10,000 / 600 / 500 drawings split by code point, seeded
               (a :class:`~multiscale_rnn.data.strokes.StrokeCorpus`; ``data.strokes``)
iam-ondb       IAM-OnDB handwriting (``path`` only: your lineStrokes folder or archive) as pen offsets:
               lines of at least 300 points, 10,465 / 581 / 582, seeded (a ``StrokeCorpus``)
text           your own text (``path`` only): a file cut 90 % / 5 % / 5 %, or a folder of
               train.txt / valid.txt / test.txt; named after the file (``data.text``)
=============  ======================================================================
"""

import gzip
import tarfile
import zipfile
from contextlib import closing
from pathlib import Path
from typing import Any, Dict, Literal, Optional, Sequence, Tuple, Union, overload

from .._checks import did_you_mean
from .bits import bit_corpus
from .corpus import Corpus, char_corpus, refuse_blank, split_contiguous, word_corpus
from .download import fetch, open_archive_members
from .music import music_corpus, read_abc_tunes
from .python_source import python_stdlib_corpus
from .strokes import IAM_URL, StrokeCorpus, load_iam, load_kanjivg
from .synthetic import synthetic_hierarchy
from .text import decode_utf8, text_corpus

__all__ = ["load", "LOADERS", "FILES", "BUILT_IN", "STROKES", "embedded_text", "ptb_char_text", "EMBEDDED_SHA256"]

LOADERS = (
    "ptb-char",
    "ptb-word",
    "text8",
    "text8-word",
    "enwik8",
    "shakespeare",
    "embedded",
    "synthetic",
    "ptb-bits",
    "embedded-bits",
    "nottingham",
    "python-stdlib",
    "kanjivg",
    "iam-ondb",
    "text",
)

#: Corpora that ship with the package (or are generated) and read no file: they take no path.
BUILT_IN = ("embedded", "synthetic", "embedded-bits")


def corpus_key(name: str) -> str:
    """The loader name a corpus name stands for: case, surrounding spaces and ``_`` / ``-`` ignored."""
    return name.strip().lower().replace("_", "-")


#: Options accepted by each loader that takes some (the others take none).
_OPTIONS = {
    "ptb-bits": ("buffer_bits",),
    "embedded-bits": ("buffer_bits",),
    "nottingham": ("valid_fraction", "test_fraction", "seed"),
    "text": ("unit", "level", "valid_fraction", "test_fraction", "name"),
    "python-stdlib": ("max_chars",),
    "kanjivg": ("epsilon", "step", "seed", "split"),
    "iam-ondb": ("seed", "min_points", "split"),
}

#: The corpora of pen strokes: ``load`` gives a :class:`StrokeCorpus` for these.
STROKES = ("kanjivg", "iam-ondb")

#: SHA-256 of the shipped text (after decompression).
EMBEDDED_SHA256 = "87b6540b0e4066751c769117775bfde3d77c1f274e02064cb49ec7e9317c3019"
_EMBEDDED_FILE = "devils_dictionary.txt.gz"

#: Source of each downloadable loader (a key of ``download.SOURCES``).
_SOURCE = {
    "ptb-char": "ptb",
    "ptb-word": "ptb",
    "text8": "text8",
    "text8-word": "text8",
    "enwik8": "enwik8",
    "shakespeare": "shakespeare",
}

#: Files each loader reads: one tuple of accepted names per file, the first of
#: which is the name in the cache folder.
FILES: Dict[str, Tuple[Tuple[str, ...], ...]] = {
    "ptb-char": (("ptb.char.train.txt",), ("ptb.char.valid.txt",), ("ptb.char.test.txt",)),
    "ptb-word": (("ptb.train.txt",), ("ptb.valid.txt",), ("ptb.test.txt",)),
    "text8": (("text8", "text8.txt", "text8_prefix.txt"),),
    "text8-word": (("text8", "text8.txt", "text8_prefix.txt"),),
    "enwik8": (("enwik8", "enwik8.txt"),),
    "shakespeare": (("input.txt", "tinyshakespeare.txt", "shakespeare.txt"),),
}

#: Length of the full text8 and enwik8; files of this length get the 90M/5M/5M split.
FULL_LENGTH = 100_000_000


@overload
def load(
    name: Literal["kanjivg", "iam-ondb"],
    path: Union[str, Path, None] = None,
    cache_dir: Union[str, Path, None] = None,
    download: bool = True,
    *,
    url: Optional[str] = None,
    sha256: Optional[str] = None,
    progress: bool = True,
    **options: Any,
) -> StrokeCorpus: ...
@overload
def load(
    name: Optional[str] = None,
    path: Union[str, Path, None] = None,
    cache_dir: Union[str, Path, None] = None,
    download: bool = True,
    *,
    url: Optional[str] = None,
    sha256: Optional[str] = None,
    progress: bool = True,
    **options: Any,
) -> Corpus: ...


def load(
    name: Optional[str] = None,
    path: Union[str, Path, None] = None,
    cache_dir: Union[str, Path, None] = None,
    download: bool = True,
    *,
    url: Optional[str] = None,
    sha256: Optional[str] = None,
    progress: bool = True,
    **options: Any,
) -> Union[Corpus, StrokeCorpus]:
    """Load a named corpus (see :data:`LOADERS`).

    ``path``: read a local copy and use no network: a folder (the layout of the
    download or of ``shared/data/ptb`` etc., files directly inside it or in a
    ``data/`` or ``simple-examples/data/`` sub-folder), the archive
    (``simple-examples.tgz``, ``text8.zip``, ``enwik8.zip``) or, for the
    single-file corpora, the file itself.

    Otherwise the files are taken from the cache folder (``cache_dir``, else
    ``$MULTISCALE_RNN_CACHE``, else ``~/.cache/multiscale_rnn``), downloaded
    there once from the canonical address (``url`` overrides it, ``sha256`` the
    expected checksum) unless ``download=False``.

    ``options`` are accepted by ``"synthetic"`` (the arguments of
    :func:`synthetic_hierarchy` and ``valid_fraction`` / ``test_fraction``), by the bit corpora
    ``"ptb-bits"`` / ``"embedded-bits"`` (``buffer_bits``: zero bits after each character, 0, 8
    or 24 in the paper; see :mod:`multiscale_rnn.data.bits`) and by ``"nottingham"``
    (``valid_fraction``, ``test_fraction``, ``seed`` of the split by tune; see
    :mod:`multiscale_rnn.data.music`). ``"nottingham"`` has no download: give ``path`` (the
    ``nottingham_abc`` folder, which is read from its ``ABC_cleaned`` sub-folder, any folder of
    ``.abc`` files, or one ``.abc`` file).

    Pen strokes: ``"kanjivg"`` (options ``epsilon``, ``step``, ``seed``, ``split``; the installed
    ``kanjivg`` package, or ``path``, a folder of its SVG files) and ``"iam-ondb"`` (options ``seed``,
    ``min_points``, ``split``; ``path`` only, your copy's lineStrokes folder or archive: its licence
    forbids shipping or downloading it here) give a :class:`~multiscale_rnn.data.strokes.StrokeCorpus`
    of pen offsets, not a corpus of symbols (see :mod:`multiscale_rnn.data.strokes`).

    Your own text: ``load(path="my.txt")`` (or ``load("text", path=...)``, or ``load("my.txt")``
    when no corpus has that name) reads a plain-text file or a folder of ``train.txt`` /
    ``valid.txt`` / ``test.txt`` (:func:`multiscale_rnn.data.text_corpus`; options ``unit``
    ("char" or "word"), ``level`` ("codepoint" or "byte"), ``valid_fraction``,
    ``test_fraction``, ``name``).
    """
    key, path = _corpus_key(name, path)
    if key in ("embedded", "synthetic"):
        given = [k for k, v in (("path", path), ("url", url), ("sha256", sha256)) if v is not None]
        if given:
            raise ValueError(f"the {key!r} corpus is built in and takes no {', '.join(given)}")
        if key == "synthetic":
            split = {k: options.pop(k) for k in ("valid_fraction", "test_fraction") if k in options}
            return synthetic_hierarchy(**options).corpus(**split)
    bad = sorted(set(options) - set(_OPTIONS.get(key, ())))
    if bad:
        raise TypeError(f"load({key!r}) got unexpected option(s): {', '.join(bad)}")
    if key in STROKES:
        return _load_strokes(key, path, url, sha256, options)
    if key == "python-stdlib":
        return python_stdlib_corpus(path, url=url, sha256=sha256, **options)
    if key in ("text", "embedded-bits", "ptb-bits", "nottingham", "embedded"):
        return _load_derived(key, path, cache_dir, download, url, sha256, progress, options)
    return _load_files(key, path, cache_dir, download, url, sha256, progress)


def _load_strokes(key: str, path, url, sha256, options) -> StrokeCorpus:
    """A corpus of pen strokes: KanjiVG (the installed package, or a folder of its files) or your copy of
    IAM-OnDB (a path is needed: it is not downloaded)."""
    if url is not None or sha256 is not None:
        raise ValueError(f"load({key!r}) reads local files only and takes no url or sha256")
    if key == "kanjivg":
        return load_kanjivg(path=path, **options)
    if path is None:
        raise ValueError(
            "load('iam-ondb') needs path=: your copy of IAM-OnDB's lineStrokes folder (or its .tar.gz / .zip "
            "archive). Its licence forbids redistribution, so it is not downloaded: register and get "
            f"lineStrokes-all.tar.gz at {IAM_URL}"
        )
    return load_iam(path, **options)


def _corpus_key(name: Optional[str], path: Union[str, Path, None]) -> Tuple[str, Union[str, Path, None]]:
    """``load``'s corpus: the key of ``name`` in :data:`LOADERS` and the path to read, "text" for a path
    alone or a path given as the name; a name that is no corpus is refused, with the closest one."""
    if name is None:
        if path is None:
            raise TypeError(
                "load() needs a corpus name or path= (a text file or a folder of train.txt, valid.txt, test.txt)"
            )
        name = "text"
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    key = corpus_key(name)
    if key not in LOADERS and path is None and Path(name).expanduser().exists():
        key, path = "text", name  # a path given as the name: your own text
    if key not in LOADERS:
        raise ValueError(
            f"unknown corpus {name!r}{did_you_mean(key, LOADERS, quote=True)}; valid names: {', '.join(LOADERS)}"
        )
    return key, path


def _load_derived(key, path, cache_dir, download, url, sha256, progress, options) -> Corpus:
    """The corpora ``load`` builds from something else than its own files: your own text ("text"), the bit
    corpora (from "embedded" or "ptb-char"), "nottingham" (from its ABC files) and "embedded" (the package's)."""
    if key == "text":
        if path is None:
            raise ValueError(
                "load('text') needs path=: a plain-text file or a folder of train.txt, valid.txt, test.txt"
            )
        if url is not None or sha256 is not None:
            raise ValueError("load('text') reads a local path only and takes no url or sha256")
        return text_corpus(path, **options)
    if key == "embedded-bits":
        if path is not None or url is not None or sha256 is not None:
            raise ValueError("the 'embedded-bits' corpus is built in and takes no path, url or sha256")
        return bit_corpus(load("embedded"), name=key, **options)
    if key == "ptb-bits":
        return bit_corpus(
            load("ptb-char", path, cache_dir, download, url=url, sha256=sha256, progress=progress), name=key, **options
        )
    if key == "nottingham":
        if path is None:
            raise ValueError(
                "load('nottingham') needs path=: the folder of ABC files (e.g. shared/data/"
                "nottingham_abc) or one .abc file; this corpus is not downloaded"
            )
        if url is not None or sha256 is not None:
            raise ValueError("load('nottingham') reads a local path only and takes no url or sha256")
        return music_corpus(read_abc_tunes(path), name="nottingham", **options)
    train, valid, test = split_contiguous(embedded_text())
    return char_corpus(train, valid, test, name="embedded")


def _load_files(key, path, cache_dir, download, url, sha256, progress) -> Corpus:
    """A downloadable corpus from its files: a local copy at ``path``, else the cache folder (fetched there
    once); every file must hold text."""
    if path is not None:
        raw = _read_local(Path(path).expanduser(), FILES[key], key)
    else:
        folder = fetch(_SOURCE[key], cache_dir=cache_dir, download=download, url=url, sha256=sha256, progress=progress)
        raw = _read_local(folder, FILES[key], key)
    for name, blob in raw.items():
        if len(blob) == 0:
            raise ValueError(f"{key}: {raw.where[name]} is empty")
        refuse_blank(blob, f"{key}: {raw.where[name]}")
    return _BUILDERS[key](raw)


def embedded_text() -> str:
    """The real English text shipped with the package: Ambrose Bierce's *The
    Devil's Dictionary* (1911, public domain), 383,157 ASCII characters."""
    from importlib.resources import files

    blob = files(__package__).joinpath("resources").joinpath(_EMBEDDED_FILE).read_bytes()
    return gzip.decompress(blob).decode("utf-8")


def ptb_char_text(raw: str) -> str:
    """Decode a Penn Treebank character file: characters are separated by
    spaces and word boundaries written ``_``. The result has the word boundaries
    as spaces and one ``"\\n"`` at the end of each non-empty line, so its
    alphabet is the papers' 50 symbols (49 + end of line)."""
    lines = raw.replace(" ", "").replace("_", " ").split("\n")
    return "".join(line + "\n" for line in lines if line)


#: What a named corpus's file that is not UTF-8 suggests.
_DAMAGED = "the file is damaged or is not this corpus's file (the named corpora are UTF-8 text)"


class _Raw(dict):
    """The bytes of each wanted file, keyed by its first accepted name, and ``where[name]``: the file as
    the user knows it (its path, or the archive's path and the member), for messages."""

    def __init__(self, blobs: Dict[str, bytes], where: Dict[str, str]):
        super().__init__(blobs)
        self.where = where


def _read_local(path: Path, files: Sequence[Tuple[str, ...]], key: str) -> _Raw:
    """The bytes of each wanted file (keyed by its first accepted name) and where each was read."""
    if not path.exists():
        raise FileNotFoundError(f"{key}: path {path} does not exist")
    wanted = [names[0] for names in files]
    if path.is_dir():
        for base in (path, path / "data", path / "simple-examples" / "data"):
            found = {}
            for names in files:
                hit = next((base / n for n in names if (base / n).is_file()), None)
                if hit is not None:
                    found[names[0]] = hit
            if len(found) == len(files):
                return _Raw({n: p.read_bytes() for n, p in found.items()}, {n: str(p) for n, p in found.items()})
        accepted = " and ".join(" or ".join(names) for names in files)
        raise FileNotFoundError(f"{key}: folder {path} (or its data/ sub-folder) lacks {accepted}")
    suffixes = "".join(path.suffixes[-2:]).lower()
    kind = "tgz" if suffixes.endswith((".tgz", ".tar.gz", ".tar")) else "zip" if suffixes.endswith(".zip") else None
    if kind is not None:
        try:
            blobs, where = {}, {}
            with closing(open_archive_members(path, kind, files, with_member=True)) as members:
                for name, stream, member in members:
                    blobs[name] = stream.read()
                    where[name] = f"{path}: {member}"
            return _Raw(blobs, where)
        except (tarfile.TarError, zipfile.BadZipFile, EOFError) as e:
            raise ValueError(f"{key}: {path} is not a valid {kind} archive: {e}") from None
    if len(files) == 1:
        return _Raw({wanted[0]: path.read_bytes()}, {wanted[0]: str(path)})
    raise ValueError(f"{key}: {path} is a single file; expected a folder or an archive holding {', '.join(wanted)}")


def _fixed_or_proportional(n: int) -> Tuple[int, int]:
    """Cut points of text8 / enwik8: 90M / 5M / 5M for the full 100M, else the
    same proportions (90 % / 5 % / 5 %)."""
    if n == FULL_LENGTH:
        return 90_000_000, 95_000_000
    n_valid = n_test = round(n * 0.05)
    return n - n_valid - n_test, n - n_test


def _ptb_char(raw: _Raw) -> Corpus:
    names = {s: f"ptb.char.{s}.txt" for s in ("train", "valid", "test")}
    train, valid, test = [
        ptb_char_text(decode_utf8(raw[n], raw.where[n], s, advice=_DAMAGED)) for s, n in names.items()
    ]
    return char_corpus(train, valid, test, name="ptb-char")


def _ptb_word(raw: _Raw) -> Corpus:
    names = {s: f"ptb.{s}.txt" for s in ("train", "valid", "test")}
    train, valid, test = [decode_utf8(raw[n], raw.where[n], s, advice=_DAMAGED) for s, n in names.items()]
    return word_corpus(train, valid, test, name="ptb-word")


def _text8_text(raw: _Raw) -> str:
    text = decode_utf8(raw["text8"], raw.where["text8"], advice=_DAMAGED)
    if len(text) != FULL_LENGTH and not text.endswith(" "):
        cut = text.rfind(" ")  # a prefix of text8 ends mid-word: drop that partial word
        text = text[:cut] if cut > 0 else text
    return text


def _text8(raw: _Raw) -> Corpus:
    text = _text8_text(raw)
    a, b = _fixed_or_proportional(len(text))
    return char_corpus(text[:a], text[a:b], text[b:], name="text8")


#: text8 words: training words seen fewer times than this become ``<unk>``.
TEXT8_MIN_COUNT = 10


def _text8_word(raw: _Raw) -> Corpus:
    text = _text8_text(raw)
    a, b = _fixed_or_proportional(len(text))
    # Each cut moves to the next space, so that no word is split between two parts.
    a, b = (text.find(" ", c) if text.find(" ", c) >= 0 else len(text) for c in (a, b))
    return word_corpus(text[:a], text[a:b], text[b:], name="text8-word", min_count=TEXT8_MIN_COUNT, order="frequency")


def _enwik8(raw: _Raw) -> Corpus:
    data = raw["enwik8"]
    a, b = _fixed_or_proportional(len(data))
    return char_corpus(data[:a], data[a:b], data[b:], name="enwik8", level="byte")


def _shakespeare(raw: _Raw) -> Corpus:
    train, valid, test = split_contiguous(decode_utf8(raw["input.txt"], raw.where["input.txt"], advice=_DAMAGED))
    return char_corpus(train, valid, test, name="shakespeare")


_BUILDERS = {
    "ptb-char": _ptb_char,
    "ptb-word": _ptb_word,
    "text8": _text8,
    "text8-word": _text8_word,
    "enwik8": _enwik8,
    "shakespeare": _shakespeare,
}
