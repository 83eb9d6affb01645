"""The command line: ``multiscale-rnn train | evaluate | sample | plot | presets | reproduce``
(or ``python -m multiscale_rnn``).

    multiscale-rnn train                                   # the quick preset: ~1 minute, prints BPC
    multiscale-rnn train --preset synthetic --epochs 3
    multiscale-rnn train --config run.toml --lr 1e-3       # flags override the file
    multiscale-rnn evaluate runs/quick.npz --split test
    multiscale-rnn sample runs/quick.npz --prompt "LOVE, n." --temperature 0.7
    mpirun -n 4 multiscale-rnn train --distributed ...     # data-parallel over MPI (docs/training.md)

Settings are resolved as defaults < preset < TOML config < flags (see ``docs/cli.md``). One module per job:

    settings.py   merging presets, config files, flags and a resumed run's stored settings; their rules
    build.py      what a run is built from its settings (model, optimiser, schedules, corpus, Trainer arguments)
    train.py      the train command
    commands.py   evaluate, sample and plot (the commands that read a checkpoint), presets, reproduce
    parser.py     the parser: every command and its flags
    errors.py     one error line per failure, exit statuses, MPI jobs ended together
"""

from __future__ import annotations

import sys
from typing import List, Optional

from .build import model_from_settings
from .errors import EXPECTED, cli_words, failed, message, stdout_closed
from .parser import bind_dash_values, build_parser, refuse_unknown
from .settings import check_settings, load_config, resolve_settings

__all__ = ["main", "resolve_settings", "build_parser", "model_from_settings", "load_config", "check_settings"]


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point; returns the exit status: 0 success, 1 an error (one ``error:`` line on stderr), 2 a
    malformed command line (one ``error:`` line), 130 interrupted, 141 standard output closed early
    (``| head``: quietly).

    An exception of another type (``RuntimeError``, ``AssertionError``, ...) is not foreseen: the
    traceback is printed first (for a bug report), then the same one ``error:`` line with the exception's
    type. Under ``--distributed`` any exception raised on one rank alone is printed with its rank and
    ends the whole MPI job (``MPI_Abort``) instead of leaving the other ranks waiting for it."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args, extras = parser.parse_known_args(bind_dash_values(parser, argv))
    if extras:
        refuse_unknown(parser, argv, extras)
    try:
        status = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return status
    except BrokenPipeError as e:  # | head closed standard output: stop quietly
        return stdout_closed(args, e)
    except EXPECTED as e:
        return failed(args, e, f"error: {cli_words(message(e))}", 1)
    except MemoryError as e:
        return failed(args, e, f"error: out of memory{': ' + str(e) if str(e) else ''}", 1)
    except KeyboardInterrupt as e:
        return failed(args, e, "interrupted", 130)
    except Exception as e:  # not foreseen: the traceback (a bug report needs it), then the error line
        return failed(args, e, f"error: {type(e).__name__}: {message(e)}", 1, trace=True)
