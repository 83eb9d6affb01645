"""Pen strokes: on-line handwriting (IAM-OnDB) and ordered kanji strokes (KanjiVG) as sequences of pen
offsets, in one corpus interface, :class:`StrokeCorpus`.

Rows. A drawing of ``L`` points (its strokes one after the other, in drawing order) becomes ``n = L - 1``
rows of three numbers. Row ``k`` is ``(dx_k, dy_k, p_k)``: ``(dx_k, dy_k)`` is the offset from point ``k``
to point ``k + 1``, normalised as ``(offset - mean) / std`` with the mean and standard deviation of the
training offsets (per column, computed before normalising); ``p_k`` is 1 when point ``k + 1`` is the last
point of its stroke (the pen lifts after it), else 0. The last row of every sequence has ``p = 1``. The
offset out of a stroke's last point is the pen-up move to the next stroke's first point. A model reads a
start vector ``(0, 0, 1)`` and then the rows, and predicts every row, so a sequence's log-likelihood covers
all ``n`` rows (the start vector stands for "pen up before the first point"; a first stroke of a single
point, a dot, has no row that ends it and so no pen bit of its own).

Coordinates are used as the sources give them: KanjiVG's SVG coordinates (109 x 109 canvas, y pointing
down) and IAM-OnDB's whiteboard coordinates (y pointing down as well). :meth:`StrokeCorpus.points` undoes
the normalisation, for drawing.

Boundaries: ``corpus.boundaries[split][i]["stroke"]`` (bool, one per row) is column 2 of the rows; KanjiVG
drawings also have ``["component"]``: the row ends at the last point of the last stroke of a top-level
component (a group directly below the character's root group). Every sequence is
described in ``corpus.meta[split][i]`` (its ``id`` and where it came from).

Splits. The sizes are numbers of drawings. With at least as many drawings as the sizes add up to, the
splits get exactly those sizes and the drawings left over are in no split (``corpus.left_out`` counts
them); with fewer, the sizes are scaled down in the same ratios (at least one drawing per split) and
training takes the rest. The order is a seeded permutation (``numpy.random.default_rng(seed)``).
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
import tarfile
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from .._checks import non_negative_int, non_negative_number, positive_number

__all__ = [
    "StrokeCorpus",
    "load_iam",
    "load_kanjivg",
    "drawing_rows",
    "drawing_points",
    "IAM_SPLIT",
    "KANJIVG_SPLIT",
    "KANJIVG_STEP",
    "IAM_URL",
]

SPLITS = ("train", "valid", "test")

#: The split of Graves (2013) and the multiscale papers: training, validation, test lines.
IAM_SPLIT = (10465, 581, 582)
#: sketch-rnn's kanji.rdp25 split: training, validation, test drawings.
KANJIVG_SPLIT = (10000, 600, 500)
#: Arc-length step (SVG units, on KanjiVG's 109 x 109 canvas) at which a stroke's path is sampled.
KANJIVG_STEP = 1.0
#: Where IAM-OnDB is obtained (after registering, under its own licence).
IAM_URL = "https://fki.tic.heia-fr.ch/databases/iam-on-line-handwriting-database"

#: A drawing: its strokes in order, each an (m, 2) float64 array of absolute points.
Drawing = List[np.ndarray]


class StrokeCorpus:
    """Pen-offset sequences split into train / valid / test (see the module's docstring for the rows).

    ``train``, ``valid``, ``test``: lists of float32 arrays of shape (n_i, 3). ``mean``, ``std``: (2,)
    float64, of the training offsets. ``meta[split]``: one dict per sequence. ``boundaries[split]``: one
    dict of bool arrays (length n_i) per sequence. ``input_size`` is 3 (rows are vectors, not symbols).
    """

    input_size = 3

    def __init__(
        self,
        name: str,
        splits: Dict[str, List[np.ndarray]],
        mean: np.ndarray,
        std: np.ndarray,
        meta: Dict[str, List[Dict[str, Any]]],
        boundaries: Dict[str, List[Dict[str, np.ndarray]]],
        left_out: int = 0,
    ):
        self.name = name
        self.train: List[np.ndarray] = splits["train"]
        self.valid: List[np.ndarray] = splits["valid"]
        self.test: List[np.ndarray] = splits["test"]
        self.mean = np.asarray(mean, dtype=np.float64)
        self.std = np.asarray(std, dtype=np.float64)
        self.meta = meta
        self.boundaries = boundaries
        self.left_out = left_out

    def split(self, name: str) -> List[np.ndarray]:
        """The sequences of split ``name`` ("train", "valid" or "test")."""
        if name not in SPLITS:
            raise ValueError(f"unknown split {name!r}; expected one of {', '.join(SPLITS)}")
        return getattr(self, name)

    def stats(self) -> Dict[str, Dict[str, float]]:
        """Per split: ``sequences``, ``rows`` (offsets), ``points`` (rows + 1 per sequence) and
        ``mean_points`` (points per drawing)."""
        out = {}
        for s in SPLITS:
            seqs = self.split(s)
            rows = int(sum(len(x) for x in seqs))
            points = rows + len(seqs)
            out[s] = {
                "sequences": len(seqs),
                "rows": rows,
                "points": points,
                "mean_points": points / len(seqs) if seqs else 0.0,
            }
        return out

    def points(self, seq: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """A sequence's drawing: absolute coordinates (L, 2), float64, starting at (0, 0), the
        normalisation undone; and pen bits (L,), bool: True where the pen lifts after the point (point
        ``k + 1`` gets row ``k``'s bit; point 0 gets False)."""
        return drawing_points(seq, self.mean, self.std)

    def __repr__(self) -> str:
        st = self.stats()
        sizes = ", ".join(f"{s}={st[s]['sequences']:,} ({st[s]['mean_points']:.1f} points)" for s in SPLITS)
        return f"StrokeCorpus({self.name!r}: {sizes}, input_size=3)"


def drawing_points(seq, mean, std) -> Tuple[np.ndarray, np.ndarray]:
    """The drawing of rows normalised by ``mean`` and ``std`` ((2,) each): absolute coordinates (L, 2),
    float64, from (0, 0), the normalisation undone, and pen bits (L,), bool (``StrokeCorpus.points``)."""
    seq = np.asarray(seq, dtype=np.float64)
    if seq.ndim != 2 or seq.shape[1] != 3:
        raise ValueError(f"a stroke sequence has shape (n, 3), got {seq.shape}")
    offsets = seq[:, :2] * np.asarray(std, dtype=np.float64) + np.asarray(mean, dtype=np.float64)
    xy = np.vstack([np.zeros((1, 2)), np.cumsum(offsets, axis=0)])
    pen = np.concatenate([[False], seq[:, 2] > 0.5])
    return xy, pen


def drawing_rows(strokes: Drawing, component_ends: Sequence[int] = ()) -> Tuple[np.ndarray, Dict[str, np.ndarray]]:
    """The un-normalised rows of one drawing: offsets (n, 2) float64 with n = L - 1, and the boundaries
    ``{"stroke": ..., "component": ...}`` (bool, length n; "component" only when ``component_ends``, the
    indices of the strokes that end a component, is given)."""
    pts = np.concatenate(strokes, axis=0)
    ends = np.cumsum([len(s) for s in strokes]) - 1  # index of each stroke's last point
    offsets = np.diff(pts, axis=0)
    n = len(offsets)
    stroke = np.zeros(n, dtype=bool)
    stroke[ends[ends >= 1] - 1] = True
    bounds = {"stroke": stroke}
    if component_ends is not None and len(component_ends):
        component = np.zeros(n, dtype=bool)
        rows = ends[np.asarray(component_ends, dtype=int)] - 1
        component[rows[rows >= 0]] = True
        bounds["component"] = component
    return offsets, bounds


def _split_sizes(n: int, split: Sequence[int], what: str) -> Tuple[List[Optional[int]], bool]:
    """Capacities (test, valid, train) for ``n`` drawings: the sizes themselves when there are enough,
    else scaled down in the same ratios (at least 1 each) with training taking the rest (None); and
    whether they were scaled."""
    if len(split) != 3:
        raise ValueError(f"split must be three sizes (train, valid, test), got {split!r}")
    train, valid, test = (non_negative_int(v, "each split size") for v in split)
    if min(train, valid, test) < 1:
        raise ValueError(f"each split size must be at least 1, got {tuple(split)!r}")
    total = train + valid + test
    if n >= total:
        return [test, valid, train], False
    if n < 3:
        raise ValueError(f"{what}: {n} drawing(s) cannot be split three ways (at least 3 are needed)")
    t = max(1, round(n * test / total))
    v = max(1, round(n * valid / total))
    return [t, v, None], True


def _assign(groups: Sequence[int], capacities: List[Optional[int]], seed: int) -> Tuple[List[List[int]], int]:
    """Seeded assignment of groups (sizes ``groups``, in their given order) to test, valid and train:
    walking a seeded permutation, each group goes whole to the first of them it still fits in (None:
    no limit). Returns the group indices of (train, valid, test) and the number of drawings left out."""
    left = list(capacities)
    out: List[List[int]] = [[], [], []]
    left_out = 0
    for g in np.random.default_rng(seed).permutation(len(groups)):
        size = groups[g]
        for j in range(3):
            if left[j] is None or left[j] >= size:  # type: ignore[operator]
                out[j].append(int(g))
                if left[j] is not None:
                    left[j] -= size  # type: ignore[operator]
                break
        else:
            left_out += size
    test, valid, train = out
    return [sorted(train), sorted(valid), sorted(test)], left_out


def _corpus(
    name: str,
    drawings: Dict[str, List[Tuple[Drawing, Sequence[int], Dict[str, Any]]]],
    left_out: int,
    components: bool,
) -> StrokeCorpus:
    """A :class:`StrokeCorpus` from each split's drawings (strokes, component-ending stroke indices,
    meta), normalised by the training offsets' mean and standard deviation (a zero deviation counts
    as 1)."""
    empty = [s for s in SPLITS if not drawings[s]]
    if empty:  # whole code points that fit no split's size
        raise ValueError(f"{name}: no drawing fits the {' and '.join(empty)} split; give larger split sizes")
    raw: Dict[str, List[np.ndarray]] = {}
    bounds: Dict[str, List[Dict[str, np.ndarray]]] = {}
    for s in SPLITS:
        raw[s], bounds[s] = [], []
        for strokes, comp, _ in drawings[s]:
            offsets, b = drawing_rows(strokes, comp)
            if components and "component" not in b:
                b["component"] = np.zeros(len(offsets), dtype=bool)
            raw[s].append(offsets)
            bounds[s].append(b)
    train = np.concatenate(raw["train"], axis=0)
    mean, std = train.mean(axis=0), train.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    splits = {
        s: [np.column_stack([(o - mean) / std, b["stroke"]]).astype(np.float32) for o, b in zip(raw[s], bounds[s])]
        for s in SPLITS
    }
    meta = {s: [m for _, _, m in drawings[s]] for s in SPLITS}
    return StrokeCorpus(name, splits, mean, std, meta, bounds, left_out=left_out)


# ---------------------------------------------------------------------------------------------- IAM-OnDB


def _iam_sources(path: Path) -> Iterator[Tuple[str, bytes]]:
    """(name, bytes) of every .xml file of a lineStrokes folder (recursive) or .tar.gz / .tgz / .zip
    archive, sorted by name (the path inside the folder or archive); macOS resource forks skipped."""
    if not path.exists():
        raise FileNotFoundError(f"IAM-OnDB: path {path} does not exist")

    def wanted(name: str) -> bool:
        base = name.rsplit("/", 1)[-1]
        return base.lower().endswith(".xml") and not base.startswith("._") and "__MACOSX" not in name

    if path.is_dir():
        files = sorted((p.relative_to(path).as_posix(), p) for p in path.rglob("*") if p.is_file() and wanted(p.name))
        if not files:
            raise FileNotFoundError(f"IAM-OnDB: no .xml files found in folder {path} (nor in its sub-folders)")
        for name, p in files:
            yield name, p.read_bytes()
        return
    suffix = "".join(path.suffixes[-2:]).lower()
    if suffix.endswith((".tar.gz", ".tgz", ".tar")):
        with tarfile.open(path, "r:*") as tar:
            members = sorted((m for m in tar.getmembers() if m.isfile() and wanted(m.name)), key=lambda m: m.name)
            if not members:
                raise FileNotFoundError(f"IAM-OnDB: no .xml files found in archive {path}")
            for m in members:
                yield m.name, tar.extractfile(m).read()  # type: ignore[union-attr]
    elif suffix.endswith(".zip"):
        with zipfile.ZipFile(path) as z:
            names = sorted(i.filename for i in z.infolist() if not i.is_dir() and wanted(i.filename))
            if not names:
                raise FileNotFoundError(f"IAM-OnDB: no .xml files found in archive {path}")
            for name in names:
                yield name, z.read(name)
    else:
        raise ValueError(f"IAM-OnDB: {path} is neither a folder nor a .tar.gz, .tgz or .zip archive")


def _iam_strokes(blob: bytes, where: str) -> Drawing:
    """The strokes of one lineStrokes XML file (empty strokes skipped); a malformed file is refused with
    its name and what is wrong."""
    try:
        root = ET.fromstring(blob)
    except ET.ParseError as e:
        raise ValueError(f"IAM-OnDB: {where} is not well-formed XML: {e}") from None
    stroke_set = root if root.tag == "StrokeSet" else root.find("StrokeSet")
    if stroke_set is None:
        raise ValueError(f"IAM-OnDB: {where} has no StrokeSet element (not a lineStrokes file?)")
    strokes = []
    for i, stroke in enumerate(stroke_set.iter("Stroke"), 1):
        pts = []
        for j, point in enumerate(stroke.iter("Point"), 1):
            try:
                pts.append((float(point.attrib["x"]), float(point.attrib["y"])))
            except KeyError as e:
                raise ValueError(f"IAM-OnDB: {where}: Point {j} of Stroke {i} has no {e.args[0]} attribute") from None
            except ValueError:
                xy = (point.get("x"), point.get("y"))
                raise ValueError(f"IAM-OnDB: {where}: Point {j} of Stroke {i} has x, y = {xy}, not numbers") from None
        if pts:
            strokes.append(np.array(pts, dtype=np.float64))
    return strokes


def load_iam(
    path: Union[str, Path],
    *,
    seed: int = 0,
    min_points: int = 300,
    split: Sequence[int] = IAM_SPLIT,
) -> StrokeCorpus:
    """IAM-OnDB from your own copy: ``path`` is the ``lineStrokes`` folder (its .xml files are found in
    all sub-folders) or a .tar.gz / .tgz / .zip archive of it. The database's licence forbids shipping it;
    obtain it from https://fki.tic.heia-fr.ch/databases/iam-on-line-handwriting-database.

    Each ``Stroke`` of a file's ``StrokeSet`` is drawn with the pen down; the pen lifts at its end. A file
    is one sequence (a line of handwriting). Sequences with fewer than ``min_points`` points are dropped
    (the papers' filter: 300; never fewer than 2, which make one row). The kept files, sorted by their
    path in the folder or archive, are split by a permutation seeded with ``seed`` into ``split`` =
    (train, valid, test) sizes, the papers' 10,465 / 581 / 582 by default; extra files are left out
    (``corpus.left_out``), and with fewer files than the sizes add up to, the sizes are scaled down in
    the same ratios (at least one per split) and training takes the rest. Offsets are normalised by
    the training offsets' mean and standard deviation. ``meta``: ``id`` (the file's path inside the
    folder or archive), ``points``, ``strokes``.
    """
    min_points = non_negative_int(min_points, "min_points")
    seed = non_negative_int(seed, "seed")
    path = Path(path).expanduser()
    kept: List[Tuple[Drawing, Sequence[int], Dict[str, Any]]] = []
    read = 0
    try:
        for name, blob in _iam_sources(path):
            read += 1
            strokes = _iam_strokes(blob, f"{path}: {name}" if not path.is_dir() else str(path / name))
            n_points = sum(len(s) for s in strokes)
            if n_points >= max(min_points, 2):
                kept.append((strokes, (), {"id": name, "points": n_points, "strokes": len(strokes)}))
    except (tarfile.TarError, zipfile.BadZipFile, EOFError) as e:
        raise ValueError(f"IAM-OnDB: {path} is not a valid archive: {e}") from None
    if not kept:
        raise ValueError(
            f"IAM-OnDB: none of the {read} sequence(s) read from {path} has at least {max(min_points, 2)} "
            f"points (min_points={min_points})"
        )
    capacities, _ = _split_sizes(len(kept), split, "IAM-OnDB")
    parts, left_out = _assign([1] * len(kept), capacities, seed)
    drawings = {s: [kept[i] for i in idx] for s, idx in zip(SPLITS, parts)}
    return _corpus("iam-ondb", drawings, left_out, components=False)


# ----------------------------------------------------------------------------------------------- KanjiVG

#: A KanjiVG file name: five hex digits of the code point, then an optional variant ("-Kaisho", ...).
_KANJIVG_FILE = re.compile(r"^([0-9a-f]{4,6})(?:-(.+))?\.svg$")
_SVG = "{http://www.w3.org/2000/svg}"


def _kanjivg_files(path: Optional[Union[str, Path]]) -> List[Path]:
    """The KanjiVG SVG files: of the folder ``path``, else of the installed ``kanjivg`` package."""
    if path is not None:
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise FileNotFoundError(f"KanjiVG: folder {folder} does not exist")
        files = sorted(p for p in folder.iterdir() if _KANJIVG_FILE.match(p.name))
        if not files:
            raise FileNotFoundError(f"KanjiVG: no KanjiVG .svg files (named like 06f22.svg) in folder {folder}")
        return files
    try:
        dist = importlib.metadata.distribution("kanjivg")
    except importlib.metadata.PackageNotFoundError:
        raise ImportError(
            'KanjiVG needs the kanjivg package: pip install "multiscale-rnn[strokes]" (or pip install kanjivg)'
        ) from None
    found = [f for f in dist.files or () if f.parts[0] == "kanji" and _KANJIVG_FILE.match(f.name)]
    if not found:
        raise FileNotFoundError(f"KanjiVG: the installed kanjivg {dist.version} holds no kanji/*.svg files")
    return sorted((Path(str(f.locate())) for f in found), key=lambda p: p.name)


@functools.lru_cache(maxsize=64)
def _bernstein(n: int) -> np.ndarray:
    """The cubic Bernstein basis at ``n + 1`` equally spaced parameters: (n + 1, 4)."""
    t = np.linspace(0.0, 1.0, n + 1)[:, None]
    return np.hstack([(1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t**2, t**3])


def _cubic(seg: Any, d: str) -> Tuple[complex, complex, complex, complex]:
    """A segment of ``svg.path`` as the control points of a cubic Bezier curve (lines and quadratic
    curves raised to cubics, exactly). Arcs are refused (KanjiVG draws none)."""
    from svg.path import CubicBezier, Linear, QuadraticBezier

    if isinstance(seg, CubicBezier):
        return seg.start, seg.control1, seg.control2, seg.end
    if isinstance(seg, QuadraticBezier):
        return (
            seg.start,
            seg.start + 2 / 3 * (seg.control - seg.start),
            seg.end + 2 / 3 * (seg.control - seg.end),
            seg.end,
        )
    if isinstance(seg, Linear):
        return seg.start, seg.start + (seg.end - seg.start) / 3, seg.start + 2 * (seg.end - seg.start) / 3, seg.end
    raise ValueError(f"{type(seg).__name__} segments are not read, in {d!r}")


def _sample_paths(ds: Sequence[str], step: float) -> List[np.ndarray]:
    """Points (m, 2) along each SVG path ``d`` of ``ds`` (parsed by ``svg.path``) at arc-length spacing
    ``step``, its start and end always included. Every segment is evaluated at equally spaced parameters
    (at least 16 per segment and 4 per ``step`` of the longest control polygon), and each path's polyline
    is resampled at equal arc length; all paths at once (one arc-length axis, the paths one unit apart)."""
    from svg.path import Move, parse_path

    ctrl, counts = [], []
    for d in ds:
        segs = [_cubic(seg, d) for seg in parse_path(d) if not isinstance(seg, Move)]
        if not segs:
            raise ValueError(f"empty path {d!r}")
        ctrl.extend(segs)
        counts.append(len(segs))
    c = np.array(ctrl, dtype=complex)  # (segments, 4)
    n = max(16, int(np.ceil(4 * np.abs(np.diff(c, axis=1)).sum(axis=1).max() / step)))
    dense = c @ _bernstein(n).T  # (segments, n + 1)
    keep = np.ones(dense.shape, dtype=bool)
    first = np.zeros(len(c), dtype=bool)
    first[np.cumsum([0] + counts[:-1])] = True
    keep[~first, 0] = False  # a segment's start is the previous segment's end
    z = dense[keep]
    path_of = np.repeat(np.repeat(np.arange(len(ds)), counts), keep.sum(axis=1))
    gaps = np.abs(np.diff(z))
    gaps[path_of[1:] != path_of[:-1]] = 1.0
    s = np.concatenate([[0.0], np.cumsum(gaps)])
    starts = np.flatnonzero(np.r_[True, path_of[1:] != path_of[:-1]])
    ends = np.r_[starts[1:] - 1, len(z) - 1]
    lengths = s[ends] - s[starts]
    m = np.maximum(np.ceil(lengths / step - 1e-9), 0).astype(int)  # points before the end point
    sizes = m + 1
    j = np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    local = np.where(j < np.repeat(m, sizes), j * step, np.repeat(lengths, sizes))
    at = np.repeat(s[starts], sizes) + local
    pts = np.column_stack([np.interp(at, s, z.real), np.interp(at, s, z.imag)])
    return np.split(pts, np.cumsum(sizes)[:-1])


def _kanjivg_drawing(file: Path, step: float, epsilon: float) -> Tuple[Drawing, List[int]]:
    """One KanjiVG file's strokes (sampled, simplified, in file order) and the indices of the strokes
    that end a top-level component (a group directly below the character's root group, whether it names its
    part with ``kvg:element`` or only with ``kvg:phon``, as the right half of 漢 does)."""
    from simplification.cutil import simplify_coords

    try:
        svg = ET.parse(file).getroot()
    except ET.ParseError as e:
        raise ValueError(f"KanjiVG: {file} is not well-formed XML: {e}") from None
    paths_group = next((g for g in svg.iter(f"{_SVG}g") if g.get("id", "").startswith("kvg:StrokePaths")), None)
    root = None if paths_group is None else paths_group.find(f"{_SVG}g")
    if root is None:
        raise ValueError(f"KanjiVG: {file} has no stroke group (g id='kvg:StrokePaths_...' with a g inside)")
    paths = list(root.iter(f"{_SVG}path"))
    if not paths:
        raise ValueError(f"KanjiVG: {file} has no stroke path")
    index = {id(p): i for i, p in enumerate(paths)}
    try:
        sampled = _sample_paths([p.get("d", "") for p in paths], step)
    except Exception as e:  # svg.path's parse errors have no common base class
        raise ValueError(f"KanjiVG: {file}: a stroke's path cannot be read: {e}") from None
    strokes = []
    for pts in sampled:
        if epsilon > 0 and len(pts) > 2:
            pts = np.asarray(simplify_coords(pts, epsilon), dtype=np.float64)
        strokes.append(pts)
    ends = []
    for child in root.findall(f"{_SVG}g"):
        inner = list(child.iter(f"{_SVG}path"))
        if inner:
            ends.append(index[id(inner[-1])])
    return strokes, sorted(set(ends))


def load_kanjivg(
    *,
    epsilon: float = 0.25,
    step: float = KANJIVG_STEP,
    seed: int = 0,
    split: Sequence[int] = KANJIVG_SPLIT,
    path: Union[str, Path, None] = None,
) -> StrokeCorpus:
    """KanjiVG's ordered kanji strokes (CC BY-SA 3.0, Ulrich Apel; https://kanjivg.tagaini.net) from the
    installed ``kanjivg`` package (``pip install "multiscale-rnn[strokes]"``), or from ``path``, a folder
    of KanjiVG SVG files.

    Each stroke's SVG path (parsed by ``svg.path``) is sampled at arc-length spacing ``step`` SVG units
    (default 1.0 on the 109 x 109 canvas; its end point always kept), then simplified with
    Ramer-Douglas-Peucker at tolerance ``epsilon`` SVG units (``simplification``; 0 keeps every sampled
    point); strokes keep the file's order, coordinates the SVG's (y down). Files like ``06f22-Kaisho.svg``
    are variants of the code point 06f22. The split is by code point: the sorted code points are
    permuted with ``seed`` and each goes, with all its files, to the first of test, valid and train that
    it still fits in whole; ``split`` = (train, valid, test) counts files (sketch-rnn's kanji.rdp25
    sizes 10,000 / 600 / 500 by default; the files that fit nowhere are left out, ``corpus.left_out``).
    With fewer files than the sizes add up to, the sizes are scaled down in the same ratios and training
    takes the rest. No code point is in two splits. ``meta``: ``id`` ("U+6F22-Kaisho"), ``file``,
    ``code_point`` (int), ``char``, ``variant`` ("" for the base drawing), ``strokes``, ``points``.
    """
    epsilon = non_negative_number(epsilon, "epsilon")
    step = positive_number(step, "step")
    seed = non_negative_int(seed, "seed")
    files = _kanjivg_files(path)
    by_cp: Dict[int, List[Path]] = {}
    for f in files:
        m = _KANJIVG_FILE.match(f.name)
        by_cp.setdefault(int(m.group(1), 16), []).append(f)  # type: ignore[union-attr]
    cps = sorted(by_cp)
    capacities, _ = _split_sizes(len(files), split, "KanjiVG")
    parts, left_out = _assign([len(by_cp[c]) for c in cps], capacities, seed)
    drawings: Dict[str, List[Tuple[Drawing, Sequence[int], Dict[str, Any]]]] = {}
    for s, idx in zip(SPLITS, parts):
        drawings[s] = []
        for c in (cps[i] for i in idx):
            for f in by_cp[c]:
                strokes, ends = _kanjivg_drawing(f, step, epsilon)
                variant = _KANJIVG_FILE.match(f.name).group(2) or ""  # type: ignore[union-attr]
                meta = {
                    "id": f"U+{c:04X}" + (f"-{variant}" if variant else ""),
                    "file": f.name,
                    "code_point": c,
                    "char": chr(c),
                    "variant": variant,
                    "strokes": len(strokes),
                    "points": int(sum(len(x) for x in strokes)),
                }
                drawings[s].append((strokes, ends, meta))
    return _corpus("kanjivg", drawings, left_out, components=True)
