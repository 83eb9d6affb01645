"""The hierarchical text generator and its ground-truth boundaries."""

import numpy as np
import pytest

from multiscale_rnn import data

# the start of synthetic_hierarchy(seed=0) before the trie lexicon became the default
OLD_SEED0_TEXT = "xygbm qnhibba pnitkix pzsqo dotghgfx; qsyqjco tyb; zuzjr qvrskwdp ys da pnitkix; paw tbo ly vnjikms;"


@pytest.fixture(scope="module")
def h():
    return data.synthetic_hierarchy(n_chars=20000, seed=0)


def test_same_seed_same_output_other_seed_other_output(h):
    again = data.synthetic_hierarchy(n_chars=20000, seed=0)
    assert again.text == h.text and again.lexicon == h.lexicon and again.templates == h.templates
    assert np.array_equal(again.word_boundaries, h.word_boundaries)
    assert np.array_equal(again.phrase_boundaries, h.phrase_boundaries)
    other = data.synthetic_hierarchy(n_chars=20000, seed=1)
    assert other.text != h.text and other.lexicon != h.lexicon


def test_shorter_text_is_a_prefix(h):
    short = data.synthetic_hierarchy(n_chars=1234, seed=0)
    assert short.text == h.text[:1234]
    assert np.array_equal(short.word_boundaries, h.word_boundaries[:1234])
    assert np.array_equal(short.phrase_boundaries, h.phrase_boundaries[:1234])


def test_shapes_and_alphabet(h):
    assert len(h.text) == len(h) == 20000
    for b in (h.word_boundaries, h.phrase_boundaries):
        assert b.dtype == bool and b.shape == (20000,)
    assert set(h.text) <= set("abcdefghijklmnopqrstuvwxyz" + ".!?;" + " ")
    assert len(h.lexicon) == len(set(h.lexicon)) == 48
    assert all(2 <= len(w) <= 8 for w in h.lexicon)
    assert sorted(i for c in h.classes for i in c) == list(range(48))
    assert h.params["lexicon"] == "trie" and h.params["branching"] == (2, 3)
    assert all(2 <= len(slots) <= 5 for slots, _ in h.templates)


def test_boundaries_agree_with_the_text(h):
    text = np.array(list(h.text))
    assert np.array_equal(h.word_boundaries[:-1], data.word_boundaries(h.text)[:-1])
    assert np.array_equal(np.flatnonzero(h.phrase_boundaries), np.flatnonzero(np.isin(text, list(".!?;"))))
    assert not (h.phrase_boundaries & ~h.word_boundaries).any()  # phrases end where words end
    assert not (h.word_boundaries & (text == " ")).any()
    inside = np.flatnonzero(h.word_boundaries)[:-1]
    assert (text[inside + 1] == " ").all()
    assert 0.1 < h.word_boundaries.mean() < 0.3 and 0.02 < h.phrase_boundaries.mean() < 0.1


def test_cut_word_is_not_marked_as_ended():
    for n in range(200, 260):
        h = data.synthetic_hierarchy(n_chars=n, seed=3)
        full = data.synthetic_hierarchy(n_chars=n + 20, seed=3)
        assert h.word_boundaries[-1] == (full.text[n] == " " and full.text[n - 1] != " ")


def test_every_phrase_follows_a_template(h):
    class_of = {h.lexicon[i]: c for c, members in enumerate(h.classes) for i in members}
    templates = set(h.templates)
    phrases = h.text[: h.text.rindex(" ")].split(" ")
    current, complete = [], 0
    for token in phrases:
        if token[-1] in ".!?;":
            current.append(token[:-1])
            assert (tuple(class_of[w] for w in current), token[-1]) in templates
            current, complete = [], complete + 1
        else:
            assert token in class_of
            current.append(token)
    assert complete == h.phrase_boundaries[: h.text.rindex(" ")].sum() > 500


def test_chained_phrases_follow_the_successors_of_the_previous_template():
    h = data.synthetic_hierarchy(n_chars=30000, seed=2, phrase_successors=2)
    assert h.params["phrase_successors"] == 2
    class_of = {h.lexicon[i]: c for c, members in enumerate(h.classes) for i in members}
    index = {t: i for i, t in enumerate(h.templates)}
    # the templates of the complete phrases, in order (with 12 templates of 2-5 slots some may coincide)
    used, current = [], []
    for token in h.text[: h.text.rindex(" ")].split(" "):
        current.append(token.rstrip(".!?;"))
        if token[-1] in ".!?;":
            used.append(index[(tuple(class_of[w] for w in current), token[-1])])
            current = []
    assert len(used) > 1000
    followers = {}
    for a, b in zip(used, used[1:]):
        followers.setdefault(a, set()).add(b)
    # every template is followed by at most 2 distinct ones, and most by exactly 2 (not a uniform draw)
    assert all(len(f) <= 2 for f in followers.values())
    assert sum(len(f) == 2 for f in followers.values()) >= len(followers) - 1
    short = data.synthetic_hierarchy(n_chars=5000, seed=2, phrase_successors=2)
    assert short.text == h.text[:5000]  # a shorter text is still a prefix
    # the chained text is not the default one, and another k gives another text
    assert data.synthetic_hierarchy(n_chars=5000, seed=2).text != short.text
    assert data.synthetic_hierarchy(n_chars=5000, seed=2, phrase_successors=3).text != short.text


