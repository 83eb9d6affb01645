"""The repository's Python keeps its declared style: ruff's linter and formatter, configured in
pyproject.toml ([tool.ruff]), find nothing to change. Fix with `ruff check --fix . && ruff format .`."""

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
