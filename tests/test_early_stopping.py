"""Early stopping on the validation loss: it stops after ``patience`` epochs without improvement, puts the
best epoch's parameters back bit for bit, counts on across a resume, and refuses bad arguments."""

import numpy as np
import pytest
from _texts import noisy_cycle

import multiscale_rnn as msr
from multiscale_rnn import checkpoint
from multiscale_rnn.training import Hook
from multiscale_rnn.training.state import check_state

pytestmark = pytest.mark.usefixtures("one_thread")

V = 11


def _ids(n, seed):
    return noisy_cycle(n, V, 0.3, seed)


# a small noisy text and a high learning rate: the validation loss falls for a few epochs, then rises
TRAIN, VALID = _ids(400, 0), _ids(300, 1)


class Params(Hook):
    """The parameters at the end of every epoch."""

    def __init__(self):
        self.at = {}

    def on_epoch_end(self, run, row):
        self.at[row["epoch"]] = np.array(run.trainer.model.flat_parameters(), copy=True)


def _trainer(early_stopping=None, hooks=()):
    model = msr.LSTM(V, 8, (32,), seed=0)
    opt = msr.optim.Adam(3e-2)
    return msr.Trainer(model, opt, batch_size=4, bptt=20, progress=False, early_stopping=early_stopping, hooks=hooks)


def _stop_epoch(losses, patience, min_delta):
    """Where the rule stops a run with these validation losses (None: it does not)."""
    best, bad = None, 0
    for epoch, loss in enumerate(losses, 1):
        if best is None or loss < best - min_delta:
            best, bad = loss, 0
        else:
            bad += 1
            if bad >= patience:
                return epoch
    return None


@pytest.mark.parametrize("patience, min_delta", [(3, 0.0), (2, 0.05)])
def test_it_stops_after_patience_epochs_and_restores_the_best(patience, min_delta):
    full = _trainer().fit(TRAIN, valid=VALID, epochs=16)  # the same run without early stopping
    losses = [r["valid_loss"] for r in full]
    expected = _stop_epoch(losses, patience, min_delta)
    assert expected is not None and expected < 16
    seen = Params()
    stopper = msr.EarlyStopping(patience=patience, min_delta=min_delta)
    trainer = _trainer(stopper, hooks=[seen])
    history = trainer.fit(TRAIN, valid=VALID, epochs=16)
    assert [r["valid_loss"] for r in history] == losses[:expected]
    assert stopper.stopped_epoch == expected and history[-1]["early_stop"] is True
    best = int(np.argmin(losses[:expected])) + 1
    assert trainer.best_epoch == best and best < expected
    assert np.array_equal(trainer.model.flat_parameters(), seen.at[best])  # bit for bit
    assert not np.array_equal(seen.at[expected], seen.at[best])


def test_a_resumed_run_counts_on_and_stops_where_the_whole_run_stops(tmp_path):
    whole = _trainer(msr.EarlyStopping(patience=3))
    history = whole.fit(TRAIN, valid=VALID, epochs=16)
    stop = len(history)
    ck = tmp_path / "run.npz"
    _trainer(msr.EarlyStopping(patience=3)).fit(TRAIN, valid=VALID, epochs=stop - 1, checkpoint=ck)
    saved = checkpoint.load(ck).trainer_state["early_stopping"]
    assert saved["bad"] == 2 and saved["stopped_epoch"] is None  # two epochs without improvement so far
    resumed = _trainer(msr.EarlyStopping(patience=3))
    resumed.fit(TRAIN, valid=VALID, epochs=16, checkpoint=ck, resume=True)
    assert [r["valid_loss"] for r in resumed.history] == [r["valid_loss"] for r in history]
    assert resumed.epoch == stop and resumed.best_epoch == whole.best_epoch
    assert np.array_equal(resumed.model.flat_parameters(), whole.model.flat_parameters())
    # the run stopped: resumed again it stays stopped; a larger patience trains on
    again = _trainer(msr.EarlyStopping(patience=3))
    again.fit(TRAIN, valid=VALID, epochs=16, checkpoint=ck, resume=True)
    assert again.epoch == stop and again.early_stopping.stopped_epoch == stop
    assert np.array_equal(again.model.flat_parameters(), whole.model.flat_parameters())
    more = _trainer(msr.EarlyStopping(patience=4))
    more.fit(TRAIN, valid=VALID, epochs=16, checkpoint=ck, resume=True)
    assert more.epoch > stop


