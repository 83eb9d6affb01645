"""Parameter initialisers: orthogonality, forget bias, statistics, seeding."""

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn import init


def lstm(seed=0):
    return msr.LSTM(vocab_size=50, embed_size=16, hidden_sizes=(32, 24), dtype="float64", seed=seed)


def test_orthogonal_gate_blocks():
    m = lstm()
    init.orthogonal(m, rng=1)
    for name in ("weight_hh_l0", "weight_hh_l1"):
        w = m.parameters()[name]
        h = w.shape[1]
        assert w.shape == (4 * h, h)
        for k in range(4):
            block = w[k * h : (k + 1) * h]
            np.testing.assert_allclose(block @ block.T, np.eye(h), atol=1e-12)
    # input matrices: each (H, E) gate block semi-orthogonal (orthonormal rows when H <= E)
    init.orthogonal(m, pattern="weight_ih_l1", gain=2.0, rng=1)
    w = m.parameters()["weight_ih_l1"]  # (4*24, 32)
    for k in range(4):
        block = w[k * 24 : (k + 1) * 24]
        np.testing.assert_allclose(block @ block.T, 4.0 * np.eye(24), atol=1e-12)
    init.orthogonal(m, pattern="weight_ih_l0", rng=1)
    w = m.parameters()["weight_ih_l0"]  # (4*32, 16): orthonormal columns per block
    for k in range(4):
        block = w[k * 32 : (k + 1) * 32]
        np.testing.assert_allclose(block.T @ block, np.eye(16), atol=1e-12)
    # a matrix outside a recurrent layer: semi-orthogonal of its own shape
    init.orthogonal(m, pattern="decoder.weight", rng=1)
    d = m.parameters()["decoder.weight"]  # (50, 24)
    np.testing.assert_allclose(d.T @ d, np.eye(24), atol=1e-12)


def test_forget_bias():
    m = lstm()
    init.forget_bias(m, 1.0)
    p = m.parameters()
    for layer, h in ((0, 32), (1, 24)):
        total = p[f"bias_ih_l{layer}"] + p[f"bias_hh_l{layer}"]
        np.testing.assert_array_equal(total[h : 2 * h], np.ones(h))
    gru = msr.GRU(vocab_size=5, embed_size=3, hidden_sizes=(4,))
    with pytest.raises(ValueError, match="no LSTM bias"):
        init.forget_bias(gru, 1.0)


def test_uniform_gaussian_statistics_and_seed():
    m = lstm()
    init.uniform(m, 0.1, pattern="weight_*", rng=3)
    w = np.concatenate([v.ravel() for k, v in m.parameters().items() if k.startswith("weight_")])
    assert w.min() >= -0.1 and w.max() <= 0.1
    assert abs(w.mean()) < 0.005 and w.std() == pytest.approx(0.1 / np.sqrt(3), rel=0.03)
    init.gaussian(m, 0.5, pattern="embedding*", rng=3)
    e = m.parameters()["embedding.weight"]
    assert abs(e.mean()) < 0.03 and e.std() == pytest.approx(0.5, rel=0.05)
    a, b = lstm(), lstm()
    init.uniform(a, 0.2, rng=7)
    init.uniform(b, 0.2, rng=7)
    np.testing.assert_array_equal(a.flat_parameters(), b.flat_parameters())
    with pytest.raises(ValueError, match="no parameter matches"):
        init.uniform(m, 0.1, pattern="nothing*")


def test_default_init_bounds():
    m = lstm(seed=4)
    p = m.parameters()
    assert np.abs(p["weight_hh_l0"]).max() <= 1 / np.sqrt(32)
    assert np.abs(p["bias_ih_l1"]).max() <= 1 / np.sqrt(24)
    assert np.abs(p["decoder.weight"]).max() <= 1 / np.sqrt(24)
    assert p["embedding.weight"].std() == pytest.approx(1.0, rel=0.1)
    # seeded: same seed, same parameters; another seed, others
    np.testing.assert_array_equal(lstm(seed=4).flat_parameters(), m.flat_parameters())
    assert not np.array_equal(lstm(seed=5).flat_parameters(), m.flat_parameters())


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda m: init.uniform(m, -0.1), r"uniform: scale must be a finite number >= 0, got -0.1"),
        (lambda m: init.uniform(m, float("nan")), "uniform: scale must be a finite number >= 0, got nan"),
        (lambda m: init.gaussian(m, float("inf")), "gaussian: std must be a finite number >= 0, got inf"),
        (lambda m: init.orthogonal(m, gain=float("inf")), "orthogonal: gain must be a finite number, got inf"),
        (lambda m: init.forget_bias(m, float("nan")), "forget_bias: value must be a finite number, got nan"),
    ],
)
def test_a_bad_scale_is_refused_and_nothing_is_written(call, match):
    # NaN or infinity used to be written into every matching parameter, silently
    model = lstm()
    before = model.flat_parameters().copy()
    with pytest.raises(ValueError, match=match):
        call(model)
    np.testing.assert_array_equal(model.flat_parameters(), before)
