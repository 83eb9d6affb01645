"""Bit-level text (ptb-bits, embedded-bits) and ABC folk tunes (nottingham)."""

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from multiscale_rnn import data

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
if not SHARED.is_dir():
    SHARED = Path("/work/shared/data")


# ---------------------------------------------------------------- bits


def test_text_bits_msb_first_and_buffer():
    bits = data.text_bits("a", buffer_bits=0)
    assert bits.tolist() == [0, 1, 1, 0, 0, 0, 0, 1]  # 0x61
    bits = data.text_bits("aZ", buffer_bits=8)
    assert bits.shape == (32,)
    assert bits[:8].tolist() == [0, 1, 1, 0, 0, 0, 0, 1]
    assert bits[8:16].tolist() == [0] * 8
    assert bits[16:24].tolist() == [0, 1, 0, 1, 1, 0, 1, 0]  # 0x5A
    assert bits[24:].tolist() == [0] * 8
    # every character's bits re-assemble to its code
    text = "Hello, world!\n"
    b = data.text_bits(text, buffer_bits=24).reshape(len(text), 32)
    assert (b[:, 8:] == 0).all()
    codes = (b[:, :8] * (1 << np.arange(7, -1, -1))).sum(axis=1)
    assert bytes(codes.astype(np.uint8)).decode() == text


def test_bit_corpus_splits_positions_and_vocab():
    c = data.bit_corpus("abc", "de", "f", buffer_bits=24)
    assert isinstance(c, data.BitCorpus)
    assert c.vocab.itos == ["0", "1"] and c.vocab.unk_id is None
    assert c.frame == 32 and c.buffer_bits == 24
    assert {s: len(a) for s, a in c.splits.items()} == {"train": 96, "valid": 64, "test": 32}
    assert c.positions["valid"].tolist() == list(range(32)) * 2
    assert c.is_buffer("test").tolist() == [False] * 8 + [True] * 24
    assert c.boundaries["train"]["char"].nonzero()[0].tolist() == [31, 63, 95]
    assert c.valid[:8].tolist() == [0, 1, 1, 0, 0, 1, 0, 0]  # "d" = 0x64
    assert "buffer_bits=24" in repr(c)
    with pytest.raises(ValueError, match="no 'valid'"):
        data.bit_corpus("ab").is_buffer("valid")


def test_bit_corpus_from_char_corpus_keeps_splits():
    chars = data.char_corpus("hello world", "low", "he")
    c = data.bit_corpus(chars, buffer_bits=8)
    assert c.name == "text-bits"
    for s, a in chars.splits.items():
        assert len(c.splits[s]) == 16 * len(a)
    text = chars.vocab.decode(chars.valid)
    assert np.array_equal(c.valid, data.text_bits(text, 8))


def test_bits_refuse_non_ascii_and_bad_buffer():
    with pytest.raises(ValueError, match=r"'é' \(U\+00E9\) at position 2 is not ASCII"):
        data.bit_corpus("caé")
    with pytest.raises(ValueError, match="buffer_bits"):
        data.text_bits("a", buffer_bits=-8)
    with pytest.raises(ValueError, match="buffer_bits"):
        data.text_bits("a", buffer_bits=2.5)
    with pytest.raises(ValueError, match="character corpus"):
        data.bit_corpus(data.word_corpus("a b c"))
    with pytest.raises(ValueError, match="not both"):
        data.bit_corpus(data.char_corpus("ab"), "cd")
    # bytes are taken as they are (UTF-8 bytes of a non-ASCII text)
    assert data.text_bits("é".encode(), 0).tolist() == [1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 1, 0, 1, 0, 0, 1]


def test_bit_positions_offset():
    assert data.bit_positions(5, 0, offset=6).tolist() == [6, 7, 0, 1, 2]
    assert data.bit_positions(4, 8, offset=14).tolist() == [14, 15, 0, 1]


def test_load_embedded_bits():
    chars = data.load("embedded")
    bits = data.load("embedded-bits", buffer_bits=8)
    assert bits.name == "embedded-bits" and bits.vocab_size == 2
    assert len(bits.train) == 16 * len(chars.train)
    assert np.array_equal(bits.test[: 16 * 20], data.text_bits(chars.vocab.decode(chars.test[:20]), 8))
    with pytest.raises(TypeError, match="unexpected option"):
        data.load("embedded-bits", seed=1)
    with pytest.raises(ValueError, match="takes no path"):
        data.load("embedded-bits", path="x")


