"""Each building block's backward against central finite differences of its forward (float64),
and its forward against a NumPy reference."""

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn.testing import numeric_gradient, relative_error

blk = msr.testing.blocks()
TOL = 1e-6


def sig(x):
    return 1.0 / (1.0 + np.exp(-x))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def test_embedding(rng):
    V, E, N = 7, 4, 9
    W = rng.normal(size=(E, V))
    ids = rng.integers(0, V, N).astype(np.int32)
    X = blk.embedding_forward(W, ids)
    np.testing.assert_array_equal(X, W[:, ids])
    R = rng.normal(size=(E, N))
    dW = blk.embedding_backward(R, ids, V)
    num = numeric_gradient(lambda: float(np.sum(R * blk.embedding_forward(W, ids))), W)
    assert relative_error(dW, num) < TOL


def test_linear(rng):
    O, I, N = 5, 3, 6
    W, b, X = rng.normal(size=(O, I)), rng.normal(size=(O, 1)), rng.normal(size=(I, N))
    np.testing.assert_allclose(blk.linear_forward(W, b, X), W @ X + b, rtol=1e-13)
    R = rng.normal(size=(O, N))
    dX, dW, db = blk.linear_backward(R, W, X)

    def f():
        return float(np.sum(R * blk.linear_forward(W, b, X)))

    for ana, x in ((dX, X), (dW, W), (db, b)):
        assert relative_error(ana, numeric_gradient(f, x)) < TOL


def test_float32_linear_products_write_into_the_callers_arrays_and_refuse_copies(rng):
    """The timing bindings: the float64 products' results in float32, written in place; an array they
    would have to copy (C order, float64, read-only) is refused rather than silently copied."""
    O, I, N = 37, 19, 23  # not multiples of any SIMD width
    f32 = [
        np.asfortranarray(rng.normal(size=s)).astype(np.float32, order="F") for s in ((O, I), (O, 1), (I, N), (O, N))
    ]
    W, b, X, R = f32
    Y = np.zeros((O, N), np.float32, order="F")
    blk.linear_forward_into(Y, W, b, X)
    np.testing.assert_allclose(Y, blk.linear_forward(*(a.astype(np.float64) for a in (W, b, X))), rtol=1e-5, atol=1e-5)
    dX, dW, db = (
        np.zeros((I, N), np.float32, order="F"),
        np.ones((O, I), np.float32, order="F"),
        np.zeros((O, 1), np.float32, order="F"),
    )
    blk.linear_backward_into(dX, dW, db, R, W, X)
    want = blk.linear_backward(*(a.astype(np.float64) for a in (R, W, X)))
    for got, w, acc in ((dX, want[0], 0.0), (dW, want[1], 1.0), (db, want[2], 0.0)):  # dW and db accumulate
        np.testing.assert_allclose(got, w + acc, rtol=1e-4, atol=1e-4)
    with pytest.raises(TypeError):
        blk.linear_forward_into(np.zeros((O, N), np.float32), W, b, X)  # C order: would be a copy
    with pytest.raises(TypeError):
        blk.linear_forward_into(Y, W.astype(np.float64), b, X)
    with pytest.raises(ValueError, match="X has 18 rows, expected 19"):
        blk.linear_forward_into(Y, W, b, np.asfortranarray(X[:-1]))


def test_layer_norm(rng):
    D, N, eps = 6, 4, 1e-5
    X = rng.normal(size=(D, N)) * 3 + 1
    g, b = rng.normal(size=(D, 1)), rng.normal(size=(D, 1))
    Y, xhat, rstd = blk.layer_norm_forward(X, g, b, eps)
    mu, var = X.mean(0), X.var(0)
    np.testing.assert_allclose(Y, g * (X - mu) / np.sqrt(var + eps) + b, rtol=1e-12, atol=1e-12)
    R = rng.normal(size=(D, N))
    dX, dg, db = blk.layer_norm_backward(R, xhat, rstd, g)

    def f():
        return float(np.sum(R * blk.layer_norm_forward(X, g, b, eps)[0]))

    for ana, x in ((dX, X), (dg, g), (db, b)):
        assert relative_error(ana, numeric_gradient(f, x)) < TOL


def test_dropout_mask_statistics_and_determinism():
    p = 0.3
    m = blk.dropout_mask(200, 300, p, 7)
    assert set(np.unique(m)) <= {0.0, 1.0 / (1 - p)}
    assert abs((m == 0).mean() - p) < 0.01  # 60000 draws: std of the rate ~0.002
    assert abs(m.mean() - 1.0) < 0.02  # inverted dropout keeps the expectation
    np.testing.assert_array_equal(m, blk.dropout_mask(200, 300, p, 7))
    assert not np.array_equal(m, blk.dropout_mask(200, 300, p, 8))
    np.testing.assert_array_equal(blk.dropout_mask(3, 4, 0.0, 1), np.ones((3, 4)))
    with pytest.raises(ValueError, match="dropout"):
        blk.dropout_mask(3, 4, 1.0, 1)


