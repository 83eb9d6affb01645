"""What a training run writes to disk besides the checkpoint archive itself, shared by the trainer
and the checkpoint module: atomic file writing and the per-epoch training history."""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional, Union

from .limits import format_bytes

__all__ = [
    "atomic_write",
    "atomic_write_text",
    "append_lines",
    "read_json_lines",
    "check_writable",
    "History",
    "history_path",
]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _temp_prefix(path: Path) -> str:
    return f".{path.name}."


def _remove_leftovers(folder: Path, path: Path, keep: Optional[str] = None) -> None:
    """Remove temporary files of earlier writes of ``path`` (``.NAME.*.tmp`` beside it) that a
    killed process left behind; writing one file from two processes at once is not supported."""
    prefix = _temp_prefix(path)
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.startswith(prefix) and name.endswith(".tmp") and name != keep:
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass


def _named(e: OSError, path: Path) -> OSError:
    """The same error (same class and errno) with ``path`` as its file name."""
    if e.errno is None:
        return e
    return OSError(e.errno, e.strerror or str(e), str(path))


def check_writable(path: Union[str, Path], what: str = "output", needs: Optional[int] = None, why: str = "") -> Path:
    """Check before any work that ``path`` can be written: not a folder, in a folder that exists
    (or can be made) and that is writable (a temporary file is created and removed there, which
    also catches a read-only mount), with at least ``needs`` bytes free there when given (``why`` says
    what they are). Raises ``ValueError`` / ``OSError`` naming the path."""
    path = Path(path)
    if str(path) in ("", "."):
        raise ValueError(f"the {what} path is empty")
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, f"the {what} path is a folder, not a file", str(path))
    folder = path.parent if str(path.parent) else Path(".")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise NotADirectoryError(
            errno.ENOTDIR, f"cannot make the {what} folder: a file is in the way", str(folder)
        ) from None
    except OSError as e:
        raise _named(e, folder) from None
    try:
        fd, probe = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=folder)
    except OSError as e:
        raise OSError(e.errno, f"cannot write the {what} file there ({e.strerror})", str(path)) from None
    os.close(fd)
    os.unlink(probe)
    if needs is not None:
        free = shutil.disk_usage(folder).free
        if free < needs:
            raise OSError(
                errno.ENOSPC,
                f"no room for the {what} file: it needs more than {format_bytes(needs)}{why} and its folder has "
                f"{format_bytes(free)} free; free some space or write it elsewhere",
                str(path),
            )
    return path


def atomic_write(path: Union[str, Path], write) -> Path:
    """Call ``write(fileobj)`` on a temporary file beside ``path``, fsync it, then rename it over
    ``path``. On any error the temporary file is removed and ``path`` is untouched; an ``OSError``
    (no space, file too large, no permission, ...) is raised again naming ``path``. Temporary files
    of ``path`` left by a killed process are removed first, so at most one exists at any time."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(path))
        _remove_leftovers(folder, path)
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=folder)
    except OSError as e:
        raise _named(e, path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual permissions
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise _named(e, path) from None
        raise
    try:  # make the rename itself durable
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
    return path


def atomic_write_text(path: Union[str, Path], text: str) -> Path:
    """``atomic_write`` of ``text`` in UTF-8."""
    data = text.encode("utf-8")
    return atomic_write(path, lambda f: f.write(data))


def append_lines(path: Union[str, Path], text: str) -> Path:
    """Append ``text`` (whole lines, each ending in a newline) to ``path`` and sync it. A last line without its
    newline is ended first when it is a whole JSON value (a file edited by hand) and cut off otherwise (an earlier
    append cut short by a kill), so it never runs into the new lines; on an ``OSError`` (no space left, ...) the file
    is cut back to its length before this call and the error raised naming ``path``: a failed append leaves the
    lines written before intact."""
    path = Path(path)
    if not text.endswith("\n"):
        raise ValueError(f"append_lines({path}): the text must end with a newline")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab+", buffering=0) as f:  # unbuffered: nothing is left to flush when cutting back
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - 1))
            if size and f.read(1) != b"\n":  # the last line lacks its newline: read it (at most 64 KiB back)
                f.seek(max(0, size - 65536))
                tail = f.read()
                cut = tail.rfind(b"\n")
                if _is_json(tail[cut + 1 :]):
                    f.write(b"\n")
                    size += 1
                else:
                    size = size - len(tail) + cut + 1  # after the last newline (0: no whole line yet)
                    f.truncate(size)
            data = memoryview(text.encode("utf-8"))
            try:
                while data:
                    data = data[f.write(data) or 0 :]
                os.fsync(f.fileno())
            except OSError:
                f.truncate(size)
                raise
    except OSError as e:
        raise _named(e, path) from None
    return path


def _is_json(line: bytes) -> bool:
    try:
        json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return False
    return True


def read_json_lines(path: Union[str, Path]) -> list:
    """The JSON value of every non-blank line of ``path`` (none when it does not exist). A last line without
    its newline that does not parse is an append cut short by a kill and is left out (``append_lines`` cuts it
    off at the next append); any other line that does not parse raises ``ValueError`` naming the path and line."""
    path = Path(path)
    if not path.exists():
        return []
    text = path.read_bytes().decode("utf-8", errors="replace")
    lines = text.split("\n")
    rows = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            if i == len(lines):  # the last line, with no newline after it
                continue
            raise ValueError(f"{path}, line {i}: not a JSON row ({e})") from None
    return rows


def history_path(checkpoint: Union[str, Path]) -> Path:
    """Where the history JSON of a checkpoint goes: ``runs/x.npz`` -> ``runs/x.history.json``."""
    p = Path(checkpoint)
    return p.with_name(p.stem + ".history.json") if p.suffix else p.with_name(p.name + ".history.json")


class History(list):
    """One dict per completed epoch: ``epoch``, ``train_loss``, ``train_bpc``, ``valid_loss``,
    ``valid_bpc``, ``valid_perplexity`` (None without validation data), ``lr``, ``seconds``,
    ``tokens_per_s``, ``steps``, and ``train_aux`` (dict name -> epoch mean of each auxiliary
    objective term, for cores that add any; the cross-entropy figures never include them)."""

    def save(self, path: Union[str, Path]) -> Path:
        text = json.dumps(list(self), indent=1)
        return atomic_write_text(path, text)

    @classmethod
    def load(cls, path: Union[str, Path]) -> "History":
        """The history written by ``save`` (``ValueError`` naming ``path`` for a file that is not one)."""
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"history file not found: {path}")
        if path.is_dir():
            raise IsADirectoryError(f"{path} is a folder, not a history file")
        try:
            rows = json.loads(path.read_bytes().decode("utf-8"))
        except UnicodeDecodeError as e:
            raise ValueError(f"{path} is not a history file: byte offset {e.start:,} is not UTF-8") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not a history file: unreadable JSON ({e})") from None
        except RecursionError:
            raise ValueError(f"{path} is not a history file: its JSON is nested too deeply") from None
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ValueError(
                f"{path} is not a history file: expected a list of one object per epoch, got "
                f"{type(rows).__name__}" + ("" if not isinstance(rows, list) else " of other values")
            )
        return cls(rows)

    def best(self, key: str = "valid_loss") -> Optional[dict]:
        """The epoch with the lowest ``key`` (None if no epoch has it)."""
        rows = [r for r in self if r.get(key) is not None]
        return min(rows, key=lambda r: r[key]) if rows else None
