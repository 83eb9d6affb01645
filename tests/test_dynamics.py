"""The FS-RNN paper's dynamics analyses (multiscale_rnn.analysis) and their plots."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn import analysis
from multiscale_rnn.testing import numeric_gradient

V, E = 9, 4


def small_stack(**kw):
    model = msr.StackedLSTM(V, E, (5, 4), dtype="float64", seed=2, **kw)
    rng = np.random.default_rng(0)
    for p in model.parameters().values():
        p += rng.normal(scale=0.3, size=p.shape)
    return model


def test_word_positions():
    text = " the cat a sat. dog Big xy "
    pos = analysis.word_positions(text)
    expect = {1: 1, 2: 2, 3: 3, 5: 1, 6: 2, 7: 3, 16: 1, 17: 2, 18: 3, 24: 1, 25: 2}
    assert pos.tolist() == [expect.get(i, 0) for i in range(len(text))]
    assert analysis.word_positions(list(text)).tolist() == pos.tolist()
    assert analysis.word_positions("_ab_", space="_").tolist() == [0, 1, 2, 0]
    assert analysis.word_positions(" a ", min_length=1).tolist() == [0, 1, 0]


def test_bpc_by_position_and_relative_loss():
    losses = np.array([1.0, 2.0, 3.0, np.nan, 5.0, 0.5]) * np.log(2)
    positions = np.array([1, 2, 1, 1, 0, 3])
    bpc = analysis.bpc_by_position(losses, positions, max_position=4)
    np.testing.assert_allclose(bpc[:3], [2.0, 2.0, 0.5])
    assert np.isnan(bpc[3])
    np.testing.assert_allclose(analysis.relative_loss([1.0, 3.0], [2.0, 3.0]), [0.5, 1.0])
    with pytest.raises(ValueError, match="same length"):
        analysis.bpc_by_position(losses, positions[:3])
    with pytest.raises(ValueError, match="shapes differ"):
        analysis.relative_loss([1.0], [1.0, 2.0])


def test_per_token_loss_aligns_with_targets():
    rng = np.random.default_rng(1)
    model = small_stack()
    ids = rng.integers(0, V, 61)
    losses = analysis.per_token_loss(model, ids, batch_size=1, bptt=7)
    _, direct, _ = model.loss(ids[None, :-1], ids[None, 1:], per_token=True)
    np.testing.assert_allclose(losses, direct[0], rtol=1e-12)
    losses = analysis.per_token_loss(model, ids[:60], batch_size=3, bptt=7)  # streams of 20
    assert losses.shape == (59,) and np.flatnonzero(np.isnan(losses)).tolist() == [19, 39]
    _, direct, _ = model.loss(ids[None, 20:39], ids[None, 21:40], per_token=True)
    np.testing.assert_allclose(losses[20:39], direct[0], rtol=1e-12)
    # several streams: the mean equals the evaluation loss over the same streams
    losses = analysis.per_token_loss(model, ids, batch_size=3, bptt=5)
    assert np.nanmean(losses) == pytest.approx(msr.evaluate(model, ids, batch_size=3, bptt=5)["loss"], rel=1e-12)


def test_state_change_matches_one_long_forward():
    rng = np.random.default_rng(2)
    model = msr.FSRNN(V, E, 6, 4, dtype="float64", seed=1)
    ids = rng.integers(0, V, 80)
    rates = analysis.state_change(model, ids, batch_size=2, bptt=7)
    assert set(rates) == {"c_f1", "c_f2", "c_s"}
    streams = msr.data.batchify(ids, 2)
    model.forward(streams[:, :-1])
    rec = analysis.by_step(model.records(), 2)
    for k, r in rates.items():
        want = np.mean(np.diff(rec[k], axis=1) ** 2, axis=2).ravel()
        np.testing.assert_allclose(r, want, rtol=1e-10, atol=1e-15)
    assert set(analysis.state_change(model, ids, state="h")) == {"h_f1", "h_f2", "h_s"}


def test_gradient_decay_matches_finite_differences():
    """For the top layer's h (read by nothing else in its step) and lags k >= 1, the norms equal
    finite-difference gradients of the loss at t w.r.t. the carried state after step t - k."""
    rng = np.random.default_rng(3)
    model = small_stack()
    ids = rng.integers(0, V, 60)
    K, warm = 4, 6
    out = analysis.gradient_decay(model, ids, max_lag=K, num_samples=3, warmup=warm, state="h", seed=5)
    assert set(out) == {"h_l0", "h_l1"} and out["h_l1"].shape == (3, K + 1)
    t_all = np.sort(np.random.default_rng(5).integers(warm + K, len(ids) - 2 + 1, 3))
    for j, t in enumerate(t_all):
        for k in (1, 3, K):
            s = t - K
            _, st = model.loss(ids[None, s - warm : s], ids[None, s - warm + 1 : s + 1])
            # the state after step t - k
            _, st = model.loss(ids[None, s : t - k + 1], ids[None, s + 1 : t - k + 2], st)
            x = st["h_l1"].copy()
            win, tgt = ids[None, t - k + 1 : t + 1], ids[None, t - k + 2 : t + 2]
            w = np.zeros(win.shape)
            w[0, -1] = 1.0
            g = numeric_gradient(lambda: model.loss_and_grad(win, tgt, {**st, "h_l1": x}, weights=w)[0], x)
            assert out["h_l1"][j, k] == pytest.approx(np.linalg.norm(g), rel=1e-6)
    assert np.all(out["h_l1"][:, 0] > 0)  # lag 0: through the output itself


def test_gradient_decay_of_cell_states_is_positive_and_checked():
    rng = np.random.default_rng(4)
    model = msr.SequentialLSTM(V, E, (5, 5), dtype="float64", seed=1)
    ids = rng.integers(0, V, 50)
    out = analysis.gradient_decay(model, ids, max_lag=10, num_samples=4, warmup=5)
    assert set(out) == {"c_l0", "c_l1"}
    assert np.all(np.isfinite(out["c_l0"])) and np.all(out["c_l0"][:, :3] > 0)
    with pytest.raises(ValueError, match="too few"):
        analysis.gradient_decay(model, ids[:10], max_lag=10, warmup=5)
    with pytest.raises(ValueError, match="records no cell states"):
        analysis.gradient_decay(msr.LSTM(V, E, (5,)), ids)
    with pytest.raises(ValueError, match="'c' or 'h'"):
        analysis.state_change(model, ids, state="x")


def test_plots_return_axes():
    rng = np.random.default_rng(5)
    fig, axes = plt.subplots(1, 4)
    ax = msr.plot.gradient_decay({"FS-Slow": rng.random((3, 11)), "FS-Fast": rng.random((3, 11))}, ax=axes[0])
    assert ax is axes[0] and len(ax.lines) == 2
    assert max(np.nanmax(l.get_ydata()) for l in ax.lines) == pytest.approx(1.0)
    assert msr.plot.gradient_decay({"a": rng.random((3, 5)) + 0.1}, log=True).get_yscale() == "log"
    ax = msr.plot.state_change({"a": rng.random(50), "b": rng.random(50)}, ax=axes[1])
    assert ax is axes[1] and len(ax.patches) == 2
    curves = {"Fast-Slow": rng.random((2, 10)), "Stacked": rng.random(10) + 1}
    assert len(msr.plot.bpc_by_position(curves, ax=axes[2]).lines) == 2
    ax = msr.plot.relative_loss(curves, reference="Stacked", ax=axes[3])
    np.testing.assert_allclose(ax.lines[1].get_ydata(), 1.0)
    with pytest.raises(ValueError, match="reference"):
        msr.plot.relative_loss(curves, reference="nope")
    assert msr.plot.state_change({"a": rng.random(5)}) is not None  # a new figure when ax is None
    plt.close("all")
