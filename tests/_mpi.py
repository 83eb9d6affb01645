"""Starting ``mpiexec -n 2`` from a test: the launcher beside this Python (the MPICH wheel's) or on PATH,
one thread per rank, output captured, a timeout so that a hang fails the test instead of the suite."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TIMEOUT = 240  # seconds for one mpiexec job


def mpiexec() -> str:
    """The path of ``mpiexec``; skips without mpi4py, fails when mpi4py has no launcher."""
    pytest.importorskip("mpi4py")
    for folder in (Path(sys.executable).parent, None):
        found = shutil.which("mpiexec", path=str(folder) if folder else None)
        if found:
            return found
    pytest.fail("mpi4py is installed but no mpiexec was found (pip install mpich, or your MPI's mpiexec on PATH)")


def run(*args, cwd, timeout=TIMEOUT) -> subprocess.CompletedProcess:
    """``mpiexec -n 2 ARGS`` in ``cwd`` with OMP_NUM_THREADS=1."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run(
        [mpiexec(), "-n", "2", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
