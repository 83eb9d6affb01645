"""The hooks of Trainer.fit: the events and their order, what a hook sees, a hook that stops the run,
and the check of the hooks given."""

import pytest
from _texts import noisy_cycle

import multiscale_rnn as msr
from multiscale_rnn.training import EVENTS, Hook

pytestmark = pytest.mark.usefixtures("one_thread")

V = 11


def _ids(n, seed=0):
    return noisy_cycle(n, V, 0.1, seed)


TRAIN, VALID = _ids(1200), _ids(300, seed=1)  # batch 4, bptt 20: 15 chunks per epoch


class Recorder(Hook):
    def __init__(self):
        self.events = []

    def on_fit_start(self, run):
        self.events.append(("on_fit_start", run.trainer.step))

    def on_epoch_start(self, run):
        self.events.append(("on_epoch_start", run.trainer.epoch + 1, run.trainer.chunk))

    def on_step(self, run, step):
        self.events.append(("on_step", step.epoch, step.chunk))

    def on_chunks_end(self, run):
        self.events.append(("on_chunks_end",))

    def on_evaluate(self, run, row):
        assert row not in run.trainer.history and "next_lr" not in row
        self.events.append(("on_evaluate", row["epoch"]))

    def on_epoch_end(self, run, row):
        assert run.trainer.history[-1] is row
        self.events.append(("on_epoch_end", row["epoch"]))

    def on_checkpoint(self, run):
        self.events.append(("on_checkpoint", run.trainer.epoch, run.trainer.chunk))

    def on_fit_end(self, run):
        self.events.append(("on_fit_end",))


def _trainer(hooks, **kw):
    model = msr.LSTM(V, 8, (12,), seed=0)
    return msr.Trainer(model, batch_size=4, bptt=20, progress=False, hooks=hooks, **kw)


def test_the_events_come_in_order(tmp_path):
    rec = Recorder()
    _trainer([rec]).fit(TRAIN, valid=VALID, epochs=2, checkpoint=tmp_path / "run.npz", checkpoint_every=10)
    one_epoch = lambda e: (  # noqa: E731
        [("on_epoch_start", e, 0)]
        + [("on_step", e, c) for c in range(1, 11)]
        + [("on_checkpoint", e - 1, 10)]
        + [("on_step", e, c) for c in range(11, 16)]
        + [("on_chunks_end",), ("on_evaluate", e), ("on_epoch_end", e), ("on_checkpoint", e, 0)]
    )
    assert rec.events == [("on_fit_start", 0)] + one_epoch(1) + one_epoch(2) + [("on_fit_end",)]


def test_a_hook_sees_what_log_receives():
    seen, logged = [], []

    class Steps:  # any object with event methods will do
        def on_step(self, run, step):
            seen.append(step)

    _trainer([Steps()]).fit(TRAIN, epochs=1, log=logged.append)
    chunks = [e for e in logged if e["event"] == "chunk"]
    assert len(seen) == len(chunks) == 15
    for step, e in zip(seen, chunks):
        assert (step.epoch, step.chunk, step.chunks, step.step) == (e["epoch"], e["chunk"], e["chunks"], e["step"])
        assert step.loss == e["loss"] and step.lr == e["lr"] and step.grad_norm == e["grad_norm"]


def test_a_hook_may_add_to_the_row():
    class Note(Hook):
        def on_evaluate(self, run, row):
            row["note"] = row["epoch"] * 10

    history = _trainer([Note()]).fit(TRAIN, epochs=2)
    assert [r["note"] for r in history] == [10, 20]


def test_a_hook_stops_the_run_at_an_epoch_end(tmp_path):
    class StopAfterOne(Hook):
        def on_epoch_end(self, run, row):
            run.stop()

    rec = Recorder()
    ck = tmp_path / "run.npz"
    tr = _trainer([StopAfterOne(), rec])
    history = tr.fit(TRAIN, valid=VALID, epochs=5, checkpoint=ck)
    assert len(history) == 1 and tr.epoch == 1
    assert rec.events[-2:] == [("on_checkpoint", 1, 0), ("on_fit_end",)]  # the epoch's checkpoint is written
    assert msr.checkpoint.load(ck).trainer_state["epoch"] == 1


def test_a_hook_stops_within_an_epoch_keeping_the_position_or_not(tmp_path):
    class StopAt(Hook):
        def __init__(self, chunk, save):
            self.chunk, self.save = chunk, save

        def on_step(self, run, step):
            if step.chunk == self.chunk:
                run.stop(warning="stopped by the test", save=self.save)

    ck = tmp_path / "run.npz"
    tr = _trainer([StopAt(4, True)])
    with pytest.warns(RuntimeWarning, match="stopped by the test"):
        tr.fit(TRAIN, epochs=1, checkpoint=ck)
    state = msr.checkpoint.load(ck).trainer_state
    assert (state["epoch"], state["chunk"]) == (0, 4) and state["carried"] is not None
    saved = ck.read_bytes()
    resumed = _trainer([StopAt(9, False)])
    with pytest.warns(RuntimeWarning, match="stopped by the test"):
        resumed.fit(TRAIN, epochs=1, checkpoint=ck, resume=True)
    assert resumed.chunk == 9 and ck.read_bytes() == saved  # stopped without saving: the file is as it was


def test_a_run_stopped_by_a_hook_continues_as_if_never_stopped(tmp_path):
    class StopAt(Hook):
        def on_step(self, run, step):
            if step.step == 7:
                run.stop()

    ck = tmp_path / "run.npz"
    _trainer([StopAt()]).fit(TRAIN, valid=VALID, epochs=2, checkpoint=ck)
    resumed = _trainer([])
    history = resumed.fit(TRAIN, valid=VALID, epochs=2, checkpoint=ck, resume=True)
    whole = _trainer([]).fit(TRAIN, valid=VALID, epochs=2)
    assert [r["train_loss"] for r in history] == [r["train_loss"] for r in whole]
    assert [r["valid_loss"] for r in history] == [r["valid_loss"] for r in whole]


def test_the_hooks_are_checked():
    class Misspelt:
        def on_epoch_ended(self, run, row):
            pass

    with pytest.raises(TypeError, match="on_epoch_ended, which is no event of fit"):
        _trainer([Misspelt()])
    with pytest.raises(TypeError, match="has no event method"):
        _trainer([object()])
    with pytest.raises(TypeError, match="pass Recorder\\(\\)"):
        _trainer([Recorder])
    with pytest.raises(TypeError, match="hooks must be a list"):
        _trainer(Recorder())
    assert set(EVENTS) == {n for n in dir(Hook) if n.startswith("on_")}


def test_a_hook_that_cannot_take_its_arguments_is_refused_before_training():
    # on_epoch_end without `row` used to fail after the first epoch; it is now refused by the Trainer
    class NoRow:
        def on_epoch_end(self, run):
            pass

    class Flexible:
        def on_epoch_end(self, *args, **kwargs):
            pass

        def on_step(self, run, step, extra=None):
            pass

    with pytest.raises(TypeError, match=r"hook NoRow: on_epoch_end must take \(run, row\), as fit calls it"):
        _trainer([NoRow()])
    assert _trainer([Flexible()]).hooks[-1].__class__ is Flexible
    with pytest.raises(TypeError, match=r"on_model_changed must take \(run, names\)"):
        _trainer([type("Static", (), {"on_model_changed": staticmethod(lambda run: None)})()])
