"""Downloads, checksums, archives and the cache, against fixture files served by a
local HTTP server on 127.0.0.1 (never the real addresses)."""

import dataclasses
import hashlib
import http.server
import io
import tarfile
import threading
import zipfile
from types import SimpleNamespace

import numpy as np
import pytest

from multiscale_rnn import data
from multiscale_rnn.data import download

WORDS = {
    "train": " the cat sat on the mat \n the dog sat \n a cat ran \n",
    "valid": " the dog ran \n a mat \n",
    "test": " the cow sat \n",
}


def sha(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()


def ptb_files():
    """Small files in the Penn Treebank layout: word files and their character versions."""
    files = {}
    for split, text in WORDS.items():
        files[f"ptb.{split}.txt"] = text.encode()
        lines = [" ".join("_".join(line.split())) + " " for line in text.splitlines()]
        files[f"ptb.char.{split}.txt"] = ("\n".join(lines) + "\n").encode()
    return files


def make_tgz(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, blob in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return buf.getvalue()


def make_zip(members):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, blob in members.items():
            z.writestr(name, blob)
    return buf.getvalue()


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """Keep the user's cache and any proxy out of these tests."""
    monkeypatch.setenv(data.ENV_CACHE, str(tmp_path / "env-cache"))
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    hits = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def do_GET(self):
            hits.append(self.path)
            if self.path == "/truncated":  # promises 1000 bytes, sends 10, hangs up
                self.send_response(200)
                self.send_header("Content-Length", "1000")
                self.end_headers()
                self.wfile.write(b"0123456789")
                self.close_connection = True
                return
            super().do_GET()

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield SimpleNamespace(root=root, url=f"http://127.0.0.1:{httpd.server_address[1]}", hits=hits)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def files_in(folder):
    return sorted(p.name for p in folder.rglob("*")) if folder.exists() else []


@pytest.fixture
def ptb_source(server, monkeypatch):
    files = ptb_files()
    members = {f"./simple-examples/data/{n}": b for n, b in files.items()}
    members["./simple-examples/models/ptb.train.txt"] = b"a decoy outside data/\n"
    (server.root / "simple-examples.tgz").write_bytes(make_tgz(members))
    remote = dataclasses.replace(
        data.SOURCES["ptb"],
        url=f"{server.url}/simple-examples.tgz",
        files=tuple(data.FileCheck(n, sha(b), len(b)) for n, b in files.items()),
    )
    monkeypatch.setitem(data.SOURCES, "ptb", remote)
    return files


def test_canonical_addresses():
    assert data.SOURCES["ptb"].url == "http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz"
    assert data.SOURCES["text8"].url == "http://mattmahoney.net/dc/text8.zip"
    assert data.SOURCES["enwik8"].url == "http://mattmahoney.net/dc/enwik8.zip"
    assert data.SOURCES["shakespeare"].url.endswith("karpathy/char-rnn/master/data/tinyshakespeare/input.txt")
    assert data.SOURCES["shakespeare"].sha256 == "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"


def test_download_file_verifies_and_leaves_nothing_on_mismatch(server, tmp_path):
    blob = b"hello world\n" * 1000
    (server.root / "f.txt").write_bytes(blob)
    dest = tmp_path / "out" / "f.txt"
    assert data.download_file(f"{server.url}/f.txt", dest, sha256=sha(blob), size=len(blob), progress=False) == dest
    assert dest.read_bytes() == blob
    assert files_in(dest.parent) == ["f.txt"]
    bad = tmp_path / "bad" / "f.txt"
    with pytest.raises(data.ChecksumError, match=f"expected sha256 {'0' * 64}, got {sha(blob)}"):
        data.download_file(f"{server.url}/f.txt", bad, sha256="0" * 64, progress=False)
    with pytest.raises(data.ChecksumError, match="expected 5 bytes, got 12,000"):
        data.download_file(f"{server.url}/f.txt", bad, size=5, progress=False)
    assert files_in(bad.parent) == []


def test_404_is_a_clear_error(server, tmp_path):
    with pytest.raises(data.DownloadError, match=r"could not download http://127\.0\.0\.1:\d+/missing\.txt: HTTP 404"):
        data.download_file(f"{server.url}/missing.txt", tmp_path / "m.txt", progress=False)
    assert not (tmp_path / "m.txt").exists()


def test_interrupted_download_is_a_clear_error(server, tmp_path):
    with pytest.raises(
        data.DownloadError, match=r"download of http://127\.0\.0\.1:\d+/truncated failed: .*after 10 of 1,000 bytes"
    ):
        data.download_file(f"{server.url}/truncated", tmp_path / "t.bin", progress=False)
    assert files_in(tmp_path) == ["www"]


def test_unreachable_server_is_a_clear_error(tmp_path):
    import socket

    with socket.socket() as s:  # a port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(data.DownloadError, match="pass path="):
        data.download_file(f"http://127.0.0.1:{port}/x", tmp_path / "x", progress=False, timeout=5)


def test_plain_file_download_is_cached_and_reused(server, tmp_path, monkeypatch):
    text = "First Citizen:\nBefore we proceed any further, hear me speak.\n" * 40
    blob = text.encode()
    (server.root / "input.txt").write_bytes(blob)
    remote = dataclasses.replace(
        data.SOURCES["shakespeare"], url=f"{server.url}/input.txt", sha256=sha(blob), size=len(blob)
    )
    monkeypatch.setitem(data.SOURCES, "shakespeare", remote)
    cache = tmp_path / "cache"
    first = data.load("shakespeare", cache_dir=cache, progress=False)
    assert server.hits == ["/input.txt"]
    assert (cache / "shakespeare" / "input.txt").read_bytes() == blob
    second = data.load("shakespeare", cache_dir=cache, progress=False)
    assert server.hits == ["/input.txt"]  # no second request
    assert np.array_equal(first.train, second.train)
    assert first.vocab.decode(np.concatenate([first.train, first.valid, first.test])) == text


def test_checksum_mismatch_raises_and_caches_nothing(server, tmp_path, monkeypatch):
    tampered = b"tampered text\n"
    (server.root / "input.txt").write_bytes(tampered)
    remote = dataclasses.replace(data.SOURCES["shakespeare"], url=f"{server.url}/input.txt", size=None)
    monkeypatch.setitem(data.SOURCES, "shakespeare", remote)
    cache = tmp_path / "cache"
    with pytest.raises(data.ChecksumError, match=f"expected sha256 {remote.sha256}, got {sha(tampered)}"):
        data.load("shakespeare", cache_dir=cache, progress=False)
    assert files_in(cache) in ([], ["shakespeare"])


def test_url_and_sha256_arguments_override_the_registry(server, tmp_path):
    blob = b"To be, or not to be, that is the question.\n" * 30
    (server.root / "mirror.txt").write_bytes(blob)
    c = data.load("shakespeare", cache_dir=tmp_path, url=f"{server.url}/mirror.txt", sha256=sha(blob), progress=False)
    assert server.hits == ["/mirror.txt"] and data.SOURCES["shakespeare"].url.startswith("https://raw.")
    assert len(c.train) + len(c.valid) + len(c.test) == len(blob)


def test_env_var_sets_the_default_cache(server, tmp_path, monkeypatch):
    blob = b"abc abc abc\n" * 50
    (server.root / "input.txt").write_bytes(blob)
    monkeypatch.setitem(
        data.SOURCES,
        "shakespeare",
        dataclasses.replace(data.SOURCES["shakespeare"], url=f"{server.url}/input.txt", sha256=sha(blob), size=None),
    )
    monkeypatch.setenv(data.ENV_CACHE, str(tmp_path / "from-env"))
    assert data.default_cache_dir() == tmp_path / "from-env"
    data.load("shakespeare", progress=False)
    assert (tmp_path / "from-env" / "shakespeare" / "input.txt").read_bytes() == blob
    monkeypatch.delenv(data.ENV_CACHE)
    assert data.default_cache_dir().parts[-2:] == (".cache", "multiscale_rnn")


def test_tgz_is_extracted_once_for_both_ptb_loaders(server, tmp_path, ptb_source):
    cache = tmp_path / "cache"
    chars = data.load("ptb-char", cache_dir=cache, progress=False)
    assert server.hits == ["/simple-examples.tgz"]
    assert files_in(cache / "ptb") == sorted(ptb_source)  # archive removed, six files kept
    assert chars.vocab.decode(chars.valid) == "the dog ran\na mat\n"
    assert "_" not in chars.vocab and " " in chars.vocab
    assert chars.stats()["unknown_symbols"]["test"] == {"w": 1}  # no "w" in the training text
    words = data.load("ptb-word", cache_dir=cache, progress=False)
    assert server.hits == ["/simple-examples.tgz"]
    assert len(words.train) == 15 and words.vocab.decode(words.test) == "the <unk> sat <eos>"
    assert words.stats()["unknown"] == {"train": 0, "valid": 0, "test": 1}


def test_extracted_file_checksum_mismatch_keeps_nothing_bad(server, tmp_path, ptb_source, monkeypatch):
    remote = data.SOURCES["ptb"]
    files = tuple(dataclasses.replace(f, sha256="f" * 64) if f.name == "ptb.valid.txt" else f for f in remote.files)
    monkeypatch.setitem(data.SOURCES, "ptb", dataclasses.replace(remote, files=files))
    cache = tmp_path / "cache"
    with pytest.raises(data.ChecksumError, match=r"ptb\.valid\.txt from http://127\.0\.0\.1.*expected sha256 f{64}"):
        data.load("ptb-word", cache_dir=cache, progress=False)
    left = files_in(cache / "ptb")
    assert "ptb.valid.txt" not in left and "simple-examples.tgz" not in left
    assert not [n for n in left if n.endswith(".part")]


def test_damaged_cached_file_is_refused(server, tmp_path, ptb_source):
    cache = tmp_path / "cache"
    data.load("ptb-word", cache_dir=cache, progress=False)
    (cache / "ptb" / "ptb.test.txt").write_text(" edited \n")
    with pytest.raises(data.ChecksumError, match=r"cached file .*ptb\.test\.txt.*delete the file"):
        data.load("ptb-word", cache_dir=cache, progress=False)


def test_no_download_without_permission(server, tmp_path, ptb_source):
    with pytest.raises(FileNotFoundError, match=r"ptb\.train\.txt.*download=False"):
        data.load("ptb-word", cache_dir=tmp_path / "empty", download=False)
    assert server.hits == []


def test_broken_archive_is_reported_and_removed(server, tmp_path, ptb_source):
    (server.root / "simple-examples.tgz").write_bytes(b"this is not a tar file" * 10)
    cache = tmp_path / "cache"
    with pytest.raises(ValueError, match="not a valid tgz archive"):
        data.load("ptb-char", cache_dir=cache, progress=False)
    assert files_in(cache / "ptb") == []


def test_zip_extraction_with_prefix_check(server, tmp_path, monkeypatch):
    text = (" anarchism originated as a term of abuse" * 30).encode()
    (server.root / "text8.zip").write_bytes(make_zip({"text8": text}))
    check = data.FileCheck("text8", size=len(text), prefix=(100, sha(text[:100])))
    remote = dataclasses.replace(data.SOURCES["text8"], url=f"{server.url}/text8.zip", size=None, files=(check,))
    monkeypatch.setitem(data.SOURCES, "text8", remote)
    cache = tmp_path / "cache"
    c = data.load("text8", cache_dir=cache, progress=False)
    assert files_in(cache / "text8") == ["text8"]
    assert c.vocab.decode(c.train[:11]) == " anarchism "
    wrong = dataclasses.replace(check, prefix=(100, sha(text[1:101])))
    monkeypatch.setitem(data.SOURCES, "text8", dataclasses.replace(remote, files=(wrong,)))
    with pytest.raises(data.ChecksumError, match="of its first 100 bytes"):
        data.load("text8", cache_dir=tmp_path / "other", progress=False)


def test_enwik8_zip_with_archive_checksum(server, tmp_path, monkeypatch):
    raw = ("<page><title>Zürich</title></page>\n" * 40).encode("utf-8")
    archive = make_zip({"enwik8": raw})
    (server.root / "enwik8.zip").write_bytes(archive)
    remote = dataclasses.replace(
        data.SOURCES["enwik8"],
        url=f"{server.url}/enwik8.zip",
        sha256=sha(archive),
        size=len(archive),
        files=(data.FileCheck("enwik8", size=len(raw)),),
    )
    monkeypatch.setitem(data.SOURCES, "enwik8", remote)
    c = data.load("enwik8", cache_dir=tmp_path, progress=False)
    assert c.level == "byte" and 0xC3 in c.vocab and "ü" not in c.vocab
    assert len(c.train) + len(c.valid) + len(c.test) == len(raw)
    monkeypatch.setitem(data.SOURCES, "enwik8", dataclasses.replace(remote, sha256="0" * 64))
    with pytest.raises(data.ChecksumError, match="enwik8.zip: expected sha256 0{64}"):
        data.load("enwik8", cache_dir=tmp_path / "other", progress=False)
    assert files_in(tmp_path / "other") in ([], ["enwik8"])


def test_local_archives_need_no_network(tmp_path):
    files = ptb_files()
    tgz = tmp_path / "simple-examples.tgz"
    tgz.write_bytes(make_tgz({f"simple-examples/data/{n}": b for n, b in files.items()}))
    assert len(data.load("ptb-word", path=tgz).train) == 15
    text = b" one two three four five six seven eight nine ten" * 20 + b" "
    z = tmp_path / "text8.zip"
    z.write_bytes(make_zip({"text8": text}))
    c = data.load("text8", path=z)
    assert len(c.train) + len(c.valid) + len(c.test) == len(text)  # ends with a whole word: nothing dropped
    folder = tmp_path / "simple"
    (folder / "simple-examples" / "data").mkdir(parents=True)
    for n, b in files.items():
        (folder / "simple-examples" / "data" / n).write_bytes(b)
    chars = data.load("ptb-char", path=folder)
    assert chars.vocab.decode(chars.test) == "the co\ufffd sat\n"  # "w" is unseen in training
    broken = tmp_path / "broken.tgz"
    broken.write_bytes(b"not a tar archive at all" * 20)
    with pytest.raises(ValueError, match=r"broken\.tgz is not a valid tgz archive"):
        data.load("ptb-word", path=broken)
    lacking = tmp_path / "lacking.zip"
    lacking.write_bytes(make_zip({"other": b"x"}))
    with pytest.raises(FileNotFoundError, match="holds no file named text8"):
        data.load("text8", path=lacking)


def test_fetch_rejects_unknown_source():
    with pytest.raises(ValueError, match="unknown source 'nope'"):
        download.fetch("nope")
