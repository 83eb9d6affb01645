"""Notebooks run top to bottom in a quick setting."""

import os
import re
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@pytest.fixture(autouse=True)
def quick_env(monkeypatch):
    """The notebooks' quick setting, for this test only (the kernel inherits the environment)."""
    monkeypatch.setenv("MSRNN_QUICK", "1")
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend (Agg underneath) keeps PNGs


def run_notebook(name, timeout=300):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert os.environ.get("MSRNN_QUICK") == "1"
    nbclient.NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    ).execute()
    text = outputs(nb)
    assert "IProgress" not in text and "TqdmWarning" not in text, "tqdm's ipywidgets warning"
    assert re.search(r"epoch 1/\d+", text), "the training cells show their progress"
    return nb


def images(nb):
    """The PNG outputs of an executed notebook."""
    return [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]


def outputs(nb):
    text = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            text.append(out.get("text", "") or str(out.get("data", {}).get("text/plain", "")))
    return "\n".join(text)


def test_hm_lstm_notebook():
    nb = run_notebook("hm_lstm_boundaries.ipynb")
    text = outputs(nb)
    assert "layer-1 boundary F1" in text and "updates per layer" in text
    # the 3-layer model under its defaults: the runs compared at the end (the quick setting: 6 epochs)
    assert "layer-2 F1 against phrase ends" in text and "after 6 epochs  <- kept" in text
    assert len(images(nb)) == 3


def test_fs_rnn_notebook():
    nb = run_notebook("fs_rnn_dynamics.ipynb")
    text = outputs(nb)
    for label in ("Fast-Slow", "Stacked", "Sequential"):
        assert f"{label:11s} valid bpc" in text
    assert "FS-Slow" in text and "rate of change" in text and "bpc by position" in text
    assert len(images(nb)) == 3


def test_vcrnn_notebook():
    nb = run_notebook("vcrnn_profiles.ipynb")
    text = outputs(nb)
    assert "valid bpc" in text and "valid bits per bit" in text
    assert "RNN-d" in text and "activity by bit position" in text and "mean m per class" in text
    assert len(images(nb)) == 3


def test_hornn_notebook():
    nb = run_notebook("hornn_gradients.ipynb")
    text = outputs(nb)
    for label in ("RNN", "HORNN N=2", "HORNN N=3", "HORNN N=4"):
        assert f"{label:12s} relative gradient at k=5" in text
        assert f"{label:12s} trained: relative gradient" in text
    assert "valid perplexity" in text and "gated" in text
    assert len(images(nb)) == 2


def test_hm_lstm_strokes_notebook():
    pytest.importorskip("svg.path")
    pytest.importorskip("simplification")
    nb = run_notebook("hm_lstm_strokes.ipynb")
    text = outputs(nb)
    assert "nats per sequence" in text and "log-likelihood" in text
    assert "z1 F1 against pen lifts" in text and "z2 F1 against pen lifts" in text and "component ends" in text
    assert len(images(nb)) == 3
