"""The bfloat16 inference path of the LSTM layers.

- ``round_to_bf16`` rounds to nearest, ties to even (checked against a NumPy version).
- The kernels' step product (AMX; AVX512-BF16; the portable model of the AVX512-BF16 kernel)
  equals the emulated one (rounded weights and inputs, float32 kernels) up to float32 summation
  order, with sizes that leave partial tiles; the emulated one equals a float64 NumPy product of
  the rounded operands. The model equals a NumPy version of VDPBF16PS's arithmetic (odd then even
  element of each pair, one rounding each) bit for bit, flushes denormals as the instruction does,
  and the AVX512-BF16 kernel equals the model bit for bit.
- The model in "bfloat16" (each kernel) equals the model in "bfloat16-emulated" (1/2/3 threads),
  and both are close to float32 (logits; the BPC of a briefly trained model).
- The precision is honoured by forward, loss, evaluate and the command line, never by training,
  and refused with a clear error (naming both kernels' reasons) where it cannot apply.
Tests of a hardware kernel skip (with the core's reason) on CPUs or modules without it; those of
the model run everywhere.
"""

import contextlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn.testing import kernel_switches

AMX_WHY = msr.amx_bf16_unavailable_reason()
AVX_WHY = msr.avx512_bf16_unavailable_reason()
needs_amx = pytest.mark.skipif(AMX_WHY is not None, reason=f"AMX bfloat16 kernel unavailable: {AMX_WHY}")
needs_avx512_bf16 = pytest.mark.skipif(
    AVX_WHY is not None, reason=f"AVX512-BF16 bfloat16 kernel unavailable: {AVX_WHY}"
)
# The step-product kernels: the hardware ones where they run, the portable model everywhere.
KERNELS = [
    pytest.param("amx", marks=needs_amx),
    pytest.param("avx512-bf16", marks=needs_avx512_bf16),
    "avx512-bf16-model",
]


def np_round_bf16(x):
    """Round-to-nearest-even float32 -> bfloat16 (kept in float32), denormals to signed zero."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    exp0 = (u & 0x7F800000) == 0
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    r = np.where(exp0, (u & 0x80000000), r)
    r = np.where(nan, ((u >> 16) | 0x40) << 16, r)
    return r.astype(np.uint32).view(np.float32)


@pytest.fixture
def precision_reset():
    models = []
    yield models
    for m in models:
        m.inference_precision = "float32"


def test_rounding_is_nearest_even():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(4000) * np.exp(rng.uniform(-30, 30, 4000))).astype(np.float32)
    special = np.array(
        [
            1.0,
            1 + 2**-8,
            1 + 3 * 2**-8,
            1 + 2**-8 + 2**-20,
            -(1 + 2**-8),
            3.0e38,
            np.inf,
            -np.inf,
            1e-40,
            -1e-40,
            0.0,
            -0.0,
            2**-126,
        ],
        dtype=np.float32,
    )
    x = np.concatenate([x, special])[:, None]
    got = msr.testing.blocks().round_to_bf16(x)[:, 0]
    want = np_round_bf16(x[:, 0])
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    # ties go to the even neighbour: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7
    assert got[-13] == 1.0 and got[-12] == 1.0 and got[-11] == 1 + 2**-6 and got[-10] == 1 + 2**-7
    assert np.isinf(got[-7]) and np.isinf(got[-6]) and got[-5] == 0.0 and np.signbit(got[-4])
    nan = msr.testing.blocks().round_to_bf16(np.array([[np.nan]], dtype=np.float32))
    assert np.isnan(nan[0, 0])


def product_case(M, K, N, K1, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K)).astype(np.float32) * 0.2
    b = rng.standard_normal((M, 1)).astype(np.float32)
    X = rng.standard_normal((K, N)).astype(np.float32)
    exact = b.astype(np.float64) + np_round_bf16(A).astype(np.float64) @ np_round_bf16(X).astype(np.float64)
    scale = np.abs(b) + np.abs(np_round_bf16(A)).astype(np.float64) @ np.abs(np_round_bf16(X))  # sum of |terms|
    return A, b, X, exact, scale


# (M, K, N, K1): M = 4H with H not a multiple of 16, K = E + H not a multiple of 32, N (columns)
# not a multiple of 16, an odd split K1; and the benchmark's shape (4H = 2048, E + H = 640, 32).
SIZES = [(148, 44, 5, 7), (280, 82, 33, 12), (64, 32, 16, 16), (12, 5, 1, 5), (96, 70, 47, 0), (2048, 640, 32, 128)]


@pytest.mark.parametrize("M,K,N,K1", SIZES)
def test_emulated_product_equals_rounded_numpy(M, K, N, K1):
    A, b, X, exact, scale = product_case(M, K, N, K1, seed=M + N)
    got = msr.testing.blocks().bf16_step_product(A, b, X, K1, "emulated")
    assert np.max(np.abs(got - exact) / scale) < 1e-6  # float32 summation order only


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("M,K,N,K1", SIZES)
def test_kernel_product_equals_emulated(kernel, M, K, N, K1):
    A, b, X, exact, scale = product_case(M, K, N, K1, seed=M + N)
    got = msr.testing.blocks().bf16_step_product(A, b, X, K1, kernel)
    emu = msr.testing.blocks().bf16_step_product(A, b, X, K1, "emulated")
    assert np.max(np.abs(got - exact) / scale) < 1e-6
    np.testing.assert_allclose(got, emu, rtol=1e-5, atol=1e-5 * scale.max())


def np_dpbf16_product(A, b, X):
    """b + A X as VDPBF16PS accumulates it: per depth pair, the odd element's product then the even
    one's, each added in float32 (rounded to nearest even). bf16 products are exact in float32, so
    float32 multiply-then-add equals the instruction's fused multiply-add (no denormals here)."""
    Ar, Xr = np_round_bf16(A), np_round_bf16(X)
    acc = np.repeat(b, X.shape[1], axis=1).astype(np.float32)
    for q in range(0, A.shape[1], 2):
        for k in (q + 1, q):
            if k < A.shape[1]:
                acc = acc + Ar[:, k : k + 1] * Xr[k : k + 1, :]
    return acc


