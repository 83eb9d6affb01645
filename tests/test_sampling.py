"""Sampling with temperature, top-k and nucleus (top-p) filtering, several samples at once: draws stay in the
sets the model's own probabilities allow, seeds reproduce, a batch equals its samples drawn alone, bad
arguments are refused; and the command line's flags."""

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn import data
from multiscale_rnn.cli import main
from multiscale_rnn.training.evaluation import _start_id, filter_probabilities

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def trained():
    """A small model trained briefly on the shipped text (its distributions are far from uniform)."""
    corpus = data.load("embedded")
    model = msr.LSTM(corpus.vocab_size, 16, (48,), seed=0)
    msr.Trainer(model, batch_size=16, bptt=50, progress=False).fit(corpus.train[:30000], epochs=1)
    return model, corpus.vocab


def _probabilities(model, vocab, prompt, text, temperature=1.0):
    """The model's own distribution (softmax of logits / temperature) before each generated symbol of
    ``text`` (which starts with ``prompt``), read in one pass: (generated, V), and the generated ids."""
    ids = [int(i) for i in vocab.encode(text)]
    n = len(vocab.encode(prompt)) if prompt else 0
    feed = ids[: len(ids) - 1] if n else [_start_id(vocab)] + ids[:-1]
    logits, _ = model.forward(np.array([feed], dtype=np.int32))
    z = logits[0].astype(np.float64) / temperature
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    first = max(n - 1, 0)
    return p[first:], np.array(ids[n:])


def test_the_filter_on_a_known_distribution():
    logits = np.log([[0.05, 0.4, 0.1, 0.3, 0.15]])
    p = lambda **kw: (lambda q: q / q.sum())(filter_probabilities(logits, **kw)[0])  # noqa: E731
    assert np.allclose(p(), [0.05, 0.4, 0.1, 0.3, 0.15])
    assert np.allclose(p(top_k=2), [0, 0.4 / 0.7, 0, 0.3 / 0.7, 0])
    assert np.flatnonzero(p(top_p=0.7)).tolist() == [1, 3]  # 0.4 + 0.3 reaches 0.7
    assert np.flatnonzero(p(top_p=0.71)).tolist() == [1, 3, 4]
    assert np.flatnonzero(p(top_p=0.4)).tolist() == [1]  # the most likely alone reaches 0.4
    assert np.flatnonzero(p(top_k=3, top_p=0.8)).tolist() == [1, 3]  # top-p over what top-k leaves: 0.4/0.85 + ...
    squared = np.array([0.05, 0.4, 0.1, 0.3, 0.15]) ** 2  # temperature 0.5: p^2, renormalised
    assert np.allclose(p(temperature=0.5), squared / squared.sum())


@pytest.mark.parametrize("k", [1, 3, 8])
def test_top_k_never_draws_outside_the_k_most_likely(trained, k):
    model, vocab = trained
    texts = msr.sample(model, vocab, "", length=60, temperature=1.3, seed=3, top_k=k, num_samples=20)
    draws = 0
    for text in texts:
        p, ids = _probabilities(model, vocab, "", text, temperature=1.3)
        kth = -np.sort(-p, axis=1)[:, k - 1]
        assert np.all(p[np.arange(len(ids)), ids] >= kth * (1 - 1e-5))
        draws += len(ids)
    assert draws == 1200


@pytest.mark.parametrize("top_p", [0.3, 0.9])
def test_top_p_draws_only_from_the_smallest_set_reaching_p(trained, top_p):
    model, vocab = trained
    texts = msr.sample(model, vocab, "LOVE, n. ", length=60, seed=11, top_p=top_p, num_samples=20)
    outside_plain = 0
    for text in texts:
        p, ids = _probabilities(model, vocab, "LOVE, n. ", text)
        for row, tok in zip(p, ids):
            likelier = row[row > row[tok]].sum()  # the mass of the symbols more likely than the one drawn
            assert likelier < top_p * (1 + 1e-6)  # so it belongs to the smallest set reaching top_p
        order = -np.sort(-p, axis=1)
        outside_plain += int(np.sum(np.cumsum(order, axis=1)[:, 0] < top_p))
    assert outside_plain > 0  # the test has steps where the set is more than one symbol


def test_top_k_1_is_the_argmax(trained):
    model, vocab = trained
    text = msr.sample(model, vocab, "WAR, n. ", length=40, top_k=1, seed=0)
    p, ids = _probabilities(model, vocab, "WAR, n. ", text)
    assert np.array_equal(ids, p.argmax(axis=1))
    assert text == msr.sample(model, vocab, "WAR, n. ", length=40, top_k=1, seed=99)  # no randomness left


