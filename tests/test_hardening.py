"""Bad input refused clearly (issue 12): damaged checkpoints, stray temporary files, output paths
checked before the work, argument checks, text that is not UTF-8, your own text as a corpus,
settings provenance, per-update schedules and plain progress lines."""

import errno
import io
import json
import os
import signal
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn import checkpoint, data
from multiscale_rnn.checkpoint import CheckpointError
from multiscale_rnn.cli import main, resolve_settings

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = [
    "--model",
    "lstm",
    "--embed-size",
    "8",
    "--hidden-sizes",
    "16",
    "--batch-size",
    "4",
    "--bptt",
    "20",
    "--threads",
    "1",
    "--no-progress",
    "--epochs",
    "1",
    "--max-chunks",
    "3",
]


@pytest.fixture(scope="module")
def corpus():
    text = data.embedded_text()[:6_000]
    return data.char_corpus(text[:5_000], text[5_000:5_500], text[5_500:])


@pytest.fixture
def saved(tmp_path, corpus):
    """A checkpoint of a short run (Adam state, trainer state, vocabulary, history)."""
    model = msr.LSTM(corpus.vocab_size, 8, 16, seed=1)
    trainer = msr.Trainer(model, msr.optim.Adam(lr=1e-2), batch_size=4, bptt=20, progress=False)
    path = tmp_path / "ck.npz"
    trainer.fit(corpus.train, valid=corpus.valid, epochs=1, max_chunks=3, checkpoint=path, vocab=corpus.vocab)
    return path


def _members(path):
    with zipfile.ZipFile(path) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


def _rewrite(path, members, out=None):
    out = out or path
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for name, blob in members.items():
            z.writestr(name, blob)
    return out


def _npy(array):
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def assert_refused(path, match=None, **kw):
    """Asserts that loading ``path`` raises a CheckpointError naming the path (and ``match``), without pickle."""
    with pytest.raises(CheckpointError) as e:
        checkpoint.load(path, **kw)
    msg = str(e.value)
    assert str(path) in msg
    assert "allow_pickle" not in msg
    if match:
        assert match in msg, msg
    return msg


# ---- 1. checkpoints -------------------------------------------------------------------------------
def test_edited_npy_header_is_refused_before_use(saved):
    m = _members(saved)
    blob = m["params.npy"]
    n = checkpoint.load(saved).model.flat_parameters().size
    edited = blob.replace(f"({n},)".encode(), f"({n - 1},)".encode(), 1)
    assert edited != blob
    m["params.npy"] = edited
    assert_refused(_rewrite(saved, m), "declares shape")
    # a consistent but wrong-sized array (header and data agree) is refused for its shape
    m["params.npy"] = _npy(np.zeros(n - 1, np.float32))
    assert_refused(_rewrite(saved, m), "expected")
    m["params.npy"] = _npy(np.zeros(n, np.float64))
    assert_refused(_rewrite(saved, m), "dtype")


def test_huge_declared_member_is_not_allocated(saved):
    m = _members(saved)
    header = {"descr": "<f4", "fortran_order": False, "shape": (1 << 40,)}  # 4 TiB
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, header)
    m["params.npy"] = buf.getvalue() + b"\0" * 64
    m["unknown_member.npy"] = buf.getvalue()  # not named by the format: never read
    assert_refused(_rewrite(saved, m), "parameter array declares shape (1099511627776,)")


def test_unknown_member_is_ignored(saved):
    m = _members(saved)
    m["junk.npy"] = b"\x93NUMPY garbage"
    ck = checkpoint.load(_rewrite(saved, m))
    assert ck.model.num_parameters > 0


def test_object_arrays_are_refused_without_pickle(saved):
    m = _members(saved)
    m["rng.npy"] = _npy(np.array([1, 2, 3, 4], dtype=object))
    msg = assert_refused(_rewrite(saved, m), "Python objects")
    assert "pickle" not in msg


