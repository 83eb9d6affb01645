"""The word-level training recipe of the HORNN paper as Trainer options: SGD with momentum and
weight decay, learning rate halving, Gaussian init, clipping by value, column normalisation."""

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn import init, optim, schedules


def column_norms(w, unit=0):
    rows = w.shape[0]
    block = unit or rows
    return np.sqrt((w.reshape(rows // block, block, -1) ** 2).sum(axis=1))  # (blocks, cols)


def test_column_norm_caps_columns_per_gate_block_and_leaves_the_rest():
    rng = np.random.default_rng(0)
    model = msr.LSTM(vocab_size=13, embed_size=6, hidden_sizes=(5, 4), dtype="float64")
    init.gaussian(model, 0.8, rng=rng)
    before = {k: v.copy() for k, v in model.parameters().items()}
    roles = model.parameter_roles()
    cap = 1.0
    optim.ColumnNorm(cap)(model)
    after = model.parameters()
    capped = 0
    for name, w in after.items():
        r = roles[name]
        if r.kind in ("recurrent", "input"):
            assert r.unit > 0 and w.shape[0] == 4 * r.unit
            n0, n1 = column_norms(before[name], r.unit), column_norms(w, r.unit)
            np.testing.assert_allclose(n1, np.minimum(n0, cap), rtol=1e-12)
            # each block column is scaled, not changed in direction
            blocks0 = before[name].reshape(4, r.unit, -1)
            np.testing.assert_allclose(
                w.reshape(4, r.unit, -1), blocks0 * (np.minimum(n0, cap) / n0)[:, None, :], rtol=1e-12
            )
            capped += int((n0 > cap).sum())
        else:
            np.testing.assert_array_equal(w, before[name], err_msg=name)
    assert capped > 10  # the test exercised the cap


def test_column_norm_embedding_caps_word_vectors_and_names_narrow():
    rng = np.random.default_rng(1)
    model = msr.ElmanRNN(vocab_size=9, embed_size=4, hidden_sizes=(5,), dtype="float64")
    init.gaussian(model, 1.0, rng=rng)
    before = {k: v.copy() for k, v in model.parameters().items()}
    optim.ColumnNorm(0.5, kinds="embedding")(model)
    emb = model.parameters()["embedding.weight"]  # (V, E): row v is the math's column, word v's vector
    np.testing.assert_allclose(
        np.linalg.norm(emb, axis=1), np.minimum(np.linalg.norm(before["embedding.weight"], axis=1), 0.5), rtol=1e-12
    )
    optim.ColumnNorm(0.5, names="weight_hh*")(model)
    p = model.parameters()
    np.testing.assert_array_equal(p["weight_ih_l0"], before["weight_ih_l0"])
    assert np.linalg.norm(p["weight_hh_l0"], axis=0).max() <= 0.5 + 1e-12


def test_column_norm_norms_are_the_capped_columns_per_block():
    rng = np.random.default_rng(3)
    model = msr.HORNN(vocab_size=11, embed_size=5, hidden_sizes=(6,), order=3, pooling="gated", dtype="float64")
    init.gaussian(model, 0.9, rng=rng)
    cap = optim.ColumnNorm(1.0)
    roles, params = model.parameter_roles(), model.parameters()
    before = cap.norms(model)
    assert set(before) == {n for n, r in roles.items() if r.kind in ("recurrent", "input") and params[n].ndim == 2}
    assert before["weight_hh_l0"].shape == (3, 6)  # block n-1 is W_hn: lag n's column j
    assert before["weight_ih_l0"].shape == (1, 5)  # (H, E): no gate blocks, one column per input unit
    for name, n in before.items():
        np.testing.assert_allclose(n, column_norms(params[name], roles[name].unit), rtol=1e-12, err_msg=name)
    assert (before["weight_hh_l0"] > 1.0).sum() > 5  # the cap below binds
    cap(model)
    after = cap.norms(model)
    for name in before:
        np.testing.assert_allclose(after[name], np.minimum(before[name], 1.0), rtol=1e-12, err_msg=name)
    emb = optim.ColumnNorm(1.0, kinds="embedding").norms(model)["embedding.weight"]  # (V, E) storage: rows
    np.testing.assert_allclose(emb, np.linalg.norm(params["embedding.weight"], axis=1)[None, :], rtol=1e-12)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(max_norm=0), "max_norm"),
        (dict(max_norm=float("nan")), "max_norm"),
        (dict(kinds=("gates",)), "no parameter has role kind"),
        (dict(names="nothing*"), "no matrix"),
    ],
)
def test_column_norm_refuses_bad_arguments(kwargs, match):
    model = msr.ElmanRNN(vocab_size=9, embed_size=4, hidden_sizes=(5,))
    with pytest.raises(ValueError, match=match):
        optim.ColumnNorm(**kwargs)(model)


def test_trainer_runs_the_constraint_after_every_step():
    rng = np.random.default_rng(2)
    ids = rng.integers(0, 20, 2000)
    model = msr.ElmanRNN(
        vocab_size=20,
        embed_size=8,
        hidden_sizes=(16,),
        head="class",
        head_classes=msr.data.class_sizes(np.sort(np.bincount(ids, minlength=20))[::-1]),
        seed=1,
    )
    init.gaussian(model, 0.1, rng=0)
    calls = []
    cap = optim.ColumnNorm(0.3)

    def constraint(m):
        calls.append(1)
        cap(m)

    trainer = msr.Trainer(
        model,
        optim.SGD(0.5, momentum=0.9, weight_decay=1e-5),
        clip_value=5.0,
        batch_size=4,
        bptt=10,
        progress=False,
        constraint=constraint,
        lr_schedule=schedules.ReduceOnPlateau(2.0),
    )
    trainer.fit(ids, epochs=1, max_chunks=7)
    assert len(calls) == 7
    p = model.parameters()
    for name in ("weight_ih_l0", "weight_hh_l0"):
        assert np.linalg.norm(p[name], axis=0).max() <= 0.3 + 1e-6
    with pytest.raises(TypeError, match="constraint"):
        msr.Trainer(model, constraint=0.3)


def test_learning_rate_rules_of_the_recipe():
    # PTB: halve at the end of an epoch when the validation cross-entropy did not decrease.
    s = schedules.ReduceOnPlateau(factor=2.0, patience=0)
    s.start(0.5)
    lrs, lr = [], 0.5
    for epoch, valid in enumerate([5.0, 4.8, 4.9, 4.7, 4.7], start=1):
        lr = s.next_lr(epoch, lr, valid)
        lrs.append(lr)
    assert lrs == [0.5, 0.5, 0.25, 0.25, 0.125]
    # text8: 5 epochs at 0.5, then halved at the end of every epoch.
    h = schedules.HalveAfter(5)
    h.start(0.5)
    assert [h.next_lr(e, None, None) for e in range(1, 9)] == [0.5] * 4 + [0.25, 0.125, 0.0625, 0.03125]


def test_gaussian_init_std():
    model = msr.LSTM(vocab_size=50, embed_size=40, hidden_sizes=(60,))
    init.gaussian(model, 0.1, rng=3)
    flat = np.concatenate([p.ravel() for p in model.parameters().values()])
    assert abs(flat.std() - 0.1) < 0.002 and abs(flat.mean()) < 0.002
