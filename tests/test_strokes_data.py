"""Pen strokes (multiscale_rnn.data.strokes): IAM-OnDB's lineStrokes XML on fixtures written here (in a
folder, a .tar.gz and a .zip), KanjiVG on SVG fixtures in its format and, when the kanjivg package is
installed, on the real set."""

import importlib.metadata
import importlib.util
import tarfile
import zipfile

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn.data.strokes import IAM_URL, StrokeCorpus, drawing_rows, load_iam, load_kanjivg

SPLITS = ("train", "valid", "test")

# ------------------------------------------------------------------------------------------ IAM-OnDB


def iam_xml(strokes) -> str:
    """A lineStrokes file in IAM-OnDB's format holding ``strokes`` (lists of (x, y))."""
    body = []
    t = 0.0
    for pts in strokes:
        rows = []
        for x, y in pts:
            rows.append(f'      <Point x="{x}" y="{y}" time="{t:.2f}"/>')
            t += 0.01
        body.append(
            f'    <Stroke colour="black" start_time="0.00" end_time="{t:.2f}">\n' + "\n".join(rows) + "\n    </Stroke>"
        )
    return (
        '<?xml version="1.0" encoding="ISO-8859-1"?>\n<WhiteboardCaptureSession>\n  <WhiteboardDescription>\n'
        '    <SensorLocation corner="top_left"/>\n    <DiagonallyOppositeCoords x="6512" y="1376"/>\n'
        "  </WhiteboardDescription>\n  <StrokeSet>\n"
        + "\n".join(body)
        + "\n  </StrokeSet>\n</WhiteboardCaptureSession>\n"
    )


#: The hand-computed case: two strokes, 5 points, 4 rows.
TINY = [[(0, 0), (1, 0), (1, 2)], [(4, 2), (5, 3)]]
TINY_OFFSETS = np.array([[1, 0], [0, 2], [3, 0], [1, 1]], dtype=float)
TINY_PEN = np.array([0, 1, 0, 1], dtype=bool)


def random_line(rng, n_points):
    """A seeded scribble of ``n_points`` points in strokes of 5-40 points."""
    strokes, left, x = [], n_points, 1000
    while left:
        m = min(left, int(rng.integers(5, 41)))
        steps = rng.integers(-6, 7, size=(m, 2))
        pts = np.cumsum(steps, axis=0) + [x, 1000]
        strokes.append([(int(a), int(b)) for a, b in pts])
        x = int(pts[-1, 0]) + int(rng.integers(5, 30))
        left -= m
    return strokes


@pytest.fixture(scope="module")
def iam(tmp_path_factory):
    """A lineStrokes folder (sub-folders as in the database) of 30 lines of 200-399 points and the tiny
    line, with its .tar.gz and .zip; returns (folder, tgz, zip, number of lines of at least 300 points)."""
    root = tmp_path_factory.mktemp("iam")
    folder = root / "lineStrokes"
    rng = np.random.default_rng(7)
    lengths = rng.integers(200, 400, size=30)
    for i, n in enumerate(lengths):
        f = folder / f"a0{i % 3}" / f"a0{i % 3}-00{i}" / f"a0{i % 3}-00{i}z-01.xml"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(iam_xml(random_line(rng, int(n))))
    (folder / "z99").mkdir()
    (folder / "z99" / "tiny.xml").write_text(iam_xml(TINY))
    tgz, zp = root / "lineStrokes-all.tar.gz", root / "lineStrokes-all.zip"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(folder, arcname="lineStrokes")
    with zipfile.ZipFile(zp, "w") as z:
        for f in sorted(folder.rglob("*.xml")):
            z.write(f, "lineStrokes/" + f.relative_to(folder).as_posix())
    return folder, tgz, zp, int((lengths >= 300).sum())


def find(corpus, ident):
    """(split, index) of the sequence whose meta id ends with ``ident``."""
    hits = [(s, i) for s in SPLITS for i, m in enumerate(corpus.meta[s]) if m["id"].endswith(ident)]
    assert len(hits) == 1, hits
    return hits[0]


def test_drawing_rows_by_hand():
    offsets, bounds = drawing_rows([np.array(s, dtype=float) for s in TINY])
    np.testing.assert_array_equal(offsets, TINY_OFFSETS)
    np.testing.assert_array_equal(bounds["stroke"], TINY_PEN)
    assert set(bounds) == {"stroke"}


