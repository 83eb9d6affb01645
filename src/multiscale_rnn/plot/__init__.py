"""Plots (Matplotlib). Every function takes ``ax=`` (a new figure when None) and returns the Axes."""
from .boundaries import boundaries, hidden_norms

__all__ = ["boundaries", "hidden_norms"]
