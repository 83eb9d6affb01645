"""FS-RNN, sequential- and stacked-LSTM: finite-difference gradients (float64, every option that
changes the math), parity with a PyTorch reference FS-LSTM, zoneout's evaluation-time expectation,
state across chunks, loss weights, record gradients, bad options."""

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn.analysis import by_step
from multiscale_rnn.reference import fs_rnn as reference
from multiscale_rnn.testing import (
    assert_runs_equal,
    check_model_gradients,
    numeric_gradient,
    relative_error,
    run_chunks,
)

V, E, HF, HS = 11, 5, 6, 4


def batch(rng, B=2, T=4):
    return rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))


def random_state(model, rng, B=2):
    return {k: rng.normal(scale=0.5, size=v.shape) for k, v in model.initial_state(B).items()}


def perturb(model, rng, scale=0.3):
    """Move every parameter off its initial value (gains 1, shifts 0), so every term is exercised."""
    for p in model.parameters().values():
        p += rng.normal(scale=scale, size=p.shape)


def assert_gradients(model, seed=0, T=4):
    rng = np.random.default_rng(seed)
    perturb(model, rng)
    tok, tgt = batch(rng, T=T)
    errors = check_model_gradients(model, tok, tgt, random_state(model, rng))
    assert set(errors) == set(model.parameters())
    worst = max(errors, key=errors.get)
    assert errors[worst] < 1e-6, (worst, errors[worst])


# ---- gradients -------------------------------------------------------------------------------

# layer_norm="cell" on GRU cells alone would be the model without layer norm, so it is not listed.
FS_CASES = [
    (c, s, ln)
    for c, s in (("lstm", "lstm"), ("gru", "gru"), ("gru", "lstm"))
    for ln in (True, False, "cell", "gates")
    if not (c == s == "gru" and ln == "cell")
]


@pytest.mark.parametrize("cell,slow_cell,layer_norm", FS_CASES)
def test_fs_rnn_gradients(cell, slow_cell, layer_norm):
    model = msr.FSRNN(V, E, HF, HS, cell=cell, slow_cell=slow_cell, layer_norm=layer_norm, dtype="float64", seed=1)
    assert_gradients(model)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("fast_cells", [2, 3])
def test_fs_rnn_gradients_with_zoneout_and_dropout(cell, fast_cells):
    zc = 0.4 if cell == "lstm" else 0.0
    model = msr.FSRNN(
        V,
        E,
        HF,
        HS,
        fast_cells=fast_cells,
        cell=cell,
        zoneout_c=zc,
        zoneout_h=0.3,
        dropout=0.25,
        dtype="float64",
        seed=2,
    )
    assert_gradients(model, seed=fast_cells)


@pytest.mark.parametrize("cls", [msr.StackedLSTM, msr.SequentialLSTM])
@pytest.mark.parametrize("cell,layer_norm", [("lstm", "cell"), ("lstm", True), ("lstm", False), ("gru", "gates")])
def test_stacked_and_sequential_gradients(cls, cell, layer_norm):
    model = cls(V, E, (HF, HF, HF), cell=cell, layer_norm=layer_norm, dtype="float64", seed=3)
    assert_gradients(model)


@pytest.mark.parametrize("cls", [msr.StackedLSTM, msr.SequentialLSTM])
def test_stacked_and_sequential_gradients_with_zoneout_and_dropout(cls):
    model = cls(V, E, (HF, HF), zoneout_c=0.5, zoneout_h=0.2, dropout=0.3, dtype="float64", seed=4)
    assert_gradients(model, seed=5)


def test_stacked_with_unequal_layers_gradients():
    model = msr.StackedLSTM(V, E, (7, 3), layer_norm=True, dropout=0.2, dtype="float64", seed=5)
    assert_gradients(model, seed=6)


# ---- the stepped stack equals the plain stack -------------------------------------------------