@pytest.mark.parametrize(
    "where, value, words",
    [
        ("config", [], "model config"),
        ("config", {"model": "LSTM", "vocab_size": float("inf"), "embed_size": 8, "hidden_sizes": [16]}, "rebuild"),
        (
            "config",
            {"model": "LSTM", "vocab_size": 10, "embed_size": 8, "hidden_sizes": [16], "dropuot": 0.5},
            "dropuot",
        ),
        ("meta", [], "metadata"),
        ("meta.optimizer", [1, 2], "optimiser"),
        ("meta.optimizer.step", 1e400, "step"),
        ("meta.history", {"a": 1}, "history"),
        ("meta.vocab", [1], "vocabulary"),
        ("meta.trainer", "x", "trainer"),
    ],
)
def test_wrong_json_types_are_refused(saved, where, value, words):
    m = _members(saved)
    key, *sub = where.split(".")
    if not sub:
        doc = value
    else:
        doc = json.loads(str(np.load(io.BytesIO(m[f"{key}.npy"]))))
        target = doc
        for s in sub[:-1]:
            target = target[s]
        target[sub[-1]] = value
    m[f"{key}.npy"] = _npy(np.array(json.dumps(doc)))
    assert_refused(_rewrite(saved, m), words)


@pytest.mark.parametrize("edit", ["drop_epoch", "inf_step", "list_carried", "str_tokens"])
def test_bad_trainer_state_is_refused_on_resume(saved, corpus, edit):
    m = _members(saved)
    meta = json.loads(str(np.load(io.BytesIO(m["meta.npy"]))))
    t = meta["trainer"]
    if edit == "drop_epoch":
        del t["epoch"]
    elif edit == "inf_step":
        t["step"] = float("inf")
    elif edit == "list_carried":
        t["carried"] = [1, 2]
    else:
        t["tokens"] = "many"
    m["meta.npy"] = _npy(np.array(json.dumps(meta)))
    _rewrite(saved, m)
    model = msr.LSTM(corpus.vocab_size, 8, 16, seed=1)
    trainer = msr.Trainer(model, msr.optim.Adam(lr=1e-2), batch_size=4, bptt=20, progress=False)
    with pytest.raises(CheckpointError, match="ck.npz") as e:
        trainer.fit(corpus.train, epochs=1, checkpoint=saved, resume=True, max_chunks=1)
    assert {"drop_epoch": "epoch", "inf_step": "step", "list_carried": "carried", "str_tokens": "tokens"}[edit] in str(
        e.value
    )


def test_non_finite_optimiser_moments_are_refused(saved):
    m = _members(saved)
    names = [k for k in m if k.startswith("optimizer/arrays/")]
    assert names
    v = np.load(io.BytesIO(m[names[0]]))
    v[3] = np.nan
    m[names[0]] = _npy(v)
    assert_refused(_rewrite(saved, m), "NaN")


