"""The repository keeps its declared style: for the Python, ruff's linter and formatter, configured in
pyproject.toml ([tool.ruff]), find nothing to change (fix with `ruff check --fix . && ruff format .`); for
the C++ under cpp/, clang-format, configured in .clang-format, finds nothing to change."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff(*args):
    pytest.importorskip("ruff", reason="ruff comes with the test extra: pip install '.[test]'")
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_ruff_lint_finds_nothing():
    p = _ruff("check", "--no-cache", ".")
    assert p.returncode == 0, p.stdout + p.stderr


def test_ruff_format_changes_nothing():
    p = _ruff("format", "--no-cache", "--check", ".")
    assert p.returncode == 0, p.stdout + p.stderr


def _clang_format():
    cf = pytest.importorskip("clang_format", reason="clang-format comes with the test extra: pip install '.[test]'")
    exe = Path(cf.get_executable("clang-format"))
    return str(exe) if exe.is_file() else shutil.which("clang-format")


def test_clang_format_changes_nothing():
    """The C++ keeps the style of .clang-format at the repository's root. Fix with
    `clang-format -i $(git ls-files 'cpp/*.cpp' 'cpp/*.hpp')`."""
    exe = _clang_format()
    assert exe, "the clang_format package has no clang-format executable"
    files = sorted(str(p.relative_to(ROOT)) for ext in ("*.cpp", "*.hpp") for p in (ROOT / "cpp").rglob(ext))
    assert files
    p = subprocess.run(
        [exe, "--dry-run", "--Werror", "--style=file", *files], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stdout + p.stderr
