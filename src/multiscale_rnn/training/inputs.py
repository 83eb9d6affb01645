"""What ``Trainer.fit`` and ``best_of`` take as data: a corpus or token ids, and a vocabulary."""

from __future__ import annotations

from .. import data

__all__ = ["training_data", "vocab_for"]


def vocab_for(model, vocab, where: str):
    """``vocab`` (a ``data.Vocab`` or its ``to_json()`` dict) as a ``Vocab``, refused unless it has the
    model's ``vocab_size`` symbols; None stays None."""
    if vocab is None:
        return None
    if isinstance(vocab, dict):
        try:
            vocab = data.Vocab.from_json(vocab)
        except (TypeError, ValueError, KeyError) as e:
            raise ValueError(f"{where}: the vocabulary dict is not a Vocab.to_json() dict: {e}") from None
    if not isinstance(vocab, data.Vocab):
        raise TypeError(f"{where} must be a multiscale_rnn.data.Vocab (e.g. corpus.vocab), got {type(vocab).__name__}")
    if vocab.size != model.vocab_size:
        raise ValueError(
            f"{where} has {vocab.size} symbols but the model has vocab_size={model.vocab_size}: "
            f"build the model with vocab_size={vocab.size} (vocab.size), or pass the vocabulary the "
            f"model was built for"
        )
    return vocab


def training_data(model, train, valid=None, vocab=None):
    """``(train_ids, valid_ids, vocab)`` from what ``Trainer.fit`` and ``best_of`` take: a ``data.Corpus``
    (its train and valid splits and its vocabulary; ``valid`` and ``vocab``, when given, replace the
    corpus's, and a ``vocab`` that differs from the corpus's is refused) or token ids. Text where ids
    belong is refused with how to encode it, and a vocabulary whose size is not the model's
    ``vocab_size`` with both sizes."""
    if isinstance(valid, data.Corpus):
        raise TypeError(
            "valid must be token ids (e.g. corpus.valid), got a Corpus: pass the corpus as the "
            "first argument, fit(corpus), to train on its train split and validate on its valid split"
        )
    if isinstance(train, data.Corpus):
        corpus = train
        if corpus.vocab_size != model.vocab_size:
            raise ValueError(
                f"the corpus {corpus.name!r} has {corpus.vocab_size} symbols (corpus.vocab_size) but "
                f"the model has vocab_size={model.vocab_size}: build the model with "
                f"vocab_size=corpus.vocab_size"
            )
        if vocab is not None and vocab_for(model, vocab, "vocab") != corpus.vocab:
            raise ValueError(
                f"vocab differs from the corpus {corpus.name!r}'s vocabulary: leave vocab out to store the corpus's"
            )
        train, valid, vocab = corpus.train, (corpus.valid if valid is None else valid), corpus.vocab
    for what, ids in (("train", train), ("valid", valid)):
        hint = data.batching.text_given_for_ids(ids, f"{what} ids")
        if hint is not None:
            raise TypeError(hint)
    return train, valid, vocab_for(model, vocab, "vocab")
