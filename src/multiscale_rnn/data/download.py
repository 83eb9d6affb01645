"""Download-once cache for the corpora, with checksums.

``SOURCES`` maps a source name to a :class:`Remote`: the canonical address, the
checksum of what is downloaded (where it is known) and the files taken out of
it with their own checks. ``fetch`` downloads into the cache folder
(``cache_dir`` argument, else ``$MULTISCALE_RNN_CACHE``, else
``~/.cache/multiscale_rnn``), writing every file to a temporary name and
renaming it only once its checks pass, so a cached file is always complete and
verified. Later calls find the files in the cache and use no network.
"""

import hashlib
import http.client
import os
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import IO, Any, Dict, Optional, Sequence, Tuple, Union

__all__ = [
    "ENV_CACHE",
    "SOURCES",
    "Remote",
    "FileCheck",
    "ChecksumError",
    "DownloadError",
    "default_cache_dir",
    "download_file",
    "fetch",
]

ENV_CACHE = "MULTISCALE_RNN_CACHE"
_BLOCK = 1 << 20


class ChecksumError(ValueError):
    """A downloaded or cached file does not have the expected size or SHA-256."""


class DownloadError(OSError):
    """A download failed (HTTP error, no network, interrupted transfer)."""


@dataclass(frozen=True)
class FileCheck:
    """A file of a source, stored under ``name`` in the cache folder (and found
    by that base name inside an archive), with the checks it must pass.

    ``prefix = (n, sha256)`` checks the SHA-256 of the first ``n`` bytes."""

    name: str
    sha256: Optional[str] = None
    size: Optional[int] = None
    prefix: Optional[Tuple[int, str]] = None


@dataclass(frozen=True)
class Remote:
    """Where a source comes from.

    ``archive`` is ``"tgz"``, ``"zip"`` or ``None`` (the download is the single
    file of ``files``). ``sha256`` and ``size`` check the download itself (for a
    plain file, also the cached copy on every later use); the ``files`` of an
    archive are checked after extraction and on every later use."""

    url: str
    folder: str
    files: Tuple[FileCheck, ...]
    archive: Optional[str] = None
    sha256: Optional[str] = None
    size: Optional[int] = None


#: Canonical sources. Checksums: the Penn Treebank and Tiny Shakespeare file
#: hashes were computed from verified copies; the enwik8.zip hash is the one
#: published with the Hugging Face ``enwik8`` dataset; text8.zip has its
#: well-known size and the extracted text8 is checked by its length and by the
#: SHA-256 of its first 12,549,840 bytes.
SOURCES: Dict[str, Remote] = {
    "ptb": Remote(
        url="http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz",
        folder="ptb",
        archive="tgz",
        files=(
            FileCheck("ptb.train.txt", "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf", 5101618),
            FileCheck("ptb.valid.txt", "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2", 399782),
            FileCheck("ptb.test.txt", "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0", 449945),
            FileCheck(
                "ptb.char.train.txt", "e313d91425e06c4f0a8fb6e881dcce0c291f2a0e9f4dda54833069b122f91da9", 10034964
            ),
            FileCheck("ptb.char.valid.txt", "21661f63ec355085879458b6524644d4add5573541b4be14fb52ab2e2e995eb8", 786084),
            FileCheck("ptb.char.test.txt", "1ef5607ac3c463b16e38bfe7900dd3bfc91de5a96e0f21e7eab5188b465b8ebe", 884846),
        ),
    ),
    "text8": Remote(
        url="http://mattmahoney.net/dc/text8.zip",
        folder="text8",
        archive="zip",
        size=31344016,
        files=(
            FileCheck(
                "text8",
                size=100_000_000,
                prefix=(12_549_840, "1b40ab68e13d520469aa90315b92b1466810394246571fadf742c971c3b65a25"),
            ),
        ),
    ),
    "enwik8": Remote(
        url="http://mattmahoney.net/dc/enwik8.zip",
        folder="enwik8",
        archive="zip",
        sha256="547994d9980ebed1288380d652999f38a14fe291a6247c157c3d33d4932534bc",
        size=36445475,
        files=(FileCheck("enwik8", size=100_000_000),),
    ),
    "shakespeare": Remote(
        url="https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
        folder="shakespeare",
        sha256="86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
        size=1115394,
        files=(FileCheck("input.txt"),),
    ),
}


def default_cache_dir() -> Path:
    """``$MULTISCALE_RNN_CACHE`` if set, else ``~/.cache/multiscale_rnn``."""
    env = os.environ.get(ENV_CACHE)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "multiscale_rnn"


