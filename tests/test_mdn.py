"""The mixture density head (Graves 2013, eq. 17-26; cpp/include/msrnn/heads/mdn.hpp): its loss and
gradient against finite differences and an independent PyTorch reference (torch.distributions), its
log-sum-exp far from every component, the distributions sampling draws from, models without a
vocabulary, bad targets, and separate padded sequences (padding never counted, no state carried
across sequences). The contract for every family with this head is in tests/test_contract.py."""

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn._native import core as _core
from multiscale_rnn.training.sequences import START, SequenceBatches, padded


def raw(rng, rows, M, scale=1.0):
    """Raw parameters (rows, 6M + 1) and targets (rows, 3) with pen bits 0 and 1."""
    z = rng.normal(scale=scale, size=(rows, 6 * M + 1))
    x = np.column_stack([rng.normal(size=(rows, 2)), rng.integers(0, 2, rows)]).astype(float)
    return z, x


@pytest.mark.parametrize("M", [1, 3, 7])
def test_nll_gradient_matches_finite_differences(M):
    rng = np.random.default_rng(M)
    z, x = raw(rng, 6, M)
    _, dz = _core.mixture_nll(z, x, M)
    eps = 1e-6
    for r in range(len(z)):
        for j in range(z.shape[1]):
            up, down = z.copy(), z.copy()
            up[r, j] += eps
            down[r, j] -= eps
            fd = (_core.mixture_nll(up, x, M)[0][r] - _core.mixture_nll(down, x, M)[0][r]) / (2 * eps)
            assert fd == pytest.approx(dz[r, j], rel=1e-6, abs=1e-8), (r, j)


@pytest.mark.parametrize("scale", [0.5, 3.0])
def test_nll_and_gradient_match_the_pytorch_reference(scale):
    torch = pytest.importorskip("torch")
    from multiscale_rnn.reference import mdn

    rng = np.random.default_rng(7)
    M = 5
    z, x = raw(rng, 40, M, scale)
    nll, dz = _core.mixture_nll(z, x, M)
    zt = torch.tensor(z, dtype=torch.float64, requires_grad=True)
    ref = mdn.nll(zt, torch.tensor(x, dtype=torch.float64))
    ref.sum().backward()
    np.testing.assert_allclose(nll, ref.detach().numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dz, zt.grad.numpy(), rtol=1e-7, atol=1e-9)


def test_nll_stays_finite_far_from_every_component():
    # 200 standard deviations from both components: each density underflows exp(), the log-sum-exp does not
    M = 2
    z = np.zeros((1, 6 * M + 1))
    z[0, 1 + 3 * M : 1 + 5 * M] = np.log(0.01)  # sigma 0.01
    z[0, 1 + 5 * M : 1 + 6 * M] = [20.0, 18.0]  # rho = 1 to double precision: 1 - rho^2 via log cosh
    x = np.array([[2.0, -2.0, 1.0]])  # off the line x1 = x2 where both are concentrated
    nll, dz = _core.mixture_nll(z, x, M)
    assert np.isfinite(nll).all() and np.isfinite(dz).all()
    assert nll[0] > 1e4  # a very unlikely point, with a finite cost
    assert dz[0, 1:3].sum() == pytest.approx(0.0, abs=1e-12)  # d/dpi^ sums to 0 (pi - gamma)