@pytest.mark.parametrize("cell,plain", [("lstm", msr.LSTM), ("gru", msr.GRU)])
def test_stacked_without_layer_norm_equals_plain_stack(cell, plain):
    rng = np.random.default_rng(7)
    ours = msr.StackedLSTM(V, E, (HF, HS), cell=cell, layer_norm=False, dtype="float64", seed=1)
    ref = plain(V, E, (HF, HS), dtype="float64", seed=2)
    assert set(ours.parameters()) == set(ref.parameters())
    ref.load_parameters(ours.parameters())
    tok, tgt = batch(rng, B=3, T=6)
    state = random_state(ref, rng, B=3)
    l1, g1, s1 = ours.loss_and_grad(tok, tgt, state)
    l2, g2, s2 = ref.loss_and_grad(tok, tgt, state)
    assert l1 == pytest.approx(l2, rel=1e-13)
    for k in g1:
        np.testing.assert_allclose(g1[k], g2[k], rtol=1e-11, atol=1e-13, err_msg=k)
    for k in s1:
        np.testing.assert_allclose(s1[k], s2[k], rtol=1e-12, atol=1e-14)


# ---- state, weights, record gradients ---------------------------------------------------------


@pytest.mark.parametrize(
    "cls,kw",
    [
        (msr.FSRNN, dict(fast_size=HF, slow_size=HS, fast_cells=3, zoneout_c=0.3, zoneout_h=0.1)),
        (msr.SequentialLSTM, dict(hidden_sizes=(HF, HF))),
        (msr.StackedLSTM, dict(hidden_sizes=(HF, HS), cell="gru")),
    ],
)
def test_state_carries_across_chunks(cls, kw):
    rng = np.random.default_rng(8)
    model = cls(V, E, dtype="float64", seed=1, **kw)
    perturb(model, rng)
    tok, _ = batch(rng, B=3, T=9)
    full, s_full = model.forward(tok)
    a, s = model.forward(tok[:, :4])
    b, s2 = model.forward(tok[:, 4:], s)
    np.testing.assert_allclose(np.concatenate([a, b], axis=1), full, rtol=1e-12, atol=1e-13)
    assert set(s2) == set(s_full)
    for k in s_full:
        np.testing.assert_allclose(s2[k], s_full[k], rtol=1e-12, atol=1e-13)


def test_state_names():
    assert set(msr.FSRNN(V, E, HF, HS).initial_state(2)) == {"h_fast", "c_fast", "h_slow", "c_slow"}
    assert set(msr.FSRNN(V, E, HF, HS, slow_cell="gru").initial_state(2)) == {"h_fast", "c_fast", "h_slow"}
    assert set(msr.SequentialLSTM(V, E, (HF, HF)).initial_state(2)) == {"h", "c"}
    assert set(msr.StackedLSTM(V, E, (HF, HS)).initial_state(2)) == {"h_l0", "c_l0", "h_l1", "c_l1"}


def test_f3_and_later_have_no_input_term():
    p = msr.FSRNN(V, E, HF, HS, fast_cells=4).parameters()
    assert p["weight_ih_f1"].shape == (4 * HF, E)
    assert p["weight_ih_f2"].shape == (4 * HF, HS)
    assert p["weight_ih_s"].shape == (4 * HS, HF)
    assert "weight_ih_f3" not in p and "weight_ih_f4" not in p
    assert "bias_ih_f1" not in p and p["ln_gates_weight_f1"].shape == (4 * HF,)


def test_paper_initialisation():
    model = msr.FSRNN(V, E, 8, 4, seed=3, dtype="float64")
    p = model.parameters()
    for name in ("weight_hh_f1", "weight_hh_s"):
        w = p[name]
        H = w.shape[1]
        for k in range(4):
            block = w[k * H : (k + 1) * H]
            np.testing.assert_allclose(block @ block.T, np.eye(H), atol=1e-12)
    np.testing.assert_array_equal(p["ln_gates_bias_f1"][8:16], 1.0)  # forget gate
    np.testing.assert_array_equal(p["ln_gates_bias_f1"][:8], 0.0)
    np.testing.assert_array_equal(p["ln_gates_weight_s"], 1.0)
    plain = msr.StackedLSTM(V, E, (8,), layer_norm=False, seed=3).parameters()
    np.testing.assert_array_equal(plain["bias_ih_l0"][8:16], 1.0)
    np.testing.assert_array_equal(plain["bias_hh_l0"], 0.0)


