"""Optimisers and gradient clipping against NumPy references (and torch.optim when installed)."""

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn.optim import SGD, Adam, optimizer_from_state


def small_model(dtype="float64", seed=0):
    return msr.ElmanRNN(vocab_size=7, embed_size=3, hidden_sizes=(5,), dtype=dtype, seed=seed)


def grads_sequence(n, size, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.normal(0, 1, size) * rng.uniform(0.1, 3) for _ in range(n)]


def adam_reference(w, grads, lr, b1, b2, eps, wd):
    w = w.astype(np.float64).copy()
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, g in enumerate(grads, start=1):
        g = g + wd * w
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mhat = m / (1 - b1**t)
        vhat = v / (1 - b2**t)
        w = w - lr * mhat / (np.sqrt(vhat) + eps)
    return w, m, v


def sgd_reference(w, grads, lr, momentum, wd):
    w = w.astype(np.float64).copy()
    buf = None
    for g in grads:
        d = g + wd * w
        if momentum:
            buf = d.copy() if buf is None else momentum * buf + d
            d = buf
        w = w - lr * d
    return w, buf


def run(opt, model, grads):
    for g in grads:
        model.flat_gradients()[...] = g
        opt.step(model)


@pytest.mark.parametrize("dtype,rtol", [("float64", 1e-12), ("float32", 2e-5)])
@pytest.mark.parametrize("wd", [0.0, 0.01])
def test_adam_matches_numpy_reference(dtype, rtol, wd):
    model = small_model(dtype)
    w0 = model.flat_parameters().copy()
    grads = [g.astype(dtype) for g in grads_sequence(6, w0.size)]
    opt = Adam(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=wd)
    run(opt, model, grads)
    w, m, v = adam_reference(w0, [g.astype(np.float64) for g in grads], 0.01, 0.8, 0.99, 1e-6, wd)
    assert opt.step_count == 6
    np.testing.assert_allclose(model.flat_parameters(), w, rtol=rtol, atol=rtol * 1e-2)
    np.testing.assert_allclose(opt.state["m"], m, rtol=rtol, atol=1e-6 if dtype == "float32" else 1e-14)
    np.testing.assert_allclose(opt.state["v"], v, rtol=rtol, atol=1e-6 if dtype == "float32" else 1e-14)
    assert not np.allclose(model.flat_parameters(), w0)


@pytest.mark.parametrize("momentum,wd", [(0.0, 0.0), (0.9, 0.0), (0.5, 0.05)])
def test_sgd_matches_numpy_reference(momentum, wd):
    model = small_model()
    w0 = model.flat_parameters().copy()
    grads = grads_sequence(5, w0.size)
    opt = SGD(lr=0.1, momentum=momentum, weight_decay=wd)
    run(opt, model, grads)
    w, buf = sgd_reference(w0, grads, 0.1, momentum, wd)
    np.testing.assert_allclose(model.flat_parameters(), w, rtol=1e-12, atol=1e-14)
    if momentum:
        np.testing.assert_allclose(opt.state["momentum_buffer"], buf, rtol=1e-12)
    else:
        assert opt.state == {}


@pytest.mark.parametrize("kind", ["adam", "sgd"])
def test_optimisers_match_torch(kind):
    torch = pytest.importorskip("torch")
    model = small_model()
    w0 = model.flat_parameters().copy()
    grads = grads_sequence(8, w0.size, seed=3)
    tw = torch.nn.Parameter(torch.tensor(w0))
    if kind == "adam":
        ours = Adam(lr=3e-3, betas=(0.9, 0.95), eps=1e-7, weight_decay=0.02)
        theirs = torch.optim.Adam([tw], lr=3e-3, betas=(0.9, 0.95), eps=1e-7, weight_decay=0.02)
    else:
        ours = SGD(lr=0.05, momentum=0.9, weight_decay=0.01)
        theirs = torch.optim.SGD([tw], lr=0.05, momentum=0.9, weight_decay=0.01)
    for i, g in enumerate(grads):
        if i == 4:  # a learning-rate change half way, as schedules do
            ours.lr = ours.lr / 2
            for group in theirs.param_groups:
                group["lr"] = group["lr"] / 2
        model.flat_gradients()[...] = g
        ours.step(model)
        tw.grad = torch.tensor(g)
        theirs.step()
    np.testing.assert_allclose(model.flat_parameters(), tw.detach().numpy(), rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "kind,hyper",
    [
        ("adam", dict(lr=3e-3, weight_decay=0.02)),
        ("sgd", dict(lr=0.05)),
        ("sgd", dict(lr=0.05, momentum=0.9, weight_decay=0.01)),
    ],
    ids=["adam", "sgd", "sgd-momentum-wd"],
)
def test_step_with_clip_value_equals_clipping_first(kind, hyper, dtype):
    """opt.step(model, clip_value=c) == clip_by_value(g, c) then opt.step(model), bit for bit, over
    several steps (SGD's first step sets the momentum buffer, later ones update it), and leaves the
    gradient buffer unclipped; clip_value=None is the plain step."""
    cls = Adam if kind == "adam" else SGD
    fused, separate, plain = (small_model(dtype) for _ in range(3))
    opts = [cls(**hyper) for _ in range(3)]
    grads = [(g * 4).astype(dtype) for g in grads_sequence(4, fused.flat_parameters().size, seed=7)]
    assert all((np.abs(g) > 1.0).any() and (np.abs(g) < 1.0).any() for g in grads)  # the clip matters
    for g in grads:
        fused.flat_gradients()[...] = g
        opts[0].step(fused, clip_value=1.0)
        np.testing.assert_array_equal(fused.flat_gradients(), g)
        separate.flat_gradients()[...] = g
        msr.optim.clip_by_value(separate.flat_gradients(), 1.0)
        opts[1].step(separate)
        plain.flat_gradients()[...] = g
        opts[2].step(plain, clip_value=None)
    np.testing.assert_array_equal(fused.flat_parameters(), separate.flat_parameters())
    for name in opts[0].state:
        np.testing.assert_array_equal(opts[0].state[name], opts[1].state[name])
    assert not np.allclose(plain.flat_parameters(), fused.flat_parameters())
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="clip_value must be a finite number > 0"):
            opts[0].step(fused, clip_value=bad)


