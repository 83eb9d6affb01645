"""``multiscale-rnn plot`` and ``msr.plot.figure``: a checkpoint's figure of a text, by kind, for every family
that declares it (``figure_kinds``), written as PNG or SVG; the files open and hold the expected axes, and
what cannot be drawn is refused naming what was wrong."""

import codecs
import xml.etree.ElementTree as ET
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.image  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

import multiscale_rnn as msr  # noqa: E402
from multiscale_rnn import checkpoint  # noqa: E402
from multiscale_rnn.cli import main  # noqa: E402
from multiscale_rnn.plot import figures  # noqa: E402

TEXT = "the cat sat on the mat. the dog ate the log."
CORPUS = msr.data.char_corpus(TEXT * 4)
DRAWN = {kind: families for kind, families in figures.kinds().items()}


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _model(name):
    return msr.MODELS[name].example(CORPUS.vocab_size, dtype="float32")


def _saved(tmp_path, name):
    path = tmp_path / f"{name}.npz"
    checkpoint.save(path, _model(name), vocab=CORPUS.vocab)
    return path


def test_the_families_declare_their_kinds():
    assert DRAWN == {"boundaries": ["HMLSTM"], "heatmap": ["HMLSTM"], "profile": ["VCGRU", "VCRNN"]}
    for name, cls in msr.MODELS.items():
        assert set(cls.figure_kinds) <= set(DRAWN), name
        assert all(isinstance(v, str) and v for v in cls.figure_kinds.values()), name


@pytest.mark.parametrize("kind,name", [(k, n) for k, names in DRAWN.items() for n in names])
def test_every_declared_figure_draws(kind, name):
    fig = msr.plot.figure(_model(name), kind, TEXT, CORPUS.vocab)
    assert isinstance(fig, matplotlib.figure.Figure)
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts] + [t.get_text() for t in ax.get_xticklabels()]
    assert "_" in texts and "t" in texts  # the symbols are written along the steps (spaces as _)


def test_the_boundaries_figure_has_a_row_per_detector_and_the_text():
    model = msr.HMLSTM(CORPUS.vocab_size, 8, (6, 6, 6), seed=1)
    fig = msr.plot.figure(model, "boundaries", TEXT, CORPUS.vocab)
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["$z^{2}$", "$z^{1}$"]
    assert "".join(t.get_text() for t in ax.texts) == TEXT.replace(" ", "_")
    assert ax.images[0].get_array().shape == (4, len(TEXT))  # z2, z1, text, gap; one row of the text's steps
    np.testing.assert_array_equal(ax.images[0].get_array()[1, : len(TEXT)], model.trace(TEXT, CORPUS.vocab).z[0] > 0.5)


def test_the_heatmap_has_its_colour_bar():
    model = msr.HMLSTM(CORPUS.vocab_size, 8, (6, 6, 6), seed=1)
    fig = msr.plot.figure(model, "heatmap", TEXT, CORPUS.vocab)
    ax, bar = fig.axes
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["$\\|h^{3}\\|$", "$\\|h^{2}\\|$", "$z^{2}$", "$\\|h^{1}\\|$", "$z^{1}$"]
    assert ax.images[0].get_array().shape[:2] == (5, len(TEXT))
    assert bar.get_ylabel() == "$\\|h^\\ell_t\\|$ in its layer's range"
    assert bar.get_ylim() == (0.0, 1.0)


def test_the_profile_has_a_bar_of_m_per_step():
    model = _model("VCRNN")
    fig = msr.plot.figure(model, "profile", TEXT, CORPUS.vocab)
    (ax,) = fig.axes
    bars = [p for p in ax.patches if p.get_gid() == "computation"]
    np.testing.assert_allclose([b.get_height() for b in bars], model.trace(TEXT, CORPUS.vocab).m, rtol=1e-6)
    assert sum(p.get_gid() == "space" for p in ax.patches) == TEXT.count(" ")