def test_loss_weights():
    rng = np.random.default_rng(9)
    model = msr.FSRNN(V, E, HF, HS, dtype="float64", seed=1)
    perturb(model, rng)
    tok, tgt = batch(rng, B=3, T=5)
    w = rng.uniform(0.0, 2.0, tok.shape)
    _, per_token, _ = model.loss(tok, tgt, per_token=True)
    loss, grads, _ = model.loss_and_grad(tok, tgt, weights=w)
    assert loss == pytest.approx((w * per_token).sum() / w.sum(), rel=1e-12)
    p = model.parameters()["weight_hh_s"]
    num = numeric_gradient(lambda: model.loss_and_grad(tok, tgt, weights=w)[0], p)
    assert relative_error(grads["weight_hh_s"], num) < 1e-7
    with pytest.raises(ValueError, match="weights"):
        model.loss_and_grad(tok, tgt, weights=w[:, :2])
    with pytest.raises(ValueError, match="non-negative"):
        model.loss_and_grad(tok, tgt, weights=-w)
    with pytest.raises(ValueError, match="all be zero"):
        model.loss_and_grad(tok, tgt, weights=0 * w)


def test_record_gradient_of_the_output_state_is_the_carried_state_gradient():
    """h_f2 (the output, no other reader in its step) after step 1: its record gradient equals the
    finite-difference gradient of the same loss w.r.t. h_fast carried into a later chunk."""
    rng = np.random.default_rng(10)
    model = msr.FSRNN(V, E, HF, HS, dtype="float64", seed=1)
    perturb(model, rng)
    tok, tgt = batch(rng, B=2, T=5)
    w = np.zeros(tok.shape)
    w[:, -1] = 1.0  # the loss of the last step alone
    model.loss_and_grad(tok, tgt, weights=w)
    g = by_step(model.record_gradients(), 2)["h_f2"][:, 1]  # (B, H): after step 1
    _, s1 = model.forward(tok[:, :2])
    x = s1["h_fast"]

    def later_loss():
        return model.loss_and_grad(tok[:, 2:], tgt[:, 2:], {**s1, "h_fast": x}, weights=w[:, 2:])[0]

    assert relative_error(g, numeric_gradient(later_loss, x)) < 1e-7


def test_records_shapes_and_staleness():
    rng = np.random.default_rng(11)
    model = msr.SequentialLSTM(V, E, (HF, HF, HF), dtype="float64")
    tok, tgt = batch(rng, B=2, T=3)
    model.forward(tok)
    rec = model.records()
    assert set(rec) == {f"{s}_l{i}" for s in "hc" for i in range(3)}
    assert rec["c_l0"].shape == (HF, 2 * 3)  # (rows, B*T), column t*B + b
    logits, state = model.forward(tok)
    np.testing.assert_array_equal(by_step(model.records(), 2)["h_l2"][:, -1], state["h"])
    with pytest.raises(ValueError, match="backward"):
        model.record_gradients()  # the last forward had no backward
    model.loss_and_grad(tok, tgt)
    assert model.record_gradients()["c_l1"].shape == (HF, 2 * 3)


# ---- zoneout ----------------------------------------------------------------------------------


