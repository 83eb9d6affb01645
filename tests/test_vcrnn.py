"""VCRNN and VCGRU: finite-difference gradients, m forced to 1 recovers the Elman RNN / reset-before GRU,
parity with the PyTorch reference for every option, the penalty, skipping == masking, traces,
and bad input."""

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn.models.vcrnn import VCTrace, corpus_equivalent_dim, equivalent_dim, sharpness_schedule
from multiscale_rnn.testing import assert_runs_equal, numeric_gradient, run_chunks

V, D, B, T = 7, 8, 3, 5
UNITS = [msr.VCRNN, msr.VCGRU]


def make(cls, seed=0, scale=0.6, sched_bias=0.0, **kw):
    """A float64 model with N(0, scale^2) weights; the scheduler bias shifts m_t (0 gives m ~ 0.5)."""
    kw.setdefault("block", 2)
    m = cls(V, hidden_sizes=(D,), dtype="float64", seed=seed, **kw)
    rng = np.random.default_rng(seed)
    for name, p in m.parameters().items():
        p[...] = rng.normal(0.0, scale, p.shape)
    m.parameters()["sched_bias_l0"][...] = sched_bias
    return m


def data(seed, steps=T, batch=B):
    rng = np.random.default_rng(seed)
    return rng.integers(0, V, (batch, steps)), rng.integers(0, V, (batch, steps))


def random_state(seed, batch=B):
    return {"h_l0": np.random.default_rng(seed).normal(0, 0.5, (batch, D))}


def fd_error(m, tok, tgt, st, n=120, eps=1e-6, seed=0):
    """Relative error of loss_and_grad's gradient of the objective (cross-entropy + vc_penalty)
    against central differences, on n random entries of the flat parameters."""
    m.loss_and_grad(tok, tgt, st, copy_grads=False)
    flat = m.flat_parameters()
    grad = m.flat_gradients().copy()
    idx = np.random.default_rng(seed).choice(len(flat), min(n, len(flat)), replace=False)
    fd = numeric_gradient(lambda: m.loss_and_grad(tok, tgt, st, copy_grads=False)[0].total, flat, eps, idx)
    an = grad[idx]
    assert np.linalg.norm(an) > 0
    return np.linalg.norm(fd - an) / (np.linalg.norm(fd) + np.linalg.norm(an))


# ---- gradients ----------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", UNITS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("lam", [0.1, 1.0, 10.0])
@pytest.mark.parametrize("eps", [0.01, 0.1, 0.3])
def test_gradients_match_finite_differences(cls, lam, eps):
    # m ~ 0.5 puts m_t D near the integer 4; two chunks with the state carried; the penalty is on.
    m = make(cls, seed=1, scale=0.4, sharpness=lam, eps=eps, penalty_weight=0.3, target=0.4)
    tok, tgt = data(2, steps=6)
    st = random_state(3)
    _, _, st1 = m.loss_and_grad(tok[:, :3], tgt[:, :3], st)
    assert fd_error(m, tok[:, :3], tgt[:, :3], st) < 1e-6
    assert fd_error(m, tok[:, 3:], tgt[:, 3:], st1, seed=1) < 1e-6
    e = m.records()["e"]
    if lam == 10.0:  # thresholds really active: units clamped to 0 and to 1
        assert (e == 0).any() and (e == 1).any()
    if lam == 1.0 and eps >= 0.1:
        assert ((e == 0) | (e == 1)).any()


@pytest.mark.parametrize("cls", UNITS, ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    "opts",
    [
        {"mask_index": "one"},
        {"penalty": "one_sided"},
        {"penalty": "l2"},
        {"skip": False},
        {"penalty_scope": "batch"},
        {"penalty_scope": "batch", "penalty": "l2", "target": 0.45},
    ],
    ids=str,
)
def test_gradients_match_finite_differences_options(cls, opts):
    m = make(cls, seed=4, scale=0.4, sharpness=2.0, eps=0.05, penalty_weight=0.5, **opts)
    tok, tgt = data(5, steps=4)
    assert fd_error(m, tok, tgt, random_state(6)) < 1e-6


# ---- m forced to 1 ------------------------------------------------------------------------------


