"""The base of every model: encoder (token embedding or linear map) -> recurrent core -> head -> softmax cross-entropy.

Every model offers the same low-level API (NumPy in and out):

- ``parameters()``: dict name -> writable NumPy view into the model's one flat parameter buffer,
  with PyTorch's names and layouts where PyTorch has the same layer (``weight_ih_l0`` (4H, E), ...).
- ``forward(tokens, state=None)`` -> ``(logits (B, T, V), new_state)``.
- ``loss_and_grad(tokens, targets, state=None)`` -> ``(Loss: mean cross-entropy in nats with the
  core's auxiliary terms in .aux, grads, new_state)``.
- ``state``: None (zeros), a dict (PyTorch's ``hx`` style) or ``KEEP`` (continue from the carried
  state); ``reset_state``, ``get_state``, ``set_state`` manage the carried state.
- ``dtype="float64"`` on every model, for gradient checks.
- ``inference_precision``: ``"float32"`` (default), ``"bfloat16"`` or ``"bfloat16-emulated"`` for
  evaluation-mode passes of float32 LSTM models (see ``LanguageModel.inference_precision``).

State is a dict name -> array (B, size), e.g. ``{"h_l0": ..., "c_l0": ...}``; ``None`` means zeros.
"""

from __future__ import annotations

import inspect
import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from .._checks import did_you_mean
from .._native import core as _core
from ..limits import check_model_size

State = Dict[str, np.ndarray]

# Pass as ``state`` to continue from the state the model carries (the last call's final state, or
# what ``reset_state``/``set_state`` left), PyTorch's ``hx`` being the explicit alternative.
KEEP = "keep"


def _is_word(w) -> bool:
    """Whether ``w`` is an integer in [0, 2**64): one word of the generator's state."""
    return isinstance(w, int) and not isinstance(w, bool) and 0 <= w < 2**64


class Loss(float):
    """A mean cross-entropy (nats), as a float, with the core's auxiliary objective terms.

    ``aux``: dict name -> value of each term the core adds to the objective (e.g. the VCRNN's
    ``"vc_penalty"``; empty for most cores). ``total``: the objective, cross-entropy plus every
    auxiliary term, whose gradient ``loss_and_grad`` returns.
    """

    aux: Dict[str, float]

    def __new__(cls, xent: float, aux: Optional[Dict[str, float]] = None):
        obj = super().__new__(cls, xent)
        obj.aux = {str(k): float(v) for k, v in (aux or {}).items()}
        return obj

    @property
    def total(self) -> float:
        return float(self) + sum(self.aux.values())

    def __repr__(self) -> str:
        return f"Loss({float(self)!r}, aux={self.aux!r})" if self.aux else repr(float(self))


_DTYPES = {"float32": np.float32, "float64": np.float64}


def as_tokens(x, name: str, vocab_size: Optional[int]) -> np.ndarray:
    """Check a (batch, steps) array of token ids and return it as C-contiguous int32.

    Raises TypeError for a non-integer dtype, ValueError for a wrong shape and IndexError naming
    the first id outside [0, vocab_size) with its (stream, step) position (``vocab_size=None``
    leaves the range to the core, which checks it with the same message).
    """
    a = np.asarray(x)
    if a.dtype == bool or not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{name} must be an integer array of token ids, got dtype {a.dtype}")
    if a.ndim != 2:
        raise ValueError(f"{name} must have shape (batch, steps), got shape {a.shape}")
    if a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"{name} is empty: shape {a.shape}")
    if vocab_size is not None:
        bad = (a < 0) | (a >= vocab_size)
    elif a.dtype.itemsize > 4 or a.dtype == np.uint32:  # would not survive the cast to int32
        bad = (a < 0) | (a > np.iinfo(np.int32).max)
    else:
        bad = None
    if bad is not None and bad.any():
        b, t = np.argwhere(bad)[0]
        limit = vocab_size if vocab_size is not None else "2**31"
        raise IndexError(f"{name} id {int(a[b, t])} at (stream {b}, step {t}) is outside the vocabulary [0, {limit})")
    return np.ascontiguousarray(a, dtype=np.int32)


def sequence_and_symbols(text_or_tokens, vocab=None):
    """One sequence for a trace: (tokens (T,) int64, symbols or None). ``text_or_tokens`` is a string
    (encoded with ``vocab``, required) or a 1-D sequence of ids (decoded one by one when ``vocab`` is
    given), or for a model reading vectors a (T, D) float array (returned as is, symbols None).
    ``symbols`` holds one printable piece per token, or None when they do not pair up."""
    arr = None if isinstance(text_or_tokens, (str, bytes)) else np.asarray(text_or_tokens)
    if arr is not None and arr.ndim == 2 and np.issubdtype(arr.dtype, np.floating):
        return arr, None
    if isinstance(text_or_tokens, (str, bytes)):
        if vocab is None:
            raise ValueError("a text needs its vocabulary: trace(text, vocab=corpus.vocab)")
        tokens = np.asarray(vocab.encode(text_or_tokens), dtype=np.int64)
        symbols = list(text_or_tokens) if isinstance(text_or_tokens, str) else None
    else:
        tokens = np.asarray(text_or_tokens)
        if tokens.ndim != 1:
            raise ValueError(f"tokens must be a 1-D sequence of ids, got shape {tokens.shape}")
        symbols = None
        if vocab is not None:
            vocab.decode(tokens)  # names the first id outside the vocabulary by its position in the sequence
            symbols = [vocab.decode([int(t)]) for t in tokens]
    if len(tokens) == 0:
        raise ValueError("the text is empty" if isinstance(text_or_tokens, (str, bytes)) else "the token ids are empty")
    if symbols is not None and len(symbols) != len(tokens):
        symbols = None
    return tokens, symbols


