"""Evaluation and sampling, and the figures every report gives.

Reported figures: ``loss`` in nats per token, ``bpc`` = loss / ln 2 in bits per token (bits per
character on character corpora, bits per word on word corpora), ``perplexity`` = exp(loss).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Union, overload

import numpy as np

from .. import data
from .._checks import is_int, is_number, non_negative_int, positive_int, positive_number
from ..distributed import data_parallel

if TYPE_CHECKING:
    from ..data.vocab import Vocab
    from ..models.base import LanguageModel

__all__ = ["LN2", "BITS_LABELS", "bits", "bits_label", "perplexity", "evaluate", "sample", "filter_probabilities"]

LN2 = math.log(2.0)

#: The name of the bits-per-token figure for each kind of token (``Trainer(unit=...)``).
BITS_LABELS = {"char": "bpc", "word": "bpw", "bit": "bits/bit", "symbol": "bits/symbol", "step": "bits/step"}


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

    Separate sequences (a list of (n_i, 3) pen-stroke arrays, for a model with ``head="mdn"``) are
    scored by :func:`multiscale_rnn.training.sequences.evaluate_sequences`: each from the zero state,
    with nats per sequence and the log-likelihood per sequence beside the per-step figures.
    """
    from .sequences import evaluate_sequences, is_sequences

    if is_sequences(ids) or model.vocab_size is None:
        if distributed is not None:
            raise ValueError("distributed evaluation of separate sequences is not supported")
        return evaluate_sequences(model, ids, batch_size)
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


def filter_probabilities(
    logits: Any, temperature: float = 1.0, top_k: Optional[int] = None, top_p: Optional[float] = None
) -> np.ndarray:
    """The distributions the sampler draws from, unnormalised: ``exp(z - max z)`` with ``z = logits /
    temperature`` (float64, one row per sample; ``logits`` (B, V) or (V,)), every symbol outside the
    ``top_k`` most likely set to 0 (ties go to the lower id), then every symbol outside the smallest set of
    the most likely whose probability mass (after top-k) reaches ``top_p`` set to 0. None: no such limit.
    The one filter of ``sample``; arguments as ``sample`` checks them."""
    z = np.atleast_2d(np.asarray(logits, dtype=np.float64)) / temperature  # (B, V)
    z -= z.max(axis=-1, keepdims=True)
    p = np.exp(z)
    V = p.shape[-1]
    if top_k is not None and top_k < V:
        order = np.argsort(-p, axis=-1, kind="stable")  # most likely first
        np.put_along_axis(p, order[:, top_k:], 0.0, axis=-1)
    if top_p is not None and top_p < 1.0:
        order = np.argsort(-p, axis=-1, kind="stable")
        cum = np.cumsum(np.take_along_axis(p, order, axis=-1), axis=-1)
        before = np.concatenate([np.zeros_like(cum[:, :1]), cum[:, :-1]], axis=-1)  # the mass of the likelier
        drop = np.zeros(p.shape, dtype=bool)
        np.put_along_axis(drop, order, before >= top_p * cum[:, -1:], axis=-1)
        p[drop] = 0.0
    return p


def _draw(p: np.ndarray, rng: np.random.Generator) -> int:
    """One symbol drawn from the unnormalised distribution ``p`` (V,) with one number of ``rng``."""
    cdf = np.cumsum(p)
    tok = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
    if tok >= len(p) or p[tok] == 0.0:  # rounding at the very end of the cdf: the last symbol drawable
        tok = int(np.flatnonzero(p)[-1])
    return tok


def _sampling_prompts(model, vocab, prompt, length, temperature, seed, top_k, top_p, num_samples) -> List[str]:
    """The prompts of ``sample``, one per sample, after checking every argument (``ValueError`` /
    ``TypeError`` naming it)."""
    if is_number(temperature) and temperature == 0:
        raise ValueError("temperature must be > 0; for the most likely symbol at each step (greedy), give top_k=1")
    positive_number(temperature, "temperature")
    if not is_int(length) or length < 0:
        raise ValueError(f"length must be an integer >= 0, got {length!r}")
    non_negative_int(seed, "seed")
    if top_k is not None and not (is_int(top_k) and top_k >= 1):
        raise ValueError(f"top_k must be an integer >= 1 (or None: no limit), got {top_k!r}")
    if top_p is not None and not (is_number(top_p) and 0 < top_p <= 1):
        raise ValueError(f"top_p must be a number in (0, 1] (or None: no limit), got {top_p!r}")
    positive_int(num_samples, "num_samples", allow_none=True)
    if vocab.size != model.vocab_size:
        raise ValueError(f"the vocabulary has {vocab.size} symbols, the model {model.vocab_size}")
    if isinstance(prompt, str):
        return [prompt] * (num_samples or 1)
    if not isinstance(prompt, (list, tuple)) or not all(isinstance(q, str) for q in prompt):
        raise TypeError(f"prompt must be a str or a list of str, got {type(prompt).__name__} {prompt!r:.60}")
    if not prompt:
        raise ValueError('prompt is an empty list: give at least one prompt ("" for none)')
    if num_samples is not None:
        raise ValueError(
            f"num_samples={num_samples} repeats one prompt, and prompt is a list of {len(prompt)}: give either a "
            f"list of prompts (one sample each) or one prompt and num_samples"
        )
    return list(prompt)