def test_vcrnn_with_m_one_is_the_elman_rnn():
    vc = make(msr.VCRNN, seed=7, sched_bias=60.0, sharpness=50.0)
    el = msr.ElmanRNN(V, D, (D,), dtype="float64")
    p, q = vc.parameters(), el.parameters()
    for name in ("embedding.weight", "decoder.weight", "decoder.bias", "weight_ih_l0", "weight_hh_l0"):
        q[name][...] = p[name]
    q["bias_ih_l0"][...] = p["bias_l0"]
    q["bias_hh_l0"][...] = 0.0
    tok, tgt = data(8)
    st = random_state(9)
    lv, gv, sv = vc.loss_and_grad(tok, tgt, st)
    le, ge, se = el.loss_and_grad(tok, tgt, st)
    assert (vc.records()["e"] == 1).all() and (vc.records()["d"] == D).all()
    assert float(lv) == pytest.approx(float(le), rel=1e-13)
    np.testing.assert_allclose(sv["h_l0"], se["h_l0"], rtol=1e-13, atol=1e-14)
    for name in ("embedding.weight", "decoder.weight", "weight_ih_l0", "weight_hh_l0"):
        np.testing.assert_allclose(gv[name], ge[name], rtol=1e-11, atol=1e-14, err_msg=name)
    np.testing.assert_allclose(gv["bias_l0"], ge["bias_ih_l0"], rtol=1e-11, atol=1e-14)
    assert np.abs(gv["sched_weight_hh_l0"]).max() == 0.0  # m = 1 and every e clamped: no gradient


