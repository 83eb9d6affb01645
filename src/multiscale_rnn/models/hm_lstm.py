"""Hierarchical multiscale LSTM (Chung, Ahn & Bengio, ICLR 2017), with learned boundaries.

Layers l = 1..L of sizes H_l; h^0_t = x_t (the embedding), z^0_t = 1. At each step, bottom to top::

    s^l_t = r U^l_l h^l_{t-1} + z^l_{t-1} U^l_{l+1} h^{l+1}_{t-1} + z^{l-1}_t W^l_{l-1} h^{l-1}_t + b^l   (eq. 4-7)
            r = 1 (eq. 5, the paper) or 1 - z^l_{t-1} (flush_cut=True, the hard reset of the slides)
    i, f, o = sigm(.), g = tanh(.), zhat = hard_sigm(a s_z) = clamp((a s_z + 1) / 2, 0, 1)
    w_F = z^l_{t-1},  w_U = (1 - z^l_{t-1}) z^{l-1}_t,  w_C = (1 - z^l_{t-1})(1 - z^{l-1}_t)
    c^l_t = (1 - w_C) i*g + w_U f*c^l_{t-1} + w_C c^l_{t-1}            (eq. 2: FLUSH / UPDATE / COPY)
    h^l_t = (1 - w_C) o*tanh(c^l_t) + w_C h^l_{t-1}                    (eq. 3)
    z^l_t = step(zhat) | Bernoulli(zhat) | zhat,  kept from t-1 on COPY (copy_z="carry")   (eq. 8-9)

With ``rate_penalty=lambda > 0`` the objective gains the boundary-rate term (beyond the paper)::

    R = lambda / (T B) * sum_{l with a detector} sum_{t, b} z^l_t        (loss.aux["boundary_rate"])

With ``top_down=False`` (beyond the paper) the top-down term z^l_{t-1} U^l_{l+1} h^{l+1}_{t-1} is dropped
in every layer (no ``weight_td``): with the flush cut, layer l then restarts each segment from the
layer below alone. The top layer has no boundary detector (z^L = 0) unless ``top_boundary=True``.
With ``layer_norm=True`` each gate block (i, f, g, o) of s^l_t is layer-normalised after the bias (the boundary
row is not).
The head is the gated output module of eq. 11-12 (``head="gated"``): g^l_t = sigm(w^l [h^1_t; ...; h^L_t]),
h^e_t = ReLU(sum_l g^l_t W^e_l h^l_t), then the softmax. See docs/models/hm_lstm.md for every option.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from .base import LanguageModel, Option, core_declared, core_default, sequence_and_symbols

__all__ = [
    "HMLSTM",
    "HMTrace",
    "boundary_scores",
    "first_seen",
    "recipe_defaults",
    "WORD_RECIPE",
    "PROTOCOL_RECIPE",
    "PHRASE_RECIPE",
    "LEVELS_RECIPE",
]

OPS = ("COPY", "UPDATE", "FLUSH")  # op codes 0, 1, 2 in traces


@dataclass
class HMTrace:
    """What one HM-LSTM read of a sequence of T symbols did (arrays over layers x steps).

    ``z`` (L, T) boundary states z^l_t; ``zhat`` (L, T) hard-sigmoid values (NaN where not computed:
    COPY steps that carry z); ``ops`` (L, T) int, 0 COPY / 1 UPDATE / 2 FLUSH; ``h_norms`` (L, T)
    ||h^l_t||; ``gates`` (L, T) output gates g^l_t (None without the gated head); ``updates`` (L,)
    UPDATE + FLUSH counts per layer; ``reduction`` the fraction of layer updates saved against a
    stacked LSTM (L*T updates); ``scores`` per layer a dict precision / recall / f1 against
    ``reference`` boundaries (when given); ``text`` the symbols (for plots) or None; ``detectors``
    (L,) bool, true for the layers with a boundary detector (all but the top one, which has one with
    ``top_boundary=True``).
    """

    tokens: np.ndarray
    z: np.ndarray
    zhat: np.ndarray
    ops: np.ndarray
    h_norms: np.ndarray
    gates: Optional[np.ndarray]
    updates: np.ndarray
    reduction: float
    text: Optional[Sequence[str]] = None
    reference: Optional[np.ndarray] = None
    scores: Optional[list] = None
    tolerance: int = 0
    extra: Dict[str, np.ndarray] = field(default_factory=dict)
    detectors: Optional[np.ndarray] = None  # (L,) bool: the layer has a boundary detector

    @property
    def num_layers(self) -> int:
        return int(self.z.shape[0])

    def __len__(self) -> int:
        return int(self.z.shape[1])

    def window(self, start: int, stop: int) -> "HMTrace":
        """The steps [start, stop) as a trace (for plotting part of a long read); counts and scores
        are recomputed over the window."""
        sl = slice(start, stop)
        z = self.z[:, sl]
        ops = self.ops[:, sl]
        updates = (ops != 0).sum(axis=1)
        ref = None if self.reference is None else self.reference[sl]
        scores = None if ref is None else [boundary_scores(z[l] > 0.5, ref, self.tolerance) for l in range(len(z))]
        return HMTrace(
            tokens=self.tokens[sl],
            z=z,
            zhat=self.zhat[:, sl],
            ops=ops,
            h_norms=self.h_norms[:, sl],
            gates=None if self.gates is None else self.gates[:, sl],
            updates=updates,
            reduction=float(1.0 - updates.sum() / max(1, z.size)),
            text=None if self.text is None else self.text[sl],
            reference=ref,
            scores=scores,
            tolerance=self.tolerance,
            detectors=self.detectors,
        )


def first_seen(ends) -> np.ndarray:
    """Segment ends moved one step later, to where an end can first be read off the input (the separator
    after a word, or the next word's first letter without one): the reference the boundary scores of
    docs/models/hm_lstm.md use, with tolerance 1 also accepting the last symbol itself.

    >>> first_seen(np.array([0, 1, 0, 0, 1], dtype=bool)).astype(int).tolist()
    [0, 0, 1, 0, 0]
    """
    ends = np.asarray(ends, dtype=bool)
    out = np.zeros_like(ends)
    out[1:] = ends[:-1]
    return out


def boundary_scores(predicted, reference, tolerance: int = 0) -> Dict[str, float]:
    """Precision, recall and F1 of predicted boundary positions against reference ones.

    Both are boolean arrays over the same T steps. A predicted boundary is correct when it can be
    matched one-to-one (greedily, in time order) to a reference boundary at most ``tolerance`` steps
    away. With no predicted (reference) boundary, precision (recall) is 0.
    """
    p = np.flatnonzero(np.asarray(predicted, dtype=bool))
    r = np.flatnonzero(np.asarray(reference, dtype=bool))
    if np.asarray(predicted).shape != np.asarray(reference).shape:
        raise ValueError(
            f"predicted boundaries have shape {np.asarray(predicted).shape}, reference {np.asarray(reference).shape}"
        )
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    used = np.zeros(len(r), dtype=bool)
    hits = 0
    j0 = 0
    for t in p:
        while j0 < len(r) and r[j0] < t - tolerance:
            j0 += 1
        j = j0
        while j < len(r) and r[j] <= t + tolerance:
            if not used[j]:
                used[j] = True
                hits += 1
                break
            j += 1
    precision = hits / len(p) if len(p) else 0.0
    recall = hits / len(r) if len(r) else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return {
        "precision": float(precision),
        "recall": float(recall),
        "f1": float(f1),
        "predicted": int(len(p)),
        "reference": int(len(r)),
    }


def _rate_target_ok(v) -> bool:
    """None (no target), a number in [0, 1] (layer 1), a list of those (an empty list: none), or "auto" (the
    default recipe's for the model's depth)."""
    if v is None or (isinstance(v, str) and v == "auto"):
        return True
    vals = [v] if np.isscalar(v) and not isinstance(v, str) else list(v) if isinstance(v, (list, tuple)) else None
    return vals is not None and all(
        not isinstance(x, (bool, np.bool_))
        and isinstance(x, (int, float, np.integer, np.floating))
        and 0.0 <= float(x) <= 1.0
        for x in vals
    )


def _per_detector_ok(choices):
    """A check accepting one of ``choices`` or a non-empty list of them (one per layer with a detector)."""

    def ok(v) -> bool:
        vals = [v] if isinstance(v, str) else list(v) if isinstance(v, (list, tuple)) else None
        return bool(vals) and all(isinstance(x, str) and x in choices for x in vals or ())

    return ok


def _each_ok(v, ok) -> bool:
    """``v`` one value passing ``ok``, or a non-empty list of those (one per layer with a detector)."""
    vals = list(v) if isinstance(v, (list, tuple)) else [v]
    return bool(vals) and all(not isinstance(x, (bool, np.bool_)) and ok(x) for x in vals)


def _warmup_ok(v) -> bool:
    """A number of updates >= 0, or a non-empty list of those (one per layer with a detector)."""
    return _each_ok(v, lambda x: isinstance(x, (int, np.integer)) and x >= 0)


def _slack_ok(v) -> bool:
    """A finite number >= 0, or a non-empty list of those (one per layer with a detector)."""
    return _each_ok(v, lambda x: isinstance(x, (int, float, np.integer, np.floating)) and np.isfinite(x) and x >= 0)


def _check_count(values: list, detectors: int, name: str, owner: str) -> None:
    """A per-detector option gives at most one value per layer with a detector."""
    if len(values) > detectors:
        raise ValueError(
            f"{owner}: {name} has {len(values)} values, the model has {detectors} layer(s) with a boundary detector"
        )


#: The word recipe (z^1 at the word ends of the package's generated text; the 2-layer defaults until the
#: boundary protocol replaced it, and the base of the real-text presets): every detector reads everything,
#: z read as a blend, a rate target on layer 1, one warm-up for all detectors. Its values for the core's
#: options are the core's own defaults (cpp/src/cores/hm_lstm.cpp).
WORD_RECIPE = dict(
    detector_input="all",
    gradient=core_default("hm_lstm", "gradient"),
    rate_target=core_default("hm_lstm", "rate_target"),
    rate_weight=core_default("hm_lstm", "rate_weight"),
    rate_slack_below=core_default("hm_lstm", "rate_slack_below"),
    rate_slack_above=core_default("hm_lstm", "rate_slack_above"),
    warmup=500,
    compare_at="end",
)
#: The default recipe by depth (docs/models/hm_lstm.md, "The default recipe"): the values that the options
#: left at their defaults take. Up to 2 layers, the protocol recipe, chosen on the tune languages of the
#: boundary protocol (docs/studies/boundary_protocol.md): the word recipe with every detector reading only
#: the layer below, z read as a switch (so training skips COPY columns), the target held loosely and a
#: shorter warm-up.
PROTOCOL_RECIPE = dict(WORD_RECIPE, detector_input="below", gradient="switch", rate_weight=0.3, warmup=250)
#: The phrase recipe (z^1 at the word ends, z^2 at the phrase ends of the package's generated text; the 3-layer
#: defaults until the band recipe replaced them, and the recipe of the KanjiVG reproduction): every detector reads
#: only the layer below, z^1 read as a blend and z^2 as a switch, rate targets on layers 1 and 2 held harder,
#: layer 2's detector started 1000 updates after layer 1's, restarts compared just before it starts, 100 epochs.
PHRASE_RECIPE = dict(
    WORD_RECIPE,
    detector_input="below",
    gradient=["blend", "switch"],
    rate_target=[0.18, 0.05],
    rate_weight=20.0,
    warmup=[500, 1500],
    compare_at="last_start",
)

#: From 3 layers, the band recipe (words and phrases on text no recipe was tuned on: the boundary protocol's
#: held-out languages; docs/studies/boundary_protocol.md, "A band around layer 1's target"): the protocol recipe
#: with layer 2's target 0.05 held as a point, layer 1's 0.18 costing nothing from 0.06 to 0.38, mu = 1, layer 2's
#: detector started 500 updates after layer 1's, restarts compared at the end, 40 epochs.
LEVELS_RECIPE = dict(
    PROTOCOL_RECIPE,
    rate_target=[0.18, 0.05],
    rate_weight=1.0,
    rate_slack_below=[0.12, 0.0],
    rate_slack_above=[0.2, 0.0],
    warmup=[250, 750],
)


def recipe_defaults(num_layers: int, boundary: str = "step") -> dict:
    """The default recipe's options for an HM-LSTM of ``num_layers`` layers: :data:`PROTOCOL_RECIPE` up to 2,
    :data:`LEVELS_RECIPE` from 3 (with ``boundary="soft"``, whose cases are blends, z read as a blend
    throughout). Every recipe names every option whose default depends on the depth.

    >>> recipe_defaults(2)["gradient"], recipe_defaults(2)["warmup"], recipe_defaults(3)["warmup"]
    ('switch', 250, [250, 750])
    """
    recipe = LEVELS_RECIPE if num_layers >= 3 else PROTOCOL_RECIPE
    out = {k: list(v) if isinstance(v, list) else v for k, v in recipe.items()}
    if boundary == "soft":
        out["gradient"] = "blend"
    return out


def _text_ends(vocab, ids) -> Dict[str, np.ndarray]:
    """The word ends (whitespace words) and clause ends of the character text ``ids`` (``data.word_boundaries``,
    ``data.clause_boundaries``), each where the text has at least one; {} for other vocabularies. A symbol
    that is not one character (the unknown symbol) counts as a letter."""
    from ..data.corpus import clause_boundaries, word_boundaries

    if vocab.unit != "char" or vocab.level != "codepoint":
        return {}
    chars = [s if isinstance(s, str) and len(s) == 1 else "\ufffd" for s in vocab.itos]
    text = "".join(chars[int(i)] for i in ids)
    ends = {"word": word_boundaries(text), "clause": clause_boundaries(text)}
    if not any(c.isspace() for c in text):  # one run of symbols: no word ends to find
        del ends["word"]
    return {k: v for k, v in ends.items() if v[:-1].any()}


def _per_layer(value, L: int, detectors: int, name: str, owner: str) -> list:
    """``value`` (a string, or a list with one per layer with a detector) as a list of L values (the layers
    without a detector get the last one given)."""
    if isinstance(value, str):
        return [value] * L
    _check_count(value, detectors, name, owner)
    return list(value) + [value[-1]] * (L - len(value))


class HMLSTM(LanguageModel):
    """Hierarchical multiscale LSTM language model (see the module docstring for the equations).

    The defaults depend on the depth (docs/models/hm_lstm.md, "The default recipe"): up to 2 layers they
    are the protocol recipe (:data:`PROTOCOL_RECIPE`: z^1 comes to mark word ends, on the package's text
    and on the boundary protocol's held-out languages), from 3 layers the phrase recipe
    (:data:`PHRASE_RECIPE`: z^1 at word ends and z^2 at phrase ends of the generated text). The
    options marked "by depth" below take that recipe's value unless given; each one given keeps its
    value and the others still follow the depth. The paper's model instead: ``gradient="switch",
    flush_cut=False, detector_input="all", rate_target=None, warmup=0, head="gated"`` with the slope
    annealed (the preset ``ptb-char-hm-lstm``).

    Options:

    - ``boundary``: ``"step"`` (eq. 9, straight-through gradient through the hard sigmoid), ``"sample"``
      (Bernoulli(zhat), straight-through) or ``"soft"`` (z = zhat; the cases of eq. 2 become blends).
    - ``top_boundary``: False (paper: no detector in the top layer) or True (the top layer can FLUSH).
    - ``copy_z``: ``"carry"`` (paper: nothing is computed on COPY, z stays) or ``"recompute"``.
    - ``flush_cut``: True (default: recurrent term times 1 - z^l_{t-1}, the hard reset of the slides)
      or False (eq. 5 as printed).
    - ``top_down``: True (paper, eq. 5: the top-down term on FLUSH) or False (beyond the paper: no
      top-down term and no ``weight_td``; with the flush cut a boundary then costs layer l all it knew,
      which with layer norm raised the mean boundary F1 in docs/studies/hm_lstm_boundary_study.md).
    - ``gradient`` (by depth: ``"switch"``; ``"blend"`` with soft boundaries): ``"blend"`` (z also gets
      gradient through eq. 2-3 written as blends; the only choice for soft boundaries) or ``"switch"`` (the
      paper's text: the operation choice is a switch and z gets gradient through the z-gated terms only, so
      COPY columns do no work in training either). Changeable between chunks with
      ``set_option("blend", 1 or 0)``, e.g. blend first and switch once the boundaries have settled to keep
      training-time skipping:
      ``Trainer(model_options={"blend": schedules.step(1, 0, at_epoch=4)})``. A list gives each boundary its
      own reading, from z^1 up (beyond the paper): ``["blend", "switch"]`` reads z^1 as a blend and z^2
      as a switch (z^l's blend gradient runs through the operation weights of layers l and l+1);
      ``set_option("blend_l1", 0 or 1)`` changes one. Training skips COPY columns only when every
      boundary reads ``"switch"``.
    - ``detector_input`` (by depth: ``"below"``): ``"all"`` (paper, eq. 6:
      the boundary row reads the layer's own state, the layer below and the layer above) or ``"below"``
      (beyond the paper: it reads only the layer below, s_z = z^{l-1}_t W_z h^{l-1}_t + b_z, its recurrent
      and top-down weights held at zero); or a list,
      one per layer with a detector. ``["all", "below"]`` lets z^2 decide from what layer 1 hands up
      alone; ``"below"`` on every layer (z^1 then reads only the symbol, so it needs separators between
      words) is part of both default recipes.
    - ``rate_penalty``: lambda >= 0 of the boundary-rate term lambda / (T B) sum_l sum_t z^l_t added to
      the objective (``Loss.aux["boundary_rate"]``; default 0, off). Beyond the paper.
    - ``boundary_bias``: added to the bias of every boundary row at initialisation and when a detector
      restarts after its warm-up (default 0; negative starts with fewer boundaries, positive with more).
      Beyond the paper.
    - ``rate_target`` (by depth, ``"auto"``: 0.18 on layer 1 up to 2 layers, ``[0.18, 0.05]`` from 3): r_l,
      the fraction of steps with z^l = 1 aimed at: a number for layer 1 (0.18 is about one boundary per
      word of English-like text), a list with one value per layer with a detector, or None for none; the
      objective gains mu * sum_l (zbar^l - r_l)^2, zbar^l the chunk's fraction
      (``Loss.aux["boundary_target"]``). ``rate_weight`` (by depth: 0.3 up to 2 layers, 1 from 3): mu.
      ``rate_slack_below`` s_- and ``rate_slack_above`` s_+ (by depth: 0 up to 2 layers, ``[0.12, 0]`` and
      ``[0.2, 0]`` from 3, layer 1's target then costing nothing from 0.06 to 0.38; a number for every layer,
      or a list, one per layer with a detector) widen the target into a band that costs nothing: the term is
      mu * sum_l e_l^2 with e_l = zbar^l - r_l - s_+ above r_l + s_+, zbar^l - r_l + s_- below r_l - s_-, and
      0 between; ``rate_slack_above=1`` makes every r_l a floor (only too few boundaries cost),
      ``rate_slack_above=[1, 0]`` layer 1's alone. Beyond the paper. On real text a 3-layer model with the word
      recipe's options wants a target on layer 2 too, ``[0.18, 0.06]``: without one its detector drifts to 1
      on every step, or swings between rare and constant boundaries with the BPC swinging too
      (docs/studies/hm_lstm_real_text.md, "Real text with the word recipe"; the presets
      ``ptb-char-hm-lstm-recipe`` and ``text8-hm-lstm-recipe`` set it).
    - ``warmup`` (by depth: 250 up to 2 layers, ``[250, 750]`` from 3): the Trainer holds every detector
      off (z = 0, layer 1 a plain LSTM) for this many updates, then restarts each boundary row just below
      the threshold (0: no warm-up; the model's schedule ``{"detectors": schedules.step(0, 1,
      at_step=warmup)}``); or a list, one count per layer with a detector (``[250, 750]``: z^2 starts
      once z^1 has had 500 updates to settle; schedules ``detectors_l{l}``). Beyond the paper.
    - ``compare_at`` (by depth: ``"end"``): where :func:`multiscale_rnn.best_of` compares restarts by default
      (``select_after="auto"``, :meth:`selection_step`): after the last epoch, or (``"last_start"``, the
      phrase recipe's) just before the last detector of a per-layer warm-up starts. Beyond the paper.
    - ``rate_ramp`` (default 0): updates over which layer l's rate target rises from 0, when its detector
      starts, to r_l (a number for every layer with a detector, or a list; 0: the full target at once). The
      Trainer applies it as the model's schedule ``rate_target_l{l}`` (``schedules.linear``, negative, so no
      target, while the detector is held), also when the caller schedules the detectors. With the 3-layer
      defaults on real text, ``rate_ramp=[1000, 0]`` kept z^1 on the spaces most of the time, where the full
      target at once switched a set of letters on for good (docs/studies/hm_lstm_real_text.md, "Real text with the
      3-layer defaults"). Beyond the paper.
    - ``slope``: a of the hard sigmoid (annealed during training through ``set_option("slope", a)``).
    - ``layer_norm``: layer normalisation of each gate block of s^l_t (gains 1, shifts 0 at init).
    - ``skip``: gather the UPDATE/FLUSH columns and do no matrix work on COPY ones (True), or the
      plain masked path (False); both give the same numbers.
    - ``head``: ``"gated"`` (eq. 11-12, output embedding of ``head_size``, default the last layer's
      size) or ``"linear"`` (softmax on [h^1; ...; h^L]).

    The default recipe trains these defaults with the slope held at 1, five times from different seeds,
    and keeps the run of lowest validation BPC (``multiscale_rnn.best_of(..., restarts=5)``, or
    ``--restarts 5`` on the command line): the runs whose boundaries sit on the word ends are the ones
    with the lower validation BPC. On the generated text it finds the words in layer 1 on 30 of 30 runs
    with 2 layers (seeds 0-9, three set-ups) and on 8 of 10 seeds with 3, and the phrases in layer 2 of 3
    layers on 7-8 of 10 (its tables); on the protocol's held-out languages, the words on 48-50 of 85 spaced
    pairs with 2 layers, and with 3 on 50-51, both levels on 28-29.
    """

    core_name = "hm_lstm"
    aliases = ("hm-lstm", "hm-rnn")
    aux_terms = ("boundary_rate", "boundary_target")
    # both terms on and the detectors live from the first update (no warm-up)
    example_options = dict(
        embed_size=8, hidden_sizes=(10, 10), layer_norm=True, warmup=0, rate_target=0.3, rate_penalty=0.05
    )
    defaults = dict(embed_size=128, hidden_sizes=(512, 512, 512), head="linear")
    #: zhat of every column when a boundary row restarts at the end of the warm-up (weights 0)
    RESTART_ZHAT = 0.05
    # the core's table (cpp/src/cores/hm_lstm.cpp), its defaults the word recipe; rate_weight by depth; the per-layer
    # rows (blend_l{l}, detector_below_l{l}, rate_target_l{l}, rate_slack_*_l{l}) set from the keywords below
    family_options = core_declared("hm_lstm", derived=("rate_weight",), skip=("gradient",)) + (
        Option(
            "gradient",
            object,
            None,
            check=_per_detector_ok(("switch", "blend")),
            rule="'switch' or 'blend', or a list of those (one per layer with a detector)",
            core=False,
            replaces_core=True,
            doc="how z gets its gradient, by depth (the core's gradient and blend_l{l})",
        ),
        Option(
            "detector_input",
            object,
            None,
            check=_per_detector_ok(("all", "below")),
            rule="'all' or 'below', or a list of those (one per layer with a detector)",
            core=False,
            doc="what each boundary row reads, by depth (the core's detector_below_l{l})",
        ),
        Option(
            "rate_target",
            object,
            "auto",
            check=_rate_target_ok,
            rule="in [0, 1], or a list of those (one per layer with a detector), or None, or 'auto'",
            core=False,
            replaces_core=True,
            doc="r_l of the rate-target term, by depth (the core's rate_target_l{l})",
        ),
        *(
            Option(
                name,
                object,
                None,
                check=_slack_ok,
                rule="a number >= 0, or a list of those (one per layer with a detector)",
                core=False,
                replaces_core=True,
                doc=f"s_{side}^l, the band {where} r_l in which the rate-target term costs nothing, by depth "
                f"(the core's {name}_l{{l}})",
            )
            for name, side, where in (("rate_slack_below", "-", "below"), ("rate_slack_above", "+", "above"))
        ),
        Option(
            "warmup",
            object,
            None,
            check=_warmup_ok,
            rule="an integer >= 0, or a list of those (one per layer with a detector)",
            core=False,
            doc="updates each detector is held off for, by depth (the Trainer's schedule)",
        ),
        Option(
            "compare_at",
            str,
            None,
            choices=("end", "last_start"),
            core=False,
            doc="where best_of compares restarts by default: after the last epoch, or just before the last "
            "detector starts (by depth)",
        ),
        Option(
            "rate_ramp",
            object,
            0,
            check=_warmup_ok,
            rule="an integer >= 0, or a list of those (one per layer with a detector)",
            core=False,
            doc="updates over which a rate target rises from 0 once its detector starts",
        ),
        Option(
            "boundary_bias",
            float,
            0.0,
            check=lambda v: np.isfinite(v),
            rule="finite",
            core=False,
            doc="added to every boundary row's bias at initialisation and at a detector's restart after its warm-up",
        ),
    )

    def reset_parameters(self, seed: int = 0) -> None:
        """The default initialisation, then ``boundary_bias`` added to the bias of every boundary row, and
        the recurrent and top-down weights of the boundary rows that read only the layer below at zero."""
        super().reset_parameters(seed)
        shift = float(self.config.get("boundary_bias", 0.0))
        P = self.parameters()
        for l in self.detector_layers:
            h = self.config["hidden_sizes"][l]
            P[f"bias_l{l}"][4 * h] += shift
            if self.options.get(f"detector_below_l{l}"):
                for k in (f"weight_hh_l{l}", f"weight_td_l{l}"):
                    if k in P:
                        P[k][4 * h, :] = 0.0

    def core_options(self, values, sizes):
        hidden = sizes["hidden_sizes"]
        L = 1 if hidden is None or np.isscalar(hidden) else len(hidden)
        # the options left at their defaults (None; rate_target "auto", its None being "no target") take the
        # default recipe of this depth
        for name, value in recipe_defaults(L, values["boundary"]).items():
            unset = values[name] == "auto" if name == "rate_target" else values[name] is None
            if unset:
                values[name] = value
        for name in ("gradient", "detector_input"):  # JSON-able configs: a list, not a tuple
            if not isinstance(values[name], str):
                values[name] = list(values[name])
        for name in ("warmup", "rate_ramp"):
            w = values[name]
            values[name] = [int(n) for n in w] if isinstance(w, (list, tuple)) else int(w)
        # rate_target: a number is layer 1's target (none in a model without detectors), a list one per
        # detector layer from the bottom, None or [] no target; the config stores the list
        target = values.get("rate_target")
        detectors = L if values["top_boundary"] else L - 1
        if target is None:
            target = []
        elif np.isscalar(target):
            target = [float(target)] if detectors else []
        target = [float(v) for v in target]
        owner = type(self).__name__
        _check_count(target, detectors, "rate_target", owner)
        for name in ("warmup", "rate_ramp"):
            if isinstance(values[name], list):
                _check_count(values[name], detectors, name, owner)
        values["rate_target"] = target
        targets = {f"rate_target_l{l}": target[l] if l < len(target) else -1.0 for l in range(L)}  # -1: none
        reading = _per_layer(values["gradient"], L, detectors, "gradient", owner)  # the core checks soft + switch
        reads = _per_layer(values["detector_input"], L, detectors, "detector_input", owner)
        targets.update({f"blend_l{l}": 1.0 if reading[l] == "blend" else 0.0 for l in range(L)})
        targets.update({f"detector_below_l{l}": 1.0 if reads[l] == "below" else 0.0 for l in range(L)})
        targets["gradient"] = reading[0]
        for name in ("rate_slack_below", "rate_slack_above"):  # a number for every layer, or one per detector
            v = values[name]
            if isinstance(v, (list, tuple)):
                values[name] = [float(x) for x in v]
                slack = _per_layer(values[name], L, detectors, name, owner)
            else:
                values[name] = float(v)
                slack = [values[name]] * L
            targets.update({f"{name}_l{l}": slack[l] for l in range(L)})
        if values["head"] == "gated":
            top = int(hidden if np.isscalar(hidden) else hidden[-1])
            if values["head_size"] is None:
                values["head_size"] = top
            elif values["head_size"] < 1:
                raise ValueError(
                    f"{owner}: head_size must be >= 1 with head='gated' (the size of the gated output "
                    f"module's embedding, eq. 11-12), got {values['head_size']}; leave it out for the "
                    f"top layer's size ({top})"
                )
        return {**super().core_options(values, sizes), **targets}

    @property
    def num_layers(self) -> int:
        return len(self.config["hidden_sizes"])

    @property
    def detector_layers(self) -> List[int]:
        """The layers (from 0) that have a boundary detector: all but the top one, and the top one with
        ``top_boundary``."""
        L = self.num_layers
        return [l for l in range(L) if l < L - 1 or bool(self.config["top_boundary"])]

    def default_model_options(self) -> Dict[str, Any]:
        """The boundary warm-up the Trainer applies unless its ``model_options`` name ``detectors`` (or
        ``detectors_l{l}``): every detector held off for the first ``warmup`` updates, then on,
        ``{"detectors": step(0, 1, at_step=warmup)}``; with a list, layer l's detector for the first
        ``warmup[l]`` updates, ``{"detectors_l{l}": step(0, 1, at_step=warmup[l])}`` (a short list's
        last value for the layers above it). Nothing where the count is 0."""
        from ..schedules import linear, step

        w = self.config.get("warmup", 0)
        starts = self.warmup_counts()
        out: Dict[str, Any]
        if not isinstance(w, list):
            out = {"detectors": step(0, 1, at_step=w)} if w > 0 else {}
        else:
            out = {f"detectors_l{l}": step(0, 1, at_step=n) for l, n in starts.items() if n > 0}
        targets = self.config["rate_target"]
        for l, n in self._per_detector("rate_ramp").items():  # after the detectors': a restart sets the full target
            r = targets[l] if l < len(targets) else 0.0
            if n > 0 and r > 0:  # negative before the start: no target (the detector is held off then anyway)
                out[f"rate_target_l{l}"] = linear(-r * starts[l] / n, r, per_step=r / n)
        return out

    def _per_detector(self, name: str) -> Dict[int, int]:
        """A per-detector count option (``warmup``, ``rate_ramp``) by layer with a detector (from 0): one number
        for all, or a list (a short list's last value for the layers above it)."""
        w = self.config.get(name, 0)
        layers = self.detector_layers
        counts = (
            _per_layer(w, len(layers), len(layers), name, type(self).__name__)
            if isinstance(w, list)
            else [int(w)] * len(layers)
        )
        return dict(zip(layers, counts))

    def warmup_counts(self) -> Dict[int, int]:
        """The warm-up of each layer with a detector (from 0): the updates for which the Trainer holds it
        off (``warmup``, a short list's last value for the layers above it)."""
        return self._per_detector("warmup")

    @property
    def held_off(self) -> List[int]:
        """The layers (from 0) whose boundary detector is held off now (``detectors_l{l}`` = 0: during the
        warm-up, or a run shorter than it)."""
        return [l for l in self.detector_layers if not self.options.get(f"detectors_l{l}", 1.0)]

    figure_kinds = {
        "boundaries": "z^l_t of every boundary detector above the text, white at a boundary (the paper's Figure 3)",
        "heatmap": "||h^l_t|| of every layer, scaled to the layer's range, each detector's z^l_t under it (Figure 4)",
    }

    def end_of_run_notes(self, corpus, steps: int) -> List[str]:
        """After a command-line training run: the note on a model without detectors, the boundary report (on a
        corpus that knows its segments) and the note on detectors that never started (see ``no_detector_note``,
        ``boundary_report``, ``held_off_note``)."""
        notes = (self.no_detector_note(), self.boundary_report(corpus), self.held_off_note(steps))
        return [line for line in notes if line]

    def no_detector_note(self) -> Optional[str]:
        """For a model without any boundary detector (one layer, no ``top_boundary``: it runs as an LSTM with
        the HM-LSTM's cell): a line saying so and how to get boundaries; None otherwise."""
        if self.detector_layers:
            return None
        H = self.config["hidden_sizes"][0]
        return (
            f"note: this HM-LSTM has one layer and so no boundary detector (the top layer has none): it learned no "
            f"boundaries. Give it two layers or more (--hidden-sizes {H},{H})"
        )

    def held_off_note(self, steps: int) -> Optional[str]:
        """For a run that ended within a detector's warm-up: a line saying which detectors never started
        and how to change that; None otherwise."""
        if not self.held_off:
            return None
        starts = self.warmup_counts()
        held = [f"z{l + 1} (held off for {starts[l]:,} updates)" for l in self.held_off]
        which = held[0] if len(held) == 1 else ", ".join(held[:-1]) + " and " + held[-1]
        return (
            f"note: the run ended after {steps:,} updates, within the boundary warm-up: {which} never fired, so "
            f"the layer{'s' if len(held) > 1 else ''} above {'them' if len(held) > 1 else 'it'} never updated. "
            f"Train longer (--epochs) or shorten the warm-up (--option warmup=N, or a list per layer)"
        )

    def boundary_report(self, corpus, n: int = 2000) -> Optional[str]:
        """One line with the precision, recall and F1 of each detector's boundaries on the first ``n``
        validation symbols against the ends of its level where they can first be seen, tolerance 1, and the
        fraction of steps with z = 1. On a corpus that knows its segments (the generated text) z^1 is scored
        against its words and z^2 its phrases; on other character text z^1 against the whitespace words
        (``data.word_boundaries``) and z^2 against the clause ends (``data.clause_boundaries``), where the
        text has them. None otherwise (no detector, no validation text, no level to score)."""
        if self.vocab_size is None:  # pen strokes: scored against their own boundaries elsewhere
            return None
        if corpus.valid is None or len(corpus.valid) < 2:
            return None
        ids = np.asarray(corpus.valid[:n])
        refs, names = (getattr(corpus, "boundaries", None) or {}).get("valid"), ("word", "phrase")
        if not refs:  # plain character text: the whitespace words and the clauses
            refs, names = _text_ends(corpus.vocab, ids), ("word", "clause")
        levels = [(l, level) for l, level in zip(self.detector_layers, names) if level in refs]
        if not levels:
            return None
        z = self.trace(ids).z > 0.5  # (L, T)
        parts = []
        for l, level in levels:
            sc = boundary_scores(z[l], first_seen(refs[level][: len(ids)]), 1)
            parts.append(
                f"z{l + 1} against {level} ends: precision {sc['precision']:.2f}, recall {sc['recall']:.2f}, "
                f"F1 {sc['f1']:.2f} (z{l + 1} = 1 on {z[l].mean():.1%} of steps)"
            )
        return f"boundaries on the first {len(ids)} validation symbols (tolerance 1): " + "; ".join(parts)

    def selection_step(self) -> Optional[int]:
        """With ``compare_at="last_start"`` (the phrase recipe) and a warm-up per layer whose starts differ, the
        update at which the last detector starts: restarts compared just before it are judged on the boundaries
        of the layers below, which the last detector then builds on (docs/studies/hm_lstm_recipes.md, "The phrase
        recipe"); otherwise None (compared at the end, as the default recipes are at every depth)."""
        if self.config.get("compare_at") != "last_start" or not isinstance(self.config.get("warmup", 0), list):
            return None
        counts = set(self.warmup_counts().values())
        return max(counts) if len(counts) > 1 else None

    def selection_boundaries(self, ids) -> np.ndarray:
        """z^1 on the 1-D ids ``ids`` (1-D bools, read from zero state): the boundaries
        ``best_of(select="agreement")`` compares between restarts."""
        return self.trace(np.asarray(ids)).z[0] > 0.5

    def set_option(self, name: str, value: float) -> None:
        """As for every model (``slope``, ``skip``, ``blend``, ``rate_penalty``, ``rate_weight``,
        ``rate_target_l{l}``), plus ``detectors`` (every detector) and ``detectors_l{l}`` (layer l's):
        0 holds the detector off (its boundary row at weights 0 and a bias far below the threshold:
        z^l = 0 everywhere, no gradient reaching the row, its rate target off; with every detector off
        layer 1 is a plain LSTM and the layers above are never updated); 1 switches it back on, and a
        detector switched on from 0 restarts at weights 0 and the bias that puts zhat at
        ``RESTART_ZHAT`` (just below the threshold) on every column, plus ``boundary_bias``, so that what it
        learns comes from the trained layers below it, with its rate target (``rate_target``) back on. Setting the value
        a detector already has does nothing (a resumed run re-applies its schedules)."""
        if name == "detectors":
            layers = self.detector_layers
        elif name.startswith("detectors_l"):
            suffix = name[len("detectors_l") :]
            if not (suffix.isdigit() and int(suffix) in self.detector_layers):
                raise ValueError(
                    f"unknown option {name!r}: the layers with a boundary detector are "
                    + ", ".join(f"'detectors_l{d}'" for d in self.detector_layers)
                )
            layers = [int(suffix)]
        else:
            super().set_option(name, value)
            return
        if not isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)) or float(value) not in (
            0.0,
            1.0,
        ):
            raise ValueError(f"option {name!r} must be 0 (held off) or 1 (on), got {value!r}")
        on = float(value) == 1.0
        slope = float(self.options["slope"])
        targets = self.config["rate_target"]
        P = self.parameters()
        for l in layers:
            if on == bool(self.options.get(f"detectors_l{l}", 1.0)):
                continue
            h = self.config["hidden_sizes"][l]
            for k in ("weight_ih", "weight_hh", "weight_td"):
                if f"{k}_l{l}" in P:
                    P[f"{k}_l{l}"][4 * h, :] = 0.0
            restart = (2.0 * self.RESTART_ZHAT - 1.0) / slope + float(self.config.get("boundary_bias", 0.0))
            P[f"bias_l{l}"][4 * h] = restart if on else -1e4
            super().set_option(f"rate_target_l{l}", targets[l] if on and l < len(targets) else -1.0)
            self.options[f"detectors_l{l}"] = 1.0 if on else 0.0
        self.options["detectors"] = float(all(self.options.get(f"detectors_l{l}", 1.0) for l in self.detector_layers))

    @property
    def slope(self) -> float:
        return float(self.options["slope"])

    @slope.setter
    def slope(self, a: float) -> None:
        self.set_option("slope", a)

    def draw_figure(self, kind: str, text_or_tokens, vocab=None, ax=None):
        """``boundaries``: :func:`multiscale_rnn.plot.boundaries` (the paper's Figure 3) and ``heatmap``:
        :func:`multiscale_rnn.plot.hidden_norms` (Figure 4, with its colour bar) of :meth:`trace` of the text."""
        from ..plot import hm_lstm_boundaries as plots

        trace = self.trace(text_or_tokens, vocab)
        if kind == "boundaries":
            return plots.boundaries(trace, width=min(90, len(trace)), ax=ax)  # rows of 90 steps, a short text in one
        return plots.hidden_norms(trace, ax=ax)

    def trace(
        self, text_or_tokens, vocab=None, reference_boundaries=None, *, state=None, tolerance: int = 0
    ) -> HMTrace:
        """Read one sequence and return what every layer did (an :class:`HMTrace` of NumPy arrays).

        ``text_or_tokens``: a string (encoded with ``vocab``, a :class:`multiscale_rnn.data.Vocab`) or
        a 1-D sequence of ids. ``reference_boundaries``: a boolean array of length T (e.g. the word
        boundaries of the synthetic generator, true at the last symbol of a segment), scored against
        each layer's z^l_t with :func:`boundary_scores` (``tolerance`` steps of slack). Runs in
        evaluation mode from ``state`` (zeros by default); the model's state is left after the read.
        """
        tokens, symbols = sequence_and_symbols(text_or_tokens, vocab)
        self.forward(tokens[None, :], state)
        rec = self.records()
        L, T = self.num_layers, len(tokens)
        z = np.stack([rec[f"z_l{l}"][0] for l in range(L)])
        zhat = np.stack([rec[f"zhat_l{l}"][0] for l in range(L)])
        ops = np.stack([rec[f"op_l{l}"][0] for l in range(L)]).astype(np.int8)
        norms = np.stack([rec[f"hnorm_l{l}"][0] for l in range(L)])
        gates = rec["gate"].astype(np.float64) if "gate" in rec else None
        updates = (ops != 0).sum(axis=1)
        reduction = 1.0 - updates.sum() / float(L * T)
        scores = None
        ref = None
        if reference_boundaries is not None:
            ref = np.asarray(reference_boundaries, dtype=bool)
            if ref.shape != (T,):
                raise ValueError(f"reference_boundaries has shape {ref.shape}, expected ({T},) like the tokens")
            scores = [boundary_scores(z[l] > 0.5, ref, tolerance) for l in range(L)]
        return HMTrace(
            tokens=tokens,
            z=z.astype(np.float64),
            zhat=zhat.astype(np.float64),
            ops=ops,
            h_norms=norms.astype(np.float64),
            gates=gates,
            updates=updates,
            reduction=float(reduction),
            text=symbols,
            reference=ref,
            scores=scores,
            tolerance=int(tolerance),
            detectors=np.isin(np.arange(L), self.detector_layers),
        )


# The presets of this family (``multiscale-rnn train --preset NAME``; ``multiscale_rnn.presets`` gathers
# every registered family's): settings with the keys of a TOML config file (docs/cli.md).
PRESETS = {
    "ptb-char-hm-lstm": {
        "about": "The paper's Penn Treebank setting (Chung, Ahn & Bengio 2017, Section 4.1; needs --data-path): "
        "a LayerNorm HM-LSTM of 3 layers of 512 units, embedding 128, gated output module with an "
        "output embedding of 512, step boundaries with slope annealing a = min(5, 1 + 0.04 epoch), "
        "Adam 2e-3, batch 64, 100 steps, gradient norm clipped to 1, learning rate divided by 50 "
        "when validation stops improving. The paper gives no epoch count; 100 epochs is where the "
        "slope reaches 5.",
        "model": "hmlstm",
        "embed_size": 128,
        "hidden_sizes": [512, 512, 512],
        "data": "ptb-char",
        "options": {
            "boundary": "step",
            "layer_norm": True,
            "head": "gated",
            "head_size": 512,
            "gradient": "switch",
            "flush_cut": False,
            "detector_input": "all",
            "rate_target": None,
            "warmup": 0,
        },
        "anneal": {"slope": [1.0, 5.0, 0.04]},
        "epochs": 100,
        "batch_size": 64,
        "bptt": 100,
        "optimizer": "adam",
        "lr": 2e-3,
        "clip_norm": 1.0,
        "lr_schedule": "plateau",
        "lr_factor": 50.0,
        "patience": 0,
        "out": "runs/ptb-char-hm-lstm.npz",
    },
    **{
        f"{name}-hm-lstm-recipe": {
            "about": f"The package's HM-LSTM recipe on {what} (needs --data-path), as measured in "
            'docs/studies/hm_lstm_real_text.md, "Real text with the word recipe": 3 layers of 128, embedding 64, '
            "layer norm, linear head, boundary warm-up, rate targets 0.18 on layer 1 and 0.06 on layer 2 "
            "(without the second, layer 2's boundaries drifted in one run per corpus), slope 1, Adam 2e-3, "
            "batch 64, 100 steps, "
            f"gradient norm clipped to 1, {budget}.",
            "model": "hmlstm",
            "embed_size": 64,
            "hidden_sizes": [128, 128, 128],
            "data": name,
            # the word recipe (hm_lstm.WORD_RECIPE) with a second target: a 3-layer model's own defaults are the
            # band recipe
            "options": {
                "layer_norm": True,
                "detector_input": "all",
                "gradient": "blend",
                "rate_target": [0.18, 0.06],
                "rate_weight": 5.0,
                "rate_slack_below": 0.0,
                "rate_slack_above": 0.0,
                "warmup": 500,
            },
            "epochs": epochs,
            "batch_size": 64,
            "bptt": 100,
            "optimizer": "adam",
            "lr": 2e-3,
            "clip_norm": 1.0,
            "out": f"runs/{name}-hm-lstm-recipe.npz",
        }
        for name, what, epochs, budget in (
            (
                "ptb-char",
                "Penn Treebank characters",
                13,
                "13 epochs (the measured budget, about 45 minutes on one core)",
            ),
            (
                "text8",
                "text8",
                5,
                "5 epochs (the measured budget on the prefix in shared/data, about 40 minutes on one "
                "core; 5 epochs of the full text8 take 8 times longer)",
            ),
        )
    },
    "synthetic-hm-lstm": {
        "about": "A small HM-LSTM on the generated hierarchical text with the default recipe, which up to 2 "
        "layers is the protocol recipe (boundary warm-up, rate target, five restarts of which the lowest "
        "validation BPC is kept): its first-layer boundaries come to mark the ends of the words within ten "
        "seconds (on 30 of 30 recipe runs measured: seeds 0-9, each module on one thread and avx512 on two; "
        'see docs/models/hm_lstm.md, "The default recipe").',
        "model": "hmlstm",
        "embed_size": 16,
        "hidden_sizes": [32, 32],
        "data": "synthetic",
        "data_options": {"n_chars": 40_000, "seed": 0},
        "epochs": 40,
        "batch_size": 32,
        "bptt": 50,
        "optimizer": "adam",
        "lr": 5e-3,
        "clip_norm": 1.0,
        "restarts": 5,
        "out": "runs/synthetic-hm-lstm.npz",
    },
    "synthetic-hm-lstm-phrases": {
        "about": "A 3-layer HM-LSTM on the generated hierarchical text with the default recipe, which from 3 "
        "layers is the band recipe: its first layer marks the words and its second layer the phrases "
        "(both on 6-7 of 10 recipe seeds on each set-up measured, AMD Zen 3 and Zen 5, avx2 and avx512) "
        '(docs/models/hm_lstm.md, "The default recipe"): every boundary detector reads only the layer '
        "below, z read as a switch, rate targets 0.18 and 0.05 with weight 1, layer 1's costing nothing "
        "from 0.06 to 0.38, layer 1's detector started after 250 updates and layer 2's after 750, five "
        "runs of 40 epochs of which the lowest validation BPC is kept (half a minute to a minute a run "
        "on one core). Seed 25 (runs 25-29, the table's seed 5) found both levels on every set-up measured; "
        "--seed 0 finds the words only.",
        "model": "hmlstm",
        "embed_size": 16,
        "hidden_sizes": [32, 32, 32],
        "data": "synthetic",
        "data_options": {"n_chars": 40_000, "seed": 0, "valid_fraction": 0.1, "test_fraction": 0.0},  # the study's
        "seed": 25,
        "epochs": 40,
        "batch_size": 32,
        "bptt": 50,
        "optimizer": "adam",
        "lr": 5e-3,
        "clip_norm": 1.0,
        "restarts": 5,
        "out": "runs/synthetic-hm-lstm-phrases.npz",
    },
}