def test_load_ptb_bits_real():
    ptb = SHARED / "ptb"
    if not ptb.is_dir():
        pytest.skip(f"the shared PTB copy is not at {ptb}")
    bits = data.load("ptb-bits", path=ptb)
    assert bits.vocab_size == 2 and bits.name == "ptb-bits"
    assert {s: len(a) for s, a in bits.splits.items()} == {
        "train": 8 * 5_017_482,
        "valid": 8 * 393_042,
        "test": 8 * 442_423,
    }
    assert bits.buffer_bits == 0 and bits.positions["test"][:9].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 0]


# ---------------------------------------------------------------- music

TUNE = """% a file header
X: 1
T:Test Tune
M:6/8
K:G
|:"G"GAB c2d|e/f/g>f ^c=c|(3ABc [DFA]2 z|
M:3/4
[K:F]B [1f2 :|[2B,2 c'||
X: 2
T:Second
M:4/4
L:1/4
K:Am
A2 G{g}F |] x/2 A// !trill!~e-e|
"""


def test_parse_abc_pitches_lengths_and_classes():
    tunes = data.parse_abc(TUNE, "fixture")
    assert [t.number for t in tunes] == ["1", "2"] and tunes[0].title == "Test Tune"
    # M:6/8 -> L:1/8 = 1/2 quarter note; K:G has F#
    assert tunes[0].symbols == [
        "G4:1/2",
        "A4:1/2",
        "B4:1/2",
        "C5:1",
        "D5:1/2",
        "|",
        # e/ f/ g > f: halves, then broken rhythm 3/4 + 1/4; ^c then =c cancels in the bar
        "E5:1/4",
        "F#5:1/4",
        "G5:3/4",
        "F#5:1/4",
        "C#5:1/2",
        "C5:1/2",
        "|",
        # triplet of eighths: 1/3 each; the chord keeps its highest note (A, with F#); rest
        "A4:1/3",
        "B4:1/3",
        "C5:1/3",
        "A4:1",
        "z:1/2",
        "|",
        # K:F: B is Bb; volta marks dropped; octave marks
        "A#4:1/2",
        "|",
        "F5:1",
        "|",
        "A#3:1",
        "C6:1/2",
        "|",
        "<eot>",
    ]
    # L:1/4, K:Am (no accidentals), grace notes, decorations and ties dropped, // = 1/4
    assert tunes[1].symbols == ["A4:2", "G4:1", "F4:1", "|", "z:1/2", "A4:1/4", "E5:1", "E5:1", "|", "<eot>"]
    assert data.symbol_classes(tunes[0].symbols[:7]) == ["1/2", "1/2", "1/2", "1", "1/2", "bar", "1/4"]
    assert data.symbol_classes(["z:1/2", "|", "<eot>", "C4:1", "foo"], by="kind") == [
        "rest",
        "bar",
        "end",
        "note",
        "unknown",
    ]
    info = data.symbol_info("F#5:3/2")
    assert (info.kind, info.midi, info.length) == ("note", 78, Fraction(3, 2))
    with pytest.raises(ValueError, match="by must be"):
        data.symbol_classes([], by="pitch")


def test_parse_abc_defaults_and_errors():
    # no L: and M:2/4 (< 3/4) -> L:1/16; Z rest = a whole bar; Dorian mode
    t = data.parse_abc("X:1\nM:2/4\nK:Ador\nA2 F Z|\n")[0]
    assert t.symbols == ["A4:1/2", "F#4:1/4", "z:2", "|", "<eot>"]
    with pytest.raises(ValueError, match=r"X:7 .*unexpected '\?'"):
        data.parse_abc("X:7\nK:C\nAB?C|\n", "bad.abc")
    with pytest.raises(ValueError, match="unsupported key"):
        data.parse_abc("X:1\nK:Gxyz\nA|\n")
    with pytest.raises(ValueError, match="no K: field"):
        data.parse_abc("X:1\nT:x\n")
    with pytest.raises(ValueError, match="no notes"):
        data.parse_abc("X:1\nK:C\n|z|\n")