def test_vcgru_with_m_one_is_the_reset_before_gru():
    torch = pytest.importorskip("torch")
    from multiscale_rnn.reference import vcrnn as ref

    vc = make(msr.VCGRU, seed=10, sched_bias=60.0, sharpness=50.0)
    tok, tgt = data(11)
    st = random_state(12)
    logits, new = vc.forward(tok, st)
    P = ref.tensors(vc.parameters(), torch.float64)
    z, s = ref.gru_reset_before(P, torch.as_tensor(tok), {"h_l0": torch.tensor(st["h_l0"])})
    np.testing.assert_allclose(logits, z.numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(new["h_l0"], s["h_l0"].numpy(), rtol=1e-12, atol=1e-13)
    # PyTorch's GRU resets after the product, so it differs (the test above can tell them apart)
    g = torch.nn.GRU(D, D, batch_first=True).double()
    with torch.no_grad():
        p = vc.parameters()
        g.weight_ih_l0.copy_(torch.tensor(p["weight_ih_l0"]))
        g.weight_hh_l0.copy_(torch.tensor(p["weight_hh_l0"]))
        g.bias_ih_l0.copy_(torch.tensor(p["bias_l0"]))
        g.bias_hh_l0.zero_()
        y, _ = g(P["embedding.weight"][torch.as_tensor(tok)], torch.tensor(st["h_l0"])[None])
    assert np.abs(y[:, -1].numpy() - new["h_l0"]).max() > 1e-6


def test_literal_mask_index_leaves_last_unit_half_updated():
    m = make(msr.VCRNN, sched_bias=60.0, sharpness=50.0, mask_index="one")
    m.forward(data(0)[0])
    e = m.records()["e"]
    assert (e[: D - 1] == 1).all()
    np.testing.assert_allclose(e[D - 1], 0.5)


# ---- parity with the PyTorch reference ----------------------------------------------------------

PARITY = [
    {},
    {"mask_index": "one"},
    {"penalty": "one_sided", "target": 0.45},
    {"penalty": "l2"},
    {"skip": False},
    {"eps": 0.2},
    {"sharpness": 0.1},
    {"sharpness": 10.0, "block": 1},
    {"block": 3, "penalty_weight": 0.0},
    {"penalty_scope": "batch", "target": 0.45},
    {"penalty_scope": "batch", "penalty": "one_sided", "target": 0.2},
]


@pytest.mark.parametrize("cls", UNITS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("opts", PARITY, ids=str)
def test_matches_reference(cls, opts):
    pytest.importorskip("torch")
    from multiscale_rnn.reference import vcrnn as ref

    opts = dict({"sharpness": 2.0, "eps": 0.05, "penalty_weight": 0.2}, **opts)
    m = make(cls, seed=13, **opts)
    tok, tgt = data(14, steps=6)
    st = random_state(15)
    for chunk in (slice(0, 3), slice(3, 6)):
        loss, grads, new = m.loss_and_grad(tok[:, chunk], tgt[:, chunk], st)
        rloss, rgrads, rnew = ref.loss_and_grad(m, tok[:, chunk], tgt[:, chunk], st)
        assert float(loss) == pytest.approx(float(rloss), rel=1e-12)
        assert loss.aux["vc_penalty"] == pytest.approx(rloss.aux["vc_penalty"], rel=1e-12, abs=1e-15)
        for name, g in rgrads.items():
            np.testing.assert_allclose(grads[name], g, rtol=1e-9, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(new["h_l0"], rnew["h_l0"], rtol=1e-12, atol=1e-13)
        st = new


# ---- the penalty --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["l1", "one_sided", "l2"])
def test_penalty_value_and_gradient(kind):
    # One step: m_n = sigm(u . h_0 + v . x + b_m) depends on b_m only directly, so
    # d vc_penalty / d b_m = w / N sum_n f'(m_n - m_bar) m_n (1 - m_n).
    w, target = 0.7, 0.67
    f = {
        "l1": (np.abs, np.sign),
        "one_sided": (lambda x: np.maximum(x, 0), lambda x: (x > 0) * 1.0),
        "l2": (np.square, lambda x: 2 * x),
    }[kind]
    tok, tgt = data(16, steps=1, batch=6)
    st = random_state(17, batch=6)
    grads = {}
    for weight in (w, 0.0):
        m = make(msr.VCRNN, seed=18, penalty=kind, penalty_weight=weight, target=target)
        loss, grads[weight], _ = m.loss_and_grad(tok, tgt, st)
        mm = m.records()["m"][0]
        assert len(mm) == 6 and (mm > target).any() and (mm < target).any()
        assert loss.aux["vc_penalty"] == pytest.approx(weight * f[0](mm - target).mean(), rel=1e-12, abs=0)
        assert loss.total == pytest.approx(float(loss) + loss.aux["vc_penalty"], rel=1e-14)
    expect = w / 6 * (f[1](mm - target) * mm * (1 - mm)).sum()
    got = grads[w]["sched_bias_l0"] - grads[0.0]["sched_bias_l0"]
    assert got[0] == pytest.approx(expect, rel=1e-10)
    assert abs(expect) > 1e-3
    m = make(msr.VCRNN, seed=18, penalty=kind, penalty_weight=w)
    assert m.loss(tok, tgt, st)[0] == pytest.approx(float(loss), rel=1e-12)  # evaluation: no penalty


@pytest.mark.parametrize("kind", ["l1", "l2"])
def test_batch_scope_penalises_the_mean_m_and_reads_it_from_the_reducer(kind):
    # penalty_scope "batch": w f(mean_n m_n - m_bar), gradient w f'(mean m - m_bar) / N on every m_n, so
    # d vc_penalty / d b_m = w f'(mbar - m_bar) / N sum_n m_n (1 - m_n); the mean is a batch statistic.
    w, target = 0.7, 0.67
    f = {"l1": (np.abs, np.sign), "l2": (np.square, lambda x: 2 * x)}[kind]
    tok, tgt = data(16, steps=1, batch=6)
    st = random_state(17, batch=6)
    grads = {}
    for weight in (w, 0.0):
        m = make(msr.VCRNN, seed=18, penalty=kind, penalty_weight=weight, target=target, penalty_scope="batch")
        loss, grads[weight], _ = m.loss_and_grad(tok, tgt, st)
        mm = m.records()["m"][0]
        assert loss.aux["vc_penalty"] == pytest.approx(weight * f[0](mm.mean() - target), rel=1e-12, abs=0)
    assert (mm > target).any() and (mm < target).any()  # a per-step penalty would differ from this one
    step = make(msr.VCRNN, seed=18, penalty=kind, penalty_weight=w, target=target)
    assert step.loss_and_grad(tok, tgt, st)[0].aux["vc_penalty"] != pytest.approx(float(loss.aux["vc_penalty"]))
    expect = w * f[1](mm.mean() - target) / 6 * (mm * (1 - mm)).sum()
    got = grads[w]["sched_bias_l0"] - grads[0.0]["sched_bias_l0"]
    assert got[0] == pytest.approx(expect, rel=1e-10) and abs(expect) > 1e-3
    m = make(msr.VCRNN, seed=18, penalty=kind, penalty_weight=w, target=target, penalty_scope="batch")
    seen = []
    m.loss_and_grad(tok, tgt, st, reducer=lambda s: seen.append(s.copy()))
    assert len(seen) == 1 and seen[0] == pytest.approx([mm.mean()], rel=1e-15)
    at, g_at, _ = m.loss_and_grad(tok, tgt, st, reducer=lambda s: np.array([target]))  # the batch's mean at m_bar
    assert at.aux["vc_penalty"] == 0.0
    if kind == "l2":  # f'(0) = 0: no gradient from the penalty
        np.testing.assert_allclose(g_at["sched_bias_l0"], grads[0.0]["sched_bias_l0"], rtol=1e-13)
    with pytest.raises(ValueError, match="the reducer must return None or 1 batch statistics"):
        m.loss_and_grad(tok, tgt, st, reducer=lambda s: np.zeros(2))
    assert make(msr.VCRNN, seed=18).loss_and_grad(tok, tgt, st, reducer=lambda s: seen.append(s))[0] is not None
    assert len(seen) == 1  # the per-step penalty has no batch statistic: the reducer is not called


# ---- skipping == masking ------------------------------------------------------------------------


@pytest.mark.parametrize("cls", UNITS, ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    "opts", [{"block": 1}, {"block": 3, "mask_index": "one"}, {"block": 2, "eps": 0.2}, {"block": 16}], ids=str
)
def test_skipping_equals_masking(cls, opts):
    chunks = [data(s, steps=4, batch=5) for s in (19, 20)]
    runs = {}
    for skip in (True, False):
        kw = dict({"eps": 0.05}, **opts)
        m = make(cls, seed=21, sched_bias=-0.5, sharpness=3.0, penalty_weight=0.3, skip=skip, **kw)
        runs[skip] = run_chunks(m, chunks, random_state(22, batch=5))
        d = m.records()["d"][0]
        assert d.min() < D and len(np.unique(d)) > 2  # mixed d_t: the groups and the skipping really run
    assert_runs_equal(runs[True], runs[False], rtol=1e-12, grad_rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("cls", UNITS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_skipping_equals_masking_on_threads(cls, threads):
    """The staircase of the skip path with several levels per step (wide D, spread d_t) equals the masked
    path on 1, 2 and 3 threads."""
    Dw, Bw = 40, 7
    chunks = [
        (np.random.default_rng(s).integers(0, V, (Bw, 4)), np.random.default_rng(s + 1).integers(0, V, (Bw, 4)))
        for s in (31, 33)
    ]
    old = msr.get_num_threads()
    runs = {}
    try:
        msr.set_num_threads(threads)
        for skip in (True, False):
            m = cls(
                V,
                hidden_sizes=(Dw,),
                dtype="float64",
                seed=30,
                block=4,
                eps=0.05,
                sharpness=2.0,
                penalty_weight=0.3,
                skip=skip,
            )
            rng = np.random.default_rng(30)
            for p in m.parameters().values():
                p[...] = rng.normal(0.0, 0.6, p.shape)
            m.parameters()["sched_weight_ih_l0"][...] *= 4.0  # m_t spread over (0, 1): many levels per step
            runs[skip] = run_chunks(m, chunks, {"h_l0": np.random.default_rng(34).normal(0, 0.5, (Bw, Dw))})
            d = m.records()["d"][0].reshape(-1, Bw)
            assert np.mean([len(np.unique(np.ceil(r / 4))) for r in d]) >= 2.5  # several levels per step
    finally:
        msr.set_num_threads(old)
    assert_runs_equal(runs[True], runs[False], rtol=1e-12, grad_rtol=1e-12, atol=1e-13)


# ---- the VCRNN's packed leading-block products ----------------------------------------------------


@pytest.fixture
def plain_kernels_off():
    yield
    msr.set_reference_kernels(False)


def spread_vcrnn(Dw, seed, dtype="float64", sched_bias=0.0, cls=msr.VCRNN, **kw):
    """A VCRNN (or cls) of Dw units whose m_t spreads over (0, 1) (many distinct q per step)."""
    m = cls(V, hidden_sizes=(Dw,), dtype=dtype, seed=seed, eps=0.05, penalty_weight=0.3, **kw)
    rng = np.random.default_rng(seed)
    for p in m.parameters().values():
        p[...] = rng.normal(0.0, 0.6, p.shape)
    m.parameters()["sched_weight_ih_l0"][...] *= 4.0
    m.parameters()["sched_bias_l0"][...] = sched_bias
    return m


# (D, B, block, scheduler bias, mask_index, sharpness, what the d_t of the run must show)
PACKED_CASES = {
    "mixed, partial panel and column blocks": (37, 9, 5, 0.0, "zero", 2.0, "mixed"),
    "one stream": (40, 1, 3, 0.0, "zero", 2.0, "mixed"),
    "block 1, d_t = 0 in some columns": (48, 13, 1, -6.0, "one", 4.0, "some zero"),
    "d_t = 0 everywhere": (33, 7, 16, -60.0, "one", 4.0, "all zero"),
    "d_t = D everywhere": (33, 7, 4, 60.0, "zero", 2.0, "all D"),
}


@pytest.mark.parametrize("case", list(PACKED_CASES))
@pytest.mark.parametrize("threads", [1, 2])
def test_packed_products_equal_plain_staircase(plain_kernels_off, case, threads):
    """The VCRNN's skipped path through packed panels (PackedPanels::multiply_leading, the default) equals
    the plain staircase of Eigen products (reference kernels) in float64, at the edges of the column
    grouping: d_t = 0, d_t = D, one stream, partial panels and column blocks."""
    Dw, Bw, block, bias, index, lam, expect = PACKED_CASES[case]
    chunks = [
        (np.random.default_rng(s).integers(0, V, (Bw, 4)), np.random.default_rng(s + 1).integers(0, V, (Bw, 4)))
        for s in (41, 43)
    ]
    st = {"h_l0": np.random.default_rng(44).normal(0, 0.5, (Bw, Dw))}
    old = msr.get_num_threads()
    runs = {}
    try:
        msr.set_num_threads(threads)
        for plain in (False, True):
            msr.set_reference_kernels(plain)
            m = spread_vcrnn(Dw, 40, sched_bias=bias, block=block, mask_index=index, sharpness=lam)
            runs[plain] = run_chunks(m, chunks, st)
            d = m.records()["d"][0]
            check = {
                "mixed": len(np.unique(np.ceil(d / block))) > 2,
                "some zero": (d == 0).any() and (d > 0).any(),
                "all zero": (d == 0).all(),
                "all D": (d == Dw).all(),
            }[expect]
            assert check, (expect, d)
    finally:
        msr.set_num_threads(old)
        msr.set_reference_kernels(False)
    # the two sum in different orders (panels of rows against Eigen's blocks), and these models amplify
    # rounding (sched weights x4, sharpness up to 4); m saturates at 0 or 1 in the "all" cases (zero
    # scheduler gradients)
    assert_runs_equal(
        runs[False], runs[True], rtol=1e-10, grad_rtol=1e-9, atol=1e-12, exercised=not expect.startswith("all")
    )


@pytest.mark.parametrize("cls", UNITS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("tables", [True, False], ids=["tokens", "embedded"])
def test_chunk_scheduler_products_equal_plain(plain_kernels_off, cls, threads, tables):
    """The fast path's scheduler products over the whole chunk (v . x_t of every column before the steps, the
    gradients of u and v after them) equal the plain per-step products (reference kernels), float64, for both
    units, with the masks' rows >= q unwritten by the fast path and the "e" record still zero there. With
    input tables on, the evaluation forward reads x_t from the embedding in place (forward_tokens)."""
    Dw, Bw = 37, 9
    chunks = [
        (np.random.default_rng(s).integers(0, V, (Bw, 4)), np.random.default_rng(s + 1).integers(0, V, (Bw, 4)))
        for s in (51, 53)
    ]
    st = {"h_l0": np.random.default_rng(54).normal(0, 0.5, (Bw, Dw))}
    old = msr.get_num_threads()
    runs, masks = {}, {}
    try:
        msr.set_num_threads(threads)
        for plain in (False, True):
            msr.set_reference_kernels(plain)
            msr.set_input_tables(tables)
            m = spread_vcrnn(Dw, 50, cls=cls, block=3, sharpness=2.0)
            runs[plain] = run_chunks(m, chunks, st)
            masks[plain] = (m.records()["e"], m.records()["d"][0])
    finally:
        msr.set_num_threads(old)
        msr.set_reference_kernels(False)
        msr.set_input_tables(True)
    e, d = masks[False]
    assert len(np.unique(np.ceil(d / 3))) > 2  # mixed q
    assert all((e[int(k) :, n] == 0).all() for n, k in enumerate(d))  # units i >= d_t: e = 0 in the record
    np.testing.assert_allclose(e, masks[True][0], rtol=1e-10, atol=1e-12)
    assert_runs_equal(runs[False], runs[True], rtol=1e-10, grad_rtol=1e-9, atol=1e-12)


def test_packed_products_float32_and_time_record(plain_kernels_off):
    """float32 instantiation of the packed path against the plain one (to float32 rounding), and the
    "time" record: (phases, B*T), forward phases filled by a forward, backward ones by a training step,
    packing only on the packed path."""
    Dw, Bw = 45, 8
    tok, tgt = (np.random.default_rng(s).integers(0, V, (Bw, 5)) for s in (46, 47))
    out = {}
    for plain in (False, True):
        msr.set_reference_kernels(plain)
        m = spread_vcrnn(Dw, 45, dtype="float32", block=3, sharpness=2.0)
        loss, grads, st = m.loss_and_grad(tok, tgt)
        out[plain] = (float(loss), grads, st["h_l0"])
        tm = m.records()["time"]
        assert tm.shape == (11, Bw * 5) and (tm >= 0).all()
        assert tm[:4].sum() > 0 and tm[5:9].sum() > 0 and tm[10].sum() > 0  # forward, backward, weight gradients
        assert (tm[4].sum() > 0) == (not plain) and (tm[9].sum() > 0) == (not plain)  # packing
        m.forward(tok)
        assert m.records()["time"][5:].sum() == 0  # an inference forward: no backward phases
    msr.set_reference_kernels(False)
    assert out[False][0] == pytest.approx(out[True][0], rel=1e-5)
    for name, g in out[True][1].items():
        np.testing.assert_allclose(out[False][1][name], g, rtol=2e-3, atol=1e-4 * np.abs(g).max(), err_msg=name)
    # the state passes 5 steps of a sharp scheduler (sharpness 2) that amplifies float32 rounding: with
    # AVX-512 FMA each float32 path sits up to 6e-5 from the float64 run, so the two may differ by ~1e-4
    np.testing.assert_allclose(out[False][2], out[True][2], rtol=1e-4, atol=2e-4)


# ---- traces, records, schedules ------------------------------------------------------------------


def test_trace_and_records():
    m = make(msr.VCGRU, seed=23, sched_bias=-0.5, sharpness=3.0)
    tok = np.random.default_rng(24).integers(0, V, 12)
    tr = m.trace(tok)
    assert isinstance(tr, VCTrace) and len(tr) == 12 and tr.text is None
    assert tr.e.shape == (D, 12) and tr.m.shape == (12,) and tr.d.dtype.kind == "i"
    np.testing.assert_array_equal(tr.d, [(tr.e[:, t] > 0).sum() for t in range(12)])
    for t in range(12):  # the mask is non-increasing: its support is the leading d_t units
        assert (np.diff(tr.e[:, t]) <= 0).all()
    assert tr.equivalent_dim == pytest.approx(np.sqrt(np.mean(3 * tr.d**2 + D)))
    rec = m.records()
    np.testing.assert_allclose(rec["m"][0], tr.m)
    with pytest.raises(ValueError, match="vocab"):
        m.trace("abc")


def test_equivalent_dim_and_corpus():
    assert equivalent_dim([10, 10], 0) == pytest.approx(10.0)
    assert equivalent_dim([4, 2], 8, "vcgru") == pytest.approx(np.sqrt((48 + 12) / 2 + 8))
    with pytest.raises(ValueError, match="unit"):
        equivalent_dim([1], 4, "lstm")
    m = make(msr.VCRNN, seed=25, sched_bias=-0.5, sharpness=3.0)
    tok = np.random.default_rng(26).integers(0, V, 41)
    whole = corpus_equivalent_dim(m, tok, batch_size=2, chunk=7)  # chunks of 7, 7, 6 steps, state carried
    m.forward(tok[:40].reshape(2, 20))
    assert whole == pytest.approx(m.equivalent_dim(m.records()["d"][0]), rel=1e-12)
    assert 0 < whole < np.sqrt(D * D + D)


@pytest.mark.parametrize("cls", UNITS)
@pytest.mark.parametrize("target", [0.3, 0.0, 1.0])
def test_scheduler_starts_at_its_target(cls, target):
    """scheduler_init="target" (the default): u = v = 0 and b_m = logit(m_bar), so every step's m_t is m_bar
    (clipped to [0.001, 0.999]) whatever the input; "uniform" is PyTorch's rule, as for the other weights."""
    m = cls(V, hidden_sizes=(D,), seed=3, target=target)
    assert m.config["scheduler_init"] == "target"
    P = m.parameters()
    assert not P["sched_weight_ih_l0"].any() and not P["sched_weight_hh_l0"].any()
    tok = np.random.default_rng(4).integers(0, V, (B, T))
    m.forward(tok)
    np.testing.assert_allclose(m.records()["m"], min(max(target, 1e-3), 1 - 1e-3), rtol=1e-5)
    uniform = cls(V, hidden_sizes=(D,), seed=3, target=target, scheduler_init="uniform")
    other = cls(V, hidden_sizes=(D,), seed=3, target=target)
    msr.init.default(other, np.random.default_rng(3))
    for name, p in uniform.parameters().items():
        np.testing.assert_array_equal(p, other.parameters()[name], err_msg=name)
    assert np.abs(uniform.parameters()["sched_weight_hh_l0"]).max() > 0
    with pytest.raises(ValueError, match="scheduler_init must be one of 'target', 'uniform', got 'zero'"):
        cls(V, hidden_sizes=(D,), scheduler_init="zero")


def test_sharpness_schedule_and_set_option():
    s = sharpness_schedule()
    assert [s(e) for e in (0, 1, 4.5, 9, 20)] == pytest.approx([0.1, 0.2, 0.55, 1.0, 1.0])
    m = make(msr.VCRNN, seed=27)
    tok = data(28)[0]
    a, _ = m.forward(tok)
    m.sharpness = 0.1
    assert m.options["sharpness"] == 0.1
    b, _ = m.forward(tok)
    assert np.abs(a - b).max() > 1e-6
    m.set_option("sharpness", 1.0)
    np.testing.assert_allclose(m.forward(tok)[0], a, rtol=1e-14)


# ---- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", UNITS, ids=lambda c: c.__name__)
def test_bad_input_is_refused(cls):
    for kw, what in [
        ({"eps": 0.0}, "eps"),
        ({"eps": 0.5}, "eps"),
        ({"eps": -0.1}, "eps"),
        ({"sharpness": 0.0}, "sharpness"),
        ({"sharpness": -1.0}, "sharpness"),
        ({"target": -0.1}, "target"),
        ({"target": 1.5}, "target"),
        ({"penalty_weight": -1.0}, "penalty_weight"),
        ({"block": 0}, "block"),
    ]:
        with pytest.raises(ValueError, match=what):
            cls(V, hidden_sizes=(D,), **kw)
    with pytest.raises(ValueError, match="penalty"):
        cls(V, hidden_sizes=(D,), penalty="l3")
    with pytest.raises(ValueError, match="one layer"):
        cls(V, hidden_sizes=(D, D))
    with pytest.raises(ValueError, match="embed_size must equal"):
        cls(V, 5, (D,))
    m = cls(V, hidden_sizes=(D,))
    assert m.config["embed_size"] == D
    for name, value in [("sharpness", 0.0), ("eps", 0.5), ("target", 2.0), ("penalty_weight", -1.0)]:
        with pytest.raises(ValueError, match=name):
            m.set_option(name, value)
    with pytest.raises(ValueError, match="mask_index"):
        m.set_option("mask_index", 1.0)


# ---- presets --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "ptb-char-vcrnn",
        "ptb-char-vcgru",
        "ptb-bits-vcrnn",
        "nottingham-vcrnn",
        "text8-vcgru-0.3",
        "text8-vcgru-0.4",
        "text8-vcgru-0.5",
    ],
)
def test_presets_build_the_papers_models(name):
    from multiscale_rnn.cli import model_from_settings, resolve_settings

    s = resolve_settings(name)
    assert s["anneal"] == {"sharpness": [0.1, 1.0, 0.1]}  # the paper's lambda: 0.1, +0.1 per epoch, up to 1
    m = model_from_settings(s, vocab_size=5)
    assert isinstance(m, msr.VCGRU if "vcgru" in name else msr.VCRNN)
    assert m.config["penalty"] == "l1" and m.config["embed_size"] == m.config["hidden_sizes"][0]
    if name.startswith("text8"):
        assert m.config["target"] == float(name.rsplit("-", 1)[1])
    if name == "ptb-bits-vcrnn":
        assert s["data_options"] == {"buffer_bits": 8}


# ---- a model's checkpoint and the settings of the call going on with it -----------------------------


def _ptb_chars(folder):
    """A tiny stand-in for the PTB character files in ``folder`` (``_`` between words); its path."""
    import random

    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 5))) for _ in range(60)]
    folder.mkdir()
    for split, n in (("train", 300), ("valid", 40), ("test", 40)):
        lines = [" _ ".join(" ".join(rng.choice(words)) for _ in range(12)) for _ in range(n)]
        (folder / f"ptb.char.{split}.txt").write_text("\n".join(lines) + "\n")
    return folder


