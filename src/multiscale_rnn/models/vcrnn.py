"""Variable Computation RNN and GRU (Jernite, Grave, Joulin & Mikolov, ICLR 2017, Section 4, Appendix A).

One layer of D units reading x_t of size D (the embedding; ``embed_size`` defaults to D and must
equal it). At each step a scheduler decides how many leading units to update::

    m_t = sigm(u . h_{t-1} + v . x_t + b_m)                                     (eq. 7)
    (e_t)_i = Thres_eps(sigm(lambda (m_t D - i - o)))   i = 0..D-1               (eq. 8/11)
        o = 0 (mask_index="zero", m_t = 1 updates every unit) or 1 ("one": eq. 8 read with i = 1..D)
        Thres_eps(s) = 1 if s > 1 - eps, 0 if s < eps, else s
    h_bar = e_t . h_{t-1},  x_bar = e_t . x_t                                   (eq. 12)
    VCRNN: h_t = e_t . tanh(U h_bar + V x_bar + b) + (1 - e_t) . h_{t-1}          (eq. 13)
    VCGRU: r = sigm(U_r h_bar + V_r x_bar + b_r)                                 (eq. 14-16)
           z = e_t . sigm(U_z h_bar + V_z x_bar + b_z)
           h~ = tanh(U_n (r . h_bar) + V_n x_bar + b_n)          (reset before the product)
           h_t = z . h~ + (1 - z) . h_{t-1}

Training adds ``vc_penalty`` = w * mean_n f(m_n - m_bar) over the N = T*B columns (``Loss.aux``),
f = |.| (``penalty="l1"``, the paper's), max(0, .) (``"one_sided"``) or (.)^2 (``"l2"``); with
``penalty_scope="batch"`` (the other reading of the paper's Omega(m, m_bar)) w * f(mean_n m_n - m_bar)
instead, which holds the average computation at m_bar and leaves each step free. Gradients are
exact through the mask's sigmoid and zero where Thres clamps. Where e_t is 0 nothing is computed:
a step of one stream uses the leading d_t x d_t block of each matrix (``skip=True``). The scheduler starts
at m_t = m_bar everywhere (``scheduler_init="target"``: u = v = 0, b_m = logit(m_bar)). ``records()``
holds ``m``, ``d``, ``e`` and ``time`` (seconds per phase of the core, for benchmarks). See
docs/models/vcrnn.md for every option and reading.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

from .base import LanguageModel, Option, core_declared, sequence_and_symbols

__all__ = ["VCRNN", "VCGRU", "VCTrace", "sharpness_schedule", "equivalent_dim", "corpus_equivalent_dim", "corpus_trace"]


def equivalent_dim(d, hidden_size: int, unit: str = "vcrnn", gates: Optional[float] = None) -> float:
    """RNN-d (Table 3 of the paper): the size of an Elman RNN doing as many multiplications per step.

    An Elman RNN of size n reading inputs of size n does 2 n^2 multiplications per step (U h and
    V x). A VC step that updates d_t units does 2 G d_t^2, G = 1 (VCRNN) or 3 (VCGRU: three gates),
    plus 2 D for the scheduler (u . h and v . x over all D units). So

        RNN-d = sqrt(mean_t (G d_t^2 + D)),

    with d_t the measured number of leading units with e_t > 0 (``VCTrace.d``). ``gates`` overrides G:
    the paper's table counts a GRU as 2 Elman RNNs (GRU-1024 has RNN-d 1450 = sqrt(2) 1024), so
    ``gates=2`` gives VCGRU figures in the paper's convention.
    """
    d = np.asarray(d, dtype=np.float64)
    if d.size == 0:
        raise ValueError("equivalent_dim needs at least one step")
    if unit not in ("vcrnn", "vcgru"):
        raise ValueError(f"unit must be 'vcrnn' or 'vcgru', got {unit!r}")
    g = float(gates) if gates is not None else (3.0 if unit == "vcgru" else 1.0)
    if not g > 0:
        raise ValueError(f"gates must be > 0, got {gates!r}")
    return float(np.sqrt(np.mean(g * d * d + hidden_size)))


@dataclass
class VCTrace:
    """What one read of T symbols did. ``tokens`` (T,); ``text`` the symbols or None; ``m`` (T,)
    scheduler values m_t; ``d`` (T,) int, the leading units updated (1 + the last i with e_i > 0);
    ``e`` (D, T) the masks; ``equivalent_dim`` RNN-d of this read (:func:`equivalent_dim`)."""

    tokens: np.ndarray
    text: Optional[Sequence[str]]
    m: np.ndarray
    d: np.ndarray
    e: np.ndarray
    equivalent_dim: float

    def __len__(self) -> int:
        return int(len(self.m))


def sharpness_schedule(start: float = 0.1, end: float = 1.0, per_epoch: float = 0.1):
    """The paper's schedule of lambda, for ``Trainer(model_options={"sharpness": sharpness_schedule()})``:
    0.1 at the start, +0.1 per epoch, up to 1 (``multiscale_rnn.schedules.linear``)."""
    from ..schedules import linear

    return linear(start, end, per_epoch)


#: the scheduler's initialisations (the paper does not give one): ``scheduler_init`` of :class:`VCRNN` / :class:`VCGRU`
SCHEDULER_INITS = ("target", "uniform")


class _VCBase(LanguageModel):
    """Shared options and accounting of the VCRNN and VCGRU (see the module docstring)."""

    defaults = dict(embed_size=None, hidden_sizes=(1024,))
    aux_terms = ("vc_penalty",)
    example_options = dict(hidden_sizes=(12,), penalty_weight=0.05, block=4)
    family_options = core_declared("vcrnn") + (  # the VCGRU's table is the same (cpp/src/cores/vcrnn.cpp)
        Option(
            "scheduler_init",
            str,
            "target",
            choices=SCHEDULER_INITS,
            core=False,
            doc="the scheduler's initial u, v, b_m: 'target' u = v = 0, b_m = logit(m_bar) (m_t = m_bar at every "
            "step); 'uniform' PyTorch's rule as for the other weights (b_m ~ U(-1, 1))",
        ),
    )

    def reset_parameters(self, seed: int = 0) -> None:
        """The default initialisation (``multiscale_rnn.init.default``); then, with ``scheduler_init="target"``,
        the scheduler's u = v = 0 and b_m = logit(m_bar) (m_bar clipped to [0.001, 0.999]), so that m_t = m_bar
        at every step of the first update (docs/models/vcrnn.md, "The scheduler's initialisation")."""
        super().reset_parameters(seed)
        if self.config.get("scheduler_init", "target") == "target":
            P = self.parameters()
            m_bar = min(max(float(self.config.get("target", 0.3)), 1e-3), 1.0 - 1e-3)
            P["sched_weight_ih_l0"][...] = 0.0
            P["sched_weight_hh_l0"][...] = 0.0
            P["sched_bias_l0"][...] = np.log(m_bar / (1.0 - m_bar))

    def core_options(self, values, sizes):
        owner = type(self).__name__
        hidden = sizes["hidden_sizes"]
        if hidden is not None and not np.isscalar(hidden):
            hidden = tuple(hidden)
            if len(hidden) != 1:
                raise ValueError(f"{owner} has one layer: hidden_sizes must hold one size, got {hidden!r}")
            hidden = hidden[0]
        if sizes["embed_size"] is None:
            sizes["embed_size"] = hidden
        elif hidden is not None and sizes["embed_size"] != hidden:
            raise ValueError(
                f"{owner} masks x_t with the same e_t as h_(t-1), so embed_size must equal the hidden "
                f"size {hidden}, got {sizes['embed_size']!r} (leave embed_size out to get it)"
            )
        return super().core_options(values, sizes)

    @property
    def hidden_size(self) -> int:
        return int(self.config["hidden_sizes"][0])

    @property
    def sharpness(self) -> float:
        return float(self.options["sharpness"])

    @sharpness.setter
    def sharpness(self, lam: float) -> None:
        self.set_option("sharpness", lam)

    def equivalent_dim(self, d, gates: Optional[float] = None) -> float:
        """RNN-d of measured d_t values (see :func:`equivalent_dim`)."""
        return equivalent_dim(d, self.hidden_size, self.core_name, gates)

    figure_kinds = {"profile": "m_t of every step as a bar over its symbol, spaces marked (the paper's Figure 3)"}

    def draw_figure(self, kind: str, text_or_tokens, vocab=None, ax=None):
        """``profile``: :func:`multiscale_rnn.plot.computation_profile` of :meth:`trace` of the text."""
        from ..plot.vcrnn_computation import computation_profile

        trace = self.trace(text_or_tokens, vocab)
        return computation_profile(trace, width=min(80, len(trace)), ax=ax)  # rows of 80 steps, a short text in one

    def trace(self, text_or_tokens, vocab=None, state=None) -> VCTrace:
        """Read one sequence in evaluation mode and return what the scheduler did (a :class:`VCTrace`).

        ``text_or_tokens``: a string (encoded with ``vocab``, a :class:`multiscale_rnn.data.Vocab`) or a
        1-D sequence of ids. Starts from ``state`` (zeros by default, a dict, or ``KEEP``); the model
        carries the state after the read.
        """
        tokens, symbols = sequence_and_symbols(text_or_tokens, vocab)
        self.forward(tokens[None, :], state)
        rec = self.records()
        d = rec["d"][0].astype(np.int64)
        return VCTrace(
            tokens=tokens,
            text=symbols,
            m=rec["m"][0].astype(np.float64),
            d=d,
            e=rec["e"].astype(np.float64),
            equivalent_dim=self.equivalent_dim(d),
        )


class VCRNN(_VCBase):
    """Variable Computation Elman RNN (eq. 13). Parameters: ``weight_ih_l0`` V (D, D), ``weight_hh_l0``
    U (D, D), ``bias_l0`` b (D,), scheduler ``sched_weight_ih_l0`` v (1, D), ``sched_weight_hh_l0`` u (1, D),
    ``sched_bias_l0`` b_m (1,). State ``h_l0``."""

    core_name = "vcrnn"
    aliases = ("vc-rnn",)


class VCGRU(_VCBase):
    """Variable Computation GRU (eq. 14-16, reset before the product). Gate blocks [r; z; n] in
    ``weight_ih_l0`` (3D, D), ``weight_hh_l0`` (3D, D), ``bias_l0`` (3D,); scheduler as in :class:`VCRNN`."""

    core_name = "vcgru"
    aliases = ("vc-gru",)


def corpus_trace(model: _VCBase, tokens, batch_size: int = 1, chunk: int = 1000) -> Tuple[np.ndarray, np.ndarray]:
    """(m, d) of ``model`` reading a corpus (1-D token ids) in evaluation mode: the stream is cut into
    ``batch_size`` parallel streams read in chunks of ``chunk`` steps with the state carried; ``m`` and
    ``d`` hold m_t and d_t of every step of every stream (1-D, in reading order)."""
    from .base import KEEP

    tok = np.asarray(tokens)
    if tok.ndim != 1:
        raise ValueError(f"tokens must be 1-D, got shape {tok.shape}")
    if batch_size < 1 or chunk < 1:
        raise ValueError(f"batch_size and chunk must be >= 1, got {batch_size} and {chunk}")
    T = len(tok) // batch_size
    if T < 1:
        raise ValueError(f"{len(tok)} tokens cannot fill {batch_size} streams")
    streams = tok[: T * batch_size].reshape(batch_size, T)
    ms, ds = [], []
    state = None
    for t0 in range(0, T, chunk):
        model.forward(streams[:, t0 : t0 + chunk], state)
        state = KEEP
        rec = model.records()
        ms.append(rec["m"][0])
        ds.append(rec["d"][0])
    return np.concatenate(ms), np.concatenate(ds)


def corpus_equivalent_dim(
    model: _VCBase, tokens, batch_size: int = 1, chunk: int = 1000, gates: Optional[float] = None
) -> float:
    """RNN-d of ``model`` reading a corpus (1-D token ids) in evaluation mode (:func:`corpus_trace`): the
    measured d_t of every step of every stream enter :func:`equivalent_dim`."""
    _, d = corpus_trace(model, tokens, batch_size, chunk)
    return model.equivalent_dim(d, gates)


# The presets of this family (``multiscale-rnn train --preset NAME``; ``multiscale_rnn.presets`` gathers
# every registered family's): settings with the keys of a TOML config file (docs/cli.md).
def _preset(model, data, hidden, target, about, data_options=None, epochs=10):
    """A setting of Jernite et al. 2017 (Section 5): one VC layer, embedding = hidden size, the symmetric l1
    penalty towards m_bar, sharpness 0.1 + 0.1 per epoch up to 1. The paper gives no optimiser, batch,
    penalty weight or epoch count: Adam 2e-3, batch 32, 100 steps, clip 1, weight 1 (the measured default:
    mean m_t within 0.05 of m_bar on 3 seeds, measured at 512 units on 500k characters of PTB, not at a
    preset's size), 10 epochs (where the sharpness reaches 1) are this package's choices."""
    return {
        "about": "Jernite et al. 2017, " + about,
        "model": model,
        "embed_size": hidden,
        "hidden_sizes": [hidden],
        "data": data,
        "data_options": data_options or {},
        "options": {"target": target, "penalty": "l1", "penalty_weight": 1.0},
        "anneal": {"sharpness": [0.1, 1.0, 0.1]},
        "epochs": epochs,
        "batch_size": 32,
        "bptt": 100,
        "optimizer": "adam",
        "lr": 2e-3,
        "clip_norm": 1.0,
        "lr_schedule": "plateau",
        "lr_factor": 2.0,
        "patience": 0,
    }


PRESETS = {
    "ptb-char-vcrnn": _preset(
        "vcrnn",
        "ptb-char",
        1024,
        0.3,
        "Table 3 (needs --data-path): VCRNN-1024 on Penn Treebank characters; 1.46 bpc at RNN-d 760 "
        "in the paper (m_bar not given; 0.3 here).",
    ),
    "ptb-char-vcgru": _preset(
        "vcgru",
        "ptb-char",
        1024,
        0.3,
        "Table 3 (needs --data-path): VCGRU-1024 on Penn Treebank characters; 1.42 bpc at RNN-d 648 "
        "in the paper (m_bar not given; 0.3 here).",
    ),
    "ptb-bits-vcrnn": _preset(
        "vcrnn",
        "ptb-bits",
        1000,
        0.3,
        "Table 3 and Figure 2 (needs --data-path): VCRNN-1000 on Penn Treebank bits with 8 buffer "
        "bits after each character (0 and 24 in the paper's other panels: set data_options); "
        "0.215-0.231 bits per bit at RNN-d 340-460 without buffer in the paper.",
        data_options={"buffer_bits": 8},
    ),
    "nottingham-vcrnn": _preset(
        "vcrnn",
        "nottingham",
        500,
        0.3,
        "Table 1 (needs --data-path to the nottingham_abc folder): a VCRNN on folk tunes in ABC "
        "notation, one symbol per (pitch, length), standing in for the paper's Irish tunes "
        "(the paper: VCRNN-500 at RNN-d 233, test perplexity 8.51 on its own corpus).",
    ),
    **{
        f"text8-vcgru-{t}": _preset(
            "vcgru",
            "text8",
            1024,
            t,
            f"Table 3 (needs --data-path): VCGRU-1024 on text8 characters with m_bar = {t}; "
            + {0.3: "1.69 bpc at RNN-d 464", 0.4: "1.64 bpc at RNN-d 648", 0.5: "1.63 bpc at RNN-d 820"}[t]
            + " in the paper.",
        )
        for t in (0.3, 0.4, 0.5)
    },
}