def as_values(x, input_size: int, dtype, what: str = "inputs", columns: str = "") -> np.ndarray:
    """Check a (batch, steps, input_size) array of real ``what`` (inputs, or the targets of the mixture
    density head, whose ``columns`` the messages name) and return it C-contiguous in ``dtype``.

    Raises TypeError for a non-float dtype and ValueError for a wrong shape; the core then refuses
    the first NaN or infinity (and a pen bit other than 0 or 1) naming its (stream, step, feature) position.
    """
    a = np.asarray(x)
    named = f" ({columns})" if columns else ""
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)) or a.dtype == bool:
        raise TypeError(f"{what} must be a real-valued array{named}, got dtype {a.dtype}")
    if a.ndim != 3 or a.shape[2] != input_size:
        shape = f"(batch, steps, {input_size}): {columns};" if columns else f"(batch, steps, {input_size}),"
        raise ValueError(f"{what} must have shape {shape} got shape {a.shape}")
    if a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"{what} are empty: shape {a.shape}")
    return np.ascontiguousarray(a, dtype=dtype)  # NaN and infinity are refused once, by the core


_MISSING = object()
_SIZES = ("vocab_size", "embed_size", "hidden_sizes")  # the model's sizes, given beside its options


@dataclass(frozen=True)
class Option:
    """One option of a model family: its name, type, default and allowed values.

    ``kind`` is ``bool``, ``int``, ``float`` or ``str``; ``choices`` lists the allowed values of a
    ``str`` option; ``check`` is a predicate on the converted value and ``rule`` says in words what
    it requires (``"> 0"``, ``"in (0, 1)"``); ``None`` is accepted where the default is ``None``
    (meaning "chosen from the other options"). ``core=True`` passes the value to the C++ core under
    ``name`` (left out when None: the core's default); ``core=False`` options are for the Python
    class (it maps them in ``core_options``).

    The options the C++ core reads are declared there, once (``OptionSpec`` tables beside each
    core's factory): :func:`core_declared` turns that table into Options (``declared="core"``), and
    a family writes an Option by hand only for what the core never sees, or to replace a core option
    by a wider keyword (``replaces_core=True``, e.g. one value per layer).
    """

    name: str
    kind: type
    default: Any = None
    choices: Optional[tuple] = None
    check: Optional[Callable[[Any], bool]] = None
    rule: str = ""
    doc: str = ""
    core: bool = True
    declared: str = "family"  # "core": built from the core's table by core_declared
    replaces_core: bool = False  # a family keyword standing for a core option of the same name

    def describe(self) -> str:
        if self.choices:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        what = {
            bool: "True or False",
            int: "an integer",
            float: "a number",
            str: "a string",
            list: "a list",
            object: "",
        }.get(self.kind, self.kind.__name__)
        return f"{what} {self.rule}".strip()

    def validate(self, owner: str, value):
        """The value converted to ``kind``, or ``TypeError``/``ValueError`` naming the option."""
        if value is None and self.default is None:
            return None
        bad_type = TypeError(f"{owner}: {self.name} must be {self.describe()}, got {value!r}")
        if self.kind is bool:
            if not isinstance(value, (bool, np.bool_)):
                raise bad_type
            value = bool(value)
        elif self.kind is int:
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise bad_type
            value = int(value)
        elif self.kind is float:
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise bad_type
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(
                    f"{owner}: {self.name} must be a finite number {self.rule}".rstrip() + f", got {value!r}"
                )
        elif self.kind is str:
            if not isinstance(value, str):
                raise bad_type
        elif self.kind is list:
            if not isinstance(value, (list, tuple)):  # a tuple is the right type, refused by the check (JSON)
                raise bad_type
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"{owner}: {self.name} must be {self.describe()}, got {value!r}")
        if self.check is not None and not self.check(value):
            raise ValueError(f"{owner}: {self.name} must be {self.describe()}, got {value!r}")
        return value


_KINDS = {"flag": bool, "count": int, "number": float, "choice": str}


def core_schema(core_name: str) -> List[Dict[str, Any]]:
    """The options the C++ core ``core_name`` declares (``OptionSpec``, cpp/include/msrnn/cores/core.hpp):
    one dict each with name, kind, default, range (lo, hi, lo_open, hi_open), choices, per_layer,
    rule and doc."""
    return list(_core.core_schema(core_name))


def _range_check(spec: Dict[str, Any]) -> Optional[Callable[[Any], bool]]:
    lo, hi, lo_open, hi_open = spec["lo"], spec["hi"], spec["lo_open"], spec["hi_open"]
    if spec["kind"] == "count":
        return lambda v: v >= lo
    if spec["kind"] != "number" or (lo is None and hi is None):
        return None

    def check(v) -> bool:
        above = lo is None or (v > lo if lo_open else v >= lo)
        below = hi is None or (v < hi if hi_open else v <= hi)
        return above and below

    return check