def test_iam_tiny_line_offsets_and_pen_bits(iam):
    folder = iam[0]
    corpus = load_iam(folder, min_points=0, split=(20, 5, 5), seed=3)
    s, i = find(corpus, "z99/tiny.xml")
    seq = getattr(corpus, s)[i]
    assert seq.dtype == np.float32 and seq.shape == (4, 3)
    np.testing.assert_allclose(seq[:, :2] * corpus.std + corpus.mean, TINY_OFFSETS, atol=1e-4)
    np.testing.assert_array_equal(seq[:, 2], TINY_PEN.astype(np.float32))
    np.testing.assert_array_equal(corpus.boundaries[s][i]["stroke"], TINY_PEN)
    xy, pen = corpus.points(seq)
    np.testing.assert_allclose(xy, np.array([p for st in TINY for p in st], dtype=float), atol=1e-4)
    np.testing.assert_array_equal(pen, [False, False, True, False, True])
    assert corpus.meta[s][i] == {"id": "z99/tiny.xml", "points": 5, "strokes": 2}
    for split in SPLITS:  # every sequence ends with the pen lifted
        assert all(x[-1, 2] == 1 for x in getattr(corpus, split))


def test_iam_300_point_filter_and_normalisation(iam):
    folder, _, _, n_long = iam
    corpus = load_iam(folder)
    kept = [m for s in SPLITS for m in corpus.meta[s]]
    assert len(kept) == n_long and all(m["points"] >= 300 for m in kept)
    assert sum(len(x) + 1 for s in SPLITS for x in getattr(corpus, s)) == sum(m["points"] for m in kept)
    rows = np.concatenate(corpus.train).astype(np.float64)
    np.testing.assert_allclose(rows[:, :2].mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(rows[:, :2].std(axis=0), 1, atol=1e-5)
    assert corpus.mean.shape == corpus.std.shape == (2,) and corpus.mean.dtype == np.float64
    assert corpus.input_size == 3 and isinstance(corpus, StrokeCorpus)


def test_iam_split_sizes_seeded_and_disjoint(iam):
    folder, _, _, n_long = iam
    small = load_iam(folder)  # fewer lines than 10,465 + 581 + 582: the same ratios, at least one each
    sizes = [len(small.split(s)) for s in SPLITS]
    assert sizes == [n_long - 2, 1, 1] and small.left_out == 0
    exact = load_iam(folder, min_points=0, split=(20, 6, 4), seed=5)
    assert [len(exact.train), len(exact.valid), len(exact.test)] == [20, 6, 4] and exact.left_out == 1
    ids = {s: [m["id"] for m in exact.meta[s]] for s in SPLITS}
    assert sum(len(v) for v in ids.values()) == len(set().union(*map(set, ids.values())))
    again = load_iam(folder, min_points=0, split=(20, 6, 4), seed=5)
    assert {s: [m["id"] for m in again.meta[s]] for s in SPLITS} == ids
    for a, b in zip(again.train, exact.train):
        np.testing.assert_array_equal(a, b)
    other = load_iam(folder, min_points=0, split=(20, 6, 4), seed=6)
    assert [m["id"] for m in other.meta["test"]] != ids["test"]
    assert exact.stats()["valid"]["sequences"] == 6
    assert "train=20" in repr(exact)


@pytest.mark.parametrize("kind", ["tgz", "zip"])
def test_iam_archives_read_as_the_folder(iam, kind):
    folder, tgz, zp, _ = iam
    a = load_iam(folder, min_points=0, split=(20, 6, 4), seed=1)
    b = msr.data.load("iam-ondb", path=tgz if kind == "tgz" else zp, min_points=0, split=(20, 6, 4), seed=1)
    for s in SPLITS:
        assert ["lineStrokes/" + m["id"] for m in a.meta[s]] == [m["id"] for m in b.meta[s]]
        for x, y in zip(a.split(s), b.split(s)):
            np.testing.assert_array_equal(x, y)


def test_iam_errors(iam, tmp_path):
    with pytest.raises(FileNotFoundError, match="IAM-OnDB: path .*nowhere does not exist"):
        load_iam(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "readme.txt").write_text("no strokes here")
    with pytest.raises(FileNotFoundError, match="no .xml files found in folder .*empty"):
        load_iam(tmp_path / "empty")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "a.xml").write_text(iam_xml(TINY))
    (bad / "broken.xml").write_text("<WhiteboardCaptureSession><StrokeSet>")
    with pytest.raises(ValueError, match="broken.xml is not well-formed XML"):
        load_iam(bad, min_points=0)
    (bad / "broken.xml").write_text(iam_xml(TINY).replace('y="2"', "", 1))
    with pytest.raises(ValueError, match=r"broken.xml: Point 3 of Stroke 1 has no y attribute"):
        load_iam(bad, min_points=0)
    (bad / "broken.xml").write_text("<WhiteboardCaptureSession></WhiteboardCaptureSession>")
    with pytest.raises(ValueError, match="broken.xml has no StrokeSet element"):
        load_iam(bad, min_points=0)
    with pytest.raises(ValueError, match=r"none of the 31 sequence\(s\) read .* has at least 1000 points"):
        load_iam(iam[0], min_points=1000)
    (tmp_path / "cut.tar.gz").write_bytes(iam[1].read_bytes()[:300])
    with pytest.raises(ValueError, match="IAM-OnDB: .*cut.tar.gz is not a valid archive"):
        load_iam(tmp_path / "cut.tar.gz")
    with pytest.raises(ValueError, match="licence forbids redistribution.*" + IAM_URL):
        msr.data.load("iam-ondb")


