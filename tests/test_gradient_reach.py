"""Gradient reaching back in time (HORNN paper, Figures 2-3): the HORNN core's state records and
their gradients against autograd in the PyTorch reference, fast == reference kernels, and
analysis.gradient_reach / plot.gradient_reach on the numbers."""

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn.analysis import by_step, compare_reach, gradient_reach, reach_length, relative_reach

V, E = 13, 5
POOLINGS = ("plain", "max", "fofe", "gated")


def make(hidden=(6, 4), **kw):
    kw.setdefault("dtype", "float64")
    kw.setdefault("seed", 1)
    m = msr.HORNN(V, E, hidden, **kw)
    rng = np.random.default_rng(5)
    for p in m.parameters().values():
        p += rng.normal(scale=0.4, size=p.shape)
    return m


def random_state(model, rng, B):
    return {k: rng.normal(scale=0.5, size=v.shape) for k, v in model.initial_state(B).items()}


@pytest.mark.parametrize("pooling", POOLINGS)
@pytest.mark.parametrize("order", [1, 3])
def test_state_gradients_match_autograd(pooling, order):
    """record_gradients is the whole dL/dh_t (every path of every later step, the layer above),
    records the states; both against float64 autograd, with a carried history and loss weights."""
    ref = pytest.importorskip("multiscale_rnn.reference.hornn")
    pytest.importorskip("torch")
    rng = np.random.default_rng(order)
    model = make(order=order, pooling=pooling)
    B, T = 3, 6
    tok, tgt = rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))
    state = random_state(model, rng, B)
    weights = rng.uniform(0.0, 1.0, (B, T))
    model.loss_and_grad(tok, tgt, state, weights=weights)
    ours = by_step(model.record_gradients(), B)
    states = by_step(model.records(), B)
    theirs = ref.state_gradients(model, tok, tgt, state, weights=weights)
    assert set(ours) == set(theirs) == {"h_l0", "h_l1"}
    for k in theirs:
        assert ours[k].shape == theirs[k].shape
        np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-9, atol=1e-12, err_msg=k)
    # The records are h_t: the last step's equals the carried lag 1.
    _, _, st = model.loss_and_grad(tok, tgt, state)
    np.testing.assert_allclose(states["h_l1"][:, -1], st["h_l1_lag1"], rtol=0, atol=0)


@pytest.mark.parametrize("pooling", ["plain", "max", "gated"])
def test_state_gradients_fast_equal_reference_kernels(pooling):
    rng = np.random.default_rng(2)
    B, T = 5, 7
    tok, tgt = rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))
    model = make(order=3, pooling=pooling)
    state = random_state(model, rng, B)
    runs = []
    for reference, threads in ((True, 1), (False, 1), (False, 2)):
        msr.set_reference_kernels(reference)
        msr.set_num_threads(threads)
        try:
            model.loss_and_grad(tok, tgt, state)
            runs.append(model.record_gradients())
        finally:
            msr.set_reference_kernels(False)
    for run in runs[1:]:
        for k in runs[0]:
            np.testing.assert_allclose(run[k], runs[0][k], rtol=1e-12, atol=1e-14, err_msg=k)


def test_record_gradients_need_a_backward():
    model = make(order=2)
    tok = np.zeros((2, 4), dtype=np.int32)
    model.loss(tok, tok)
    with pytest.raises(ValueError, match="backward after the last forward"):
        model.record_gradients()
    model.loss_and_grad(tok, tok)
    assert model.record_gradients()["h_l0"].shape == (6, 8)
    model.loss(tok, tok)  # a new forward makes them stale
    with pytest.raises(ValueError, match="backward after the last forward"):
        model.record_gradients()


def _reach_by_autograd(model, ids, max_lag, num_samples, warmup, seed):
    """gradient_reach written out: the same positions, the warm-up state from the model, then
    autograd of the last step's loss in the reference, top layer, reversed in time."""
    ref = pytest.importorskip("multiscale_rnn.reference.hornn")
    W = max_lag + 1
    t = np.sort(np.random.default_rng(seed).integers(warmup + max_lag, len(ids) - 2 + 1, num_samples))
    start = t - max_lag
    window = np.stack([ids[s : s + W] for s in start])
    target = np.stack([ids[s + 1 : s + W + 1] for s in start])
    pre = np.stack([ids[s - warmup : s] for s in start])
    pre_t = np.stack([ids[s - warmup + 1 : s + 1] for s in start])
    _, state = model.loss(pre, pre_t)
    weights = np.zeros(window.shape)
    weights[:, -1] = 1.0
    g = ref.state_gradients(model, window, target, state, weights=weights)
    top = g[sorted(g)[-1]]  # (n, W, H)
    return num_samples * np.linalg.norm(top[:, ::-1], axis=2)


