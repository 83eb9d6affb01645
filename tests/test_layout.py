"""The C++ core in folders by role, and no function over 80 lines, in the Python package and the C++ core:
a longer one is split into named steps (the HM-LSTM's forward, backward and pointwise parts are the
precedent)."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 80

# cpp/include/msrnn/<role>/NAME.hpp and cpp/src/<role>/NAME.cpp (docs/development.md, "Layout")
ROLES = {"kernels", "cells", "cores", "heads", "model"}


def test_cpp_sources_are_in_role_folders():
    headers = {p.relative_to(ROOT / "cpp/include/msrnn") for p in (ROOT / "cpp/include/msrnn").rglob("*.hpp")}
    sources = {p.relative_to(ROOT / "cpp/src") for p in (ROOT / "cpp/src").rglob("*.cpp")}
    for rel in sorted(headers | sources):
        assert len(rel.parts) == 2 and rel.parts[0] in ROLES, f"{rel}: not in one of the role folders {sorted(ROLES)}"
    cmake = (ROOT / "CMakeLists.txt").read_text()
    for rel in sorted(sources):
        assert f"cpp/src/{rel.as_posix()}" in cmake, f"cpp/src/{rel.as_posix()} is not in MSRNN_SOURCES"


def python_long():
    out = {}
    for path in sorted((ROOT / "src").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > LIMIT:
                    out[(str(path.relative_to(ROOT)), node.name)] = n
    return out


# A definition at namespace or class scope: a line ending in "{" whose text before the first "(" names a
# function (not a control statement or a type), indented by at most two spaces; it ends at the first "}"
# at the same indentation.
_DEF = re.compile(r"^( {0,2})(?!(if|for|while|switch|namespace|class|struct|enum|else|do)\b)\S[^=;]*\(.*\)[^;]*\{\s*$")


def cpp_long():
    out = {}
    for path in sorted(list((ROOT / "cpp").rglob("*.cpp")) + list((ROOT / "cpp").rglob("*.hpp"))):
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            m = _DEF.match(lines[i])
            if not m:
                i += 1
                continue
            end = re.compile("^" + m.group(1) + r"\}")
            j = i + 1
            while j < len(lines) and not end.match(lines[j]):
                j += 1
            if j - i + 1 > LIMIT:
                head = lines[i].split("(")[0].split()
                out[(str(path.relative_to(ROOT)), head[-1] if head else lines[i][:40])] = j - i + 1
            i = j + 1
    return out


def test_python_functions_fit_in_80_lines():
    found = python_long()
    assert found == {}, f"functions over {LIMIT} lines: {found}"


def test_cpp_functions_fit_in_80_lines():
    found = cpp_long()
    assert found == {}, f"functions over {LIMIT} lines: {found}"


def test_the_scanner_finds_a_long_function(tmp_path):
    """The C++ scanner is a line heuristic: it must see a long definition written the house way."""
    body = "\n".join(f"  x += {i};" for i in range(LIMIT))
    src = f"template <class S> void Foo<S>::bar(Mat<S>& x) {{\n{body}\n}}\n"
    lines = src.splitlines()
    m = _DEF.match(lines[0])
    assert m is not None and len(lines) > LIMIT
