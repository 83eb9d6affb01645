"""The real-text protocol's script (bench/hm_lstm_real_text.py): the known boundaries and their scores,
the rate ratio and the targets, and a run stopped after one block and resumed giving the line of an
uninterrupted run (a tiny model on a tiny source tree, a few seconds)."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import multiscale_rnn as msr

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "hm_lstm_real_text.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("hm_lstm_real_text", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def marks(a) -> str:
    return "".join("^" if v else "." for v in a)


def test_clause_ends_on_a_known_text(bench):
    text = "Yes, she said. Go!\nx = f(a, b)\n\nend ;"
    # the last character of each clause: before ",", ".", "!", a line end, " ;" (one end for ")" + 2 line ends)
    assert marks(msr.data.clause_boundaries(text)) == "..^.........^...^........^...^....^.."
    refs = bench.reference_boundaries(text)
    # as first seen: the mark (or the space before it) after each clause's last character
    assert marks(refs["clause"]) == "...^.........^...^........^...^....^."
    # word ends first seen at the whitespace after each word (a line end too; none after the last)
    assert marks(refs["word"]) == "....^...^.....^...^.^.^....^..^....^."
    assert not bench.reference_boundaries("no marks in text8 style")["clause"].any()
    # the token reading: a mark is a word of its own, so "Yes," ends twice (at "," and at the space)
    assert marks(refs["token"]) == "...^^...^....^^..^^.^.^.^^^^.^^....^."


def test_token_ends_split_marks_from_words():
    text = "you, sir!\nx_1 = f(a)"
    assert marks(msr.data.word_boundaries(text)) == "...^....^...^.^....^"
    assert marks(msr.data.word_boundaries(text, split_marks=True)) == "..^^...^^...^.^.^^^^"
    assert marks(msr.data.word_boundaries("élan, été", split_marks=True)) == "...^^...^"  # letters beyond ASCII
    assert msr.data.word_boundaries("", split_marks=True).shape == (0,)


def test_scores_rate_ratio_and_targets(bench):
    refs = {"word": np.array([0, 0, 1, 0, 0, 1, 0, 0, 1, 0], bool), "clause": np.array([0] * 5 + [1] + [0] * 4, bool)}
    z = np.array([[0, 0, 1, 0, 0, 1, 0, 0, 1, 0], [0, 0, 0, 0, 0, 1, 0, 0, 0, 0]], dtype=float)
    s = bench.score_boundaries(z, refs)
    assert s["f1_l0"] == 1.0 and s["f1_l0_exact"] == 1.0 and s["f1_l1"] == 1.0
    assert s["rate_l0"] == pytest.approx(0.3) and s["rate_l1"] == pytest.approx(0.1)
    assert s["rate_ratio"] == pytest.approx(1 / 3) and s["targets_met"] is True
    # z^1 one step late: still a hit at tolerance 1, not exactly
    late = bench.score_boundaries(np.roll(z, 1, axis=1), refs)
    assert late["f1_l0"] == 1.0 and late["f1_l0_exact"] == 0.0
    # z^2 as often as z^1: the ratio fails the target however good its F1
    same = bench.score_boundaries(np.array([z[0], z[0]]), refs)
    assert same["rate_ratio"] == 1.0 and same["targets_met"] is False
    assert bench.rate_ratio(0.05, 0.2) == pytest.approx(0.25) and bench.rate_ratio(0.1, 0.0) is None
    # no clause end in the text (text8): z^2 is scored against nothing, the targets are not judged
    none = bench.score_boundaries(z, dict(refs, clause=np.zeros(10, bool)))
    assert none["f1_l1"] is None and none["targets_met"] is None and none["rate_ratio"] == pytest.approx(1 / 3)
    # one layer with a detector (2 layers): no z^2 figures
    assert "f1_l1" not in bench.score_boundaries(z[:1], refs)
    # z^1 at every word end and once more after a mark: precision 3/4 against the words, 1 against the tokens
    token = refs["word"].copy()
    token[3] = True
    twice = bench.score_boundaries(np.array([refs["word"] | token]), dict(refs, token=token))
    assert twice["precision_l0"] == 0.75 and twice["f1_l0"] == pytest.approx(6 / 7)
    assert twice["f1_l0_tokens"] == 1.0 and twice["recall_l0_tokens"] == 1.0
    assert "f1_l0_tokens" not in s  # no token reference given, no token score


def tiny_args(tree: Path, out: Path, *more) -> list:
    return [
        "--data", "python-stdlib", "--data-path", str(tree), "--seeds", "0", "--layers", "3", "--hidden", "12",
        "--embed", "8", "--batch-size", "4", "--bptt", "10", "--max-chunks", "6", "--block", "3", "--recipe",
        "--rate-target", "0.18,0.06", "--valid-chars", "300", "--trace-chars", "300", "--probe-chars", "50",
        "--out", str(out), *more,
    ]  # fmt: skip


def source_tree(root: Path) -> Path:
    root.mkdir()
    lines = [f"def f{i}(a, b):\n    return a + {i} * b  # sum, product; done.\n" for i in range(200)]
    (root / "m.py").write_text("".join(lines))
    return root


def rows(out: Path) -> list:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_a_stopped_run_resumes_to_the_uninterrupted_line(bench, tmp_path, capsys):
    tree = source_tree(tmp_path / "src")
    msr.set_num_threads(1)
    assert bench.main(["run", *tiny_args(tree, tmp_path / "whole", "--no-figures")]) == 0
    assert bench.main(tiny_args(tree, tmp_path / "cut", "--stop-after", "1")) == 0  # one block of three chunks
    assert not (tmp_path / "cut" / "results.jsonl").exists()
    (folder,) = [p for p in (tmp_path / "cut").iterdir() if p.is_dir()]
    assert json.loads((folder / "spent.json").read_text())["chunks"] == 3
    assert bench.main(tiny_args(tree, tmp_path / "cut")) == 0
    (whole,), (cut,) = rows(tmp_path / "whole"), rows(tmp_path / "cut")
    assert cut["chunks"] == whole["chunks"] == 6
    # each block's probe: the chunks trained and the rates of z^1, z^2, z^3, kept across the stop
    assert [p[0] for p in cut["probes"]] == [3, 6] and all(len(p) == 4 for p in cut["probes"])
    assert cut["figures"] == [f"{folder.name}/fig3.png", f"{folder.name}/fig4.png"]
    assert all((tmp_path / "cut" / f).is_file() for f in cut["figures"])
    for r in (whole, cut):
        assert 0 < r["cpu_seconds"] and 0 < r["seconds"]
        r.pop("seconds"), r.pop("cpu_seconds"), r.pop("figures", None)
    assert cut == whole
    assert whole["corpus"] == "python-stdlib" and whole["isa"] == msr._native.ISA and whole["threads"] == 1
    assert whole["clause_ends"] > 0 and set(whole) >= {"f1_l0", "f1_l1", "rate_l0", "rate_l1", "rate_ratio"}
    assert {"valid_bpc", "reduction", "cpu"} <= set(whole)
    # a run already in the file is skipped
    assert bench.main(tiny_args(tree, tmp_path / "cut")) == 0
    assert len(rows(tmp_path / "cut")) == 1 and "already" in capsys.readouterr().out
    assert bench.main(["report", str(tmp_path / "cut")]) == 0
    table = capsys.readouterr().out
    assert "| python-stdlib | `recipe+target0.18_0.06` | 3 x 12 |" in table and "Machine:" in table
    # a run recorded before the token score existed: --rescore traces its checkpoint again and gives it
    old = dict(cut)
    for k in ("f1_l0_tokens", "precision_l0_tokens", "recall_l0_tokens"):
        old.pop(k)
    (tmp_path / "cut" / "results.jsonl").write_text(json.dumps(old) + "\n")
    assert bench.main(["report", str(tmp_path / "cut")]) == 0
    words = f"| {cut['f1_l0']:.2f} [{cut['f1_l0']:.2f}, {cut['f1_l0']:.2f}] |"
    assert f"{words} - |" in capsys.readouterr().out  # the tokens column left empty
    argv = ["report", "--rescore", "--data-path", str(tree), str(tmp_path / "cut")]
    assert bench.main(argv) == 0
    out = capsys.readouterr().out
    assert f"{words} {cut['f1_l0_tokens']:.2f} [" in out
    assert "Rescored from their checkpoints: 1 of 1 runs; the word F1 as recorded on 1." in out


def test_bad_corpus_or_seed_is_refused(bench, tmp_path):
    with pytest.raises(SystemExit, match="enwik8"):
        bench.main(["--data", "enwik8", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="seeds"):
        bench.main(["--data", "text8", "--seeds", "7", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match=r"error: no results at .*results.jsonl: give a results.jsonl file"):
        bench.main(["report", "--rescore", str(tmp_path)])  # a folder without a finished run


def test_rate_targets_read_off_the_training_text(bench, tmp_path):
    """``--rate-target text``: layers 1 and 2 at the word- and clause-end rates of the training text, which
    the run records; a text without clause ends is refused with its name."""
    tree = source_tree(tmp_path / "src")
    corpus = bench.load_corpus("python-stdlib", tmp_path, tree)
    text = corpus.vocab.decode(np.asarray(corpus.train))
    refs = bench.reference_boundaries(text)
    rates = bench.text_rates(corpus)
    assert rates == {"word": pytest.approx(refs["word"].mean()), "clause": pytest.approx(refs["clause"].mean())}
    assert 0 < rates["clause"] < rates["word"] < 1
    args = bench.parser().parse_args(["run", *tiny_args(tree, tmp_path / "out", "--rate-target", "text")])
    opts, _, name = bench.model_options(args, corpus)
    assert name == "recipe+target-text" and opts["rate_target"] == [round(rates["word"], 4), round(rates["clause"], 4)]
    assert bench.model_options(args)[2] == name  # the run's name does not need the corpus
    assert bench.main(tiny_args(tree, tmp_path / "out", "--rate-target", "text", "--no-figures")) == 0
    (row,) = rows(tmp_path / "out")
    assert row["config"] == name and row["options"]["rate_target"] == opts["rate_target"]
    words = msr.data.char_corpus("just words and spaces here " * 50, name="words")
    no_clauses = tmp_path / "plain"
    no_clauses.mkdir()
    (no_clauses / "m.py").write_text("just words and spaces here " * 400)
    with pytest.raises(ValueError, match="no clause end"):
        bench.model_options(args, words)
    with pytest.raises(SystemExit, match="error: rate target 'text': python-stdlib's training text has no clause"):
        bench.main(tiny_args(tree, tmp_path / "out2", "--rate-target", "text", "--data-path", str(no_clauses)))


def test_the_report_keeps_modules_and_thread_counts_apart():
    base = dict(corpus="shakespeare", config="recipe", layers=3, hidden=128, minutes=600.0, f1_l0=0.9, rate_l0=0.2,
                f1_l1=0.8, rate_l1=0.06, rate_ratio=0.3, valid_bpc=2.1, reduction=0.56, targets_met=True)  # fmt: skip
    rows = [dict(base, seed=s, isa=isa, threads=t) for s in (0, 1) for isa, t in (("avx2", 1), ("avx512", 2))]
    rows.append(dict(base, seed=2, isa="avx512", threads=2, f1_l0=0.38, targets_met=False))
    lines = msr.reproduce.hm_lstm_real_text.report_table(rows).splitlines()
    assert "module, threads" in lines[0]
    avx2 = next(line for line in lines if "`avx2`, 1" in line)
    avx512 = next(line for line in lines if "`avx512`, 2" in line)
    assert "| 0,1 |" in avx2 and "| 2/2 |" in avx2
    assert "| 0,1,2 |" in avx512 and "| 2/3 |" in avx512 and "0.90 [0.38, 0.90]" in avx512


def test_probe_states_count_the_flips_of_the_last_chunks():
    rt = msr.reproduce.hm_lstm_real_text
    # probes every 20 chunks up to 2,000; over the last 1,000 (chunks 1,020-2,000: 50 probes) z1 is on the words
    # (0.2) except on two runs of sparse probes (0.05), so the state changes four times
    rates = [0.0] * 50 + [0.2] * 10 + [0.05] * 5 + [0.2] * 20 + [0.05] * 3 + [0.2] * 12
    probes = [[20 * (i + 1), r, 0.01] for i, r in enumerate(rates)]
    st = rt.probe_states(probes)
    assert st == {"share": 42 / 50, "changes": 4, "ends_on_words": True}
    # 12 probes fewer: the last 1,000 chunks start in the run's first, sparse part (12 probes) and end sparse
    assert rt.probe_states(probes[:-12]) == {"share": 0.6, "changes": 4, "ends_on_words": False}
    rows = [dict(corpus="shakespeare", config="recipe", seed=s, probes=p) for s, p in ((0, probes), (1, probes[:-12]))]
    rows.append(dict(corpus="shakespeare", config="recipe", seed=2))  # no probes kept: left out
    line = rt.state_table(rows).splitlines()[2]
    assert "| 2 | 0.72 [0.60, 0.84] | 4 [4, 4] | 1 of 2 |" in line


def run_args(bench, tree: Path, out: Path, *more):
    """The parsed flags of a tiny run, with its key (``run_key``) and folder (``run_folder``)."""
    rt = msr.reproduce.hm_lstm_real_text
    args = bench.parser().parse_args(["run", *tiny_args(tree, out, *more)])
    key = rt.run_key(args, "python-stdlib", rt.model_options(args)[2], 0)
    return args, key, rt.run_folder(out, key)


def trained_blocks(text: str) -> list:
    """The progress lines of the blocks a call trained (``<folder>: <seconds> s  <chunks> chunks ...``)."""
    return [line for line in text.splitlines() if " chunks  train bpc " in line]


def test_run_folders_follow_every_field_of_the_key(bench, tmp_path):
    """Each field of a run's key gives the run a folder of its own; the readable part of the name stays the
    corpus, configuration, size, budget and seed, and a whole float names the same folder as its integer."""
    rt = msr.reproduce.hm_lstm_real_text
    _, key, folder = run_args(bench, tmp_path, tmp_path / "out")
    other = dict(data="text8", config="recipe", layers=2, hidden=16, embed=6, batch_size=3, bptt=5, seed=1)
    other.update(minutes=30.0, max_chunks=9, threads=2)
    assert set(other) == set(key)  # another value of every field
    names = {rt.run_folder(tmp_path / "out", dict(key, **{k: v})).name for k, v in other.items()}
    assert len(names) == len(other) and folder.name not in names
    assert folder.parent == tmp_path / "out" and tuple(key) == rt.RUN_KEY
    assert folder.name.startswith("python-stdlib-recipe+target0.18_0.06-3x12-m20c6-seed0-")
    assert len(folder.name.rsplit("-", 1)[1]) == 8
    assert rt.run_folder(tmp_path, dict(key, minutes=20)) == rt.run_folder(tmp_path, dict(key, minutes=20.0))
    # a results row holds the key and more: its folder is the key's
    assert rt.run_folder(tmp_path / "out", dict(key, corpus="python-stdlib", valid_bpc=3.0)) == folder


def test_another_thread_count_trains_its_own_run(bench, tmp_path, capsys):
    """A run on 2 threads into the --out of the same run on 1 trains its own model in its own folder (other
    threads sum in another order, so each is a run of its own) instead of recording the finished 1-thread
    model, and its seconds, as its own."""
    tree = source_tree(tmp_path / "src")
    threads = msr.get_num_threads()
    try:
        assert bench.main(tiny_args(tree, tmp_path / "out", "--no-figures", "--threads", "1")) == 0
        assert len(trained_blocks(capsys.readouterr().out)) == 2  # 6 chunks in blocks of 3
        assert bench.main(tiny_args(tree, tmp_path / "out", "--no-figures", "--threads", "2")) == 0
        assert len(trained_blocks(capsys.readouterr().out)) == 2  # trained again, not resumed at its end
        assert bench.main(tiny_args(tree, tmp_path / "alone", "--no-figures", "--threads", "2")) == 0
    finally:
        msr.set_num_threads(threads)
    one, two = rows(tmp_path / "out")
    (alone,) = rows(tmp_path / "alone")
    assert (one["threads"], two["threads"]) == (1, 2) and two["chunks"] == 6
    folders = [run_args(bench, tree, tmp_path / "out", "--threads", str(t))[2] for t in (1, 2)]
    assert folders[0] != folders[1] and sorted(p for p in (tmp_path / "out").iterdir() if p.is_dir()) == sorted(folders)
    spent = [json.loads((f / "spent.json").read_text()) for f in folders]
    assert two["seconds"] == spent[1]["seconds"] != spent[0]["seconds"]
    assert msr.checkpoint.load(folders[1] / "checkpoint.npz").extra["reproduction"]["threads"] == 2
    for r in (two, alone):
        r.pop("seconds"), r.pop("cpu_seconds")
    assert two == alone  # the line of a 2-thread run into a folder of its own


@pytest.mark.parametrize("flag, before, after", [("--bptt", 10, 5), ("--batch-size", 4, 3), ("--embed", 8, 6)])
def test_another_bptt_batch_or_embedding_gets_its_own_folder(bench, tmp_path, flag, before, after):
    """A run differing from one already in --out only in BPTT, batch size or embedding (``before`` in
    ``tiny_args``) trains in a folder of its own instead of stopping on the other's checkpoint."""
    tree = source_tree(tmp_path / "src")
    msr.set_num_threads(1)
    assert bench.main(tiny_args(tree, tmp_path / "out", "--no-figures")) == 0
    assert bench.main(tiny_args(tree, tmp_path / "out", "--no-figures", flag, str(after))) == 0
    first, second = rows(tmp_path / "out")
    field = flag[2:].replace("-", "_")
    assert (first[field], second[field]) == (before, after)
    assert second["chunks"] == 6 and second["chars_trained"] == 6 * second["batch_size"] * second["bptt"]
    assert len([p for p in (tmp_path / "out").iterdir() if p.is_dir()]) == 2


