"""A model's parameters for PyTorch: a state dict of every family, and a ``torch.nn`` module for the families
PyTorch has a layer for.

    state_dict(model)                 -> {name: NumPy array}   every family; torch tensors with tensors=True
    to_torch(model)                   -> torch.nn.Module       the families whose class names a torch_layer
    state_to_torch(model, state)      -> hx                    our carried state as the torch layer's hx
    state_from_torch(model, hx)       -> state                 and back

The names are the package's (``model.parameters()``): PyTorch's own where PyTorch has the layer
(``weight_ih_l0`` (4H, E), ``weight_hh_l0`` (4H, H), ``bias_ih_l0``, ``bias_hh_l0`` of ``torch.nn.LSTM``, gate
order i, f, g, o; r, z, n for the GRU), ``embedding.weight`` (V, E) (or ``encoder.weight`` (E, D),
``encoder.bias``), ``decoder.weight`` (V, H), ``decoder.bias`` (V,), and the names the family's core declares
otherwise (docs/models/). The module ``to_torch`` builds is a subclass of the torch layer holding the
embedding and the decoder, so its ``state_dict()`` has exactly these names, and it computes::

    x_t = embedding[token_t]            (or encoder.weight u_t + encoder.bias for real inputs)
    y_t, hx = torch.nn.LSTM | GRU | RNN(tanh) (x_t, hx)     batch_first, one hidden size for every layer
    logits_t = decoder.weight y_t + decoder.bias

with dropout where the model has it (on the embedding, between layers and before the decoder). PyTorch is
optional: ``pip install "multiscale-rnn[torch]"``; it is imported when a function here needs it, and
missing it raises ``ImportError`` naming that extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional

import numpy as np

from . import reference

if TYPE_CHECKING:
    from .models.base import LanguageModel

__all__ = ["TORCH_EXTRA", "state_dict", "to_torch", "state_to_torch", "state_from_torch", "torch_families"]

#: How to install what this module needs.
TORCH_EXTRA = 'pip install "multiscale-rnn[torch]"'


def _torch():
    """The torch module (the references' import), or ``ImportError`` naming the extra."""
    try:
        return reference.torch()
    except ImportError as e:
        raise ImportError(f"exporting to PyTorch needs PyTorch, an optional dependency: {TORCH_EXTRA}") from e


def torch_families() -> Dict[str, str]:
    """The registered families with a ``torch.nn`` layer, by class name: {family: layer} (``torch_layer``)."""
    from .models import MODELS

    layers = {name: getattr(cls, "torch_layer", None) for name, cls in sorted(MODELS.items())}
    return {name: layer for name, layer in layers.items() if layer}


def state_dict(model: "LanguageModel", tensors: bool = False) -> Dict[str, Any]:
    """Every parameter of ``model`` by its name, as ``torch.nn.Module.state_dict()`` gives it: a copy of each
    (C-contiguous, in the model's dtype), NumPy arrays, or ``torch.Tensor`` with ``tensors=True`` (the tensors
    the PyTorch references compute with, :func:`multiscale_rnn.reference.tensors`, without gradients). For the
    families :func:`to_torch` covers, ``to_torch(model).load_state_dict(state_dict(model, tensors=True))``
    loads as it is."""
    if not hasattr(model, "parameters") or not hasattr(model, "core_name"):
        raise TypeError(f"state_dict needs a multiscale_rnn model, got {type(model).__name__}")
    if not isinstance(tensors, bool):
        raise TypeError(f"tensors must be True or False, got {tensors!r}")
    if tensors:
        _torch()
        return reference.tensors(model, requires_grad=False)
    return {name: np.array(value, order="C") for name, value in model.parameters().items()}


def _check_exportable(model) -> tuple:
    """(the torch layer's name, hidden size, layers), or ``ValueError`` saying what PyTorch's layer lacks."""
    cls = type(model)
    if not hasattr(model, "core_name"):
        raise TypeError(f"to_torch needs a multiscale_rnn model, got {cls.__name__}")
    layer = getattr(cls, "torch_layer", None)
    if layer is None:
        covered = ", ".join(f"{n} (torch.nn.{t})" for n, t in torch_families().items())
        raise ValueError(
            f"{cls.__name__} has no torch.nn equivalent: to_torch covers {covered}; "
            f"multiscale_rnn.export.state_dict(model) gives its parameters by name"
        )
    cfg = model.config
    if cfg.get("head", "linear") != "linear":
        raise ValueError(f"to_torch exports the linear head; {cls.__name__} has head={cfg['head']!r}")
    sizes = list(cfg["hidden_sizes"])
    if len(set(sizes)) != 1:
        raise ValueError(
            f"torch.nn.{layer} has one hidden size for every layer; {cls.__name__} has hidden_sizes={sizes}"
        )
    return layer, sizes[0], len(sizes)


_CLASSES: Dict[str, type] = {}


def _module_class(torch, layer: str) -> type:
    """The subclass of ``torch.nn.<layer>`` that adds the embedding (or encoder) and the decoder."""
    if layer in _CLASSES:
        return _CLASSES[layer]
    nn = torch.nn

    class Exported(getattr(nn, layer)):  # type: ignore[misc]
        """A multiscale-rnn language model as torch.nn.{layer} with its embedding and decoder: forward(inputs,
        hx=None) -> (logits (B, T, V), hx), inputs token ids (B, T) or real vectors (B, T, D)."""

        def __init__(self, vocab_size, embed_size, hidden_size, num_layers, dropout=0.0, input_size=None):
            extra = {"nonlinearity": "tanh"} if layer == "RNN" else {}
            between = dropout if num_layers > 1 else 0.0  # torch warns about dropout on one layer
            super().__init__(embed_size, hidden_size, num_layers, batch_first=True, dropout=between, **extra)
            if input_size is None:
                self.embedding = nn.Embedding(vocab_size, embed_size)
            else:
                self.encoder = nn.Linear(input_size, embed_size)
            self.drop = nn.Dropout(dropout)
            self.decoder = nn.Linear(hidden_size, vocab_size)

        def forward(self, inputs, hx=None):
            x = self.embedding(inputs) if hasattr(self, "embedding") else self.encoder(inputs)
            y, hx = super().forward(self.drop(x), hx)
            return self.decoder(self.drop(y)), hx

    Exported.__name__ = Exported.__qualname__ = f"Exported{layer}"
    _CLASSES[layer] = Exported
    return Exported


def to_torch(model: "LanguageModel") -> Any:
    """A ``torch.nn`` module computing what ``model`` computes, with a copy of its parameters (same names).

    For the families with a ``torch_layer`` (the LSTM, GRU and Elman RNN: :func:`torch_families`) and a
    linear head with one hidden size for every layer. The module subclasses ``torch.nn.LSTM`` / ``GRU`` /
    ``RNN`` (batch first) and adds ``embedding`` (or ``encoder``), ``decoder`` and the model's dropout; it is in
    the model's dtype and in evaluation mode, as ``model.forward`` is (``.train()`` switches dropout on).
    ``module(tokens, hx)`` returns ``(logits (B, T, V), hx)``, ``hx`` PyTorch's state (``(h, c)`` of shape
    (L, B, H) for the LSTM); :func:`state_to_torch` and :func:`state_from_torch` convert the model's state.

    ``ValueError`` for another family (naming those covered), another head or unequal layer sizes;
    ``ImportError`` naming the extra when PyTorch is missing."""
    layer, hidden, num_layers = _check_exportable(model)
    torch = _torch()
    cfg = model.config
    module = _module_class(torch, layer)(
        int(cfg["vocab_size"]),
        int(cfg["embed_size"]),
        int(hidden),
        num_layers,
        float(cfg.get("dropout", 0.0)),
        cfg.get("input_size"),
    )
    module.to({np.dtype("float32"): torch.float32, np.dtype("float64"): torch.float64}[np.dtype(model.dtype)])
    module.load_state_dict(state_dict(model, tensors=True))
    return module.eval()


def state_to_torch(model: "LanguageModel", state: Optional[Dict[str, np.ndarray]]) -> Any:
    """The model's state (``{"h_l0": (B, H), "c_l0": ..., ...}``, as ``forward`` returns it) as the ``hx`` of
    :func:`to_torch`'s module: ``(h, c)``, each (L, B, H), for the LSTM, ``h`` (L, B, H) for the others; None
    stays None (zeros)."""
    layer, _, num_layers = _check_exportable(model)
    if state is None:
        return None
    torch = _torch()
    missing = [f"{k}_l{l}" for k in ("h", "c") for l in range(num_layers) if f"{k}_l{l}" not in state]
    if missing and not (layer != "LSTM" and all(m.startswith("c_") for m in missing)):
        raise ValueError(f"state lacks {missing}; it has {sorted(state)}")

    def stack(k):
        return torch.from_numpy(np.stack([np.asarray(state[f"{k}_l{l}"]) for l in range(num_layers)]))

    return (stack("h"), stack("c")) if layer == "LSTM" else stack("h")


def state_from_torch(model: "LanguageModel", hx: Any) -> Dict[str, np.ndarray]:
    """The ``hx`` of :func:`to_torch`'s module as the model's state: ``{"h_l0": (B, H), ...}`` (and ``c_l*``
    for the LSTM), NumPy arrays ``model.forward(..., state)`` takes."""
    layer, _, num_layers = _check_exportable(model)
    parts = {"h": hx[0], "c": hx[1]} if layer == "LSTM" else {"h": hx}
    return {f"{k}_l{l}": v[l].detach().cpu().numpy().copy() for k, v in parts.items() for l in range(num_layers)}