def option_from_core(spec: Dict[str, Any], *, name: Optional[str] = None, default: Any = _MISSING) -> "Option":
    """The :class:`Option` of one row of a core's table: its kind, default, range or choices and doc.
    ``name`` exposes it under another keyword (then the family maps it: ``core=False``); ``default``
    replaces the core's default (None: the family derives it from the other options)."""
    return Option(
        name or spec["name"],
        _KINDS[spec["kind"]],
        spec["default"] if default is _MISSING else default,
        choices=tuple(spec["choices"]) or None,
        check=_range_check(spec),
        rule=spec["rule"],
        doc=spec["doc"],
        core=name is None,
        declared="core",
    )


def core_declared(
    core_name: str,
    *,
    derived: Tuple[str, ...] = (),
    rename: Optional[Dict[str, str]] = None,
    skip: Tuple[str, ...] = (),
) -> Tuple["Option", ...]:
    """The keyword options of the core ``core_name``, built from its declared table, in its order.

    ``derived``: options whose default the family derives from the other options (their keyword
    defaults to None; the family's ``core_options`` fills them in, or the core's default applies).
    ``rename``: core name -> the family's keyword for it (the family maps it back). ``skip``: rows
    the family sets from keywords of its own; rows read per layer (``name_l{l}``) are always left to
    the family, as are the rows it replaces with an Option of ``replaces_core=True``.
    """
    rename = rename or {}
    out = []
    for spec in core_schema(core_name):
        if spec["per_layer"] or spec["name"] in skip:
            continue
        default = None if spec["name"] in derived else _MISSING
        out.append(option_from_core(spec, name=rename.get(spec["name"]), default=default))
    return tuple(out)


def core_default(core_name: str, option: str):
    """The default the core ``core_name`` declares for ``option`` (layer 0's for a per-layer row)."""
    for spec in core_schema(core_name):
        if spec["name"] == option:
            return spec["default"]
    raise KeyError(f"the {core_name} core declares no option {option!r}")


def _positive_int(v) -> bool:
    return v >= 1


def _class_sizes_ok(v) -> bool:
    # a list of Python ints, so that the config stays JSON
    return isinstance(v, list) and len(v) >= 1 and all(type(n) is int and n >= 1 for n in v)


# The options every model takes (the base class reads them; families do not redeclare them).
SHARED_OPTIONS = (
    Option(
        "dropout",
        float,
        0.0,
        check=lambda v: 0.0 <= v < 1.0,
        rule="in [0, 1)",
        core=False,
        doc="inverted dropout on every non-recurrent connection (training only)",
    ),
    Option(
        "dtype",
        str,
        "float32",
        choices=("float32", "float64"),
        core=False,
        doc="the parameters' and computation's dtype (float64 for gradient checks)",
    ),
    Option(
        "seed",
        int,
        0,
        check=lambda v: v >= 0,
        rule=">= 0",
        core=False,
        doc="seeds the initialisation and the core's generator (dropout, sampling)",
    ),
    Option(
        "head",
        str,
        "linear",
        choices=("linear", "gated", "class", "mdn"),
        core=False,
        doc="'linear' softmax on the core's output, 'gated' (the HM-LSTM output module, eq. 11-12), "
        "'class' (class-based softmax over head_classes, docs/models/heads.md) or 'mdn' (a mixture "
        "density over pen offsets and the pen bit, Graves 2013; on the gated module when head_size > 0)",
    ),
    Option(
        "head_size",
        int,
        None,
        check=lambda v: v >= 0,
        rule=">= 0",
        core=False,
        doc="the gated head's output embedding size; 0 (the default) for the linear and class heads "
        "(and for 'mdn' on a linear head)",
    ),
    Option(
        "mixtures",
        int,
        None,
        check=_positive_int,
        rule=">= 1",
        core=False,
        doc="M, the mixture density head's bivariate Gaussians (head='mdn'; 20 when not given)",
    ),
    Option(
        "head_classes",
        list,
        None,
        check=_class_sizes_ok,
        rule="of class sizes (Python ints >= 1)",
        core=False,
        doc="the class head's class sizes over consecutive ids (ids in descending training "
        "frequency; multiscale_rnn.data.class_sizes computes them)",
    ),
    Option(
        "input_size",
        int,
        None,
        check=_positive_int,
        rule=">= 1",
        core=False,
        doc="None reads token ids; D reads real vectors (B, T, D) through a linear encoder",
    ),
)


