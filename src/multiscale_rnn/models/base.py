"""The base of every model: encoder (token embedding or linear map) -> recurrent core -> head -> softmax cross-entropy.

Every model offers the same low-level API (NumPy in and out):

- ``parameters()``: dict name -> writable NumPy view into the model's one flat parameter buffer,
  with PyTorch's names and layouts where PyTorch has the same layer (``weight_ih_l0`` (4H, E), ...).
- ``forward(tokens, state=None)`` -> ``(logits (B, T, V), new_state)``.
- ``loss_and_grad(tokens, targets, state=None)`` -> ``(mean cross-entropy in nats, grads, new_state)``.
- ``dtype="float64"`` on every model, for gradient checks.
- ``inference_precision``: ``"float32"`` (default), ``"bfloat16"`` or ``"bfloat16-emulated"`` for
  evaluation-mode passes of float32 LSTM models (see ``LanguageModel.inference_precision``).

State is a dict name -> array (B, size), e.g. ``{"h_l0": ..., "c_l0": ...}``; ``None`` means zeros.
"""
from __future__ import annotations

import json
from typing import Dict, Optional, Tuple

import numpy as np

from .._native import core as _core

State = Dict[str, np.ndarray]

_DTYPES = {"float32": np.float32, "float64": np.float64}


def as_tokens(x, name: str, vocab_size: int) -> np.ndarray:
    """Check a (batch, steps) array of token ids and return it as C-contiguous int32.

    Raises TypeError for a non-integer dtype, ValueError for a wrong shape and IndexError naming
    the first id outside [0, vocab_size) with its (stream, step) position.
    """
    a = np.asarray(x)
    if a.dtype == bool or not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{name} must be an integer array of token ids, got dtype {a.dtype}")
    if a.ndim != 2:
        raise ValueError(f"{name} must have shape (batch, steps), got shape {a.shape}")
    if a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"{name} is empty: shape {a.shape}")
    bad = (a < 0) | (a >= vocab_size)
    if bad.any():
        b, t = np.argwhere(bad)[0]
        raise IndexError(
            f"{name} id {int(a[b, t])} at (stream {b}, step {t}) is outside the vocabulary [0, {vocab_size})")
    return np.ascontiguousarray(a, dtype=np.int32)


def as_values(x, input_size: int, dtype) -> np.ndarray:
    """Check a (batch, steps, input_size) array of real inputs and return it C-contiguous in ``dtype``.

    Raises TypeError for a non-float dtype, ValueError for a wrong shape and ValueError naming the
    first NaN or infinity with its (stream, step, feature) position.
    """
    a = np.asarray(x)
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)) or a.dtype == bool:
        raise TypeError(f"inputs must be a real-valued array, got dtype {a.dtype}")
    if a.ndim != 3 or a.shape[2] != input_size:
        raise ValueError(f"inputs must have shape (batch, steps, {input_size}), got shape {a.shape}")
    if a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"inputs are empty: shape {a.shape}")
    a = np.ascontiguousarray(a, dtype=dtype)
    bad = ~np.isfinite(a)
    if bad.any():
        b, t, d = np.argwhere(bad)[0]
        raise ValueError(f"input value {a[b, t, d]} at (stream {b}, step {t}, feature {d}) is not finite")
    return a