def test_a_run_saved_without_early_stopping_is_counted_from_its_history(tmp_path):
    ck = tmp_path / "run.npz"
    full = _trainer().fit(TRAIN, valid=VALID, epochs=16, checkpoint=ck)
    losses = [r["valid_loss"] for r in full]
    assert _stop_epoch(losses, 3, 0.0) < 16
    stopper = msr.EarlyStopping(patience=3)
    trainer = _trainer(stopper)
    trainer.fit(TRAIN, valid=VALID, epochs=20, checkpoint=ck, resume=True)  # long past its patience: no training
    assert trainer.epoch == 16 and stopper.stopped_epoch == 16
    assert stopper.best_epoch == int(np.argmin(losses)) + 1 and stopper.bad == 16 - stopper.best_epoch
    assert trainer.best_epoch == stopper.best_epoch


@pytest.mark.parametrize(
    "kw, error, words",
    [
        ({"patience": -1}, ValueError, "early stopping patience must be a positive integer, got -1"),
        ({"patience": 0}, ValueError, "early stopping patience must be a positive integer, got 0"),
        ({"patience": 2.5}, ValueError, "early stopping patience must be a positive integer, got 2.5"),
        ({"min_delta": float("nan")}, ValueError, r"min_delta must be a finite number >= 0 \(nats\), got nan"),
        ({"min_delta": -0.1}, ValueError, "early stopping min_delta must be a finite number >= 0, got -0.1"),
        ({"restore_best": 1}, TypeError, "restore_best must be True or False"),
    ],
)
def test_bad_arguments_are_refused(kw, error, words):
    with pytest.raises(error, match=words):
        msr.EarlyStopping(**kw)


def test_the_trainer_refuses_what_early_stopping_cannot_do():
    with pytest.raises(TypeError, match=r"early_stopping must be an EarlyStopping\(patience, min_delta\) or None"):
        _trainer(early_stopping=3)
    with pytest.raises(ValueError, match="early_stopping watches the validation loss, and fit has no validation"):
        _trainer(msr.EarlyStopping()).fit(TRAIN, epochs=2)


def test_a_saved_state_of_the_wrong_type_is_refused():
    state = _trainer(msr.EarlyStopping()).state_dict()
    check_state(state)
    for bad in ({"best": None, "best_epoch": None, "bad": -1, "stopped_epoch": None}, {"bad": "2"}, [1]):
        with pytest.raises(ValueError, match="trainer state 'early_stopping' must be an object with 'best'"):
            check_state({**state, "early_stopping": bad})


# ---- the command line ------------------------------------------------------------------------------------


@pytest.fixture
def noisy_text(tmp_path):
    """Your own text: a noisy cycle of 11 letters, small enough to overfit in a few epochs."""
    path = tmp_path / "noisy.txt"
    path.write_text("".join("abcdefghijk"[i] for i in _ids(4000, 0)))
    return path


def test_the_command_line_stops_early_and_reports_the_best_epoch(tmp_path, noisy_text, capsys):
    from multiscale_rnn.cli import main
    from multiscale_rnn.trainer import History, history_path

    out = tmp_path / "run.npz"
    tiny = ["--embed-size", "8", "--hidden-sizes", "32", "--batch-size", "4", "--bptt", "20", "--lr", "0.03"]
    args = ["train", "--data", str(noisy_text), *tiny, "--threads", "1", "--no-progress", "--out", str(out)]
    assert main([*args, "--epochs", "30", "--early-stopping", "3"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    history = History.load(history_path(out))
    best = min(history, key=lambda r: r["valid_loss"])
    assert len(history) < 30 and history[-1]["early_stop"] is True
    assert last.startswith(
        f"done after {len(history)} epoch(s), {history[-1]['steps']} steps (stopped early: no better validation "
        f"loss for 3 epochs); best epoch {best['epoch']} (its parameters restored): valid bpc {best['valid_bpc']:.4f}"
    )
    state = checkpoint.load(out).trainer_state
    assert state["early_stopping"]["stopped_epoch"] == len(history) and state["best_epoch"] == best["epoch"]
    # resumed with a larger patience, the run trains on
    more = ["--epochs", str(len(history) + 1), "--early-stopping", "9", "--threads", "1", "--no-progress"]
    assert main(["train", "--resume", "--out", str(out), *more]) == 0
    assert f"done after {len(history) + 1} epoch(s)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--early-stopping", "-1"], "early-stopping must be a positive integer of epochs (or none), got -1"),
        (["--early-stopping", "0"], "early-stopping must be a positive integer of epochs (or none), got 0"),
        (["--early-stopping", "3", "--min-delta", "nan"], "min-delta must be a finite number >= 0 (nats), got nan"),
        (["--min-delta", "0.1"], "min-delta = 0.1 is the smallest improvement early stopping counts, and early"),
    ],
)
def test_the_command_line_refuses_bad_early_stopping_flags(tmp_path, noisy_text, capsys, flags, words):
    from multiscale_rnn.cli import main

    assert main(["train", "--data", str(noisy_text), "--out", str(tmp_path / "x.npz"), *flags]) == 1
    assert words in capsys.readouterr().err


