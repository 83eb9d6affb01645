"""The command line as a new user meets it (issue 25): resuming takes the run's own settings, a new run
never overwrites another model's checkpoint, missing files are called missing, fixes are named by their
flags, one line per error, a closed pipe ends quietly, checkpoints without a vocabulary are refused
unless the data to read them with are given, and prompts with unknown symbols are refused."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn import checkpoint, data
from multiscale_rnn.cli import main, resolve_settings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _mpi as mpi  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

# a small LSTM on 4,000 generated characters: a few seconds per run
RUN = [
    "train",
    "--preset",
    "synthetic",
    "--model",
    "lstm",
    "--embed-size",
    "8",
    "--hidden-sizes",
    "24",
    "--batch-size",
    "4",
    "--bptt",
    "20",
    "--epochs",
    "1",
    "--data-option",
    "n_chars=4000",
    "--threads",
    "1",
    "--no-progress",
]


def _run(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def _error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    return lines[0]


# ---- --resume takes the settings stored in the checkpoint ----------------------------------------------
def test_resume_takes_the_stored_settings_and_refuses_contradictions(tmp_path, capsys):
    out = tmp_path / "r.npz"
    code, text, err = _run(RUN + ["--max-chunks", "3", "--out", str(out)], capsys)
    assert code == 0, err
    # only the checkpoint named: data, model and trainer settings come from it (not from the quick preset)
    code, text, err = _run(["train", "--resume", "--out", str(out), "--threads", "1", "--no-progress"], capsys)
    assert code == 0, err
    assert f"settings from the checkpoint {out} (preset synthetic)" in text and " on synthetic (" in text
    assert "done after 1 epoch(s)" in text
    ck = checkpoint.load(out)
    assert ck.model.config["hidden_sizes"] == [24] and ck.trainer_state["epoch"] == 1
    assert ck.extra["settings"]["data_options"] == {"n_chars": 4000}
    # a finished run says how to train on
    code, text, err = _run(["train", "--resume", "--out", str(out), "--threads", "1", "--no-progress"], capsys)
    assert code == 0, err
    assert (
        f"{out} has already completed 1 epoch(s) and --epochs is 1: nothing to train. To train on, pass a "
        f"larger --epochs (e.g. --resume --epochs 2)" in text
    )
    before = out.read_bytes()
    # a flag that would change the model, the optimiser or the data is refused, naming both values
    for flags, words in (
        (
            ["--hidden-sizes", "32"],
            "whose hidden_sizes is [24]; --hidden-sizes gives [32], which would change the model",
        ),
        (["--lr", "0.5"], "--lr gives 0.5, which is not used: the run goes on with its saved optimiser state"),
        (["--batch-size", "8"], "whose batch_size is 4; --batch-size gives 8"),
        (["--data", "embedded"], "whose data is 'synthetic'; --data gives 'embedded', which is other training data"),
        (["--preset", "quick"], "trained under preset synthetic; --preset quick would change its settings"),
    ):
        code, text, err = _run(
            ["train", "--resume", "--out", str(out), "--threads", "1", "--no-progress", *flags], capsys
        )
        assert code == 1 and words in _error_line(err), err
        assert "another --out" in err
    assert out.read_bytes() == before
    # settings a resume may change: the epochs (and clipping, evaluation, checkpointing)
    code, text, err = _run(
        [
            "train",
            "--resume",
            "--out",
            str(out),
            "--threads",
            "1",
            "--no-progress",
            "--epochs",
            "2",
            "--clip-norm",
            "0.5",
        ],
        capsys,
    )
    assert code == 0, err
    assert "epoch 2: train bpc" in text and "done after 2 epoch(s)" in text
    assert checkpoint.load(out).trainer_state["epoch"] == 2


def test_resume_without_a_checkpoint_names_the_path(tmp_path, capsys):
    code, text, err = _run(["train", "--resume", "--out", str(tmp_path / "none.npz")], capsys)
    assert code == 1 and f"no checkpoint at {tmp_path / 'none.npz'} to continue" in _error_line(err)


def test_resume_repeating_the_first_command_with_your_own_text(tmp_path, capsys):
    """The first run's command with --resume added, --data FILE included, continues the run (the stored data
    path that --data FILE set is not taken as a --data-path beside it)."""
    text = tmp_path / "mine.txt"
    text.write_text("the cat sat on the mat. " * 200)
    run = ["train", "--data", str(text), "--hidden-sizes", "8", "--embed-size", "4", "--batch-size", "4"]
    run += ["--bptt", "16", "--out", str(tmp_path / "m.npz"), "--threads", "1", "--no-progress"]
    code, out, err = _run([*run, "--epochs", "1"], capsys)
    assert code == 0, err
    code, out, err = _run([*run, "--epochs", "2", "--resume"], capsys)
    assert code == 0, err
    assert "done after 2 epoch(s)" in out
    code, out, err = _run([*run, "--epochs", "3", "--resume", "--data", "embedded"], capsys)
    assert code == 1 and "whose data is 'text'; --data gives 'embedded'" in _error_line(err)


def test_a_folder_with_train_txt_alone_trains_and_says_there_is_nothing_to_score(tmp_path, capsys):
    folder = tmp_path / "only-train"
    folder.mkdir()
    (folder / "train.txt").write_text("the cat sat on the mat. " * 200)
    run = ["train", "--data-path", str(folder), "--hidden-sizes", "8", "--embed-size", "4", "--batch-size", "4"]
    code, out, err = _run(
        [*run, "--bptt", "16", "--epochs", "1", "--out", str(tmp_path / "t.npz"), "--threads", "1"], capsys
    )
    assert code == 0, err
    last = [line for line in out.splitlines() if line.startswith("done after")]
    assert last == [
        f"done after 1 epoch(s), 75 steps: no valid or test split to score; checkpoint {tmp_path / 't.npz'}"
    ]


# ---- a new run does not overwrite another model's checkpoint --------------------------------------------
def test_a_new_run_refuses_to_overwrite_a_checkpoint_of_another_model_or_data(tmp_path, capsys):
    out = tmp_path / "m.npz"
    assert main(RUN + ["--max-chunks", "2", "--out", str(out)]) == 0
    before = out.read_bytes()
    capsys.readouterr()
    code, text, err = _run(RUN + ["--max-chunks", "2", "--hidden-sizes", "16", "--out", str(out)], capsys)
    line = _error_line(err)
    assert code == 1 and f"--out {out} holds the checkpoint of another model or data" in line
    assert "hidden_sizes [24] there, [16] here" in line and "--overwrite" in line and "another --out" in line
    code, text, err = _run(RUN + ["--max-chunks", "2", "--data-option", "n_chars=5000", "--out", str(out)], capsys)
    assert code == 1 and 'data_options {"n_chars": 4000} there, {"n_chars": 5000} here' in _error_line(err)
    assert out.read_bytes() == before
    # the same model and data: a new run of it replaces it; --overwrite replaces any
    assert main(RUN + ["--max-chunks", "3", "--out", str(out)]) == 0
    assert checkpoint.load(out).trainer_state["step"] == 3
    assert main(RUN + ["--max-chunks", "2", "--hidden-sizes", "16", "--out", str(out), "--overwrite"]) == 0
    assert checkpoint.load(out).model.config["hidden_sizes"] == [16]
    # a file that is not a checkpoint, and a checkpoint from Python (no settings recorded)
    other = tmp_path / "notes.npz"
    other.write_text("my notes")
    capsys.readouterr()
    code, text, err = _run(RUN + ["--max-chunks", "2", "--out", str(other)], capsys)
    assert code == 1 and f"--out {other} exists and is not a checkpoint" in _error_line(err)
    assert other.read_text() == "my notes"
    corpus = data.load("synthetic", n_chars=4000)
    py = tmp_path / "py.npz"
    msr.Trainer(msr.LSTM(corpus.vocab_size, 8, (24,)), batch_size=4, bptt=20, progress=False).fit(
        corpus.train, epochs=1, max_chunks=1, checkpoint=py
    )
    code, text, err = _run(RUN + ["--max-chunks", "2", "--out", str(py)], capsys)
    assert code == 1 and "saved from Python, which records no settings" in _error_line(err)


def test_the_default_checkpoint_is_named_after_the_preset_and_other_data(tmp_path):
    own = tmp_path / "my.txt"
    own.write_text("the cat sat on the mat\n" * 50)
    assert resolve_settings()["out"] == "runs/quick.npz"
    assert resolve_settings(flags={"data": str(own)})["out"] == "runs/quick-my.npz"
    assert resolve_settings(flags={"data_path": str(own)})["out"] == "runs/quick-my.npz"
    assert resolve_settings(flags={"preset": "quick", "data": "synthetic"})["out"] == "runs/quick-synthetic.npz"
    assert resolve_settings(flags={"data": str(own), "out": "x.npz"})["out"] == "x.npz"
    # a preset whose corpus is read from files keeps its name with --data-path
    assert (
        resolve_settings(flags={"preset": "ptb-char-lstm", "data_path": "/corpora/ptb"})["out"]
        == "runs/ptb-char-lstm.npz"
    )


# ---- data: a missing file is missing; a path beside a built-in corpus is refused ------------------------
def test_data_errors_say_what_is_wrong(tmp_path, capsys):
    args = RUN[:1] + ["--max-chunks", "1", "--out", str(tmp_path / "x.npz")]
    mine = tmp_path / "mine.txt"
    mine.write_text("some text of one's own\n" * 50, encoding="utf-8")
    for flags, words in (
        (["--data", str(tmp_path / "my.txt")], f"--data {tmp_path / 'my.txt'}: no such file or folder"),
        (["--data", "embeded"], "--data embeded: no corpus has that name (did you mean embedded?)"),
        (
            ["--data", "embedded", "--data-path", "x.txt"],
            "--data embedded is built into the package and reads no file, so --data-path x.txt would be ignored",
        ),
        (
            ["--data", "synthetic", "--data-option", "colour=3"],
            "--data synthetic takes no --data-option colour; it takes n_chars, seed",
        ),
        (["--data", "embedded", "--data-option", "colour=3"], "--data embedded takes no --data-option colour"),
        (["--data", "nottingham"], "--data nottingham needs --data-path"),
        (
            ["--data", str(mine), "--data-option", "units=word"],
            f"--data {mine} takes no --data-option units (did you mean unit?); it takes unit, level,",
        ),
        (["--data", str(mine), "--data-option", "unit=words"], "--data-option unit must be 'char' or 'word', got"),
        (["--data", str(mine), "--data-option", "test_fraction=1.5"], "--data-option test_fraction must be in [0, 1)"),
    ):
        code, text, err = _run(args + flags, capsys)
        line = _error_line(err)
        assert code == 1 and words in line, line
        assert "unknown corpus" not in line and "path=" not in line and "load(" not in line
    assert not (tmp_path / "x.npz").exists()


# ---- fixes named by the command line's flags, not by Python arguments -----------------------------------
def test_errors_name_the_flags(tmp_path, capsys):
    args = ["train", "--max-chunks", "1", "--no-progress", "--out", str(tmp_path / "x.npz")]
    own = tmp_path / "own.txt"
    own.write_text("the cat sat on the mat, and the dog ate the hat.\n" * 200)
    for flags, words in (
        (
            ["--model", "vcrnn", "--hidden-sizes", "32"],
            "--embed-size must equal the hidden size 32, got 64 (give --embed-size 32)",
        ),
        (["--model", "fsrnn", "--hidden-sizes", "32"], "--hidden-sizes must be FAST,SLOW"),
        (["--option", "colour=3"], "--option colour: LSTM has no such option; its options: head"),
        (["--momentum", "0.9"], "--momentum is read only by --optimizer sgd, and this run's optimizer is adam"),
        (["--select-after", "3"], "--select-after chooses among restarts, and this run trains once: give --restarts"),
        (
            ["--data", str(own), "--data-option", "valid_fraction=0", "--early-stopping", "2"],
            "--early-stopping watches the validation loss, and the corpus has no valid split: give it one (your "
            "own text: --data-option valid_fraction=0.05), or leave --early-stopping out",
        ),
    ):
        code, text, err = _run(args + flags, capsys)
        line = _error_line(err)
        assert code == 1 and words in line, line
        assert "leave embed_size out" not in line and "got unexpected argument" not in line


# ---- one error line for a malformed command line --------------------------------------------------------
@pytest.mark.parametrize(
    "flags, words",
    [
        (
            ["--hidden-sizes", "-32,32"],
            "argument --hidden-sizes: must be positive integers separated by commas (e.g. 512,512), got '-32,32'",
        ),
        (
            ["--hidden-sizes", "0"],
            "argument --hidden-sizes: must be positive integers separated by commas (e.g. 512,512), got '0'",
        ),
        (["--epochs", "two"], "argument --epochs: invalid int value: 'two'"),
    ],
)
def test_a_malformed_flag_gives_one_error_line(capsys, flags, words):
    with pytest.raises(SystemExit) as e:
        main(["train", *flags])
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert err.splitlines() == [f"multiscale-rnn train: error: {words} (see multiscale-rnn train --help)"]


def test_a_negative_value_reaches_its_check(capsys):
    assert main(["train", "--lr", "-1e-3"]) == 1
    assert (
        _error_line(capsys.readouterr().err) == "multiscale-rnn train: error: lr must be a finite number > 0, "
        "got -0.001"
    )


def test_a_closed_pipe_ends_quietly(tmp_path):
    # the reader is gone before the first write, as with "multiscale-rnn presets | head" once head has exited
    p = subprocess.Popen(
        [sys.executable, "-m", "multiscale_rnn", "presets"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    p.stdout.close()
    err = p.stderr.read().decode()
    p.wait(timeout=120)
    assert err == "" and p.returncode == 141


def test_an_unexpected_error_shows_its_traceback_and_one_error_line(tmp_path, capsys, monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("the disk is on fire")

    monkeypatch.setattr(msr.Trainer, "fit", broken)
    code, text, err = _run(RUN + ["--out", str(tmp_path / "x.npz")], capsys)
    assert code == 1
    assert "Traceback (most recent call last)" in err and 'raise RuntimeError("the disk is on fire")' in err
    assert _error_line(err) == "multiscale-rnn train: error: RuntimeError: the disk is on fire"
    assert err.rstrip().endswith("please include it when you report the problem)")


# ---- a checkpoint of another model: the decisive difference first, one short line -----------------------
def test_resuming_a_checkpoint_of_another_model_puts_the_difference_first(tmp_path, capsys):
    corpus = data.load("synthetic", n_chars=4000)
    path = tmp_path / "hm.npz"
    model = msr.HMLSTM(corpus.vocab_size, 8, (16, 16), seed=0)
    msr.Trainer(model, batch_size=4, bptt=20, progress=False).fit(corpus.train, epochs=1, max_chunks=1, checkpoint=path)
    code, text, err = _run(
        [
            "train",
            "--resume",
            "--out",
            str(path),
            "--model",
            "hmlstm",
            "--data",
            "synthetic",
            "--data-option",
            "n_chars=4000",
            "--embed-size",
            "8",
            "--hidden-sizes",
            "16,16,16",
            "--batch-size",
            "4",
            "--bptt",
            "20",
            "--no-progress",
            "--threads",
            "1",
        ],
        capsys,
    )
    first = _error_line(err)
    assert code == 1
    assert (
        first == f"multiscale-rnn train: error: {path} was saved from a different model (hidden_sizes: saved "
        f"[16, 16], model [16, 16, 16])"
    )
    rest = err.splitlines()[err.splitlines().index(first) + 1 :]
    assert len(rest) >= 2 and all(line.startswith("  also ") and len(line) < 120 for line in rest[:-1]), rest
    # the checkpoint was written from Python: the settings --resume used came from the preset and the flags
    assert rest[-1].startswith(f"{path} was written from Python and records no command-line settings, so --resume")
    code, text, err = _run(
        [
            "train",
            "--resume",
            "--out",
            str(path),
            "--model",
            "lstm",
            "--data",
            "synthetic",
            "--data-option",
            "n_chars=4000",
            "--embed-size",
            "8",
            "--hidden-sizes",
            "16",
            "--batch-size",
            "4",
            "--bptt",
            "20",
            "--no-progress",
            "--threads",
            "1",
        ],
        capsys,
    )
    assert _error_line(err).endswith("different model (model: saved 'HMLSTM', model 'LSTM')")
    assert len(err.splitlines()) <= 3, err  # options of one family only are not listed


# ---- evaluate and sample: the vocabulary must be the model's --------------------------------------------
@pytest.fixture
def no_vocab(tmp_path):
    """A checkpoint written by Trainer.fit with token ids and no vocabulary (31 symbols of generated text)."""
    corpus = data.load("synthetic", n_chars=4000)
    path = tmp_path / "novocab.npz"
    model = msr.LSTM(corpus.vocab_size, 8, (16,), seed=0)
    msr.Trainer(model, batch_size=4, bptt=20, progress=False).fit(corpus.train, epochs=1, max_chunks=2, checkpoint=path)
    assert checkpoint.load(path).vocab is None and corpus.vocab_size != data.load("embedded").vocab_size
    return path, corpus


@pytest.mark.parametrize("command", ["evaluate", "sample"])
def test_a_checkpoint_without_vocabulary_needs_the_training_data(no_vocab, capsys, command):
    path, corpus = no_vocab
    code, text, err = _run([command, str(path)], capsys)
    line = _error_line(err)
    assert code == 1 and text == ""
    assert f"{path} holds no vocabulary" in line and "--data" in line and "vocab=corpus.vocab" in line
    code, text, err = _run([command, str(path), "--data", "embedded"], capsys)
    assert code == 1 and text == ""
    assert f"the vocabulary of embedded has 84 symbols and the model in {path} has {corpus.vocab_size}" in _error_line(
        err
    )
    # the corpus it was trained on: read with that vocabulary, and a note says so
    code, text, err = _run(
        [
            command,
            str(path),
            "--data",
            "synthetic",
            "--data-option",
            "n_chars=4000",
            *(["--length", "10", "--prompt", "ab"] if command == "sample" else []),
        ],
        capsys,
    )
    assert code == 0, err
    assert f"note: {path} holds no vocabulary; reading it with the vocabulary of synthetic" in err
    assert text.startswith("synthetic test: loss" if command == "evaluate" else "ab")


def test_evaluate_does_not_guess_the_corpus_of_a_checkpoint_from_python(tmp_path, capsys):
    corpus = data.load("synthetic", n_chars=4000)
    path = tmp_path / "py.npz"
    msr.Trainer(msr.LSTM(corpus.vocab_size, 8, (16,)), batch_size=4, bptt=20, progress=False).fit(
        corpus.train, epochs=1, max_chunks=1, checkpoint=path, vocab=corpus.vocab
    )
    code, text, err = _run(["evaluate", str(path)], capsys)
    assert code == 1 and f"{path} does not record the corpus it was trained on" in _error_line(err)
    assert main(["evaluate", str(path), "--data", "synthetic", "--data-option", "n_chars=4000", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["data"] == "synthetic"
    # another text of the model's symbols (here the corpus's own test text, in a file of one's own) is read
    # with the stored vocabulary, and a note says so
    other = tmp_path / "other.txt"
    other.write_text(corpus.vocab.decode(corpus.test), encoding="utf-8")
    code, text, err = _run(["evaluate", str(path), "--data", str(other)], capsys)
    assert code == 0, err
    assert f"note: reading other with the vocabulary of {path} (31 symbols)" in err
    assert text.startswith("other test: loss")
    # a text with a symbol the vocabulary lacks (and no unknown symbol to read it as) is refused, naming it
    code, text, err = _run(
        [
            "evaluate",
            str(path),
            "--data",
            "synthetic",
            "--data-option",
            "n_chars=4000",
            "--data-option",
            "alphabet=abcdefghijklmnopqrstuvwxyZ",
        ],
        capsys,
    )
    line = _error_line(err)
    assert code == 1 and "synthetic train split: symbol 'Z' (U+005A) at position " in line
    assert "is not in the vocabulary (31 symbols), which has no unknown symbol to read it as" in line
    assert f"the model of {path} cannot read this text" in line


def test_a_class_softmax_checkpoint_without_vocabulary_is_read_in_frequency_order(tmp_path, capsys):
    # The class head's model is trained on ids in descending frequency (Corpus.by_frequency()). Its checkpoint,
    # from Python without a vocabulary, used to be read with the text's sorted ids: a wrong perplexity.
    rng = np.random.default_rng(0)
    words = ["w%d" % i for i in range(30)]
    p = 1.0 / np.arange(1, 31)
    text = "\n".join(" ".join(rng.choice(words, 12, p=p / p.sum())) for _ in range(300)) + "\n"
    own = tmp_path / "words.txt"
    own.write_text(text)
    ranked = data.load(path=own, unit="word").by_frequency()
    assert ranked.vocab.itos != data.load(path=own, unit="word").vocab.itos
    classes = data.class_sizes(ranked.counts())
    model = msr.HORNN(ranked.vocab_size, 8, (8,), order=2, head="class", head_classes=classes, seed=0)
    path = tmp_path / "hornn.npz"
    msr.Trainer(model, batch_size=4, bptt=10, progress=False).fit(ranked.train, epochs=1, checkpoint=path)
    want = msr.evaluate(model, ranked.test, batch_size=4)["loss"]
    code, text, err = _run(
        ["evaluate", str(path), "--data", str(own), "--data-option", "unit=word", "--batch-size", "4", "--json"],
        capsys,
    )
    assert code == 0, err
    assert json.loads(text)["loss"] == pytest.approx(want, rel=1e-6)  # float32, the threads of the run
    assert "in descending training frequency: the order its class sizes come from" in err
    other = msr.HORNN(ranked.vocab_size, 8, (8,), order=2, head="class", head_classes=classes[::-1], seed=0)
    checkpoint.save(tmp_path / "other.npz", other)
    code, text, err = _run(
        ["evaluate", str(tmp_path / "other.npz"), "--data", str(own), "--data-option", "unit=word"], capsys
    )
    assert code == 1 and "class sizes are not those of words in descending training frequency" in _error_line(err)


def test_evaluate_reads_another_text_by_its_symbols_not_by_its_own_training_split(tmp_path, capsys):
    # the model knows '!' and 'q'; the text's training part has neither, so its own vocabulary reads them as
    # its unknown symbol: they must be scored as themselves, the same loss as the text read directly
    vocab = data.Vocab(list("abc !q"), unk=data.vocab.UNK_CHAR)
    model = msr.LSTM(vocab.size, 8, (16,), seed=0)
    path = checkpoint.save(tmp_path / "m.npz", model, vocab=vocab)
    other = tmp_path / "other.txt"
    text = "abc cab " * 60 + "ab!q cq! ba" * 3
    other.write_text(text, encoding="utf-8")
    code, out, err = _run(["evaluate", str(path), "--data", str(other), "--json"], capsys)
    assert code == 0, err
    train_text, _, test_text = data.split_contiguous(text)  # the file's cut (90 % / 5 % / 5 %)
    assert "!" in test_text and "!" not in train_text
    expected = msr.evaluate(model, vocab.encode(test_text, strict=True), batch_size=16, bptt=100)
    assert json.loads(out)["loss"] == pytest.approx(expected["loss"], rel=1e-12)
    # --split all: the whole file, its cut undone
    code, out, err = _run(["evaluate", str(path), "--data", str(other), "--json", "--split", "all"], capsys)
    assert code == 0, err
    whole = msr.evaluate(model, vocab.encode(text, strict=True), batch_size=16, bptt=100)
    assert json.loads(out)["tokens"] == whole["tokens"] > 0.9 * len(text) and json.loads(out)["split"] == "all"
    assert json.loads(out)["loss"] == pytest.approx(whole["loss"], rel=1e-12)
    # a split too short to score: refused, saying how one file is cut and how to score more of it
    (tmp_path / "tiny.txt").write_text("abc", encoding="utf-8")
    code, out, err = _run(["evaluate", str(path), "--data", str(tmp_path / "tiny.txt")], capsys)
    line = _error_line(err)
    assert code == 1 and "tiny has no test split, and scoring needs 2 tokens or more" in line
    assert "is one file, cut 90 % / 5 % / 5 % into train, valid and test (--data-option test_fraction=0.5" in line
    assert "--split all scores all of it" in line
    code, out, err = _run(["evaluate", str(path), "--data", str(tmp_path / "tiny.txt"), "--split", "all"], capsys)
    assert code == 0 and "tiny all: " in out and "(2 tokens)" in out, err


def test_resume_of_own_text_names_a_moved_file_and_refuses_another_text(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = "".join(f"{w} " for w in ("ab", "ba", "abc", "ca", "b") * 400)
    Path("mine.txt").write_text(text, encoding="utf-8")
    base = ["train", "--no-progress", "--threads", "1", "--hidden-sizes", "8", "--batch-size", "4", "--bptt", "20"]
    code, out, err = _run([*base, "--data", "mine.txt", "--out", "r.npz", "--max-chunks", "2"], capsys)
    assert code == 0, err
    before = Path("r.npz").read_bytes()
    # the run records the path as given: from another folder, or once the file moved, it is named
    Path("sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    code, out, err = _run(["train", "--resume", "--out", "../r.npz", "--no-progress"], capsys)
    line = _error_line(err)
    assert code == 1 and "--resume: ../r.npz was trained on the text mine.txt, which is not there" in line
    assert "give --data-path where that text is now" in line
    monkeypatch.chdir(tmp_path)
    # another text of the same symbols is refused, not trained on as the same run
    Path("other.txt").write_text(text[::-1], encoding="utf-8")
    code, out, err = _run(["train", "--resume", "--out", "r.npz", "--data-path", "other.txt"], capsys)
    assert code == 1 and "r.npz was trained on other training data" in _error_line(err)
    assert Path("r.npz").read_bytes() == before
    # the same text moved: resumed
    Path("mine.txt").rename("moved.txt")
    code, out, err = _run(["train", "--resume", "--out", "r.npz", "--data-path", "moved.txt", "--no-progress"], capsys)
    assert code == 0, err


# ---- sample: a prompt with symbols the vocabulary lacks --------------------------------------------------
def test_a_prompt_with_unknown_symbols_is_refused_naming_them(tmp_path, capsys):
    text = "the cat sat on the mat. " * 200
    corpus = data.char_corpus(text[:4000], text[4000:4400], text[4400:])
    model = msr.LSTM(corpus.vocab_size, 8, (16,), seed=0)
    path = checkpoint.save(tmp_path / "c.npz", model, vocab=corpus.vocab)
    code, out, err = _run(["sample", str(path), "--prompt", "the dog!", "--length", "5"], capsys)
    line = _error_line(err)
    assert code == 1 and out == ""
    assert "--prompt has 3 character(s) the vocabulary" in line
    assert "'d' (U+0064) at character 4, 'g' (U+0067) at character 6, '!' (U+0021) at character 7" in line
    assert "no unknown symbol" in line
    # a vocabulary with an unknown symbol: refused unless --allow-unknown, which says what it replaced
    vocab = data.Vocab(corpus.vocab.itos, unk=data.vocab.UNK_CHAR)
    model = msr.LSTM(vocab.size, 8, (16,), seed=0)
    path = checkpoint.save(tmp_path / "u.npz", model, vocab=vocab)
    code, out, err = _run(["sample", str(path), "--prompt", "the dog", "--length", "5"], capsys)
    assert code == 1 and "pass --allow-unknown to read them as the unknown symbol" in _error_line(err)
    code, out, err = _run(["sample", str(path), "--prompt", "the dog", "--length", "5", "--allow-unknown"], capsys)
    assert code == 0 and "note: --prompt: read as the unknown symbol" in err and "'d' (U+0064) at character 4" in err
    assert out.startswith("the \ufffdo\ufffd")
    # the prompt's own symbols only: no error
    assert main(["sample", str(path), "--prompt", "the cat", "--length", "5"]) == 0


@pytest.mark.parametrize(
    "args, words",
    [
        (
            ["sample", "{ck}", "--temperature", "0"],
            "--temperature must be > 0; for the most likely symbol at each step (greedy), give --top-k 1",
        ),
        (["sample", "{ck}", "--length", "-3"], "--length must be an integer >= 0, got -3"),
        (["evaluate", "{ck}", "--bptt", "0"], "--bptt must be a positive integer, got 0"),
    ],
)
def test_evaluate_and_sample_name_their_flags(tmp_path, capsys, args, words):
    text = "the cat sat on the mat. " * 200
    corpus = data.char_corpus(text[:4000], text[4000:4400], text[4400:])
    ck = checkpoint.save(tmp_path / "c.npz", msr.LSTM(corpus.vocab_size, 8, (16,)), vocab=corpus.vocab)
    code, out, err = _run([a.format(ck=ck) for a in args], capsys)
    assert code == 1 and words in _error_line(err)


# ---- an unexpected error on one MPI rank ends the job --------------------------------------------------
INJECT = """
import sys, time
from mpi4py import MPI
import multiscale_rnn as msr
from multiscale_rnn.cli import main
calls = [0]
original = msr.LSTM.loss_and_grad
def failing(self, *a, **k):  # rank 1 fails in its third chunk, while rank 0 waits in the gradient all-reduce
    calls[0] += 1
    if MPI.COMM_WORLD.Get_rank() == 1 and calls[0] == 3:
        print(f"raised at {time.time():.3f}", file=sys.stderr, flush=True)
        raise RuntimeError("disk on fire")
    return original(self, *a, **k)
