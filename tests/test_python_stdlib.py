"""The python-stdlib corpus (multiscale_rnn.data.python_source): which files, in which order, the
split, unknown characters, files that are not UTF-8, and the errors."""

from pathlib import Path

import pytest

from multiscale_rnn import data
from multiscale_rnn.data.python_source import python_source_files, read_python_source, stdlib_path


def tree(root: Path) -> Path:
    """A small source tree: four files read, the others left out."""
    files = {
        "b.py": "def b():\n    return 2\n",
        "a.py": "x = 1\n",
        "pkg/z.py": "import a, b\n",
        "pkg/__init__.py": "",
        "test/t.py": "assert False\n",
        "pkg/tests/u.py": "assert False\n",
        "idlelib/i.py": "idle = 1\n",
        "site-packages/s.py": "installed = 1\n",
        "notes.txt": "not python\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_files_in_sorted_order_without_tests_and_installed_packages(tmp_path):
    root = tree(tmp_path)
    src = read_python_source(root)
    assert src.files == ["a.py", "b.py", "pkg/__init__.py", "pkg/z.py"]
    assert src.text == "x = 1\n" + "\n" + "def b():\n    return 2\n" + "\n" + "" + "\n" + "import a, b\n"
    assert [p.relative_to(root).as_posix() for p in python_source_files(root)] == src.files
    assert src.skipped == []


def test_split_is_90_5_5_by_position(tmp_path):
    root = tmp_path / "src"
    root.mkdir()
    text = "".join(f"value_{i} = {i}\n" for i in range(200))
    (root / "m.py").write_text(text)
    c = data.load("python-stdlib", path=root)
    assert c.name == "python-stdlib" and c.unit == "char"
    n = len(text)
    assert (len(c.train), len(c.valid), len(c.test)) == (n - 2 * round(0.05 * n), round(0.05 * n), round(0.05 * n))
    assert c.vocab.decode(c.train) == text[: len(c.train)]
    assert c.vocab.decode(c.test) == text[-len(c.test) :]


def test_max_chars_cuts_the_text(tmp_path):
    root = tree(tmp_path)
    assert read_python_source(root, max_chars=10).text == ("x = 1\n" + "\n" + "def b():")[:10]
    c = data.load("python-stdlib", path=root, max_chars=40)
    assert len(c.train) + len(c.valid) + len(c.test) == 40
    with pytest.raises(ValueError, match="max_chars"):
        read_python_source(root, max_chars=0)


def test_characters_unseen_in_training_become_the_unknown_symbol(tmp_path):
    root = tmp_path / "src"
    root.mkdir()
    (root / "m.py").write_text("a = 1\n" * 300 + "é = 1\n" * 20)  # é only in the last 5 %
    c = data.load("python-stdlib", path=root)
    assert c.vocab.unk_id is not None and "é" not in c.vocab.stoi
    assert c.unknown["valid"]["é"] + c.unknown["test"]["é"] == 20 and c.stats()["unknown"]["train"] == 0
    assert c.vocab.decode(c.test).count(c.vocab.unk) == c.unknown["test"]["é"]


def test_a_file_that_is_not_utf8_is_skipped(tmp_path):
    root = tree(tmp_path)
    (root / "c_latin1.py").write_bytes("name = 'Jos\xe9'\n".encode("latin-1"))
    first = read_python_source(root)
    again = read_python_source(root)
    assert first.skipped == ["c_latin1.py"] and "c_latin1.py" not in first.files
    assert first.text == again.text and "Jos" not in first.text


def test_errors_name_the_path(tmp_path):
    empty = tmp_path / "empty"
    (empty / "test").mkdir(parents=True)
    (empty / "test" / "only_a_test.py").write_text("x = 1\n")
    (empty / "readme.txt").write_text("no python here\n")
    with pytest.raises(ValueError, match=r"no \.py file under .*empty"):
        data.load("python-stdlib", path=empty)
    with pytest.raises(FileNotFoundError, match="does_not_exist"):
        data.load("python-stdlib", path=tmp_path / "does_not_exist")
    with pytest.raises(ValueError, match="not a folder"):
        data.load("python-stdlib", path=empty / "readme.txt")
    latin = tmp_path / "latin"
    latin.mkdir()
    (latin / "m.py").write_bytes(b"x = '\xe9'\n")
    with pytest.raises(ValueError, match="is UTF-8 .*m.py"):
        data.load("python-stdlib", path=latin)
    with pytest.raises(TypeError, match="seed"):
        data.load("python-stdlib", seed=1)
    with pytest.raises(ValueError, match="url"):
        data.load("python-stdlib", url="https://example.org/x")


def test_the_running_interpreters_standard_library(tmp_path):
    assert "python-stdlib" in data.LOADERS and data.LOADERS[-1] == "text"
    c = data.load("python_stdlib", max_chars=30_000)  # the corpus name is read as the others are
    files = python_source_files(stdlib_path())
    assert c.vocab.decode(c.train[:200]) == files[0].read_text(encoding="utf-8")[:200]
    assert not any("/test/" in f"/{p.relative_to(stdlib_path()).as_posix()}" for p in files)
