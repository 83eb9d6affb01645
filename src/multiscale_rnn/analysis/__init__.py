"""Analyses of trained models that return NumPy arrays (plots in ``multiscale_rnn.plot``)."""
from .dynamics import (bpc_by_position, by_step, cell_names, gradient_decay, per_token_loss, relative_loss, state_change,
                       word_positions)

__all__ = ["gradient_decay", "state_change", "per_token_loss", "word_positions", "bpc_by_position", "relative_loss",
           "cell_names", "by_step"]
