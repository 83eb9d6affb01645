"""Bad input to the model API raises clear exceptions naming the problem."""

import numpy as np
import pytest

import multiscale_rnn as msr


@pytest.fixture
def model():
    return msr.LSTM(vocab_size=10, embed_size=4, hidden_sizes=(5,), seed=0)


def test_token_out_of_vocabulary_names_id_and_position(model):
    tok = np.zeros((2, 4), int)
    tok[1, 2] = 10
    with pytest.raises(IndexError, match=r"token id 10 at \(stream 1, step 2\).*\[0, 10\)"):
        model.forward(tok)
    tok[1, 2] = -1
    with pytest.raises(IndexError, match=r"id -1 at \(stream 1, step 2\)"):
        model.loss_and_grad(tok, np.zeros((2, 4), int))
    with pytest.raises(IndexError, match=r"target id 12 at \(stream 0, step 3\)"):
        model.loss(np.zeros((2, 4), int), np.array([[0, 0, 0, 12], [0, 0, 0, 0]]))


def test_ids_are_checked_once_by_the_core(model):
    # The Python layer checks dtype and shape and leaves the range to the C++ core.
    with pytest.raises(IndexError, match=r"token id 99 at \(stream 0, step 1\)"):
        model.forward(np.array([[1, 99, 2]], np.int32))
    with pytest.raises(IndexError, match=r"token id -3 at \(stream 0, step 2\)"):
        msr.testing.core_model("lstm", 10, 4, [6], dtype="float32").forward(np.array([[1, 2, -3]], np.int32), False)


def test_wrong_dtype_and_shape(model):
    with pytest.raises(TypeError, match="integer.*float64"):
        model.forward(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"shape \(batch, steps\), got shape \(6,\)"):
        model.forward(np.zeros(6, int))
    with pytest.raises(ValueError, match="empty"):
        model.forward(np.zeros((2, 0), int))
    with pytest.raises(ValueError, match=r"targets have shape \(2, 2\), inputs \(2, 3\)"):
        model.loss_and_grad(np.zeros((2, 3), int), np.zeros((2, 2), int))


def test_bad_state(model):
    tok = np.zeros((2, 3), int)
    state = model.initial_state(2)
    with pytest.raises(ValueError, match=r"state 'h_l0' has shape \(3, 5\), expected \(batch 2"):
        model.forward(tok, {"h_l0": np.zeros((3, 5)), "c_l0": np.zeros((3, 5))})
    with pytest.raises(ValueError, match="state 'c_l0' has shape"):
        model.forward(tok, {"h_l0": np.zeros((2, 5)), "c_l0": np.zeros((2, 7))})
    with pytest.raises(ValueError, match="'c_l0' is missing"):
        model.forward(tok, {"h_l0": state["h_l0"]})
    bad = dict(state, h_l0=np.full((2, 5), np.nan))
    with pytest.raises(ValueError, match="NaN"):
        model.forward(tok, bad)
    with pytest.raises(TypeError, match="dict"):
        model.forward(tok, [1, 2])


@pytest.mark.parametrize("family", ["LSTM", "GRU", "HMLSTM"])
def test_state_of_another_model_is_refused_and_nothing_is_set(family):
    # An extra entry (another model's state, a typo beside the right names) is refused, not ignored,
    # and a refused state leaves the carried one as it was.
    cls = getattr(msr, family)
    model = cls(10, 4, (5, 5), seed=0)
    tok = np.random.default_rng(0).integers(0, 10, (2, 3))
    _, carried = model.forward(tok)
    state = {k: v + 1.0 for k, v in carried.items()}
    with pytest.raises(ValueError, match=r"state entry 'x_l0' is not one of this model's \(h_l0, "):
        model.forward(tok, dict(state, x_l0=np.zeros((2, 5))))
    wrong_size = dict(state, h_l1=np.zeros((2, 7)))
    with pytest.raises(ValueError, match=r"state 'h_l1' has shape \(batch 2, 7\), expected \(batch 2, 5\)"):
        model.set_state(wrong_size)
    for k, v in model.get_state().items():
        np.testing.assert_array_equal(v, carried[k], err_msg=k)
    if family == "GRU":
        lstm_state = msr.LSTM(10, 4, (5, 5)).initial_state(2)
        with pytest.raises(ValueError, match="'c_l0' is not one of this model's"):
            model.forward(tok, lstm_state)


def test_bad_random_state(model):
    with pytest.raises(ValueError, match=r"4 unsigned 64-bit words .*got \[1, 2\]"):
        model.set_rng_state([1, 2])
    with pytest.raises(ValueError, match="4 unsigned 64-bit words"):
        model.set_rng_state([-1, 2, 3, 4])
    with pytest.raises(ValueError, match="4 unsigned 64-bit words"):
        model.set_rng_state(np.ones(4))
    words = model.get_rng_state()
    model.set_rng_state(list(map(int, words)))
    np.testing.assert_array_equal(model.get_rng_state(), words)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(vocab_size=0, embed_size=4, hidden_sizes=(5,)), "vocab_size"),
        (dict(vocab_size=5, embed_size=4, hidden_sizes=()), "hidden_sizes"),
        (dict(vocab_size=5, embed_size=4, hidden_sizes=(5, -1)), "hidden_sizes"),
        (dict(vocab_size=5, embed_size=4, hidden_sizes=(5,), dropout=1.0), "dropout"),
        (dict(vocab_size=5, embed_size=4, hidden_sizes=(5,), dtype="float16"), "dtype"),
    ],
)
def test_bad_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        msr.GRU(**kwargs)


def test_load_parameters_checks_names_and_shapes(model):
    p = {k: v.copy() for k, v in model.parameters().items()}
    p["weight_hh_l0"] = np.zeros((3, 3))
    with pytest.raises(ValueError, match=r"'weight_hh_l0' has shape \(3, 3\), expected \(20, 5\)"):
        model.load_parameters(p)
    del p["weight_hh_l0"]
    with pytest.raises(ValueError, match="missing.*weight_hh_l0"):
        model.load_parameters(p)


def test_load_parameters_copies_all_or_nothing(model):
    before = {k: v.copy() for k, v in model.parameters().items()}
    changed = {k: v + 1.0 for k, v in before.items()}  # every parameter moved, so a partial copy would show
    names = list(changed)
    for bad, error, match in (
        ({**changed, names[-1]: np.zeros((1, 1))}, ValueError, rf"'{names[-1]}' has shape \(1, 1\)"),
        (
            {**changed, "decoder.bias": np.where(np.arange(10) == 7, np.inf, 0.0)},
            ValueError,
            r"'decoder.bias' holds inf at index \(7,\)",
        ),
        ({**changed, "decoder.bias": np.zeros(10, complex)}, TypeError, "must hold real numbers, got dtype complex128"),
        ({**changed, "decoder.bias": np.zeros(10, bool)}, TypeError, "got dtype bool"),
    ):
        with pytest.raises(error, match=match):
            model.load_parameters(bad)
        assert all(np.array_equal(model.parameters()[k], v) for k, v in before.items())
    model.load_parameters(changed)
    assert all(np.array_equal(model.parameters()[k], v) for k, v in changed.items())
