"""Models that read real-valued vectors through a linear encoder (input_size=D)."""

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn.testing import check_model_gradients


def make(cls=msr.LSTM, **kw):
    return cls(vocab_size=5, embed_size=4, hidden_sizes=(6,), input_size=3, dtype="float64", seed=2, **kw)


@pytest.mark.parametrize("cls", [msr.LSTM, msr.GRU, msr.ElmanRNN])
def test_gradients_with_linear_encoder(cls):
    rng = np.random.default_rng(0)
    model = make(cls, dropout=0.2)
    x = rng.normal(size=(2, 4, 3))
    y = rng.integers(0, 5, (2, 4))
    errors = check_model_gradients(model, x, y)
    assert {"encoder.weight", "encoder.bias"} <= set(errors) and "embedding.weight" not in errors
    assert max(errors.values()) < 1e-6, errors


def test_encoder_is_the_linear_map():
    rng = np.random.default_rng(1)
    model = make()
    x = rng.normal(size=(3, 5, 3))
    p = model.parameters()
    assert p["encoder.weight"].shape == (4, 3) and p["encoder.bias"].shape == (4,)
    # An embedding model fed the encoded vectors as one-hot rows gives the same logits.
    emb = msr.LSTM(vocab_size=5, embed_size=4, hidden_sizes=(6,), dtype="float64", seed=2)
    onehot_inputs = np.eye(3)[rng.integers(0, 3, (3, 5))]
    ids = onehot_inputs.argmax(-1)
    q = emb.parameters()
    q["embedding.weight"][:3] = (p["encoder.weight"] + p["encoder.bias"][:, None]).T
    for name in p:
        if not name.startswith("encoder"):
            q[name][...] = p[name]
    np.testing.assert_allclose(model.forward(onehot_inputs)[0], emb.forward(ids)[0], rtol=1e-12, atol=1e-12)
    assert model.forward(x)[0].shape == (3, 5, 5)


def test_nan_and_bad_inputs_are_refused():
    model = make()
    x = np.zeros((2, 4, 3))
    x[1, 2, 0] = np.nan
    with pytest.raises(ValueError, match=r"nan at \(stream 1, step 2, feature 0\) is not finite"):
        model.forward(x)
    x[1, 2, 0] = np.inf
    with pytest.raises(ValueError, match=r"inf at \(stream 1, step 2, feature 0\)"):
        model.loss_and_grad(x, np.zeros((2, 4), int))
    with pytest.raises(ValueError, match=r"shape \(batch, steps, 3\), got shape \(2, 4\)"):
        model.forward(np.zeros((2, 4)))
    with pytest.raises(TypeError, match="real-valued"):
        model.forward(np.zeros((2, 4, 3), dtype=complex))
    with pytest.raises(ValueError, match="input_size"):
        msr.LSTM(vocab_size=5, embed_size=4, hidden_sizes=(6,), input_size=0)


def test_core_refuses_nan_itself():
    model = make()
    x = np.zeros((1, 2, 3))
    x[0, 1, 2] = np.nan
    with pytest.raises(ValueError, match=r"\(stream 0, step 1, feature 2\) is not finite"):
        model.forward(x)
    with pytest.raises(TypeError, match="int32"):
        msr.testing.core_model("lstm", 5, 4, [6], dtype="float32").forward(np.zeros((1, 2)), False)
