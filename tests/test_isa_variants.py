"""Every instruction-set variant of the core that this CPU can run gives the same model."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

import multiscale_rnn as msr
from multiscale_rnn import _native

SCRIPT = """
import json, numpy as np, multiscale_rnn as msr
m = msr.LSTM(vocab_size=9, embed_size=4, hidden_sizes=(6,), dtype="float64", seed=1)
tok = np.random.default_rng(0).integers(0, 9, (2, 5))
loss, grads, _ = m.loss_and_grad(tok, tok)
print(json.dumps({"isa": msr.ISA, "loss": loss, "g": float(np.abs(grads["weight_hh_l0"]).sum())}))
"""


def run(isa):
    env = dict(os.environ, MULTISCALE_RNN_ISA=isa)
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_variants_agree():
    flags = _native._cpu_flags()
    runnable = ["baseline"] + [isa for isa in ("avx2", "avx512") if _native._FLAGS_NEEDED[isa] <= flags]
    results = []
    for isa in runnable:
        if importlib.util.find_spec(f"multiscale_rnn.{_native._MODULES[isa]}") is None:
            assert isa != "baseline", "the baseline module must always be built"
            continue  # a development build with MSRNN_BASELINE_ONLY
        results.append(run(isa))
    assert results[0]["isa"] == "baseline"
    for r in results[1:]:
        assert r["loss"] == pytest.approx(results[0]["loss"], rel=1e-12)
        assert r["g"] == pytest.approx(results[0]["g"], rel=1e-10)


def test_bad_isa_name():
    env = dict(os.environ, MULTISCALE_RNN_ISA="sse9")
    out = subprocess.run([sys.executable, "-c", "import multiscale_rnn"], env=env, capture_output=True, text=True)
    assert out.returncode != 0 and "MULTISCALE_RNN_ISA='sse9'" in out.stderr


def test_chosen_variant_is_reported():
    assert msr.ISA in ("baseline", "avx2", "avx512")
