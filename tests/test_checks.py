"""The package's one set of argument checks (multiscale_rnn._checks): one meaning of "an integer" and
"a number" wherever an argument, a setting or a stored value is checked."""

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn import _checks as C


@pytest.mark.parametrize("v", [0, 3, -2, np.int64(4), np.uint8(1), 10**30])
def test_integers(v):
    assert C.is_int(v) and C.is_number(v)


@pytest.mark.parametrize("v", [True, False, np.bool_(True), 4.0, np.float32(2), "3", None, [1]])
def test_not_integers(v):
    assert not C.is_int(v)


@pytest.mark.parametrize("v", [True, np.bool_(False), float("nan"), float("inf"), np.float64("-inf"), "0.1", None])
def test_not_numbers(v):
    assert not C.is_number(v)


def test_the_raising_checks_name_the_argument_and_return_plain_values():
    assert C.positive_int(np.int32(3), "n") == 3 and type(C.positive_int(np.int32(3), "n")) is int
    assert C.positive_int(None, "n", allow_none=True) is None
    assert C.non_negative_int(0, "seed") == 0
    assert C.positive_number(np.float32(0.5), "lr") == 0.5 and type(C.positive_number(1, "lr")) is float
    assert C.non_negative_number(0, "eps") == 0.0
    for bad in (0, True, 2.0, "2"):
        with pytest.raises(ValueError, match=r"^n must be a positive integer, got "):
            C.positive_int(bad, "n")
    with pytest.raises(ValueError, match=r"^seed must be a non-negative integer, got -1$"):
        C.non_negative_int(-1, "seed")
    with pytest.raises(TypeError, match=r"^bptt must be an integer, got float 2.0$"):
        C.int_at_least(2.0, "bptt", 1)
    with pytest.raises(ValueError, match=r"^bptt must be at least 1, got 0$"):
        C.int_at_least(0, "bptt", 1)
    with pytest.raises(ValueError, match=r"^clip_norm must be a finite number > 0 or None, got 'x'$"):
        C.positive_number("x", "clip_norm", allow_none=True)
    with pytest.raises(ValueError, match=r"^eps must be a finite number >= 0, got nan$"):
        C.non_negative_number(float("nan"), "eps")


def test_first_bad_entry_reads_a_table_in_order():
    rules = {"a": (C.is_int, "an integer"), "b": (C.is_number, "a number"), "c": (C.is_int, "an integer")}
    assert C.first_bad_entry({"a": 1, "b": 2.5, "c": 3}, rules) is None
    assert C.first_bad_entry({"a": 1, "b": "x", "c": "y"}, rules) == "b"
    assert C.first_bad_entry({"a": 1, "b": 2.0}, rules) == "c"  # missing: None, which c may not be
    assert C.first_bad_entry({"a": 1, "b": 2.0}, rules, nullable=("c",)) is None


def test_the_package_uses_one_meaning():
    model = msr.LSTM(5, 4, (4,))
    for bad in (True, 2.0):  # a bool or a float is no batch size, anywhere
        with pytest.raises(ValueError, match="batch_size must be a positive integer"):
            msr.Trainer(model, batch_size=bad)
        with pytest.raises(ValueError, match="batch_size must be a positive integer"):
            msr.evaluate(model, np.arange(10) % 5, batch_size=bad)
        with pytest.raises(TypeError, match="batch_size must be an integer"):
            msr.data.batchify(np.arange(10), bad)
    assert msr.Trainer(model, batch_size=np.int64(4), seed=np.uint16(3)).batch_size == 4  # NumPy integers are
    with pytest.raises(ValueError, match="learning rate must be a finite number > 0"):
        msr.optim.Adam(lr="1e-3")
    with pytest.raises(ValueError, match="epoch_n must be an integer >= 0"):
        msr.schedules.HalveAfter(2.0)


def test_the_hint_of_an_unknown_name_is_the_nearest_choice():
    names = ["quick", "synthetic", "ptb-char-lstm"]
    assert C.closest("quik", names) == "quick" and C.closest("zzzz", names) is None
    assert C.did_you_mean("synthetik", names) == " (did you mean synthetic?)"
    assert C.did_you_mean("synthetik", names, quote=True) == " (did you mean 'synthetic'?)"
    assert C.did_you_mean("zzzz", names) == ""
