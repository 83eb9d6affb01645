"""Computation-profile analyses and plots (Figures 2 and 3, Table 2 of the variable-computation
paper) on a stand-in trace with the fields of ``model.trace(...)``."""

from dataclasses import dataclass
from typing import List, Optional

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from multiscale_rnn import analysis, data, plot  # noqa: E402


@dataclass
class FakeTrace:
    tokens: np.ndarray
    text: Optional[List[str]]
    m: np.ndarray
    d: np.ndarray
    e: np.ndarray
    equivalent_dim: float


def make_trace(m, text=None, D=20):
    """A trace with a hard mask: the first d_t = ceil(m_t D) dimensions are updated."""
    m = np.asarray(m, dtype=float)
    d = np.ceil(m * D).astype(int)
    e = (np.arange(D)[:, None] < d[None, :]).astype(float)
    return FakeTrace(np.arange(len(m)) % 7, text, m, d, e, float(d.mean()))


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _gid(ax, gid):
    return [p for p in ax.patches if p.get_gid() == gid]


# ---------------------------------------------------------------- Figure 3


def test_character_profile_numbers():
    text = "the cat sat"
    m = np.linspace(0.05, 0.95, len(text))
    tr = make_trace(m, list(text))
    values, symbols, spaces = analysis.character_profile(tr)
    assert np.array_equal(values, m) and symbols == list(text)
    assert spaces.nonzero()[0].tolist() == [3, 7]
    frac, _, _ = analysis.character_profile(tr, what="d")
    assert np.allclose(frac, np.ceil(m * 20) / 20)
    with pytest.raises(ValueError, match="what must be"):
        analysis.character_profile(tr, what="e")
    with pytest.raises(TypeError, match="with 'm'"):
        analysis.character_profile(object())
    bad = make_trace(m, list(text[:-1]))
    with pytest.raises(ValueError, match="10 symbols but 11 steps"):
        analysis.character_profile(bad)


