"""The FS-RNN authors' code's readings as options (docs/models/fs_rnn.md, "Readings"): the layer-norm
epsilon (`layer_norm_eps`), a trainable bias before each gate's layer norm (`bias_before_norm`) and
orthogonal initialisation of whole matrices (`orthogonal_init="whole"`). Finite differences in
float64, parity with the PyTorch reference over two chunks, the fast steps equal the plain ones,
the initialisation, bad options."""

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn.reference import fs_rnn as reference
from multiscale_rnn.testing import assert_runs_equal, check_model_gradients, run_chunks

V, E, HF, HS = 11, 5, 6, 4
OFFICIAL = dict(layer_norm_eps=1e-3, bias_before_norm=True, orthogonal_init="whole")


def perturb(model, rng, scale=0.3):
    for p in model.parameters().values():
        p += rng.normal(scale=scale, size=p.shape)


def assert_gradients(model, seed):
    rng = np.random.default_rng(seed)
    perturb(model, rng)
    tok, tgt = rng.integers(0, V, (2, 4)), rng.integers(0, V, (2, 4))
    state = {k: rng.normal(scale=0.5, size=v.shape) for k, v in model.initial_state(2).items()}
    errors = check_model_gradients(model, tok, tgt, state)
    assert set(errors) == set(model.parameters())
    worst = max(errors, key=errors.get)
    assert errors[worst] < 1e-6, (worst, errors[worst])


# ---- gradients -------------------------------------------------------------------------------


@pytest.mark.parametrize("cell,slow_cell,layer_norm,fast_cells", [("lstm", "lstm", True, 2), ("gru", "lstm", True, 3)])
def test_fs_rnn_gradients_official_reading(cell, slow_cell, layer_norm, fast_cells):
    zc = 0.3 if "lstm" in (cell, slow_cell) else 0.0
    model = msr.FSRNN(
        V,
        E,
        HF,
        HS,
        cell=cell,
        slow_cell=slow_cell,
        layer_norm=layer_norm,
        fast_cells=fast_cells,
        zoneout_c=zc,
        zoneout_h=0.2,
        dropout=0.2,
        dtype="float64",
        seed=1,
        **OFFICIAL,
    )
    assert "bias_f1" in model.parameters() and "bias_s" in model.parameters()
    assert model.parameter_roles()["bias_f1"].kind == "bias"
    assert_gradients(model, seed=fast_cells)


@pytest.mark.parametrize("cls,cell", [(msr.StackedLSTM, "lstm"), (msr.SequentialLSTM, "gru")])
def test_stacked_and_sequential_gradients_official_reading(cls, cell):
    model = cls(
        V,
        E,
        (HF, HF),
        cell=cell,
        layer_norm=True if cell == "lstm" else "gates",
        dropout=0.2,
        zoneout_h=0.1,
        dtype="float64",
        seed=2,
        **OFFICIAL,
    )
    assert "bias_l0" in model.parameters() and "bias_l1" in model.parameters()
    assert_gradients(model, seed=7)


def test_epsilon_changes_the_loss_near_a_zero_state():
    """The epsilon matters where a gate block's variance is small: a zero state and zero weights,
    only the bias before the norm (std 1e-2, variance 1e-4) left. The two epsilons' losses differ
    by about 0.04 nats. (Gradients with epsilon 1e-3 are checked above.)"""
    losses = {}
    for eps in (1e-3, 1e-5):
        model = msr.FSRNN(V, E, HF, HS, layer_norm_eps=eps, bias_before_norm=True, dtype="float64", seed=3)
        rng = np.random.default_rng(4)
        for name, p in model.parameters().items():
            if name.startswith(("weight_ih", "weight_hh")):
                p[...] = 0.0
            elif name.startswith("bias_"):
                p[...] = rng.normal(scale=1e-2, size=p.shape)
        tok, tgt = rng.integers(0, V, (2, 4)), rng.integers(0, V, (2, 4))
        losses[eps] = float(model.loss(tok, tgt)[0])
    assert abs(losses[1e-5] - losses[1e-3]) > 1e-2, losses


# ---- parity with the PyTorch reference over two chunks ------------------------------------------