@pytest.mark.parametrize("order,pooling", [(1, "plain"), (2, "plain"), (3, "fofe"), (4, "gated"), (3, "max")])
def test_gradient_reach_against_autograd(order, pooling):
    pytest.importorskip("torch")
    ids = np.random.default_rng(0).integers(0, V, 300)
    model = make(order=order, pooling=pooling)
    ours = gradient_reach(model, ids, max_lag=9, num_samples=5, warmup=7, seed=3)
    assert ours.shape == (5, 10)
    theirs = _reach_by_autograd(model, ids, 9, 5, 7, 3)
    np.testing.assert_allclose(ours, theirs, rtol=1e-8, atol=1e-14)
    # Beyond the first step the gradient has to come back through the recurrence: it is smaller.
    assert np.all(ours[:, 0] > 0)
    # The lower layer by name, and a layer the model does not have.
    low = gradient_reach(model, ids, max_lag=9, num_samples=5, warmup=7, seed=3, layer=0)
    assert low.shape == (5, 10) and not np.allclose(low, ours)
    with pytest.raises(ValueError, match="h_l2"):
        gradient_reach(model, ids, max_lag=3, num_samples=2, warmup=0, layer=2)


def test_higher_order_reaches_further():
    """The paper's motivation, on seeded sigmoid models with the paper's N(0, 0.1^2) weights: with
    order 1 the gradient at 15 steps back is a product of 15 sigmoid Jacobians (each at most
    0.25 |W_h|) and all but vanishes; the direct paths of orders 2-4 carry orders of magnitude more."""
    ids = np.random.default_rng(1).integers(0, 50, 400)
    models = {}
    for order in (1, 2, 3, 4):
        m = msr.HORNN(50, 16, (32,), order=order, seed=0)
        msr.init.gaussian(m, 0.1, rng=0)
        models[f"N={order}"] = m
    curves = compare_reach(models, ids, max_lag=15, num_samples=8, warmup=10, seed=0)
    rel = {k: relative_reach(v) for k, v in curves.items()}
    assert all(r[0] == 1.0 for r in rel.values())
    for lo, hi in (("N=1", "N=2"), ("N=2", "N=3"), ("N=3", "N=4")):
        assert rel[hi][15] > 10 * rel[lo][15], (lo, rel[lo][15], hi, rel[hi][15])
    assert reach_length(curves["N=1"], 1e-3) < reach_length(curves["N=4"], 1e-3)


def test_relative_reach_and_length_numbers():
    curve = np.array([[2.0, 1.0, 0.1, 0.001], [2.0, 1.0, 0.1, 0.001]])
    np.testing.assert_allclose(relative_reach(curve), [1.0, 0.5, 0.05, 0.0005])
    assert reach_length(curve, 0.1) == 2
    assert reach_length(curve, 0.01) == 3
    assert reach_length(curve, 1e-4) == 4  # never below: one past the last lag
    with pytest.raises(ValueError, match="fraction"):
        reach_length(curve, 1.5)
    with pytest.raises(ValueError, match="k = 0"):
        relative_reach([0.0, 1.0])


def test_models_without_state_records_are_refused():
    model = msr.ElmanRNN(V, E, (4,), seed=0)  # the stacked Elman core records nothing
    with pytest.raises(ValueError, match="records no cell states"):
        gradient_reach(model, np.zeros(50, dtype=np.int32), max_lag=2, num_samples=1, warmup=0)


def test_plot_gradient_reach():
    curves = {"RNN": np.array([[1.0, 0.1, 0.01], [3.0, 0.3, 0.03]]), "HORNN": np.array([2.0, 1.0, 0.5])}
    ax = msr.plot.gradient_reach(curves)
    assert ax.get_yscale() == "log"
    lines = ax.get_lines()
    assert [l.get_label() for l in lines] == ["RNN", "HORNN"]
    np.testing.assert_allclose(lines[0].get_ydata(), [1.0, 0.1, 0.01])  # relative to its k = 0 mean
    np.testing.assert_allclose(lines[1].get_ydata(), [1.0, 0.5, 0.25])
    import matplotlib.pyplot as plt

    _, ax2 = plt.subplots()
    assert msr.plot.gradient_reach(curves, ax=ax2, relative=False, log=False) is ax2
    np.testing.assert_allclose(ax2.get_lines()[0].get_ydata(), [2.0, 0.2, 0.02])
    plt.close("all")
    with pytest.raises(ValueError, match="k = 0"):
        msr.plot.gradient_reach({"flat": np.zeros(3)})