def _files(folder):
    """Every file under ``folder`` with its bytes: what a refused call must leave as it was."""
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _vc_settings(**kw):
    """``train_vc``'s settings of a tiny VCRNN, one epoch, with ``kw`` changed."""
    from types import SimpleNamespace

    return SimpleNamespace(**{**dict(hidden=8, target=0.3, lr=2e-3, epochs=1, train_chars=4_000, valid_chars=1_000),
                              **kw})  # fmt: skip


def test_train_vc_refuses_a_checkpoint_of_another_learning_rate_or_text(tmp_path):
    """The label holds neither the learning rate nor the characters read: a second call with another rate (or
    validation text) into the same folder would go on with the first call's model, or read it back as its own.
    It is refused, naming the setting and the checkpoint, and leaves the folder as it was."""
    from multiscale_rnn.reproduce.vcrnn import train_vc

    corpus = msr.data.load("ptb-char", path=str(_ptb_chars(tmp_path / "ptb")))
    out = tmp_path / "out"
    first = train_vc(corpus, _vc_settings(), "vcrnn", 0.01, 0, out, test=True)
    assert [(r["epoch"], r["lr"]) for r in first] == [(1, 2e-3)]
    path = out / "vcrnn-H8-w0.01-m0.3-seed0.npz"
    before = _files(out)
    for kw, name in (({"lr": 0.05}, "lr"), ({"lr": 0.05, "epochs": 2}, "lr"), ({"valid_chars": 500}, "valid_chars")):
        written = []
        with pytest.raises(ValueError, match=rf"\b{name} \S+ there, \S+ here") as e:
            train_vc(corpus, _vc_settings(**kw), "vcrnn", 0.01, 0, out, test=True, on_row=written.append)
        assert str(path) in str(e.value) and "--out" in str(e.value), str(e.value)
        assert written == [] and _files(out) == before, kw
    assert msr.checkpoint.load(path).extra["reproduction"]["lr"] == 2e-3