def test_the_same_seed_gives_the_same_samples(trained):
    model, vocab = trained
    kw = dict(length=50, temperature=0.9, top_k=20, top_p=0.95)
    a = msr.sample(model, vocab, ["A", "B"], seed=4, **kw)
    assert a == msr.sample(model, vocab, ["A", "B"], seed=4, **kw)
    assert a != msr.sample(model, vocab, ["A", "B"], seed=5, **kw)


def test_a_batch_is_each_prompt_alone_with_seed_plus_its_index(trained):
    model, vocab = trained
    prompts = ["LOVE, n. ", "", "A", "WAR, n. The art of"]
    kw = dict(length=80, temperature=0.8, top_k=12, top_p=0.9)
    batch = msr.sample(model, vocab, prompts, seed=7, **kw)
    assert isinstance(batch, list) and len(batch) == 4
    assert batch == [msr.sample(model, vocab, q, seed=7 + i, **kw) for i, q in enumerate(prompts)]
    repeated = msr.sample(model, vocab, "LOVE, n. ", seed=7, num_samples=3, **kw)
    assert repeated == msr.sample(model, vocab, ["LOVE, n. "] * 3, seed=7, **kw)
    assert repeated[0] == batch[0] and len(set(repeated)) == 3
    assert isinstance(msr.sample(model, vocab, "A", length=5), str)


@pytest.mark.parametrize(
    "kw, error, words",
    [
        ({"top_k": 0}, ValueError, r"top_k must be an integer >= 1 \(or None: no limit\), got 0"),
        ({"top_k": -2}, ValueError, "top_k must be an integer >= 1"),
        ({"top_k": 2.0}, ValueError, "top_k must be an integer >= 1"),
        ({"top_p": 0}, ValueError, r"top_p must be a number in \(0, 1\] \(or None: no limit\), got 0"),
        ({"top_p": 1.5}, ValueError, r"top_p must be a number in \(0, 1\]"),
        ({"top_p": float("nan")}, ValueError, r"top_p must be a number in \(0, 1\]"),
        (
            {"temperature": 0},
            ValueError,
            r"temperature must be > 0; for the most likely symbol at each step \(greedy\), give top_k=1",
        ),
        ({"temperature": -1.0}, ValueError, "temperature must be a finite number > 0, got -1.0"),
        ({"num_samples": 0}, ValueError, "num_samples must be a positive integer, got 0"),
        ({"prompt": ["a", "b"], "num_samples": 2}, ValueError, "num_samples=2 repeats one prompt"),
        ({"prompt": []}, ValueError, "prompt is an empty list"),
        ({"prompt": ["a", 3]}, TypeError, "prompt must be a str or a list of str"),
        ({"seed": -1}, ValueError, "seed must be a non-negative integer, got -1"),
    ],
)
def test_bad_arguments_are_refused(trained, kw, error, words):
    model, vocab = trained
    with pytest.raises(error, match=words):
        msr.sample(model, vocab, **{"length": 5, **kw})


@pytest.fixture(scope="module")
def checkpoint(trained, tmp_path_factory):
    model, vocab = trained
    path = tmp_path_factory.mktemp("sample") / "m.npz"
    msr.checkpoint.save(path, model, vocab=vocab)
    return path


def test_the_command_line_samples_with_the_filters(checkpoint, capsys, trained):
    model, vocab = trained
    args = ["sample", str(checkpoint), "--prompt", "LOVE", "--length", "30", "--top-k", "5", "--top-p", "0.9"]
    assert main(args + ["--num-samples", "3", "--seed", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    texts = msr.sample(model, vocab, "LOVE", length=30, top_k=5, top_p=0.9, seed=2, num_samples=3)
    assert out[0] == "--- sample 1/3 (seed 2) ---" and out[2] == "--- sample 2/3 (seed 3) ---"
    assert "\n".join(out) == "\n".join(f"--- sample {i + 1}/3 (seed {2 + i}) ---\n{t}" for i, t in enumerate(texts))
    assert main(args + ["--seed", "2"]) == 0  # one sample: the text alone, as before
    assert capsys.readouterr().out == texts[0] + "\n"


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--top-k", "0"], "--top-k must be an integer >= 1 (the most likely symbols drawn from), got 0"),
        (["--top-p", "0"], "--top-p must be a number in (0, 1] (a probability mass), got 0.0"),
        (["--top-p", "1.2"], "--top-p must be a number in (0, 1] (a probability mass), got 1.2"),
        (["--num-samples", "0"], "--num-samples must be a positive integer, got 0"),
        (["--temperature", "-1"], "--temperature must be a finite number > 0, got -1.0"),
    ],
)
def test_the_command_line_names_the_bad_flag(checkpoint, capsys, flags, words):
    assert main(["sample", str(checkpoint), "--length", "5", *flags]) == 1
    assert words in capsys.readouterr().err
