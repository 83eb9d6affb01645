"""Plots (Matplotlib). Every function takes ``ax=`` (a new figure when None) and returns the Axes."""

from .boundaries import boundaries, boundary_rows, hidden_norms
from .computation import bit_profile, class_computation, computation_profile
from .dynamics import bpc_by_position, gradient_decay, relative_loss, state_change
from .gradient_reach import gradient_reach

__all__ = [
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
]
