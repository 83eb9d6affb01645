"""Python source code as a character corpus: ``load("python-stdlib")``.

The text is the ``.py`` files of the running interpreter's standard library
(``sysconfig.get_paths()["stdlib"]``), or of another source tree given as ``path``: every ``.py``
file of the folder and its sub-folders except those under a folder named ``test``, ``tests``,
``idlelib`` or ``site-packages`` (so the test suites, lib2to3's test data and installed packages
are left out), read in sorted order of their paths relative to the folder (``/``-separated),
decoded as UTF-8 (a file that is not UTF-8 is skipped, the same files on every run), joined with
``"\\n"`` and cut to its first :data:`MAX_CHARS` characters (``max_chars``). That text is split
by position, the first 90 % for training, the next 5 % for validation and the last 5 % for
testing; the vocabulary is the training characters (unseen ones map to U+FFFD, as for every
character corpus, :func:`multiscale_rnn.data.char_corpus`).

The standard library differs between Python versions, so the corpus does too: the text of
CPython 3.11.7 has 674 such files (11.4M characters, all UTF-8), of which the first 5M characters
are taken: 100 distinct characters in training, 101 symbols with U+FFFD (8 validation and 3 test
characters are unseen in training).
"""

import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Union

from .._checks import is_int
from .corpus import Corpus, char_corpus, refuse_blank, split_contiguous

__all__ = ["python_stdlib_corpus", "read_python_source", "python_source_files", "PythonSource", "MAX_CHARS"]

#: The corpus is cut to this many characters (the size of Penn Treebank's training text).
MAX_CHARS = 5_000_000

#: Files under a folder of one of these names are left out.
EXCLUDED_FOLDERS = ("test", "tests", "idlelib", "site-packages")


@dataclass
class PythonSource:
    """The text of a source tree, the files it was read from (relative paths, in order) and those
    skipped because they are not UTF-8."""

    text: str
    files: List[str] = field(default_factory=list)
    skipped: List[str] = field(default_factory=list)


def stdlib_path() -> Path:
    """The running interpreter's standard library folder."""
    return Path(sysconfig.get_paths()["stdlib"])


def python_source_files(root: Union[str, Path]) -> List[Path]:
    """The ``.py`` files under ``root`` outside the excluded folders, sorted by relative path."""
    root = Path(root).expanduser()
    if not root.exists():
        raise FileNotFoundError(f"python-stdlib: path {root} does not exist")
    if not root.is_dir():
        raise ValueError(f"python-stdlib: path {root} is not a folder (give a source tree, e.g. a standard library)")
    found = []
    for p in root.rglob("*.py"):
        rel = p.relative_to(root)
        if p.is_file() and not set(rel.parts[:-1]) & set(EXCLUDED_FOLDERS):
            found.append((rel.as_posix(), p))
    if not found:
        raise ValueError(
            f"python-stdlib: no .py file under {root} (outside folders named {', '.join(EXCLUDED_FOLDERS)})"
        )
    return [p for _, p in sorted(found)]


def read_python_source(root: Union[str, Path], max_chars: int = MAX_CHARS) -> PythonSource:
    """The UTF-8 ``.py`` files under ``root`` joined with ``"\\n"``, cut to ``max_chars`` characters;
    files are read only until the cut is reached."""
    if not is_int(max_chars) or max_chars < 1:
        raise ValueError(f"max_chars must be a positive integer, got {max_chars!r}")
    root = Path(root).expanduser()
    out = PythonSource("")
    parts: List[str] = []
    size = 0
    for p in python_source_files(root):
        rel = p.relative_to(root).as_posix()
        try:
            text = p.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            out.skipped.append(rel)
            continue
        parts.append(text)
        out.files.append(rel)
        size += len(text) + (len(parts) > 1)
        if size >= max_chars:
            break
    if not parts:
        raise ValueError(f"python-stdlib: no .py file under {root} is UTF-8 (skipped: {', '.join(out.skipped)})")
    out.text = "\n".join(parts)[:max_chars]
    return out


def python_stdlib_corpus(
    path: Union[str, Path, None] = None,
    *,
    max_chars: int = MAX_CHARS,
    url: Optional[str] = None,
    sha256: Optional[str] = None,
) -> Corpus:
    """The ``python-stdlib`` corpus (module docstring): the running interpreter's standard library, or
    the source tree at ``path``; 90 % / 5 % / 5 % by position, characters."""
    if url is not None or sha256 is not None:
        raise ValueError("load('python-stdlib') reads a local source tree and takes no url or sha256")
    source = read_python_source(stdlib_path() if path is None else path, max_chars)
    refuse_blank(source.text, f"python-stdlib: the .py files under {path or stdlib_path()}")
    train, valid, test = split_contiguous(source.text)
    return char_corpus(train, valid, test, name="python-stdlib")
