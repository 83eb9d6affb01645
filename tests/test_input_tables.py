"""Per-token input tables in evaluation forwards (``Core::forward_tokens``).

For token inputs an LSTM's first-layer input term is W_ih e_{x_t} + b, one column of the table
P = W_ih E + b (4H, V), built once per call; evaluation forwards (``forward``, ``loss``) read P
instead of a product per step when 4 V <= T*B. ``msr.set_input_tables(False)`` selects the plain
path (embedding, then the core's forward); the two must agree to rounding order. The VCRNN and VCGRU
read x_t from the embedding in place in evaluation (their tests: tests/test_vcrnn.py).
"""

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn.testing import kernel_switches

BF16_WHY = msr.bf16_unavailable_reason()


@pytest.fixture(autouse=True)
def tables_on():
    yield
    msr.set_input_tables(True)
    msr.set_num_threads(1)


def evaluate(model, chunks, tables, state):
    """Logits, loss, per-token losses and states of evaluation passes over chunks, state carried."""
    msr.set_input_tables(tables)
    out = []
    for tok, tgt in chunks:
        logits, _ = model.forward(tok, state)
        loss, per_tok, state = model.loss(tok, tgt, state, per_token=True)
        out.append((logits, loss, per_tok, state))
    return out


def make_case(cls=msr.LSTM, V=7, E=6, H=37, B=5, T=8, L=1, dtype="float64", dropout=0.3, seed=3):
    model = cls(vocab_size=V, embed_size=E, hidden_sizes=(H,) * L, dropout=dropout, dtype=dtype, seed=seed)
    rng = np.random.default_rng(seed + 1)
    data = rng.integers(0, V, (B, 2 * T + 1))
    chunks = [(data[:, k * T : (k + 1) * T], data[:, k * T + 1 : (k + 1) * T + 1]) for k in range(2)]
    state = {k: rng.uniform(-0.8, 0.8, v.shape).astype(model.dtype) for k, v in model.initial_state(B).items()}
    return model, chunks, state


def assert_same(a, b, rtol, atol):
    for (la, lossa, pa, sa), (lb, lossb, pb, sb) in zip(a, b):
        np.testing.assert_allclose(la, lb, rtol=rtol, atol=atol)
        assert lossa == pytest.approx(lossb, rel=rtol)
        np.testing.assert_allclose(pa, pb, rtol=rtol, atol=atol)
        for k in sb:
            np.testing.assert_allclose(sa[k], sb[k], rtol=rtol, atol=atol, err_msg=k)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("L", [1, 3])
def test_table_equals_plain_float64(threads, L):
    msr.set_num_threads(threads)
    model, chunks, state = make_case(L=L)
    assert_same(evaluate(model, chunks, True, state), evaluate(model, chunks, False, state), 1e-12, 1e-13)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("L", [1, 3])
def test_table_close_to_plain_float32_and_taken(threads, L):
    msr.set_num_threads(threads)
    model, chunks, state = make_case(L=L, dtype="float32")
    with_table, plain = evaluate(model, chunks, True, state), evaluate(model, chunks, False, state)
    assert_same(with_table, plain, 2e-5, 2e-6)
    # The summation order differs (P = b + W_ih E apart from W_hh h): the table path was taken.
    assert not np.array_equal(with_table[0][0], plain[0][0])


def test_no_table_when_it_does_not_pay():
    """4 V > T*B: the plain path runs either way, bit for bit."""
    model, chunks, state = make_case(V=11, T=2, B=5, dtype="float32")  # 44 > 10
    a, b = evaluate(model, chunks, True, state), evaluate(model, chunks, False, state)
    for (la, _, _, sa), (lb, _, _, sb) in zip(a, b):
        assert np.array_equal(la, lb)
        for k in sb:
            assert np.array_equal(sa[k], sb[k])


def test_training_and_reference_kernels_unaffected():
    """Training passes never use the table; with reference kernels float32 stays plain."""
    model, chunks, state = make_case(dtype="float32")
    tok, tgt = chunks[0]
    grads, rng_state = [], model.get_rng_state()
    for tables in (True, False):
        msr.set_input_tables(tables)
        model.set_rng_state(rng_state)  # the same dropout masks
        model.zero_grad()
        loss, g, _ = model.loss_and_grad(tok, tgt, state)
        grads.append((loss, {k: v.copy() for k, v in g.items()}))
    assert grads[0][0] == grads[1][0]
    for k in grads[1][1]:
        assert np.array_equal(grads[0][1][k], grads[1][1][k]), k
    msr.set_reference_kernels(True)
    try:
        a, b = evaluate(model, chunks, True, state), evaluate(model, chunks, False, state)
    finally:
        msr.set_reference_kernels(False)
    assert np.array_equal(a[-1][0], b[-1][0])


