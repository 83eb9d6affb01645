"""The command line's entry point, ``multiscale-rnn`` (``multiscale_rnn.cli:main``): the command line lives
in ``multiscale_rnn.command_line`` (one module per job; see its docstring)."""

import sys

from .command_line import build_parser, check_settings, load_config, main, model_from_settings, resolve_settings

__all__ = ["main", "resolve_settings", "build_parser", "model_from_settings", "load_config", "check_settings"]

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