def test_train_vc_resumes_and_goes_on_with_more_epochs_at_the_same_settings(tmp_path):
    """The same settings read the model back; a larger number of epochs goes on with it (the schedules count
    epochs from the start) to the figures of an uninterrupted run, and every checkpoint written keeps the
    settings, so the next call can check them."""
    from multiscale_rnn.reproduce.vcrnn import train_vc

    corpus = msr.data.load("ptb-char", path=str(_ptb_chars(tmp_path / "ptb")))
    whole = train_vc(corpus, _vc_settings(epochs=2), "vcrnn", 0.01, 0, tmp_path / "whole", test=True)
    out = tmp_path / "out"
    path = out / "vcrnn-H8-w0.01-m0.3-seed0.npz"
    first = train_vc(corpus, _vc_settings(), "vcrnn", 0.01, 0, out)
    saved = msr.checkpoint.load(path).extra["reproduction"]
    assert (saved["lr"], saved["train_chars"], saved["valid_chars"], saved["hidden"]) == (2e-3, 4_000, 1_000, 8)
    again = train_vc(corpus, _vc_settings(), "vcrnn", 0.01, 0, out)  # nothing to train: epoch 1 read back
    assert [r["valid_bpc"] for r in again] == [r["valid_bpc"] for r in first]
    rows = train_vc(corpus, _vc_settings(epochs=2), "vcrnn", 0.01, 0, out, test=True)
    assert [(r["epoch"], r["lr"]) for r in rows] == [(1, 2e-3), (2, 2e-3)] and "test_bpc" in rows[-1]
    assert [(r["valid_bpc"], r["mean_m"]) for r in rows] == [(r["valid_bpc"], r["mean_m"]) for r in whole]
    assert rows[-1]["test_bpc"] == whole[-1]["test_bpc"]
    ck = msr.checkpoint.load(path)
    assert [h["epoch"] for h in ck.history] == [1, 2] and ck.extra["reproduction"] == saved