@pytest.mark.parametrize("M,K,N,K1", SIZES)
def test_model_is_the_instruction_arithmetic(M, K, N, K1):
    """The portable model, with the AVX512-BF16 kernel's blocking, padding and tails, gives exactly
    the instruction's sums (order and rounding): every element bit for bit."""
    A, b, X, _, _ = product_case(M, K, N, K1, seed=M + N)
    got = msr.testing.blocks().bf16_step_product(A, b, X, K1, "avx512-bf16-model")
    np.testing.assert_array_equal(got.view(np.uint32), np_dpbf16_product(A, b, X).view(np.uint32))


def test_model_flushes_denormals():
    """VDPBF16PS reads denormal inputs (here the bias) as zero and flushes denormal results to zero;
    the emulated path keeps both."""
    M, K = 20, 3
    A = np.zeros((M, K), np.float32)
    A[:, 0] = 2.0**-70
    b = np.full((M, 1), 1e-39, np.float32)  # denormal
    X = np.full((K, 2), 2.0**-60, np.float32)  # A X = 2^-130: denormal
    model = msr.testing.blocks().bf16_step_product(A, b, X, 1, "avx512-bf16-model")
    emu = msr.testing.blocks().bf16_step_product(A, b, X, 1, "emulated")
    assert np.all(model == 0) and np.all(emu > 1e-39)


@needs_avx512_bf16
@pytest.mark.parametrize("M,K,N,K1", SIZES)
def test_avx512_bf16_equals_its_model(M, K, N, K1):
    """The intrinsic kernel and the portable model share every loop; the instruction must give the
    model's numbers bit for bit."""
    A, b, X, _, _ = product_case(M, K, N, K1, seed=M + N)
    hw = msr.testing.blocks().bf16_step_product(A, b, X, K1, "avx512-bf16")
    model = msr.testing.blocks().bf16_step_product(A, b, X, K1, "avx512-bf16-model")
    np.testing.assert_array_equal(hw.view(np.uint32), model.view(np.uint32))


def lstm_and_data(E, H, B, L, T, V=13, seed=0):
    model = msr.LSTM(vocab_size=V, embed_size=E, hidden_sizes=(H,) * L, seed=seed)
    rng = np.random.default_rng(seed + 1)
    tokens = rng.integers(0, V, (B, T))
    state = {k: rng.uniform(-0.8, 0.8, v.shape).astype(np.float32) for k, v in model.initial_state(B).items()}
    return model, tokens, state