def test_refusals_of_the_python_function():
    hm = _model("HMLSTM")
    with pytest.raises(ValueError, match=r"unknown figure kind 'boundary' \(did you mean boundaries\?\); the kinds"):
        msr.plot.figure(hm, "boundary", TEXT, CORPUS.vocab)
    with pytest.raises(ValueError, match=r"HMLSTM models draw boundaries and heatmap, not profile \(profile is drawn"):
        msr.plot.figure(hm, "profile", TEXT, CORPUS.vocab)
    with pytest.raises(ValueError, match="LSTM models draw no figure of a text, so not heatmap"):
        msr.plot.figure(_model("LSTM"), "heatmap", TEXT, CORPUS.vocab)
    with pytest.raises(ValueError, match="symbol 'Z' .* at position 4 is not in the vocabulary"):
        msr.plot.figure(hm, "boundaries", "the Zebra", CORPUS.vocab)
    with pytest.raises(ValueError, match="a text needs its vocabulary"):
        msr.plot.figure(hm, "boundaries", TEXT)
    with pytest.raises(ValueError, match="the text is empty"):
        msr.plot.figure(hm, "boundaries", "", CORPUS.vocab)
    with pytest.raises(TypeError, match="kind must be a str"):
        msr.plot.figure(hm, 3, TEXT, CORPUS.vocab)
    fig = msr.plot.figure(hm, "boundaries", CORPUS.vocab.encode(TEXT))  # token ids need no vocabulary
    ids = np.array(CORPUS.vocab.encode("the cat"))
    ids[4] = CORPUS.vocab.size + 3
    with pytest.raises(ValueError, match=f"id {CORPUS.vocab.size + 3} at position 4 is out of range"):
        hm.trace(ids, CORPUS.vocab)
    with pytest.raises(ValueError, match="the text is empty"):
        hm.trace("", CORPUS.vocab)
    with pytest.raises(ValueError, match="the token ids are empty"):
        _model("VCRNN").trace([], CORPUS.vocab)
    assert fig.axes[0].texts[0].get_text() == str(CORPUS.vocab.encode("t")[0])


@pytest.mark.parametrize("kind,name", [(k, n) for k, names in DRAWN.items() for n in names])
def test_the_command_writes_a_png_that_opens(tmp_path, capsys, kind, name):
    ck = _saved(tmp_path, name)
    out = tmp_path / "figs" / f"{kind}.png"
    assert main(["plot", str(ck), "--kind", kind, "--text", TEXT, "--out", str(out), "--threads", "1"]) == 0
    assert capsys.readouterr().out == f"{out}: {kind} of the {name} in {ck} reading {len(TEXT)} characters\n"
    img = matplotlib.image.imread(out)
    assert img.ndim == 3 and img.shape[0] > 50 and img.shape[1] > 200


def test_the_command_writes_svg_by_the_extension_and_a_default_name(tmp_path, capsys):
    ck = _saved(tmp_path, "HMLSTM")
    assert main(["plot", str(ck), "--kind", "heatmap", "--text", TEXT, "--out", str(tmp_path / "h.SVG")]) == 0
    root = ET.parse(tmp_path / "h.SVG").getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert main(["plot", str(ck), "--kind", "boundaries", "--text", TEXT]) == 0
    assert matplotlib.image.imread(tmp_path / "HMLSTM-boundaries.png").ndim == 3


def _error(capsys, argv) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line
    return err