def test_train_vc_refuses_a_checkpoint_past_the_epochs_asked(tmp_path, monkeypatch):
    """A checkpoint past the epochs asked holds a later epoch's parameters, so none of the epochs asked can get
    a row from it: a clear error naming it, its epoch and the epochs asked, where ``train_vc`` returned no row
    and ``vcrnn-table3``'s run then failed on the missing row of the VC model (``TypeError``)."""
    from multiscale_rnn.reproduce import vcrnn
    from multiscale_rnn.reproduce._common import Budget, Results

    corpus = msr.data.load("ptb-char", path=str(_ptb_chars(tmp_path / "ptb")))
    out = tmp_path / "out"
    vcrnn.train_vc(corpus, _vc_settings(epochs=2), "vcrnn", 0.01, 0, out)
    before = _files(out)
    written = []
    with pytest.raises(ValueError, match="trained for 2 epochs, past the 1 asked") as e:
        vcrnn.train_vc(corpus, _vc_settings(), "vcrnn", 0.01, 0, out, test=True, on_row=written.append)
    assert str(out / "vcrnn-H8-w0.01-m0.3-seed0.npz") in str(e.value) and "--out" in str(e.value)
    assert written == [] and _files(out) == before

    class Tiny(vcrnn._Settings):  # the reproduction's settings at the smoke sizes, 2 epochs at a budget of 100
        def __init__(self, minutes):
            self.smoke, self.target, self.lr, self.weight, self.retries = False, None, 2e-3, 1.0, 2
            self.hidden, self.train_chars, self.valid_chars = 8, 4_000, 1_000
            self.epochs = 2 if minutes >= 100 else 1

    monkeypatch.setattr(vcrnn, "_Settings", Tiny)
    run_out = tmp_path / "run"
    vcrnn.run(run_out, Budget(100, run_out), False, tmp_path / "ptb")
    rows = Results(run_out).rows()
    with pytest.raises(ValueError, match="vcrnn-H8-w1-m0.5-seed0.npz holds .* past the 1 asked"):
        vcrnn.run(run_out, Budget(50, run_out), False, tmp_path / "ptb")
    assert Results(run_out).rows() == rows


