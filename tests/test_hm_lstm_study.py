"""The boundary study's oracles (bench/study_hm_boundaries.py): the constraints that fix layer 1's
boundaries on the spaces and layer 2's at the phrase ends, at every word end or nowhere, on which
the documented comparison of likelihoods rests (docs/studies/hm_lstm_boundary_study.md,
docs/studies/hm_lstm_recipes.md)."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import multiscale_rnn as msr

STUDY = Path(__file__).resolve().parents[1] / "bench" / "study_hm_boundaries.py"


@pytest.fixture(scope="module")
def study():
    spec = importlib.util.spec_from_file_location("study_hm_boundaries", STUDY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("layer2", ["phrase", "word", "never"])
def test_oracle_fixes_layer_1_on_the_spaces_and_layer_2_as_asked(study, layer2):
    h = msr.data.synthetic_hierarchy(n_chars=6000, seed=0, phrase_successors=2)
    corpus = h.corpus(valid_fraction=0.2, test_fraction=0.0)
    model = msr.HMLSTM(corpus.vocab_size, 16, [32, 24, 16], seed=3, rate_target=None, warmup=0)
    fix = study.oracle_boundaries(model, corpus.vocab, layer2)
    # a few updates move every other weight; the constraint puts the fixed rows back after each
    msr.Trainer(
        model, optimizer=msr.optim.Adam(5e-3), batch_size=8, bptt=20, progress=False, seed=1, constraint=fix
    ).fit(corpus.train, epochs=1, max_chunks=5)
    ids = corpus.valid
    text = "".join(corpus.vocab.itos[i] for i in ids)
    spaces = np.array([c == " " for c in text])
    after_mark = np.zeros_like(spaces)
    after_mark[1:] = spaces[1:] & np.isin(list(text[:-1]), list(".!?;"))
    tr = model.trace(ids)
    assert np.array_equal(tr.z[0] > 0.5, spaces)
    expected = {"phrase": after_mark, "word": spaces, "never": np.zeros_like(spaces)}[layer2]
    assert np.array_equal(tr.z[1] > 0.5, expected)
    assert after_mark.sum() > 40
    # the phrase oracle is the study's reference for layer 2: the phrase ends, one step later
    ref = study.first_seen(corpus.boundaries["valid"]["phrase"])
    assert np.array_equal(after_mark[:-1], ref[:-1].astype(bool))


def test_oracle_without_top_down_and_the_notd2_constraint(study):
    # the oracle on a model with no top-down weights (top_down=False), and the constraint that holds
    # the top-down weights of layers 2 and above at zero while layer 1 keeps its own
    h = msr.data.synthetic_hierarchy(n_chars=6000, seed=0)
    corpus = h.corpus(valid_fraction=0.2, test_fraction=0.0)
    bare = msr.HMLSTM(corpus.vocab_size, 16, [32, 24, 16], seed=3, rate_target=None, warmup=0, top_down=False)
    assert not any(k.startswith("weight_td") for k in bare.parameters())
    fix = study.oracle_boundaries(bare, corpus.vocab, "phrase")
    msr.Trainer(
        bare, optimizer=msr.optim.Adam(5e-3), batch_size=8, bptt=20, progress=False, seed=1, constraint=fix
    ).fit(corpus.train, epochs=1, max_chunks=3)
    text = "".join(corpus.vocab.itos[i] for i in corpus.valid)
    assert np.array_equal(bare.trace(corpus.valid).z[0] > 0.5, np.array([c == " " for c in text]))

    model = msr.HMLSTM(corpus.vocab_size, 16, [32, 24, 16], seed=3, rate_target=None, warmup=0)
    fix = study.no_top_down_above(model)
    P = model.parameters()
    assert not P["weight_td_l1"].any() and P["weight_td_l0"].any()
    before = P["weight_td_l0"].copy()
    msr.Trainer(
        model, optimizer=msr.optim.Adam(5e-3), batch_size=8, bptt=20, progress=False, seed=1, constraint=fix
    ).fit(corpus.train, epochs=1, max_chunks=3)
    P = model.parameters()
    assert not P["weight_td_l1"].any()
    assert not np.array_equal(P["weight_td_l0"], before)  # layer 1's top-down term is still trained
    assert study.configuration("default+notd2")[1]["notd2"] is True


def test_the_levels_recipe_is_the_configuration_the_protocol_measured(study):
    """``LEVELS_RECIPE`` (docs/models/hm_lstm.md) is the study's configuration whose held-out runs the docs report,
    and a band per layer takes pairs of numbers."""
    from multiscale_rnn.models.hm_lstm import LEVELS_RECIPE

    measured = "default+below+switch+warm250_750+target0.18_0.05+mu1+slack0.12_0.2_0_0+best5"
    opts, train, sched = study.configuration(measured)
    assert opts == LEVELS_RECIPE and sched == {} and (train["restarts"], train["epochs"]) == (5, 40)
    model = msr.HMLSTM(7, 4, (6, 6, 6), **LEVELS_RECIPE)
    assert model.options["rate_slack_below_l0"] == 0.12 and model.options["rate_slack_above_l0"] == 0.2
    assert model.options["rate_slack_below_l1"] == model.options["rate_slack_above_l1"] == 0.0
    assert (model.options["rate_target_l1"], model.options["blend_l0"]) == (0.05, 0.0)
    with pytest.raises(ValueError, match="pairs"):
        study.configuration("default+slack0.1_0.2_0.3")


def test_the_description_length_of_segments_prefers_segments_that_repeat(study):
    # "ab ab ab ab" cut after every space (4 segments "ab ", 1 distinct): the sequence costs 0 bits, the lexicon
    # one segment of 3 symbols and its end mark: 4 log2(V + 1)
    ids = np.array([0, 1, 2] * 4)
    words = np.array([False, False, True] * 4)
    assert study.segment_description_length(ids, words, 3) == pytest.approx(4 * 2.0 / 12)
    # the same text cut after every symbol: 12 segments of 3 kinds, 4 each (log2 3 bits each), lexicon 3 x 2 symbols
    every = np.ones(12, dtype=bool)
    assert study.segment_description_length(ids, every, 3) == pytest.approx((12 * np.log2(3) + 6 * 2.0) / 12)
    # cuts at random places inside the words cost more than the words
    rng = np.random.default_rng(0)
    lexicon = [[3, 4, 5, 2], [6, 7, 2], [3, 6, 2]]
    text = np.concatenate([lexicon[i] for i in rng.integers(0, 3, 300)])
    ends = text == 2
    scattered = np.roll(ends, 1) | (rng.random(len(text)) < 0.05)
    assert study.segment_description_length(text, ends, 8) < study.segment_description_length(text, scattered, 8)


def test_the_protocol_script_keeps_runs_of_other_widths_apart(study, tmp_path, monkeypatch):
    """bench/boundary_protocol.py: a run of another --hidden into the same file is a run of its own (it once
    counted as done, its width unrecorded), and the report's table gives each width its own row."""
    import json
    import sys

    from multiscale_rnn.reproduce.hm_lstm import report_table

    spec = importlib.util.spec_from_file_location("boundary_protocol", STUDY.parent / "boundary_protocol.py")
    protocol = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(protocol)
    calls = []

    def fake_run(config, layers, kind, seed, hidden=32, text=None):  # the scores of a run, without training
        calls.append(hidden)
        return dict(bpc=2.0, f1_l0=0.95 if hidden == 32 else 0.5, rate_l0=0.2, reduction=0.8)

    monkeypatch.setattr(study, "run", fake_run)
    monkeypatch.setitem(sys.modules, "study_hm_boundaries", study)
    monkeypatch.setattr("multiscale_rnn.data.languages.generate", lambda spec, n, seed: "a b")
    out = tmp_path / "runs.jsonl"
    argv = ["run", "--part", "heldout", "--languages", "0", "--seeds", "10", "--out", str(out)]
    for hidden in (32, 64, 64):
        assert protocol.main(argv + ["--hidden", str(hidden)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert calls == [32, 64] and [r["hidden"] for r in rows] == [32, 64]
    table = report_table(rows)
    assert "| `package` | 2 | heldout |" in table and "| `package` | 2 x 64 | heldout |" in table