def test_sgd_with_clip_value_matches_torch():
    torch = pytest.importorskip("torch")
    model = small_model()
    w0 = model.flat_parameters().copy()
    tw = torch.nn.Parameter(torch.tensor(w0))
    ours = SGD(lr=0.5, momentum=0.9, weight_decay=1e-5)
    theirs = torch.optim.SGD([tw], lr=0.5, momentum=0.9, weight_decay=1e-5)
    for g in grads_sequence(5, w0.size, seed=11):
        model.flat_gradients()[...] = g * 10
        ours.step(model, clip_value=5.0)
        tw.grad = torch.tensor(g * 10)
        torch.nn.utils.clip_grad_value_([tw], 5.0)
        theirs.step()
    np.testing.assert_allclose(model.flat_parameters(), tw.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_state_dict_round_trip_continues_identically():
    grads = grads_sequence(6, small_model().flat_parameters().size, seed=5)
    a = small_model()
    opt_a = Adam(lr=0.01)
    run(opt_a, a, grads)
    b = small_model()
    opt_b = Adam(lr=0.01)
    run(opt_b, b, grads[:3])
    state = opt_b.state_dict()
    state["arrays"] = {k: v.copy() for k, v in state["arrays"].items()}
    opt_c = optimizer_from_state(state)
    assert isinstance(opt_c, Adam) and opt_c.step_count == 3 and opt_c.betas == (0.9, 0.999)
    run(opt_c, b, grads[3:])
    np.testing.assert_array_equal(a.flat_parameters(), b.flat_parameters())


def test_optimiser_refuses_bad_input():
    with pytest.raises(ValueError, match="learning rate"):
        Adam(lr=0)
    with pytest.raises(ValueError, match="betas"):
        Adam(betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="momentum"):
        SGD(lr=0.1, momentum=-1)
    opt = Adam()
    with pytest.raises(ValueError, match="learning rate"):
        opt.lr = float("nan")
    opt.step(small_model())
    with pytest.raises(ValueError, match="one optimiser per model"):
        opt.step(msr.ElmanRNN(vocab_size=7, embed_size=3, hidden_sizes=(6,), dtype="float64"))
    with pytest.raises(ValueError, match="is for 'Adam'"):
        SGD(lr=0.1).load_state_dict(opt.state_dict())
    with pytest.raises(ValueError, match="unknown optimiser"):
        optimizer_from_state({"name": "RMSprop"})


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_clip_by_norm_and_value(dtype):
    rng = np.random.default_rng(0)
    g = rng.normal(0, 1, 50_000).astype(dtype)  # several reduction blocks
    ref_norm = np.sqrt(np.sum(g.astype(np.float64) ** 2))
    assert msr.optim.global_norm(g) == pytest.approx(ref_norm, rel=1e-12 if dtype == np.float64 else 1e-6)
    h = g.copy()
    before = msr.optim.clip_by_norm(h, 10.0)
    assert before == pytest.approx(ref_norm, rel=1e-6)
    np.testing.assert_allclose(h, g * (10.0 / (ref_norm + 1e-6)), rtol=1e-6)
    assert np.sqrt(np.sum(h.astype(np.float64) ** 2)) == pytest.approx(10.0, rel=1e-5)
    k = g.copy()
    msr.optim.clip_by_norm(k, 2 * ref_norm)  # under the limit: untouched
    np.testing.assert_array_equal(k, g)
    v = g.copy()
    msr.optim.clip_by_value(v, 0.5)
    np.testing.assert_array_equal(v, np.clip(g, -0.5, 0.5))
    with pytest.raises(ValueError, match="positive"):
        msr.optim.clip_by_norm(v, 0.0)
    assert msr.optim.all_finite(g)
    g[1234] = np.nan
    assert not msr.optim.all_finite(g)
