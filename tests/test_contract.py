"""The contract every registered model family keeps, run for every class of the registry
(``msr.MODELS``), each from its own tiny example (``cls.example``: every auxiliary term of the family
on), so that a family gets all of it by registering and naming its reference in
``multiscale_rnn.reference.REFERENCES``:

- its declared options are refused when wrong: a wrong type with TypeError, a value out of range or
  outside the choices with ValueError, each naming the option;
- its config rebuilds the same model: the same parameters and the same loss;
- float64 finite differences agree with ``loss_and_grad`` over 4 steps from a carried state, every
  auxiliary term included;
- its independent reference (``multiscale_rnn.reference``, one interface for every family) gives the
  same loss, auxiliary terms, gradients and state, for token ids and real vectors, over two chunks with
  the state carried and a loss mask on the second;
- with the mixture density head (pen strokes, real targets, no vocabulary): finite differences and
  the reference agree as well;
- float32 computes the float64 loss and gradients;
- a Trainer checkpoint resumes bit for bit (losses, parameters, random state);
- and the suite, with the data-parallel equivalence of tests/test_distributed.py, covers every
  registered family without a family-specific skip.
"""

import inspect
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from _texts import noisy_cycle

import multiscale_rnn as msr
from multiscale_rnn import reference

pytestmark = pytest.mark.usefixtures("one_thread")

FAMILIES = sorted(msr.MODELS)  # class names of every registered family, the parametrization of each contract
family = pytest.mark.parametrize("name", FAMILIES)
V = 11  # vocabulary
B, T = 2, 4  # streams, steps per chunk
D = 3  # size of the real input vectors


def build(name, seed=0, **overrides):
    """The family's example in float64 (``overrides`` replace example options), its parameters moved off
    the symmetric initial values (zero biases and shifts, unit gains) by seeded noise, so that no
    mistake hides behind a parameter that is 0 or 1."""
    cls = msr.MODELS[name]
    model = cls(V, **{**cls.example_options, **overrides, "dtype": "float64", "seed": seed})
    rng = np.random.default_rng(100 + seed)
    for p in model.parameters().values():
        p += rng.normal(scale=0.1, size=p.shape)
    return model


def inputs(model, rng, steps=T):
    """Token ids (B, steps), or real vectors (B, steps, D) for a model with ``input_size``."""
    if model.input_size is None:
        return rng.integers(0, V, (B, steps))
    return rng.normal(size=(B, steps, model.input_size))


def carried_state(model, rng):
    """The state after 3 steps from zeros: non-zero hidden states, HORNN lags, a Clockwork clock at 3."""
    return model.forward(inputs(model, rng, 3))[1]


def assert_aux_on(loss, name):
    """Every auxiliary term the family declares is in the loss, and none is 0 (the example switches them on)."""
    assert sorted(loss.aux) == sorted(msr.MODELS[name].aux_terms), (name, loss.aux)
    assert all(v != 0.0 for v in loss.aux.values()), (name, loss.aux)


# ---- options ---------------------------------------------------------------------------------------
WRONG_TYPES = {
    bool: ["yes", 1, None],
    int: ["x", 1.5, True, None],
    float: ["x", True, None],
    str: [1, None],
    list: ["x", 3],
}
CANDIDATES = ["nope", -1, -1.0, 0, 0.0, 0.5, 1.5, 256, 1e9, ["nope"], [], float("inf")]


def out_of_range(opt):
    """A value of the option's type that its ``choices`` or ``check`` refuses (``None`` if none is found)."""
    for v in CANDIDATES:
        if opt.kind is int and type(v) is not int or opt.kind is float and type(v) not in (int, float):
            continue
        if opt.kind is str and type(v) is not str or opt.kind is list and type(v) is not list:
            continue
        if opt.choices is not None:
            if v not in opt.choices:
                return v
            continue
        try:
            if not opt.check(v):
                return v
        except TypeError:  # a value of another type than the check reads
            continue
    return None


def refused(cls, option, value, error):
    """Building the example with ``option=value`` raises ``error`` naming the class and the option."""
    with pytest.raises(error) as e:
        cls(V, **{**cls.example_options, option: value})
    message = str(e.value)
    assert cls.__name__ in message and re.search(rf"\b{re.escape(option)}\b", message), (option, value, message)


