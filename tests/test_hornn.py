"""HORNN: finite-difference gradients (float64, every pooling, orders 1-4, every activation), parity
with the PyTorch reference over two chunks, N = 1 equals torch.nn.RNN, FOFE with alpha = 1 and
saturated gates equal the plain HORNN, fast kernels and threads equal the reference kernels, bad
options and states refused, state names and shapes."""

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn.models.hornn import HORNN
from multiscale_rnn.testing import assert_runs_equal, check_model_gradients, run_chunks

V, E = 11, 5
POOLINGS = ("plain", "max", "fofe", "gated")


def make(hidden=(6, 4), **kw):
    kw.setdefault("dtype", "float64")
    kw.setdefault("seed", 1)
    return msr.HORNN(V, E, hidden, **kw)


def perturb(model, rng, scale=0.3):
    for p in model.parameters().values():
        p += rng.normal(scale=scale, size=p.shape)


def random_state(model, rng, B):
    return {k: rng.normal(scale=0.5, size=v.shape) for k, v in model.initial_state(B).items()}


def two_chunks(rng, B=3, T=5):
    data = rng.integers(0, V, (B, 2 * T + 1))
    return [(data[:, k * T : (k + 1) * T], data[:, k * T + 1 : (k + 1) * T + 1]) for k in range(2)]


def assert_gradients(model, seed=0, T=5, B=2):
    """Finite differences on the second of two chunks, so the history (N lags per layer) the first
    chunk left is carried in; T > N."""
    rng = np.random.default_rng(seed)
    perturb(model, rng)
    (tok0, tgt0), (tok1, tgt1) = two_chunks(rng, B=B, T=T)
    _, _, st = model.loss_and_grad(tok0, tgt0, random_state(model, rng, B))
    errors = check_model_gradients(model, tok1, tgt1, st, eps=1e-5, max_entries=40)
    assert set(errors) == set(model.parameters())
    worst = max(errors, key=errors.get)
    assert errors[worst] < 1e-6, (worst, errors[worst])


# ---- gradients -------------------------------------------------------------------------------
# Finite differences run thousands of tiny forwards: one thread (threads are checked below).


@pytest.mark.parametrize("pooling", POOLINGS)
@pytest.mark.parametrize("order", [1, 2, 3, 4])
@pytest.mark.usefixtures("one_thread")
def test_gradients(pooling, order):
    assert_gradients(make(order=order, pooling=pooling), seed=order, T=order + 2)


@pytest.mark.parametrize("activation", ["tanh", "relu"])
@pytest.mark.parametrize("pooling", POOLINGS)
@pytest.mark.usefixtures("one_thread")
def test_gradients_activations(activation, pooling):
    assert_gradients(make(order=3, pooling=pooling, activation=activation), seed=7)


@pytest.mark.parametrize("pooling", ["plain", "gated"])
@pytest.mark.usefixtures("one_thread")
def test_gradients_without_bias_and_with_dropout(pooling):
    assert_gradients(make(order=2, pooling=pooling, bias=False), seed=3)
    assert_gradients(make(hidden=(5, 6, 4), order=3, pooling=pooling, dropout=0.3), seed=4)


# ---- the PyTorch reference -------------------------------------------------------------------


@pytest.mark.parametrize("pooling", POOLINGS)
@pytest.mark.parametrize("order", [1, 2, 3, 4])
@pytest.mark.usefixtures("one_thread")
def test_matches_pytorch_reference(pooling, order):
    pytest.importorskip("torch")
    from multiscale_rnn.reference import hornn as ref

    rng = np.random.default_rng(10 + order)
    m = make(order=order, pooling=pooling, activation="tanh" if order % 2 else "sigmoid")
    perturb(m, rng)
    st = random_state(m, rng, 3)
    for tok, tgt in two_chunks(rng, T=order + 3):
        loss, grads, new = m.loss_and_grad(tok, tgt, st)
        rloss, rgrads, rstate = ref.loss_and_grad(m, tok, tgt, st)
        assert loss == pytest.approx(rloss, rel=1e-12)
        assert set(grads) == set(rgrads)
        for k in grads:
            np.testing.assert_allclose(grads[k], rgrads[k], rtol=1e-9, atol=1e-12, err_msg=k)
            assert np.abs(rgrads[k]).max() > 0, k
        assert set(new) == set(rstate)
        for k in new:
            np.testing.assert_allclose(new[k], rstate[k], rtol=1e-12, atol=1e-14, err_msg=k)
        st = new


