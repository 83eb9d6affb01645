"""The Trainer's divergence guard: a validation figure far above the best so far stops the run,
says so, and leaves the best parameters in the model and the last checkpoint as it was."""

import warnings

import numpy as np
import pytest
from _texts import noisy_cycle

import multiscale_rnn as msr
from multiscale_rnn import checkpoint

V = 12


def _text(n, seed):
    return noisy_cycle(n, V, 0.05, seed)


TRAIN, VALID = _text(4000, 0), _text(600, 1)


def _trainer(**kw):
    kw.setdefault("divergence", 0.1)
    model = msr.LSTM(V, 8, (16,), seed=0)
    return model, msr.Trainer(
        model, optimizer=msr.optim.SGD(1.0), clip_norm=None, batch_size=8, bptt=20, progress=False, **kw
    )


def _blow_up(trainer, epochs, **fit_kw):
    """One sound epoch, then a learning rate that wrecks the model."""
    trainer.fit(TRAIN, valid=VALID, epochs=1, **fit_kw)
    trainer.optimizer.lr = 400.0
    return trainer.fit(TRAIN, valid=VALID, epochs=epochs, **fit_kw)


def test_a_diverged_run_stops_says_so_and_keeps_the_best(tmp_path):
    ck = tmp_path / "run.npz"
    model, tr = _trainer()
    tr.fit(TRAIN, valid=VALID, epochs=1, checkpoint=ck)
    best = np.array(model.flat_parameters(), copy=True)
    saved = ck.read_bytes()
    tr.optimizer.lr = 400.0
    with pytest.warns(
        RuntimeWarning,
        match=r"epoch 2: validation bpc \d+\.\d+ is \d+\.\d\d above the best so far "
        r"\(\d\.\d+, epoch 1\): the run has diverged.*best parameters \(epoch 1\)"
        r".*run\.npz is left as it was",
    ):
        history = tr.fit(TRAIN, valid=VALID, epochs=5, checkpoint=ck)
    assert len(history) == 2 and history[-1]["diverged"] is True
    assert history[-1]["valid_bpc"] > history[0]["valid_bpc"] + 0.1
    assert tr.diverged["epoch"] == 2 and tr.diverged["best_epoch"] == 1
    np.testing.assert_array_equal(model.flat_parameters(), best)  # the model holds the best parameters
    assert ck.read_bytes() == saved  # the last good checkpoint is intact
    assert msr.evaluate(model, VALID, batch_size=8, bptt=20)["bpc"] == pytest.approx(history[0]["valid_bpc"], abs=1e-9)


def test_no_guard_trains_through():
    _, tr = _trainer(divergence=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        history = _blow_up(tr, 3)
    assert len(history) == 3 and not any(r.get("diverged") for r in history)
    assert tr.diverged is None


def test_a_sound_run_is_not_stopped():
    _, tr = _trainer()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        history = tr.fit(TRAIN, valid=VALID, epochs=3)
    assert len(history) == 3 and tr.diverged is None


def test_the_guard_is_off_by_default():
    assert msr.Trainer(msr.LSTM(V, 4, (4,))).divergence is None


def test_the_guard_without_validation_data_is_refused():
    # it watches the validation figure: without one it used to be accepted and never fire
    _, trainer = _trainer()
    with pytest.raises(ValueError, match="divergence watches the validation loss, and fit has no validation data"):
        trainer.fit(TRAIN, epochs=1)
    assert trainer.step == 0


@pytest.mark.parametrize("bad", [0, -0.1, float("nan"), "x", True])
def test_the_margin_is_checked(bad):
    with pytest.raises(ValueError, match="divergence must be a number of bits > 0 \\(or None: no guard\\)"):
        msr.Trainer(msr.LSTM(V, 4, (4,)), divergence=bad)


def test_the_command_line_takes_the_guard_and_none(tmp_path):
    from multiscale_rnn.cli import build_parser, resolve_settings

    args = build_parser().parse_args(["train", "--divergence", "none"])
    assert args.divergence == "none"
    with pytest.raises(ValueError, match="divergence"):
        resolve_settings("quick", flags={"divergence": -1.0})


@pytest.mark.parametrize("saved_before_the_guard", [False, True])
def test_a_resumed_run_compares_with_the_best_before_the_stop(tmp_path, monkeypatch, saved_before_the_guard):
    """Processes stop between epochs: a new trainer resumed from the checkpoint must still see that epoch 2
    diverged from epoch 1 (else epoch 2 becomes the baseline and the wrecked run trains on). A checkpoint
    written before the guard's state was saved takes the trainer's best epoch as the baseline."""
    ck = tmp_path / "run.npz"
    model, tr = _trainer()
    if saved_before_the_guard:
        plain = msr.Trainer.state_dict
        monkeypatch.setattr(
            msr.Trainer, "state_dict", lambda self: {k: v for k, v in plain(self).items() if k != "divergence"}
        )
    tr.fit(TRAIN, valid=VALID, epochs=1, checkpoint=ck)
    best = np.array(model.flat_parameters(), copy=True)
    state = checkpoint.load(ck).trainer_state
    assert ("divergence" in state) is not saved_before_the_guard
    if not saved_before_the_guard:
        assert state["divergence"]["epoch"] == 1
        np.testing.assert_array_equal(state["divergence"]["params"], best)
    model2, tr2 = _trainer()
    tr2.resume_from(ck)
    tr2.optimizer.lr = 400.0
    with pytest.warns(RuntimeWarning, match=r"epoch 2: .*the run has diverged.*best parameters \(epoch 1\)"):
        history = tr2.fit(TRAIN, valid=VALID, epochs=4, checkpoint=ck)
    assert len(history) == 2 and history[-1]["diverged"] is True and tr2.diverged["best_epoch"] == 1
    np.testing.assert_array_equal(model2.flat_parameters(), best)


def test_a_run_continued_after_the_stop_goes_on_from_the_best_parameters():
    """The warning's advice: a lower learning rate and another fit. ``trainer.diverged`` speaks of the last
    fit only, and training goes on from the best epoch's parameters."""
    model, tr = _trainer()
    with pytest.warns(RuntimeWarning, match="the run has diverged"):
        _blow_up(tr, 4)
    assert tr.diverged["epoch"] == 2
    tr.optimizer.lr = 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        history = tr.fit(TRAIN, valid=VALID, epochs=4)
    assert tr.diverged is None and [r["epoch"] for r in history] == [1, 2, 3, 4]
    assert history[-1]["valid_bpc"] < history[1]["valid_bpc"] and not history[-1].get("diverged")