@family
def test_declared_options_are_refused_when_wrong(name):
    cls = msr.MODELS[name]
    options = cls.all_options()
    assert set(options) <= set(inspect.signature(cls).parameters)
    with pytest.raises(
        TypeError, match=r"unexpected argument 'dropuot' \(did you mean 'dropout'\?\); it takes .*\bdropout\b"
    ):
        cls(V, **cls.example_options, dropuot=0.5)  # an unknown keyword, named with the ones it takes
    checked = 0
    for opt in options.values():
        for value in WRONG_TYPES.get(opt.kind, ()):
            if value is not None or opt.default is not None:  # None is accepted where it is the default
                refused(cls, opt.name, value, TypeError)
        if opt.choices is None and opt.check is None:
            continue
        value = out_of_range(opt)
        assert value is not None, f"{name}: no value found that {opt.name} refuses ({opt.describe()})"
        refused(cls, opt.name, value, ValueError)
        checked += 1
    assert checked >= 7  # the shared options dropout, dtype, seed, head, head_size, head_classes, input_size


# ---- config ----------------------------------------------------------------------------------------
@family
def test_config_rebuilds_the_same_model(name):
    rng = np.random.default_rng(1)
    cls = msr.MODELS[name]
    for model in (cls.example(V, dtype="float64", seed=3), cls(V, **cls.example_options, input_size=D, seed=4)):
        config = json.loads(model.config_json())  # as a checkpoint stores it
        assert config["model"] == name
        again = msr.MODELS[config.pop("model")](**config)
        assert type(again) is cls and again.config == model.config
        np.testing.assert_array_equal(again.flat_parameters(), model.flat_parameters())  # the seed is in the config
        x, y = inputs(model, rng), rng.integers(0, V, (B, T))
        loss, grads, state = model.loss_and_grad(x, y)
        loss2, grads2, state2 = again.loss_and_grad(x, y)
        assert float(loss2) == float(loss) and loss2.aux == loss.aux
        for k in grads:
            np.testing.assert_array_equal(grads2[k], grads[k], err_msg=k)
        for k in state:
            np.testing.assert_array_equal(state2[k], state[k], err_msg=k)


# ---- gradients: finite differences -----------------------------------------------------------------
EPS = 1e-5  # central differences: truncation and rounding errors both below 1e-10 here


def assert_finite_differences(model, rng, objective, grads):
    """Central differences of ``objective`` agree with ``grads`` on the largest entry and 3 random ones of
    every parameter tensor."""
    for pname, p in model.parameters().items():
        g = grads[pname]
        picks = {int(np.argmax(np.abs(g)))} | set(rng.choice(p.size, min(3, p.size), replace=False).tolist())
        for flat in sorted(picks):
            idx = np.unravel_index(flat, p.shape)
            old = p[idx]
            p[idx] = old + EPS
            up = objective()
            p[idx] = old - EPS
            down = objective()
            p[idx] = old
            fd = (up - down) / (2 * EPS)
            assert abs(fd - g[idx]) <= 1e-6 * abs(g[idx]) + 1e-9, (
                f"{pname}{idx}: finite difference {fd!r}, gradient {g[idx]!r}"
            )


@family
def test_gradients_match_finite_differences(name):
    rng = np.random.default_rng(2)
    model = build(name, seed=2, **reference.exact_gradient_options(msr.MODELS[name]))
    state = carried_state(model, rng)
    x, y = inputs(model, rng), rng.integers(0, V, (B, T))
    loss, grads, _ = model.loss_and_grad(x, y, state)
    assert_aux_on(loss, name)
    assert_finite_differences(model, rng, lambda: model.loss_and_grad(x, y, state, copy_grads=False)[0].total, grads)


# ---- the mixture density head (pen strokes): every family with it ----------------------------------------
def build_mdn(name, seed, **overrides):
    """The family's example reading real vectors with the mixture density head (2 components), no vocabulary."""
    cls = msr.MODELS[name]
    opts = {**cls.example_options, **overrides, "head": "mdn", "mixtures": 2, "input_size": D}
    model = cls(**opts, dtype="float64", seed=seed)
    rng = np.random.default_rng(200 + seed)
    for p in model.parameters().values():
        p += rng.normal(scale=0.1, size=p.shape)
    return model


def stroke_targets(rng, steps=T):
    """(B, steps, 3): offsets and pen bits."""
    return np.concatenate([rng.normal(size=(B, steps, 2)), rng.integers(0, 2, (B, steps, 1))], axis=2).astype(float)