def test_corpus_splits_and_aligned_boundaries(h):
    c = h.corpus()
    assert (len(c.train), len(c.valid), len(c.test)) == (16000, 2000, 2000)
    assert c.unit == "char" and c.name == "synthetic"
    pieces = [c.vocab.decode(c.train), c.vocab.decode(c.valid), c.vocab.decode(c.test)]
    assert "".join(pieces) == h.text
    for split, ids in c.splits.items():
        b = c.boundaries[split]
        assert b["word"].shape == b["phrase"].shape == ids.shape
    assert np.array_equal(np.concatenate([c.boundaries[s]["word"] for s in data.SPLITS]), h.word_boundaries)
    assert np.array_equal(np.concatenate([c.boundaries[s]["phrase"] for s in data.SPLITS]), h.phrase_boundaries)
    only_train = h.corpus(valid_fraction=0.0, test_fraction=0.0)
    assert only_train.valid is None and only_train.test is None and list(only_train.boundaries) == ["train"]


def test_load_synthetic_passes_options():
    c = data.load("synthetic", n_chars=5000, seed=3, valid_fraction=0.2)
    ref = data.synthetic_hierarchy(n_chars=5000, seed=3).corpus(valid_fraction=0.2)
    assert np.array_equal(c.train, ref.train) and np.array_equal(c.valid, ref.valid)
    assert len(c.valid) == 1000
    assert len(data.load("synthetic").train) == 16000


def test_trie_lexicon_is_ambiguous_until_the_last_letter(h):
    """The default lexicon: no word is a prefix of another, every proper prefix of a word is shared
    by at least two words, and words that differ only in their last letter are in different classes."""
    words = h.lexicon
    class_of = {i: c for c, members in enumerate(h.classes) for i in members}
    for w in words:
        assert not any(v != w and v.startswith(w) for v in words), w
        for k in range(len(w)):
            assert sum(v.startswith(w[:k]) for v in words) >= 2, (w, k)
    siblings = {}
    for i, w in enumerate(words):
        siblings.setdefault(w[:-1], []).append(class_of[i])
    for prefix, classes in siblings.items():
        if len(classes) <= len(h.classes):
            assert len(set(classes)) == len(classes), prefix
    # the children of each node are 2 or 3 letters
    nodes = {}
    for w in words:
        for k in range(len(w)):
            nodes.setdefault(w[:k], set()).add(w[k])
    assert {len(c) for c in nodes.values()} <= {2, 3}
    # another seed, another trie; the same seed with lexicon="random" is the earlier generator
    assert data.synthetic_hierarchy(n_chars=100, seed=1).lexicon != words
    old = data.synthetic_hierarchy(n_chars=20000, seed=0, lexicon="random")
    assert old.params["lexicon"] == "random" and old.lexicon != words
    assert any(sum(v.startswith(w[:2]) for v in old.lexicon) == 1 for w in old.lexicon)


def test_random_lexicon_reproduces_the_earlier_text():
    old = data.synthetic_hierarchy(n_chars=200, seed=0, lexicon="random")
    assert old.text.startswith(OLD_SEED0_TEXT)
    assert len(old.lexicon) == 48 and all(2 <= len(w) <= 8 for w in old.lexicon)


def test_other_parameters_shape_the_text():
    h = data.synthetic_hierarchy(
        n_chars=3000,
        seed=2,
        n_words=10,
        word_len=(3, 3),
        phrase_len=(1, 1),
        n_classes=2,
        n_templates=3,
        alphabet="xyz",
        punctuation="|",
        lexicon="random",
    )
    words = h.text.replace("|", "").split()
    assert all(len(w) == 3 and set(w) <= set("xyz") for w in words[:-1])
    assert h.word_boundaries.sum() == h.phrase_boundaries.sum()  # one word per phrase


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"n_chars": 0}, ValueError, "n_chars must be at least 1"),
        ({"n_chars": 10.5}, TypeError, "n_chars must be an integer"),
        ({"seed": -1}, ValueError, "seed must be at least 0"),
        ({"word_len": (5, 2)}, ValueError, "word_len must satisfy"),
        ({"phrase_len": 3}, TypeError, "phrase_len must be a pair"),
        ({"word_len": "28"}, TypeError, "word_len must be a pair"),
        ({"n_classes": 60}, ValueError, "exceeds n_words"),
        ({"n_words": 20, "alphabet": "ab", "word_len": (1, 2), "lexicon": "random"}, ValueError, "too many"),
        ({"n_words": 200, "word_len": (2, 4)}, ValueError, "cannot be the leaves of a trie"),
        ({"n_words": 3, "n_classes": 2, "word_len": (2, 4)}, ValueError, "cannot be the leaves of a trie"),
        ({"branching": (2, 5), "alphabet": "abcd"}, ValueError, "needs at least 5 letters"),
        ({"branching": (1, 3)}, ValueError, "branching must satisfy"),
        ({"lexicon": "tree"}, ValueError, "lexicon must be 'trie' or 'random'"),
        ({"alphabet": "abc.", "punctuation": "."}, ValueError, "share"),
        ({"alphabet": "a b"}, ValueError, "distinct non-space"),
        ({"punctuation": ""}, ValueError, "non-empty"),
        ({"phrase_successors": 0}, ValueError, "phrase_successors must be at least 1"),
        ({"phrase_successors": 13}, ValueError, "phrase_successors=13 exceeds n_templates=12"),
        ({"phrase_successors": 2.0}, TypeError, "phrase_successors must be an integer"),
    ],
)
def test_bad_parameters(kwargs, error, message):
    with pytest.raises(error, match=message):
        data.synthetic_hierarchy(**kwargs)