def _one_step(model, tok, state, train):
    logits, new = model.forward(tok, state, train=train)
    return new


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_zoneout_training_keeps_or_updates_and_evaluation_takes_the_expectation(cell):
    rng = np.random.default_rng(12)
    zc, zh = (0.4, 0.25) if cell == "lstm" else (0.0, 0.25)
    kw = dict(cell=cell, layer_norm="gates", dtype="float64", seed=1)
    zoned = msr.StackedLSTM(V, E, (64,), zoneout_c=zc, zoneout_h=zh, **kw)
    plain = msr.StackedLSTM(V, E, (64,), **kw)
    perturb(zoned, rng)
    plain.load_parameters(zoned.parameters())
    B = 200
    tok = np.full((B, 1), 3)
    state = {k: np.repeat(rng.normal(size=(1, v.shape[1])), B, 0) for k, v in plain.initial_state(B).items()}
    new = _one_step(plain, tok, state, train=False)  # the update without zoneout
    ev = _one_step(zoned, tok, state, train=False)
    tr = _one_step(zoned, tok, state, train=True)
    for key, z in (("h_l0", zh), ("c_l0", zc)):
        if key not in new:
            continue
        # Evaluation: exactly the expected value (1 - z) * new + z * old.
        np.testing.assert_allclose(ev[key], (1 - z) * new[key] + z * state[key], rtol=1e-12, atol=1e-14)
        # Training: each unit either updated or kept, kept with probability z.
        updated = np.isclose(tr[key], new[key], rtol=0, atol=1e-13)
        kept = np.isclose(tr[key], state[key], rtol=0, atol=1e-13)
        assert np.all(updated | kept)
        frac = kept.mean()
        assert abs(frac - z) < 4 * np.sqrt(z * (1 - z) / kept.size) + 1e-12, (key, frac, z)


def test_training_masks_follow_the_seed():
    rng = np.random.default_rng(13)
    tok, tgt = batch(rng, B=3, T=6)
    runs = []
    for _ in range(2):
        m = msr.FSRNN(V, E, HF, HS, zoneout_c=0.5, zoneout_h=0.1, dropout=0.3, seed=42)
        runs.append(m.loss_and_grad(tok, tgt)[0])
    assert runs[0] == runs[1]
    m = msr.FSRNN(V, E, HF, HS, zoneout_c=0.5, zoneout_h=0.1, dropout=0.3, seed=43)
    assert m.loss_and_grad(tok, tgt)[0] != runs[0]


# ---- bad input --------------------------------------------------------------------------------


def test_bad_options():
    with pytest.raises(ValueError, match="fast_cells"):
        msr.FSRNN(V, E, HF, HS, fast_cells=1)
    with pytest.raises(ValueError, match="zoneout_h"):
        msr.FSRNN(V, E, HF, HS, zoneout_h=1.0)
    with pytest.raises(ValueError, match="zoneout_c"):
        msr.FSRNN(V, E, HF, HS, cell="gru", zoneout_c=0.2)
    with pytest.raises(ValueError, match="cell"):
        msr.FSRNN(V, E, HF, HS, cell="elman")
    with pytest.raises(ValueError, match="layer_norm"):
        msr.StackedLSTM(V, E, (HF,), layer_norm="both")
    with pytest.raises(ValueError, match="equal"):
        msr.SequentialLSTM(V, E, (HF, HS))
    with pytest.raises(ValueError, match="fast size, slow size"):
        msr.testing.core_model("fs_rnn", V, E, [HF, HS, 3], dtype="float32")
    with pytest.raises(ValueError, match="no option 'bogus'"):
        msr.testing.core_model("fs_rnn", V, E, [HF, HS], options={"bogus": 1.0}, dtype="float32")
    with pytest.raises(ValueError, match="layer_norm_cell"):
        msr.testing.core_model(
            "stacked_lstm", V, E, [HF], options={"cell": "gru", "layer_norm_cell": True}, dtype="float32"
        )
    with pytest.raises(ValueError, match="(?i)true or false"):
        msr.testing.core_model("fs_rnn", V, E, [HF, HS], options={"layer_norm_gates": 0.5}, dtype="float32")


def test_rebuild_from_config():
    model = msr.FSRNN(V, E, HF, HS, fast_cells=3, slow_cell="gru", zoneout_h=0.1, seed=4)
    cfg = dict(model.config)
    again = msr.MODELS[cfg.pop("model")](**cfg)
    assert again.config == model.config
    for k, v in model.parameters().items():
        np.testing.assert_array_equal(again.parameters()[k], v)


# ---- parity with a PyTorch reference FS-LSTM ----------------------------------------------------


