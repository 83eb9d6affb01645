"""Every instruction-set variant of the core that this CPU can run gives the same model."""

import json
import os
import subprocess
import sys

import pytest

import multiscale_rnn as msr

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


def runnable():
    """The variants this CPU can run, best first, and whether each is built."""
    return [(isa, built) for isa, built, _ in msr.testing.isa_variants()]


def test_baseline_is_built():
    assert dict(runnable())["baseline"], "the baseline module must always be built"


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_variant_agrees_with_baseline(isa):
    built = dict(runnable())
    if isa not in built:
        pytest.skip(f"this CPU cannot run the {isa} variant")
    if not built[isa]:
        pytest.skip(f"the {isa} variant is not built (a development build with MSRNN_BASELINE_ONLY)")
    base, other = run("baseline"), run(isa)
    assert (base["isa"], other["isa"]) == ("baseline", isa)  # the forced variant is the one that ran
    assert other["loss"] == pytest.approx(base["loss"], rel=1e-12)
    assert other["g"] == pytest.approx(base["g"], rel=1e-10)


def test_bad_isa_name():
    env = dict(os.environ, MULTISCALE_RNN_ISA="sse9")
    out = subprocess.run([sys.executable, "-c", "import multiscale_rnn"], env=env, capture_output=True, text=True)
    assert out.returncode != 0 and "MULTISCALE_RNN_ISA='sse9'" in out.stderr


def test_chosen_variant_is_the_best_built_one():
    forced = os.environ.get("MULTISCALE_RNN_ISA")
    expected = forced or next(isa for isa, built in runnable() if built)
    assert msr.ISA == expected
    module = {isa: m for isa, _, m in msr.testing.isa_variants()}[expected]
    assert type(msr.testing.core_model("lstm", 5, 4, [6])).__module__ == module
