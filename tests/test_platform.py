"""The shape every model family shares: cores registered by name, declared options checked in one
place, parameter roles, the public state API and the loss with auxiliary terms."""

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn.models import registry
from multiscale_rnn.models.base import KEEP, LanguageModel, Loss, Option

V, E = 11, 5
KINDS = {"embedding", "input", "recurrent", "bias", "gain", "shift", "output", "other"}
# The contract every family keeps (options refused, config round trip, gradients, reference parity,
# float32, resume) runs over the registry in tests/test_contract.py.


def test_every_core_is_registered_and_named_in_errors():
    names = msr.testing.core_names()
    with pytest.raises(ValueError, match="unknown core 'nope'; known cores: .*'hm_lstm'"):
        msr.testing.core_model("nope", V, E, [4])
    for cls in msr.MODELS.values():
        assert cls.core_name in names, cls


def test_core_options_are_read_by_one_reader():
    with pytest.raises(ValueError, match="the lstm core has no option 'slope'; it takes none"):
        msr.testing.core_model("lstm", V, E, [4], options={"slope": 1.0})
    with pytest.raises(ValueError, match="the hm_lstm option 'boundary' must be a string, got 1"):
        msr.testing.core_model("hm_lstm", V, E, [4, 4], options={"boundary": 1.0})
    with pytest.raises(ValueError, match="the fs_rnn option 'fast_cells' must be a whole number >= 2, got 1.5"):
        msr.testing.core_model("fs_rnn", V, E, [4, 4], options={"fast_cells": 1.5})
    with pytest.raises(ValueError, match="option 'cell' must be one of 'lstm', 'gru', got 'elman'"):
        msr.testing.core_model("stacked_lstm", V, E, [4], options={"cell": "elman"})


@pytest.mark.parametrize("name", sorted(msr.MODELS))
def test_every_parameter_has_a_role(name):
    cls = msr.MODELS[name]
    model = cls.example(V)
    roles = model.parameter_roles()
    params = model.parameters()
    assert set(roles) == set(params)
    for pname, role in roles.items():
        assert role.kind in KINDS, pname
        if role.unit:  # whole gate blocks (the HM-LSTM adds its boundary row)
            assert params[pname].shape[0] % role.unit in (0, 1), pname
        if role.kind in ("recurrent", "input"):
            assert role.layer and pname.endswith(role.layer), pname
    assert roles["decoder.weight"].kind == "output"
    assert roles["embedding.weight"].kind == "embedding"
    # the default initialisation reads the roles (a family with its own, such as the FS-RNN paper's
    # forget-gate bias on the gate shifts, may set shifts)
    own_init = cls.reset_parameters is not LanguageModel.reset_parameters
    for pname, role in roles.items():
        if role.kind == "gain":
            assert np.all(params[pname] == 1.0), pname
        elif role.kind == "shift" and not own_init:
            assert np.all(params[pname] == 0.0), pname


def test_a_family_registers_itself_by_being_defined():
    try:

        class TinyLSTM(msr.LSTM):
            """An LSTM with a small default size."""

            core_name = "lstm"
            aliases = ("tiny-lstm",)
            defaults = dict(embed_size=4, hidden_sizes=(3,))
            family_options = (Option("note", str, "none", core=False),)

            def core_options(self, values, sizes):
                return {}

        assert msr.MODELS["TinyLSTM"] is TinyLSTM
        m = msr.build_model("Tiny_LSTM", vocab_size=V, note="hello")
        assert isinstance(m, TinyLSTM) and m.config["note"] == "hello" and m.config["hidden_sizes"] == [3]
        with pytest.raises(TypeError, match="TinyLSTM: note must be a string, got 3"):
            TinyLSTM(V, note=3)
    finally:
        msr.MODELS.pop("TinyLSTM", None)
        for key in ("tinylstm",):
            registry._FACTORIES.pop(key, None)
    with pytest.raises(ValueError, match="unknown model 'tiny-lstm'"):
        msr.build_model("tiny-lstm", vocab_size=V)


def test_state_keep_equals_passing_the_state():
    rng = np.random.default_rng(3)
    model = msr.HMLSTM(V, E, (6, 5), dtype="float64", seed=2)
    tok = rng.integers(0, V, (3, 8))
    tgt = rng.integers(0, V, (3, 8))
    _, state = model.forward(tok[:, :4])  # from zeros
    explicit, s1 = model.forward(tok[:, 4:], state)
    model.set_state(state)
    kept, s2 = model.forward(tok[:, 4:], KEEP)
    np.testing.assert_array_equal(explicit, kept)
    for k in s1:
        np.testing.assert_array_equal(s1[k], s2[k])
    model.reset_state(3)
    loss_a, _, _ = model.loss_and_grad(tok, tgt, KEEP, copy_grads=False)
    loss_b, grads, _ = model.loss_and_grad(tok, tgt, None)
    assert float(loss_a) == float(loss_b)
    np.testing.assert_array_equal(grads["weight_hh_l0"], model.gradients()["weight_hh_l0"])
    with pytest.raises(ValueError, match="state must be None, a dict name -> array or 'keep', got 'kept'"):
        model.forward(tok, "kept")
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
        model.reset_state(0)


def test_loss_carries_auxiliary_terms():
    loss = Loss(1.25, {"penalty": 0.5})
    assert float(loss) == 1.25 and loss.aux == {"penalty": 0.5} and loss.total == 1.75
    model = msr.LSTM(V, E, (4,))
    tok = np.zeros((2, 3), int)
    got, _, _ = model.loss_and_grad(tok, tok)
    assert isinstance(got, Loss) and got.aux == {} and got.total == float(got)