def _checked_sizes(owner: str, sizes: Dict[str, Any], values: Dict[str, Any]) -> Tuple[int, int, Tuple[int, ...]]:
    """(vocab_size, embed_size, hidden sizes) checked, and the head's options in ``values`` checked and
    completed (head_size 0 when not given, mixtures 20 for head='mdn'); vocab_size 0 for a mixture
    density model reading vectors without one. ValueError / TypeError name what is wrong."""
    vocab_size, embed_size, hidden_sizes = sizes["vocab_size"], sizes["embed_size"], sizes["hidden_sizes"]
    mdn = values["head"] == "mdn"
    if mdn and vocab_size is None:
        if values["input_size"] is None:
            raise ValueError(
                f"{owner}: head='mdn' without a vocabulary reads real vectors: give input_size "
                "(3 for pen strokes: dx, dy, pen bit)"
            )
        vocab_size = 0
    checks = (
        (("embed_size", embed_size),) if vocab_size == 0 else (("vocab_size", vocab_size), ("embed_size", embed_size))
    )
    for what, v in checks:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{owner}: {what} must be a positive integer, got {v!r}")
    if hidden_sizes is None:
        raise TypeError(f"{owner} needs hidden_sizes (one size per layer)")
    hidden = (hidden_sizes,) if np.isscalar(hidden_sizes) else tuple(hidden_sizes)
    if not hidden or any(
        isinstance(h, (bool, np.bool_)) or not isinstance(h, (int, np.integer)) or h < 1 for h in hidden
    ):
        raise ValueError(f"{owner}: hidden_sizes must be positive integers, got {hidden_sizes!r}")
    if values["head"] == "gated" and not (values["head_size"] or 0) >= 1:
        raise ValueError(
            f"{owner}: head='gated' needs head_size >= 1 (the output embedding of the gated output "
            f"module, eq. 11-12), got {values['head_size']}"
        )
    if values["mixtures"] is not None and not mdn:
        raise ValueError(f"{owner}: mixtures is for head='mdn'; this model's head is {values['head']!r}")
    if mdn and values["mixtures"] is None:
        values["mixtures"] = 20
    if values["head_size"] is None:
        values["head_size"] = 0
    return int(vocab_size), int(embed_size), tuple(int(h) for h in hidden)


@dataclass(frozen=True)
class Role:
    """What a parameter is, as the core exports it (``ParamRole`` in cpp/include/msrnn/model/params.hpp):
    ``kind`` one of embedding, input, recurrent, bias, gain, shift, output, other; ``unit`` the rows
    of one gate block (the layer's H) when the rows stack gate blocks, else 0; ``layer`` the layer's
    name suffix (``"_l0"``, ``"_f1"``), ``""`` for model-level tensors."""

    kind: str
    unit: int
    layer: str


