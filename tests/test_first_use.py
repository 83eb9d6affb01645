"""What a new user meets first, from Python (issue 25): the README's training call stores the
vocabulary, text where ids belong says how to encode it, notebooks show progress without warnings,
and damaged or empty inputs are refused naming the path the user gave."""

import io
import json
import re
import sys
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn import _progress, checkpoint, data
from multiscale_rnn.checkpoint import CheckpointError

pytestmark = pytest.mark.usefixtures("one_thread")

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.fixture(scope="module")
def corpus():
    """A small character corpus cut from the shipped text (the README's corpus, shrunk)."""
    text = data.embedded_text()[:4_000]
    return data.char_corpus(text[:3_000], text[3_000:3_500], text[3_500:], name="embedded-small")


def small_trainer(vocab_size, **kw):
    model = msr.LSTM(vocab_size=vocab_size, embed_size=8, hidden_sizes=(16,), seed=0)
    return msr.Trainer(
        model, optimizer=msr.optim.Adam(lr=2e-3), clip_norm=1.0, batch_size=4, bptt=20, progress=False, **kw
    )


def readme_fit_call() -> str:
    """The README's training call, as written there (without its comment)."""
    block = README.read_text().split("```python", 1)[1].split("```", 1)[0]
    (line,) = [ln for ln in block.splitlines() if ".fit(" in ln]
    return line.split("#", 1)[0].strip()


# ---- item 3: the vocabulary goes into the checkpoint -----------------------------------------------
def test_readme_call_stores_the_vocabulary(tmp_path, monkeypatch, corpus):
    call = readme_fit_call()
    assert 'checkpoint="runs/lstm.npz"' in call
    monkeypatch.chdir(tmp_path)
    trainer = small_trainer(corpus.vocab_size)
    scope = {"trainer": trainer, "corpus": corpus, "msr": msr}
    exec(call, scope)  # the README's line as it stands, on the shrunk corpus and model
    history = scope["history"]
    assert len(history) == 2 and history[-1]["valid_bpc"] is not None  # validated on corpus.valid
    ck = checkpoint.load(tmp_path / "runs" / "lstm.npz")
    assert ck.vocab == corpus.vocab and ck.vocab.itos == corpus.vocab.itos
    # scored with the stored vocabulary, the checkpoint's model gives the trained model's figures
    test_ids = ck.vocab.encode(corpus.vocab.decode(corpus.test))
    assert msr.evaluate(ck.model, test_ids)["loss"] == pytest.approx(msr.evaluate(trainer.model, corpus.test)["loss"])


def test_fit_corpus_is_fit_of_its_splits(tmp_path, corpus):
    a, b = small_trainer(corpus.vocab_size), small_trainer(corpus.vocab_size)
    ha = a.fit(corpus, epochs=1, checkpoint=tmp_path / "a.npz")
    hb = b.fit(corpus.train, valid=corpus.valid, epochs=1, checkpoint=tmp_path / "b.npz", vocab=corpus.vocab)
    assert ha[0]["train_loss"] == hb[0]["train_loss"] and ha[0]["valid_loss"] == hb[0]["valid_loss"]
    assert checkpoint.load(tmp_path / "a.npz").vocab == checkpoint.load(tmp_path / "b.npz").vocab == corpus.vocab
    # an explicit valid replaces the corpus's; the corpus's own vocabulary may be given again
    c = small_trainer(corpus.vocab_size)
    hc = c.fit(corpus, valid=corpus.test, epochs=1, vocab=corpus.vocab)
    assert hc[0]["valid_loss"] == pytest.approx(msr.evaluate(c.model, corpus.test, batch_size=4, bptt=20)["loss"])


def test_resuming_keeps_the_stored_vocabulary(tmp_path, corpus):
    path = tmp_path / "r.npz"
    small_trainer(corpus.vocab_size).fit(corpus, epochs=1, max_chunks=3, checkpoint=path)
    small_trainer(corpus.vocab_size).fit(corpus.train, epochs=1, checkpoint=path, resume=True)  # no vocab given
    assert checkpoint.load(path).vocab == corpus.vocab
    other = data.Vocab(corpus.vocab.itos[::-1], unit="char", unk=corpus.vocab.unk)  # same size, other ids
    assert other.size == corpus.vocab.size and other != corpus.vocab
    with pytest.raises(ValueError, match=r"r\.npz was trained with another vocabulary"):
        small_trainer(corpus.vocab_size).fit(corpus.train, epochs=2, checkpoint=path, resume=True, vocab=other)