# ------------------------------------------------------------------------------------------- KanjiVG

needs_svg = pytest.mark.skipif(
    importlib.util.find_spec("svg") is None or importlib.util.find_spec("simplification") is None,
    reason="needs svg.path and simplification (the strokes extra)",
)

KVG_HEAD = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.0//EN" "http://www.w3.org/TR/2001/REC-SVG-20010904/DTD/svg10.dtd" [
<!ATTLIST g
xmlns:kvg CDATA #FIXED "http://kanjivg.tagaini.net"
kvg:element CDATA #IMPLIED >
<!ATTLIST path
xmlns:kvg CDATA #FIXED "http://kanjivg.tagaini.net"
kvg:type CDATA #IMPLIED >
]>
<svg xmlns="http://www.w3.org/2000/svg" width="109" height="109" viewBox="0 0 109 109" \
xmlns:kvg="https://kanjivg.tagaini.net/">
<g id="kvg:StrokePaths_{name}" style="fill:none;stroke:#000000;stroke-width:3;">
<g id="kvg:{name}" kvg:element="{char}">
"""
KVG_TAIL = """</g>
</g>
<g id="kvg:StrokeNumbers_{name}" style="font-size:8;fill:#808080">
	<text transform="matrix(1 0 0 1 8.50 8.50)">1</text>
