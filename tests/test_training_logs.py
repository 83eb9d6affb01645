"""The logs a program can read: the CSV of every step beside the checkpoint (matching the history, the same
after a resume) and TensorBoard event files (read back with TensorBoard's own reader)."""

import csv
import sys

import pytest
from _texts import noisy_cycle

import multiscale_rnn as msr
from multiscale_rnn.training.logs import WALL_CLOCK_COLUMNS, csv_path

pytestmark = pytest.mark.usefixtures("one_thread")

V = 11


def _ids(n, seed=0):
    return noisy_cycle(n, V, 0.1, seed)


TRAIN, VALID = _ids(1200), _ids(300, seed=1)  # batch 4, bptt 20: 15 chunks per epoch


def _trainer(**kw):
    model = msr.LSTM(V, 8, (12,), dropout=0.1, seed=0)
    return msr.Trainer(model, batch_size=4, bptt=20, progress=False, clip_norm=1.0, **kw)


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _without_wall_clock(rows):
    return [{k: v for k, v in r.items() if k not in WALL_CLOCK_COLUMNS} for r in rows]


def test_csv_path_is_beside_the_checkpoint(tmp_path):
    assert csv_path("runs/x.npz").as_posix() == "runs/x.csv"
    assert csv_path("runs/x").as_posix() == "runs/x.csv"


def test_the_csv_has_every_step_and_matches_the_history(tmp_path):
    ck = tmp_path / "run.npz"
    logged = []
    trainer = _trainer()
    history = trainer.fit(TRAIN, valid=VALID, epochs=2, checkpoint=ck, log=logged.append)
    rows = _rows(tmp_path / "run.csv")
    steps = [e for e in logged if e["event"] == "chunk"]
    assert [int(r["step"]) for r in rows] == list(range(1, 31))
    assert list(rows[0]) == [
        "step", "epoch", "chunk", "loss", "bpc", "lr", "grad_norm", "tokens", "tokens_per_s", "seconds",
        "valid_loss", "valid_bpc",
    ]  # fmt: skip
    for r, e in zip(rows, steps):  # the figures of every step, exactly (floats are written to round-trip)
        assert (int(r["epoch"]), int(r["chunk"])) == (e["epoch"], e["chunk"])
        assert float(r["loss"]) == e["loss"] and float(r["bpc"]) == e["bpc"] and float(r["lr"]) == e["lr"]
        assert float(r["grad_norm"]) == e["grad_norm"]
    for row in history:  # the epoch's figures: the mean of its steps' losses, validation on its last step
        mine = [r for r in rows if int(r["epoch"]) == row["epoch"]]
        tokens = [int(r["tokens"]) for r in mine]
        mean = sum(float(r["loss"]) * n for r, n in zip(mine, tokens)) / sum(tokens)
        assert mean == pytest.approx(row["train_loss"], rel=1e-12)
        assert float(mine[-1]["valid_loss"]) == row["valid_loss"] and float(mine[-1]["valid_bpc"]) == row["valid_bpc"]
        assert all(r["valid_loss"] == "" for r in mine[:-1])
        assert int(mine[-1]["step"]) == row["steps"]


def test_the_csv_has_a_column_per_auxiliary_term(tmp_path):
    cls = next(c for _, c in sorted(msr.MODELS.items()) if c.aux_terms)
    model = cls.example(V)
    logged = []
    msr.Trainer(model, batch_size=4, bptt=20, progress=False).fit(
        TRAIN, epochs=1, checkpoint=tmp_path / "aux.npz", log=logged.append, max_chunks=5
    )
    rows = _rows(tmp_path / "aux.csv")
    assert len(rows) == 5
    for term in cls.aux_terms:
        assert [float(r[term]) for r in rows] == [e["aux"][term] for e in logged if e["event"] == "chunk"]


def test_a_resumed_run_writes_the_uninterrupted_runs_csv(tmp_path):
    whole = tmp_path / "whole.npz"
    _trainer().fit(TRAIN, valid=VALID, epochs=2, checkpoint=whole)
    expected = _without_wall_clock(_rows(csv_path(whole)))
    # a run stopped within epoch 1 (a checkpoint every 4 chunks), killed by an error at chunk 11
    cut = tmp_path / "cut.npz"

    def crash(e):
        if e["event"] == "chunk" and e["chunk"] == 11:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _trainer().fit(TRAIN, valid=VALID, epochs=2, checkpoint=cut, checkpoint_every=4, log=crash)
    rows = _rows(csv_path(cut))
    assert [int(r["step"]) for r in rows] == list(range(1, 9))  # the steps the checkpoint holds, no more
    # rows of steps after the checkpoint (as a process killed between two writes leaves them) are dropped
    with open(csv_path(cut), "a", newline="") as f:
        csv.DictWriter(f, list(rows[0])).writerows(_rows(csv_path(whole))[8:12])
    _trainer().fit(TRAIN, valid=VALID, epochs=1, checkpoint=cut, resume=True)
    _trainer().fit(TRAIN, valid=VALID, epochs=2, checkpoint=cut, resume=True)  # a second resume, at an epoch's end
    assert _without_wall_clock(_rows(csv_path(cut))) == expected