class LanguageModel:
    """A language model over a vocabulary of ``vocab_size`` symbols.

    With ``input_size=D`` the model reads real vectors (B, T, D) through a linear encoder
    (``encoder.weight`` (E, D), ``encoder.bias``) instead of token ids, and still predicts one of
    ``vocab_size`` classes per step.

    Subclasses set ``core_name`` and pass their core-specific ``options``.
    """

    core_name = ""

    def __init__(self, vocab_size: int, embed_size: int, hidden_sizes, *, dropout: float = 0.0,
                 dtype: str = "float32", seed: int = 0, options: Optional[dict] = None, head: str = "linear",
                 head_size: int = 0, input_size: Optional[int] = None, **config):
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
        hidden = (hidden_sizes,) if np.isscalar(hidden_sizes) else tuple(hidden_sizes)
        for what, v in (("vocab_size", vocab_size), ("embed_size", embed_size)):
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{what} must be a positive integer, got {v!r}")
        if not hidden or any(not isinstance(h, (int, np.integer)) or h < 1 for h in hidden):
            raise ValueError(f"hidden_sizes must be positive integers, got {hidden_sizes!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if head not in ("linear", "gated"):
            raise ValueError(f"head must be 'linear' or 'gated', got {head!r}")
        if not isinstance(head_size, (int, np.integer)) or head_size < 0:
            raise ValueError(f"head_size must be a non-negative integer, got {head_size!r}")
        if input_size is not None and (not isinstance(input_size, (int, np.integer)) or input_size < 1):
            raise ValueError(f"input_size must be a positive integer or None (token inputs), got {input_size!r}")
        self.dtype = np.dtype(_DTYPES[dtype])
        self.vocab_size = int(vocab_size)
        self.input_size = None if input_size is None else int(input_size)
        self.options = dict(options or {})
        # Everything needed to rebuild the model (checkpoints store it as JSON).
        self.config = dict(model=type(self).__name__, vocab_size=int(vocab_size), embed_size=int(embed_size),
                           hidden_sizes=[int(h) for h in hidden], dropout=float(dropout), dtype=dtype,
                           seed=int(seed), head=head, head_size=int(head_size), **config)
        if input_size is not None:
            self.config["input_size"] = int(input_size)
        cls = _core.LanguageModelF32 if dtype == "float32" else _core.LanguageModelF64
        self._impl = cls(self.core_name, int(vocab_size), int(embed_size), [int(h) for h in hidden],
                         float(dropout), int(seed) % (1 << 64), self.options, head, int(head_size),
                         self.input_size or 0)
        self._flat = self._impl.flat_params()
        self._flat_grad = self._impl.flat_grads()
        self._info = self._impl.param_info()
        self._params = self._views(self._flat)
        self._grads = self._views(self._flat_grad)
        self.reset_parameters(seed)

    # ---- parameters -------------------------------------------------------------------------
    def _views(self, flat: np.ndarray) -> Dict[str, np.ndarray]:
        out = {}
        for name, offset, rows, cols, transposed in self._info:
            v = flat[offset:offset + rows * cols]
            if cols == 1:
                out[name] = v                                   # (rows,)
            elif transposed:
                out[name] = v.reshape(cols, rows)               # (cols, rows), C order
            else:
                out[name] = v.reshape(cols, rows).T             # (rows, cols), Fortran order
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
        return int(sum(rows * cols for _, _, rows, cols, _ in self._info))

    def zero_grad(self) -> None:
        self._impl.zero_grad()

    def reset_parameters(self, seed: int = 0) -> None:
        """The default initialisation (see ``multiscale_rnn.init.default``)."""
        from .. import init
        init.default(self, np.random.default_rng(seed))

    def load_parameters(self, params: Dict[str, np.ndarray]) -> None:
        """Copy arrays into the parameters, checking names and shapes."""
        own = self._params
        missing = sorted(set(own) - set(params))
        extra = sorted(set(params) - set(own))
        if missing or extra:
            raise ValueError(f"parameter names do not match: missing {missing}, unexpected {extra}")
        for name, value in params.items():
            value = np.asarray(value)
            if value.shape != own[name].shape:
                raise ValueError(f"parameter '{name}' has shape {value.shape}, expected {own[name].shape}")
            own[name][...] = value

    def _inputs(self, x) -> np.ndarray:
        """Token ids (B, T) for an embedding model; real vectors (B, T, D) with ``input_size=D``."""
        if self.input_size is None:
            return as_tokens(x, "token", self.vocab_size)
        return as_values(x, self.input_size, self.dtype)

    # ---- state ------------------------------------------------------------------------------
    def _set_state(self, state: Optional[State], batch: int) -> None:
        if state is None:
            self._impl.reset_state(batch)
            return
        if not isinstance(state, dict):
            raise TypeError(f"state must be a dict name -> array or None, got {type(state).__name__}")
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
        """Zero state for ``batch_size`` streams."""
        self._impl.reset_state(int(batch_size))
        return self._impl.get_state()

    # ---- computation ------------------------------------------------------------------------
    def forward(self, tokens, state: Optional[State] = None, *, train: bool = False) -> Tuple[np.ndarray, State]:
        """Logits (B, T, V) for int tokens (B, T), and the state after the last step."""
        tok = self._inputs(tokens)
        self._set_state(state, tok.shape[0])
        logits = self._impl.forward(tok, train)
        return logits, self._impl.get_state()

    def loss_and_grad(self, tokens, targets, state: Optional[State] = None, *, weights=None):
        """Mean cross-entropy (nats) over all B*T targets, dict name -> gradient, new state.

        Runs in training mode (dropout on, if any). Gradients are of this loss alone (copies).
        ``weights`` (B, T), finite and non-negative, makes the loss the weighted mean
        ``sum w * nll / sum w`` (e.g. ones on the last step only: the loss of that step alone).
        """
        tok = self._inputs(tokens)
        tgt = as_tokens(targets, "target", self.vocab_size)
        if tgt.shape != tok.shape[:2]:
            raise ValueError(f"targets have shape {tgt.shape}, inputs {tok.shape[:2]}")
        if weights is not None:
            weights = np.asarray(weights, dtype=np.float64)
            if weights.shape != tgt.shape:
                raise ValueError(f"weights have shape {weights.shape}, targets {tgt.shape}")
        self._set_state(state, tok.shape[0])
        self._impl.zero_grad()
        loss = self._impl.loss_and_grad(tok, tgt, weights)
        grads = {k: v.copy() for k, v in self._grads.items()}
        return float(loss), grads, self._impl.get_state()

    def loss(self, tokens, targets, state: Optional[State] = None, *, per_token: bool = False):
        """Evaluation-mode mean cross-entropy (nats) and the new state; with ``per_token=True``
        also the (B, T) array of each -log p(target)."""
        tok = self._inputs(tokens)
        tgt = as_tokens(targets, "target", self.vocab_size)
        if tgt.shape != tok.shape[:2]:
            raise ValueError(f"targets have shape {tgt.shape}, inputs {tok.shape[:2]}")
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
          inputs rounded to bfloat16 (to nearest, ties to even) and accumulates in float32 on the
          CPU's AMX tiles; gates, state, embedding and head stay float32. The weights are rounded
          from the current parameters at every call, so changed parameters are always used.
        - ``"bfloat16-emulated"``: the same rounding with the float32 kernels, on any CPU; equal
          to ``"bfloat16"`` up to float32 summation order, slower than ``"float32"``.

        Setting anything but ``"float32"`` raises ``ValueError`` for a float64 model or a model
        other than ``LSTM``; ``"bfloat16"`` raises ``RuntimeError`` saying why when the AMX kernel
        cannot run here (see ``multiscale_rnn.amx_bf16_unavailable_reason()``). The setting is not
        saved in checkpoints.
        """
        return str(self._impl.inference_precision)

    @inference_precision.setter
    def inference_precision(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(f"inference_precision must be a str, one of {self.INFERENCE_PRECISIONS}, "
                            f"got {type(value).__name__}")
        self._impl.set_inference_precision(value)

    def set_option(self, name: str, value: float) -> None:
        """Change a core option between chunks (e.g. the HM-LSTM ``slope`` being annealed)."""
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
        self._impl.set_rng_state(np.ascontiguousarray(state, dtype=np.uint64))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config.items() if k != "model")
        return f"{type(self).__name__}({args})"

    def config_json(self) -> str:
        return json.dumps(self.config, sort_keys=True)
