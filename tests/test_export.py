"""multiscale_rnn.export: the state dict of every family, and the torch.nn module of the LSTM, GRU and Elman RNN
computing the model's logits and state (float32, 1e-6) over seeded batches, across two chunks with the state
carried. The torch tests skip, saying so, where PyTorch is not installed (it is an optional extra)."""

import sys

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn import export

TORCH_FAMILIES = sorted(export.torch_families())


@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason='PyTorch is optional: pip install "multiscale-rnn[torch]"')


def test_the_torch_families_are_the_three_pytorch_has():
    assert export.torch_families() == {"ElmanRNN": "RNN", "GRU": "GRU", "LSTM": "LSTM"}


@pytest.mark.parametrize("name", sorted(msr.MODELS))
def test_state_dict_of_every_family_is_a_copy_by_the_models_names(name):
    model = msr.MODELS[name].example(11, dtype="float32")
    sd = export.state_dict(model)
    params = model.parameters()
    assert list(sd) == list(params)
    for k, v in sd.items():
        assert isinstance(v, np.ndarray) and v.flags.c_contiguous and v.dtype == np.float32
        np.testing.assert_array_equal(v, params[k])
    first = next(iter(sd))
    sd[first][...] = 7.0  # a copy: the model is untouched
    assert not np.all(params[first] == 7.0)


@pytest.mark.parametrize("name", sorted(msr.MODELS))
def test_state_dict_as_tensors(name, torch):
    model = msr.MODELS[name].example(11, dtype="float64")
    sd = export.state_dict(model, tensors=True)
    assert list(sd) == list(model.parameters())
    for k, v in sd.items():
        assert isinstance(v, torch.Tensor) and v.dtype == torch.float64 and not v.requires_grad
        np.testing.assert_array_equal(v.numpy(), model.parameters()[k])


@pytest.mark.parametrize("name", TORCH_FAMILIES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_torch_module_computes_the_models_logits_and_state(name, seed, torch):
    V, E, H, L, B = 30, 16, 32, 2, 4
    model = msr.MODELS[name](V, embed_size=E, hidden_sizes=(H,) * L, seed=seed)
    module = export.to_torch(model)
    assert isinstance(module, getattr(torch.nn, export.torch_families()[name]))
    assert sorted(module.state_dict()) == sorted(model.parameters())  # the same names
    tok = np.random.default_rng(seed).integers(0, V, (B, 13))
    ours, hx = None, None
    for chunk in (slice(0, 6), slice(6, 13)):  # two chunks, the state carried on both sides
        logits, ours = model.forward(tok[:, chunk], ours)
        with torch.no_grad():
            z, hx = module(torch.from_numpy(tok[:, chunk]), hx)
        assert z.dtype == torch.float32
        np.testing.assert_allclose(z.numpy(), logits, rtol=0, atol=1e-6)
        theirs = export.state_from_torch(model, hx)
        assert sorted(theirs) == sorted(ours)
        for k in ours:
            np.testing.assert_allclose(theirs[k], ours[k], rtol=0, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("name", TORCH_FAMILIES)
def test_the_torch_module_starts_from_the_models_state(name, torch):
    model = msr.MODELS[name](12, embed_size=8, hidden_sizes=(16,), seed=3, dtype="float64")
    module = export.to_torch(model)
    assert next(module.parameters()).dtype == torch.float64
    tok = np.random.default_rng(5).integers(0, 12, (2, 9))
    _, state = model.forward(tok[:, :4])
    logits, _ = model.forward(tok[:, 4:], state)
    with torch.no_grad():
        z, _ = module(torch.from_numpy(tok[:, 4:]), export.state_to_torch(model, state))
    np.testing.assert_allclose(z.numpy(), logits, rtol=1e-10, atol=1e-12)
    assert export.state_to_torch(model, None) is None


def test_real_valued_inputs_go_through_the_encoder(torch):
    model = msr.GRU(5, embed_size=6, hidden_sizes=(10, 10), input_size=3, seed=2)
    module = export.to_torch(model)
    assert "encoder.weight" in module.state_dict() and not hasattr(module, "embedding")
    x = np.random.default_rng(0).standard_normal((3, 7, 3)).astype(np.float32)
    logits, _ = model.forward(x)
    with torch.no_grad():
        z, _ = module(torch.from_numpy(x))
    np.testing.assert_allclose(z.numpy(), logits, rtol=0, atol=1e-6)


def test_dropout_is_where_the_model_has_it(torch):
    module = export.to_torch(msr.LSTM(9, embed_size=4, hidden_sizes=(8, 8), dropout=0.25))
    assert module.dropout == 0.25 and module.drop.p == 0.25 and not module.training


@pytest.mark.parametrize("name", sorted(set(msr.MODELS) - set(TORCH_FAMILIES)))
def test_families_without_a_torch_layer_are_refused_naming_those_with_one(name):
    model = msr.MODELS[name].example(11)
    with pytest.raises(ValueError, match=rf"{name} has no torch.nn equivalent: to_torch covers ElmanRNN"):
        export.to_torch(model)


def test_what_the_torch_layer_cannot_hold_is_refused():
    with pytest.raises(ValueError, match=r"one hidden size for every layer; LSTM has hidden_sizes=\[8, 4\]"):
        export.to_torch(msr.LSTM(9, embed_size=4, hidden_sizes=(8, 4)))
    with pytest.raises(ValueError, match="exports the linear head; GRU has head='gated'"):
        export.to_torch(msr.GRU(9, embed_size=4, hidden_sizes=(8,), head="gated", head_size=4))
    with pytest.raises(TypeError, match="needs a multiscale_rnn model, got dict"):
        export.to_torch({})
    with pytest.raises(TypeError, match="tensors must be True or False"):
        export.state_dict(msr.LSTM(9, embed_size=4, hidden_sizes=(8,)), tensors="yes")


def test_without_torch_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    model = msr.LSTM(9, embed_size=4, hidden_sizes=(8,))
    for call in (lambda: export.to_torch(model), lambda: export.state_dict(model, tensors=True)):
        with pytest.raises(
            ImportError, match=r'needs PyTorch, an optional dependency: pip install "multiscale-rnn\[torch\]"'
        ):
            call()
    assert set(export.state_dict(model)) == set(model.parameters())  # NumPy needs no torch