def numpy_forward(model, tok, state):
    """Logits of a one-layer GRU or Elman model written out in NumPy (PyTorch's equations)."""
    P = {k: np.asarray(v, dtype=np.float64) for k, v in model.parameters().items()}
    h = np.asarray(state["h_l0"], dtype=np.float64)  # (B, H)
    x = P["embedding.weight"][tok]  # (B, T, E)
    out = []
    for t in range(tok.shape[1]):
        ax = x[:, t] @ P["weight_ih_l0"].T + P["bias_ih_l0"]
        ah = h @ P["weight_hh_l0"].T + P["bias_hh_l0"]
        if isinstance(model, msr.GRU):
            H = h.shape[1]
            r = 1 / (1 + np.exp(-(ax[:, :H] + ah[:, :H])))
            z = 1 / (1 + np.exp(-(ax[:, H : 2 * H] + ah[:, H : 2 * H])))
            n = np.tanh(ax[:, 2 * H :] + r * ah[:, 2 * H :])
            h = (1 - z) * n + z * h
        else:
            h = np.tanh(ax + ah)
        out.append(h @ P["decoder.weight"].T + P["decoder.bias"])
    return np.stack(out, axis=1)


@pytest.mark.parametrize("cls", [msr.GRU, msr.ElmanRNN])
def test_other_cores_are_right_with_tables_on_and_off(cls):
    """GRU and Elman layers have no table: with tables on or off their evaluation forwards equal the
    NumPy computation of the same model over two carried chunks."""
    model, chunks, state = make_case(cls=cls, dtype="float64")
    for tables in (True, False):
        s = state
        for (logits, _, _, new_state), (tok, _) in zip(evaluate(model, chunks, tables, state), chunks):
            np.testing.assert_allclose(logits, numpy_forward(model, tok, s), rtol=1e-10, atol=1e-12)
            s = new_state


def test_real_valued_inputs_have_no_table():
    D, B, T = 4, 5, 8
    model = msr.LSTM(vocab_size=7, embed_size=6, hidden_sizes=(9,), input_size=D, dtype="float64", seed=2)
    rng = np.random.default_rng(0)
    u = rng.normal(size=(B, T, D))
    tgt = rng.integers(0, 7, (B, T))
    out = []
    for tables in (True, False):
        msr.set_input_tables(tables)
        out.append((model.forward(u, None)[0], model.loss(u, tgt, None)[0]))
    assert np.array_equal(out[0][0], out[1][0]) and out[0][1] == out[1][1]
    assert np.isfinite(out[0][1])


def test_parameter_changes_are_seen():
    """The table is rebuilt at every call: a changed embedding row changes the next forward."""
    model, chunks, state = make_case(dtype="float64")
    tok, _ = chunks[0]
    before, _ = model.forward(tok, state)
    model.parameters()["embedding.weight"][tok[0, 0]] += 0.5
    after, _ = model.forward(tok, state)
    msr.set_input_tables(False)
    plain, _ = model.forward(tok, state)
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, plain, rtol=1e-12, atol=1e-13)


def bf16_forward(model, precision, tok, state, tables):
    """A forward in `precision`; "bfloat16-model": "bfloat16" with the portable model of the
    AVX512-BF16 kernel (any CPU)."""
    model_kernel = precision == "bfloat16-model"
    with kernel_switches(input_tables=tables, bf16_model_kernel=model_kernel):
        model.inference_precision = "bfloat16" if model_kernel else precision
        try:
            return model.forward(tok, state)
        finally:
            model.inference_precision = "float32"


# "bfloat16" with the kernel the core picks (where one runs) and with the model of the AVX512-BF16 one.
BF16_PRECISIONS = [
    "bfloat16-emulated",
    pytest.param("bfloat16", marks=pytest.mark.skipif(BF16_WHY is not None, reason=f"no bfloat16 kernel: {BF16_WHY}")),
    "bfloat16-model",
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("precision", BF16_PRECISIONS)
def test_bfloat16_table_equals_plain(threads, precision):
    """One step: both paths see the same rounded operands (bf16(E) columns are bf16(x_t)), so they
    agree to float32 summation order."""
    msr.set_num_threads(threads)
    model, chunks, state = make_case(E=12, H=70, B=33, T=1, dtype="float32", dropout=0.0)
    tok = chunks[0][0]
    la, sa = bf16_forward(model, precision, tok, state, True)
    lb, sb = bf16_forward(model, precision, tok, state, False)
    np.testing.assert_allclose(la, lb, rtol=1e-5, atol=1e-6)
    for k in sb:
        np.testing.assert_allclose(sa[k], sb[k], rtol=1e-5, atol=1e-6, err_msg=k)
    assert not np.array_equal(la, lb)  # the table path was taken


@pytest.mark.parametrize("precision", BF16_PRECISIONS)
def test_bfloat16_table_chunk_close(precision):
    """Several steps and layers: a summation-order difference can flip the bfloat16 rounding of an
    element of h now and then, so the bound is looser, as between the kernels and the emulated path."""
    msr.set_num_threads(2)
    model, chunks, state = make_case(E=12, H=70, B=33, T=8, L=2, dtype="float32", dropout=0.0)
    tok = chunks[0][0]
    la, _ = bf16_forward(model, precision, tok, state, True)
    lb, _ = bf16_forward(model, precision, tok, state, False)
    diff = np.abs(la - lb)
    assert diff.max() < 1e-3
    assert np.mean(diff <= 1e-5 * (1 + np.abs(lb))) > 0.95