def test_vc_calibrate_refuses_another_lr_into_the_same_out(tmp_path):
    """``bench/vc_calibrate.py`` names its models without --lr or --valid-chars: a second call with another rate
    skipped a model whose run had ended (which --profile then read) or went on with it at the new rate. It now
    stops with an error naming the setting and the checkpoint and records nothing, as does a call going on with
    a model with another --valid-chars; the same settings with more epochs go on."""
    import importlib.util
    import json
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "bench" / "vc_calibrate.py"
    spec = importlib.util.spec_from_file_location("vc_calibrate", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "out"
    common = ["--data", str(_ptb_chars(tmp_path / "ptb")), "--models", "vcrnn", "--weights", "1", "--hidden", "8",
              "--train-chars", "4000", "--valid-chars", "1000", "--out", str(out)]  # fmt: skip
    assert module.main(common + ["--epochs", "1", "--lr", "0.002"]) == 0
    before = _files(out)
    path = out / "vcrnn-H8-w1-m0.3-seed0.npz"
    for more in (["--epochs", "1", "--lr", "0.05"], ["--epochs", "2", "--lr", "0.05"]):
        with pytest.raises(SystemExit, match="lr 0.002 there, 0.05 here") as e:
            module.main(common + more)
        assert str(path) in str(e.value), more
        assert _files(out) == before, more
    with pytest.raises(SystemExit, match="valid_chars 1000 there, 500 here"):  # goes on with it: refused
        module.main(common + ["--epochs", "2", "--lr", "0.002", "--valid-chars", "500"])
    assert _files(out) == before
    assert module.main(common + ["--epochs", "2", "--lr", "0.002"]) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["epoch"], r["lr"]) for r in rows] == [(1, 0.002), (2, 0.002)]