def test_a_vocabulary_of_another_size_is_refused(corpus):
    big = data.load("embedded")
    assert big.vocab_size != corpus.vocab_size
    trainer = small_trainer(corpus.vocab_size)
    with pytest.raises(
        ValueError,
        match=rf"vocab has {big.vocab_size} symbols but the model has "
        rf"vocab_size={corpus.vocab_size}",
    ):
        trainer.fit(corpus.train, vocab=big.vocab)
    with pytest.raises(
        ValueError,
        match=rf"the corpus 'embedded' has {big.vocab_size} symbols .* the model has "
        rf"vocab_size={corpus.vocab_size}",
    ):
        trainer.fit(big)
    with pytest.raises(ValueError, match="vocab has"):
        trainer.fit(corpus, vocab=big.vocab)
    with pytest.raises(TypeError, match="vocab must be a multiscale_rnn.data.Vocab"):
        trainer.fit(corpus.train, vocab="abc")
    assert trainer.step == 0  # refused before any training


def test_best_of_takes_a_corpus(tmp_path, corpus):
    model, rows = msr.best_of(
        lambda s: msr.LSTM(corpus.vocab_size, 8, (16,), seed=s),
        corpus,
        restarts=2,
        epochs=1,
        batch_size=4,
        bptt=20,
        progress=False,
        checkpoint=tmp_path / "best.npz",
    )
    chosen = [r for r in rows if r["chosen"]]
    assert len(chosen) == 1
    assert chosen[0]["valid_loss"] == pytest.approx(msr.evaluate(model, corpus.valid)["loss"])
    assert checkpoint.load(tmp_path / "best.npz").vocab == corpus.vocab


# ---- item 4: text where ids belong -----------------------------------------------------------------
def test_text_instead_of_ids_says_how_to_encode_it(corpus):
    trainer = small_trainer(corpus.vocab_size)
    with pytest.raises(TypeError) as e:
        trainer.fit("some text")
    msg = str(e.value)
    assert "train ids must be token ids (a 1-D integer array), got a str of 9 characters" in msg
    assert "vocab.encode(text)" in msg and "msr.data.char_corpus(text)" in msg and "trainer.fit(corpus)" in msg
    with pytest.raises(TypeError, match="valid ids must be token ids .* got a str"):
        trainer.fit(corpus.train, valid="some text")
    with pytest.raises(TypeError, match=r"got strings \(dtype <U1\)"):
        trainer.fit(list("some text"))
    with pytest.raises(TypeError, match=r"evaluation ids must be token ids .* msr.evaluate\(model, corpus.test\)"):
        msr.evaluate(trainer.model, "some text")
    with pytest.raises(TypeError, match="evaluate takes token ids, got the corpus"):
        msr.evaluate(trainer.model, corpus)
    with pytest.raises(TypeError, match="valid must be token ids .* got a Corpus"):
        trainer.fit(corpus.train, valid=corpus)
    with pytest.raises(TypeError, match="got a bytes of 3 bytes"):
        data.batchify(b"abc", 1)
    with pytest.raises(TypeError, match="train split must be token ids"):
        data.Corpus("some text", None, None, corpus.vocab)
    # the advice works: both encodings named in the message train
    text = data.embedded_text()[:3_000]
    own = data.char_corpus(text)
    small_trainer(own.vocab_size).fit(own, epochs=1, max_chunks=2)
    small_trainer(corpus.vocab_size).fit(corpus.vocab.encode(corpus.vocab.decode(corpus.train)), epochs=1, max_chunks=2)


# ---- item 4: progress in notebooks -----------------------------------------------------------------
def test_notebook_progress_is_a_bar_without_the_ipywidgets_warning(monkeypatch, capsys, corpus):
    import tqdm.std

    with monkeypatch.context() as m:
        m.setattr(_progress, "in_notebook", lambda: True)
        m.setitem(sys.modules, "ipywidgets", None)  # not installed: importing it raises ImportError
        for name in ("tqdm.auto", "tqdm.autonotebook"):  # importing these in a notebook is what warns
            m.setitem(sys.modules, name, None)
        assert _progress.bar_class() is tqdm.std.tqdm
        trainer = small_trainer(corpus.vocab_size)
        trainer.progress = True  # the default; standard error is not a terminal here, as in a notebook
        trainer.fit(corpus, epochs=1)
        out, err = capsys.readouterr()
    assert re.search(r"epoch 1/1: +\d+%\|", err) and "chunk/s" in err  # tqdm's bar
    assert "epoch 1: train bpc" in out and "IProgress" not in err
    t = small_trainer(corpus.vocab_size)  # outside a notebook and a terminal (a log file): plain lines, as before
    t.progress = True
    t.fit(corpus, epochs=1)
    err = capsys.readouterr().err
    assert re.search(r"epoch 1/1 chunk \d+/\d+: loss", err) and "%|" not in err