def test_a_checkpoint_of_another_key_is_refused_naming_the_field(bench, tmp_path):
    """A checkpoint in a run's folder that was written by a run of another key (here: copied from the 1-thread
    run's folder into the 2-thread run's) is refused, naming the field, rather than continued as this run's."""
    import shutil

    tree = source_tree(tmp_path / "src")
    msr.set_num_threads(1)
    assert bench.main(tiny_args(tree, tmp_path / "out", "--stop-after", "1")) == 0  # one block: a checkpoint
    _, key, folder = run_args(bench, tree, tmp_path / "out")
    _, _, folder2 = run_args(bench, tree, tmp_path / "out", "--threads", "2")
    if folder2 != folder:  # the same folder before each key had its own
        shutil.copytree(folder, folder2)
    threads = msr.get_num_threads()
    try:
        with pytest.raises(SystemExit, match=r"other settings \(threads 1 there, 2 here\)"):
            bench.main(tiny_args(tree, tmp_path / "out", "--threads", "2"))
    finally:
        msr.set_num_threads(threads)
    assert not (tmp_path / "out" / "results.jsonl").exists()
    assert json.loads((folder2 / "spent.json").read_text())["chunks"] == 3  # left as it was
    assert msr.checkpoint.load(folder2 / "checkpoint.npz").extra["reproduction"] == key  # the key it was written with


def test_rescore_finds_a_run_in_its_folder_of_before_the_hash(bench, tmp_path, capsys):
    """``report --rescore`` traces a run recorded before the folder names held the key's hash from the folder it
    had then (the readable part alone)."""
    tree = source_tree(tmp_path / "src")
    msr.set_num_threads(1)
    assert bench.main(tiny_args(tree, tmp_path / "out", "--no-figures")) == 0
    _, _, folder = run_args(bench, tree, tmp_path / "out")
    folder.rename(folder.with_name("python-stdlib-recipe+target0.18_0.06-3x12-m20c6-seed0"))  # the name it had
    capsys.readouterr()
    assert bench.main(["report", "--rescore", "--data-path", str(tree), str(tmp_path / "out")]) == 0
    assert "Rescored from their checkpoints: 1 of 1 runs; the word F1 as recorded on 1." in capsys.readouterr().out