def test_truncated_and_garbage_files(saved, tmp_path):
    blob = saved.read_bytes()
    for i, cut in enumerate((10, len(blob) // 2, len(blob) - 7)):
        p = tmp_path / f"cut{i}.npz"
        p.write_bytes(blob[:cut])
        assert_refused(p)
    p = tmp_path / "noise.npz"
    p.write_bytes(np.random.default_rng(0).bytes(5000))
    assert_refused(p)


# ---- 2. no stray temporary files ------------------------------------------------------------------
def test_next_save_removes_leftovers(saved):
    leftovers = [saved.parent / f".{saved.name}.abc{i}.tmp" for i in range(3)]
    for p in leftovers:
        p.write_bytes(b"x" * 100)
    other = saved.parent / ".other.npz.abc.tmp"  # another file's temporary: not ours to remove
    other.write_bytes(b"y")
    ck = checkpoint.load(saved)
    checkpoint.save(saved, ck.model)
    assert not any(p.exists() for p in leftovers) and other.exists()


_SAVER = r"""
import sys, numpy as np, multiscale_rnn as msr
from multiscale_rnn import checkpoint
m = msr.LSTM(30, 16, 256, seed=0)
print("ready", flush=True)
while True:
    checkpoint.save(sys.argv[1], m)
"""


def test_kill_while_saving_leaves_at_most_one_temporary(tmp_path):
    path = tmp_path / "k.npz"
    rng = np.random.default_rng(4)
    for _ in range(4):
        proc = subprocess.Popen([sys.executable, "-c", _SAVER, str(path)], stdout=subprocess.PIPE)
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(float(rng.uniform(0.05, 0.4)))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        temps = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        assert len(temps) <= 1, temps
        if path.exists():
            assert checkpoint.load(path).model.num_parameters > 0


# ---- 3. fail before the work ----------------------------------------------------------------------
def _cli(args, capsys):
    code = main(args)
    err = capsys.readouterr().err
    return code, err


def test_out_is_a_folder_fails_before_training(tmp_path, capsys):
    code, err = _cli(["train", *TINY, "--out", str(tmp_path)], capsys)
    assert code == 1 and err.count("error:") == 1 and str(tmp_path) in err and "Traceback" not in err


def test_out_under_a_file_fails_before_training(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    code, err = _cli(["train", *TINY, "--out", str(f / "m.npz")], capsys)
    assert code == 1 and "error:" in err and "afile" in err


@pytest.mark.parametrize("code_", [errno.ENOSPC, errno.EFBIG, errno.EACCES])
def test_disk_errors_name_the_path_and_keep_the_previous_checkpoint(tmp_path, capsys, monkeypatch, code_):
    out = tmp_path / "m.npz"
    assert main(["train", *TINY, "--out", str(out)]) == 0
    before = out.read_bytes()
    capsys.readouterr()

    def full(*a, **k):
        raise OSError(code_, os.strerror(code_))

    monkeypatch.setattr(np, "savez", full)
    code, err = _cli(["train", *TINY, "--epochs", "2", "--out", str(out), "--resume"], capsys)
    assert code == 1 and err.count("error:") == 1 and str(out) in err and os.strerror(code_) in err
    assert out.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_checkpoint_folder_without_room_is_refused_before_training(tmp_path, capsys, monkeypatch, corpus):
    import shutil

    from multiscale_rnn import storage

    real = shutil.disk_usage
    monkeypatch.setattr(storage.shutil, "disk_usage", lambda p: real(p)._replace(free=3_000))  # 3 kB free
    model = msr.LSTM(corpus.vocab_size, 8, 16, seed=1)  # float32 parameters: 4 bytes each
    room = rf"it needs more than {model.num_parameters * 4 / 1024:.1f} KiB \(its {model.num_parameters:,} float32"
    trainer = msr.Trainer(model, batch_size=4, bptt=20, progress=False)
    with pytest.raises(OSError, match=room + r" parameters alone\) and its folder has 2.9 KiB free"):
        trainer.fit(corpus.train, epochs=1, checkpoint=tmp_path / "m.npz")
    assert trainer.step == 0 and list(tmp_path.iterdir()) == []
    with pytest.raises(OSError, match=room):
        msr.best_of(lambda s: msr.LSTM(corpus.vocab_size, 8, 16, seed=s), corpus, restarts=2, epochs=1,
                    checkpoint=tmp_path / "b.npz", batch_size=4, bptt=20, progress=False)  # fmt: skip
    assert list(tmp_path.iterdir()) == []
    code, err = _cli(["train", *TINY, "--out", str(tmp_path / "c.npz")], capsys)
    assert code == 1 and err.count("error:") == 1 and "no room for the checkpoint file" in err and "c.npz" in err


def test_config_folder_or_binary_is_refused(tmp_path, capsys):
    code, err = _cli(["train", "--config", str(tmp_path)], capsys)
    assert code == 1 and "folder" in err and str(tmp_path) in err
    b = tmp_path / "x.toml"
    b.write_bytes(b"\x00\xff\xfe binary \x80")
    code, err = _cli(["train", "--config", str(b)], capsys)
    assert code == 1 and "error:" in err and str(b) in err and "Traceback" not in err


def test_trainer_checks_the_checkpoint_path_first(tmp_path, corpus):
    model = msr.LSTM(corpus.vocab_size, 8, 16)
    trainer = msr.Trainer(model, batch_size=4, bptt=20, progress=False)
    with pytest.raises(IsADirectoryError, match=str(tmp_path)):
        trainer.fit(corpus.train, epochs=1, checkpoint=tmp_path)
    assert trainer.step == 0


# ---- 4. arguments ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, words",
    [
        (["--batch-size", "0"], "batch-size must be a positive integer, got 0"),
        (["--bptt", "0"], "bptt must be a positive integer, got 0"),
        (["--seed", "-1"], "seed must be a non-negative integer, got -1"),
        (["--threads", "100000"], "threads must be between 1 and"),
        (["--option", "dropuot=0.5"], "dropuot"),
        (["--dropout", "1.5"], "dropout"),
    ],
)
def test_cli_argument_checks(tmp_path, capsys, args, words):
    code, err = _cli(["train", *TINY, *args, "--out", str(tmp_path / "m.npz")], capsys)
    assert code == 1 and words in err, err
    assert not (tmp_path / "m.npz").exists()


def test_config_values_are_not_converted_silently(tmp_path):
    with pytest.raises(ValueError, match="batch-size must be a positive integer, got 4.5"):
        resolve_settings(config={"batch_size": 4.5})
    with pytest.raises(ValueError, match="hidden-sizes"):
        resolve_settings(config={"hidden_sizes": [16, 0]})
    with pytest.raises(ValueError, match="lr must be"):
        resolve_settings(config={"lr": float("nan")})


def test_thread_count_limits():
    with pytest.raises(ValueError, match="threads must be between 1 and"):
        msr.set_num_threads(10**6)
    with pytest.raises(ValueError):
        msr.set_num_threads(0)
    with pytest.raises(TypeError):
        msr.set_num_threads(2.5)
    msr.set_num_threads(msr.max_threads())
    assert msr.get_num_threads() == msr.max_threads()
    msr.set_num_threads(1)


@pytest.mark.parametrize("family", ["LSTM", "GRU", "ElmanRNN"])
def test_sizes_are_checked_before_allocating(family):
    cls = getattr(msr, family)
    with pytest.raises(ValueError, match=r"hidden_sizes\[0\] = 4,611,686,018,427,387,904 is too large"):
        cls(10, 8, [2**62])
    with pytest.raises(ValueError, match="vocab_size .* is too large"):
        cls(2**40, 8, [8])
    with pytest.raises(MemoryError, match=r"need at least .* GiB .* more than this machine"):
        cls(10, 8, [200_000])
    with pytest.raises(TypeError, match="dropuot"):
        cls(10, 8, [8], dropuot=0.5)


def test_trainer_seed_is_checked():
    with pytest.raises(ValueError, match="seed must be a non-negative integer, got -1"):
        msr.Trainer(msr.LSTM(10, 4, 8), seed=-1)


# ---- 5 and 9. text --------------------------------------------------------------------------------
def test_invalid_utf8_names_file_and_offset(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"hello world " * 50 + b"\xff\xfe" + b" more text" * 20)
    with pytest.raises(ValueError, match=r"bad\.txt.*byte offset 600") as e:
        data.load(path=p)
    assert "level='byte'" in str(e.value)
    c = data.load(path=p, level="byte")
    assert c.level == "byte" and c.name == "bad"
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "train.txt").write_text("abc def\n" * 50)
    (folder / "valid.txt").write_bytes(b"ab\xc3(")
    with pytest.raises(ValueError, match=r"valid\.txt \(valid split\).*byte offset 2"):
        data.load(path=folder)


def test_whitespace_only_word_text_is_refused(tmp_path):
    p = tmp_path / "blank.txt"
    p.write_text("  \t   " * 10)
    with pytest.raises(ValueError, match="only whitespace"):
        data.load(path=p, unit="word")


def test_own_text_in_python(tmp_path):
    p = tmp_path / "my.txt"
    text = "the quick brown fox jumps over the lazy dog\n" * 100
    p.write_text(text)
    c = data.load(path=p)
    assert c.name == "my" and (len(c.train), len(c.valid), len(c.test)) == (len(text) - 2 * 220, 220, 220)
    assert data.load(str(p)).name == "my"  # a path as the name
    w = data.load(path=p, unit="word", valid_fraction=0.1, test_fraction=0)
    assert w.unit == "word" and w.test is None
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "train.txt").write_text(text)
    (folder / "test.txt").write_text("the dog\n")
    f = data.load(path=folder)
    assert f.name == "mine" and f.valid is None and len(f.test) == 8
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="train.txt"):
        data.load(path=tmp_path / "empty")
    with pytest.raises(TypeError, match="corpus name or path"):
        data.load()