def _write_tunes(folder: Path, n: int) -> None:
    folder.mkdir()
    tunes = [f"X:{i}\nT:t{i}\nM:4/4\nL:1/8\nK:D\n{'ABcd'[i % 4]}2 f g|a4 z4|\n\n" for i in range(n)]
    (folder / "a.abc").write_text("".join(tunes[: n // 2]))
    (folder / "b.abc").write_text("".join(tunes[n // 2 :]))


def test_load_nottingham_fixture_split_by_tune(tmp_path):
    _write_tunes(tmp_path / "abc", 20)
    c = data.load("nottingham", path=tmp_path / "abc", seed=3)
    assert c.name == "nottingham" and c.unit == "word"
    assert [len(c.tunes[s]) for s in ("train", "valid", "test")] == [16, 2, 2]
    names = [t.title for s in ("train", "valid", "test") for t in c.tunes[s]]
    assert sorted(names) == sorted(f"t{i}" for i in range(20))  # every tune once, whole
    for s, ids in c.splits.items():
        syms = [c.vocab.itos[i] for i in ids]
        assert syms.count("<eot>") == len(c.tunes[s]) and syms[-1] == "<eot>"
        assert c.boundaries[s]["tune"].sum() == len(c.tunes[s])
        assert np.array_equal(c.boundaries[s]["bar"], np.array(syms) == "|")
    again = data.load("nottingham", path=tmp_path / "abc", seed=3)
    other = data.load("nottingham", path=tmp_path / "abc", seed=4)
    assert [t.title for t in again.tunes["test"]] == [t.title for t in c.tunes["test"]]
    assert [t.title for t in other.tunes["train"]] != [t.title for t in c.tunes["train"]]
    one = data.load("nottingham", path=tmp_path / "abc" / "a.abc", valid_fraction=0, test_fraction=0.5)
    assert one.valid is None and len(one.tunes["test"]) == len(one.tunes["train"])


def test_load_nottingham_errors(tmp_path):
    with pytest.raises(ValueError, match="needs path="):
        data.load("nottingham")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        data.load("nottingham", path=tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no .abc file"):
        data.load("nottingham", path=tmp_path / "empty")
    with pytest.raises(TypeError, match="buffer_bits"):
        data.load("nottingham", path=tmp_path, buffer_bits=8)


def test_load_nottingham_real():
    folder = SHARED / "nottingham_abc"
    if not folder.is_dir():
        pytest.skip(f"the shared Nottingham copy is not at {folder}")
    c = data.load("nottingham", path=folder)
    n = {s: len(c.tunes[s]) for s in ("train", "valid", "test")}
    assert n == {"train": 828, "valid": 103, "test": 103} and sum(n.values()) == 1034
    assert c.vocab_size == 265 and c.vocab.itos[-1] == "<unk>"  # 264 training symbols + <unk>
    kinds = data.symbol_classes(c.vocab.itos, by="kind")
    assert set(kinds) <= {"note", "rest", "bar", "end", "unknown"}
    assert kinds.count("bar") == 1 and kinds.count("end") == 1
    classes = data.symbol_classes([c.vocab.itos[i] for i in c.train])
    for length in ("1/4", "1/3", "1/2", "3/4", "1", "3/2", "2"):  # the lengths of Table 2
        assert classes.count(length) > 50, length
    # most bars of the jigs (6/8) last 3 quarter notes
    jigs = data.read_abc_tunes(folder / "ABC_cleaned" / "jigs.abc")
    full = total = 0
    for t in jigs:
        length = Fraction(0)
        for s in t.symbols:
            info = data.symbol_info(s)
            if info.length is not None:
                length += info.length
            elif length:
                total, full, length = total + 1, full + (length == 3), Fraction(0)
    assert full / total > 0.8


def test_cli_names_bits_per_bit_and_per_symbol(tmp_path, capsys):
    """The command line labels the bits figure by the corpus's token: bits/bit for the bit corpora,
    bits/symbol for the music corpus, bpc for characters (not bpc for all)."""
    from multiscale_rnn.cli import main
    from multiscale_rnn.trainer import Trainer, bits_label

    tiny = [
        "--model",
        "elman",
        "--embed-size",
        "4",
        "--hidden-sizes",
        "8",
        "--batch-size",
        "4",
        "--bptt",
        "10",
        "--threads",
        "1",
        "--no-progress",
        "--epochs",
        "1",
    ]
    _write_tunes(tmp_path / "abc", 20)
    out = tmp_path / "music.npz"
    assert main(["train", "--data", "nottingham", "--data-path", str(tmp_path / "abc"), *tiny, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "epoch 1: train bits/symbol" in text and "valid bits/symbol" in text and "bpc" not in text
    assert main(["evaluate", str(out), "--split", "test"]) == 0
    assert "bits/symbol" in capsys.readouterr().out
    out = tmp_path / "bits.npz"
    assert main(["train", "--data", "embedded-bits", *tiny, "--max-chunks", "2", "--out", str(out)]) == 0
    done = [l for l in capsys.readouterr().out.splitlines() if l.startswith("done")][0]
    assert "valid bits/bit" in done and "test bits/bit" in done and "bpc" not in done
    assert (bits_label("char"), bits_label("word")) == ("bpc", "bpw")
    with pytest.raises(ValueError, match="unit must be one of"):
        Trainer(None, unit="byte")
