"""The class-based softmax head (head="class"): exact, normalised, gradients, reference, errors."""

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn.testing import check_model_gradients

SIZES = [1, 2, 3, 5]  # V = 11, four classes of consecutive ids
V = sum(SIZES)


def make(cls=msr.ElmanRNN, sizes=SIZES, dropout=0.0, dtype="float64", seed=3, hidden=(6,)):
    return cls(
        vocab_size=sum(sizes),
        embed_size=5,
        hidden_sizes=hidden,
        dropout=dropout,
        dtype=dtype,
        seed=seed,
        head="class",
        head_classes=list(sizes),
    )


def batch(rng, B=3, T=4):
    return rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))


def perturb(model, rng, scale=0.5):
    """Non-default parameters, so that no class or word term is degenerate."""
    for p in model.parameters().values():
        p[...] = rng.normal(scale=scale, size=p.shape)


def log_softmax(z):
    m = z.max(axis=-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis=-1, keepdims=True))


def test_probabilities_sum_to_one_and_logits_are_log_probabilities():
    rng = np.random.default_rng(0)
    model = make()
    perturb(model, rng)
    tok, _ = batch(rng)
    logits, _ = model.forward(tok)
    assert logits.shape == (3, 4, V)
    np.testing.assert_allclose(np.exp(logits).sum(axis=-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(log_softmax(logits), logits, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_per_token_loss_is_minus_log_probability_of_forward(dtype):
    rng = np.random.default_rng(1)
    model = make(dtype=dtype, hidden=(7, 6))
    perturb(model, rng)
    tok, tgt = batch(rng, B=5, T=6)
    logits, _ = model.forward(tok)
    expected = -np.take_along_axis(log_softmax(logits.astype(np.float64)), tgt[..., None], axis=-1)[..., 0]
    mean, per_token, _ = model.loss(tok, tgt, per_token=True)
    tol = 1e-12 if dtype == "float64" else 2e-5
    np.testing.assert_allclose(per_token, expected, rtol=tol, atol=tol)
    np.testing.assert_allclose(mean, expected.mean(), rtol=tol)
    train_loss, _, _ = model.loss_and_grad(tok, tgt)  # no dropout: the same loss
    np.testing.assert_allclose(float(train_loss), expected.mean(), rtol=tol)


def test_one_class_equals_the_full_softmax():
    rng = np.random.default_rng(2)
    full = msr.ElmanRNN(vocab_size=V, embed_size=5, hidden_sizes=(6,), dtype="float64", seed=3)
    one = make(sizes=[V])
    perturb(full, rng)
    params = dict(full.parameters())
    params["class_decoder.weight"] = rng.normal(size=one.parameters()["class_decoder.weight"].shape)
    params["class_decoder.bias"] = rng.normal(size=1)
    one.load_parameters(params)
    tok, tgt = batch(rng)
    lf, _ = full.forward(tok)
    lo, _ = one.forward(tok)
    np.testing.assert_allclose(lo, log_softmax(lf), atol=1e-12)
    (_a, pa, _), (_b, pb, _) = full.loss(tok, tgt, per_token=True), one.loss(tok, tgt, per_token=True)
    np.testing.assert_allclose(pb, pa, rtol=1e-12)
    la, ga, _ = full.loss_and_grad(tok, tgt)
    lb, gb, _ = one.loss_and_grad(tok, tgt)
    np.testing.assert_allclose(float(lb), float(la), rtol=1e-12)
    for name in ga:
        np.testing.assert_allclose(gb[name], ga[name], rtol=1e-10, atol=1e-14, err_msg=name)
    np.testing.assert_array_equal(gb["class_decoder.weight"], 0.0)  # P(c) = 1 whatever the logit
    np.testing.assert_array_equal(gb["class_decoder.bias"], 0.0)


@pytest.mark.parametrize(
    "cls,hidden,dropout", [(msr.ElmanRNN, (6,), 0.0), (msr.LSTM, (5, 4), 0.3), (msr.GRU, (5,), 0.0)]
)
def test_gradients_match_finite_differences(cls, hidden, dropout):
    rng = np.random.default_rng(3)
    model = make(cls, hidden=hidden, dropout=dropout)
    perturb(model, rng, 0.4)
    tok, tgt = batch(rng, B=3, T=4)
    state = {k: rng.normal(scale=0.5, size=v.shape) for k, v in model.initial_state(3).items()}
    errors = check_model_gradients(model, tok, tgt, state)
    assert set(errors) == set(model.parameters())
    worst = max(errors, key=errors.get)
    assert errors[worst] < 1e-6, (worst, errors[worst])


def test_weighted_loss_gradients_match_finite_differences():
    rng = np.random.default_rng(4)
    model = make()
    perturb(model, rng, 0.4)
    tok, tgt = batch(rng)
    w = rng.uniform(0.0, 2.0, size=tok.shape)
    w[:, -1] = 0.0
    loss, grads, _ = model.loss_and_grad(tok, tgt, weights=w)
    _, per_token, _ = model.loss(tok, tgt, per_token=True)
    np.testing.assert_allclose(float(loss), (w * per_token).sum() / w.sum(), rtol=1e-12)
    for name, p in model.parameters().items():
        num = msr.testing.numeric_gradient(lambda: float(model.loss_and_grad(tok, tgt, weights=w)[0]), p)
        np.testing.assert_allclose(grads[name], num, rtol=1e-6, atol=1e-9, err_msg=name)


def test_state_carries_over_two_chunks():
    rng = np.random.default_rng(5)
    model = make(msr.LSTM, hidden=(6,))
    perturb(model, rng, 0.4)
    tok, tgt = batch(rng, B=2, T=8)
    whole, per_whole, _ = model.loss(tok, tgt, per_token=True)
    _, pa, s = model.loss(tok[:, :3], tgt[:, :3], per_token=True)
    _, pb, _ = model.loss(tok[:, 3:], tgt[:, 3:], s, per_token=True)
    np.testing.assert_allclose(np.concatenate([pa, pb], axis=1), per_whole, rtol=1e-12)
    # and the gradient of the second chunk, from the carried state, by finite differences
    errors = check_model_gradients(model, tok[:, 3:], tgt[:, 3:], s)
    assert max(errors.values()) < 1e-6, errors


def test_matches_pytorch_reference():
    torch = pytest.importorskip("torch")
    from multiscale_rnn.reference import class_softmax as ref

    rng = np.random.default_rng(6)
    model = make(msr.ElmanRNN, hidden=(6,))
    perturb(model, rng, 0.5)
    tok, tgt = batch(rng, B=3, T=5)
    loss, grads, _ = model.loss_and_grad(tok, tgt)
    P = {k: torch.tensor(v, requires_grad=True) for k, v in model.parameters().items()}
    # Elman, h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh), from zeros; steps by column.
    x = P["embedding.weight"][torch.tensor(tok)]  # (B, T, E)
    h = torch.zeros(3, 6, dtype=torch.float64)
    ys = []
    for t in range(tok.shape[1]):
        h = torch.tanh(x[:, t] @ P["weight_ih_l0"].T + P["bias_ih_l0"] + h @ P["weight_hh_l0"].T + P["bias_hh_l0"])
        ys.append(h)
    y = torch.stack(ys, dim=1).reshape(-1, 6)  # (B*T, H)
    nll = ref.nll(y, P, SIZES, torch.tensor(tgt.reshape(-1), dtype=torch.long))
    nll.mean().backward()
    np.testing.assert_allclose(float(loss), float(nll.mean().detach()), rtol=1e-12)
    for name, p in P.items():
        np.testing.assert_allclose(grads[name], p.grad.numpy(), rtol=1e-10, atol=1e-14, err_msg=name)
    logits, _ = model.forward(tok)
    np.testing.assert_allclose(logits.reshape(-1, V), ref.log_probs(y, P, SIZES).detach().numpy(), atol=1e-12)


def test_threads_give_the_same_result():
    rng = np.random.default_rng(7)
    model = make(msr.LSTM, sizes=[3, 7, 10, 20, 40], hidden=(16,))
    perturb(model, rng, 0.3)
    tok = rng.integers(0, 80, (8, 12))
    tgt = rng.integers(0, 80, (8, 12))
    before = msr.get_num_threads()
    try:
        out = []
        for n in (1, 2):
            msr.set_num_threads(n)
            loss, grads, _ = model.loss_and_grad(tok, tgt)
            out.append((float(loss), grads, model.loss(tok, tgt, per_token=True)[1]))
    finally:
        msr.set_num_threads(before)
    (l1, g1, p1), (l2, g2, p2) = out
    np.testing.assert_allclose(l2, l1, rtol=1e-13)
    np.testing.assert_allclose(p2, p1, rtol=1e-13)
    for name in g1:
        np.testing.assert_allclose(g2[name], g1[name], rtol=1e-12, atol=1e-15, err_msg=name)


@pytest.mark.usefixtures("one_thread")
def test_the_same_call_gives_the_same_bits_whatever_the_heap_addresses():
    """Its per-class blocks start on 64-byte boundaries: two calls on the same model and batch agree bit for bit,
    with other allocations in between (which once moved the blocks and the rounding of their products)."""
    rng = np.random.default_rng(5)
    sizes = [1, 2, 3, 7, 11, 19, 23, 34]
    model = make(msr.LSTM, sizes=sizes, dtype="float32", hidden=(24,))
    tok = rng.integers(0, sum(sizes), (20, 30))
    tgt = rng.integers(0, sum(sizes), (20, 30))
    loss0, grads0, _ = model.loss_and_grad(tok, tgt)
    kept = []
    for n in range(8):
        kept.append(np.ones(17 * n + 3, np.float32))  # other allocations between the calls
        twin = make(msr.LSTM, sizes=sizes, dtype="float32", hidden=(24,))
        loss, grads, _ = twin.loss_and_grad(tok, tgt)
        assert float(loss) == float(loss0)
        for name in grads0:
            assert (grads[name] == grads0[name]).all(), (n, name)


def test_config_round_trips_as_json():
    import json

    model = make()
    config = json.loads(json.dumps(model.config))
    assert config["head"] == "class" and config["head_classes"] == SIZES
    again = msr.build_model(config.pop("model"), **config)
    again.load_parameters(model.parameters())
    tok = np.arange(8).reshape(2, 4)
    np.testing.assert_array_equal(again.forward(tok)[0], model.forward(tok)[0])


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(head="class"), ValueError, "needs head_classes"),
        (dict(head="linear", head_classes=[5, 6]), ValueError, "head_classes is for head='class'"),
        (dict(head="class", head_classes=[5, 5]), ValueError, "sum to 10, not to the vocabulary size 11"),
        (dict(head="class", head_classes=[5, 0, 6]), ValueError, "head_classes"),
        (dict(head="class", head_classes=(5, 6)), ValueError, "head_classes"),
        (dict(head="class", head_classes=[5, 6.0]), ValueError, "head_classes"),
        (dict(head="class", head_classes=[11], head_size=4), ValueError, "no hidden size"),
    ],
)
def test_bad_config_is_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        msr.ElmanRNN(vocab_size=11, embed_size=5, hidden_sizes=(6,), **kwargs)


def test_linear_and_gated_heads_keep_the_full_softmax_loss():
    # The default head loss (full softmax) stays the linear and gated heads' loss.
    rng = np.random.default_rng(8)
    for head, size in (("linear", None), ("gated", 4)):
        model = msr.ElmanRNN(
            vocab_size=V, embed_size=5, hidden_sizes=(6, 5), dtype="float64", head=head, head_size=size
        )
        tok, tgt = batch(rng)
        logits, _ = model.forward(tok)
        expected = -np.take_along_axis(log_softmax(logits), tgt[..., None], axis=-1)[..., 0]
        np.testing.assert_allclose(model.loss(tok, tgt, per_token=True)[1], expected, rtol=1e-12)
        loss, _, _ = model.loss_and_grad(tok, tgt)
        np.testing.assert_allclose(float(loss), expected.mean(), rtol=1e-12)