def _copy_hashing(src: IO[bytes], dst: Optional[IO[bytes]], prefix_len: Optional[int], progress=None):
    """Copy ``src`` to ``dst`` (if given); return (size, sha256, sha256 of the
    first ``prefix_len`` bytes or None)."""
    whole, head = hashlib.sha256(), hashlib.sha256()
    n = 0
    while True:
        block = src.read(_BLOCK)
        if not block:
            break
        if prefix_len is not None and n < prefix_len:
            head.update(block[: prefix_len - n])
        whole.update(block)
        n += len(block)
        if dst is not None:
            dst.write(block)
        if progress is not None:
            progress.update(len(block))
    head_digest = head.hexdigest() if prefix_len is not None and n >= prefix_len else None
    return n, whole.hexdigest(), head_digest


def _verify(what: str, got: Tuple[int, str, Optional[str]], sha256=None, size=None, prefix=None) -> None:
    n, digest, head = got
    if size is not None and n != size:
        raise ChecksumError(f"size mismatch for {what}: expected {size:,} bytes, got {n:,}")
    if sha256 is not None and digest != sha256.lower():
        raise ChecksumError(f"checksum mismatch for {what}: expected sha256 {sha256.lower()}, got {digest}")
    if prefix is not None and head != prefix[1].lower():
        raise ChecksumError(
            f"checksum mismatch for {what}: expected sha256 {prefix[1].lower()} of its first {prefix[0]:,} bytes, "
            f"got {head or 'a shorter file'}"
        )


def _write_atomically(dest: Path, src: Any, what: str, check: Dict, progress=None) -> None:  # src: has read(n) -> bytes
    """Stream ``src`` into ``dest`` through a temporary file in the same folder;
    rename it only if the checks in ``check`` (sha256, size, prefix) pass."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=str(dest.parent))
    try:
        with os.fdopen(fd, "wb") as out:
            prefix = check.get("prefix")
            got = _copy_hashing(src, out, prefix[0] if prefix else None, progress)
        _verify(what, got, **check)
        os.replace(tmp, dest)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _progress_bar(total: Optional[int], desc: str, enabled: bool):
    if not enabled:
        return None
    try:
        from .._progress import bar_class

        tqdm = bar_class()  # the notebook widget only where ipywidgets is installed: no IProgress warning
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024, leave=False)


class _LengthChecked:
    """A response reader that fails when the connection closes before the
    announced Content-Length (chunked reads of http.client do not)."""

    def __init__(self, response, url: str):
        self.response, self.url, self.seen = response, url, 0
        length = response.headers.get("Content-Length")
        self.length = int(length) if length and length.isdigit() else None

    def read(self, n: int) -> bytes:
        block = self.response.read(n)
        self.seen += len(block)
        if not block and self.length is not None and self.seen < self.length:
            raise DownloadError(
                f"download of {self.url} failed: the connection closed after {self.seen:,} of {self.length:,} bytes"
            )
        return block


def download_file(
    url: str,
    dest: Union[str, Path],
    sha256: Optional[str] = None,
    size: Optional[int] = None,
    progress: bool = True,
    timeout: float = 60.0,
) -> Path:
    """Download ``url`` to ``dest`` atomically, checking ``size`` and ``sha256``
    when given. On any failure nothing is left at ``dest``.

    Raises :class:`DownloadError` when the server or the network fails and
    :class:`ChecksumError` when the checks fail."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    request = urllib.request.Request(url, headers={"User-Agent": "multiscale-rnn"})
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as e:
        e.close()
        raise DownloadError(f"could not download {url}: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise DownloadError(
            f"could not download {url}: {reason}. Without network access, download the file by hand "
            f"and pass path= to the loader"
        ) from None
    with response:
        reader = _LengthChecked(response, url)
        bar = _progress_bar(reader.length or size, dest.name, progress)
        try:
            _write_atomically(dest, reader, url, {"sha256": sha256, "size": size}, bar)
        except DownloadError:
            raise
        except (OSError, EOFError, http.client.HTTPException) as e:
            raise DownloadError(f"download of {url} failed: {e!r}") from None
        finally:
            if bar is not None:
                bar.close()
    return dest


def _find_member(names: Sequence[str], accepted: Tuple[str, ...]) -> Optional[str]:
    """The archive member whose base name is the first of ``accepted`` present;
    if several members have that name, prefer one in a ``data`` folder, then
    the shortest path."""
    for wanted in accepted:
        hits = [n for n in names if PurePosixPath(n).name == wanted]
        if hits:
            return min(hits, key=lambda n: (PurePosixPath(n).parent.name != "data", len(n), n))
    return None


