"""The optimised kernels of the core equal the plain reference kernels they replace.

``msr.set_reference_kernels(True)`` selects the plain versions (Eigen products one step after
another); the default is the fast path (packed recurrent weights, one OpenMP region per time
loop with units split over threads). Both run in float64 here and must agree to rounding, with
sizes that leave partial panels, partial column blocks and units split unevenly over threads.
"""

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn.testing import assert_runs_equal, run_chunks


@pytest.fixture
def reference_off():
    yield
    msr.set_reference_kernels(False)


def run(model, chunks, reference):
    """Logits, loss, gradients and final state over two chunks with the state carried."""
    msr.set_reference_kernels(reference)
    return run_chunks(model, chunks)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("E,H,B,L", [(7, 37, 5, 1), (12, 70, 9, 2), (5, 3, 2, 1)])
def test_lstm_fast_equals_reference(reference_off, threads, E, H, B, L):
    msr.set_num_threads(threads)
    V, T = 11, 6
    model = msr.LSTM(vocab_size=V, embed_size=E, hidden_sizes=(H,) * L, dtype="float64", seed=3)
    rng = np.random.default_rng(5)
    data = rng.integers(0, V, (B, 2 * T + 1))
    chunks = [(data[:, k * T : (k + 1) * T], data[:, k * T + 1 : (k + 1) * T + 1]) for k in range(2)]
    assert_runs_equal(run(model, chunks, reference=False), run(model, chunks, reference=True))


def test_reference_switch_round_trips(reference_off):
    msr.set_reference_kernels(True)
    assert msr.reference_kernels()
    msr.set_reference_kernels(False)
    assert not msr.reference_kernels()


def test_kernel_switches_are_restored_after_a_block():
    assert (msr.reference_kernels(), msr.input_tables()) == (False, True)  # the defaults
    with pytest.raises(RuntimeError, match="inside"):
        with msr.testing.kernel_switches(reference_kernels=True, input_tables=False):
            assert (msr.reference_kernels(), msr.input_tables()) == (True, False)
            raise RuntimeError("inside")
    assert (msr.reference_kernels(), msr.input_tables()) == (False, True)
    with msr.testing.kernel_switches(input_tables=False):  # None leaves a switch as it is
        assert (msr.reference_kernels(), msr.input_tables()) == (False, False)
    assert msr.input_tables()
    for switch in (msr.set_reference_kernels, msr.set_input_tables):
        with pytest.raises(TypeError, match="bool"):
            switch(1)


def test_float32_fast_close_to_reference(reference_off):
    """The float32 model at the benchmark's shape ratios: fast and plain agree to float32 rounding."""
    msr.set_num_threads(2)
    V, E, H, B, T = 20, 16, 96, 8, 12
    model = msr.LSTM(vocab_size=V, embed_size=E, hidden_sizes=(H, H), seed=1)
    data = np.random.default_rng(2).integers(0, V, (B, T + 1))
    (fast,), _ = run(model, [(data[:, :T], data[:, 1:])], reference=False)
    (ref,), _ = run(model, [(data[:, :T], data[:, 1:])], reference=True)
    assert fast[1] == pytest.approx(ref[1], rel=1e-5)
    for name in ref[2]:
        np.testing.assert_allclose(fast[2][name], ref[2][name], rtol=2e-3, atol=1e-6, err_msg=name)