@family
def test_mixture_density_gradients_match_finite_differences(name):
    rng = np.random.default_rng(12)
    model = build_mdn(name, seed=12, **reference.exact_gradient_options(msr.MODELS[name]))
    state = carried_state(model, rng)
    x, y = inputs(model, rng), stroke_targets(rng)
    loss, grads, _ = model.loss_and_grad(x, y, state)
    assert_aux_on(loss, name)
    assert_finite_differences(model, rng, lambda: model.loss_and_grad(x, y, state, copy_grads=False)[0].total, grads)


@family
def test_mixture_density_matches_its_reference(name):
    rng = np.random.default_rng(14)
    model = build_mdn(name, seed=14)
    assert_matches_reference(model, name, rng, stroke_targets, padded=True)


# ---- parity with the family's reference --------------------------------------------------------------
@family
@pytest.mark.parametrize("reads", ["tokens", "vectors"])
def test_matches_its_reference(name, reads):
    rng = np.random.default_rng(3)
    model = build(name, seed=3, **({"input_size": D} if reads == "vectors" else {}))
    assert_matches_reference(model, name, rng, lambda r: r.integers(0, V, (B, T)))


def assert_matches_reference(model, name, rng, targets, padded=False):
    """The model and its family's reference agree on the loss, auxiliary terms, gradients and state over
    two chunks: from zeros, then from each side's own carried state with a loss mask (``padded``: with
    padding instead, stream 1's last 2 steps, which counts in the auxiliary terms too)."""
    state = ref_state = None
    for chunk in range(2):
        x, y = inputs(model, rng), targets(rng)
        mask = None if chunk == 0 else (rng.random((B, T)) < 0.6).astype(float)
        if mask is not None:
            mask[0, 0] = 1.0
        if padded and mask is not None:
            pad, mask = np.ones((B, T)), None
            pad[1, -2:] = 0.0
            loss, grads, state = model.loss_and_grad(x, y, state, padding=pad)
            rloss, rgrads, ref_state = reference.loss_and_grad(model, x, y, ref_state, padding=pad)
        else:
            loss, grads, state = model.loss_and_grad(x, y, state, weights=mask)
            rloss, rgrads, ref_state = reference.loss_and_grad(model, x, y, ref_state, mask)
        assert_aux_on(loss, name)
        assert float(loss) == pytest.approx(float(rloss), rel=1e-10, abs=0)
        assert sorted(rloss.aux) == sorted(loss.aux)
        for k in loss.aux:
            assert loss.aux[k] == pytest.approx(rloss.aux[k], rel=1e-10, abs=0), k
        assert sorted(rgrads) == sorted(grads)
        scale = max(np.abs(g).max() for g in rgrads.values())
        for k in grads:
            np.testing.assert_allclose(grads[k], rgrads[k], rtol=1e-8, atol=1e-10 * scale, err_msg=k)
        assert sorted(ref_state) == sorted(state)
        for k in state:
            np.testing.assert_allclose(state[k], ref_state[k], rtol=1e-10, atol=1e-12, err_msg=k)


# ---- float32 ---------------------------------------------------------------------------------------
@family
def test_float32_computes_the_float64_loss_and_gradients(name):
    rng = np.random.default_rng(4)
    m64 = build(name, seed=4)
    config = {k: v for k, v in m64.config.items() if k != "model"}
    m32 = msr.MODELS[name](**{**config, "dtype": "float32"})
    m32.load_parameters(m64.parameters())  # the same parameters, rounded
    m64.load_parameters({k: v.astype(np.float32) for k, v in m64.parameters().items()})
    state = carried_state(m64, rng)
    x, y = inputs(m64, rng), rng.integers(0, V, (B, T))
    l64, g64, s64 = m64.loss_and_grad(x, y, state)
    l32, g32, s32 = m32.loss_and_grad(x, y, {k: v.astype(np.float32) for k, v in state.items()})
    assert_aux_on(l64, name)
    assert l32.total == pytest.approx(l64.total, rel=1e-5)
    for k in l64.aux:
        assert l32.aux[k] == pytest.approx(l64.aux[k], rel=1e-4), k
    a = np.concatenate([g.ravel() for g in g64.values()])
    b = np.concatenate([g32[k].ravel() for k in g64])
    assert b.dtype == np.float32 and np.linalg.norm(b - a) <= 1e-4 * np.linalg.norm(a)
    for k in s64:
        np.testing.assert_allclose(s32[k], s64[k], rtol=0, atol=1e-5, err_msg=k)


# ---- checkpoints -----------------------------------------------------------------------------------
# chunks of BPTT steps per epoch; the first piece stops mid-epoch 1. BPTT = 3 puts the Clockwork's clock
# at a chunk boundary on values a wrong resume would change (9 = 1 mod 2 and mod 4).
CHUNKS, EPOCHS, STOP, BPTT = 5, 2, 3, 3