def open_archive_members(
    archive: Path, kind: str, wanted: Sequence[Union[str, Tuple[str, ...]]], with_member: bool = False
):
    """Yield ``(name, binary stream)`` for each wanted file of a tgz or zip
    archive (``(name, stream, member path)`` with ``with_member``). A wanted
    file is a base name or a tuple of accepted base names (the first is yielded
    as its name). Raise :class:`FileNotFoundError` naming the files the archive
    lacks."""
    accepted = [(w,) if isinstance(w, str) else tuple(w) for w in wanted]
    if kind == "tgz":
        with tarfile.open(archive, "r:*") as tar:
            members = {m.name: m for m in tar.getmembers() if m.isfile()}
            found = _require_members(archive, list(members), accepted)
            for name, member in found:
                with tar.extractfile(members[member]) as f:  # type: ignore[union-attr]
                    yield (name, f, member) if with_member else (name, f)
    elif kind == "zip":
        with zipfile.ZipFile(archive) as z:
            found = _require_members(archive, [i.filename for i in z.infolist() if not i.is_dir()], accepted)
            for name, member in found:
                with z.open(member) as f:
                    yield (name, f, member) if with_member else (name, f)
    else:
        raise ValueError(f"unknown archive kind {kind!r}; expected 'tgz' or 'zip'")


def _require_members(archive: Path, members: Sequence[str], accepted: Sequence[Tuple[str, ...]]):
    found = [(names[0], _find_member(members, names)) for names in accepted]
    missing = [" or ".join(names) for names, (_, m) in zip(accepted, found) if m is None]
    if missing:
        raise FileNotFoundError(f"archive {archive} holds no file named {', '.join(missing)}")
    return found


def _checks(remote: Remote, f: FileCheck) -> Dict:
    """The checks a cached file of ``remote`` must pass."""
    if remote.archive is None:
        return {"sha256": remote.sha256, "size": remote.size, "prefix": f.prefix}
    return {"sha256": f.sha256, "size": f.size, "prefix": f.prefix}


def fetch(
    source: str,
    cache_dir: Union[str, Path, None] = None,
    download: bool = True,
    url: Optional[str] = None,
    sha256: Optional[str] = None,
    progress: bool = True,
) -> Path:
    """The cache folder holding the verified files of ``source`` (a key of
    :data:`SOURCES`), downloading and extracting them first if needed.

    ``url`` replaces the canonical address (a mirror) and ``sha256`` the
    expected checksum of the download (and drops its expected size); files
    extracted from an archive are checked all the same. With ``download=False`` a missing file raises
    :class:`FileNotFoundError`."""
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; known: {', '.join(sorted(SOURCES))}")
    remote = SOURCES[source]
    if url is not None:
        remote = replace(remote, url=url)
    if sha256 is not None:
        remote = replace(remote, sha256=sha256, size=None)
    folder = (Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()) / remote.folder
    paths = {f.name: folder / f.name for f in remote.files}
    if all(p.is_file() for p in paths.values()):
        for f in remote.files:
            with open(paths[f.name], "rb") as fh:
                got = _copy_hashing(fh, None, f.prefix[0] if f.prefix else None)
            try:
                _verify(f"cached file {paths[f.name]}", got, **_checks(remote, f))
            except ChecksumError as e:
                raise ChecksumError(f"{e}; delete the file to download a fresh copy") from None
        return folder
    missing = [n for n, p in paths.items() if not p.is_file()]
    if not download:
        raise FileNotFoundError(
            f"{source}: {', '.join(missing)} not found in the cache folder {folder} and download=False; "
            f"allow the download from {remote.url} or pass path= to a local copy"
        )
    if remote.archive is None:
        (f,) = remote.files
        download_file(remote.url, paths[f.name], sha256=remote.sha256, size=remote.size, progress=progress)
        return folder
    # A name of this process's own, so that processes fetching at once do not
    # remove each other's archive.
    base = PurePosixPath(urllib.parse.urlparse(remote.url).path).name or f"{source}.{remote.archive}"
    archive = folder / f".{base}.{os.getpid()}"
    download_file(remote.url, archive, sha256=remote.sha256, size=remote.size, progress=progress)
    try:
        checks = {f.name: f for f in remote.files}
        with closing(open_archive_members(archive, remote.archive, list(checks))) as members:
            for name, stream in members:
                what = f"{name} from {remote.url}"
                _write_atomically(paths[name], stream, what, _checks(remote, checks[name]))
    except (tarfile.TarError, zipfile.BadZipFile, EOFError) as e:
        raise ValueError(f"the download from {remote.url} is not a valid {remote.archive} archive: {e}") from None
    finally:
        archive.unlink()
    return folder
