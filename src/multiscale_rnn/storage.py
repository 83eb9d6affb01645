"""What a training run writes to disk besides the checkpoint archive itself, shared by the trainer
and the checkpoint module: atomic file writing and the per-epoch training history."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Optional, Union

__all__ = ["atomic_write", "History", "history_path"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: Union[str, Path], write) -> Path:
    """Call ``write(fileobj)`` on a temporary file beside ``path``, fsync it, then rename it over
    ``path``. On any error the temporary file is removed and ``path`` is untouched."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual permissions
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
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
        return atomic_write(path, lambda f: f.write(text.encode()))

    @classmethod
    def load(cls, path: Union[str, Path]) -> "History":
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"history file not found: {path}")
        return cls(json.loads(path.read_text()))

    def best(self, key: str = "valid_loss") -> Optional[dict]:
        """The epoch with the lowest ``key`` (None if no epoch has it)."""
        rows = [r for r in self if r.get(key) is not None]
        return min(rows, key=lambda r: r[key]) if rows else None
