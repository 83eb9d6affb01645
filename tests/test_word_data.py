"""Word corpora for word-level language models: min_count, frequency order, text8 words, classes."""

import numpy as np
import pytest

from multiscale_rnn import data

TRAIN = "the cat sat on the mat\nthe dog sat\na cat\n"
VALID = "the bird sat\n"


def test_frequency_order_and_min_count():
    c = data.word_corpus(TRAIN, VALID, name="toy", min_count=2, order="frequency")
    counts = c.counts()
    # the 3, <eos> 3, sat 2, cat 2, <unk> 4 (on, mat, dog, a), by descending count then string order
    assert c.vocab.itos == ["<unk>", "<eos>", "the", "cat", "sat"]
    assert counts.tolist() == [4, 3, 3, 2, 2]
    assert (np.diff(counts) <= 0).all()
    assert c.stats()["unknown"] == {"train": 4, "valid": 1}
    assert c.unknown["train"] == {"on": 1, "mat": 1, "dog": 1, "a": 1}
    assert c.vocab.decode(c.valid) == "the <unk> sat <eos>"


def test_default_is_unchanged_sorted_vocabulary():
    c = data.word_corpus(TRAIN, VALID)
    assert c.vocab.itos == sorted(set(TRAIN.split()) | {"<eos>"}) + ["<unk>"]
    assert c.stats()["unknown"] == {"train": 0, "valid": 1}


def test_by_frequency_renumbers_and_keeps_the_text():
    c = data.word_corpus(TRAIN, VALID)
    f = c.by_frequency()
    assert (np.diff(f.counts()) <= 0).all()
    for split in ("train", "valid"):
        assert f.vocab.decode(getattr(f, split)) == c.vocab.decode(getattr(c, split))
    assert f.vocab.unk == "<unk>" and f.vocab.itos[f.vocab.unk_id] == "<unk>"
    assert sorted(f.vocab.itos) == sorted(c.vocab.itos)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(min_count=0), "min_count"),
        (dict(min_count=1.5), "min_count"),
        (dict(order="alpha"), "order"),
        (dict(min_count=100), "no training word"),
    ],
)
def test_bad_word_corpus_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        data.word_corpus(TRAIN, VALID, **kwargs)


def test_text8_words_from_a_local_file(tmp_path):
    rng = np.random.default_rng(0)
    words = np.array(["w%d" % i for i in range(200)])
    p = 1.0 / np.arange(1, 201)
    text = " " + " ".join(rng.choice(words, size=3000, p=p / p.sum())) + " xyz"  # ends mid-word, like the prefix
    f = tmp_path / "text8"
    f.write_text(text[:-1])
    c = data.load("text8-word", path=f)
    train_tokens = text[:-1].split()[:-1]  # the partial last word is dropped
    n_train = len(c.train) + len(c.valid) + len(c.test)
    assert n_train == len(train_tokens)  # no word is split at a cut
    counts = {w: train_tokens[: len(c.train)].count(w) for w in set(train_tokens[: len(c.train)])}
    rare = {w for w, n in counts.items() if n < 10}
    assert rare and len(rare) < len(counts)
    assert set(c.vocab.itos) == (set(counts) - rare) | {"<unk>"}
    assert (np.diff(c.counts()) <= 0).all()
    assert c.vocab.decode(c.train).split() == [
        w if w not in rare and w in counts else "<unk>" for w in train_tokens[: len(c.train)]
    ]
    assert data.load("text8", path=f).unit == "char"  # the character corpus is untouched


def test_ptb_words_read_the_shared_folder():
    folder = "/work/shared/data/ptb"
    import os

    if not os.path.isdir(folder):
        pytest.skip("no local Penn Treebank copy")  # CI has no shared data folder
    c = data.load("ptb-word", path=folder)
    assert c.vocab_size == 10000
    assert (len(c.train), len(c.valid), len(c.test)) == (929589, 73760, 82430)


def test_class_sizes_bins_equal_mass():
    counts = np.bincount(
        np.random.default_rng(2).choice(400, 20000, p=1 / np.arange(1, 401) / (1 / np.arange(1, 401)).sum()),
        minlength=400,
    )
    counts = np.sort(counts)[::-1]
    sizes = data.class_sizes(counts, 20)
    assert sum(sizes) == 400 and all(type(s) is int and s >= 1 for s in sizes)
    assert len(sizes) <= 20
    mass = np.add.reduceat(counts, np.cumsum([0] + sizes[:-1])) / counts.sum()
    assert mass.max() < 0.25  # no class far above its 1/20 share unless one word alone is
    assert sizes[0] <= sizes[-1]  # frequent words in small classes, rare ones in large
    assert len(data.class_sizes(counts)) <= 20  # default ~ sqrt(400)
    assert data.class_sizes([7, 5, 3, 1], 1) == [4]
    assert data.class_sizes([1, 1, 1, 1], 4) == [1, 1, 1, 1]


@pytest.mark.parametrize(
    "counts,k,match",
    [
        ([1, 2], 2, "descending"),
        ([], None, "non-empty"),
        ([0, 0], 1, "all zero"),
        ([3, 1], 3, "num_classes"),
        ([3, -1], 1, "non-negative"),
    ],
)
def test_class_sizes_refuses_bad_input(counts, k, match):
    with pytest.raises(ValueError, match=match):
        data.class_sizes(counts, k)