def test_computation_profile_plot_bars_text_and_wrapping():
    text = "a word and another\none"
    rng = np.random.default_rng(0)
    m = rng.uniform(0, 1, len(text))
    tr = make_trace(m, list(text))
    ax = plot.computation_profile(tr, width=10)
    bars = _gid(ax, "computation")
    assert np.allclose([b.get_height() for b in bars], m)
    # wrapping: step k is in row k // 10, column k % 10, rows 1.6 apart downwards
    assert np.allclose([b.get_x() + b.get_width() / 2 for b in bars], np.arange(len(m)) % 10)
    assert np.allclose([b.get_y() for b in bars], -1.6 * (np.arange(len(m)) // 10))
    shown = [t.get_text() for t in ax.texts]
    assert shown == ["_" if c == " " else ("\u21b5" if c == "\n" else c) for c in text]
    spaces = _gid(ax, "space")
    assert sorted(round(p.get_x() + 0.5) + 10 * round(-p.get_y() / 1.6) for p in spaces) == [1, 6, 10]
    # a window, on a given Axes, with d / D
    _, ax2 = plt.subplots()
    out = plot.computation_profile(tr, width=50, start=2, stop=6, what="d", ax=ax2)
    assert out is ax2
    assert np.allclose([b.get_height() for b in _gid(ax2, "computation")], np.ceil(m[2:6] * 20) / 20)
    assert [t.get_text() for t in ax2.texts] == ["w", "o", "r", "d"]
    with pytest.raises(ValueError, match="width"):
        plot.computation_profile(tr, width=0)
    with pytest.raises(ValueError, match="start"):
        plot.computation_profile(tr, start=5, stop=5)


# ---------------------------------------------------------------- Figure 2


def test_top_dimension_activity_and_bit_profile_numbers():
    # 3 characters with 8 buffer bits: high computation on the first bit of each character,
    # medium on other character bits, none on the buffer
    frame = 16
    pos = np.tile(np.arange(frame), 3)
    m = np.where(pos == 0, 1.0, np.where(pos < 8, 0.5, 0.0))
    tr = make_trace(m, None, D=20)
    top = analysis.top_dimension_activity(tr, top=0.1)  # rows 18, 19
    assert np.allclose(top, np.where(pos == 0, 1.0, 0.0))
    assert np.allclose(analysis.top_dimension_activity(tr, top=slice(0, 10)), np.where(pos < 8, 1.0, 0.0))
    assert np.allclose(
        analysis.top_dimension_activity(tr, top=[9, 10]), np.where(pos == 0, 1.0, np.where(pos < 8, 0.5, 0.0))
    )
    prof = analysis.bit_position_profile(tr, buffer_bits=8)
    assert list(prof) == list(range(16))
    assert prof[0] == pytest.approx(1.0) and all(prof[p] == pytest.approx(0.0) for p in range(1, 16))
    prof_m = analysis.bit_position_profile(tr, positions=pos, top=None)
    assert [prof_m[p] for p in (0, 3, 12)] == [pytest.approx(1.0), pytest.approx(0.5), pytest.approx(0.0)]
    # an offset: the trace starts at bit 4 of a character
    shifted = analysis.bit_position_profile(make_trace(m[4:], None), buffer_bits=8, offset=4, top=None)
    assert shifted[0] == pytest.approx(1.0) and shifted[5] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="positions has 3 entries"):
        analysis.bit_position_profile(tr, positions=[0, 1, 2])
    with pytest.raises(ValueError, match="top as a fraction"):
        analysis.top_dimension_activity(tr, top=1.5)
    with pytest.raises(ValueError, match="top as a count"):
        analysis.top_dimension_activity(tr, top=21)


def test_bit_profile_plot_on_bit_corpus_positions():
    corpus = data.bit_corpus("abc" * 5, buffer_bits=8)
    positions = corpus.positions["train"][:64]
    m = np.where(positions < 8, 0.25 + 0.05 * positions, 0.0)
    tr = make_trace(m, None)
    ax = plot.bit_profile(tr, positions=positions, top=None)
    char_bars, buffer_bars = _gid(ax, "computation"), _gid(ax, "buffer")
    assert np.allclose([b.get_height() for b in char_bars], 0.25 + 0.05 * np.arange(8))
    assert np.allclose([b.get_height() for b in buffer_bars], 0.0) and len(buffer_bars) == 8
    assert char_bars[0].get_facecolor() != buffer_bars[0].get_facecolor()
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == [f"b{i}" for i in range(1, 9)] + [f"z{i}" for i in range(1, 9)]


# ---------------------------------------------------------------- Table 2


def test_mean_by_class_and_order():
    means, counts = analysis.mean_by_class([1, 2, 3, 4, np.nan, 6], ["1", "1/2", "bar", "1/2", "1", "x"], counts=True)
    assert list(means) == ["1/2", "1", "bar", "x"]
    assert means == {"1/2": 3.0, "1": 1.0, "bar": 3.0, "x": 6.0}
    assert counts == {"1/2": 2, "1": 1, "bar": 1, "x": 1}
    assert list(analysis.mean_by_class([1, 2], ["a", "b"], order=["b", "c", "a"])) == ["b", "a"]
    assert analysis.class_order(["bar", "2", "1/3", "rest", "1/4", "end"]) == ["1/4", "1/3", "2", "rest", "bar", "end"]
    with pytest.raises(ValueError, match="3 entries but classes has 2"):
        analysis.mean_by_class([1, 2, 3], ["a", "b"])


def test_music_computation_and_class_plot():
    tune = data.parse_abc("X:1\nM:4/4\nL:1/8\nK:G\nA/B/ c d2 (3efg|z2 G4 A2|\n")[0].symbols
    # A/ B/ (1/4 q), c d (1/2), d2 (1), triplet (1/3), bar, z2 (rest), G4 (2), A2 (1), bar, <eot>
    classes = data.symbol_classes(tune)
    assert classes == ["1/4", "1/4", "1/2", "1", "1/3", "1/3", "1/3", "bar", "rest", "2", "1", "bar", "end"]
    m = np.array([0.6, 0.8, 0.4, 0.5, 0.7, 0.8, 0.9, 0.1, 0.2, 0.3, 0.3, 0.3, 0.0])
    corpus = data.music_corpus([data.Tune("1", "t", "f", tune)], valid_fraction=0, test_fraction=0)
    tokens = np.array([corpus.vocab.stoi[s] for s in tune])
    tr = FakeTrace(tokens, None, m, np.zeros(13, int), np.zeros((4, 13)), 0.0)
    expect = {"1/4": 0.7, "1/3": 0.8, "1/2": 0.4, "1": 0.4, "2": 0.3, "rest": 0.2, "bar": 0.2, "end": 0.0}
    got = analysis.music_computation(tr, vocab=corpus.vocab)
    assert list(got) == list(expect) and np.allclose(list(got.values()), list(expect.values()))
    assert analysis.music_computation(tr, vocab=corpus.vocab, by="kind") == pytest.approx(
        {"note": m[[0, 1, 2, 3, 4, 5, 6, 9, 10]].mean(), "rest": 0.2, "bar": 0.2, "end": 0.0}
    )
    # the trace's own text is used when set
    tr.text = tune
    ax = plot.class_computation(tr)
    assert np.allclose([b.get_height() for b in _gid(ax, "computation")], list(expect.values()))
    assert [t.get_text() for t in ax.get_xticklabels()] == list(expect)
    assert [t.get_text() for t in ax.texts][:2] == ["n=2", "n=3"]
    # from a ready dict (e.g. the paper's Table 2)
    table2 = {"1/4": 0.61, "1/3": 0.77, "1/2": 0.39, "3/4": 0.59, "1": 0.44, "3/2": 0.46, "2": 0.57}
    ax = plot.class_computation(table2)
    assert [b.get_height() for b in _gid(ax, "computation")] == list(table2.values())
    assert [t.get_text() for t in ax.get_xticklabels()] == list(table2)
    with pytest.raises(ValueError, match="no class"):
        plot.class_computation({})