def train_ids(seed):
    return noisy_cycle(B * (CHUNKS * BPTT + 1), V, 0.2, seed)


def fit(model, path=None, resume=False, max_chunks=None):
    """Chunk losses of a training run (float32, dropout on, clipping, Adam)."""
    trainer = msr.Trainer(
        model, msr.optim.Adam(lr=5e-3), clip_norm=1.0, batch_size=B, bptt=BPTT, seed=7, progress=False
    )
    losses = []

    def log(e):
        if e["event"] == "chunk":
            losses.append((e["epoch"], e["chunk"], e["loss"]))

    trainer.fit(
        train_ids(0),
        valid=train_ids(1)[:40],
        epochs=EPOCHS,
        checkpoint=path,
        resume=resume,
        max_chunks=max_chunks,
        log=log,
    )
    return losses, trainer


@family
def test_checkpoint_resumes_bit_for_bit(name, tmp_path):
    cls = msr.MODELS[name]
    straight = cls.example(V, dtype="float32", seed=0, dropout=0.1)
    losses, trainer = fit(straight)
    assert len(losses) == CHUNKS * EPOCHS and trainer.step == CHUNKS * EPOCHS

    path = tmp_path / "run.npz"
    pieces = []
    for i, max_chunks in enumerate((STOP, None)):
        # each piece a fresh model, optimiser and trainer, as in a new process; after the first, other
        # initial parameters and random state: everything must come from the file
        model = cls.example(V, dtype="float32", seed=0 if i == 0 else 50 + i, dropout=0.1)
        part, resumed = fit(model, path, resume=i > 0, max_chunks=max_chunks)
        pieces += part
        if i == 0:
            assert len(part) == STOP and path.exists()
            saved = msr.checkpoint.load(path).trainer_state["carried"]  # a carried state to restore
            assert sorted(saved) == sorted(model.initial_state(B)) and any(np.any(v != 0) for v in saved.values())
    assert [p[:2] for p in pieces] == [p[:2] for p in losses]
    assert pieces == losses  # every loss, bit for bit
    np.testing.assert_array_equal(model.flat_parameters(), straight.flat_parameters())
    np.testing.assert_array_equal(model.get_rng_state(), straight.get_rng_state())
    assert resumed.step == trainer.step


# ---- coverage --------------------------------------------------------------------------------------
def _parametrized(fn, argname):
    """The values ``fn`` is parametrized with for ``argname`` (None if it is not), and its other marks."""
    values, others = None, []
    for mark in getattr(fn, "pytestmark", []):
        if mark.name == "parametrize" and mark.args[0] == argname:
            values = list(mark.args[1])
        elif mark.name != "parametrize":
            others.append(mark.name)
    return values, others


def test_the_contract_covers_every_registered_family():
    assert FAMILIES == sorted(msr.MODELS) and len(FAMILIES) >= 11
    for name, cls in msr.MODELS.items():
        assert cls.example_options is not None, name
        assert cls.core_name in reference.REFERENCES, f"{name}: no reference for core {cls.core_name!r}"
        params = list(inspect.signature(reference.module(cls).loss_and_grad).parameters)
        assert params[:5] == ["model", "inputs", "targets", "state", "mask"], (name, params)

    # every contract test of this file runs for exactly the registered families, none marked for one
    here = sys.modules[__name__]
    contracts = {
        n: f for n, f in vars(here).items() if n.startswith("test_") and "name" in inspect.signature(f).parameters
    }
    assert len(contracts) >= 6, sorted(contracts)
    for n, f in contracts.items():
        values, others = _parametrized(f, "name")
        assert values == FAMILIES, n  # plain names: a pytest.param with marks would differ
        assert not set(others) & {"skip", "skipif", "xfail"}, (n, others)
    source = Path(__file__).read_text()
    for call in ("pytest." + "skip(", "import" + "orskip("):
        assert call not in source

    # the data-parallel equivalence (tests/test_distributed.py) runs over the registry too
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import test_distributed

    dp = {n: f for n, f in vars(test_distributed).items() if n.startswith("test_") and callable(f)}
    counted = {n for n, f in dp.items() if _parametrized(f, "family")[0] is not None}
    assert "test_two_ranks_give_the_parameters_of_one_process_in_float64" in counted
    for n in counted:
        values, others = _parametrized(dp[n], "family")
        assert values == FAMILIES, n
        assert not set(others) & {"skip", "skipif", "xfail"}, (n, others)
