"""HM-LSTM: gradients (finite differences in soft mode, a PyTorch straight-through reference in
step/sample mode), the operation truth table, COPY, skipping == masking, options and bad input."""

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn import testing
from multiscale_rnn.models.hm_lstm import boundary_scores, first_seen
from multiscale_rnn.reference import hm_lstm as reference
from multiscale_rnn.testing import numeric_gradient

V, E, HS, B, T = 11, 5, (4, 3, 5), 3, 6


def make(seed=3, hidden=HS, scale=0.5, z_bias=None, **kw):
    """A float64 HM-LSTM with N(0, scale^2) weights (boundaries then fire at mixed steps). Options not
    given follow the paper's reading (gradient "switch" for binary boundaries, no flush cut, detectors reading
    everything), which these tests were written for, with the paper's gated output module and no rate target; the
    package's
    defaults and the rate target are checked in test_hm_lstm_recipe.py."""
    kw.setdefault("flush_cut", False)
    kw.setdefault("head", "gated")
    kw.setdefault("rate_target", None)
    kw.setdefault("detector_input", "all")
    if kw.get("boundary", "step") != "soft":
        kw.setdefault("gradient", "switch")
    m = msr.HMLSTM(V, E, hidden, dtype="float64", seed=seed, **kw)
    rng = np.random.default_rng(seed)
    for name, p in m.parameters().items():
        if name.startswith("ln_weight"):
            p[...] = 1.0 + 0.3 * rng.normal(size=p.shape)
        else:
            p[...] = rng.normal(0.0, scale, p.shape)
    if z_bias is not None:  # shift the boundary rows' bias: negative makes upper layers COPY more often
        for l, h in enumerate(hidden):
            b = m.parameters()[f"bias_l{l}"]
            if b.shape[0] == 4 * h + 1:
                b[4 * h] += z_bias
    return m


def random_state(m, rng, batch=B, soft=False):
    st = {}
    L = m.num_layers
    for k, v in m.initial_state(batch).items():
        if k.startswith("z"):
            z = rng.uniform(0, 1, v.shape)
            st[k] = z if soft else np.round(z)
        else:
            st[k] = rng.normal(0, 0.5, v.shape)
    if not m.config["top_boundary"]:
        st[f"z_l{L - 1}"][:] = 0.0
    return st


def batch(rng, steps=T, batch=B):
    return rng.integers(0, V, (batch, steps)), rng.integers(0, V, (batch, steps))


def finite_difference_error(m, tok, tgt, st, n=200, eps=1e-6, seed=0):
    m.loss_and_grad(tok, tgt, st)
    flat = m.flat_parameters()
    grad = m.flat_gradients().copy()
    idx = np.random.default_rng(seed).choice(len(flat), min(n, len(flat)), replace=False)
    fd = numeric_gradient(lambda: m.loss(tok, tgt, st)[0], flat, eps, idx)
    an = grad[idx]
    assert np.linalg.norm(an) > 0
    return np.linalg.norm(fd - an) / (np.linalg.norm(fd) + np.linalg.norm(an))


SOFT_OPTIONS = [
    {},
    {"layer_norm": True},
    {"top_boundary": True},
    {"copy_z": "recompute"},
    {"flush_cut": True},
    {"head": "linear"},
    {"top_down": False},
    {"top_down": False, "flush_cut": True, "layer_norm": True},
    {"slope": 2.5, "layer_norm": True, "flush_cut": True, "copy_z": "recompute", "top_boundary": True},
]