def test_order_one_tanh_equals_torch_rnn():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    H, L, B, T = 7, 2, 3, 6
    ours = make(hidden=(H,) * L, order=1, activation="tanh")
    theirs = torch.nn.RNN(E, H, num_layers=L, batch_first=True).double()
    emb, dec = torch.nn.Embedding(V, E).double(), torch.nn.Linear(H, V).double()
    named = dict(theirs.named_parameters())
    p = ours.parameters()
    with torch.no_grad():
        emb.weight.copy_(torch.from_numpy(p["embedding.weight"]))
        dec.weight.copy_(torch.from_numpy(p["decoder.weight"]))
        dec.bias.copy_(torch.from_numpy(p["decoder.bias"]))
        for l in range(L):
            named[f"weight_ih_l{l}"].copy_(torch.from_numpy(p[f"weight_ih_l{l}"]))
            named[f"weight_hh_l{l}"].copy_(torch.from_numpy(p[f"weight_hh_l{l}"]))
            named[f"bias_ih_l{l}"].copy_(torch.from_numpy(p[f"bias_l{l}"]))
            named[f"bias_hh_l{l}"].zero_()
    rng = np.random.default_rng(2)
    tok, tgt = rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))
    logits, _ = ours.forward(tok)
    loss, grads, st = ours.loss_and_grad(tok, tgt)
    y, hT = theirs(emb(torch.from_numpy(tok)))
    z = dec(y)
    tl = torch.nn.functional.cross_entropy(z.reshape(-1, V), torch.from_numpy(tgt).reshape(-1))
    tl.backward()
    np.testing.assert_allclose(logits, z.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert loss == pytest.approx(tl.item(), rel=1e-12)
    for l in range(L):
        np.testing.assert_allclose(
            grads[f"weight_ih_l{l}"], named[f"weight_ih_l{l}"].grad.numpy(), rtol=1e-9, atol=1e-12
        )
        np.testing.assert_allclose(
            grads[f"weight_hh_l{l}"], named[f"weight_hh_l{l}"].grad.numpy(), rtol=1e-9, atol=1e-12
        )
        np.testing.assert_allclose(grads[f"bias_l{l}"], named[f"bias_ih_l{l}"].grad.numpy(), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(st[f"h_l{l}_lag1"], hT[l].detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(grads["embedding.weight"], emb.weight.grad.numpy(), rtol=1e-9, atol=1e-12)


# ---- special cases equal the plain HORNN -----------------------------------------------------


def test_fofe_equals_plain_with_the_paths_scaled():
    """Eq. 5 is eq. 3 with W_hn scaled by alpha^n: the FOFE model and a plain one whose recurrent blocks
    are alpha^n W_hn compute the same logits, losses and state over two chunks, and each recurrent
    block's gradient differs by the factor alpha^n (chain rule), every other gradient being equal."""
    rng = np.random.default_rng(3)
    chunks = two_chunks(rng)
    alpha, H = 0.7, (6, 4)
    fofe = make(H, order=3, pooling="fofe", alpha=alpha)
    perturb(fofe, rng)
    plain = make(H, order=3, pooling="plain")
    plain.load_parameters(fofe.parameters())
    scale = {}
    for l, h in enumerate(H):
        s = np.repeat(alpha ** np.arange(1, 4), h)[:, None]  # block n-1 of weight_hh: alpha^n
        plain.parameters()[f"weight_hh_l{l}"][...] *= s
        scale[f"weight_hh_l{l}"] = s
    st = random_state(plain, rng, 3)
    sf, sp = st, st
    for tok, tgt in chunks:
        np.testing.assert_allclose(fofe.forward(tok, sf)[0], plain.forward(tok, sp)[0], rtol=1e-12, atol=1e-14)
        lf, gf, sf = fofe.loss_and_grad(tok, tgt, sf)
        lp, gp, sp = plain.loss_and_grad(tok, tgt, sp)
        assert abs(lf - lp) <= 1e-12 * abs(lp)
        for k in gf:
            np.testing.assert_allclose(gf[k], gp[k] * scale.get(k, 1.0), rtol=1e-10, atol=1e-13, err_msg=k)
        for k in sf:
            np.testing.assert_allclose(sf[k], sp[k], rtol=1e-12, atol=1e-14, err_msg=k)
    # and the scaling matters: the unscaled plain model is a different one
    other = make(H, order=3, pooling="plain")
    other.load_parameters(fofe.parameters())
    assert abs(other.loss_and_grad(*chunks[0], st)[0] - fofe.loss_and_grad(*chunks[0], st)[0]) > 1e-6


def test_saturated_gates_equal_plain():
    """gate_bias driven far positive makes every r_{t,n} = 1 (to rounding): eq. 6 becomes eq. 3."""
    rng = np.random.default_rng(4)
    chunks = two_chunks(rng)
    gated, plain = make(order=3, pooling="gated"), make(order=3, pooling="plain")
    for k, v in plain.parameters().items():
        v[...] = gated.parameters()[k]
    for l in range(2):
        gated.parameters()[f"gate_bias_l{l}"][...] = 60.0
    st = random_state(plain, rng, 3)
    (runs_g, st_g), (runs_p, st_p) = run_chunks(gated, chunks, st), run_chunks(plain, chunks, st)
    for (lg, loss_g, gg), (lp, loss_p, gp) in zip(runs_g, runs_p):
        np.testing.assert_allclose(lg, lp, rtol=1e-12, atol=1e-13)
        assert loss_g == pytest.approx(loss_p, rel=1e-12)
        for k in gp:
            np.testing.assert_allclose(gg[k], gp[k], rtol=1e-10, atol=1e-13, err_msg=k)
        for k in ("gate_weight_ih_l0", "gate_weight_hh_l1", "gate_bias_l0"):
            assert np.abs(gg[k]).max() < 1e-20, k  # saturated gates pass no gradient
    for k in st_p:
        np.testing.assert_allclose(st_g[k], st_p[k], rtol=1e-12, atol=1e-14)


def test_max_pooling_tie_goes_to_lowest_lag():
    """With W_h1 = W_h2 and h_{-1} = h_{-2}, both paths tie at the first step: only W_h1 (the lowest
    n) gets the gradient of that step's pooled term."""
    m = make(hidden=(4,), order=2, pooling="max")
    p = m.parameters()
    p["weight_hh_l0"][4:] = p["weight_hh_l0"][:4]
    rng = np.random.default_rng(5)
    h = rng.normal(size=(2, 4))
    st = {"h_l0_lag1": h, "h_l0_lag2": h}
    tok, tgt = rng.integers(0, V, (2, 1)), rng.integers(0, V, (2, 1))
    _, g, _ = m.loss_and_grad(tok, tgt, st)
    assert np.abs(g["weight_hh_l0"][:4]).max() > 0
    assert np.abs(g["weight_hh_l0"][4:]).max() == 0


# ---- fast schedule and threads equal the reference kernels ------------------------------------


@pytest.mark.parametrize("pooling", POOLINGS)
def test_fast_equals_reference_kernels(pooling):
    """Packed products (T = 5 >= 4), unpacked (T = 2) and threads over streams (1, 2, 3 threads,
    B = 7: uneven splits) give what the reference kernels give, over two chunks with the state
    carried; hidden sizes not multiples of the panel."""
    Bn = 7
    cases = {}
    threads0 = msr.get_num_threads()
    try:
        for T in (5, 2):
            chunks = two_chunks(np.random.default_rng(T), B=Bn, T=T)
            for threads, reference in ((1, True), (1, False), (2, False), (3, False)):
                msr.set_num_threads(threads)
                msr.set_reference_kernels(reference)
                m = make(hidden=(9, 5), order=3, pooling=pooling)
                perturb(m, np.random.default_rng(8))
                st = random_state(m, np.random.default_rng(9), Bn)
                cases[(T, threads, reference)] = run_chunks(m, chunks, st)
    finally:
        msr.set_reference_kernels(False)
        msr.set_num_threads(threads0)
    for T in (5, 2):
        ref = cases[(T, 1, True)]
        for threads in (1, 2, 3):
            assert_runs_equal(cases[(T, threads, False)], ref, rtol=1e-12, grad_rtol=1e-10)


def test_float32_close_to_float64():
    rng = np.random.default_rng(11)
    tok, tgt = rng.integers(0, V, (4, 8)), rng.integers(0, V, (4, 8))
    m64 = make(order=3, pooling="gated")
    m32 = make(order=3, pooling="gated", dtype="float32")
    m32.load_parameters({k: v.astype(np.float32) for k, v in m64.parameters().items()})
    l64, g64, _ = m64.loss_and_grad(tok, tgt)
    l32, g32, _ = m32.loss_and_grad(tok, tgt)
    assert l32 == pytest.approx(l64, rel=1e-5)
    for k in g64:
        np.testing.assert_allclose(g32[k], g64[k], rtol=1e-3, atol=1e-5, err_msg=k)


# ---- names, shapes, roles, state ---------------------------------------------------------------


def test_parameters_state_and_roles():
    m = make(hidden=(6, 4), order=3, pooling="gated")
    p, roles = m.parameters(), m.parameter_roles()
    assert p["weight_ih_l0"].shape == (6, E) and p["weight_ih_l1"].shape == (4, 6)
    assert p["weight_hh_l0"].shape == (18, 6) and p["weight_hh_l1"].shape == (12, 4)
    assert p["bias_l0"].shape == (6,) and p["gate_bias_l1"].shape == (12,)
    assert p["gate_weight_ih_l1"].shape == (12, 6) and p["gate_weight_hh_l0"].shape == (18, 6)
    assert roles["weight_hh_l0"].kind == "recurrent" and roles["weight_hh_l0"].unit == 6
    assert roles["gate_weight_ih_l1"].kind == "input" and roles["gate_weight_ih_l1"].layer == "_l1"
    assert roles["gate_bias_l0"].kind == "bias" and roles["bias_l1"].kind == "bias"
    st = m.initial_state(5)
    assert sorted(st) == sorted(f"h_l{l}_lag{n}" for l in range(2) for n in (1, 2, 3))
    assert st["h_l0_lag2"].shape == (5, 6) and st["h_l1_lag3"].shape == (5, 4)
    plain = make(order=2, bias=False)
    assert sorted(plain.parameters()) == [
        "decoder.bias",
        "decoder.weight",
        "embedding.weight",
        "weight_hh_l0",
        "weight_hh_l1",
        "weight_ih_l0",
        "weight_ih_l1",
    ]
    assert msr.build_model("higher-order-rnn", vocab_size=V, embed_size=E, hidden_sizes=(4,)).core_name == "hornn"


def test_state_lags_shift_and_keep():
    """After a chunk of T >= N steps lag n is h_{T-n}; a chunk shorter than N shifts the old lags."""
    rng = np.random.default_rng(12)
    m = make(hidden=(4,), order=3)
    tok = rng.integers(0, V, (2, 5))
    st0 = random_state(m, rng, 2)
    _, st_all = m.forward(tok, st0)
    _, st_a = m.forward(tok[:, :2], st0)  # T = 2 < N = 3
    np.testing.assert_array_equal(st_a["h_l0_lag3"], st0["h_l0_lag1"])
    _, st_b = m.forward(tok[:, 2:], msr.models.base.KEEP)
    for k in st_all:
        np.testing.assert_allclose(st_b[k], st_all[k], rtol=1e-13, atol=1e-15)


def test_bad_options_refused():
    with pytest.raises(ValueError, match="order"):
        make(order=0)
    with pytest.raises(TypeError, match="order"):
        make(order=2.5)
    with pytest.raises(ValueError, match="pooling"):
        make(pooling="mean")
    with pytest.raises(ValueError, match="activation"):
        make(activation="softplus")
    for bad in (0.0, 1.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="alpha"):
            make(pooling="fofe", alpha=bad)
    with pytest.raises(ValueError, match="alpha applies to pooling='fofe' only"):
        make(pooling="max", alpha=0.5)
    with pytest.raises(TypeError, match="unexpected"):
        make(forgetting=0.5)
    assert make(pooling="fofe").config["alpha"] == 0.6


def test_bad_state_refused():
    m = make(hidden=(4,), order=2)
    tok = np.zeros((2, 3), dtype=np.int64)
    st = m.initial_state(2)
    with pytest.raises(ValueError, match="h_l0_lag2"):
        m.forward(tok, {"h_l0_lag1": st["h_l0_lag1"]})
    with pytest.raises(ValueError, match="h_l0_lag1"):
        m.forward(tok, {"h_l0_lag1": np.zeros((2, 5)), "h_l0_lag2": st["h_l0_lag2"]})
    m.reset_state(3)
    with pytest.raises(ValueError, match="batch size"):
        m.forward(tok, msr.models.base.KEEP)


@pytest.mark.parametrize("corpus", ["ptb", "text8"])
@pytest.mark.parametrize("pooling", POOLINGS)
def test_word_presets_build(pooling, corpus):
    from multiscale_rnn.models.hornn import LEARNING_RATE
    from multiscale_rnn.presets import get_preset

    s = get_preset(f"{corpus}-word-hornn-{pooling}")
    # the recipe's rate with momentum (docs/models/hornn.md): the paper's 0.5 with momentum 0.9 on the mean loss
    assert LEARNING_RATE == 0.5
    assert (s["optimizer"], s["lr"], s["momentum"], s["batch_size"], s["bptt"], s["clip_value"]) == (
        "sgd",
        0.5,
        0.9,
        20,
        30,
        5.0,
    )
    assert s["data"] == f"{corpus}-word" and s["hidden_sizes"] == ([400] if corpus == "ptb" else [500])
    assert s["lr_schedule"] == ("newbob" if corpus == "ptb" else "halve")
    if corpus == "text8":
        assert s["halve_after"] == 5
    assert (s["init_std"], s["weight_decay"], s["column_norm"], s["options"]["head"]) == (0.1, 1e-5, 4.0, "class")
    m = msr.build_model(
        s["model"], vocab_size=V, embed_size=4, hidden_sizes=[3], **s["options"], head_classes=[2, V - 2]
    )
    assert isinstance(m, HORNN) and m.config["order"] == 3 and m.config["pooling"] == pooling


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("pooling", ["gated", "fofe"])
def test_the_ptb_preset_trains_the_reproductions_model_with_its_recipe(tmp_path, pooling):
    """``--preset ptb-word-hornn-*`` (``presets.build``) gives the model, corpus order and Trainer of
    ``reproduce hornn-table2`` (``models.hornn.RECIPE``: the class softmax sized by the training counts, N(0, 0.1^2)
    initialisation, SGD with momentum and weight decay, clipping by value, column normalisation), parameter for
    parameter before and after three updates."""
    import random

    from multiscale_rnn.models.hornn import RECIPE
    from multiscale_rnn.reproduce.hornn import recipe_trainer, schedule

    rng = random.Random(0)
    words = [f"w{i}" for i in range(120)]
    for split, n in (("train", 400), ("valid", 40), ("test", 40)):
        lines = (" ".join(rng.choice(words[: rng.randint(3, 120)]) for _ in range(12)) for _ in range(n))
        (tmp_path / f"ptb.{split}.txt").write_text("\n".join(lines) + "\n")
    run = msr.presets.build(
        f"ptb-word-hornn-{pooling}", data_path=tmp_path, hidden_sizes=[16], embed_size=16, progress=False
    )
    corpus = msr.data.load("ptb-word", path=str(tmp_path)).by_frequency()
    assert run.corpus.vocab.itos == corpus.vocab.itos and (run.corpus.train == corpus.train).all()
    classes = msr.data.class_sizes(corpus.counts())
    kw = dict(order=3, pooling=pooling, activation="sigmoid", seed=0, head="class", head_classes=classes)
    model = msr.HORNN(corpus.vocab_size, 16, (16,), **kw)
    msr.init.gaussian(model, RECIPE["init_std"], rng=0)
    assert run.model.config["head_classes"] == classes and len(classes) > 1
    assert (run.model.flat_parameters() == model.flat_parameters()).all()
    trainer = recipe_trainer(model, RECIPE["lr"], schedule())
    for a, b in ((run.trainer, trainer), (run.trainer.optimizer, trainer.optimizer)):
        for name in ("batch_size", "bptt", "clip_norm", "clip_value", "lr", "momentum", "weight_decay"):
            assert getattr(a, name, None) == getattr(b, name, None), name
    assert run.trainer.constraint.max_norm == trainer.constraint.max_norm == RECIPE["column_norm"]
    run.trainer.fit(run.corpus.train, epochs=1, max_chunks=3)
    trainer.fit(corpus.train, epochs=1, max_chunks=3)
    assert trainer.step == run.trainer.step == 3
    assert (run.model.flat_parameters() == model.flat_parameters()).all()