@pytest.mark.parametrize("K,layer_norm", [(2, True), (4, True), (2, False), (3, "cell")])
def test_matches_torch_reference(K, layer_norm):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(14)
    ln_gates, ln_cell = {True: (True, True), False: (False, False), "cell": (False, True)}[layer_norm]
    ours = msr.FSRNN(V, E, HF, HS, fast_cells=K, layer_norm=layer_norm, dtype="float64", seed=1)
    perturb(ours, rng)
    tok, tgt = batch(rng, B=3, T=7)
    s_ours = None
    s_torch = {k: torch.zeros(v.shape, dtype=torch.float64) for k, v in ours.initial_state(3).items()}
    for chunk in (slice(0, 4), slice(4, 7)):
        P = {k: torch.tensor(np.array(v), requires_grad=True) for k, v in ours.parameters().items()}
        logits_t, s_new = reference.forward(
            P, torch.from_numpy(tok[:, chunk]), s_torch, fast_cells=K, ln_gates=ln_gates, ln_cell=ln_cell
        )
        loss_t = torch.nn.functional.cross_entropy(logits_t.reshape(-1, V), torch.from_numpy(tgt[:, chunk]).reshape(-1))
        loss_t.backward()
        logits, _ = ours.forward(tok[:, chunk], s_ours)
        loss, grads, s_ours = ours.loss_and_grad(tok[:, chunk], tgt[:, chunk], s_ours)
        np.testing.assert_allclose(logits, logits_t.detach().numpy(), rtol=1e-10, atol=1e-12)
        assert loss == pytest.approx(loss_t.item(), rel=1e-12)
        for k, g in grads.items():
            np.testing.assert_allclose(g, P[k].grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=k)
        s_torch = {k: v.detach() for k, v in s_new.items()}
        for k in s_ours:
            np.testing.assert_allclose(s_ours[k], s_torch[k].numpy(), rtol=1e-10, atol=1e-12)


def test_matches_torch_reference_with_evaluation_zoneout():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(15)
    ours = msr.FSRNN(V, E, HF, HS, fast_cells=3, zoneout_c=0.5, zoneout_h=0.1, dropout=0.35, dtype="float64", seed=1)
    perturb(ours, rng)
    tok, tgt = batch(rng, B=3, T=6)
    state = random_state(ours, rng, B=3)
    P = {k: torch.tensor(np.array(v)) for k, v in ours.parameters().items()}
    with torch.no_grad():
        logits_t, s_t = reference.forward(
            P, torch.from_numpy(tok), {k: torch.tensor(v) for k, v in state.items()}, **reference.options(ours)
        )  # evaluation: expected zoneout
    logits, s = ours.forward(tok, state)  # evaluation: no dropout, expected zoneout
    np.testing.assert_allclose(logits, logits_t.numpy(), rtol=1e-10, atol=1e-12)
    for k in s:
        np.testing.assert_allclose(s[k], s_t[k].numpy(), rtol=1e-10, atol=1e-12)


# ---- presets, learning-rate rules, checkpoints ---------------------------------------------------

TABLE3 = {  # name: (fast, slow, K, dropout, zoneout_c, zoneout_h, embed, bptt, lr, epochs)
    "ptb-char-fs-lstm-2": (700, 400, 2, 0.35, 0.5, 0.1, 128, 150, 2e-3, 200),
    "ptb-char-fs-lstm-4": (500, 400, 4, 0.35, 0.5, 0.1, 128, 150, 2e-3, 200),
    "enwik8-fs-lstm-2": (900, 1500, 2, 0.2, 0.3, 0.05, 256, 150, 1e-3, 35),
    "enwik8-fs-lstm-4": (730, 1500, 4, 0.2, 0.3, 0.05, 256, 150, 1e-3, 35),
    "enwik8-large-fs-lstm-4": (1200, 1500, 4, 0.25, 0.3, 0.05, 256, 100, 1e-3, 50),
}


