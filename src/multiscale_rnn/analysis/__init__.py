"""Analyses of trained models that return NumPy arrays (plots in ``multiscale_rnn.plot``)."""

from .computation import (
    bit_position_profile,
    character_profile,
    class_order,
    mean_by_class,
    music_computation,
    top_dimension_activity,
    trace_symbols,
)
from .dynamics import (
    bpc_by_position,
    by_step,
    cell_names,
    gradient_decay,
    per_token_loss,
    relative_loss,
    state_change,
    word_positions,
)
from .gradient_reach import compare_reach, gradient_reach, reach_length, relative_reach

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