# ---- item 4: damaged checkpoints -------------------------------------------------------------------
def _header(shape, descr):
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


@pytest.fixture
def saved(tmp_path, corpus):
    """A checkpoint stopped within an epoch: it carries the TBPTT state (trainer/carried/*)."""
    path = tmp_path / "run.npz"
    small_trainer(corpus.vocab_size).fit(corpus.train, epochs=1, max_chunks=3, checkpoint=path, vocab=corpus.vocab)
    with zipfile.ZipFile(path) as z:
        members = {i.filename: z.read(i) for i in z.infolist()}
    assert "trainer/carried/h_l0.npy" in members
    return path, members


def _with(members, path, name, blob):
    out = path.with_name("copy of run.npz")  # the file the user names
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for k, b in {**members, name: blob}.items():
            z.writestr(k, b)
    return out


@pytest.mark.parametrize(
    "shape, descr, data_bytes",
    [
        ((1 << 40,), "<f4", 64),  # 2^40 floats (4 TiB) declared, 64 bytes present
        ((1 << 40, 0), "<f4", 0),  # 2^40 rows of nothing: no bytes, and not the state's shape
        ((-1, -4), "<f4", 16),  # negative sizes whose product matches the bytes
        ((1 << 40,), "|V0", 0),  # elements of no size: the byte count says nothing
        ((1 << 40,), "<U0", 0),
    ],
)
def test_damaged_member_is_refused_naming_file_and_member(saved, shape, descr, data_bytes, corpus):
    path, members = saved
    for name in sorted(members):
        bad = _with(members, path, name, _header(shape, descr) + b"\0" * data_bytes)
        with pytest.raises(CheckpointError) as e:
            checkpoint.load(bad)
        assert str(bad) in str(e.value) and f"member {name}" in str(e.value), (name, str(e.value))
        if name.startswith("trainer/"):  # and resuming from it, the same
            with pytest.raises(CheckpointError, match=re.escape(f"member {name}")):
                small_trainer(corpus.vocab_size).fit(corpus.train, epochs=1, checkpoint=bad, resume=True)


def test_carried_state_of_another_shape_is_refused(saved):
    path, members = saved
    buf = io.BytesIO()
    np.save(buf, np.zeros((3, 16), np.float32))  # 3 streams saved with batch_size 4
    with pytest.raises(
        CheckpointError,
        match=r"member trainer/carried/h_l0\.npy\): the carried state 'h_l0' has "
        r"shape \(3, 16\), expected \(4, 16\)",
    ):
        checkpoint.load(_with(members, path, "trainer/carried/h_l0.npy", buf.getvalue()))


def test_history_file_errors_name_the_path(tmp_path):
    p = tmp_path / "run.history.json"
    for blob, words in ((b"\xff\xfe[", "not UTF-8"), (b"[{", "unreadable JSON"), (b'{"epoch": 1}', "a list")):
        p.write_bytes(blob)
        with pytest.raises(ValueError, match=re.escape(str(p)) + ".*" + words):
            msr.History.load(p)
    p.write_text(json.dumps([{"epoch": 1}]))
    assert msr.History.load(p) == [{"epoch": 1}]


# ---- item 4: empty and whitespace-only text --------------------------------------------------------
def test_whitespace_only_text_is_refused_naming_file_and_split(tmp_path):
    blank = tmp_path / "blank.txt"
    blank.write_text(" \n\t \n" * 50)
    for kw in ({}, {"unit": "word"}, {"level": "byte"}):
        with pytest.raises(ValueError, match=re.escape(f"{blank} holds only whitespace (250 ")):
            data.load(path=blank, **kw)
    tail = tmp_path / "tail.txt"
    tail.write_text("hello world " * 90 + " " * 200)  # the last 10 % is blank: valid and test splits
    with pytest.raises(
        ValueError, match=re.escape(f"{tail}: its valid split (characters 1,152 to 1,216) holds only whitespace")
    ):
        data.load(path=tail)
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "train.txt").write_text("hello world\n" * 40)
    (folder / "test.txt").write_text("\n \n")
    with pytest.raises(ValueError, match=re.escape(f"{folder / 'test.txt'} (test split) holds only whitespace")):
        data.load(path=folder)
    with pytest.raises(ValueError, match=re.escape(f"text8: {blank} holds only whitespace")):
        data.load("text8", path=blank)
    with pytest.raises(ValueError, match="text valid text holds only whitespace"):
        data.char_corpus("abc", " \n ")
    with pytest.raises(ValueError, match="bits train text holds only whitespace"):
        data.bit_corpus("   ")
    with pytest.raises(ValueError, match="words valid text holds only whitespace"):
        data.word_corpus("a b\n", "\n \n")  # line ends alone used to make a split of "<eos>" tokens


