"""``python -m multiscale_rnn train | evaluate | sample | presets``."""

import sys

from .cli import main

sys.exit(main())