def test_the_best_model_comes_back_with_its_options_values(tmp_path):
    """A VCRNN's sharpness is annealed per epoch: putting epoch 1's parameters back under epoch 3's sharpness
    would give another model. restore_best and ``evaluate --best`` set the options' values of the best epoch,
    so the model scores what that epoch scored."""
    from multiscale_rnn.command_line.commands import _load_checkpoint

    class Wreck(Hook):  # epochs 2 and 3 at a learning rate that makes them worse than epoch 1
        def on_epoch_start(self, run):
            if run.trainer.epoch >= 1:
                run.trainer.optimizer.lr = 50.0

    model = msr.VCRNN(V, 16, (16,), seed=0)
    tr = msr.Trainer(model, msr.optim.Adam(3e-2), batch_size=4, bptt=20, progress=False, hooks=[Wreck()],
                     model_options={"sharpness": msr.sharpness_schedule()})  # fmt: skip
    ck = tmp_path / "vc.npz"
    history = tr.fit(TRAIN, valid=VALID, epochs=3, checkpoint=ck)
    assert tr.best_epoch == 1 and [h["valid_bpc"] > history[0]["valid_bpc"] for h in history[1:]] == [True, True]
    assert tr.best_options == {"sharpness": pytest.approx(0.1)} and model.options["sharpness"] == pytest.approx(0.3)
    best = msr.evaluate(model, VALID, batch_size=4, bptt=20)["bpc"]
    assert tr.restore_best()
    assert model.options["sharpness"] == pytest.approx(0.1) and tr.option_values == tr.best_options
    got = msr.evaluate(model, VALID, batch_size=4, bptt=20)["bpc"]
    assert got == pytest.approx(history[0]["valid_bpc"], abs=1e-9) and abs(got - best) > 1e-3
    loaded = _load_checkpoint(ck, best=True).model  # the command line's --best, from the saved state
    assert loaded.options["sharpness"] == pytest.approx(0.1)
    assert msr.evaluate(loaded, VALID, batch_size=4, bptt=20)["bpc"] == pytest.approx(got, abs=1e-9)


@pytest.mark.parametrize("max_chunks", [None, 3])
def test_a_checkpoint_saved_before_best_options_were_takes_them_from_its_best_epoch(tmp_path, monkeypatch, max_chunks):
    """A checkpoint without ``best_options`` written at the end of its best epoch holds that epoch's option
    values; one written inside a later epoch does not, and none are made up."""
    plain = msr.Trainer.state_dict
    monkeypatch.setattr(
        msr.Trainer, "state_dict", lambda self: {k: v for k, v in plain(self).items() if k != "best_options"}
    )
    ck = tmp_path / "vc.npz"
    opts = {"sharpness": msr.sharpness_schedule()}
    tr = msr.Trainer(msr.VCRNN(V, 16, (16,), seed=0), msr.optim.Adam(3e-2), batch_size=4, bptt=20, progress=False,
                     model_options=opts)  # fmt: skip
    tr.fit(TRAIN, valid=VALID, epochs=1, checkpoint=ck)
    if max_chunks is not None:  # stopped inside epoch 2, whose sharpness is 0.2
        tr.fit(TRAIN, valid=VALID, epochs=2, checkpoint=ck, max_chunks=max_chunks)
    again = msr.Trainer(msr.VCRNN(V, 16, (16,), seed=0), msr.optim.Adam(3e-2), batch_size=4, bptt=20,
                        progress=False, model_options=opts)  # fmt: skip
    again.resume_from(ck)
    assert again.best_epoch == 1
    assert again.best_options == (None if max_chunks else {"sharpness": pytest.approx(0.1)})
