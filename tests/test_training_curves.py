"""msr.plot.training_curves draws what fit wrote beside a checkpoint: every step, every epoch, the rate changes."""

import csv

import matplotlib
import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn.cli import main
from multiscale_rnn.training import csv_path, history_path

matplotlib.use("Agg")

TEXT = "the cat sat on the mat and the dog ate the hat " * 40


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    corpus = msr.data.char_corpus(TEXT[:1600], TEXT[1600:])
    model = msr.LSTM(corpus.vocab_size, 8, (16,), seed=0)
    trainer = msr.Trainer(model, progress=False, batch_size=4, bptt=20, lr_schedule=msr.schedules.HalveAfter(1))
    path = tmp_path_factory.mktemp("curves") / "run.npz"
    history = trainer.fit(corpus, epochs=3, checkpoint=path)
    return path, history


def _line(ax, label):
    (line,) = [li for li in ax.get_lines() if li.get_label() == label]
    return line


def test_the_curves_are_the_csv_and_the_history(run):
    path, history = run
    rows = list(csv.DictReader(open(csv_path(path))))
    ax = msr.plot.training_curves(path, smooth=5)
    x, y = _line(ax, "train, each step").get_data()
    np.testing.assert_array_equal(x, [float(r["step"]) for r in rows])
    np.testing.assert_array_equal(y, [float(r["bpc"]) for r in rows])
    xm, ym = _line(ax, "train, mean of 5 steps").get_data()
    np.testing.assert_allclose(ym[0], np.mean(y[:5]), rtol=1e-12)
    assert xm[0] == x[4] and len(xm) == len(x) - 4
    xv, yv = _line(ax, "valid, epoch").get_data()
    assert list(xv) == [r["steps"] for r in history] and list(yv) == [r["valid_bpc"] for r in history]
    rates = [float(r["lr"]) for r in rows]
    changes = sum(a != b for a, b in zip(rates, rates[1:]))
    assert changes == 2  # halved after epoch 1 and after epoch 2
    dotted = [li for li in ax.get_lines() if li.get_linestyle() == ":"]
    assert len(dotted) == changes


def test_a_history_alone_draws_the_epochs(run):
    _, history = run
    ax = msr.plot.training_curves(history)
    assert sorted(li.get_label() for li in ax.get_lines()) == ["train, epoch", "valid, epoch"]


def test_refusals(run, tmp_path):
    path, _ = run
    with pytest.raises(FileNotFoundError, match="neither its CSV of steps .*none.csv.* nor its history"):
        msr.plot.training_curves(tmp_path / "none.npz")
    with pytest.raises(ValueError, match="smooth must be a positive number of steps, got 0"):
        msr.plot.training_curves(path, smooth=0)
    with pytest.raises(ValueError, match="the history holds no step and no epoch"):
        msr.plot.training_curves([])
    with pytest.raises(TypeError, match="checkpoint path or a History, got int"):
        msr.plot.training_curves(3)
    other = tmp_path / "other.npz"
    csv_path(other).write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="lacks the column\\(s\\) bpc, lr, step"):
        msr.plot.training_curves(other)
    assert not history_path(other).exists()


def test_the_command_writes_the_curves(run, tmp_path, capsys):
    path, _ = run
    out = tmp_path / "curves.svg"
    assert main(["plot", str(path), "--kind", "training", "--out", str(out)]) == 0
    assert out.read_text().lstrip().startswith("<?xml") and "training curves of" in capsys.readouterr().out
    assert main(["plot", str(tmp_path / "none.npz"), "--kind", "training"]) == 1
    assert "neither its CSV of steps" in capsys.readouterr().err