@pytest.mark.parametrize("name", sorted(TABLE3))
def test_table3_presets_build_the_paper_models(name):
    from multiscale_rnn.cli import model_from_settings, resolve_settings
    from multiscale_rnn.command_line.build import build_lr_schedule

    fast, slow, K, p, zc, zh, embed, bptt, lr, epochs = TABLE3[name]
    s = resolve_settings(flags={"preset": name})
    assert (
        s["hidden_sizes"],
        s["options"]["fast_cells"],
        s["dropout"],
        s["embed_size"],
        s["bptt"],
        s["lr"],
        s["epochs"],
        s["batch_size"],
        s["clip_norm"],
    ) == ([fast, slow], K, p, embed, bptt, lr, epochs, 128, 1.0)
    assert (s["options"]["zoneout_c"], s["options"]["zoneout_h"], s["options"]["layer_norm"]) == (zc, zh, True)
    sched = build_lr_schedule(s)
    sched.start(lr)
    if name.startswith("ptb"):  # lr / 10 for the last 20 epochs
        lrs = [sched.next_lr(e, lr, 1.0) for e in range(epochs)]
        assert lrs[: epochs - 21] == [lr] * (epochs - 21) and lrs[epochs - 20 :] == [lr / 10] * 20
    else:  # lr / 10 after two epochs without improvement
        assert [sched.next_lr(e, lr, m) for e, m in enumerate([3.0, 2.0, 2.5, 2.1])][-1] == pytest.approx(lr / 10)
    small = dict(s, hidden_sizes=[12, 8], embed_size=6)  # the paper's sizes take long to initialise
    model = model_from_settings(small, vocab_size=20)
    assert isinstance(model, msr.FSRNN)
    assert model.config["fast_cells"] == K and model.config["zoneout_c"] == zc
    # the cells of the authors' code (docs/models/fs_rnn.md, "Readings")
    assert (model.config["layer_norm_eps"], model.config["bias_before_norm"], model.config["orthogonal_init"]) == (
        1e-3,
        True,
        "whole",
    )
    assert "bias_f1" in model.parameters()


def test_multistep_schedule():
    from multiscale_rnn.schedules import MultiStep, make_lr_schedule

    s = make_lr_schedule("multistep", milestones=[3, 5], factor=10)
    assert isinstance(s, MultiStep)
    s.start(1.0)
    assert [s.next_lr(e, None, None) for e in range(7)] == pytest.approx([1, 1, 1, 0.1, 0.1, 0.01, 0.01])
    again = MultiStep([3, 5], 10)
    again.load_state_dict(s.state_dict())
    assert again.next_lr(4, None, None) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="milestones"):
        MultiStep([0])


