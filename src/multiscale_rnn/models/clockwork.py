"""Clockwork RNN (Koutník, Greff, Gomez & Schmidhuber, "A Clockwork RNN", ICML 2014): the
fixed-timescale baseline of the multiscale papers (Chung et al. 2017, Table 1).

The H hidden units form g modules of k = H / g units; module i (i = 0..g-1) has period
T_i = base^i and runs only at the steps t with t mod T_i = 0, keeping its state otherwise. It
reads its own units and those of every slower module (W_H block upper triangular):

    a^i_t = W_I^i x_t + b_ih^i + b_hh^i + sum_{j >= i} W_H^{ij} h^j_{t-1}
    h^i_t = tanh(a^i_t)   if t mod T_i = 0,   else h^i_t = h^i_{t-1}
    logits_t = W_dec h_t + b_dec

A step does only the work of the modules that run. The clock t counts steps since the state was
reset, from 0 (every module reads the first input), and is carried in the state (``clock_l0``)
across TBPTT chunks. Parameters use nn.RNN's names (``weight_ih_l0`` (H, E), ``weight_hh_l0``
(H, H), ``bias_ih_l0``, ``bias_hh_l0``); the blocks of ``weight_hh_l0`` below the block diagonal
are never read and get zero gradient. With ``modules=1`` the model is the Elman RNN.
See docs/models/baselines.md.
"""

from __future__ import annotations

import numpy as np

from .base import LanguageModel, core_declared

__all__ = ["ClockworkRNN"]


class ClockworkRNN(LanguageModel):
    """Clockwork RNN language model (Koutník et al. 2014), one layer.

    ``hidden_sizes``: one size H, a multiple of ``modules``. ``modules``: g, the number of modules
    (default 4). ``base``: module i runs every base^i steps (default 2, the paper's exponential
    periods 1, 2, 4, 8, ...).
    """

    core_name = "clockwork"
    aliases = ("clockwork", "cw-rnn")
    example_options = dict(embed_size=8, hidden_sizes=(12,), modules=3)  # periods 1, 2, 4
    family_options = core_declared("clockwork")

    def periods(self):
        """T_i = base^i for the g modules, fastest first."""
        return [self.config["base"] ** i for i in range(self.config["modules"])]

    def running_fraction(self, steps: int) -> float:
        """The mean fraction of the H units updated per step over ``steps`` steps from a reset:
        sum_t m_t / (g * steps), m_t the number of modules with t mod base^i = 0."""
        t = np.arange(int(steps))
        return float(sum((t % p == 0).sum() for p in self.periods()) / (self.config["modules"] * len(t)))