def test_softmax_xent(rng):
    V, N = 6, 5
    Z = rng.normal(size=(V, N)) * 2
    t = rng.integers(0, V, N).astype(np.int32)
    loss, P = blk.softmax_xent_forward(Z, t)
    logp = Z - Z.max(0) - np.log(np.exp(Z - Z.max(0)).sum(0))
    assert loss == pytest.approx(-logp[t, np.arange(N)].sum(), rel=1e-13)
    np.testing.assert_allclose(P, np.exp(logp), rtol=1e-12)
    dZ = blk.softmax_xent_backward(P, t, 1.0)
    num = numeric_gradient(lambda: blk.softmax_xent_forward(Z, t)[0], Z)
    assert relative_error(dZ, num) < TOL
    # Large logits stay finite (max subtraction).
    big, _ = blk.softmax_xent_forward(Z * 1e3, t)
    assert np.isfinite(big)


def test_lstm_pointwise(rng):
    H, B = 3, 2
    a = rng.normal(size=(4 * H, B))
    c_prev = rng.normal(size=(H, B))
    act, c, tanh_c, h = blk.lstm_pointwise_forward(a, c_prev)
    i, f, g, o = sig(a[:H]), sig(a[H : 2 * H]), np.tanh(a[2 * H : 3 * H]), sig(a[3 * H :])
    np.testing.assert_allclose(c, f * c_prev + i * g, rtol=1e-13)
    np.testing.assert_allclose(h, o * np.tanh(c), rtol=1e-13)
    Rh, Rc = rng.normal(size=(H, B)), rng.normal(size=(H, B))
    da, dc_prev = blk.lstm_pointwise_backward(Rh, Rc, act, tanh_c, c_prev)

    def f_():
        _, c_, _, h_ = blk.lstm_pointwise_forward(a, c_prev)
        return float(np.sum(Rh * h_) + np.sum(Rc * c_))

    assert relative_error(da, numeric_gradient(f_, a)) < TOL
    assert relative_error(dc_prev, numeric_gradient(f_, c_prev)) < TOL


def test_gru_pointwise(rng):
    H, B = 3, 2
    ax, ah = rng.normal(size=(3 * H, B)), rng.normal(size=(3 * H, B))
    h_prev = rng.normal(size=(H, B))
    act, h = blk.gru_pointwise_forward(ax, ah, h_prev)
    r = sig(ax[:H] + ah[:H])
    z = sig(ax[H : 2 * H] + ah[H : 2 * H])
    n = np.tanh(ax[2 * H :] + r * ah[2 * H :])
    np.testing.assert_allclose(h, (1 - z) * n + z * h_prev, rtol=1e-13)
    R = rng.normal(size=(H, B))
    dax, dah, dh_prev = blk.gru_pointwise_backward(R, act, ah, h_prev)

    def f():
        return float(np.sum(R * blk.gru_pointwise_forward(ax, ah, h_prev)[1]))

    assert relative_error(dax, numeric_gradient(f, ax)) < TOL
    assert relative_error(dah, numeric_gradient(f, ah)) < TOL
    # dh_prev from the pointwise part alone is the direct path z * dh.
    np.testing.assert_allclose(dh_prev, R * z, rtol=1e-13)


def test_block_bad_input(rng):
    with pytest.raises(IndexError, match="id 9 at position 1"):
        blk.embedding_forward(rng.normal(size=(2, 5)), np.array([0, 9], np.int32))
    with pytest.raises(ValueError, match="rows"):
        blk.linear_forward(rng.normal(size=(3, 2)), rng.normal(size=(3, 1)), rng.normal(size=(4, 5)))


@pytest.mark.parametrize("isa", ["baseline", "avx2", "avx512"])
def test_multiply_add_peak_computes_its_chains(isa):
    """The arithmetic-peak kernel of each core module this CPU runs (bench/timing.py's
    ``arithmetic_peak``): every lane follows x_{n+1} = a x_n + c from x_0 = 0.001 * lane, so the
    checksum is the closed form summed over the lanes and threads; the flop count is 2 per lane and
    round, and the vector width is the module's (AVX-512: 16 floats fused, AVX2: 8 fused, SSE2: 4)."""
    import json
    import os
    import subprocess
    import sys

    if isa not in [v for v, ok, _ in msr.testing.isa_variants() if ok]:
        pytest.skip(f"no {isa} module runs on this CPU")
    width, fused = {"baseline": (4, False), "avx2": (8, True), "avx512": (16, True)}[isa]
    a, c, n = 0.999, 0.002, 1000
    code = (
        f"import json, multiscale_rnn as msr; print(json.dumps(msr.testing.blocks().multiply_add_peak({n}, {a}, {c})))"
    )
    env = dict(os.environ, MULTISCALE_RNN_ISA=isa)  # one core module per process
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    r = json.loads(out.stdout)
    assert (r["vector_floats"], r["fused"]) == (width, fused) and r["lanes"] % width == 0, r
    assert r["threads"] >= 1 and r["flops"] == 2.0 * n * r["lanes"] * r["threads"], r
    x0 = 0.001 * np.arange(r["lanes"])
    want = r["threads"] * np.sum(a**n * x0 + c * (1 - a**n) / (1 - a))
    assert r["checksum"] == pytest.approx(want, rel=1e-4), (r, want)
    with pytest.raises(ValueError, match="iterations must be at least 1, got 0"):
        blk.multiply_add_peak(0)
