"""Matplotlib plots of models and analyses; each takes ``ax=`` and returns the Axes."""
from .dynamics import bpc_by_position, gradient_decay, relative_loss, state_change

__all__ = ["gradient_decay", "state_change", "bpc_by_position", "relative_loss"]
