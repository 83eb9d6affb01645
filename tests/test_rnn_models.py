"""Baseline language models (stacked LSTM, GRU, Elman RNN): gradients, state, low-level API."""

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn.testing import check_model_gradients

MODELS = [msr.LSTM, msr.GRU, msr.ElmanRNN]


def make(cls, dropout=0.0, dtype="float64", seed=3):
    return cls(vocab_size=11, embed_size=5, hidden_sizes=(6, 4), dropout=dropout, dtype=dtype, seed=seed)


def batch(rng, B=2, T=4, V=11):
    return rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))


@pytest.mark.parametrize("cls", MODELS)
@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_gradients_match_finite_differences(cls, dropout):
    rng = np.random.default_rng(0)
    model = make(cls, dropout)
    tok, tgt = batch(rng)
    # A non-zero carried state, so the recurrent terms of the first step are checked too.
    state = {k: rng.normal(scale=0.5, size=v.shape) for k, v in model.initial_state(2).items()}
    errors = check_model_gradients(model, tok, tgt, state)
    assert set(errors) == set(model.parameters())
    worst = max(errors, key=errors.get)
    assert errors[worst] < 1e-6, (worst, errors[worst])


@pytest.mark.parametrize("cls", MODELS)
def test_state_carries_across_chunks(cls):
    rng = np.random.default_rng(1)
    model = make(cls)
    tok, tgt = batch(rng, B=3, T=9)
    full, state_full = model.forward(tok)
    a, s = model.forward(tok[:, :4])
    b, s2 = model.forward(tok[:, 4:], s)
    np.testing.assert_allclose(np.concatenate([a, b], axis=1), full, rtol=1e-12, atol=1e-12)
    for k in state_full:
        np.testing.assert_allclose(s2[k], state_full[k], rtol=1e-12, atol=1e-12)
    # state=None starts from zeros, so a reset gives the first chunk again.
    again, _ = model.forward(tok[:, :4])
    np.testing.assert_array_equal(again, a)


@pytest.mark.parametrize("cls", MODELS)
def test_loss_matches_logits(cls):
    rng = np.random.default_rng(2)
    model = make(cls)
    tok, tgt = batch(rng, B=3, T=5)
    logits, _ = model.forward(tok)
    assert logits.shape == (3, 5, 11)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(logp, tgt[..., None], -1)[..., 0]
    loss, per_token, _ = model.loss(tok, tgt, per_token=True)
    np.testing.assert_allclose(per_token, nll, rtol=1e-12)
    assert loss == pytest.approx(nll.mean(), rel=1e-12)
    loss2, _, _ = model.loss_and_grad(tok, tgt)  # no dropout: the same loss
    assert loss2 == pytest.approx(loss, rel=1e-12)


def test_parameters_are_writable_views_into_one_buffer():
    model = make(msr.LSTM)
    p = model.parameters()
    assert list(p) == [
        "embedding.weight",
        "weight_ih_l0",
        "weight_hh_l0",
        "bias_ih_l0",
        "bias_hh_l0",
        "weight_ih_l1",
        "weight_hh_l1",
        "bias_ih_l1",
        "bias_hh_l1",
        "decoder.weight",
        "decoder.bias",
    ]
    assert p["embedding.weight"].shape == (11, 5)
    assert p["weight_ih_l0"].shape == (24, 5) and p["weight_hh_l1"].shape == (16, 4)
    assert p["decoder.weight"].shape == (11, 4) and p["bias_ih_l0"].shape == (24,)
    flat = model.flat_parameters()
    for arr in p.values():
        assert np.shares_memory(arr, flat)
    p["weight_hh_l0"][2, 3] = 42.0
    assert 42.0 in flat
    assert model.num_parameters == sum(a.size for a in p.values())
    tok = np.zeros((1, 3), int)
    before, _ = model.forward(tok)
    p["decoder.bias"][:] += 1.0  # the same shift on every logit
    after, _ = model.forward(tok)
    np.testing.assert_allclose(after, before + 1.0, rtol=1e-12)


def test_seed_and_dtype():
    a, b, c = make(msr.GRU, seed=5), make(msr.GRU, seed=5), make(msr.GRU, seed=6)
    np.testing.assert_array_equal(a.flat_parameters(), b.flat_parameters())
    assert not np.array_equal(a.flat_parameters(), c.flat_parameters())
    f32 = make(msr.GRU, dtype="float32", seed=5)
    assert f32.flat_parameters().dtype == np.float32
    tok = np.random.default_rng(0).integers(0, 11, (2, 6))
    np.testing.assert_allclose(f32.forward(tok)[0], a.forward(tok)[0], rtol=1e-4, atol=1e-5)


def test_dropout_is_seeded_and_training_only():
    rng = np.random.default_rng(3)
    tok, tgt = batch(rng, B=4, T=6)
    m1, m2 = make(msr.LSTM, dropout=0.5, seed=9), make(msr.LSTM, dropout=0.5, seed=9)
    l1 = [m1.loss_and_grad(tok, tgt)[0] for _ in range(3)]
    l2 = [m2.loss_and_grad(tok, tgt)[0] for _ in range(3)]
    assert l1 == l2  # same seed, same masks
    assert len(set(l1)) == 3  # fresh masks each call
    eval1, _ = m1.loss(tok, tgt)
    eval2, _ = m1.loss(tok, tgt)
    assert eval1 == eval2  # evaluation: no dropout
