"""The type checker over the package: ``python -m mypy src/multiscale_rnn`` with the settings of
pyproject.toml (``[tool.mypy]``) reports nothing. mypy comes with the ``test`` extra; without it the
check is skipped, saying so."""

import ast
import importlib.util
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import multiscale_rnn.models as models

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "multiscale_rnn"


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed (pip install -e .[test])")
def test_mypy_reports_nothing():
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "src/multiscale_rnn"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout + out.stderr


def _type_checking_star_imports(path: Path) -> set:
    """The modules star-imported under ``if TYPE_CHECKING:`` in ``path``."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names):
                    names.add(stmt.module.rsplit(".", 1)[-1])
    return names


@pytest.mark.parametrize("path", [SRC / "__init__.py", SRC / "models" / "__init__.py"], ids=["msr", "models"])
def test_type_checkers_see_every_model_module(path):
    """The families' names come from a loop over the modules of models/ at run time; type checkers read them
    from the star imports under TYPE_CHECKING, which must list every such module."""
    modules = {m.name for m in pkgutil.iter_modules(models.__path__)} - {"base", "registry"}
    modules = {m for m in modules if not m.startswith("_")}
    assert _type_checking_star_imports(path) == modules