</g>
</svg>
"""


def kvg_file(folder, name, char, body):
    (folder / f"{name}.svg").write_text(KVG_HEAD.format(name=name, char=char) + body + KVG_TAIL.format(name=name))


#: 漢 and its variant: a straight stroke (10,10)-(10,30) in one component, then a curve from (30,10) to
#: (50,30) in a second component, inside a nested group.
KAN = """\t<g id="kvg:{n}-g1" kvg:element="氵">
\t\t<path id="kvg:{n}-s1" kvg:type="㇔" d="M10,10L10,30"/>
\t</g>
\t<g id="kvg:{n}-g2" kvg:element="口">
\t\t<g id="kvg:{n}-g3" kvg:element="囗">
\t\t\t<path id="kvg:{n}-s2" kvg:type="㇕" d="M30,10c10,0,20,10,20,20"/>
\t\t</g>
\t</g>
"""
#: 二 like: two strokes in one component, then a stroke directly below the root (no component).
NI = """\t<g id="kvg:{n}-g1" kvg:element="二">
\t\t<path id="kvg:{n}-s1" d="M20,40L60,40"/>
\t\t<path id="kvg:{n}-s2" d="M10,70L80,70"/>
\t</g>
\t<path id="kvg:{n}-s3" d="M40,90l0,10"/>
"""


@pytest.fixture(scope="module")
def kvg(tmp_path_factory):
    """A folder of KanjiVG files: 漢 (06f22) with one variant, 二 (04e8c) and ten one-stroke characters."""
    folder = tmp_path_factory.mktemp("kanjivg")
    for name in ("06f22", "06f22-Kaisho"):
        kvg_file(folder, name, "漢", KAN.format(n=name))
    kvg_file(folder, "04e8c", "二", NI.format(n="04e8c"))
    for k in range(10):
        cp = 0x4E00 + 1 + k
        kvg_file(folder, f"{cp:05x}", chr(cp), f'\t<path id="kvg:{cp:05x}-s1" d="M10,{10 + k}L90,{20 + k}"/>\n')
    return folder


@needs_svg
def test_kanjivg_sampling_pen_bits_and_components(kvg):
    corpus = load_kanjivg(path=kvg, epsilon=0, step=5, split=(7, 3, 3), seed=0)
    s, i = find(corpus, "U+6F22-Kaisho")
    m = corpus.meta[s][i]
    assert m["file"] == "06f22-Kaisho.svg" and m["code_point"] == 0x6F22 and m["variant"] == "Kaisho"
    assert m["char"] == "漢" and m["strokes"] == 2
    xy, pen = corpus.points(getattr(corpus, s)[i])
    xy = xy + [10, 10]  # the first point is (10, 10)
    np.testing.assert_allclose(xy[:5], [[10, 10], [10, 15], [10, 20], [10, 25], [10, 30]], atol=1e-4)
    np.testing.assert_allclose(xy[5], [30, 10], atol=1e-4)
    np.testing.assert_allclose(xy[-1], [50, 30], atol=1e-4)
    curve = xy[5:]
    gaps = np.hypot(*np.diff(curve, axis=0).T)
    np.testing.assert_allclose(gaps[:-1], 5, atol=0.05)  # chords of 5-unit arcs of a gentle curve
    assert gaps[-1] <= 5 + 1e-6
    t = np.linspace(0, 1, 2001)[:, None]  # every sampled point lies on the Bezier curve
    bez = (1 - t) ** 3 * [30, 10] + 3 * (1 - t) ** 2 * t * [40, 10] + 3 * (1 - t) * t**2 * [50, 20] + t**3 * [50, 30]
    assert max(np.hypot(*(bez - p).T).min() for p in curve) < 0.05
    rows = len(xy) - 1
    expect = np.zeros(rows, dtype=bool)
    expect[[3, rows - 1]] = True  # the pen lifts after (10, 30) and at the end
    np.testing.assert_array_equal(pen[1:], expect)
    np.testing.assert_array_equal(corpus.boundaries[s][i]["stroke"], expect)
    np.testing.assert_array_equal(corpus.boundaries[s][i]["component"], expect)

    s, i = find(corpus, "U+4E8C")
    b = corpus.boundaries[s][i]
    assert b["stroke"].sum() == 3 and b["component"].sum() == 1
    ends = np.flatnonzero(b["stroke"])
    np.testing.assert_array_equal(np.flatnonzero(b["component"]), ends[1:2])  # after the 2nd stroke only


@needs_svg
def test_kanjivg_simplification(kvg):
    fine = load_kanjivg(path=kvg, epsilon=0, step=1, split=(7, 3, 3))
    simple = load_kanjivg(path=kvg, epsilon=0.25, step=1, split=(7, 3, 3))
    s, i = find(fine, "U+4E8C")
    assert len(fine.split(s)[i]) == 41 + 71 + 11 - 1  # points 1 unit apart, one row fewer than points
    s, i = find(simple, "U+4E8C")
    assert len(simple.split(s)[i]) == 5  # three straight strokes: their end points only
    xy, _ = simple.points(simple.split(s)[i])
    np.testing.assert_allclose(xy + [20, 40], [[20, 40], [60, 40], [10, 70], [80, 70], [40, 90], [40, 100]], atol=1e-4)
    n_fine = len(fine.split(find(fine, "U+6F22-Kaisho")[0])[find(fine, "U+6F22-Kaisho")[1]])
    s, i = find(simple, "U+6F22-Kaisho")
    assert 4 <= len(simple.split(s)[i]) < n_fine / 3  # the curve keeps a few points, the line two


@needs_svg
def test_kanjivg_split_by_code_point(kvg):
    for seed in range(6):
        corpus = msr.data.load("kanjivg", path=kvg, split=(7, 3, 2), seed=seed)
        cps = {s: {m["code_point"] for m in corpus.meta[s]} for s in SPLITS}
        assert not (cps["train"] & cps["valid"] or cps["train"] & cps["test"] or cps["valid"] & cps["test"])
        files = [m["file"] for s in SPLITS for m in corpus.meta[s]]
        assert len(files) + corpus.left_out == 13 and len(set(files)) == len(files)
        assert ("06f22.svg" in files) == ("06f22-Kaisho.svg" in files)  # the variant goes with its base
        assert len(corpus.test) <= 2 and len(corpus.valid) <= 3 and len(corpus.train) <= 7
        for s in SPLITS:
            assert all(len(b["component"]) == len(x) for b, x in zip(corpus.boundaries[s], corpus.split(s)))
    a, b = (load_kanjivg(path=kvg, split=(7, 3, 2), seed=4) for _ in range(2))
    assert a.meta == b.meta
    small = load_kanjivg(path=kvg)  # 13 files, fewer than 11,100: the same ratios, training the rest
    assert [len(small.valid), len(small.test)] == [1, 1] and len(small.train) == 11 and small.left_out == 0


@needs_svg
def test_kanjivg_errors(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="KanjiVG: folder .*none does not exist"):
        load_kanjivg(path=tmp_path / "none")
    with pytest.raises(FileNotFoundError, match="no KanjiVG .svg files"):
        load_kanjivg(path=tmp_path)
    with pytest.raises(ValueError, match="epsilon must be"):
        load_kanjivg(path=tmp_path, epsilon=-1)
    for name in ("06f22", "06f22-Kaisho", "06f23", "06f23-Kaisho", "06f24", "06f24-Kaisho"):
        kvg_file(tmp_path, name, "x", KAN.format(n=name))
    with pytest.raises(ValueError, match="kanjivg: no drawing fits the test split"):
        load_kanjivg(path=tmp_path, split=(3, 2, 1))  # every code point has two files

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(ImportError, match=r'pip install "multiscale-rnn\[strokes\]"'):
        load_kanjivg()


# --------------------------------------------------------------------------------- the real KanjiVG


def kanjivg_files():
    try:
        dist = importlib.metadata.distribution("kanjivg")
    except importlib.metadata.PackageNotFoundError:
        return None
    return [f for f in dist.files or () if f.parts[0] == "kanji" and f.name.endswith(".svg")]


@pytest.fixture(scope="module")
def real():
    if kanjivg_files() is None:
        pytest.skip("the kanjivg package is not installed")
    return msr.data.load("kanjivg", seed=0)


@needs_svg
def test_real_kanjivg_counts_and_split(real):
    files = kanjivg_files()
    n_cps = len({f.name[:5] for f in files})
    used = [m for s in SPLITS for m in real.meta[s]]
    assert len(used) + real.left_out == len(files)
    assert [len(real.train), len(real.valid), len(real.test)] == [10000, 600, 500]
    cps = {s: {m["code_point"] for m in real.meta[s]} for s in SPLITS}
    assert not (cps["train"] & cps["valid"] or cps["train"] & cps["test"] or cps["valid"] & cps["test"])
    assert len(set.union(*cps.values())) <= n_cps
    rows = np.concatenate(real.train).astype(np.float64)
    np.testing.assert_allclose(rows[:, :2].mean(axis=0), 0, atol=1e-4)
    np.testing.assert_allclose(rows[:, :2].std(axis=0), 1, atol=1e-4)
    assert 30 < real.stats()["train"]["mean_points"] < 120


@needs_svg
def test_real_kanjivg_drawings(real):
    strokes = {"一": 1, "二": 2, "三": 3, "木": 4, "口": 3, "漢": 13}
    by_char = {m["char"]: (s, i) for s in SPLITS for i, m in enumerate(real.meta[s]) if not m["variant"]}
    for char, n in strokes.items():
        if char not in by_char:
            continue  # left out of the split
        s, i = by_char[char]
        seq, b = real.split(s)[i], real.boundaries[s][i]
        assert real.meta[s][i]["strokes"] == n and b["stroke"].sum() == n and seq[-1, 2] == 1
        assert 2 * n - 1 <= len(seq) <= 40 * n
        xy, pen = real.points(seq)
        assert np.all(np.ptp(xy, axis=0) < 109)  # inside the canvas
        assert b["component"].sum() <= n
    if "漢" in by_char:
        s, i = by_char["漢"]
        # 氵 and the right half (the phonetic 𦰩, a top-level group marked only kvg:phon)
        assert real.boundaries[s][i]["component"].sum() == 2


@needs_svg
def test_command_line_trains_evaluates_and_samples_a_stroke_model(kvg, tmp_path, capsys):
    import json

    import matplotlib.image

    from multiscale_rnn import checkpoint
    from multiscale_rnn.cli import main

    ck = tmp_path / "kanji.npz"
    argv = ["train", "--data", "kanjivg", "--data-path", str(kvg), "--model", "hm-lstm", "--embed-size", "8"]
    argv += ["--hidden-sizes", "8,8", "--option", "mixtures=2", "--epochs", "2", "--batch-size", "2", "--bptt", "8"]
    argv += ["--lr", "0.01", "--out", str(ck), "--no-progress", "--threads", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "training sequences" in out and "nats per sequence" in out
    model = checkpoint.load(ck).model
    assert model.vocab_size is None and model.config["head"] == "mdn" and model.config["mixtures"] == 2
    assert main(["evaluate", str(ck), "--split", "valid", "--json"]) == 0
    r = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert r["split"] == "valid" and r["sequences"] >= 1 and r["log_likelihood"] == -r["nats_per_sequence"]
    counts = {}
    for split in ("train", "valid", "test", "all"):
        assert main(["evaluate", str(ck), "--split", split, "--json"]) == 0
        counts[split] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["sequences"]
    assert counts["all"] == counts["train"] + counts["valid"] + counts["test"]  # every drawing of the corpus
    png = tmp_path / "drawn.png"
    assert main(["sample", str(ck), "--length", "12", "--num-samples", "3", "--bias", "0.5", "--out", str(png)]) == 0
    assert "3 drawing(s) of 12 pen offsets" in capsys.readouterr().out
    assert matplotlib.image.imread(png).shape[1] > matplotlib.image.imread(png).shape[0]  # three side by side
    assert main(["sample", str(ck), "--prompt", "x"]) == 1
    assert "--prompt is for text models" in capsys.readouterr().err
    for kind in ("figure5", "computation"):
        fig = tmp_path / f"{kind}.svg"
        assert main(["plot", str(ck), "--kind", kind, "--index", "0", "--out", str(fig)]) == 0
        assert f"{kind} of drawing 0 of the valid split of kanjivg" in capsys.readouterr().out
        assert fig.read_text().lstrip().startswith("<?xml")
    assert main(["plot", str(ck), "--kind", "figure5", "--index", "99"]) == 1
    assert "--index 99: the valid split of kanjivg has drawings 0 .. " in capsys.readouterr().err


@needs_svg
def test_hm_lstm_boundaries_scored_against_pen_lifts_and_components_and_figure_5(kvg):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import multiscale_rnn as msr
    from multiscale_rnn.analysis.hm_lstm_strokes import point_references, score_strokes, stroke_trace

    corpus = msr.data.load("kanjivg", path=kvg, epsilon=0.5)
    model = msr.HMLSTM(input_size=3, head="mdn", mixtures=2, embed_size=6, hidden_sizes=[8, 8, 8], warmup=0, seed=3)
    rows = corpus.train[0]
    tr = stroke_trace(model, rows, reference=corpus.boundaries["train"][0]["stroke"], tolerance=0)
    assert tr.z.shape == (3, len(rows) + 1)  # one step per point: the start, then every row
    np.testing.assert_array_equal(tr.reference, point_references(rows[:, 2] > 0.5))
    r = score_strokes(model, corpus, "train", max_sequences=None, tolerance=1)
    assert r["layers"] == ["z1", "z2"] and r["sequences"] == len(corpus.train)
    assert r["points"] == sum(len(s) + 1 for s in corpus.train)
    pen_rate = sum(float(s[:, 2].sum()) for s in corpus.train) / r["points"]
    assert r["reference_rates"]["stroke"] == pytest.approx(pen_rate)
    assert set(r) >= {"stroke", "component"} and all(0 <= s["f1"] <= 1 for s in r["stroke"] + r["component"])
    fig, axes = plt.subplots(1, 2)
    msr.plot.figure5(model, corpus, index=0, split="train", layer=2, axes=axes)
    strokes_drawn = int(rows[:, 2].sum())  # the pen lifts after each stroke: as many segments
    assert axes[1].get_title() == f"segments by pen-up ({strokes_drawn})"
    assert len(axes[1].lines) == len(rows) + 1 - strokes_drawn  # one line per pen-down move
    with pytest.raises(ValueError, match="layer must be in 1..3"):
        msr.plot.figure5(model, corpus, layer=4)
    ax = msr.plot.computation(model, corpus, index=0, split="train")
    assert ax.get_title().startswith("layers updated (") and len(ax.get_legend().get_texts()) == 3
    assert len(ax.lines) == len(rows) + 1 - strokes_drawn
    plt.close("all")
