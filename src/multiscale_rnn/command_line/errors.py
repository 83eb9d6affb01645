"""How the command line reports an error: one ``error:`` line in the command line's words (the traceback
first for an error nobody foresaw), its exit status, and the MPI job ended when one rank alone fails."""

from __future__ import annotations

import os
import re
import sys
import time
import traceback
from typing import Callable, List, Match, Pattern, Tuple, Union

from .settings import flag

__all__ = ["EXPECTED", "cli_words", "message", "stdout_closed", "failed"]


#: Exceptions that report bad input or a bad environment: one ``error:`` line, no traceback.
EXPECTED = (ValueError, TypeError, IndexError, OSError, FloatingPointError, OverflowError, ImportError)


def _flag_of(name: str) -> str:
    """A Python argument name as the command line's flag (``embed_size`` -> ``--embed-size``)."""
    return {"vocab": "--data", "path": "--data-path"}.get(name, flag(name))


#: Model arguments the command line sets by flags of their own (or not at all), not by ``--option``.
_OWN_FLAGS = ("vocab_size", "embed_size", "hidden_sizes", "dropout", "dtype", "seed", "input_size")


#: Messages of the package written for Python callers, in the words of the command line: (pattern, words).
_CLI_WORDS: List[Tuple[Pattern[str], Union[str, Callable[[Match[str]], str]]]] = [
    (
        re.compile(r"(\w+) got unexpected arguments? ('[^;]+); it takes (.*)$"),
        lambda m: (
            f"--option {m.group(2).replace(chr(39), '')}: {m.group(1)} has no such option; its options: "
            + ", ".join(o for o in m.group(3).split(", ") if o not in _OWN_FLAGS)
            + " (and the flags --embed-size, --hidden-sizes, --dropout, --dtype, --seed)"
        ),
    ),
    (
        re.compile(r"^hidden_sizes must be \(fast size, slow size\)"),
        "--hidden-sizes must be FAST,SLOW (the sizes of the fast cells and of the slow cell)",
    ),
    (
        re.compile(r"embed_size must equal the hidden size (\d+), got (\S+) \(leave embed_size out to get it\)"),
        r"--embed-size must equal the hidden size \1, got \2 (give --embed-size \1)",
    ),
    (re.compile(r"(?:and )?pass path= to the loader"), "and give its path with --data-path"),
    (re.compile(r"pass path= to a local copy"), "give --data-path of a local copy"),
    (re.compile(r"load\('([\w-]+)'\) needs path="), r"--data \1 needs --data-path"),
    (re.compile(r"load\('([\w-]+)'\) got unexpected option\(s\): "), r"--data \1 takes no --data-option "),
    (
        re.compile(r"the '([\w-]+)' corpus is built in and takes no path"),
        r"--data \1 is built into the package and reads no file (leave --data-path out)",
    ),
    (re.compile(r"pass level='byte' \(--data-option level=byte\)"), "give --data-option level=byte"),
    (re.compile(r"^(unit|level|valid_fraction|test_fraction) must be"), r"--data-option \1 must be"),
    (re.compile(r"budget_minutes must be > 0, got (\S+)"), r"--budget must be a number of minutes > 0, got \1"),
    (
        re.compile(r"^(early_stopping|divergence) watches the validation loss, and fit has no validation data: .*$"),
        lambda m: (
            f"{_flag_of(m.group(1))} watches the validation loss, and the corpus has no valid split: give it one "
            f"(your own text: --data-option valid_fraction=0.05), or leave {_flag_of(m.group(1))} out"
        ),
    ),
    (re.compile(r"batch_size=(\d+) streams cannot be shared"), r"--batch-size \1: \1 streams cannot be shared"),
    (
        re.compile(r"the checkpoint was trained with (\w+)=(\S+), this trainer has \w+=(\S+):"),
        lambda m: (
            f"the checkpoint was trained with {_flag_of(m.group(1))} {m.group(2)}, this run has "
            f"{_flag_of(m.group(1))} {m.group(3)}:"
        ),
    ),
]


def cli_words(text: str) -> str:
    """``text`` with the fixes it names for Python callers (``leave embed_size out``, ``pass path=``) named by
    the command line's flags."""
    for pattern, words in _CLI_WORDS:
        text = pattern.sub(words, text)
    return text


def message(e: BaseException) -> str:
    """The text of an exception (its type when it has none)."""
    return str(e) or type(e).__name__


def stdout_closed(args, error: BaseException) -> int:
    """Standard output was closed by its reader (``multiscale-rnn presets | head``): no message; the rest
    of the output goes nowhere (else Python's flush at exit would fail again). Exit status 141, as a
    program ended by SIGPIPE. Under ``--distributed`` the other ranks are ended too."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout without a file descriptor (a test's capture)
        pass
    MPI = sys.modules.get("mpi4py.MPI")
    if getattr(args, "distributed", False) and MPI is not None and MPI.COMM_WORLD.Get_size() > 1:
        MPI.COMM_WORLD.Abort(141)
    return 141


def failed(args, error: BaseException, text: str, status: int, trace: bool = False) -> int:
    """Report an error and return the exit status. Under ``--distributed`` an error every rank
    raised together is reported by rank 0 alone; one raised on a single rank is reported with its
    rank and ends the whole MPI job (``MPI_Abort``), as the other ranks would wait for it forever.
    ``trace``: print the traceback first (an exception nobody foresaw)."""
    rank = None
    MPI = sys.modules.get("mpi4py.MPI")  # imported (and MPI started) by --distributed only
    if getattr(args, "distributed", False) and MPI is not None:
        rank = MPI.COMM_WORLD.Get_rank()
        if not getattr(error, "all_ranks", False):
            # one write, then a moment for mpiexec to pass it on before MPI_Abort tears the job down (a line
            # written just before the abort was lost under load)
            message = f"multiscale-rnn {args.command} (rank {rank}): {text}\n"
            sys.stderr.write((_traceback_text(error, f"rank {rank}: ") if trace else "") + message)
            sys.stderr.flush()
            time.sleep(0.5)
            MPI.COMM_WORLD.Abort(status)
    if rank in (None, 0):
        if trace and rank is None:
            _print_traceback(error)
        print(f"multiscale-rnn {args.command}: {text}", file=sys.stderr, flush=True)
        if trace and rank is None:
            print(
                "(unexpected: the traceback above shows where it was raised; please include it when you report "
                "the problem)",
                file=sys.stderr,
                flush=True,
            )
    return status


def _traceback_text(error: BaseException, prefix: str = "") -> str:
    """The traceback of ``error``, each line after ``prefix``."""
    lines = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return "".join(prefix + line + "\n" for line in lines.rstrip("\n").split("\n"))


def _print_traceback(error: BaseException, prefix: str = "") -> None:
    """The traceback of ``error`` on standard error, each line after ``prefix``."""
    sys.stderr.write(_traceback_text(error, prefix))
    sys.stderr.flush()