@overload
def sample(
    model: LanguageModel,
    vocab: Vocab,
    prompt: str = "",
    length: int = 200,
    temperature: float = 1.0,
    seed: int = 0,
    *,
    top_k: Optional[int] = None,
    top_p: Optional[float] = None,
    num_samples: None = None,
) -> str: ...
@overload
def sample(
    model: LanguageModel,
    vocab: Vocab,
    prompt: Union[str, Sequence[str]] = "",
    length: int = 200,
    temperature: float = 1.0,
    seed: int = 0,
    *,
    top_k: Optional[int] = None,
    top_p: Optional[float] = None,
    num_samples: Optional[int] = None,
) -> Union[str, List[str]]: ...


def sample(
    model: LanguageModel,
    vocab: Vocab,
    prompt: Union[str, Sequence[str]] = "",
    length: int = 200,
    temperature: float = 1.0,
    seed: int = 0,
    *,
    top_k: Optional[int] = None,
    top_p: Optional[float] = None,
    num_samples: Optional[int] = None,
) -> Union[str, List[str]]:
    """Generate ``length`` symbols after ``prompt`` and return the prompt and the generated text.

    The prompt is encoded with ``vocab`` and read in one pass; then each step draws the next symbol from
    softmax(logits / temperature), restricted to the ``top_k`` most likely symbols and then to the smallest
    set of the most likely whose probability reaches ``top_p`` (nucleus sampling; the distribution is
    renormalised over what is left; None: no such limit; :func:`filter_probabilities`), and feeds it back
    (``model.forward`` one step at a time, state carried). Lower temperatures sharpen the distribution
    (towards the argmax); higher ones flatten it. Without a prompt the model starts from a newline
    (``<eos>`` for word vocabularies; else id 0), which is not part of the output.

    Several samples at once: ``prompt`` a list of prompts gives a list of texts, one per prompt, and
    ``num_samples=n`` with one prompt a list of ``n`` texts of that prompt; the samples step together as
    one batch. Seeding: sample ``i`` draws from its own NumPy generator seeded with ``seed + i``, one
    number per step, so it is the text ``sample(model, vocab, prompts[i], ..., seed=seed + i)`` gives (the
    same seed gives the same texts; sample 0 is the single-prompt call with ``seed``).

    Refused (``ValueError``, naming the argument): ``temperature`` <= 0, ``top_k`` < 1, ``top_p`` outside
    (0, 1], a negative ``length`` or ``seed``, ``num_samples`` < 1 or beside a list of prompts.
    """
    prompts = _sampling_prompts(model, vocab, prompt, length, temperature, seed, top_k, top_p, num_samples)
    t = float(temperature)
    encoded = [[int(i) for i in vocab.encode(q)] if q else [] for q in prompts]
    last, states = [], []
    for ids in encoded:  # each prompt read alone (their lengths differ), then all step together
        logits, state = model.forward(np.array([ids or [_start_id(vocab)]], dtype=np.int32))
        last.append(logits[0, -1])
        states.append(state)
    state = {k: np.concatenate([st[k] for st in states]) for k in states[0]}
    z = np.stack(last)  # (B, V)
    rngs = [np.random.default_rng(int(seed) + i) for i in range(len(prompts))]
    out: List[List[int]] = [[] for _ in prompts]
    for step in range(int(length)):
        p = filter_probabilities(z, t, top_k, top_p)
        tokens = [_draw(p[i], rng) for i, rng in enumerate(rngs)]
        for i, tok in enumerate(tokens):
            out[i].append(tok)
        if step + 1 < length:
            logits, state = model.forward(np.array(tokens, dtype=np.int32)[:, None], state)
            z = logits[:, -1]
    texts = [vocab.decode(ids + gen) for ids, gen in zip(encoded, out)]
    return texts[0] if isinstance(prompt, str) and num_samples is None else texts
