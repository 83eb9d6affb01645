"""The boundary study's oracles (bench/study_hm_boundaries.py): the constraints that fix layer 1's
boundaries on the spaces and layer 2's at the phrase ends, at every word end or nowhere, on which
the documented comparison of likelihoods rests (docs/models/hm_lstm.md)."""
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
    msr.Trainer(model, optimizer=msr.optim.Adam(5e-3), batch_size=8, bptt=20, progress=False, seed=1,
                constraint=fix).fit(corpus.train, epochs=1, max_chunks=5)
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
