"""Evaluation and sampling, and the figures every report gives.

Reported figures: ``loss`` in nats per token, ``bpc`` = loss / ln 2 in bits per token (bits per
character on character corpora, bits per word on word corpora), ``perplexity`` = exp(loss).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Dict, List

import numpy as np

from .. import data
from .._checks import is_int, positive_int, positive_number
from ..distributed import data_parallel

if TYPE_CHECKING:
    from ..data.vocab import Vocab
    from ..models.base import LanguageModel

__all__ = ["LN2", "BITS_LABELS", "bits", "bits_label", "perplexity", "evaluate", "sample"]

LN2 = math.log(2.0)

#: The name of the bits-per-token figure for each kind of token (``Trainer(unit=...)``).
BITS_LABELS = {"char": "bpc", "word": "bpw", "bit": "bits/bit", "symbol": "bits/symbol"}


def bits(loss: float) -> float:
    """A loss in nats per token as bits per token."""
    return loss / LN2


def bits_label(unit: str) -> str:
    """The name of the bits-per-token figure for tokens of ``unit`` (a key of ``BITS_LABELS``)."""
    return BITS_LABELS[unit]


def perplexity(loss: float) -> float:
    """exp(loss), infinite where that overflows."""
    try:
        return math.exp(loss)
    except OverflowError:
        return math.inf


def _checked_ids(model, ids, batch_size, bptt) -> np.ndarray:
    """``ids`` as a 1-D array, refused (naming the problem) when they are no ids of ``model``'s
    vocabulary, fewer than 2, or ``batch_size`` / ``bptt`` are no positive integers."""
    if isinstance(ids, data.Corpus):
        raise TypeError(
            f"evaluate takes token ids, got the corpus {ids.name!r}: pass one of its splits (corpus.test, corpus.valid)"
        )
    hint = data.batching.text_given_for_ids(ids, "evaluation ids", use="a split: msr.evaluate(model, corpus.test)")
    if hint is not None:
        raise TypeError(hint)
    ids = np.asarray(ids)
    if ids.ndim != 1:
        raise ValueError(f"evaluation ids must be 1-D, got shape {ids.shape}")
    positive_int(batch_size, "batch_size")
    positive_int(bptt, "bptt")
    if len(ids) < 2:
        raise ValueError(f"evaluation needs at least 2 tokens (an input and its target), got {len(ids)}")
    return ids


def evaluate(
    model: LanguageModel, ids: Any, batch_size: int = 16, bptt: int = 100, *, distributed: Any = None
) -> Dict[str, float]:
    """Evaluation-mode loss of ``model`` on 1-D token ids.

    The ids are cut into ``B = min(batch_size, len(ids) // 2)`` contiguous streams, each read from
    a zero state with the state carried from chunk to chunk (so the result does not depend on
    ``bptt``, which only bounds the memory used); the ``len(ids) % B`` tokens at the end are left out. Returns
    ``loss`` (nats per token), ``bpc``
    (bits per token), ``perplexity``, ``tokens`` (targets scored) and ``streams`` (B). The model's
    carried state is left at the end of the streams.

    ``distributed`` (True, an mpi4py communicator or a ``distributed.DataParallel``; collective):
    each rank reads its share of the B streams and the sums are added over the ranks, so every rank
    returns the figures of all B streams (equal to one process's up to the order of the sums).
    """
    ids = _checked_ids(model, ids, batch_size, bptt)
    B = min(int(batch_size), len(ids) // 2)
    streams = data.batchify(ids, B)
    if ids.size and (streams.min() < 0 or streams.max() >= model.vocab_size):
        bad = int(np.flatnonzero((ids < 0) | (ids >= model.vocab_size))[0])
        raise IndexError(
            f"token id {int(ids[bad])} at position {bad} is outside the model's vocabulary [0, {model.vocab_size})"
        )
    dist = data_parallel(distributed)
    if dist is not None:
        streams = streams[dist.shard(B)]  # may be empty when B < ranks
    total, count = 0.0, 0
    if len(streams):
        model.reset_state(len(streams))
        for x, y in data.chunks(streams, int(bptt)):
            n = x.size
            total += model.loss(x, y, "keep")[0] * n
            count += n
    if dist is not None:
        total, count = dist.sum([total, count])
        count = int(count)
    loss = total / count
    return {"loss": loss, "bpc": bits(loss), "perplexity": perplexity(loss), "tokens": count, "streams": B}


def _start_id(vocab) -> int:
    """The id a prompt-less sample starts from: a newline, else ``<eos>``, else a space, else 0."""
    stoi = getattr(vocab, "stoi", {})
    for symbol in ("\n", "<eos>", " "):
        if symbol in stoi:
            return int(stoi[symbol])
    return 0


def sample(
    model: LanguageModel, vocab: Vocab, prompt: str = "", length: int = 200, temperature: float = 1.0, seed: int = 0
) -> str:
    """Generate ``length`` symbols after ``prompt`` and return the prompt and the generated text.

    The prompt is encoded with ``vocab`` and read in one pass; then each step draws the next symbol
    from softmax(logits / temperature) with a NumPy generator seeded by ``seed`` and feeds it back
    (``model.forward`` one step at a time, state carried). Lower temperatures sharpen the
    distribution (towards the argmax); higher ones flatten it. Without a prompt the model starts
    from a newline (``<eos>`` for word vocabularies; else id 0), which is not part of the output.
    """
    t = positive_number(temperature, "temperature")
    if not is_int(length) or length < 0:
        raise ValueError(f"length must be an integer >= 0, got {length!r}")
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
    if vocab.size != model.vocab_size:
        raise ValueError(f"the vocabulary has {vocab.size} symbols, the model {model.vocab_size}")
    rng = np.random.default_rng(seed)
    prompt_ids = [int(i) for i in vocab.encode(prompt)] if prompt else []
    feed = np.array([prompt_ids or [_start_id(vocab)]], dtype=np.int32)  # (1, T)
    logits, state = model.forward(feed)
    out: List[int] = []
    for i in range(int(length)):
        z = logits[0, -1].astype(np.float64) / t
        z -= z.max()
        p = np.exp(z)
        cdf = np.cumsum(p)
        tok = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
        tok = min(tok, model.vocab_size - 1)
        out.append(tok)
        if i + 1 < length:
            logits, state = model.forward(np.array([[tok]], dtype=np.int32), state)
    return vocab.decode(prompt_ids + out)
