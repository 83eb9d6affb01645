"""Analyses of trained models that return NumPy arrays (plots in ``multiscale_rnn.plot``), one module per
family and what it shows: ``vcrnn_computation`` (the VCRNN's computation per symbol), ``fs_rnn_dynamics``
(the FS-RNN paper's network dynamics, for any model recording its cell states), ``hornn_gradient_reach``
(the gradient reaching back in time, the HORNN's motivation)."""

from .fs_rnn_dynamics import (
    bpc_by_position,
    by_step,
    cell_names,
    gradient_decay,
    per_token_loss,
    relative_loss,
    state_change,
    word_positions,
)
from .hornn_gradient_reach import compare_reach, gradient_reach, reach_length, relative_reach
from .vcrnn_computation import (
    bit_position_profile,
    character_profile,
    class_order,
    mean_by_class,
    music_computation,
    top_dimension_activity,
    trace_symbols,
)

__all__ = [
    "gradient_decay",
    "state_change",
    "per_token_loss",
    "word_positions",
    "bpc_by_position",
    "relative_loss",
    "cell_names",
    "by_step",
    "character_profile",
    "top_dimension_activity",
    "bit_position_profile",
    "mean_by_class",
    "class_order",
    "music_computation",
    "trace_symbols",
    "gradient_reach",
    "compare_reach",
    "relative_reach",
    "reach_length",
]