class LanguageModel:
    """A language model over a vocabulary of ``vocab_size`` symbols: encoder -> recurrent core ->
    head -> softmax.

    With ``input_size=D`` the model reads real vectors (B, T, D) through a linear encoder
    (``encoder.weight`` (E, D), ``encoder.bias``) instead of token ids, and still predicts one of
    ``vocab_size`` classes per step.

    A model family is a subclass that declares, once: ``core_name`` (the C++ core it runs, as
    registered in the core), ``family_options`` (its own :class:`Option` s), ``defaults`` (its
    defaults for shared arguments such as ``embed_size`` or ``head``) and ``aliases`` (more names
    for :func:`build_model` and the command line). Defining the class registers it; the base class
    checks every argument and refuses unknown ones. A family whose options do not map one-to-one
    onto its core's overrides :meth:`core_options`.
    """

    core_name = ""  # the registered C++ core; "" for abstract bases
    family_options: Tuple[Option, ...] = ()
    defaults: Dict[str, Any] = {}
    aliases: Tuple[str, ...] = ()
    positional: Tuple[str, ...] = ("vocab_size", "embed_size", "hidden_sizes")
    # The auxiliary objective terms (``Loss.aux`` names) the family's core can add; none by default.
    aux_terms: Tuple[str, ...] = ()
    # Keyword arguments of a tiny model of the family with every one of its ``aux_terms`` switched
    # on (:meth:`example`); every family declares them, None for abstract bases.
    example_options: Optional[Dict[str, Any]] = None
    # The torch.nn recurrent layer computing this family's core with the same parameter names and layouts
    # ("LSTM", "GRU", "RNN"), for ``multiscale_rnn.export.to_torch``; None when PyTorch has none.
    torch_layer: Optional[str] = None
    # The figures of a text this family draws (``multiscale-rnn plot``, ``multiscale_rnn.plot.figure``): kind ->
    # what it shows, drawn by its ``draw_figure``; none by default.
    figure_kinds: Dict[str, str] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.__signature__ = cls._signature()
        if cls.core_name and "core_name" in cls.__dict__ or cls.__dict__.get("aliases"):
            from .registry import register_family

            register_family(cls)

    @classmethod
    def example(cls, vocab_size: int, *, dtype: str = "float64", seed: int = 0, dropout: float = 0.0):
        """A tiny model of this family (its ``example_options``) with every auxiliary term it has
        active, for checks that run every registered family (e.g. data-parallel training)."""
        if cls.example_options is None:
            raise TypeError(f"{cls.__name__} declares no example_options")
        return cls(vocab_size, **dict(cls.example_options), dtype=dtype, seed=seed, dropout=dropout)

    @classmethod
    def all_options(cls) -> Dict[str, Option]:
        """Every keyword option of this model: the shared ones, then the family's, by name."""
        return {o.name: o for o in SHARED_OPTIONS + tuple(cls.family_options)}

    @classmethod
    def _signature(cls) -> inspect.Signature:
        P = inspect.Parameter
        params = [P("self", P.POSITIONAL_OR_KEYWORD)]
        for name in cls.positional:
            dflt = P.empty if name == "vocab_size" else cls.defaults.get(name, None)
            params.append(P(name, P.POSITIONAL_OR_KEYWORD, default=dflt))
        for name, o in cls.all_options().items():
            if name not in cls.positional:
                params.append(P(name, P.KEYWORD_ONLY, default=cls.defaults.get(name, o.default)))
        return inspect.Signature(params)

    @classmethod
    def _bind_arguments(cls, args: tuple, kwargs: Dict[str, Any]) -> Dict[str, Any]:
        """The call's arguments by name (the positional ones named by ``positional``), or TypeError for
        too many, a repeated or an unknown argument, or a missing vocab_size."""
        owner = cls.__name__
        if len(args) > len(cls.positional):
            raise TypeError(
                f"{owner} takes at most {len(cls.positional)} positional arguments "
                f"({', '.join(cls.positional)}), got {len(args)}"
            )
        kwargs = dict(kwargs)
        for name, value in zip(cls.positional, args):
            if name in kwargs:
                raise TypeError(f"{owner} got multiple values for argument {name!r}")
            kwargs[name] = value
        allowed = set(cls.all_options()) | set(_SIZES) | set(cls.positional)
        unknown = sorted(set(kwargs) - allowed)
        if unknown:
            hint = did_you_mean(unknown[0], allowed, quote=True) if len(unknown) == 1 else ""
            raise TypeError(
                f"{owner} got unexpected argument{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(repr(u) for u in unknown)}{hint}; it takes {', '.join(sorted(allowed))}"
            )
        if "vocab_size" not in kwargs and kwargs.get("head") != "mdn":
            raise TypeError(f"{owner} needs vocab_size")
        return kwargs

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # the keywords: the generated __signature__
        cls = type(self)
        owner = cls.__name__
        kwargs = cls._bind_arguments(args, kwargs)
        options = cls.all_options()
        sizes_names = _SIZES
        values = {
            name: o.validate(owner, kwargs.get(name, cls.defaults.get(name, o.default))) for name, o in options.items()
        }
        sizes: Dict[str, Any] = {name: kwargs.get(name, cls.defaults.get(name)) for name in sizes_names}
        core_options = self.core_options(values, sizes)
        vocab_size, embed_size, hidden = _checked_sizes(owner, sizes, values)
        dtype, seed, input_size = values["dtype"], values["seed"], values["input_size"]
        self.dtype = np.dtype(_DTYPES[dtype])
        out_size = 6 * values["mixtures"] + 1 if values["head"] == "mdn" else vocab_size
        check_model_size(
            owner, out_size, int(embed_size), hidden, self.dtype.itemsize, values["head_size"], input_size
        )  # too large, or more than the memory: refused before the core allocates
        #: the vocabulary's size (None for a mixture density model reading vectors: it has none)
        self.vocab_size: Optional[int] = int(vocab_size) if vocab_size else None
        self.input_size = input_size
        self.options: Dict[str, Any] = dict(core_options)
        # Everything needed to rebuild the model (checkpoints store it as JSON): the sizes and
        # every option's value, except options left at None (chosen from the others).
        self.config: Dict[str, Any] = dict(
            model=owner, vocab_size=self.vocab_size, embed_size=int(embed_size), hidden_sizes=list(hidden)
        )
        self.config.update({k: v for k, v in values.items() if v is not None})
        cls_impl = _core.LanguageModelF32 if dtype == "float32" else _core.LanguageModelF64
        self._impl = cls_impl(
            self.core_name,
            int(vocab_size),
            int(embed_size),
            list(hidden),
            values["dropout"],
            int(seed) % (1 << 64),
            self.options,
            values["head"],
            values["head_size"],
            input_size or 0,
            values["head_classes"] or [],
            values["mixtures"] or 0,
        )
        self._flat = self._impl.flat_params()
        self._flat_grad = self._impl.flat_grads()
        self._info = self._impl.param_info()
        self._params = self._views(self._flat)
        self._grads = self._views(self._flat_grad)
        self._roles = {name: Role(kind, int(unit), layer) for name, _, _, _, _, kind, unit, layer in self._info}
        self.reset_parameters(seed)

    def core_options(self, values: Dict[str, Any], sizes: Dict[str, Any]) -> Dict[str, Any]:
        """The options handed to the C++ core, from the checked option ``values``: by default every
        family option declared with ``core=True``, under its own name. A family overrides this to
        map options (and may fill ``sizes`` or resolve ``None`` values in ``values``, which the
        config then stores)."""
        return {o.name: values[o.name] for o in self.family_options if o.core and values[o.name] is not None}

    # ---- parameters -------------------------------------------------------------------------
    def _views(self, flat: np.ndarray) -> Dict[str, np.ndarray]:
        out = {}
        for name, offset, rows, cols, transposed, *_ in self._info:
            v = flat[offset : offset + rows * cols]
            if cols == 1:
                out[name] = v  # (rows,)
            elif transposed:
                out[name] = v.reshape(cols, rows)  # (cols, rows), C order
            else:
                out[name] = v.reshape(cols, rows).T  # (rows, cols), Fortran order
        return out

    def parameters(self) -> Dict[str, np.ndarray]:
        """Dict name -> writable NumPy view into the flat parameter buffer."""
        return dict(self._params)

    def gradients(self) -> Dict[str, np.ndarray]:
        """Dict name -> view into the flat gradient buffer (what backward accumulated)."""
        return dict(self._grads)

    def flat_parameters(self) -> np.ndarray:
        """The whole parameter buffer, 1-D (padding between tensors included)."""
        return self._flat

    def flat_gradients(self) -> np.ndarray:
        return self._flat_grad

    @property
    def num_parameters(self) -> int:
        return int(sum(rows * cols for _, _, rows, cols, *_ in self._info))

    def parameter_roles(self) -> Dict[str, Role]:
        """Dict name -> :class:`Role`: what each parameter is, as the core declares it."""
        return dict(self._roles)

    def zero_grad(self) -> None:
        self._impl.zero_grad()

    def reset_parameters(self, seed: int = 0) -> None:
        """The default initialisation (see ``multiscale_rnn.init.default``)."""
        from .. import init

        init.default(self, np.random.default_rng(seed))

    def load_parameters(self, params: Dict[str, np.ndarray]) -> None:
        """Copy arrays into the parameters, all or none: every name, shape and dtype is checked, and a NaN
        or infinity refused naming its parameter and index, before the first is copied."""
        own = self._params
        missing = sorted(set(own) - set(params))
        extra = sorted(set(params) - set(own))
        if missing or extra:
            raise ValueError(f"parameter names do not match: missing {missing}, unexpected {extra}")
        checked = {}
        for name, value in params.items():
            value = np.asarray(value)
            if value.shape != own[name].shape:
                raise ValueError(f"parameter '{name}' has shape {value.shape}, expected {own[name].shape}")
            if value.dtype == bool or not (
                np.issubdtype(value.dtype, np.floating) or np.issubdtype(value.dtype, np.integer)
            ):
                raise TypeError(f"parameter '{name}' must hold real numbers, got dtype {value.dtype}")
            bad = np.argwhere(~np.isfinite(value))
            if len(bad):
                raise ValueError(f"parameter '{name}' holds {value[tuple(bad[0])]} at index {tuple(bad[0].tolist())}")
            checked[name] = value
        for name, value in checked.items():
            own[name][...] = value

    def _inputs(self, x) -> np.ndarray:
        """Token ids (B, T) for an embedding model; real vectors (B, T, D) with ``input_size=D``."""
        if self.input_size is None:
            return as_tokens(x, "token", None)  # ids are range-checked once, by the core
        return as_values(x, self.input_size, self.dtype)

    # ---- state ------------------------------------------------------------------------------
    # Every call that computes takes ``state``: None starts from zeros, a dict (name -> (B, size),
    # as returned by the previous call) starts from it, and ``KEEP`` ("keep") continues from the
    # state the model carries. Each returns the state after its last step.
    def _set_state(self, state, batch: int) -> None:
        if state is None:
            self._impl.reset_state(batch)
            return
        if isinstance(state, str):
            if state != KEEP:
                raise ValueError(f"state must be None, a dict name -> array or {KEEP!r}, got {state!r}")
            return
        if not isinstance(state, dict):
            raise TypeError(f"state must be a dict name -> array, None or {KEEP!r}, got {type(state).__name__}")
        conv = {}
        for k, v in state.items():
            a = np.asarray(v)
            if not np.issubdtype(a.dtype, np.floating):
                raise TypeError(f"state '{k}' must be a float array, got dtype {a.dtype}")
            if a.ndim != 2 or a.shape[0] != batch:
                raise ValueError(f"state '{k}' has shape {a.shape}, expected (batch {batch}, size)")
            conv[k] = np.ascontiguousarray(a, dtype=self.dtype)
        self._impl.set_state(conv)

    def initial_state(self, batch_size: int) -> State:
        """Zero state for ``batch_size`` streams (also the state the model now carries)."""
        self.reset_state(batch_size)
        return self.get_state()

    def reset_state(self, batch_size: int) -> None:
        """Make the carried state zeros for ``batch_size`` streams."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        self._impl.reset_state(int(batch_size))

    def get_state(self) -> State:
        """A copy of the carried state: dict name -> (B, size) array."""
        return self._impl.get_state()

    def set_state(self, state: State) -> None:
        """Make ``state`` (dict name -> (B, size) array, every entry of the core) the carried state."""
        if not isinstance(state, dict) or not state:
            raise TypeError(f"state must be a non-empty dict name -> array, got {state!r:.60}")
        batch = np.asarray(next(iter(state.values()))).shape[0]
        self._set_state(state, batch)

    # ---- computation ------------------------------------------------------------------------
    def forward(self, tokens, state=None, *, train: bool = False) -> Tuple[np.ndarray, State]:
        """Logits (B, T, V) for int tokens (B, T) (or real inputs (B, T, D)), and the state after
        the last step. ``state``: None (zeros), a dict, or ``KEEP``."""
        tok = self._inputs(tokens)
        self._set_state(state, tok.shape[0])
        logits = self._impl.forward(tok, train)
        return logits, self._impl.get_state()

    def _targets(self, targets, tok) -> np.ndarray:
        """Class ids (B, T), or for the mixture density head real vectors (B, T, 3): (dx, dy, pen bit)."""
        size = self._impl.target_size
        if size == 0:
            tgt = as_tokens(targets, "target", None)
        else:  # NaN and pen bits other than 0 / 1: refused by the core
            tgt = as_values(targets, size, self.dtype, "targets", "dx, dy, pen bit")
        if tgt.shape[:2] != tok.shape[:2]:
            raise ValueError(f"targets have shape {tgt.shape[:2]}, inputs {tok.shape[:2]}")
        return tgt

    def loss_and_grad(
        self,
        tokens,
        targets,
        state=None,
        *,
        weights=None,
        padding=None,
        copy_grads: bool = True,
        reducer: Optional[Callable[[np.ndarray], Optional[np.ndarray]]] = None,
    ):
        """Mean cross-entropy (nats) over all B*T targets, dict name -> gradient, new state.

        Runs in training mode (dropout on, if any). The loss is a :class:`Loss`: a float, the
        cross-entropy, whose ``aux`` holds the core's auxiliary objective terms (if any); the
        gradient is that of ``loss.total``. Gradients are of this call alone: copies, or with
        ``copy_grads=False`` left in ``gradients()`` / ``flat_gradients()`` (None is returned).
        ``weights`` (B, T), finite and non-negative, makes the cross-entropy the weighted mean
        ``sum w * nll / sum w`` (e.g. ones on the last step only: the loss of that step alone).
        ``state``: None (zeros), a dict, or ``KEEP``.

        ``padding`` (B, T) of 0 and 1, for separate sequences padded to one length
        (``multiscale_rnn.training.sequences``): the columns marked 0 count in neither the loss
        (``weights`` defaults to ``padding``) nor the core's auxiliary terms (the HM-LSTM's boundary
        rates, the VCRNN's penalty are then means over the columns marked 1).

        ``reducer``: for auxiliary terms that apply a nonlinearity to a batch statistic (the
        HM-LSTM's rate target mu (zbar - r)^2). When the core has such statistics (means over the
        B*T columns of this forward), ``reducer`` is called between the forward and the backward
        with them as a float64 array (K,), and changes them in place or returns the K values that
        replace them; the core then computes those terms and their gradients from the replaced
        values. Data-parallel training passes the mean over all ranks' columns
        (:meth:`multiscale_rnn.distributed.DataParallel.average_statistics`), so that the terms are
        those of the whole batch. Not called when the core has no statistics.
        """
        tok = self._inputs(tokens)
        tgt = self._targets(targets, tok)
        if weights is not None:
            weights = np.asarray(weights, dtype=np.float64)
            if weights.shape != tgt.shape[:2]:
                raise ValueError(f"weights have shape {weights.shape}, targets {tgt.shape[:2]}")
        if padding is not None:
            padding = np.asarray(padding, dtype=np.float64)
            if padding.shape != tgt.shape[:2]:
                raise ValueError(f"padding has shape {padding.shape}, targets {tgt.shape[:2]}")
            if not np.isin(padding, (0.0, 1.0)).all() or not padding.any():
                raise ValueError("padding must hold 0 (padding) and 1 (a step of a sequence), with at least one 1")
        if reducer is not None and not callable(reducer):
            raise TypeError(
                f"reducer must be callable (it receives the batch statistics), got {type(reducer).__name__}"
            )
        self._set_state(state, tok.shape[0])
        self._impl.zero_grad()
        loss = Loss(self._impl.loss_and_grad(tok, tgt, weights, reducer, padding), self._impl.aux_losses())
        grads = {k: v.copy() for k, v in self._grads.items()} if copy_grads else None
        return loss, grads, self._impl.get_state()

    def loss(self, tokens, targets, state=None, *, per_token: bool = False):
        """Evaluation-mode mean cross-entropy (nats) and the new state; with ``per_token=True``
        also the (B, T) array of each -log p(target). ``state``: None (zeros), a dict, or ``KEEP``."""
        tok = self._inputs(tokens)
        tgt = self._targets(targets, tok)
        self._set_state(state, tok.shape[0])
        out = self._impl.loss(tok, tgt, per_token)
        if per_token:
            return float(out[0]), out[1], self._impl.get_state()
        return float(out), self._impl.get_state()

    # ---- inference precision ----------------------------------------------------------------
    INFERENCE_PRECISIONS = ("float32", "bfloat16", "bfloat16-emulated")

    @property
    def inference_precision(self) -> str:
        """Arithmetic of evaluation-mode passes: ``forward`` (``train=False``), ``loss``,
        ``evaluate``, ``sample`` and the trainer's validation. Training (``loss_and_grad``, the
        trainer's steps) always runs in the model's dtype.

        - ``"float32"`` (default): the model's dtype.
        - ``"bfloat16"``: in every LSTM layer, the step product
          ``a_t = (b_ih + b_hh) + bf16([W_ih W_hh]) bf16([x_t; h_{t-1}])`` takes weights and step
          inputs rounded to bfloat16 (to nearest, ties to even) and accumulates in float32: on the
          CPU's AMX tiles where they run (Intel Xeon Sapphire Rapids and later), else with
          AVX512-BF16 instructions (AMD Zen 4 and later, Intel Cooper Lake);
          ``multiscale_rnn.bf16_kernel()`` names the one this process uses. Gates, state, embedding
          and head stay float32. The weights are rounded from the current parameters at every call,
          so changed parameters are always used.
        - ``"bfloat16-emulated"``: the same rounding with the float32 kernels, on any CPU; equal
          to ``"bfloat16"`` up to float32 summation order, slower than ``"float32"``.

        Setting anything but ``"float32"`` raises ``ValueError`` for a float64 model or a model
        other than ``LSTM``; ``"bfloat16"`` raises ``RuntimeError`` saying why when neither kernel can
        run here (the reasons of both, as ``multiscale_rnn.bf16_unavailable_reason()`` gives them).
        The setting is not saved in checkpoints.
        """
        return str(self._impl.inference_precision)

    @inference_precision.setter
    def inference_precision(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(
                f"inference_precision must be a str, one of {self.INFERENCE_PRECISIONS}, got {type(value).__name__}"
            )
        if value not in self.INFERENCE_PRECISIONS:  # the core refuses it too; here with the nearest name
            raise ValueError(
                f"unknown inference precision {value!r}; expected one of {self.INFERENCE_PRECISIONS}"
                + did_you_mean(value, self.INFERENCE_PRECISIONS, quote=True)
            )
        self._impl.set_inference_precision(value)

    def default_model_options(self) -> Dict[str, Any]:
        """Option schedules the Trainer applies unless its ``model_options`` name them (none here;
        the HM-LSTM's boundary warm-up)."""
        return {}

    def end_of_run_notes(self, corpus, steps: int) -> List[str]:
        """Lines the command line prints after a training run of this model on ``corpus`` (a
        ``data.Corpus``) that ended after ``steps`` updates: none here; a family with something to
        report overrides it (the HM-LSTM: its boundaries against known segments, detectors that
        never started)."""
        return []

    def draw_figure(self, kind: str, text_or_tokens, vocab=None, ax=None):
        """Draw the figure ``kind`` (one of ``figure_kinds``) of this model reading ``text_or_tokens`` (a text
        encoded with ``vocab``, or 1-D token ids) on ``ax`` (a new figure when None) and return the Axes. A
        family with figures overrides it with the plot functions of its own modules (the HM-LSTM:
        ``plot.hm_lstm_boundaries``); :func:`multiscale_rnn.plot.figure` checks the kind and the text first."""
        raise ValueError(f"{type(self).__name__} draws no figure of a text (figure_kinds is empty)")

    def selection_boundaries(self, ids) -> Optional[np.ndarray]:
        """The boundaries this model marks on the 1-D ids ``ids`` (1-D bools), which
        ``best_of(select="agreement")`` compares between restarts; None for a model that marks none (here; the
        HM-LSTM: z^1)."""
        return None

    def selection_step(self) -> Optional[int]:
        """The update at which :func:`multiscale_rnn.best_of` compares restarts by default
        (``select_after="auto"``), or None for after the last epoch (here; the HM-LSTM with a warm-up
        per layer: when its last detector starts)."""
        return None

    def set_option(self, name: str, value: float) -> None:
        """Change a core option between chunks (e.g. the HM-LSTM ``slope`` being annealed, or
        ``skip=False``); bools are 1.0 / 0.0."""
        if not isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
            raise TypeError(f"option {name!r} must be a number or a bool, got {value!r}")
        self._impl.set_option(str(name), float(value))
        self.options[name] = value

    def records(self) -> Dict[str, np.ndarray]:
        """What the last forward recorded for introspection: dict name -> (rows, B*T) array whose
        column t*B + b is step t of stream b (empty for cores that record nothing)."""
        return {k: np.ascontiguousarray(v.T) for k, v in self._impl.records().items()}

    def record_gradients(self) -> Dict[str, np.ndarray]:
        """After ``loss_and_grad``: the gradient of its loss with respect to every recorded state
        (for the FS-RNN family every cell's ``h_*`` and ``c_*``), by the names and in the layout of
        ``records()``: (rows, B*T), column t*B + b for step t of stream b."""
        return {k: np.ascontiguousarray(v.T) for k, v in self._impl.record_grads().items()}

    # ---- random generator (dropout, sampling) ------------------------------------------------
    def get_rng_state(self) -> np.ndarray:
        return self._impl.get_rng_state()

    def set_rng_state(self, state) -> None:
        """Restore the generator from the 4 unsigned 64-bit words ``get_rng_state`` returned."""
        given = state.tolist() if isinstance(state, np.ndarray) else state if isinstance(state, (list, tuple)) else []
        words = [int(w) if isinstance(w, np.integer) else w for w in given]  # exact: no float64 on the way
        if len(words) != 4 or not all(_is_word(w) for w in words):
            raise ValueError(
                f"random state must be 4 unsigned 64-bit words (as get_rng_state returns), got {state!r:.80}"
            )
        self._impl.set_rng_state(np.array(words, dtype=np.uint64))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config.items() if k != "model")
        return f"{type(self).__name__}({args})"

    def config_json(self) -> str:
        return json.dumps(self.config, sort_keys=True)