def test_command_line_trains_a_preset(tmp_path):
    from multiscale_rnn.cli import main

    out = tmp_path / "fs.npz"
    rc = main(
        [
            "train",
            "--preset",
            "ptb-char-fs-lstm-4",
            "--data",
            "embedded",
            "--hidden-sizes",
            "12,8",
            "--embed-size",
            "6",
            "--batch-size",
            "4",
            "--bptt",
            "10",
            "--max-chunks",
            "2",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert rc == 0 and out.exists()
    ck = msr.checkpoint.load(out)
    model = msr.build_model(ck.config["model"], **{k: v for k, v in ck.config.items() if k != "model"})
    assert isinstance(model, msr.FSRNN) and model.config["fast_cells"] == 4
    assert msr.build_model("fs-lstm", vocab_size=V, embed_size=E, hidden_sizes=(HF, HS)).config["model"] == "FSRNN"


def test_record_gradients_match_torch():
    """Every record gradient (h_t and c_t of every cell) equals PyTorch's gradient of the last
    step's loss with respect to the same tensor."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(16)
    ours = msr.FSRNN(V, E, HF, HS, fast_cells=3, dtype="float64", seed=1)
    perturb(ours, rng)
    tok, tgt = batch(rng, B=2, T=5)
    w = np.zeros(tok.shape)
    w[:, -1] = 1.0
    ours.loss_and_grad(tok, tgt, weights=w)
    got = by_step(ours.record_gradients(), 2)
    P = {k: torch.tensor(np.array(v), requires_grad=True) for k, v in ours.parameters().items()}
    keep = {}
    zero = {k: torch.zeros(v.shape, dtype=torch.float64) for k, v in ours.initial_state(2).items()}
    logits, _ = reference.forward(P, torch.from_numpy(tok), zero, fast_cells=3, keep=keep)
    torch.nn.functional.cross_entropy(logits[:, -1], torch.from_numpy(tgt[:, -1])).backward()
    assert set(got) == set(keep)
    for name, steps in keep.items():
        want = np.stack([v.grad.numpy() for v in steps], axis=1)  # (B, T, H)
        np.testing.assert_allclose(got[name], want, rtol=1e-9, atol=1e-13, err_msg=name)


def test_other_heads_and_encoders_gradients():
    """The FS cores under the gated output head and the linear encoder of real-valued inputs."""
    rng = np.random.default_rng(17)
    model = msr.FSRNN(V, E, HF, HS, head="gated", head_size=7, zoneout_h=0.2, dropout=0.1, dtype="float64", seed=3)
    assert_gradients(model, seed=18)
    model = msr.SequentialLSTM(V, E, (HF, HF), input_size=3, dtype="float64", seed=3)
    perturb(model, rng)
    x, tgt = rng.normal(size=(2, 4, 3)), rng.integers(0, V, (2, 4))
    errors = check_model_gradients(model, x, tgt)
    assert max(errors.values()) < 1e-6, errors


# ---- threaded, packed steps equal the plain reference steps -------------------------------------


def _fast_and_reference(make, B, T=5, chunks=2):
    """Logits, loss, gradients and carried state over `chunks` chunks, fast path then reference."""
    data = np.random.default_rng(7).integers(0, V, (B, chunks * T + 1))
    pieces = [(data[:, k * T : (k + 1) * T], data[:, k * T + 1 : (k + 1) * T + 1]) for k in range(chunks)]
    out = []
    try:
        for plain in (False, True):
            msr.set_reference_kernels(plain)
            model = make()  # same seed: the same weights and the same zoneout/dropout draws
            perturb(model, np.random.default_rng(3))
            out.append(run_chunks(model, pieces))
    finally:
        msr.set_reference_kernels(False)
    return out


FAST_CASES = [
    dict(cell="lstm", layer_norm=True, zoneout_c=0.5, zoneout_h=0.1, dropout=0.35),
    dict(cell="lstm", layer_norm=False),
    dict(cell="lstm", layer_norm="gates", fast_cells=3, zoneout_h=0.2, dropout=0.2),
    dict(cell="gru", layer_norm=True, zoneout_h=0.3, dropout=0.25),
    dict(cell="gru", slow_cell="lstm", layer_norm=False, fast_cells=3),
]


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("B,T", [(1, 5), (5, 5), (5, 2)])  # T = 2: threads without packed weights
@pytest.mark.parametrize("kw", FAST_CASES, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_fs_rnn_fast_equals_reference(threads, B, T, kw):
    msr.set_num_threads(threads)
    try:
        # sizes that leave partial panels and column blocks; B = 5 splits unevenly over 2 and 3 threads
        fast, ref = _fast_and_reference(lambda: msr.FSRNN(V, 7, 37, 19, dtype="float64", seed=11, **kw), B, T=T)
    finally:
        msr.set_num_threads(2)
    assert_runs_equal(fast, ref)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("T", [5, 2])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("cls", [msr.SequentialLSTM, msr.StackedLSTM])
def test_sequential_and_stacked_fast_equal_reference(cls, cell, T, threads):
    msr.set_num_threads(threads)
    try:
        fast, ref = _fast_and_reference(
            lambda: cls(
                V, 7, (13, 13), cell=cell, layer_norm=True, zoneout_h=0.2, dropout=0.2, dtype="float64", seed=4
            ),
            B=5,
            T=T,
        )
    finally:
        msr.set_num_threads(2)
    assert_runs_equal(fast, ref)