def test_a_new_run_replaces_the_csv(tmp_path):
    ck = tmp_path / "run.npz"
    _trainer().fit(TRAIN, epochs=1, checkpoint=ck)
    _trainer().fit(TRAIN, epochs=1, checkpoint=ck, max_chunks=3)
    assert [int(r["step"]) for r in _rows(csv_path(ck))] == [1, 2, 3]


# ---- TensorBoard -----------------------------------------------------------------------------------------


def _scalars(folder):
    """{tag: [(step, value), ...]} of the event files in ``folder``, read by TensorBoard's own reader."""
    pytest.importorskip("tensorboardX", reason="tensorboardX (the extra multiscale-rnn[tensorboard]) is not installed")
    accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator",
        reason="the tensorboard package (its event reader) is not installed",
    )
    acc = accumulator.EventAccumulator(str(folder), size_guidance={accumulator.SCALARS: 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_tensorboard_event_files_hold_the_run(tmp_path):
    pytest.importorskip("tensorboardX", reason="tensorboardX (the extra multiscale-rnn[tensorboard]) is not installed")
    ck = tmp_path / "run.npz"
    history = _trainer(tensorboard=tmp_path / "tb").fit(TRAIN, valid=VALID, epochs=2, checkpoint=ck)
    scalars = _scalars(tmp_path / "tb")
    rows = _rows(csv_path(ck))
    assert [s for s, _ in scalars["train/loss"]] == list(range(1, 31))
    assert [v for _, v in scalars["train/loss"]] == pytest.approx([float(r["loss"]) for r in rows], rel=1e-6)
    assert [v for _, v in scalars["train/lr"]] == pytest.approx([float(r["lr"]) for r in rows], rel=1e-6)
    assert scalars["epoch/valid_bpc"] == [
        (row["steps"], pytest.approx(row["valid_bpc"], rel=1e-6)) for row in history
    ]  # fmt: skip


def test_a_resumed_run_logs_each_step_once(tmp_path):
    pytest.importorskip("tensorboardX", reason="tensorboardX (the extra multiscale-rnn[tensorboard]) is not installed")
    ck, tb = tmp_path / "run.npz", tmp_path / "tb"
    _trainer(tensorboard=tb).fit(TRAIN, valid=VALID, epochs=2, checkpoint=ck, max_chunks=20)
    _trainer(tensorboard=tb).fit(TRAIN, valid=VALID, epochs=2, checkpoint=ck, resume=True)
    scalars = _scalars(tb)
    assert [s for s, _ in scalars["train/loss"]] == list(range(1, 31))
    assert [v for _, v in scalars["train/loss"]] == pytest.approx([float(r["loss"]) for r in _rows(csv_path(ck))])


def test_without_the_writer_library_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with pytest.raises(ImportError, match=r'pip install "multiscale-rnn\[tensorboard\]"'):
        _trainer(tensorboard="tb")


def test_bad_tensorboard_arguments_are_refused():
    with pytest.raises(TypeError, match="tensorboard must be a folder path"):
        _trainer(tensorboard=3)


def test_the_command_line_writes_the_csv_and_tensorboard_files(tmp_path, capsys):
    pytest.importorskip("tensorboardX", reason="tensorboardX (the extra multiscale-rnn[tensorboard]) is not installed")
    from multiscale_rnn.cli import main
    from multiscale_rnn.trainer import History, history_path

    out, tb = tmp_path / "run.npz", tmp_path / "tb"
    tiny = ["--embed-size", "8", "--hidden-sizes", "16", "--batch-size", "8", "--bptt", "25", "--max-chunks", "12"]
    assert main(["train", *tiny, "--threads", "1", "--no-progress", "--out", str(out), "--tensorboard", str(tb)]) == 0
    rows = _rows(tmp_path / "run.csv")
    assert [int(r["step"]) for r in rows] == list(range(1, 13)) and History.load(history_path(out)) == []
    assert [s for s, _ in _scalars(tb)["train/loss"]] == list(range(1, 13))
    assert main(["train", "--resume", "--out", str(out), "--max-chunks", "3", "--threads", "1", "--no-progress"]) == 0
    assert [int(r["step"]) for r in _rows(tmp_path / "run.csv")] == list(range(1, 16))
    assert [s for s, _ in _scalars(tb)["train/loss"]] == list(range(1, 16))  # the resume logs on in the same folder