# ---- item 4: the HM-LSTM's gated head --------------------------------------------------------------
def test_gated_head_of_size_zero_is_refused_at_construction():
    with pytest.raises(
        ValueError,
        match=re.escape("HMLSTM: head_size must be >= 1 with head='gated'")
        + r".* got 0; leave it out for the top layer's size \(24\)",
    ):
        msr.HMLSTM(10, 8, (16, 24), head="gated", head_size=0)
    assert msr.HMLSTM(10, 8, (16, 24), head="gated").config["head_size"] == 24
    assert msr.HMLSTM(10, 8, (16, 24), head="gated", head_size=5).config["head_size"] == 5


# ---- item 4: messages name the path the user gave --------------------------------------------------
def test_named_corpus_errors_name_the_users_path(tmp_path):
    folder = tmp_path / "my ptb"
    folder.mkdir()
    for s in ("train", "valid", "test"):
        (folder / f"ptb.char.{s}.txt").write_bytes(b"a b _ c\n" * 10 + (b"\xff" if s == "valid" else b""))
    with pytest.raises(
        ValueError,
        match=re.escape(f"{folder / 'ptb.char.valid.txt'} (valid split) is not valid UTF-8: byte offset 80")
        + ".*damaged or is not this corpus",
    ):
        data.load("ptb-char", path=folder)
    archive = tmp_path / "copied.tgz"
    with tarfile.open(archive, "w:gz") as t:
        for s in ("train", "valid", "test"):
            t.add(folder / f"ptb.char.{s}.txt", arcname=f"simple-examples/data/ptb.char.{s}.txt")
    with pytest.raises(
        ValueError,
        match=re.escape(f"{archive}: simple-examples/data/ptb.char.valid.txt (valid split) is not valid UTF-8"),
    ):
        data.load("ptb-char", path=archive)
    copy = tmp_path / "my_text8_copy.txt"  # text8 under another name
    copy.write_bytes(b"abc def " * 100 + b"\xfe")
    with pytest.raises(ValueError, match=re.escape(f"{copy} is not valid UTF-8: byte offset 800")):
        data.load("text8", path=copy)
    utf16 = tmp_path / "notes.txt"  # saved as UTF-16 by an editor: named as such, with how to convert it
    utf16.write_bytes("hello world\n".encode("utf-16"))
    with pytest.raises(ValueError, match=re.escape(f"{utf16} is not valid UTF-8: byte offset 0 (bytes ff fe")) as e:
        data.load(str(utf16))
    hint = "UTF-16 byte-order mark: convert it to UTF-8 (iconv -f UTF-16 -t UTF-8), or pass level='byte'"
    assert hint in str(e.value)
    bom = tmp_path / "bom.txt"  # UTF-8 with the byte-order mark some editors write: the mark is not a symbol
    bom.write_bytes(b"\xef\xbb\xbf" + b"hello world, a text. " * 40)
    plain = tmp_path / "plain.txt"
    plain.write_bytes(b"hello world, a text. " * 40)
    with_bom, without = data.load(str(bom)), data.load(str(plain))
    assert with_bom.vocab.itos == without.vocab.itos and "\ufeff" not in with_bom.vocab.itos
    assert all(np.array_equal(getattr(with_bom, s), getattr(without, s)) for s in ("train", "valid", "test"))
    bom.write_bytes(b"\xef\xbb\xbf" + b"abc" * 30 + b"\xfe")  # offsets stay those of the file
    with pytest.raises(ValueError, match=re.escape(f"{bom} is not valid UTF-8: byte offset 93 (bytes fe)")):
        data.load(str(bom))
    zipped = tmp_path / "t8.zip"
    with zipfile.ZipFile(zipped, "w") as z:
        z.writestr("text8", copy.read_bytes())
    with pytest.raises(ValueError, match=re.escape(f"{zipped}: text8 is not valid UTF-8")):
        data.load("text8", path=zipped)
    abc = tmp_path / "tunes"
    abc.mkdir()
    (abc / "jigs.abc").write_text('X:1\nT:Broken\nK:G\nGAB "unclosed\n')
    with pytest.raises(ValueError, match=re.escape(f"{abc / 'jigs.abc'} X:1")):
        data.load("nottingham", path=abc)


@pytest.mark.parametrize("cls", [msr.LSTM, msr.GRU, msr.StackedLSTM])
def test_gated_head_without_head_size_is_refused_by_every_family(cls):
    with pytest.raises(ValueError, match=rf"{cls.__name__}: head='gated' needs head_size >= 1 .*got None"):
        cls(10, 4, (4, 4), head="gated")
