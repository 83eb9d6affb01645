"""The figure of a model reading a text, by kind, for every family that declares it (``multiscale-rnn plot``).

Each family names the figures it draws in its class (``figure_kinds``: kind -> what it shows) and draws them
with the plot functions of its own modules (``draw_figure``); this module checks the request and writes the
file, for any family:

    kinds()                              -> {kind: [families that draw it]}   from the registry
    check_kind(kind, model=None)                                             a kind some family (model's) draws
    figure(model, kind, text, vocab)     -> matplotlib Figure                the checks, then the family's plot
    save(fig, path)                      -> Path                             PNG or SVG, by the extension

Today the HM-LSTM draws ``boundaries`` (z^l_t above the text, Figure 3 of Chung et al. 2017) and
``heatmap`` (||h^l_t|| per layer with its boundaries and a colour bar, Figure 4); the VCRNN and VCGRU
draw ``profile`` (m_t per step under its symbol, Figure 3 of Jernite et al. 2017).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from .._checks import did_you_mean

__all__ = ["FORMATS", "kinds", "check_kind", "figure", "save", "output_format"]

#: The file formats ``save`` writes, by extension.
FORMATS: Dict[str, str] = {".png": "png", ".svg": "svg"}


def kinds() -> Dict[str, List[str]]:
    """Every figure kind a registered family draws, with the families (class names) that draw it."""
    from ..models import MODELS

    out: Dict[str, List[str]] = {}
    for name, cls in sorted(MODELS.items()):
        for kind in getattr(cls, "figure_kinds", {}):
            out.setdefault(kind, []).append(name)
    return dict(sorted(out.items()))


def _words(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def check_kind(kind: str, model: Any = None) -> None:
    """``ValueError`` for a kind no family draws (naming the closest one and every kind with the families that
    draw it) or, given ``model``, one its family does not draw (naming those it draws, and the families that
    draw the kind); ``TypeError`` for a kind that is not a str."""
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a str, got {type(kind).__name__}")
    every = kinds()
    if kind not in every:
        hint = did_you_mean(kind, every)
        listed = "; ".join(f"{k} ({_words(v)})" for k, v in every.items())
        raise ValueError(f"unknown figure kind {kind!r}{hint}; the kinds, with the families that draw them: {listed}")
    if model is None:
        return
    name, own = type(model).__name__, list(type(model).figure_kinds)
    if kind not in own:
        draws = f"draw {_words(own)}, not {kind}" if own else f"draw no figure of a text, so not {kind}"
        raise ValueError(f"{name} models {draws} ({kind} is drawn by {_words(every[kind])})")


def _check_text(text, vocab, strict: bool) -> None:
    """A text (with its vocabulary) or 1-D token ids; with ``strict`` every symbol of a text must be in the
    vocabulary (``ValueError`` naming the first missing one and its position)."""
    if isinstance(text, str):
        if not text:
            raise ValueError("the text is empty")
        if vocab is None:
            raise ValueError("a text needs its vocabulary (vocab=, e.g. the checkpoint's or corpus.vocab)")
        if strict:
            vocab.encode(text, strict=True)
    elif isinstance(text, (bytes, bytearray)):
        raise TypeError("the text must be a str (or 1-D token ids), got bytes")
    elif len(text) == 0:
        raise ValueError("the token ids are empty")


def figure(
    model: Any,
    kind: str,
    text: Union[str, Sequence[int]],
    vocab: Any = None,
    *,
    strict: bool = True,
) -> Any:
    """The figure ``kind`` of ``model`` reading ``text``, as a ``matplotlib.figure.Figure`` (the function behind
    ``multiscale-rnn plot``).

    ``kind``: one of the figures the model's family declares (``type(model).figure_kinds``; every kind:
    :func:`kinds`). ``text``: a str encoded with ``vocab`` (a :class:`multiscale_rnn.data.Vocab`, e.g. a
    checkpoint's ``ck.vocab``), or 1-D token ids. The model reads it from a zero state in evaluation mode, and
    the family draws what it did with its own plot function (the HM-LSTM's ``boundaries`` and
    ``hidden_norms``, the VCRNN's ``computation_profile``). ``strict``: refuse symbols the vocabulary lacks
    (else they are read as its unknown symbol, when it has one).

    ``ValueError`` for an unknown kind (with the closest one), a kind the family does not draw (naming those it
    draws), an empty text, a text without its vocabulary, or a symbol the vocabulary lacks (naming it and its
    position); ``TypeError`` for a kind that is not a str."""
    check_kind(kind, model)
    _check_text(text, vocab, strict)
    ax = model.draw_figure(kind, text, vocab)
    return ax.figure


def output_format(path: Union[str, Path]) -> str:
    """The format of the file ``path`` names by its extension (``png`` or ``svg``, any case), or ``ValueError``
    naming the extension and those written."""
    suffix = Path(path).suffix
    fmt = FORMATS.get(suffix.lower())
    if fmt is None:
        raise ValueError(
            f"{path}: a figure is written as PNG or SVG, chosen by the extension ({', '.join(FORMATS)}), "
            f"got {suffix or 'none'!r}"
        )
    return fmt


def save(fig: Any, path: Union[str, Path], dpi: Optional[float] = 150) -> Path:
    """Write ``fig`` to ``path`` as PNG or SVG (by the extension, :func:`output_format`), the folder made when
    missing, the layout tightened to the drawing; returns the path."""
    from ..storage import check_writable

    fmt = output_format(path)
    path = check_writable(path, "figure")
    fig.savefig(path, format=fmt, dpi=dpi, bbox_inches="tight")
    return path