def forward_in(model, precision, tokens, state):
    model.inference_precision = precision
    logits, new_state = model.forward(tokens, state)
    model.inference_precision = "float32"
    return logits, new_state


def running(kernel):
    """A context in which inference_precision "bfloat16" runs `kernel`: the portable model through
    the test switch; a hardware kernel where the core picks it (else the test skips, saying why)."""
    if kernel is None or kernel == "avx512-bf16-model":
        return kernel_switches(bf16_model_kernel=kernel is not None)
    if msr.bf16_kernel() != kernel:
        pytest.skip(f"'bfloat16' runs the {msr.bf16_kernel()} kernel here, which takes precedence over {kernel}")
    return contextlib.nullcontext()


# (precision, kernel): the emulated reference and "bfloat16" with each kernel.
PRECISIONS = [
    pytest.param("bfloat16-emulated", None, id="emulated"),
    pytest.param("bfloat16", "amx", marks=needs_amx, id="amx"),
    pytest.param("bfloat16", "avx512-bf16", marks=needs_avx512_bf16, id="avx512-bf16"),
    pytest.param("bfloat16", "avx512-bf16-model", id="avx512-bf16-model"),
]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("E,H,B", [(7, 37, 5), (12, 70, 33), (32, 64, 64)])
def test_kernel_model_step_equals_emulated(kernel, threads, E, H, B):
    """One step from a random state: both paths see the same rounded operands, so logits and
    state agree to float32 summation order."""
    msr.set_num_threads(threads)
    model, tokens, state = lstm_and_data(E, H, B, L=1, T=1)
    with running(kernel):
        la, sa = forward_in(model, "bfloat16", tokens, state)
    le, se = forward_in(model, "bfloat16-emulated", tokens, state)
    np.testing.assert_allclose(la, le, rtol=1e-5, atol=1e-6)
    for k in se:
        np.testing.assert_allclose(sa[k], se[k], rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_kernel_model_chunk_close_to_emulated(kernel, threads):
    """Several steps and layers: the float32 summation order can flip the bfloat16 rounding of an
    element of h now and then, so the bound is looser; nearly all logits still agree to 1e-5."""
    msr.set_num_threads(threads)
    model, tokens, state = lstm_and_data(E=12, H=70, B=33, L=2, T=8)
    with running(kernel):
        la, sa = forward_in(model, "bfloat16", tokens, state)
    le, se = forward_in(model, "bfloat16-emulated", tokens, state)
    diff = np.abs(la - le)
    assert diff.max() < 1e-3
    assert np.mean(diff <= 1e-5 * (1 + np.abs(le))) > 0.95


def test_emulated_model_step_equals_numpy():
    """The emulated path against a NumPy LSTM step on rounded operands (one step, one layer)."""
    E, H, B = 9, 21, 6
    model, tokens, state = lstm_and_data(E, H, B, L=1, T=1)
    logits, new = forward_in(model, "bfloat16-emulated", tokens, state)
    p = {k: v.astype(np.float64) for k, v in model.parameters().items()}
    r = lambda a: np_round_bf16(np.asarray(a, np.float32)).astype(np.float64)  # noqa: E731
    x = p["embedding.weight"][tokens[:, 0]]  # (B, E)
    h0, c0 = state["h_l0"].astype(np.float64), state["c_l0"].astype(np.float64)
    a = p["bias_ih_l0"] + p["bias_hh_l0"] + r(x) @ r(p["weight_ih_l0"]).T + r(h0) @ r(p["weight_hh_l0"]).T
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    i, f, g, o = sig(a[:, :H]), sig(a[:, H : 2 * H]), np.tanh(a[:, 2 * H : 3 * H]), sig(a[:, 3 * H :])
    c = f * c0 + i * g
    h = o * np.tanh(c)
    z = h @ p["decoder.weight"].T + p["decoder.bias"]
    np.testing.assert_allclose(new["c_l0"], c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(new["h_l0"], h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(logits[:, 0], z, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("precision,kernel", PRECISIONS)
def test_parameter_changes_are_seen(precision, kernel, precision_reset):
    """Weights are rounded and packed at every call: a changed parameter changes the next result."""
    model, tokens, state = lstm_and_data(8, 24, 4, L=2, T=5)
    precision_reset.append(model)
    with running(kernel):
        model.inference_precision = precision
        before, _ = model.forward(tokens, state)
        model.parameters()["weight_hh_l1"][...] *= 0.5
        after, _ = model.forward(tokens, state)
        fresh = msr.LSTM(vocab_size=13, embed_size=8, hidden_sizes=(24, 24), seed=0)
        fresh.load_parameters(model.parameters())
        fresh.inference_precision = precision
        want, _ = fresh.forward(tokens, state)
    assert np.abs(after - before).max() > 1e-3
    np.testing.assert_array_equal(after, want)


@pytest.mark.parametrize("precision,kernel", PRECISIONS)
def test_close_to_float32_and_training_unaffected(precision, kernel, precision_reset):
    """Accuracy against float32 on a briefly trained model (seeded): logits within 0.03, mean
    absolute difference below 0.002, |delta BPC| < 0.01 on held-out text; training steps
    (loss_and_grad) give bit-identical results whatever the inference precision."""
    corpus = msr.data.load("embedded")
    model = msr.LSTM(vocab_size=corpus.vocab_size, embed_size=32, hidden_sizes=(128, 128), seed=1)
    precision_reset.append(model)
    trainer = msr.Trainer(model, optimizer=msr.optim.Adam(lr=3e-3), batch_size=32, bptt=50, progress=False, seed=1)
    trainer.fit(corpus.train, epochs=1, max_chunks=60)
    valid = corpus.valid[:8000]
    f32 = msr.evaluate(model, valid, batch_size=32, bptt=100)
    assert f32["bpc"] < 0.75 * np.log2(corpus.vocab_size)  # it learned something (uniform: log2 V)
    tokens = np.asarray(corpus.valid[: 32 * 40]).reshape(32, 40)
    logits32, _ = model.forward(tokens)
    logits32_train, _ = model.forward(tokens, train=True)
    targets = np.asarray(corpus.valid[1 : 32 * 40 + 1]).reshape(32, 40)
    loss32, grads32, _ = model.loss_and_grad(tokens, targets)

    with running(kernel):
        model.inference_precision = precision
        bf = msr.evaluate(model, valid, batch_size=32, bptt=100)
        logits16, _ = model.forward(tokens)
        loss16, grads16, _ = model.loss_and_grad(tokens, targets)
        logits16_train, _ = model.forward(tokens, train=True)
    diff = np.abs(logits16 - logits32)
    assert 0 < diff.max() < 0.03 and diff.mean() < 0.002
    assert abs(bf["bpc"] - f32["bpc"]) < 0.01
    assert loss16 == loss32
    for k in grads32:
        np.testing.assert_array_equal(grads16[k], grads32[k], err_msg=k)
    np.testing.assert_array_equal(logits16_train, logits32_train)  # train=True forwards stay float32


def test_default_and_refusals():
    model = msr.LSTM(vocab_size=7, embed_size=4, hidden_sizes=(8,))
    assert model.inference_precision == "float32"
    with pytest.raises(ValueError, match=r"unknown inference precision 'bf16'.*did you mean 'bfloat16'\?"):
        model.inference_precision = "bf16"
    with pytest.raises(TypeError, match="must be a str"):
        model.inference_precision = 16
    f64 = msr.LSTM(vocab_size=7, embed_size=4, hidden_sizes=(8,), dtype="float64")
    with pytest.raises(ValueError, match="needs a float32 model; this one is float64"):
        f64.inference_precision = "bfloat16-emulated"
    for other in (
        msr.GRU(vocab_size=7, embed_size=4, hidden_sizes=(8,)),
        msr.HMLSTM(vocab_size=7, embed_size=4, hidden_sizes=(8, 8)),
    ):
        with pytest.raises(ValueError, match="LSTM layers only"):
            other.inference_precision = "bfloat16-emulated"
        assert other.inference_precision == "float32"
    model.inference_precision = "bfloat16-emulated"
    assert model.inference_precision == "bfloat16-emulated"
    model.inference_precision = "float32"
    assert model.inference_precision == "float32"


def test_bfloat16_refused_naming_both_kernels():
    """Where neither kernel runs, "bfloat16" is refused with both reasons, each naming the missing
    CPUID flag (or the core module without the kernel), and a pointer to "bfloat16-emulated"."""
    if msr.bf16_kernel() is not None:
        pytest.skip(f"the {msr.bf16_kernel()} bfloat16 kernel runs here")
    why = msr.bf16_unavailable_reason()
    assert why and AMX_WHY in why and AVX_WHY in why, why
    flags = msr._native._cpu_flags()
    if "amx_bf16" not in flags:
        assert "CPUID.(EAX=7,ECX=0):EDX bit 22" in AMX_WHY, AMX_WHY
    if "avx512f" not in flags:
        assert "CPUID.(EAX=7,ECX=0):EBX bit 16" in AVX_WHY, AVX_WHY
    elif "avx512_bf16" not in flags:
        assert "CPUID.(EAX=7,ECX=1):EAX bit 5" in AVX_WHY, AVX_WHY
    model = msr.LSTM(vocab_size=7, embed_size=4, hidden_sizes=(8,))
    with pytest.raises(RuntimeError) as e:
        model.inference_precision = "bfloat16"
    assert AMX_WHY in str(e.value) and AVX_WHY in str(e.value) and "'bfloat16-emulated'" in str(e.value)
    assert model.inference_precision == "float32"


@pytest.mark.parametrize("isa", ["baseline", "avx2"])
def test_each_module_refuses_or_runs_the_model(isa):
    """In the modules without the hardware kernels, "bfloat16" is refused with both reasons, the
    precision stays float32, the emulated path runs, and the portable model of the AVX512-BF16
    kernel runs and agrees with the emulated path."""
    if isa not in [v[0] for v in msr.testing.isa_variants() if v[1]]:
        pytest.skip(f"no {isa} module for this CPU")
    code = (
        "import multiscale_rnn as msr, numpy as np\n"
        "from multiscale_rnn.testing import kernel_switches\n"
        "why = msr.bf16_unavailable_reason()\n"
        "assert why and 'AMX' in why and 'AVX512-BF16' in why and msr.bf16_kernel() is None, why\n"
        "m = msr.LSTM(vocab_size=7, embed_size=4, hidden_sizes=(40,))\n"
        "try:\n"
        "    m.inference_precision = 'bfloat16'\n"
        "    raise SystemExit('not refused')\n"
        "except RuntimeError as e:\n"
        "    assert 'AMX' in str(e) and 'AVX512-BF16' in str(e) and 'bfloat16-emulated' in str(e), e\n"
        "assert m.inference_precision == 'float32'\n"
        "tok = np.arange(15, dtype=np.int32).reshape(5, 3) % 7\n"
        "m.inference_precision = 'bfloat16-emulated'\n"
        "emu = m.forward(tok)[0]\n"
        "with kernel_switches(bf16_model_kernel=True):\n"
        "    assert msr.bf16_kernel() == 'avx512-bf16-model'\n"
        "    m.inference_precision = 'bfloat16'\n"
        "    got = m.forward(tok)[0]\n"
        "assert np.isfinite(emu).all() and np.abs(got - emu).max() < 1e-4, np.abs(got - emu).max()\n"
        "print('ok')\n"
    )
    env = dict(os.environ, MULTISCALE_RNN_ISA=isa)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_command_line_precision(tmp_path, capsys):
    from multiscale_rnn.cli import main

    out = tmp_path / "tiny.npz"
    assert (
        main(
            [
                "train",
                "--data",
                "synthetic",
                "--model",
                "lstm",
                "--embed-size",
                "8",
                "--hidden-sizes",
                "32",
                "--batch-size",
                "8",
                "--bptt",
                "25",
                "--epochs",
                "1",
                "--max-chunks",
                "20",
                "--threads",
                "1",
                "--no-progress",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    capsys.readouterr()
    bpc = {}
    for precision in ("float32", "bfloat16-emulated"):
        assert main(["evaluate", str(out), "--split", "valid", "--json", "--precision", precision]) == 0
        bpc[precision] = json.loads(capsys.readouterr().out)["bpc"]
    assert bpc["float32"] != bpc["bfloat16-emulated"]
    assert abs(bpc["float32"] - bpc["bfloat16-emulated"]) < 0.01
    assert main(["sample", str(out), "--length", "20", "--precision", "bfloat16-emulated"]) == 0
    assert len(capsys.readouterr().out.rstrip("\n")) >= 20
    if msr.bf16_kernel() is None:
        assert main(["evaluate", str(out), "--precision", "bfloat16"]) == 1
        assert "--precision bfloat16" in capsys.readouterr().err