msr.LSTM.loss_and_grad = failing
sys.exit(main(sys.argv[1:]))
"""


def test_an_unexpected_error_on_one_rank_ends_the_job_within_seconds(tmp_path):
    import re
    import time

    script = tmp_path / "inject.py"
    script.write_text(INJECT)
    out = tmp_path / "mpi.npz"
    flags = "--model lstm --embed-size 8 --hidden-sizes 16 --batch-size 4 --bptt 10 --epochs 1 --max-chunks 6"
    p = mpi.run(
        sys.executable, str(script), "train", "--distributed", *flags.split(), "--threads", "1", "--no-progress",
        "--out", str(out), cwd=tmp_path, timeout=120,
    )  # fmt: skip
    ended = time.time()
    assert p.returncode != 0
    raised = float(re.search(r"raised at (\d+\.\d+)", p.stderr).group(1))
    assert ended - raised < 10, p.stderr
    assert "multiscale-rnn train (rank 1): error: RuntimeError: disk on fire" in p.stderr, p.stderr
    assert "rank 1: Traceback (most recent call last)" in p.stderr  # where it was raised, for a bug report
    assert not out.exists()


def test_evaluate_names_the_flag_for_a_moved_corpus_and_for_missing_best_parameters(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "old").mkdir()
    text = tmp_path / "old" / "mine.txt"
    text.write_text("the cat sat on the mat.\n" * 400)
    args = [
        "train",
        "--data",
        "old/mine.txt",
        "--embed-size",
        "8",
        "--hidden-sizes",
        "16",
        "--batch-size",
        "4",
        "--bptt",
        "20",
        "--max-chunks",
        "2",
        "--threads",
        "1",
        "--no-progress",
        "--out",
        "m.npz",
    ]
    assert main(args) == 0
    text.rename(tmp_path / "mine.txt")
    capsys.readouterr()
    code, out, err = _run(["evaluate", "m.npz"], capsys)
    assert code == 1 and "old/mine.txt" in _error_line(err)
    assert "(the corpus m.npz was trained on, where it was then: give --data-path where it is now)" in err
    assert main(["evaluate", "m.npz", "--data-path", "mine.txt"]) == 0
    assert capsys.readouterr().out.startswith("mine test: loss")
    code, out, err = _run(["evaluate", "m.npz", "--data-path", "mine.txt", "--best"], capsys)
    assert code == 1 and "m.npz holds no best parameters (no epoch was completed): leave --best out" in _error_line(err)


def test_resume_continues_the_kept_run_of_restarts_with_its_own_seed(tmp_path, capsys):
    out = tmp_path / "best.npz"
    assert main(RUN + ["--restarts", "2", "--seed", "3", "--out", str(out)]) == 0
    kept = checkpoint.load(out).trainer_state["seed"]
    assert kept in (3, 4)
    capsys.readouterr()
    code, text, err = _run(
        ["train", "--resume", "--out", str(out), "--epochs", "2", "--threads", "1", "--no-progress"], capsys
    )
    assert code == 0, err
    assert "done after 2 epoch(s)" in text and checkpoint.load(out).trainer_state["seed"] == kept
    code, text, err = _run(["train", "--resume", "--out", str(out), "--seed", str(7 - kept)], capsys)
    assert code == 1 and f"whose seed is {kept}; --seed gives {7 - kept}, which only seeds a new run" in _error_line(
        err
    )
