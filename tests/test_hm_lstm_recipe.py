"""HM-LSTM boundary discovery: the boundary-rate term (finite differences, the PyTorch reference,
skipping == masking), the options changeable between chunks, the boundary-bias initialisation,
the generator's text without separators, and the default recipe finding word boundaries."""

import numpy as np
import pytest
from test_hm_lstm import HS, B, E, T, V, batch, make, random_state

import multiscale_rnn as msr
from multiscale_rnn.reference import hm_lstm as reference
from multiscale_rnn.testing import numeric_gradient


def total_fd_error(m, tok, tgt, st, n=150, eps=1e-6, seed=0):
    """Relative error of the gradient of the whole objective (cross-entropy + aux terms)."""
    loss, _, _ = m.loss_and_grad(tok, tgt, st)
    assert loss.aux, "the check needs the auxiliary term on"
    grad = m.flat_gradients().copy()
    flat = m.flat_parameters()
    idx = np.random.default_rng(seed).choice(len(flat), min(n, len(flat)), replace=False)
    fd = numeric_gradient(lambda: m.loss_and_grad(tok, tgt, st)[0].total, flat, eps, idx)
    an = grad[idx]
    return np.linalg.norm(fd - an) / (np.linalg.norm(fd) + np.linalg.norm(an))


@pytest.mark.parametrize(
    "opts", [{}, {"flush_cut": True, "copy_z": "recompute", "top_boundary": True}], ids=["plain", "cut,recompute,top"]
)
def test_rate_term_soft_finite_differences(opts):
    rng = np.random.default_rng(21)
    m = make(boundary="soft", rate_penalty=0.7, **opts)
    tok, tgt = batch(rng)
    st = random_state(m, rng, soft=True)
    loss, _, _ = m.loss_and_grad(tok, tgt, st)
    rec = m.records()
    zsum = sum(rec[f"z_l{l}"].sum() for l in range(m.num_layers))
    assert loss.aux["boundary_rate"] == pytest.approx(0.7 * zsum / (B * T), rel=1e-12)
    assert loss.total == pytest.approx(float(loss) + loss.aux["boundary_rate"], rel=1e-12)
    assert total_fd_error(m, tok, tgt, st) < 1e-6
    # two chunks with the state carried: the second chunk's gradient is checked from the carried state
    _, _, st2 = m.loss_and_grad(tok, tgt, st)
    assert total_fd_error(m, tok[:, ::-1].copy(), tgt, st2, seed=1) < 1e-6


RATE_OPTIONS = [
    {"boundary": "step"},
    {"boundary": "step", "gradient": "blend", "flush_cut": True},
    {"boundary": "sample", "copy_z": "recompute"},
    {"boundary": "step", "top_boundary": True, "layer_norm": True},
]