@pytest.mark.parametrize("how", [["--data", "{p}"], ["--data-path", "{p}"]])
def test_own_text_on_the_command_line(tmp_path, capsys, how):
    p = tmp_path / "my.txt"
    p.write_text("the quick brown fox jumps over the lazy dog\n" * 200)
    out = tmp_path / "m.npz"
    args = [a.format(p=p) for a in how]
    assert main(["train", *TINY, *args, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert " on my (" in text and "shakespeare" not in text and "embedded" not in text
    assert "preset quick (the default; --preset to choose)" in text and "flags: " in text
    settings = checkpoint.load(out).extra["settings"]
    assert settings["data"] == "text" and settings["data_path"] == str(p)


def test_settings_provenance(tmp_path, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text('preset = "synthetic"\nlr = 0.01\n[data_options]\nn_chars = 4000\n')
    assert main(["train", "--config", str(cfg), *TINY, "--out", str(tmp_path / "m.npz")]) == 0
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("settings from")][0]
    assert line.startswith("settings from preset synthetic:") and "(the default" not in line
    assert f"{cfg}: lr, data_options" in line and "flags: model, embed_size" in line


# ---- 9. schedules per update, plain progress lines ------------------------------------------------
def test_per_update_schedules(corpus):
    from multiscale_rnn.schedules import MultiStep, linear

    model = msr.LSTM(corpus.vocab_size, 8, 16)
    seen = []
    trainer = msr.Trainer(
        model,
        msr.optim.Adam(lr=1e-2),
        batch_size=4,
        bptt=20,
        progress=False,
        lr_schedule=MultiStep([2, 4], factor=10, every="step"),
        model_options={"x": linear(0.0, 1.0, per_step=0.25)},
    )
    trainer._set_option = lambda name, value: seen.append(value)
    lrs = []
    trainer.fit(corpus.train, epochs=1, max_chunks=5, log=lambda e: lrs.append(e["lr"]) if e["event"] == "chunk" else 0)
    assert np.allclose(lrs, [1e-2, 1e-3, 1e-3, 1e-4, 1e-4])
    assert seen == [0.0, 0.25, 0.5, 0.75, 1.0]
    with pytest.raises(ValueError, match="exactly one"):
        linear(0, 1)


def test_cli_anneal_per_step(tmp_path):
    s = resolve_settings(
        flags={"anneal": {"slope": [1.0, 5.0, 0.01, "step"]}, "lr_schedule": "halve", "lr_every": "step"}
    )
    from multiscale_rnn.command_line.build import anneal_schedule, build_lr_schedule

    assert anneal_schedule(s["anneal"]["slope"])(0, 100) == 2.0
    assert build_lr_schedule(s).every == "step"
    with pytest.raises(ValueError, match="lr-every"):
        resolve_settings(flags={"lr_every": "minute"})


def test_cli_newbob_schedule():
    from multiscale_rnn.command_line.build import build_lr_schedule
    from multiscale_rnn.schedules import NewBob

    sched = build_lr_schedule(resolve_settings(flags={"lr_schedule": "newbob", "lr_factor": 4.0}))
    assert isinstance(sched, NewBob) and (sched.factor, sched.threshold) == (4.0, 0.003)
    with pytest.raises(ValueError, match="choose one of constant, halve, plateau, newbob, multistep"):
        build_lr_schedule(resolve_settings(flags={"lr_schedule": "newbbob"}))


def test_plain_progress_lines_when_not_a_terminal(tmp_path):
    script = (
        "import multiscale_rnn as msr\nfrom multiscale_rnn import data\n"
        "c = data.char_corpus(data.embedded_text()[:4000])\n"
        "t = msr.Trainer(msr.LSTM(c.vocab_size, 8, 16), batch_size=4, bptt=20)\n"
        "t.fit(c.train, epochs=1)\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "\r" not in r.stderr
    lines = r.stderr.splitlines()
    assert any(x.startswith("epoch 1/1 chunk 50/50: loss") for x in lines), lines
    assert any(x.startswith("epoch 1: train bpc") for x in lines), lines


def test_appended_rows_survive_a_kill_and_a_full_disk(tmp_path):
    """``storage.append_lines`` / ``read_json_lines`` (results.jsonl of the reproductions and bench scripts, the
    training CSV): a row a kill left cut short is not read and is cut off at the next append; an append that
    fails for want of room (a file size limit here, in a child process) leaves the rows before intact and names
    the file; a damaged row inside the file is refused naming its line."""
    from multiscale_rnn.storage import append_lines, read_json_lines

    path = tmp_path / "results.jsonl"
    path.write_text('{"x": 1}\n{"y": 2}\n{"z": 3, "po')  # killed while writing the third row
    assert read_json_lines(path) == [{"x": 1}, {"y": 2}]
    append_lines(path, '{"z": 3}\n')
    assert path.read_text() == '{"x": 1}\n{"y": 2}\n{"z": 3}\n'
    before = path.read_bytes()
    child = (
        "import resource, signal, sys\n"
        "from multiscale_rnn.storage import append_lines\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({len(before) + 10}, resource.RLIM_INFINITY))\n"
        "try:\n"
        f"    append_lines({str(path)!r}, '{{\"w\": \"' + 'a' * 100 + '\"}}\\n')\n"
        "except OSError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert str(path) in out.stdout and os.strerror(errno.EFBIG) in out.stdout
    assert path.read_bytes() == before
    path.write_text('{"x": 1}\n{"y": 2}')  # a whole row without its newline (edited by hand) is kept
    append_lines(path, '{"z": 3}\n')
    assert read_json_lines(path) == [{"x": 1}, {"y": 2}, {"z": 3}]
    path.write_text('{"x": 1}\n{"y": \n{"z": 3}\n')
    with pytest.raises(ValueError, match=f"{path}, line 2: not a JSON row"):
        read_json_lines(path)
    with pytest.raises(ValueError, match="must end with a newline"):
        append_lines(path, '{"z": 3}')


def test_a_reproduction_folder_whose_last_row_was_cut_short_still_reports_and_continues(tmp_path):
    """A run killed while appending its finished model's row: the report holds the rows before, and the next row
    is written on a line of its own."""
    key = dict(pooling="plain", order=1, alpha=None, hidden=400, seed=0, train_tokens=929589, max_epochs=20, lr=0.5)
    row = dict(key, valid=150.0, test=140.0, seconds=60.0, epochs=12)
    (tmp_path / "results.jsonl").write_text(json.dumps(row) + "\n" + json.dumps(dict(row, order=3))[:40])
    assert "| plain | 140.0 (150.0) / 123 |" in msr.reproduce.report("hornn-table2", tmp_path)
    msr.reproduce.Results(tmp_path).append(dict(row, pooling="fofe", order=2, test=130.0))
    assert [r["test"] for r in msr.reproduce.Results(tmp_path).rows()] == [140.0, 130.0]