def test_the_command_refuses_with_one_clear_line(tmp_path, capsys):
    hm, lstm = str(_saved(tmp_path, "HMLSTM")), str(_saved(tmp_path, "LSTM"))
    out = ["--out", str(tmp_path / "f.png")]
    err = _error(capsys, ["plot", str(tmp_path / "missing.npz"), "--kind", "heatmap", "--text", TEXT, *out])
    assert "checkpoint not found" in err and "missing.npz" in err
    (tmp_path / "notes.npz").write_text("not a checkpoint")
    err = _error(capsys, ["plot", str(tmp_path / "notes.npz"), "--kind", "heatmap", "--text", TEXT, *out])
    assert "notes.npz is corrupt or not an .npz checkpoint" in err
    np.savez(tmp_path / "arrays.npz", x=np.zeros(3))
    err = _error(capsys, ["plot", str(tmp_path / "arrays.npz"), "--kind", "heatmap", "--text", TEXT, *out])
    assert "arrays.npz" in err and "checkpoint" in err
    err = _error(capsys, ["plot", hm, "--kind", "heatmaps", "--text", TEXT, *out])
    assert "--kind heatmaps: unknown figure kind 'heatmaps' (did you mean heatmap?)" in err
    err = _error(capsys, ["plot", hm, "--kind", "profile", "--text", TEXT, *out])
    assert f"--kind profile for {hm}: HMLSTM models draw boundaries and heatmap, not profile" in err
    assert "profile is drawn by VCGRU and VCRNN" in err
    err = _error(capsys, ["plot", lstm, "--kind", "heatmap", "--text", TEXT, *out])
    assert "LSTM models draw no figure of a text, so not heatmap (heatmap is drawn by HMLSTM)" in err
    err = _error(capsys, ["plot", lstm, "--kind", "heatmap", *out])  # the kind first: a text would not help
    assert "LSTM models draw no figure of a text, so not heatmap" in err and "--text" not in err
    err = _error(capsys, ["plot", hm, "--kind", "heatmap", "--text", TEXT, "--out", str(tmp_path / "f.jpg")])
    assert "f.jpg: a figure is written as PNG or SVG, chosen by the extension (.png, .svg), got '.jpg'" in err
    err = _error(capsys, ["plot", hm, "--kind", "heatmap", "--text", "the Zat", *out])
    assert "--text has 1 character(s) the vocabulary of" in err and "'Z' (U+005A) at character 4" in err
    err = _error(capsys, ["plot", hm, "--kind", "heatmap", "--text", "", *out])
    assert "--text is empty" in err
    err = _error(capsys, ["plot", hm, "--kind", "heatmap", *out])
    assert '--text is missing: give the text the model reads, e.g. --text "the cat' in err
    (tmp_path / "folder.png").mkdir()
    err = _error(capsys, ["plot", hm, "--kind", "heatmap", "--text", TEXT, "--out", str(tmp_path / "folder.png")])
    assert "the --out figure path is a folder, not a file" in err and "folder.png" in err
    assert not (tmp_path / "f.png").exists()


def test_the_text_read_from_a_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    hm = str(_saved(tmp_path, "HMLSTM"))
    Path("text.txt").write_bytes(codecs.BOM_UTF8 + TEXT.encode("utf-8"))  # an editor's byte-order mark
    assert main(["plot", hm, "--kind", "boundaries", "--text-file", "text.txt", "--out", "a.png"]) == 0
    assert capsys.readouterr().out == f"a.png: boundaries of the HMLSTM in {hm} reading {len(TEXT)} characters\n"
    # the same figure as the text given on the command line
    assert main(["plot", hm, "--kind", "boundaries", "--text", TEXT, "--out", "b.png"]) == 0
    assert np.array_equal(matplotlib.image.imread("a.png"), matplotlib.image.imread("b.png"))
    # a --text that names a file is drawn as written, and a note names --text-file
    Path("cat").write_text(TEXT, encoding="utf-8")
    assert main(["plot", hm, "--kind", "boundaries", "--text", "cat", "--out", "c.png"]) == 0
    err = capsys.readouterr().err
    assert (
        "note: --text cat is drawn as the 3 characters it holds; to draw the file's text, give --text-file cat" in err
    )
    out = ["--out", "f.png"]
    err = _error(capsys, ["plot", hm, "--kind", "boundaries", "--text", TEXT, "--text-file", "text.txt", *out])
    assert "give --text or --text-file, not both" in err
    err = _error(capsys, ["plot", hm, "--kind", "boundaries", "--text-file", "missing.txt", *out])
    assert "--text-file missing.txt: no such file" in err
    Path("empty.txt").write_bytes(b"")
    err = _error(capsys, ["plot", hm, "--kind", "boundaries", "--text-file", "empty.txt", *out])
    assert "--text-file empty.txt is empty" in err
    Path("latin1.txt").write_bytes("the caf\xe9".encode("latin-1"))
    err = _error(capsys, ["plot", hm, "--kind", "boundaries", "--text-file", "latin1.txt", *out])
    assert "--text-file latin1.txt is not valid UTF-8: byte offset 7" in err and "iconv -f ITS-ENCODING" in err
    Path("zed.txt").write_text("the Zat", encoding="utf-8")
    err = _error(capsys, ["plot", hm, "--kind", "boundaries", "--text-file", "zed.txt", *out])
    assert "--text-file has 1 character(s) the vocabulary of" in err
    assert not Path("f.png").exists()
