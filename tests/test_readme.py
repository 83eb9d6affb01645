"""README's two set-up commands: CI runs the test command verbatim, and both install the build
requirements pyproject.toml declares before building without isolation (so run one after the other
they compile the core once)."""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python < 3.11
    import tomli as tomllib


def _commands():
    return [
        line.strip() for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("    pip install")
    ]


def test_readme_gives_exactly_two_set_up_commands_and_ci_runs_the_second():
    commands = _commands()
    assert len(commands) == 2, commands
    assert commands[0].endswith("multiscale-rnn train --preset quick --out runs/quick.npz")
    assert commands[1].endswith("python -m pytest -q tests")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert commands[1] in ci, "the last command of .ci/run must be README's test command, verbatim"


def test_both_commands_install_the_declared_build_requirements_and_build_without_isolation():
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    for command in _commands():
        first = command.split("&&")[0]
        named = re.findall(r'"([^"]+)"|(\S+)', first)
        named = {a or b for a, b in named} - {"pip", "install"}
        assert set(requires) <= named, (requires, first)
        assert "pip install --no-build-isolation" in command