def test_sampling_distributions_temperature_and_bias():
    rng = np.random.default_rng(3)
    M = 4
    z, _ = raw(rng, 5, M)
    own = _core.mixture_columns(z, M)
    np.testing.assert_allclose(own["pi"].sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(own["e"], 1.0 / (1.0 + np.exp(z[:, 0])), rtol=1e-12)  # the paper's sign
    np.testing.assert_allclose(own["sigma1"], np.exp(z[:, 1 + 3 * M : 1 + 4 * M]), rtol=1e-12)
    np.testing.assert_allclose(own["rho"], np.tanh(z[:, 1 + 5 * M :]), rtol=1e-12)
    biased = _core.mixture_columns(z, M, 1.0, 0.5)
    np.testing.assert_allclose(biased["sigma2"], own["sigma2"] * np.exp(-0.5), rtol=1e-12)
    sharp = biased["pi"].max(axis=1)
    assert (sharp >= own["pi"].max(axis=1) - 1e-12).all()  # bias b sharpens pi: softmax(pi^ (1 + b))
    warm = _core.mixture_columns(z, M, 2.0, 0.0)
    np.testing.assert_allclose(warm["sigma1"], own["sigma1"] * np.sqrt(2.0), rtol=1e-12)
    assert (warm["pi"].max(axis=1) <= own["pi"].max(axis=1) + 1e-12).all()
    with pytest.raises(ValueError, match="temperature"):
        _core.mixture_columns(z, M, 0.0, 0.0)
    with pytest.raises(ValueError, match=r"shape \(rows, 25\)"):
        _core.mixture_columns(z[:, :-1], M)


# ---- models without a vocabulary ---------------------------------------------------------------------
def stroke_model(**kw):
    args = dict(input_size=3, head="mdn", mixtures=3, embed_size=6, hidden_sizes=[8], dtype="float64", seed=1)
    args.update(kw)
    return msr.LSTM(**args)


def strokes(rng, lengths):
    """Sequences of rows (dx, dy, pen bit), the last row of each ending its stroke."""
    out = []
    for n in lengths:
        s = np.column_stack([rng.normal(size=(n, 2)), rng.random(n) < 0.2]).astype(float)
        s[-1, 2] = 1.0
        out.append(s)
    return out


def test_a_stroke_model_needs_no_vocabulary_and_rebuilds_from_its_config():
    model = stroke_model()
    assert model.vocab_size is None and model.config["mixtures"] == 3
    assert model.parameters()["decoder.weight"].shape == (19, 8)  # 6M + 1 raw parameters
    again = type(model)(**{k: v for k, v in model.config.items() if k != "model"})
    assert sorted(again.parameters()) == sorted(model.parameters())
    assert msr.LSTM(input_size=3, head="mdn", embed_size=4, hidden_sizes=[4]).config["mixtures"] == 20
    gated = msr.HMLSTM(input_size=3, head="mdn", head_size=5, mixtures=2, embed_size=4, hidden_sizes=[4, 4])
    assert gated.parameters()["output.embed.weight"].shape == (5, 8)  # the gated module under the mixture
    assert gated.parameters()["decoder.weight"].shape == (13, 5)


@pytest.mark.parametrize(
    "kw, error, match",
    [
        (dict(input_size=None), ValueError, "give input_size"),
        (dict(head="linear", vocab_size=5), ValueError, "mixtures is for head='mdn'"),
        (dict(head="linear"), TypeError, "needs vocab_size"),
        (dict(mixtures=0), ValueError, "mixtures"),
    ],
)
def test_a_stroke_model_is_refused_when_wrong(kw, error, match):
    with pytest.raises(error, match=match):
        stroke_model(**kw)


def test_bad_targets_are_refused_with_their_position():
    model = stroke_model()
    x = np.zeros((2, 4, 3))
    y = np.zeros((2, 4, 3))
    y[1, 2, 0] = np.nan
    with pytest.raises(ValueError, match=r"stream 1, step 2, feature 0\) is not finite"):
        model.loss_and_grad(x, y)
    y[1, 2, 0] = 0.0
    y[0, 3, 2] = 0.5
    with pytest.raises(ValueError, match=r"pen bit 0.5 at \(stream 0, step 3, feature 2\) must be 0 or 1"):
        model.loss(x, y)
    with pytest.raises(ValueError, match=r"shape \(batch, steps, 3\)"):
        model.loss(x, np.zeros((2, 4, 2)))
    with pytest.raises(ValueError, match=r"dx, dy, pen bit; got shape \(2, 4\)"):
        model.loss(x, np.zeros((2, 4), dtype=np.int32))  # class ids where vectors belong
    with pytest.raises(TypeError, match="real-valued"):
        model.loss(x, np.full((2, 4, 3), "a"))


# ---- separate sequences ----------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["LSTM", "HMLSTM", "VCRNN"])
def test_padding_counts_in_neither_loss_nor_gradient(family):
    rng = np.random.default_rng(5)
    cls = msr.MODELS[family]
    opts = {**cls.example_options, "input_size": 3, "head": "mdn", "mixtures": 3, "dtype": "float64", "seed": 1}
    model = cls(**opts)  # the HM-LSTM's and VCRNN's examples have auxiliary terms: padding is left out of them too
    seqs = strokes(rng, [5, 2, 4])
    x, y, w = padded(seqs)
    assert (x[:, 0] == START).all() and w.sum() == 11
    loss, grads, _ = model.loss_and_grad(x, y, None, padding=w)
    # what the padding holds changes nothing, auxiliary terms included
    x2, y2 = x.copy(), y.copy()
    x2[1, 2:] = 9.0
    y2[1, 2:, :2] = -9.0
    loss2, grads2, _ = model.loss_and_grad(x2, y2, None, padding=w)
    assert float(loss2) == pytest.approx(float(loss), rel=1e-14)
    assert loss2.aux == pytest.approx(loss.aux, rel=1e-14)
    for k in grads:  # equal up to the order of sums (the VCRNN groups a step's columns by their d_t)
        np.testing.assert_allclose(grads2[k], grads[k], rtol=1e-12, atol=1e-16, err_msg=k)
    # each sequence alone, from the zero state: the cross-entropy is their mean weighted by length
    alone = [model.loss_and_grad(*padded([s])[:2], None) for s in seqs]
    assert float(loss) == pytest.approx(sum(float(a[0]) * len(s) for a, s in zip(alone, seqs)) / 11, rel=1e-12)
    if not model.aux_terms:  # and so is the gradient (terms that are means over a batch are not additive)
        for k in grads:
            want = sum(a[1][k] * len(s) for a, s in zip(alone, seqs)) / 11
            np.testing.assert_allclose(grads[k], want, rtol=1e-10, atol=1e-13, err_msg=k)


def test_batches_cover_every_sequence_once_per_epoch_and_start_from_zero():
    rng = np.random.default_rng(6)
    seqs = strokes(rng, [3, 9, 4, 7, 2])
    sb = SequenceBatches(seqs, batch_size=2, bptt=4, seed=0)
    seen = sorted(i for idx in sb.batches(0) for i in idx)
    assert seen == list(range(5))
    assert sb.num_chunks(0) == sum(-(-max(len(seqs[i]) for i in idx) // 4) for idx in sb.batches(0))
    chunks = list(sb.chunks(0))
    assert [k for k, _ in chunks] == list(range(sb.num_chunks(0)))
    firsts = [c.first for _, c in chunks]
    assert firsts.count(True) == 3  # 3 batches, each starting afresh
    assert sum(float(c.w.sum()) for _, c in chunks) == 25
    assert not np.array_equal(sb.order(0), sb.order(1))  # a new order each epoch, the same on every call
    np.testing.assert_array_equal(sb.order(1), SequenceBatches(seqs, 2, 4, seed=0).order(1))


def test_trainer_fits_sequences_resumes_bit_for_bit_and_scores_per_sequence(tmp_path):
    rng = np.random.default_rng(8)
    train, valid = strokes(rng, rng.integers(3, 12, 24)), strokes(rng, [5, 8, 3])
    model = stroke_model(dtype="float32")

    def trainer():
        return msr.Trainer(model, optimizer=msr.optim.Adam(lr=1e-2), batch_size=4, bptt=5, progress=False, seed=2)

    ck = tmp_path / "strokes.npz"
    t1 = trainer()
    h = t1.fit(train, valid=valid, epochs=2, checkpoint=ck)
    assert h[-1]["train_loss"] < h[0]["train_loss"]
    assert h[-1]["valid_loss"] == pytest.approx(msr.evaluate(model, valid)["loss"], rel=1e-6)
    whole = model.flat_parameters().copy()
    # the same run in two calls, resumed from the checkpoint in the middle of the second epoch
    model.reset_parameters(1)
    t2 = trainer()
    t2.fit(train, valid=valid, epochs=2, checkpoint=ck.with_name("b.npz"), max_chunks=h[0]["steps"] + 3)
    model.reset_parameters(5)
    t3 = trainer()
    t3.fit(train, valid=valid, epochs=2, checkpoint=ck.with_name("b.npz"), resume=True)
    np.testing.assert_array_equal(model.flat_parameters(), whole)
    # nats per sequence: each sequence's summed -log p, read alone from zeros
    ev = msr.evaluate(model, valid, batch_size=2)
    alone = [float(model.loss(*padded([s], np.float32)[:2])[0]) * len(s) for s in valid]
    assert ev["nats_per_sequence"] == pytest.approx(np.mean(alone), rel=1e-5)
    assert ev["log_likelihood"] == -ev["nats_per_sequence"] and ev["sequences"] == 3 and ev["tokens"] == 16


def test_trainer_refuses_sequences_for_a_token_model_and_tokens_for_a_stroke_model():
    rng = np.random.default_rng(9)
    seqs = strokes(rng, [4, 4])
    with pytest.raises(TypeError, match="reads token ids"):
        msr.Trainer(msr.LSTM(5, 4, 4), progress=False).fit(seqs)
    with pytest.raises(TypeError, match="trains on separate sequences"):
        msr.Trainer(stroke_model(), progress=False).fit(np.arange(100) % 5)
    bad = [seqs[0], np.ones((3, 2))]
    with pytest.raises(ValueError, match=r"train\[1\] must have shape"):
        msr.Trainer(stroke_model(), progress=False).fit(bad)


def test_the_head_alone_of_the_benchmark_matches_the_reference():
    torch = pytest.importorskip("torch")
    from multiscale_rnn.reference import mdn

    rng = np.random.default_rng(11)
    N, I, M = 30, 7, 3
    head = _core.MixtureHeadF64(I, M)
    flat = head.flat_params()
    flat[:] = rng.normal(scale=0.3, size=flat.size)
    info = head.param_info()
    (ow, rw, cw), (ob, rb, _) = info["decoder.weight"], info["decoder.bias"]
    assert (rw, cw, rb) == (6 * M + 1, I, 6 * M + 1)

    def view(a, o, r, c):  # column-major (r, c) at offset o
        return a[o : o + r * c].reshape(c, r).T

    W = torch.tensor(view(flat, ow, rw, cw).copy(), requires_grad=True)
    b = torch.tensor(flat[ob : ob + rb].copy(), requires_grad=True)
    y = rng.normal(size=(N, I))
    x = np.column_stack([rng.normal(size=(N, 2)), rng.integers(0, 2, N)]).astype(float)
    head.zero_grad()
    loss, dy = head.loss_and_grad(y, x)
    ty = torch.tensor(y, requires_grad=True)
    ref = mdn.nll(ty @ W.T + b, torch.tensor(x)).mean()
    ref.backward()
    assert loss == pytest.approx(float(ref.detach()), rel=1e-12)
    np.testing.assert_allclose(dy, ty.grad.numpy(), rtol=1e-9, atol=1e-12)
    g = head.flat_grads()
    np.testing.assert_allclose(view(g, ow, rw, cw), W.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(g[ob : ob + rb], b.grad.numpy(), rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match=r"x \(N, 3\)"):
        head.loss_and_grad(y, x[:, :2].copy())


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_vectorised_mixture_equals_the_plain_one(dtype):
    # columns in blocks, vectorised across them (mixture_nll_columns) against one column at a time (mixture_nll)
    rng = np.random.default_rng(12)
    model = stroke_model(dtype=dtype, mixtures=5)
    x, y, w = padded(strokes(rng, [40, 70, 3, 90]))
    x[:, :, :2] *= 4.0  # offsets far from the components too
    out = {}
    for plain in (True, False):
        msr.set_reference_kernels(plain)
        try:
            loss, grads, _ = model.loss_and_grad(x, y, None, padding=w)
            _, per_step, _ = model.loss(x, y, None, per_token=True)
        finally:
            msr.set_reference_kernels(False)
        out[plain] = (float(loss), grads, per_step)
    tol = 1e-12 if dtype == "float64" else 1e-5
    assert out[True][0] == pytest.approx(out[False][0], rel=tol)
    np.testing.assert_allclose(out[True][2], out[False][2], rtol=tol, atol=tol)
    for k in out[True][1]:
        np.testing.assert_allclose(out[True][1][k], out[False][1][k], rtol=tol, atol=tol, err_msg=k)