@pytest.mark.parametrize("K,layer_norm,eps", [(2, True, 1e-3), (3, "gates", 0.05)])
def test_matches_torch_reference_official_reading(K, layer_norm, eps):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(21)
    ours = msr.FSRNN(
        V,
        E,
        HF,
        HS,
        fast_cells=K,
        layer_norm=layer_norm,
        layer_norm_eps=eps,
        bias_before_norm=True,
        orthogonal_init="whole",
        dtype="float64",
        seed=1,
    )
    perturb(ours, rng)
    opts = reference.options(ours)
    assert opts["eps"] == eps and opts["bias_before_norm"] is True
    tok, tgt = rng.integers(0, V, (3, 7)), rng.integers(0, V, (3, 7))
    s_ours = None
    s_torch = {k: torch.zeros(v.shape, dtype=torch.float64) for k, v in ours.initial_state(3).items()}
    for chunk in (slice(0, 4), slice(4, 7)):
        P = {k: torch.tensor(np.array(v), requires_grad=True) for k, v in ours.parameters().items()}
        logits_t, s_new = reference.forward(P, torch.from_numpy(tok[:, chunk]), s_torch, **opts)
        loss_t = torch.nn.functional.cross_entropy(logits_t.reshape(-1, V), torch.from_numpy(tgt[:, chunk]).reshape(-1))
        loss_t.backward()
        logits, _ = ours.forward(tok[:, chunk], s_ours)
        loss, grads, s_ours = ours.loss_and_grad(tok[:, chunk], tgt[:, chunk], s_ours)
        np.testing.assert_allclose(logits, logits_t.detach().numpy(), rtol=1e-10, atol=1e-12)
        assert loss == pytest.approx(loss_t.item(), rel=1e-12)
        assert P["bias_f1"].grad.abs().sum() > 0
        for k, g in grads.items():
            np.testing.assert_allclose(g, P[k].grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=k)
        s_torch = {k: v.detach() for k, v in s_new.items()}
        for k in s_ours:
            np.testing.assert_allclose(s_ours[k], s_torch[k].numpy(), rtol=1e-10, atol=1e-12)
        # the reference with the other epsilon or without the bias computes something else
        with torch.no_grad():
            other, _ = reference.forward(P, torch.from_numpy(tok[:, chunk]), s_torch, **dict(opts, eps=1e-5))
            nobias, _ = reference.forward(
                P, torch.from_numpy(tok[:, chunk]), s_torch, **dict(opts, bias_before_norm=False)
            )
        assert not np.allclose(other.numpy(), logits_t.detach().numpy(), rtol=1e-6, atol=1e-8)
        assert not np.allclose(nobias.numpy(), logits_t.detach().numpy(), rtol=1e-6, atol=1e-8)


# ---- threaded, packed steps equal the plain ones ----------------------------------------------


@pytest.mark.parametrize("cell,threads", [("lstm", 2), ("gru", 1)])
def test_fast_steps_equal_reference_kernels(cell, threads):
    data = np.random.default_rng(7).integers(0, V, (5, 11))
    pieces = [(data[:, k * 5 : (k + 1) * 5], data[:, k * 5 + 1 : (k + 1) * 5 + 1]) for k in range(2)]
    out = []
    msr.set_num_threads(threads)
    try:
        for plain in (False, True):
            msr.set_reference_kernels(plain)
            model = msr.FSRNN(V, 7, 37, 19, cell=cell, zoneout_h=0.2, dropout=0.2, dtype="float64", seed=11, **OFFICIAL)
            perturb(model, np.random.default_rng(3))
            out.append(run_chunks(model, pieces))
    finally:
        msr.set_reference_kernels(False)
        msr.set_num_threads(2)
    assert_runs_equal(*out)


# ---- initialisation ---------------------------------------------------------------------------


def _orthonormal(w):
    """Orthonormal columns (tall or square) or rows (wide)."""
    m = w.T @ w if w.shape[0] >= w.shape[1] else w @ w.T
    return np.allclose(m, np.eye(m.shape[0]), atol=1e-12)