@pytest.mark.parametrize("opts", SOFT_OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_soft_mode_matches_finite_differences(opts):
    rng = np.random.default_rng(1)
    m = make(boundary="soft", **opts)
    tok, tgt = batch(rng)
    st = random_state(m, rng, soft=True)
    assert finite_difference_error(m, tok, tgt, st) < 1e-6


def test_one_layer_soft_finite_differences():
    rng = np.random.default_rng(2)
    m = make(hidden=(4,), boundary="soft", top_boundary=True, layer_norm=True)
    tok, tgt = batch(rng)
    assert finite_difference_error(m, tok, tgt, random_state(m, rng, soft=True)) < 1e-6


# ---- PyTorch reference with the same straight-through rule (multiscale_rnn.reference.hm_lstm) ----

ST_OPTIONS = [
    {"boundary": "step"},
    {"boundary": "step", "gradient": "blend"},
    {"boundary": "sample"},
    {"boundary": "sample", "gradient": "blend"},
    {"boundary": "step", "top_boundary": True},
    {"boundary": "step", "copy_z": "recompute"},
    {"boundary": "step", "copy_z": "recompute", "gradient": "blend"},
    {"boundary": "step", "flush_cut": True},
    {"boundary": "step", "flush_cut": True, "gradient": "blend"},
    {"boundary": "step", "layer_norm": True},
    {"boundary": "step", "slope": 3.0},
    {"boundary": "step", "head": "linear"},
    {"boundary": "step", "skip": False},
    {"boundary": "step", "top_down": False, "flush_cut": True},
    {"boundary": "step", "top_down": False, "gradient": "blend", "copy_z": "recompute", "top_boundary": True},
    {"boundary": "sample", "layer_norm": True, "flush_cut": True, "copy_z": "recompute", "top_boundary": True},
    {"boundary": "soft", "layer_norm": True, "flush_cut": True, "copy_z": "recompute", "top_boundary": True},
]


@pytest.mark.parametrize("opts", ST_OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_matches_pytorch_reference(opts):
    pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    m = make(**opts)
    tok, tgt = batch(rng, steps=8, batch=4)
    st = random_state(m, rng, batch=4, soft=opts["boundary"] == "soft")
    loss, grads, state = m.loss_and_grad(tok, tgt, st)
    rec = m.records()
    ops = np.concatenate([rec[f"op_l{l}"] for l in range(1, m.num_layers)])
    assert {0, 1, 2} <= set(np.unique(ops).astype(int)), "the check should see COPY, UPDATE and FLUSH"
    rloss, rgrads, rstate = reference.loss_and_grad(m, tok, tgt, st, records=rec)
    assert loss == pytest.approx(rloss, rel=1e-12)
    for k in grads:
        np.testing.assert_allclose(grads[k], rgrads[k], rtol=1e-9, atol=1e-12, err_msg=k)
    for k in state:
        np.testing.assert_allclose(state[k], rstate[k], rtol=1e-12, atol=1e-14, err_msg=k)


@pytest.mark.parametrize("opts", [{"boundary": "step"}, {"boundary": "soft", "flush_cut": True, "layer_norm": True}])
def test_top_down_off_equals_zero_top_down_weights(opts):
    """top_down=False has no weight_td, and computes what the model with top-down weights held at zero
    computes: the same loss, state and other gradients."""
    rng = np.random.default_rng(21)
    on, off = make(**opts), make(top_down=False, **opts)
    assert sorted(k for k in on.parameters() if k.startswith("weight_td")) == ["weight_td_l0", "weight_td_l1"]
    assert not any(k.startswith("weight_td") for k in off.parameters())
    for k, p in on.parameters().items():
        if k.startswith("weight_td"):
            p[...] = 0.0
        else:
            p[...] = off.parameters()[k]
    chunks = [batch(rng, steps=6, batch=4) for _ in range(2)]
    st = random_state(on, rng, batch=4, soft=opts["boundary"] == "soft")
    runs_on, st_on = testing.run_chunks(on, chunks, st)
    assert all(np.abs(g["weight_td_l0"]).max() > 0 for _, _, g in runs_on)  # held at zero, still a gradient
    runs_on = [(lg, loss, {k: v for k, v in g.items() if not k.startswith("weight_td")}) for lg, loss, g in runs_on]
    testing.assert_runs_equal(
        testing.run_chunks(off, chunks, st), (runs_on, st_on), rtol=1e-12, grad_rtol=1e-11, atol=1e-14
    )


# ---- operations ----------------------------------------------------------------------------------


def test_operation_truth_table():
    """Layer 2's operation at t=0 from z^2_{t-1} (state) and z^1_t (forced by layer 1's boundary bias)."""
    rng = np.random.default_rng(7)
    cases = [(0, 1, "UPDATE"), (0, 0, "COPY"), (1, 0, "FLUSH"), (1, 1, "FLUSH")]
    for zp, zb, expect in cases:
        for skip in (True, False):
            m = make(hidden=(4, 3), skip=skip, top_boundary=True)
            p = m.parameters()
            p["weight_ih_l0"][16] = 0.0
            p["weight_hh_l0"][16] = 0.0
            p["weight_td_l0"][16] = 0.0
            p["bias_l0"][16] = 10.0 if zb else -10.0
            st = random_state(m, rng, batch=2)
            st["z_l1"][:] = zp
            tok = rng.integers(0, V, (2, 1))
            _, new = m.forward(tok, st)
            rec = m.records()
            assert rec["z_l0"][0].tolist() == [zb, zb]
            assert [msr.models.hm_lstm.OPS[int(o)] for o in rec["op_l1"][0]] == [expect, expect]
            # c depends on c_{t-1} only under UPDATE (f * c_{t-1}); FLUSH starts from i * g.
            st2 = dict(st, c_l1=st["c_l1"] + 1.0)
            _, new2 = m.forward(tok, st2)
            if expect == "COPY":
                for k in ("h_l1", "c_l1", "z_l1"):
                    np.testing.assert_array_equal(new[k], st[k])
            elif expect == "FLUSH":
                np.testing.assert_array_equal(new2["c_l1"], new["c_l1"])
            else:
                assert np.all(new2["c_l1"] != new["c_l1"])


@pytest.mark.parametrize(
    "opts", [{}, {"skip": False}, {"copy_z": "recompute"}, {"flush_cut": True, "layer_norm": True}]
)
def test_copy_leaves_state_unchanged(opts):
    rng = np.random.default_rng(11)
    m = make(z_bias=-1.0, **opts)
    st = random_state(m, rng)
    seen = 0
    for t in range(30):
        tok = rng.integers(0, V, (B, 1))
        _, new = m.forward(tok, st)
        rec = m.records()
        for l in range(m.num_layers):
            copy = rec[f"op_l{l}"][0] == 0
            seen += copy.sum()
            np.testing.assert_array_equal(new[f"h_l{l}"][copy], st[f"h_l{l}"][copy])
            np.testing.assert_array_equal(new[f"c_l{l}"][copy], st[f"c_l{l}"][copy])
            if opts.get("copy_z") != "recompute":
                np.testing.assert_array_equal(new[f"z_l{l}"][copy], st[f"z_l{l}"][copy])
        st = new
    assert seen > 10


SKIP_OPTIONS = [
    {},
    {"copy_z": "recompute"},
    {"flush_cut": True},
    {"layer_norm": True, "top_boundary": True},
    {"boundary": "sample"},
    {"head": "linear", "flush_cut": True, "copy_z": "recompute"},
    {"top_down": False, "flush_cut": True},
]


def assert_skipping_equals_masking(opts):
    """Loss, gradients, state, records and logits of the skipping and the masked path agree to 1e-12."""
    rng = np.random.default_rng(13)
    tok, tgt = batch(rng, steps=12, batch=5)
    out = []
    for skip in (True, False):
        m = make(z_bias=-0.7, skip=skip, **opts)
        st = random_state(m, rng if not out else np.random.default_rng(99), batch=5)
        if not out:
            st0 = st
        loss, grads, new = m.loss_and_grad(tok, tgt, st0)
        rec = m.records()
        logits, _ = m.forward(tok, st0)
        out.append((loss, grads, new, rec, logits))
    (l1, g1, s1, r1, y1), (l2, g2, s2, r2, y2) = out
    copies = sum((r1[f"op_l{l}"] == 0).sum() for l in range(3))
    assert copies > 20, "skipping must have COPY columns to skip"
    assert abs(l1 - l2) <= 1e-12 * abs(l2)
    for k in g1:
        np.testing.assert_allclose(g1[k], g2[k], rtol=1e-12, atol=1e-13, err_msg=k)
    for k in s1:
        np.testing.assert_allclose(s1[k], s2[k], rtol=1e-12, atol=1e-13, err_msg=k)
    for k in ("op_l0", "op_l1", "op_l2", "z_l1", "hnorm_l2"):
        np.testing.assert_allclose(r1[k], r2[k], rtol=1e-12, atol=1e-13, err_msg=k)
    np.testing.assert_allclose(y1, y2, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("opts", SKIP_OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_skipping_equals_masking(opts):
    """Skipping COPY columns gives what the masked path gives (two threads, the suite's default)."""
    assert_skipping_equals_masking(opts)


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize(
    "opts",
    [{}, {"boundary": "sample", "copy_z": "recompute"}],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default",
)
def test_skipping_equals_masking_on_threads(opts, threads):
    """The same as above with streams split over 1 and 3 threads (B = 5: uneven splits)."""
    msr.set_num_threads(threads)
    assert_skipping_equals_masking(opts)


# ---- threads over streams and the plain reference kernels ----------------------------------------


def run_chunks(m, chunks, st):
    """Logits, loss, gradients, records and state over chunks with the state carried."""
    out = []
    for tok, tgt in chunks:
        logits, _ = m.forward(tok, st)
        rec = m.records()
        loss, grads, st = m.loss_and_grad(tok, tgt, st)
        out.append((logits, loss, grads, rec, m.records()))
    return out, st


THREAD_OPTIONS = [
    {},
    {"layer_norm": True, "top_boundary": True},
    {"boundary": "sample", "copy_z": "recompute", "flush_cut": True},
    {"boundary": "sample", "gradient": "blend", "layer_norm": True},
    {"copy_z": "recompute", "layer_norm": True, "skip": False},
    {"top_down": False, "flush_cut": True, "gradient": "blend"},
]


@pytest.mark.parametrize("opts", THREAD_OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_threads_equal_reference_kernels(opts):
    """Streams split over 1, 2 and 3 threads with packed products (B = 7, so splits are uneven) give
    what the plain reference (one stream of control, Eigen products) gives, in evaluation and
    training, over two chunks with the state carried; sample boundaries draw alike."""

    rng = np.random.default_rng(23)
    Bn, Tn = 7, 5
    data = rng.integers(0, V, (Bn, 2 * Tn + 1))
    chunks = [(data[:, k * Tn : (k + 1) * Tn], data[:, k * Tn + 1 : (k + 1) * Tn + 1]) for k in range(2)]
    hidden = (6, 9, 5)  # partial panels, K = Hb + H + Ht not a multiple of the panel
    results = {}
    try:
        for threads, plain in ((1, True), (1, False), (2, False), (3, False)):
            msr.set_num_threads(threads)
            msr.set_reference_kernels(plain)
            m = make(hidden=hidden, z_bias=-0.7, **opts)
            st = random_state(m, np.random.default_rng(29), batch=Bn)
            results[(threads, plain)] = run_chunks(m, chunks, st)
    finally:
        msr.set_reference_kernels(False)
    ref, st_ref = results.pop((1, True))
    ops = np.concatenate([r[f"op_l{l}"] for c in ref for r in (c[3],) for l in (1, 2)])
    assert {0, 1, 2} <= set(np.unique(ops).astype(int)), "the check should see COPY, UPDATE and FLUSH"
    for (threads, _), (out, st) in results.items():
        for (lf, lossf, gf, ef, tf), (lr, lossr, gr, er, tr) in zip(out, ref):
            np.testing.assert_allclose(lf, lr, rtol=1e-12, atol=1e-13, err_msg=f"{threads} threads")
            assert lossf == pytest.approx(lossr, rel=1e-12)
            for k in gr:
                np.testing.assert_allclose(gf[k], gr[k], rtol=1e-10, atol=1e-13, err_msg=f"{k}, {threads} threads")
            for recf, recr in ((ef, er), (tf, tr)):
                for k in recr:
                    np.testing.assert_allclose(
                        recf[k], recr[k], rtol=1e-12, atol=1e-13, err_msg=f"{k}, {threads} threads"
                    )
        for k in st_ref:
            np.testing.assert_allclose(st[k], st_ref[k], rtol=1e-12, atol=1e-13, err_msg=k)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_outputs_do_not_depend_on_the_thread_count(dtype):
    """Logits, loss, state and records are bit for bit the same on 1, 2 and 3 threads (sample boundaries,
    layer norm, recomputed COPY boundaries); gradients, whose sums over streams are split differently,
    agree to rounding."""
    tok = np.random.default_rng(31).integers(0, V, (11, 7))
    outs = []
    for threads in (1, 2, 3):
        msr.set_num_threads(threads)
        kw = dict(boundary="sample", layer_norm=True, copy_z="recompute")
        m = (
            make(hidden=(6, 9, 5), z_bias=-0.7, **kw)
            if dtype == "float64"
            else msr.HMLSTM(V, E, (6, 9, 5), seed=3, **kw)
        )
        logits, st = m.forward(tok)
        rec = m.records()
        loss, grads, st = m.loss_and_grad(tok, tok, st)
        outs.append((logits, rec, loss, grads, st, m.records()))
    (l0, r0, loss0, g0, s0, t0) = outs[0]
    for logits, rec, loss, grads, st, rec2 in outs[1:]:
        np.testing.assert_array_equal(logits, l0)
        assert loss == loss0
        for a, b in ((rec, r0), (st, s0), (rec2, t0)):
            for k in b:
                np.testing.assert_array_equal(a[k], b[k], err_msg=k)
        for k in g0:
            np.testing.assert_allclose(
                grads[k],
                g0[k],
                rtol=1e-4 if dtype == "float32" else 1e-10,
                atol=1e-6 if dtype == "float32" else 1e-14,
                err_msg=k,
            )


def test_set_option_slope_and_skip():
    rng = np.random.default_rng(17)
    m = make(boundary="soft")
    tok, tgt = batch(rng)
    st = random_state(m, rng, soft=True)
    l1, _ = m.loss(tok, tgt, st)
    m.set_option("slope", 4.0)
    assert m.slope == 4.0
    l2, _ = m.loss(tok, tgt, st)
    assert l1 != l2
    m.slope = 1.0
    assert m.loss(tok, tgt, st)[0] == l1
    with pytest.raises(ValueError, match="slope"):
        m.set_option("slope", 0.0)
    with pytest.raises(ValueError, match="boundary"):
        m.set_option("boundary", 1.0)


def test_bad_options_and_state():
    with pytest.raises(ValueError, match="boundary"):
        msr.HMLSTM(V, E, HS, boundary="hard")
    with pytest.raises(ValueError, match="blend"):
        msr.HMLSTM(V, E, HS, boundary="soft", gradient="switch")
    with pytest.raises(ValueError, match="copy_z"):
        msr.HMLSTM(V, E, HS, copy_z="keep")
    with pytest.raises(ValueError, match="no option 'slop'"):
        msr.testing.core_model("hm_lstm", V, E, list(HS), 0.0, 0, {"slop": 1.0})
    with pytest.raises(ValueError, match="slope"):
        msr.HMLSTM(V, E, HS, slope=-1.0)
    with pytest.raises(ValueError, match="head"):
        msr.HMLSTM(V, E, HS, head="mixture")
    m = make()
    st = m.initial_state(2)
    st["z_l0"][0, 0] = 0.5
    with pytest.raises(ValueError, match="z_l0.*0 or 1"):
        m.forward(np.zeros((2, 3), dtype=np.int64), st)
    st = m.initial_state(2)
    st["z_l2"][:] = 1.0
    with pytest.raises(ValueError, match="top layer"):
        m.forward(np.zeros((2, 3), dtype=np.int64), st)
    st = m.initial_state(2)
    st["h_l1"] = np.zeros((2, 7))
    with pytest.raises(ValueError, match="h_l1"):
        m.forward(np.zeros((2, 3), dtype=np.int64), st)
    with pytest.raises(IndexError, match="stream 1, step 2"):
        m.forward(np.array([[0, 1, 2], [3, 4, V]]))


def test_gated_head_serves_other_cores():
    """The output module of eq. 11-12 is a head: an LSTM stack can use it (one part)."""
    rng = np.random.default_rng(19)
    m = msr.LSTM(V, E, (4, 3), dtype="float64", head="gated", head_size=6, seed=1)
    assert m.parameters()["output.gate.weight"].shape == (1, 3)
    assert m.parameters()["output.embed.weight"].shape == (6, 3)
    tok, tgt = batch(rng)
    assert finite_difference_error(m, tok, tgt, None) < 1e-6
    m.forward(tok)
    assert m.records()["gate"].shape == (1, B * T)
    with pytest.raises(ValueError, match="head_size"):
        msr.LSTM(V, E, (4,), head="gated")
    with pytest.raises(ValueError, match="head_size"):
        msr.LSTM(V, E, (4,), head="linear", head_size=3)


# ---- trace and scores ----------------------------------------------------------------------------


def test_boundary_scores():
    ref = np.array([0, 0, 1, 0, 0, 1, 0, 1], dtype=bool)
    pred = np.array([0, 0, 1, 1, 0, 0, 0, 0], dtype=bool)
    s = boundary_scores(pred, ref)
    assert (s["precision"], s["recall"]) == (0.5, pytest.approx(1 / 3))
    assert s["f1"] == pytest.approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3))
    ref[7] = False
    late = np.roll(ref, 1)  # each boundary one step late
    assert boundary_scores(late, ref, tolerance=1)["f1"] == 1.0
    assert boundary_scores(late, ref, tolerance=0)["f1"] == 0.0
    assert boundary_scores(np.zeros(8, bool), ref)["f1"] == 0.0
    with pytest.raises(ValueError, match="shape"):
        boundary_scores(pred[:3], ref)


def test_trace_arrays_and_counts():
    h = msr.data.synthetic_hierarchy(n_chars=400, seed=0)
    corpus = h.corpus()
    m = msr.HMLSTM(corpus.vocab_size, 8, (6, 5, 4), seed=0, head="gated")
    text = h.text[:120]
    tr = m.trace(text, corpus.vocab, reference_boundaries=h.word_boundaries[:120])
    L, Tn = 3, 120
    assert tr.z.shape == tr.ops.shape == tr.h_norms.shape == tr.gates.shape == (L, Tn)
    assert tr.text == list(text)
    assert np.all(tr.ops[0] != 0), "the first layer never copies (z^0 = 1)"
    assert np.all(tr.z[2] == 0), "no boundary detector in the top layer"
    assert tr.updates.tolist() == [(tr.ops[l] != 0).sum() for l in range(L)]
    assert tr.reduction == pytest.approx(1 - tr.updates.sum() / (L * Tn))
    # COPY keeps ||h|| (Figure 4's flat runs)
    for l in range(1, L):
        copy = np.flatnonzero(tr.ops[l] == 0)
        copy = copy[copy > 0]
        np.testing.assert_array_equal(tr.h_norms[l][copy], tr.h_norms[l][copy - 1])
    assert len(tr.scores) == L and set(tr.scores[0]) >= {"precision", "recall", "f1"}
    with pytest.raises(ValueError, match="vocab"):
        m.trace(text)
    with pytest.raises(ValueError, match="reference_boundaries"):
        m.trace(text, corpus.vocab, reference_boundaries=np.zeros(5, bool))


# ---- a short training run finds word boundaries ----------------------------------------------------


def synthetic_corpus():
    """The study's text: 40,000 generated characters (trie lexicon, seed 0), 10 % for validation."""
    return msr.data.synthetic_hierarchy(n_chars=40_000, seed=0).corpus(valid_fraction=0.1, test_fraction=0.0)


def train_synthetic(epochs=40, seed=0):
    """A 2-layer HM-LSTM with the package's default recipe (the model's defaults, the Trainer's
    boundary warm-up, no option schedule) trained on the generated hierarchical text (trie lexicon,
    seeded, one thread): 880 updates, about 3 s."""
    corpus = synthetic_corpus()
    m = msr.HMLSTM(corpus.vocab_size, 16, (32, 32), seed=seed)
    trainer = msr.Trainer(
        m, optimizer=msr.optim.Adam(5e-3), clip_norm=1.0, batch_size=32, bptt=50, progress=False, seed=seed
    )
    trainer.fit(corpus.train, epochs=epochs)
    return m, corpus


def word_scores(m, corpus):
    """(trace, F1) of z^1 on the first 2,000 validation characters against the step after each word's
    last letter (the space, where a word's end can first be read off the input; the last letter itself
    is within the tolerance of 1)."""
    ids = corpus.valid[:2000]
    tr = m.trace(ids, reference_boundaries=first_seen(corpus.boundaries["valid"]["word"][:2000]), tolerance=1)
    return tr, tr.scores[0]["f1"]


@pytest.mark.usefixtures("one_thread")
def test_default_recipe_finds_the_word_boundaries_over_seeds():
    """Ten single runs of the 2-layer defaults, the protocol recipe (docs/models/hm_lstm.md, "The default
    recipe"; seeds 0-9, about 2 s each) on the generated text. What is asserted holds across seeds,
    instruction sets and thread counts (measured on an AMD EPYC Zen 5 with the ``avx512`` and ``avx2``
    modules on one thread and ``avx512`` on two: F1 >= 0.9 on 4 of 10 seeds each, median F1 0.64-0.79,
    lowest 0.41, median z^1 rate 0.173, lowest 0.046, layer-2 updates at most 22.7 %): every run lets the
    layer above skip most steps and the runs keep about one boundary per word (the rate target); a single
    run finds the words (F1 >= 0.9) on fewer than half of the seeds, and the others place their boundaries
    about as well as chance (F1 0.41-0.70, chance about 0.44 on these short words), which is why the recipe
    keeps the best of five (the test below)."""
    f1s, rates = [], []
    for seed in range(10):
        m, corpus = train_synthetic(seed=seed)
        assert m.options["detectors"] == 1.0, "the warm-up should have switched the detectors on"
        tr, f1 = word_scores(m, corpus)
        z1 = tr.z[0] > 0.5
        assert 0.0 < z1.mean() <= 0.25, (seed, z1.mean())  # words end on 17.6 % of the steps
        assert tr.updates[1] < 0.25 * len(tr), (seed, "the second layer should update about once per word")
        f1s.append(f1)
        rates.append(z1.mean())
    assert 0.16 <= np.median(rates) <= 0.19, rates
    assert sum(f >= 0.9 for f in f1s) >= 3, f1s
    assert np.median(f1s) >= 0.6, f1s


@pytest.mark.usefixtures("one_thread")
def test_default_recipe_with_restarts_keeps_a_run_that_finds_the_words():
    """The whole recipe: five runs of the defaults (seeds 5-9: the study's recipe seed 1), the one with
    the lowest BPC on validation text after the 2,000 characters scored kept (``best_of``); the kept
    run's boundaries sit on the word ends (F1 >= 0.9; the recipe reached it on 30 of 30 runs, seeds 0-9
    with the ``avx512`` and ``avx2`` modules on one thread and ``avx512`` on two on an AMD Zen 5, and this
    seed keeps seed 6's run on each, F1 0.94-0.96: docs/studies/boundary_protocol.md)."""
    corpus = synthetic_corpus()
    m, results = msr.best_of(
        lambda s: msr.HMLSTM(corpus.vocab_size, 16, (32, 32), seed=s),
        corpus.train,
        corpus.valid[2000:],
        restarts=5,
        epochs=40,
        seed=5,
        make_optimizer=lambda: msr.optim.Adam(5e-3),
        clip_norm=1.0,
        batch_size=32,
        bptt=50,
        progress=False,
    )
    assert [r["seed"] for r in results] == [5, 6, 7, 8, 9]
    kept = [r for r in results if r["chosen"]]
    assert len(kept) == 1 and kept[0]["valid_loss"] == min(r["valid_loss"] for r in results)
    tr, f1 = word_scores(m, corpus)
    assert f1 >= 0.9, (tr.scores[0], results)


@pytest.mark.usefixtures("one_thread")
def test_three_layer_defaults_find_words_and_phrases_over_seeds():
    """The default recipe of a 3-layer model, the band recipe (docs/models/hm_lstm.md, "The default recipe"),
    from the defaults alone, over three seeds: each seed's five runs trained for 40 epochs and compared at the
    end, the one of lowest BPC on validation text after the 2,000 characters scored kept. The seeds 25, 35, 45
    (model seeds 25-29, 35-39, 45-49) are the recipe table's seeds 5, 7 and 9 ("--configs package"), whose
    runs found both levels on each of the set-ups measured; which seed fails moves with the CPU (floating-point
    summation order differs between core modules and between CPUs running the same module, and training
    amplifies it), so the distribution is asserted. On every seed layer 1 marks the word ends (F1 >= 0.9) and
    layer 3 updates about once a phrase; layer 2 marks the phrase ends (F1 against the step after each
    phrase's last symbol >= 0.7) on at least two of the three, with a median >= 0.8. Measured (z1 F1 / z2 F1
    per seed):

    - AMD EPYC Zen 5, ``avx512``, 1 and 2 threads, ``avx2`` forced, 1 thread: 0.97-1.00 / 0.99-1.00,
      1.00 / 0.87-1.00, 1.00 / 0.93-0.95.
    - AMD EPYC Zen 3, ``avx2``, 1 and 2 threads: 0.97-1.00 / 0.91-1.00, 1.00 / 0.97-1.00, 1.00 / 0.92-0.93.

    Over seeds 0-9 it finds both levels on 6-7 of 10 on each of those set-ups."""
    corpus = synthetic_corpus()
    phrases = first_seen(corpus.boundaries["valid"]["phrase"][:2000])
    f1_z2 = []
    for seed in (25, 35, 45):
        m, results = msr.best_of(
            lambda s: msr.HMLSTM(corpus.vocab_size, 16, (32, 32, 32), seed=s),
            corpus.train,
            corpus.valid[2000:],
            restarts=5,
            epochs=40,
            seed=seed,
            make_optimizer=lambda: msr.optim.Adam(5e-3),
            clip_norm=1.0,
            batch_size=32,
            bptt=50,
            progress=False,
        )
        assert m.config["detector_input"] == "below" and m.config["warmup"] == [250, 750]  # the band recipe
        assert m.config["rate_slack_above"] == [0.2, 0.0]
        assert [r["chosen"] for r in results].count(True) == 1
        assert all(r["epochs"] == 40 and r["compared_after"] == 40 for r in results)  # compared at the end
        tr, f1 = word_scores(m, corpus)
        z2 = boundary_scores(tr.z[1] > 0.5, phrases, 1)
        assert f1 >= 0.9, (seed, tr.scores[0], results)
        assert tr.updates[2] < 0.1 * len(tr), (seed, "the third layer should update about once per phrase")
        f1_z2.append(z2["f1"])
    assert sum(f >= 0.7 for f in f1_z2) >= 2, f1_z2
    assert np.median(f1_z2) >= 0.8, f1_z2


def test_plots(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    h = msr.data.synthetic_hierarchy(n_chars=300, seed=1)
    corpus = h.corpus(valid_fraction=0.0, test_fraction=0.0)
    m = msr.HMLSTM(corpus.vocab_size, 8, (6, 5, 4), seed=2)
    tr = m.trace(h.text[:100], corpus.vocab, reference_boundaries=h.word_boundaries[:100])
    fig, axes = plt.subplots(2, 1)
    ax = msr.plot.boundaries(tr, width=40, ax=axes[0])
    assert ax is axes[0]
    assert len(ax.texts) == 100 and ax.texts[0].get_text() == ("_" if h.text[0] == " " else h.text[0])
    img = ax.images[0].get_array()
    assert img.shape == (3 * (1 + 2 + 1 + 1), 40)  # 3 rows of text, z^1, z^2, reference, gap
    np.testing.assert_array_equal(img[1, :40], tr.z[0, :40] > 0.5)
    ax2 = msr.plot.hidden_norms(tr, ax=axes[1])
    assert ax2 is axes[1]
    assert ax2.images[0].get_array().shape[:2] == (5, 100)  # 3 norm rows + 2 boundary rows
    fig.savefig(tmp_path / "hm.png")
    assert (tmp_path / "hm.png").stat().st_size > 1000
    assert msr.plot.boundaries(tr) is not None
    w = tr.window(10, 50)
    assert w.z.shape == (3, 40) and w.text == tr.text[10:50] and w.updates[0] == 40
    with pytest.raises(ValueError, match="width"):
        msr.plot.boundaries(tr, width=0)
    with pytest.raises(TypeError, match="trace"):
        msr.plot.hidden_norms({"z": 1})
    one = msr.HMLSTM(corpus.vocab_size, 8, (6,), seed=2).trace(h.text[:20], corpus.vocab)  # no detector
    with pytest.raises(ValueError, match="1 layer.*no boundary detector"):
        msr.plot.boundaries(one)
    plt.close("all")


def test_ptb_preset_builds_the_papers_model():
    from multiscale_rnn.cli import model_from_settings, resolve_settings

    s = resolve_settings("ptb-char-hm-lstm")
    assert (s["batch_size"], s["bptt"], s["lr"], s["clip_norm"]) == (64, 100, 2e-3, 1.0)
    assert s["anneal"] == {"slope": [1.0, 5.0, 0.04]}
    m = model_from_settings(s, vocab_size=50)
    assert isinstance(m, msr.HMLSTM)
    assert m.config["hidden_sizes"] == [512, 512, 512] and m.config["embed_size"] == 128
    assert m.config["layer_norm"] and m.config["boundary"] == "step" and m.config["head_size"] == 512
    assert m.parameters()["output.embed.weight"].shape == (512, 1536)
    assert msr.build_model("hm-lstm", vocab_size=5, embed_size=3, hidden_sizes=(4, 4)).__class__ is msr.HMLSTM


def test_trainer_anneals_the_slope():
    h = msr.data.synthetic_hierarchy(n_chars=3000, seed=0)
    corpus = h.corpus()
    m = msr.HMLSTM(corpus.vocab_size, 8, (8, 8), seed=0)
    seen = []
    trainer = msr.Trainer(
        m,
        optimizer=msr.optim.Adam(1e-3),
        batch_size=4,
        bptt=20,
        progress=False,
        model_options={"slope": msr.schedules.linear(1.0, 5.0, per_epoch=1.5)},
    )
    trainer.fit(corpus.train, epochs=4, log=lambda d: seen.append(m.slope) if d.get("event") == "epoch" else None)
    assert seen == [1.0, 2.5, 4.0, 5.0]


def test_rate_target_reads_zbar_from_the_reducer():
    # zbar^l of each layer with a target is a batch statistic: the reducer sees it after the forward, and what
    # it leaves is what the rate-target term and its gradient read (data parallelism: the whole batch's zbar)
    rng = np.random.default_rng(21)
    targets, mu = [0.3, 0.1], 2.0
    point = dict(rate_slack_below=0.0, rate_slack_above=0.0)  # no band: the term mu (zbar - r)^2 everywhere
    m = make(rate_target=targets, rate_weight=mu, rate_penalty=0.1, **point)
    tok, tgt = batch(rng, steps=8, batch=4)
    st = random_state(m, rng, batch=4)
    seen = []
    loss, grads, _ = m.loss_and_grad(tok, tgt, st, reducer=lambda s: seen.append(s.copy()))
    rec = m.records()
    zbar = [rec[f"z_l{l}"].mean() for l in range(2)]
    assert len(seen) == 1 and seen[0].dtype == np.float64
    np.testing.assert_allclose(seen[0], zbar, rtol=1e-15)
    assert 0 < zbar[0] < 1 and 0 < zbar[1] < 1
    plain, g_plain, _ = m.loss_and_grad(tok, tgt, st)  # left as they were: the same as no reducer
    assert loss.aux == plain.aux
    for k in grads:
        np.testing.assert_array_equal(grads[k], g_plain[k], err_msg=k)
    # returned (not changed in place): at zbar = r the term and its gradient vanish, leaving the rate penalty's
    at, g_at, _ = m.loss_and_grad(tok, tgt, st, reducer=lambda s: np.array(targets))
    assert at.aux["boundary_target"] == 0.0 and at.aux["boundary_rate"] == plain.aux["boundary_rate"]
    g_none = make(rate_target=None, rate_penalty=0.1).loss_and_grad(tok, tgt, st)[1]
    for k in grads:
        np.testing.assert_allclose(g_at[k], g_none[k], rtol=1e-13, atol=1e-15, err_msg=k)

    def halfway(s):
        s += 0.5 * (np.array(targets) - s)

    half, _, _ = m.loss_and_grad(tok, tgt, st, reducer=halfway)
    want = sum(mu * (0.5 * (z - r)) ** 2 for z, r in zip(zbar, targets))
    assert half.aux["boundary_target"] == pytest.approx(want, rel=1e-12)


def test_reducer_errors_are_clear():
    rng = np.random.default_rng(22)
    m = make(rate_target=[0.3, 0.1])
    tok, tgt = batch(rng)
    with pytest.raises(TypeError, match="reducer must be callable"):
        m.loss_and_grad(tok, tgt, reducer=3)
    with pytest.raises(ValueError, match=r"the reducer must return None or 2 batch statistics, got shape \(3,\)"):
        m.loss_and_grad(tok, tgt, reducer=lambda s: np.zeros(3))

    def nan(s):
        s[1] = np.nan

    with pytest.raises(ValueError, match="the reducer left batch statistic 'zbar_l1' at -?nan, not a finite number"):
        m.loss_and_grad(tok, tgt, reducer=nan)
    with pytest.raises(ZeroDivisionError):
        m.loss_and_grad(tok, tgt, reducer=lambda s: 1 / 0)
    m.loss_and_grad(tok, tgt, reducer=lambda s: None)  # the model is usable after those

    def never(s):
        raise AssertionError("a model without rate targets has no batch statistics")

    make(rate_target=None).loss_and_grad(tok, tgt, reducer=never)
