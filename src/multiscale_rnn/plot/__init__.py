"""Plots (Matplotlib). Every function takes ``ax=`` (a new figure when None) and returns the Axes. One module
per family and what it shows: ``hm_lstm_boundaries``, ``vcrnn_computation``, ``fs_rnn_dynamics``,
``hornn_gradient_reach``; ``training_curves`` draws a training run; ``curves`` holds the drawing helpers they
share; ``figures`` draws a model's figure of a text by kind (``figure(model, kind, text, vocab)``, what
``multiscale-rnn plot`` runs)."""

from .figures import figure
from .fs_rnn_dynamics import bpc_by_position, gradient_decay, relative_loss, state_change
from .hm_lstm_boundaries import boundaries, boundary_rows, hidden_norms
from .hornn_gradient_reach import gradient_reach
from .strokes import computation, figure5, segments_from_ends, strokes
from .training_curves import training_curves
from .vcrnn_computation import bit_profile, class_computation, computation_profile

__all__ = [
    "figure",
    "boundaries",
    "boundary_rows",
    "hidden_norms",
    "gradient_decay",
    "state_change",
    "bpc_by_position",
    "relative_loss",
    "computation_profile",
    "bit_profile",
    "class_computation",
    "gradient_reach",
    "strokes",
    "segments_from_ends",
    "figure5",
    "computation",
    "training_curves",
]