def test_whole_matrix_orthogonal_initialisation():
    model = msr.FSRNN(V, 3, 8, 4, fast_cells=3, seed=5, dtype="float64", **OFFICIAL)
    p = model.parameters()
    mats = [n for n in p if n.startswith(("weight_ih", "weight_hh"))]
    assert len(mats) == 7  # ih and hh of F1, F2, S; hh of F3
    for name in mats:
        w = p[name]
        assert _orthonormal(w), name
        H = model.parameter_roles()[name].unit
        if w.shape[1] <= H:  # a whole (4H, cols) matrix with orthonormal columns: its blocks are not
            assert not _orthonormal(w[:H]), name
    # weight_ih_f1 (32, 3) and weight_ih_s (16, 8): tall, orthonormal columns; weight_hh_s (16, 4) too
    assert p["weight_ih_f1"].shape == (32, 3) and p["weight_ih_s"].shape == (16, 8)
    # the bias before the gate norm starts at 0; the forget bias 1 sits on the shift after the norm
    for sfx in ("_f1", "_f2", "_f3", "_s"):
        np.testing.assert_array_equal(p["bias" + sfx], 0.0)
        H = p["weight_hh" + sfx].shape[1]
        np.testing.assert_array_equal(p["ln_gates_bias" + sfx][H : 2 * H], 1.0)
        np.testing.assert_array_equal(np.delete(p["ln_gates_bias" + sfx], np.s_[H : 2 * H]), 0.0)
        np.testing.assert_array_equal(p["ln_gates_weight" + sfx], 1.0)
    blocks = msr.FSRNN(V, 3, 8, 4, seed=5, dtype="float64", bias_before_norm=True).parameters()
    for k in range(4):
        assert _orthonormal(blocks["weight_hh_f1"][8 * k : 8 * (k + 1)])
    assert not _orthonormal(blocks["weight_hh_f1"])


def test_forget_bias_prefers_the_shift_only_when_asked():
    from multiscale_rnn import init

    model = msr.StackedLSTM(V, E, (HF,), layer_norm=True, bias_before_norm=True, dtype="float64", seed=1)
    p = model.parameters()
    for name in ("bias_l0", "ln_gates_bias_l0"):
        p[name][...] = 0.0
    init.forget_bias(model, 2.0)  # the default: the bias
    assert (p["bias_l0"][HF : 2 * HF] == 2.0).all() and (p["ln_gates_bias_l0"] == 0.0).all()
    p["bias_l0"][...] = 0.0
    init.forget_bias(model, 2.0, prefer="shift")
    assert (p["ln_gates_bias_l0"][HF : 2 * HF] == 2.0).all() and (p["bias_l0"] == 0.0).all()
    plain = msr.StackedLSTM(V, E, (HF,), layer_norm="cell", dtype="float64", seed=1)
    init.forget_bias(plain, 3.0, prefer="shift")  # no gate shift: the bias takes it
    assert (plain.parameters()["bias_ih_l0"][HF : 2 * HF] == 3.0).all()
    with pytest.raises(ValueError, match="prefer"):
        init.forget_bias(model, 1.0, prefer="gain")


# ---- defaults, presets, bad options -----------------------------------------------------------


def test_defaults_keep_the_earlier_reading():
    model = msr.FSRNN(V, E, HF, HS, seed=1)
    assert model.config["layer_norm_eps"] == 1e-5 and model.config["bias_before_norm"] is False
    assert model.config["orthogonal_init"] == "blocks"
    assert not any(n.startswith("bias_") for n in model.parameters())
    cfg = {k: v for k, v in model.config.items() if k not in ("model", *OFFICIAL)}  # a config saved before
    again = msr.FSRNN(**cfg)
    for k, v in model.parameters().items():
        np.testing.assert_array_equal(again.parameters()[k], v)
    official = msr.FSRNN(V, E, HF, HS, seed=1, **OFFICIAL)
    rebuilt = msr.MODELS["FSRNN"](**{k: v for k, v in official.config.items() if k != "model"})
    assert rebuilt.config == official.config and "bias_f1" in rebuilt.parameters()


def test_bad_options():
    with pytest.raises(ValueError, match="bias_before_norm"):
        msr.FSRNN(V, E, HF, HS, layer_norm="cell", bias_before_norm=True)
    with pytest.raises(ValueError, match="bias_before_norm"):
        msr.StackedLSTM(V, E, (HF,), bias_before_norm=True)  # default layer_norm="cell"
    with pytest.raises(ValueError, match="layer_norm_eps"):
        msr.FSRNN(V, E, HF, HS, layer_norm_eps=0.0)
    with pytest.raises(ValueError, match="layer_norm_eps"):
        msr.FSRNN(V, E, HF, HS, layer_norm_eps=float("nan"))
    with pytest.raises(ValueError, match="orthogonal_init"):
        msr.FSRNN(V, E, HF, HS, orthogonal_init="rows")
    with pytest.raises(ValueError, match="bias_before_norm"):
        msr.testing.core_model(
            "fs_rnn", V, E, [HF, HS], options={"layer_norm_gates": 0, "bias_before_norm": 1}, dtype="float32"
        )
    with pytest.raises(ValueError, match="layer_norm_eps"):
        msr.testing.core_model("stacked_lstm", V, E, [HF], options={"layer_norm_eps": -1.0}, dtype="float32")