@pytest.mark.parametrize("opts", RATE_OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_rate_term_matches_pytorch_reference(opts):
    pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    m = make(rate_penalty=0.4, **opts)
    tok, tgt = batch(rng, steps=8, batch=4)
    st = random_state(m, rng, batch=4)
    loss, grads, state = m.loss_and_grad(tok, tgt, st)
    rec = m.records()
    rloss, rgrads, rstate = reference.loss_and_grad(m, tok, tgt, st, records=rec)
    assert loss == pytest.approx(rloss, rel=1e-12)
    assert loss.aux["boundary_rate"] > 0
    without = make(rate_penalty=0.0, **opts)
    g0 = without.loss_and_grad(tok, tgt, st)[1]
    assert any(np.abs(grads[k] - g0[k]).max() > 1e-6 for k in grads), "the rate term should change gradients"
    for k in grads:
        np.testing.assert_allclose(grads[k], rgrads[k], rtol=1e-9, atol=1e-12, err_msg=k)
    for k in state:
        np.testing.assert_allclose(state[k], rstate[k], rtol=1e-12, atol=1e-14, err_msg=k)


@pytest.mark.parametrize(
    "terms", [{"rate_penalty": 0.5}, {"rate_target": [0.5, 0.05], "rate_weight": 4.0}], ids=["penalty", "target"]
)
def test_rate_term_skipping_equals_masking(terms):
    rng = np.random.default_rng(8)
    tok, tgt = batch(rng, steps=7, batch=5)
    out = []
    for skip in (True, False):
        m = make(skip=skip, z_bias=-0.5, **terms)
        st = random_state(m, np.random.default_rng(9), batch=5)
        loss, grads, _ = m.loss_and_grad(tok, tgt, st)
        assert loss.aux
        out.append((loss.total, grads))
    assert out[0][0] == pytest.approx(out[1][0], rel=1e-12)
    for k in out[0][1]:
        np.testing.assert_allclose(out[0][1][k], out[1][1][k], rtol=1e-10, atol=1e-13, err_msg=k)


def test_options_changed_between_chunks():
    rng = np.random.default_rng(10)
    tok, tgt = batch(rng)
    st = random_state(make(), rng)
    m = make(rate_penalty=0.0)
    assert not m.loss_and_grad(tok, tgt, st)[0].aux
    m.set_option("rate_penalty", 0.25)
    assert m.loss_and_grad(tok, tgt, st)[0].aux["boundary_rate"] > 0
    # switching the gradient reading gives what a model built with that reading gives
    m.set_option("blend", 1.0)
    g = {k: v.copy() for k, v in m.loss_and_grad(tok, tgt, st)[1].items()}
    built = make(rate_penalty=0.25, gradient="blend")
    g2 = built.loss_and_grad(tok, tgt, st)[1]
    for k in g:
        np.testing.assert_allclose(g[k], g2[k], rtol=1e-12, atol=1e-14, err_msg=k)
    with pytest.raises(ValueError, match="rate_penalty"):
        m.set_option("rate_penalty", -1.0)
    with pytest.raises(ValueError, match="blend"):
        m.set_option("blend", 0.5)
    with pytest.raises(ValueError, match="blend"):
        make(boundary="soft").set_option("blend", 0.0)
    with pytest.raises(ValueError, match="rate_penalty"):
        msr.HMLSTM(V, E, HS, rate_penalty=-0.1)


def test_boundary_bias_at_initialisation_and_after_the_warm_up():
    a = msr.HMLSTM(V, E, HS, seed=4, boundary_bias=0.0)
    b = msr.HMLSTM(V, E, HS, seed=4, boundary_bias=-1.5)
    pa, pb = a.parameters(), b.parameters()
    for l, h in enumerate(HS):
        d = pb[f"bias_l{l}"] - pa[f"bias_l{l}"]
        want = np.zeros_like(d)
        if l < len(HS) - 1:
            want[4 * h] = -1.5
        np.testing.assert_array_equal(d, want)
    with pytest.raises(ValueError, match="boundary_bias"):
        msr.HMLSTM(V, E, HS, boundary_bias=float("nan"))
    # the shift survives the warm-up: a detector held off and switched on restarts at zhat = 0.05 + shift * a / 2
    for shift, slope in ((0.0, 1.0), (-1.5, 1.0), (0.6, 2.0)):
        m = msr.HMLSTM(V, E, HS, seed=4, boundary_bias=shift, slope=slope)
        m.set_option("detectors", 0)
        m.set_option("detectors", 1)
        for l, h in enumerate(HS[:-1]):
            b = m.parameters()[f"bias_l{l}"][4 * h]
            assert b == pytest.approx((2 * m.RESTART_ZHAT - 1) / slope + shift)
            assert np.clip((slope * b + 1) / 2, 0, 1) == pytest.approx(min(1.0, max(0.0, 0.05 + shift * slope / 2)))


def test_text_without_separators():
    spaced = msr.data.synthetic_hierarchy(n_chars=3000, seed=3)
    joined = msr.data.synthetic_hierarchy(n_chars=3000, seed=3, separator="")
    assert " " not in joined.text
    assert spaced.lexicon == joined.lexicon and spaced.templates == joined.templates
    # the same words in the same order, with the same boundaries at their letters
    words = [w for w in spaced.text.replace(".", " ").replace("!", " ").replace("?", " ").replace(";", " ").split()]
    ends = np.flatnonzero(joined.word_boundaries)
    starts = np.r_[0, ends[:-1] + 1]
    cut = [joined.text[s : e + 1].rstrip(".!?;") for s, e in zip(starts, ends)]
    assert len(cut) > len(words) and cut[: len(words) - 1] == words[:-1]  # the spaced text's last word is cut
    assert np.array_equal(joined.phrase_boundaries, np.isin(list(joined.text), list(".!?;")))
    assert not (joined.phrase_boundaries & ~joined.word_boundaries).any()
    # the space-separated boundaries are what the text's words say
    np.testing.assert_array_equal(spaced.word_boundaries[:-10], msr.data.word_boundaries(spaced.text)[:-10])
    with pytest.raises(ValueError, match="separator"):
        msr.data.synthetic_hierarchy(n_chars=10, separator="a")
    with pytest.raises(ValueError, match="separator"):
        msr.data.synthetic_hierarchy(n_chars=10, separator="--")


@pytest.mark.parametrize("top_boundary", [False, True])
def test_boundary_map_rows_follow_the_trace(tmp_path, top_boundary):
    """One row per layer with a detector (z^L too with top_boundary), the highest on top, above the
    reference and the text; long text wraps; every cell is the trace's z."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    h = msr.data.synthetic_hierarchy(n_chars=400, seed=1)
    corpus = h.corpus(valid_fraction=0.0, test_fraction=0.0)
    m = msr.HMLSTM(corpus.vocab_size, 8, (6, 5, 4), seed=2, top_boundary=top_boundary, boundary_bias=0.3)
    n, width = 130, 40
    tr = m.trace(h.text[:n], corpus.vocab, reference_boundaries=h.word_boundaries[:n])
    want_layers = [2, 1, 0] if top_boundary else [1, 0]
    img, labels, band, layers = msr.plot.boundary_rows(tr, width=width)
    assert layers == want_layers
    assert labels == [f"$z^{{{l + 1}}}$" for l in want_layers] + ["ref", "text", ""]
    assert img.shape == (4 * band, width)  # 130 steps wrap into 4 bands of 40
    for t in range(n):
        r, c = divmod(t, width)
        for j, l in enumerate(want_layers):
            assert img[r * band + j, c] == float(tr.z[l, t] > 0.5), (t, l)
        assert img[r * band + len(want_layers), c] == (0.5 if tr.reference[t] else 0.0)
    assert np.isnan(img[3 * band :, n - 3 * width :]).all()  # past the end of the text
    assert {tuple(np.unique(tr.z[l])) for l in want_layers} >= {(0.0, 1.0)}, "the check needs both values"
    ax = msr.plot.boundaries(tr, width=width)
    assert len(ax.texts) == n
    assert ax.texts[width].get_position() == (0, band + len(want_layers) + 1)  # 2nd band's text row
    np.testing.assert_array_equal(np.ma.filled(ax.images[0].get_array(), np.nan), img)
    only = msr.plot.boundary_rows(tr, width=width, layers=[0], reference=False)
    assert only[1] == ["$z^{1}$", "text", ""]
    fig = ax.figure
    fig.savefig(tmp_path / "map.png")
    assert (tmp_path / "map.png").stat().st_size > 1000
    plt.close("all")


def test_defaults_and_the_papers_reading():
    m = msr.HMLSTM(V, E, HS[:2])
    # the 2-layer defaults read z as the paper does (a switch), with the flush cut and the detectors below
    assert m.config["gradient"] == "switch" and m.config["flush_cut"] is True
    assert m.config["detector_input"] == "below" and m.options["blend_l0"] == 0.0
    assert m.config["rate_penalty"] == 0.0 and m.config["boundary_bias"] == 0.0
    paper = msr.HMLSTM(V, E, HS, gradient="switch", flush_cut=False, detector_input="all")
    assert paper.config["gradient"] == "switch" and not paper.config["flush_cut"]
    from multiscale_rnn.cli import model_from_settings, resolve_settings

    s = resolve_settings("ptb-char-hm-lstm")
    assert s["options"]["gradient"] == "switch" and s["options"]["flush_cut"] is False
    # the paper's model (eq. 6: every detector reads everything) and the real-text recipes (the word recipe
    # with a second target) hold their options against a 3-layer model's own defaults, the band recipe
    for preset, target, weight in (
        ("ptb-char-hm-lstm", [], 1.0),
        ("ptb-char-hm-lstm-recipe", [0.18, 0.06], 5.0),
        ("text8-hm-lstm-recipe", [0.18, 0.06], 5.0),
    ):
        c = model_from_settings(resolve_settings(preset), vocab_size=V).config
        assert c["detector_input"] == "all", preset
        assert (c["rate_target"], c["rate_weight"]) == (target, weight), preset
        assert c["warmup"] == (0 if preset == "ptb-char-hm-lstm" else 500), preset
        assert c["gradient"] == ("switch" if preset == "ptb-char-hm-lstm" else "blend"), preset
        if preset != "ptb-char-hm-lstm":  # no target there, so no band to hold
            assert (c["rate_slack_below"], c["rate_slack_above"]) == (0.0, 0.0), preset


def test_defaults_by_depth(tmp_path):
    """Up to 2 layers the defaults are the protocol recipe, from 3 layers the band recipe (docs/models/hm_lstm.md,
    "The default recipe"); every recipe names every option that follows the depth; an option given keeps its value
    and the others follow the depth."""
    from multiscale_rnn.models.hm_lstm import LEVELS_RECIPE, PHRASE_RECIPE, PROTOCOL_RECIPE, WORD_RECIPE

    one, two, three, four = (msr.HMLSTM(V, E, (4,) * L).config for L in (1, 2, 3, 4))
    by_depth = {o.name for o in msr.HMLSTM.family_options if o.default is None or o.default == "auto"}
    for recipe in (WORD_RECIPE, PROTOCOL_RECIPE, PHRASE_RECIPE, LEVELS_RECIPE):
        assert set(recipe) == by_depth
    expected = dict(detector_input="below", gradient="switch", rate_target=[0.18], rate_weight=0.3, warmup=250)
    expected.update(rate_slack_below=0.0, rate_slack_above=0.0, compare_at="end")
    assert {k: two[k] for k in PROTOCOL_RECIPE} == expected
    assert {k: one[k] for k in PROTOCOL_RECIPE} == {**expected, "rate_target": []}  # no detector, no target
    # the protocol recipe is the word recipe (the core's defaults) with four options changed
    changed = {k for k in WORD_RECIPE if WORD_RECIPE[k] != PROTOCOL_RECIPE[k]}
    assert changed == {"detector_input", "gradient", "rate_weight", "warmup"}
    word = msr.HMLSTM(V, E, (4, 4), **WORD_RECIPE)
    assert word.options["blend_l0"] == 1.0 and word.options["detector_below_l0"] == 0.0
    assert msr.HMLSTM(V, E, (4, 4)).options["detector_below_l0"] == 1.0
    # a model saved under the former 2-layer defaults (the word recipe) loads with them, not today's
    back = msr.checkpoint.load(msr.checkpoint.save(tmp_path / "word.npz", word)).model
    assert {k: back.config[k] for k in WORD_RECIPE} == {**WORD_RECIPE, "rate_target": [0.18]}
    assert back.options == word.options
    assert {k: three[k] for k in LEVELS_RECIPE} == LEVELS_RECIPE
    assert {k: four[k] for k in LEVELS_RECIPE} == LEVELS_RECIPE  # layer 3's detector: "below", "switch", no target
    assert msr.HMLSTM(V, E, (4,)).config["rate_target"] == []  # no detector
    # the phrase recipe, the 3-layer defaults before the band recipe, given by name
    phrase = msr.HMLSTM(V, E, HS, **PHRASE_RECIPE)
    assert {k: phrase.config[k] for k in PHRASE_RECIPE} == PHRASE_RECIPE
    assert [phrase.options[f"blend_l{l}"] for l in range(3)] == [1.0, 0.0, 0.0]
    # what the config stores is what the model runs: the core options follow the resolved values
    m = msr.HMLSTM(V, E, HS)
    assert [m.options[f"detector_below_l{l}"] for l in range(3)] == [1.0, 1.0, 1.0]
    assert [m.options[f"blend_l{l}"] for l in range(3)] == [0.0, 0.0, 0.0]
    assert (m.options["rate_target_l0"], m.options["rate_target_l1"], m.options["rate_weight"]) == (0.18, 0.05, 1.0)
    assert (m.options["rate_slack_below_l0"], m.options["rate_slack_above_l0"]) == (0.12, 0.2)
    assert (m.options["rate_slack_below_l1"], m.options["rate_slack_above_l1"]) == (0.0, 0.0)
    # best_of compares the default recipes' restarts at the end, the phrase recipe's before layer 2's detector
    assert m.selection_step() is None and msr.HMLSTM(V, E, HS[:2]).selection_step() is None
    assert phrase.selection_step() == 1500
    assert msr.HMLSTM(V, E, HS, warmup=[500, 1500]).selection_step() is None  # compare_at is "end"
    assert msr.HMLSTM(V, E, HS, **dict(PHRASE_RECIPE, warmup=[500, 500])).selection_step() is None  # same starts
    assert msr.HMLSTM(V, E, HS, **dict(PHRASE_RECIPE, warmup=800)).selection_step() is None
    with pytest.raises(ValueError, match="compare_at must be one of 'end', 'last_start', got 'start'"):
        msr.HMLSTM(V, E, HS, compare_at="start")
    # an option given keeps its value, the rest follow the depth; "auto" asks for the depth's target
    mixed = msr.HMLSTM(V, E, HS, detector_input="all", rate_target=[0.18, 0.06]).config
    assert mixed["detector_input"] == "all" and mixed["rate_target"] == [0.18, 0.06] and mixed["rate_weight"] == 1.0
    assert mixed["rate_slack_below"] == [0.12, 0.0]
    assert msr.HMLSTM(V, E, HS, rate_target="auto").config["rate_target"] == [0.18, 0.05]
    assert msr.HMLSTM(V, E, HS, rate_target=None).config["rate_target"] == []
    # soft boundaries have only the blend reading
    assert msr.HMLSTM(V, E, HS, boundary="soft").config["gradient"] == "blend"
    with pytest.raises(ValueError, match="rate_target must be .*'auto', got 'atuo'"):
        msr.HMLSTM(V, E, HS, rate_target="atuo")
    # a checkpoint stores the resolved values, so a model saved under these defaults loads the same later
    path = msr.checkpoint.save(tmp_path / "three.npz", m)
    assert {k: msr.checkpoint.load(path).model.config[k] for k in LEVELS_RECIPE} == LEVELS_RECIPE
    path = msr.checkpoint.save(tmp_path / "phrase.npz", phrase)
    assert {k: msr.checkpoint.load(path).model.config[k] for k in PHRASE_RECIPE} == PHRASE_RECIPE


def test_step_schedule_switches_the_gradient_reading():
    sched = msr.schedules.step(1, 0, at_epoch=2)
    assert [sched(e) for e in (0, 1, 1.9, 2, 3)] == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert (
        msr.schedules.step(0.0, 0.5, at_step=10)(0, 9) == 0.0 and msr.schedules.step(0.0, 0.5, at_step=10)(0, 10) == 0.5
    )
    with pytest.raises(ValueError, match="exactly one"):
        msr.schedules.step(1, 0)
    with pytest.raises(ValueError, match="finite"):
        msr.schedules.step(float("inf"), 0, at_epoch=1)
    h = msr.data.synthetic_hierarchy(n_chars=3000, seed=0)
    corpus = h.corpus()
    m = msr.HMLSTM(corpus.vocab_size, 8, (8, 8), seed=0)
    seen = []
    trainer = msr.Trainer(
        m, optimizer=msr.optim.Adam(1e-3), batch_size=4, bptt=20, progress=False, model_options={"blend": sched}
    )
    trainer.fit(
        corpus.train, epochs=4, log=lambda d: seen.append(m.options["blend"]) if d.get("event") == "epoch" else None
    )
    assert seen == [1.0, 1.0, 0.0, 0.0]


# ---- the rate target (rate_target, rate_weight) and the boundary warm-up (detectors, warmup) ------------


@pytest.mark.parametrize(
    "opts",
    [
        {"rate_target": [0.3, 0.1]},
        {
            "rate_target": [0.2, 0.6, 0.05],
            "top_boundary": True,
            "flush_cut": True,
            "rate_penalty": 0.3,
            "layer_norm": True,
        },
        {"rate_target": [0.2, 0.9], "rate_slack_below": 0.05, "rate_slack_above": 0.02},
        {"rate_target": [0.2, 0.9], "rate_slack_below": [0.0, 0.1], "rate_slack_above": [0.03, 0.0]},
    ],
    ids=["two-layers", "top,cut,penalty,ln", "slack", "slack-per-layer"],
)
def test_rate_target_soft_finite_differences(opts):
    """mu sum_l e_l^2 with e_l = zbar^l - r_l outside the slack band, zbar^l the chunk mean of z^l_t: its
    gradient 2 mu e_l / (T B) on every z^l_t, checked on the whole objective over two chunks with the state
    carried. With slack, layer 1's rate lies above its band and layer 2's below."""
    rng = np.random.default_rng(31)
    m = make(boundary="soft", rate_weight=3.0, **opts)
    tok, tgt = batch(rng)
    st = random_state(m, rng, soft=True)
    loss, _, _ = m.loss_and_grad(tok, tgt, st)
    rec = m.records()
    n = len(opts["rate_target"])
    below = [m.options[f"rate_slack_below_l{l}"] for l in range(n)]  # per layer: given, or the depth's default band
    above = [m.options[f"rate_slack_above_l{l}"] for l in range(n)]
    d = [rec[f"z_l{l}"].mean() - r for l, r in enumerate(opts["rate_target"])]
    if "rate_slack_below" in opts:  # outside the band on both sides, away from its kinks
        assert d[0] > above[0] + 0.05 and d[1] < -below[1] - 0.05
    want = sum(3.0 * (x - np.clip(x, -below[l], above[l])) ** 2 for l, x in enumerate(d))
    assert loss.aux["boundary_target"] == pytest.approx(want, rel=1e-12)
    assert loss.total == pytest.approx(float(loss) + sum(loss.aux.values()), rel=1e-12)
    assert total_fd_error(m, tok, tgt, st) < 1e-6
    _, _, st2 = m.loss_and_grad(tok, tgt, st)
    assert total_fd_error(m, tok[:, ::-1].copy(), tgt, st2, seed=1) < 1e-6


TARGET_OPTIONS = [
    {
        "boundary": "step",
        "gradient": "blend",
        "flush_cut": True,
        "head": "linear",
        "rate_slack_below": 0.0,
        "rate_slack_above": 0.0,
    },
    {"boundary": "step", "gradient": "switch"},  # the 3-layer default band
    {"boundary": "sample", "copy_z": "recompute", "gradient": "blend"},
    {"boundary": "step", "top_boundary": True, "layer_norm": True, "rate_penalty": 0.2},
    {"boundary": "step", "gradient": "switch", "rate_slack_below": 0.1, "rate_slack_above": 0.05},
    {"boundary": "step", "gradient": "switch", "rate_slack_below": [0.1, 0.0], "rate_slack_above": [0.0, 0.05]},
]


@pytest.mark.parametrize("opts", TARGET_OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_rate_target_matches_pytorch_reference(opts):
    pytest.importorskip("torch")
    rng = np.random.default_rng(12)
    targets = [0.7, 0.1, 0.4] if opts.get("top_boundary") else [0.7, 0.1]
    m = make(rate_target=targets, rate_weight=2.0, **opts)
    tok, tgt = batch(rng, steps=8, batch=4)
    st = random_state(m, rng, batch=4)
    loss, grads, state = m.loss_and_grad(tok, tgt, st)
    rloss, rgrads, rstate = reference.loss_and_grad(m, tok, tgt, st, records=m.records())
    assert loss == pytest.approx(rloss, rel=1e-12)
    assert loss.aux["boundary_target"] > 0
    if np.any(opts.get("rate_slack_below", 0)):  # the band shortens the excess without removing it
        plain = {**opts, "rate_slack_below": 0.0, "rate_slack_above": 0.0}
        full = make(rate_target=targets, rate_weight=2.0, **plain).loss_and_grad(tok, tgt, st)[0]
        assert 0 < loss.aux["boundary_target"] < full.aux["boundary_target"]
    g0 = make(rate_target=None, **opts).loss_and_grad(tok, tgt, st)[1]
    assert any(np.abs(grads[k] - g0[k]).max() > 1e-6 for k in grads), "the target should change gradients"
    for k in grads:
        np.testing.assert_allclose(grads[k], rgrads[k], rtol=1e-9, atol=1e-12, err_msg=k)
    for k in state:
        np.testing.assert_allclose(state[k], rstate[k], rtol=1e-12, atol=1e-14, err_msg=k)


def test_rate_target_option_values(tmp_path):
    m = msr.HMLSTM(V, E, HS, rate_target=0.18, rate_weight=5.0)
    assert m.config["rate_target"] == [0.18] and m.config["rate_weight"] == 5.0
    assert msr.HMLSTM(V, E, HS, rate_target=0.3).config["rate_target"] == [0.3]
    assert msr.HMLSTM(V, E, HS, rate_target=(0.3, 0.05)).config["rate_target"] == [0.3, 0.05]
    assert msr.HMLSTM(V, E, (4,)).config["rate_target"] == []  # no detector: the default targets nothing
    off = msr.HMLSTM(V, E, HS, rate_target=None, seed=1)
    assert off.config["rate_target"] == []
    # a checkpoint keeps "no target" (not the default)
    path = msr.checkpoint.save(tmp_path / "m.npz", off)
    back = msr.checkpoint.load(path).model
    assert back.config["rate_target"] == [] and back.options["rate_target_l0"] == -1.0
    tok, tgt = batch(np.random.default_rng(2))
    assert "boundary_target" not in back.loss_and_grad(tok, tgt)[0].aux
    with pytest.raises(ValueError, match="rate_target has 3 values"):
        msr.HMLSTM(V, E, HS, rate_target=[0.1, 0.1, 0.1])  # 2 detector layers
    # layer 1's target a floor, layer 2's a point
    floor = msr.HMLSTM(V, E, (4, 4, 4), rate_slack_above=[1, 0], rate_slack_below=0)
    assert floor.config["rate_slack_above"] == [1.0, 0.0] and floor.config["rate_slack_below"] == 0.0
    assert [floor.options[f"rate_slack_above_l{l}"] for l in range(3)] == [1.0, 0.0, 0.0]
    every = msr.HMLSTM(V, E, (4, 4, 4), rate_slack_below=0.05)
    assert [every.options[f"rate_slack_below_l{l}"] for l in range(3)] == [0.05] * 3
    back = msr.checkpoint.load(msr.checkpoint.save(tmp_path / "floor.npz", floor)).model
    assert back.config["rate_slack_above"] == [1.0, 0.0] and back.options["rate_slack_above_l0"] == 1.0
    with pytest.raises(ValueError, match=r"rate_slack_below must be a number >= 0, or a list .*got -0.1"):
        msr.HMLSTM(V, E, HS, rate_slack_below=-0.1)
    with pytest.raises(ValueError, match="rate_slack_above has 3 values, the model has 2 layer"):
        msr.HMLSTM(V, E, (4, 4, 4), rate_slack_above=[1, 0, 0])
    for bad in (1.5, -0.1, [0.2, 2.0], "x", [True]):
        with pytest.raises(ValueError, match="rate_target"):
            msr.HMLSTM(V, E, HS, rate_target=bad)
    with pytest.raises(ValueError, match="rate_weight"):
        msr.HMLSTM(V, E, HS, rate_weight=-1.0)
    m.set_option("rate_target_l1", 0.5)
    m.set_option("rate_weight", 0.0)
    assert not m.loss_and_grad(tok, tgt)[0].aux
    with pytest.raises(ValueError, match=r"rate_target_l0 must lie in \[0, 1\]"):
        m.set_option("rate_target_l0", 1.5)
    with pytest.raises(ValueError, match="'rate_target_l0' .. 'rate_target_l2'"):
        m.set_option("rate_target_l3", 0.1)


def test_detectors_held_off_and_restarted():
    """detectors=0: z = 0 everywhere (layer 1 a plain LSTM, the layers above COPY), no gradient reaches the
    boundary rows and the target term is off; detectors=1 restarts every boundary row at weights 0 and the
    bias that puts zhat at RESTART_ZHAT; setting the current value again changes nothing."""
    m = msr.HMLSTM(V, E, HS, dtype="float64", seed=5, slope=2.0)
    P = m.parameters()

    def rows():
        return np.concatenate(
            [
                np.r_[
                    P[f"weight_ih_l{l}"][4 * h],
                    P[f"weight_hh_l{l}"][4 * h],  # noqa: E731
                    P[f"bias_l{l}"][4 * h],
                ]
                for l, h in enumerate(HS[:-1])
            ]
        )

    before = rows().copy()
    m.set_option("detectors", 0)
    tok, tgt = batch(np.random.default_rng(3), steps=8)
    loss, grads, _ = m.loss_and_grad(tok, tgt)
    rec = m.records()
    assert not rec["z_l0"].any() and not rec["z_l1"].any()
    assert (rec["op_l0"] == 1).all() and (rec["op_l1"] == 0).all() and (rec["op_l2"] == 0).all()
    for l, h in enumerate(HS[:-1]):
        assert not grads[f"weight_ih_l{l}"][4 * h].any() and grads[f"bias_l{l}"][4 * h] == 0
    assert "boundary_target" not in loss.aux
    m.set_option("detectors", 0)  # again: nothing changes
    m.set_option("detectors", 1)
    after = rows()
    assert not np.array_equal(before, after)
    for l, h in enumerate(HS[:-1]):
        assert not P[f"weight_ih_l{l}"][4 * h].any() and not P[f"weight_hh_l{l}"][4 * h].any()
        assert not P[f"weight_td_l{l}"][4 * h].any()
        assert P[f"bias_l{l}"][4 * h] == pytest.approx((2 * m.RESTART_ZHAT - 1) / 2.0)
    m.forward(tok)
    zhat = m.records()["zhat_l0"]
    np.testing.assert_allclose(zhat[np.isfinite(zhat)], m.RESTART_ZHAT)
    assert m.loss_and_grad(tok, tgt)[0].aux["boundary_target"] > 0  # the target is back on
    P["bias_l0"][4 * HS[0]] = 0.7
    m.set_option("detectors", 1)  # already on: the learned row is kept
    assert P["bias_l0"][4 * HS[0]] == 0.7
    with pytest.raises(ValueError, match="detectors"):
        m.set_option("detectors", 0.5)


def test_trainer_applies_the_boundary_warmup():
    h = msr.data.synthetic_hierarchy(n_chars=4000, seed=0)
    corpus = h.corpus(valid_fraction=0.0, test_fraction=0.0)
    seen = []
    m = msr.HMLSTM(corpus.vocab_size, 8, (8, 8), seed=0, warmup=5)
    trainer = msr.Trainer(m, optimizer=msr.optim.Adam(1e-3), batch_size=4, bptt=20, progress=False)
    assert set(trainer.model_options) == {"detectors"}
    trainer.fit(
        corpus.train,
        epochs=1,
        max_chunks=8,
        log=lambda d: seen.append((d["step"], m.options["detectors"])) if d.get("event") == "chunk" else None,
    )
    assert seen[:6] == [(1, 0.0), (2, 0.0), (3, 0.0), (4, 0.0), (5, 0.0), (6, 1.0)]
    assert msr.Trainer(msr.HMLSTM(corpus.vocab_size, 8, (8, 8), warmup=0), progress=False).model_options == {}
    own = msr.Trainer(msr.HMLSTM(corpus.vocab_size, 8, (8, 8)), progress=False, model_options={"detectors": 1})
    assert own.model_options == {"detectors": 1}
    with pytest.raises(ValueError, match="warmup"):
        msr.HMLSTM(corpus.vocab_size, 8, (8, 8), warmup=-1)


def test_detectors_held_off_per_layer():
    """detectors_l1=0 holds only layer 2's detector off (z^2 = 0, no gradient to its row, its target off)
    while layer 1's keeps learning; switching it on restarts only its row; ``detectors`` reads 1 only when
    every detector is on."""
    band = dict(rate_slack_below=0, rate_slack_above=0)  # none: the target a point
    m = msr.HMLSTM(V, E, HS, dtype="float64", seed=5, rate_target=[0.3, 0.1], rate_weight=2.0, **band)
    P = m.parameters()
    h0, h1 = HS[0], HS[1]
    m.set_option("detectors_l1", 0)
    assert m.options["detectors"] == 0.0 and m.options["detectors_l1"] == 0.0
    tok, tgt = batch(np.random.default_rng(4), steps=8)
    loss, grads, _ = m.loss_and_grad(tok, tgt)
    rec = m.records()
    assert not rec["z_l1"].any() and rec["z_l0"].any()
    assert not grads["weight_ih_l1"][4 * h1].any() and grads["bias_l1"][4 * h1] == 0
    assert np.abs(grads["weight_ih_l0"][4 * h0]).max() > 0
    assert loss.aux["boundary_target"] == pytest.approx(2.0 * (rec["z_l0"].mean() - 0.3) ** 2, rel=1e-12)
    row0 = np.r_[P["weight_ih_l0"][4 * h0], P["bias_l0"][4 * h0]].copy()
    m.set_option("detectors_l1", 1)
    assert m.options["detectors"] == 1.0
    np.testing.assert_array_equal(np.r_[P["weight_ih_l0"][4 * h0], P["bias_l0"][4 * h0]], row0)  # untouched
    assert not P["weight_ih_l1"][4 * h1].any() and not P["weight_hh_l1"][4 * h1].any()
    assert P["bias_l1"][4 * h1] == pytest.approx(2 * m.RESTART_ZHAT - 1)
    loss = m.loss_and_grad(tok, tgt)[0]
    rec = m.records()
    want = 2.0 * ((rec["z_l0"].mean() - 0.3) ** 2 + (rec["z_l1"].mean() - 0.1) ** 2)
    assert loss.aux["boundary_target"] == pytest.approx(want, rel=1e-12)  # layer 2's target back on
    m.set_option("detectors", 0)
    assert m.options["detectors_l0"] == 0.0 and m.options["detectors_l1"] == 0.0
    with pytest.raises(ValueError, match="'detectors_l0', 'detectors_l1'"):
        m.set_option("detectors_l2", 0)  # the top layer has no detector
    with pytest.raises(ValueError, match="detectors_l0"):
        m.set_option("detectors_l0", 2)


def test_trainer_applies_a_warmup_per_layer(tmp_path):
    h = msr.data.synthetic_hierarchy(n_chars=4000, seed=0)
    corpus = h.corpus(valid_fraction=0.0, test_fraction=0.0)
    m = msr.HMLSTM(corpus.vocab_size, 8, (8, 8, 8), seed=0, warmup=[2, 4])
    assert m.config["warmup"] == [2, 4]
    assert msr.checkpoint.load(msr.checkpoint.save(tmp_path / "m.npz", m)).model.config["warmup"] == [2, 4]
    trainer = msr.Trainer(m, optimizer=msr.optim.Adam(1e-3), batch_size=4, bptt=20, progress=False)
    assert set(trainer.model_options) == {"detectors_l0", "detectors_l1"}
    seen = []
    trainer.fit(
        corpus.train,
        epochs=1,
        max_chunks=6,
        log=lambda d: (
            seen.append((d["step"], m.options["detectors_l0"], m.options["detectors_l1"]))
            if d.get("event") == "chunk"
            else None
        ),
    )
    assert seen[:5] == [(1, 0.0, 0.0), (2, 0.0, 0.0), (3, 1.0, 0.0), (4, 1.0, 0.0), (5, 1.0, 1.0)]
    # a short list: its last value for the layers above; a 0 leaves that layer on from the start
    assert set(msr.HMLSTM(V, E, (4, 4, 4, 4), warmup=[0, 7], rate_ramp=0).default_model_options()) == {
        "detectors_l1",
        "detectors_l2",
    }
    # the caller's entry of the family replaces the model's per-layer ones
    own = msr.Trainer(msr.HMLSTM(V, E, HS, warmup=[2, 4], rate_ramp=0), progress=False, model_options={"detectors": 1})
    assert own.model_options == {"detectors": 1}
    # the rate-target ramp follows `warmup` whoever switches the detectors (rate_ramp=0 drops it)
    assert set(
        msr.Trainer(
            msr.HMLSTM(V, E, HS, rate_ramp=[5, 0]), progress=False, model_options={"detectors": 1}
        ).model_options
    ) == {"detectors", "rate_target_l0"}
    own = msr.Trainer(msr.HMLSTM(V, E, HS, warmup=3, rate_ramp=0), progress=False, model_options={"detectors_l1": 0})
    assert own.model_options == {"detectors_l1": 0}
    with pytest.raises(ValueError, match="warmup has 3 values"):
        msr.HMLSTM(V, E, HS, warmup=[1, 2, 3])
    for bad in ([1.5], [], [-1, 2], "5", True):
        with pytest.raises(ValueError, match="warmup"):
            msr.HMLSTM(V, E, HS, warmup=bad)


def test_resume_across_a_warmup_per_layer_is_bit_exact(tmp_path):
    """A run stopped before layer 1's detector starts and again between the two starts, each piece resumed
    by a fresh model and trainer from the checkpoint, gives the uninterrupted run's losses and parameters
    bit for bit: the held rows, the restarts and the targets follow from the file and the schedules."""
    corpus = msr.data.synthetic_hierarchy(n_chars=4000, seed=0).corpus(valid_fraction=0.0, test_fraction=0.0)

    def run(model, **fit):
        losses = []
        trainer = msr.Trainer(model, optimizer=msr.optim.Adam(3e-3), batch_size=4, bptt=20, progress=False)
        trainer.fit(
            corpus.train, epochs=1, log=lambda d: losses.append(d["loss"]) if d["event"] == "chunk" else None, **fit
        )
        return losses

    def make(seed):
        return msr.HMLSTM(
            corpus.vocab_size,
            8,
            (8, 8, 8),
            seed=seed,
            warmup=[3, 6],  # noqa: E731
            rate_target=[0.2, 0.1],
            rate_ramp=[4, 3],
        )  # both targets ramped within the run

    straight = make(0)
    want = run(straight, max_chunks=10)
    path = tmp_path / "run.npz"
    got = run(make(0), checkpoint=path, max_chunks=2)
    for i, chunks in enumerate((3, 5)):  # from 2 to 5 (layer 1 starts at 3), then to 10 (layer 2 at 6)
        model = make(100 + i)  # other initial parameters: all must come from the file
        got += run(model, checkpoint=path, resume=True, max_chunks=chunks)
    assert got == want and len(got) == 10
    np.testing.assert_array_equal(model.flat_parameters(), straight.flat_parameters())
    assert model.options["detectors"] == 1.0 and model.options["rate_target_l0"] == pytest.approx(0.2)


def test_rate_target_ramped_from_each_detectors_start():
    """rate_ramp=[n1, n2]: layer l's target is negative (none) while its detector is held, 0 when it starts
    and its full value n_l updates later, applied after the detector's restart (which sets the full target);
    0 (the default) or a layer without a target: no ramp."""
    corpus = msr.data.synthetic_hierarchy(n_chars=4000, seed=0).corpus(valid_fraction=0.0, test_fraction=0.0)
    m = msr.HMLSTM(corpus.vocab_size, 8, (8, 8, 8), seed=0, warmup=[2, 3], rate_target=[0.2, 0.1], rate_ramp=[4, 0])
    trainer = msr.Trainer(m, optimizer=msr.optim.Adam(1e-3), batch_size=4, bptt=20, progress=False)
    assert list(trainer.model_options) == ["detectors_l0", "detectors_l1", "rate_target_l0"]
    seen = []
    trainer.fit(
        corpus.train,
        epochs=1,
        max_chunks=8,
        log=lambda d: (
            seen.append((m.options["rate_target_l0"], m.options["rate_target_l1"]))
            if d.get("event") == "chunk"
            else None
        ),
    )
    # chunk k runs at step k - 1: layer 1 held for steps 0-1 (a negative target: none), then 0, 0.05, ... 0.2
    want0 = [0.2 * (s - 2) / 4 for s in range(8)]
    np.testing.assert_allclose([v for v, _ in seen], [min(0.2, w) for w in want0], atol=1e-12)
    assert [t for _, t in seen] == [-1.0] * 3 + [0.1] * 5  # layer 2: no ramp, its target from its start
    assert "rate_target_l0" not in msr.HMLSTM(V, E, HS).default_model_options()  # the default: 0
    assert "rate_target_l1" not in msr.HMLSTM(V, E, HS, rate_target=[0.2], rate_ramp=7).default_model_options()
    ramp = msr.HMLSTM(V, E, HS, warmup=[500, 1500], rate_ramp=[1000, 0]).default_model_options()["rate_target_l0"]
    assert (ramp(0, 499) < 0, ramp(0, 1000), ramp(0, 2000)) == (True, pytest.approx(0.09), pytest.approx(0.18))
    for bad in ([1.5], [-1], "5", [1, 2, 3]):
        with pytest.raises(ValueError, match="rate_ramp"):
            msr.HMLSTM(V, E, HS, rate_ramp=bad)


PER_LAYER_OPTIONS = [
    {"gradient": ["blend", "switch"]},
    {"gradient": ["switch", "blend"], "flush_cut": True},
    {"detector_input": ["all", "below"]},
    {"detector_input": "below", "gradient": ["blend", "switch"], "top_boundary": True, "layer_norm": True},
    {"boundary": "sample", "detector_input": ["below", "all"], "copy_z": "recompute", "gradient": "blend"},
]


@pytest.mark.parametrize("opts", PER_LAYER_OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_per_layer_reading_and_detector_input_match_pytorch_reference(opts):
    """A gradient reading per boundary and detectors that read only the layer below: loss, gradients and
    state as the PyTorch reference's, over 8 steps, from a random state; and the options change the gradients."""
    pytest.importorskip("torch")
    rng = np.random.default_rng(41)
    m = make(z_bias=-0.3, **opts)
    tok, tgt = batch(rng, steps=8, batch=4)
    st = random_state(m, rng, batch=4)
    loss, grads, state = m.loss_and_grad(tok, tgt, st)
    rloss, rgrads, rstate = reference.loss_and_grad(m, tok, tgt, st, records=m.records())
    assert loss == pytest.approx(rloss, rel=1e-12)
    for k in grads:
        np.testing.assert_allclose(grads[k], rgrads[k], rtol=1e-9, atol=1e-12, err_msg=k)
    for k in state:
        np.testing.assert_allclose(state[k], rstate[k], rtol=1e-12, atol=1e-14, err_msg=k)
    plain = {k: v for k, v in opts.items() if k not in ("gradient", "detector_input")}
    g0 = make(
        z_bias=-0.3,
        gradient=opts.get("gradient", "switch") if isinstance(opts.get("gradient"), str) else "switch",
        **plain,
    ).loss_and_grad(tok, tgt, st)[1]
    assert any(np.abs(grads[k] - g0[k]).max() > 1e-6 for k in grads), "the option should change the gradients"
    below = opts.get("detector_input", "all")
    for l, h in enumerate(HS):
        reads = below if isinstance(below, str) else below[l] if l < len(below) else "all"
        if reads == "below" and m.parameters()[f"bias_l{l}"].shape[0] == 4 * h + 1:
            for k in (f"weight_hh_l{l}", f"weight_td_l{l}"):
                if k in grads:  # held at zero, and no gradient
                    assert not m.parameters()[k][4 * h].any() and not grads[k][4 * h].any(), k


@pytest.mark.parametrize(
    "opts",
    [{"detector_input": ["below", "all"]}, {"detector_input": "below", "top_boundary": True, "flush_cut": True}],
    ids=["below,all", "below,top,cut"],
)
def test_detector_input_below_soft_finite_differences(opts):
    rng = np.random.default_rng(43)
    m = make(boundary="soft", rate_target=[0.4, 0.2], rate_weight=2.0, **opts)
    tok, tgt = batch(rng)
    st = random_state(m, rng, soft=True)
    assert total_fd_error(m, tok, tgt, st) < 1e-6
    _, _, st2 = m.loss_and_grad(tok, tgt, st)
    assert total_fd_error(m, tok[:, ::-1].copy(), tgt, st2, seed=1) < 1e-6


def test_per_layer_reading_options():
    rng = np.random.default_rng(44)
    tok, tgt = batch(rng, steps=7, batch=5)
    st = random_state(make(), np.random.default_rng(9), batch=5)
    # set_option("blend_l1", 0) on a blend model gives what ["blend", "switch"] gives
    m = make(z_bias=-0.5, gradient="blend")
    m.set_option("blend_l1", 0.0)
    g = {k: v.copy() for k, v in m.loss_and_grad(tok, tgt, st)[1].items()}
    g2 = make(z_bias=-0.5, gradient=["blend", "switch"]).loss_and_grad(tok, tgt, st)[1]
    for k in g:
        np.testing.assert_allclose(g[k], g2[k], rtol=1e-12, atol=1e-14, err_msg=k)
    # a mixed reading computes every column in training; skipping and masking agree
    out = [make(z_bias=-0.5, gradient=["blend", "switch"], skip=s).loss_and_grad(tok, tgt, st) for s in (True, False)]
    assert out[0][0] == pytest.approx(out[1][0], rel=1e-12)
    for k in out[0][1]:
        np.testing.assert_allclose(out[0][1][k], out[1][1][k], rtol=1e-10, atol=1e-13, err_msg=k)
    m = msr.HMLSTM(V, E, HS, gradient=("blend", "switch"), detector_input=("all", "below"))
    assert m.config["gradient"] == ["blend", "switch"] and m.config["detector_input"] == ["all", "below"]
    assert m.options["blend_l0"] == 1.0 and m.options["blend_l1"] == 0.0 and m.options["detector_below_l1"] == 1.0
    assert not m.parameters()["weight_hh_l1"][4 * HS[1]].any() and not m.parameters()["weight_td_l1"][4 * HS[1]].any()
    assert m.parameters()["weight_hh_l0"][4 * HS[0]].any()
    with pytest.raises(ValueError, match="gradient has 3 values, the model has 2"):
        msr.HMLSTM(V, E, HS, gradient=["blend", "switch", "blend"])
    with pytest.raises(ValueError, match="detector_input must be 'all' or 'below'"):
        msr.HMLSTM(V, E, HS, detector_input=["all", "bellow"])
    for bad in ([], "Switch", [1, 0]):
        with pytest.raises(ValueError, match="gradient must be"):
            msr.HMLSTM(V, E, HS, gradient=bad)
    with pytest.raises(ValueError, match="with boundary 'soft'"):
        msr.HMLSTM(V, E, HS, boundary="soft", gradient=["blend", "switch"])
    with pytest.raises(ValueError, match="blend_l1"):
        m.set_option("blend_l1", 0.5)
    with pytest.raises(ValueError, match="'blend_l0' .. 'blend_l2'"):
        m.set_option("blend_l7", 1.0)
