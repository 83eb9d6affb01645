"""``multiscale-rnn reproduce`` and ``msr.reproduce``: the list, a run's report, resuming an interrupted
run, the errors, and reports of results folders written by the bench scripts. Every run here is the
smoke scale (a budget under one minute) on tiny corpora written in tmp_path."""

import json
import math
import random
import re
import shutil

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn.cli import main

NAMES = [
    "hornn-table2",
    "hornn-figure6",
    "hornn-table4",
    "hm-lstm-boundaries",
    "vcrnn-table3",
    "fs-rnn-table3",
    "hm-lstm-real-text",
]
HEADERS = {
    "hornn-table2": "| pooling | N=1 | N=2 | N=3 | N=4 |",
    "hornn-figure6": "| alpha | test (valid) |",
    "hornn-table4": "| model | ours: test (valid) | paper |",
    "hm-lstm-boundaries": "| configuration | layers | part | module, threads | runs | spaced: z1 F1 >= 0.9 |",
    "vcrnn-table3": "| model | D | m_bar | penalty | epochs | mean m | RNN-d | valid BPC | test BPC | paper |",
    "fs-rnn-table3": "| model | seed | parameters | epochs | best valid BPC | test BPC there | paper (test BPC) |",
    "hm-lstm-real-text": "| corpus | configuration | size | minutes | module, threads | seeds | z1 F1 (words) |",
}


@pytest.fixture
def ptb(tmp_path):
    """A tiny stand-in for the PTB folder: word files and character files (``_`` between words), and a text8 of
    the same words (``text8_prefix.txt``, for ``hornn-table4``)."""
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 5))) for _ in range(60)]
    folder = tmp_path / "ptb"
    folder.mkdir()
    for split, n in (("train", 300), ("valid", 40), ("test", 40)):
        lines = [" ".join(rng.choice(words) for _ in range(12)) for _ in range(n)]
        (folder / f"ptb.{split}.txt").write_text("\n".join(lines) + "\n")
        chars = [" _ ".join(" ".join(w) for w in line.split()) for line in lines]
        (folder / f"ptb.char.{split}.txt").write_text("\n".join(chars) + "\n")
    (folder / "text8_prefix.txt").write_text(" " + " ".join(rng.choice(words) for _ in range(6_000)))
    return folder


def test_list_names_every_reproduction_with_its_budget_and_scale(capsys):
    assert main(["reproduce", "--list"]) == 0
    out = capsys.readouterr().out
    for name in NAMES:
        assert f"{name}: " in out
    assert out.count("default budget 180 min, takes about ") == len(msr.reproduce.REPRODUCTIONS) == 8
    assert 'needs KanjiVG from pip install "multiscale-rnn[strokes]"' in out
    assert "(reduced scale)" in out and "(full scale)" in out
    assert "needs --data-path with ptb.train.txt" in out and "needs no data (generated)" in out
    assert "needs --data-path with text8 or text8.txt or text8_prefix.txt" in out
    for r in msr.reproduce.REPRODUCTIONS.values():
        assert r.default_budget <= 180


@pytest.mark.parametrize("name", NAMES)
def test_a_run_writes_its_report(name, ptb, tmp_path):
    out = tmp_path / "out"
    path = msr.reproduce.run(name, budget_minutes=0.1, out=out, data_path=ptb, progress=False)
    text = path.read_text()
    assert path == out / "REPORT.md"
    assert text.startswith(f"# {name}: ")
    assert HEADERS[name] in text
    assert "\nMachine: " in text and "instruction-set module `" in text
    assert "Seeds: " in text and "Time taken: " in text and "smoke scale" in text and "complete." in text
    pictures = sorted(out.glob("*.png"))
    assert pictures and all(f"![{p.stem}]({p.name})" in text for p in pictures)
    checkpoints = sorted(out.glob("**/*.npz"))
    assert checkpoints or name == "hm-lstm-boundaries"  # its runs are seconds long and keep no checkpoint
    for saved in checkpoints:  # evaluate and sample read a text model's checkpoint without --data
        ck = msr.checkpoint.load(saved)
        assert ck.model.vocab_size is None or ck.vocab is not None, saved


def test_vcrnn_table3_trains_each_vc_model_at_its_own_m_bar(ptb, tmp_path):
    """The VCRNN at m_bar 0.5 and the VCGRU at 0.3 (``TARGET``), each constant unit sized by its VC model's RNN-d."""
    from multiscale_rnn.reproduce.vcrnn import TARGET, baseline_size

    assert TARGET == {"vcrnn": 0.5, "vcgru": 0.3}
    out = tmp_path / "vc"
    text = msr.reproduce.run("vcrnn-table3", budget_minutes=0.1, out=out, data_path=ptb, progress=False).read_text()
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    last = {r["model"]: r for r in rows if "test_bpc" in r}
    assert set(last) == {"vcrnn", "vcgru", "elman", "gru"}
    assert (last["vcrnn"]["target"], last["vcgru"]["target"]) == (0.5, 0.3)
    assert last["vcrnn"]["label"] == "vcrnn-H8-w1-m0.5-seed0" and "| vcrnn-H8-w1-m0.5-seed0 | 8 | 0.50 |" in text
    assert "| vcgru-H8-w1-m0.3-seed0 | 8 | 0.30 |" in text
    assert last["elman"]["hidden"] == baseline_size(last["vcrnn"]["rnn_d"], "elman")
    assert last["gru"]["hidden"] == baseline_size(last["vcgru"]["rnn_d"], "gru")


def test_an_interrupted_run_resumes_without_redoing_finished_units(ptb, tmp_path, capsys):
    out = tmp_path / "hornn"
    argv = ["reproduce", "hornn-table2", "--budget", "0.1", "--data-path", str(ptb), "--out", str(out), "--quiet"]
    assert main(argv + ["--max-units", "1"]) == 0
    assert "stopped after 1 unit(s)" in capsys.readouterr().out
    first = (out / "results.jsonl").read_text().splitlines()
    assert len(first) == 1 and (out / "plain-N1-H16-seed0.npz").exists()
    assert main(argv) == 0
    rows = (out / "results.jsonl").read_text().splitlines()
    assert rows[0] == first[0]  # the finished model was read back, not trained again
    assert len(rows) == 9
    assert len({(json.loads(r)["pooling"], json.loads(r)["order"]) for r in rows}) == 9
    assert "complete." in (out / "REPORT.md").read_text()


def test_a_folder_keeps_the_scale_of_its_first_call(ptb, tmp_path, capsys):
    """A later call with another budget gives the run more time, never another scale: the units of two scales
    are never trained or reported in one folder. A smoke folder continued at a full scale (the smoke units would
    be read back as full ones), a folder of another reproduction and one trained on another data folder are
    refused, naming the folder."""
    out = tmp_path / "hornn"
    for budget in (180, 240):  # 6 epochs a model, then a budget that would give 8
        msr.reproduce.run("hornn-table2", budget, out, data_path=ptb, progress=budget == 240, max_units=0)
        scale = (out / "REPORT.md").read_text().splitlines()[-1]
        assert "at most 6 epoch(s) per model" in scale and f"budget {budget} min" in scale
    assert "(the first call's budget, 180 min)" in scale
    assert f"{out} keeps the scale of its first call" in capsys.readouterr().out
    assert json.loads((out / "scale.json").read_text())["budget_minutes"] == 180
    smoke = tmp_path / "smoke"
    msr.reproduce.run("hornn-table2", 0.1, smoke, data_path=ptb, progress=False, max_units=1)
    with pytest.raises(ValueError, match=re.escape(f"{smoke} holds a run at the smoke scale")):
        msr.reproduce.run("hornn-table2", 180, smoke, data_path=ptb, progress=False)
    with pytest.raises(ValueError, match=re.escape(f"{out} holds a run of hornn-table2, not of vcrnn-table3")):
        msr.reproduce.run("vcrnn-table3", 0.1, out, data_path=ptb, progress=False)
    other = tmp_path / "ptb2"
    shutil.copytree(ptb, other)
    with pytest.raises(ValueError, match=re.escape(f"{out} holds a run on the data of {ptb.resolve()}; this call")):
        msr.reproduce.run("hornn-table2", 180, out, data_path=other, progress=False)
    assert len(msr.reproduce.Results(smoke).rows()) == 1


def test_errors_name_the_reproduction_and_the_path(ptb, tmp_path, capsys):
    assert main(["reproduce", "no-such-table", "--out", str(tmp_path / "o")]) == 1
    assert "unknown reproduction 'no-such-table'; known: hornn-table2" in capsys.readouterr().err
    assert main(["reproduce", "hornn-tabel2"]) == 1
    assert "unknown reproduction 'hornn-tabel2' (did you mean hornn-table2?); known:" in capsys.readouterr().err
    assert main(["reproduce", "hornn-table2", "--out", str(tmp_path / "o")]) == 1
    assert "hornn-table2 needs --data-path: a folder holding ptb.train.txt" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["reproduce", "vcrnn-table3", "--data-path", str(empty), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert f"vcrnn-table3: --data-path {empty} lacks ptb.char.train.txt" in err
    assert main(["reproduce", "vcrnn-table3", "--data-path", str(empty / "no"), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert f"vcrnn-table3: --data-path {empty / 'no'} does not exist: give the folder holding ptb.char.train.txt" in err
    with pytest.raises(ValueError, match="budget_minutes must be > 0"):
        msr.reproduce.run("hm-lstm-boundaries", budget_minutes=0, out=tmp_path / "o")
    assert main(["reproduce", "hm-lstm-boundaries", "--budget", "-5", "--out", str(tmp_path / "o")]) == 1
    assert "hm-lstm-boundaries: --budget must be a number of minutes > 0, got -5.0" in capsys.readouterr().err


def test_reports_read_the_bench_scripts_folders(tmp_path):
    # repro_hornn_ptb.py --checkpoints DIR: results.jsonl rows and a model still training
    hornn = tmp_path / "hornn"
    hornn.mkdir()
    key = dict(pooling="plain", order=1, alpha=None, hidden=400, seed=0, train_tokens=929589, max_epochs=20, lr=1.0)
    row = dict(key, valid=150.0, test=140.0, seconds=3600.0, epochs=12, cpu="AMD EPYC", isa="avx2", threads=1)
    (hornn / "results.jsonl").write_text(json.dumps(row) + "\n")
    (hornn / "gated-N3-H400-seed0.history.json").write_text(json.dumps([{"epoch": 4, "valid_perplexity": 170.0}]))
    text = msr.reproduce.report("hornn-table2", hornn)
    assert "| plain | 140.0 (150.0) / 123 |" in text
    assert "in progress: gated-N3-H400-seed0, epoch 4, valid perplexity 170.0" in text
    assert "Machine: AMD EPYC, instruction-set module `avx2`, 1 thread(s)" in text
    # vc_calibrate.py --out DIR: one row per epoch; the last epoch of each model is shown
    vc = tmp_path / "vc"
    vc.mkdir()
    rows = [dict(label="vcrnn-H512-w0.1-m0.3-seed0", model="vcrnn", hidden=512, weight=0.1, target=0.3, seed=0,
                 epoch=e, valid_bpc=2.0 - 0.1 * e, mean_m=0.3, rnn_d=300.0, seconds=10.0, isa="avx2", threads=1)
            for e in (1, 2)]  # fmt: skip
    (vc / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = msr.reproduce.report("vcrnn-table3", vc)
    assert "| vcrnn-H512-w0.1-m0.3-seed0 | 512 | 0.30 | 0.100 | 2 | 0.300 | 300 | 1.800 | - |" in text
    with pytest.raises(FileNotFoundError, match="no results folder"):
        msr.reproduce.report("vcrnn-table3", tmp_path / "missing")
    # an empty folder names no machine, seeds or time: nothing was trained there
    (tmp_path / "empty").mkdir()
    text = msr.reproduce.report("vcrnn-table3", tmp_path / "empty")
    assert "Machine:" not in text and "Seeds:" not in text
    assert f"No result in {tmp_path / 'empty'} yet: `multiscale-rnn reproduce vcrnn-table3 --out" in text


def test_the_boundary_report_keeps_modules_and_thread_counts_apart():
    base = dict(
        config="recipe", layers=2, part="heldout", language=0, spaced=True, rate_l0=0.18, bpc=2.0, reduction=0.4
    )
    rows = [dict(base, seed=s, f1_l0=1.0, isa="avx2", threads=1) for s in (10, 11)]
    rows += [dict(base, seed=s, f1_l0=f, isa="avx512", threads=2) for s, f in ((10, 1.0), (11, 0.3), (12, 0.95))]
    lines = msr.reproduce.hm_lstm.report_table(rows).splitlines()
    assert "module, threads" in lines[0] and len(lines) == 4
    avx2 = next(line for line in lines if "`avx2`, 1" in line)
    avx512 = next(line for line in lines if "`avx512`, 2" in line)
    assert "| 2 | 2/2 (100 %) |" in avx2 and "| 3 | 2/3 (67 %) | 0.95 [0.30, 1.00] |" in avx512


def test_the_boundary_report_keeps_cpus_apart_and_names_them_only_where_there_are_several():
    base = dict(config="recipe", layers=2, part="heldout", language=0, spaced=True, rate_l0=0.18, bpc=2.0,
                reduction=0.4, isa="avx2", threads=1)  # fmt: skip
    zen3 = [dict(base, seed=s, f1_l0=1.0, cpu="AMD EPYC (family 25, model 1)") for s in (10, 11)]
    zen5 = [dict(base, seed=s, f1_l0=f, cpu="AMD EPYC (family 26, model 2)") for s, f in ((10, 1.0), (11, 0.3))]
    lines = msr.reproduce.hm_lstm.report_table(zen3 + zen5).splitlines()
    assert len(lines) == 4
    assert "| `avx2`, 1, AMD EPYC (family 25, model 1) | 2 | 2/2 (100 %) |" in lines[2]
    assert "| `avx2`, 1, AMD EPYC (family 26, model 2) | 2 | 1/2 (50 %) |" in lines[3]
    lines = msr.reproduce.hm_lstm.report_table(zen3).splitlines()  # one CPU: the cell as before
    assert len(lines) == 3 and "| `avx2`, 1 | 2 | 2/2 (100 %) |" in lines[2]


def test_the_records_name_the_cpu_with_its_family_and_model(tmp_path):
    from multiscale_rnn.reproduce._common import cpu_name

    info = tmp_path / "cpuinfo"
    block = "processor\t: {}\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\n"
    info.write_text(block.format(0) + "\n" + block.format(1).replace("25", "26"))
    assert cpu_name(str(info)) == "AMD EPYC (family 25, model 1)"  # the first processor's block
    info.write_text("processor\t: 0\nmodel name\t: Some CPU\n")  # no family or model given
    assert cpu_name(str(info)) == "Some CPU"
    assert cpu_name(str(tmp_path / "missing")) == "unknown"


def test_the_miss_table_says_what_z1_marks_where_it_misses_the_words():
    from multiscale_rnn.data.languages import draw_language

    hm = msr.reproduce.hm_lstm
    # z^1 on every word end and after every prefix: recall 1, precision below, F1 against the morphemes 1
    h = msr.data.languages.generate(draw_language(0), 4000, seed=1)  # language 0 has prefixes
    c = h.corpus(valid_fraction=0.5, test_fraction=0.0)
    valid = c.boundaries["valid"]
    z1 = msr.first_seen(valid["morpheme"][:1500])
    s = hm.word_level_scores(z1, valid, 1500)
    assert s["rec_l0"] == 1.0 and s["prec_l0"] < 0.9 and s["f1morph_l0"] == 1.0
    assert "f1morph_l0" not in hm.word_level_scores(z1, {"word": valid["word"]}, 1500)
    base = dict(config="recipe", layers=2, part="heldout", spaced=True, isa="avx512", threads=1, seed=10)
    rows = [
        dict(base, language=0, f1_l0=0.7, prec_l0=0.55, rec_l0=1.0, f1morph_l0=0.98),  # words and more
        dict(base, language=30, f1_l0=0.87, prec_l0=1.0, rec_l0=0.77, f1morph_l0=0.87),  # the marks only
        dict(base, language=2, f1_l0=0.3, prec_l0=0.3, rec_l0=0.3, f1morph_l0=0.4),  # neither
        dict(base, language=2, f1_l0=1.0, prec_l0=1.0, rec_l0=1.0, f1morph_l0=0.8),  # found
        dict(base, language=2, f1_l0=1.0, spaced=False),  # unspaced rows are not counted
    ]
    lines = hm.miss_table(rows).splitlines()
    assert len(lines) == 3 and "| 3/4 | 1 | 1 | 1 |" in lines[2]
    assert lines[2].endswith("| 0.70 [0.30, 1.00] | 0.80 [0.40, 0.98] |")  # languages 0 and 2 have affixes
    assert hm.miss_table([dict(base, language=0, f1_l0=1.0)]) == ""


def test_the_levels_table_counts_words_phrases_and_both_on_the_spaced_three_layer_runs():
    hm = msr.reproduce.hm_lstm
    base = dict(config="recipe", layers=3, part="heldout", spaced=True, isa="avx512", threads=1, seed=10, language=0)
    rows = [
        dict(base, f1_l0=0.95, f1_l1=0.6, phrases="marked"),  # both
        dict(base, f1_l0=0.95, f1_l1=0.4, phrases="marked"),  # words only
        dict(base, f1_l0=0.5, f1_l1=0.9, phrases="unmarked"),  # phrases only
        dict(base, f1_l0=0.89, f1_l1=0.49, phrases="unmarked"),  # neither (each just under its bar)
        dict(base, f1_l0=1.0, f1_l1=1.0, phrases="marked", spaced=False),  # unspaced rows are not counted
        dict(base, layers=2, f1_l0=1.0, phrases="marked"),  # no second detector
    ]
    lines = hm.levels_table(rows).splitlines()
    assert len(lines) == 3 and lines[2].endswith("| 3 | heldout | `avx512`, 1 | 2/4 | 1/2 | 1/2 | 1/4 |")
    assert hm.levels_table(rows[-1:]) == ""


def test_the_selection_table_compares_the_rules_that_keep_one_of_the_restarts():
    hm = msr.reproduce.hm_lstm
    base = dict(layers=2, part="tune", spaced=True, isa="avx2", threads=1, language=1)

    def cand(i, seed, f1, bpc, dl, **kw):
        return dict(base, config=f"package+cand{i}", seed=seed, f1_l0=f1, bpc_select=bpc, dl_l0=dl, **kw)

    rows = [
        # seed 0: candidate 0 misses; the lowest BPC keeps candidate 2 (a miss), the shortest description 1
        cand(0, 0, 0.5, 2.0, 3.0),
        cand(1, 0, 1.0, 2.1, 2.0),
        cand(2, 0, 0.6, 1.9, 4.0),
        # seed 1: every rule keeps a run that finds the words
        cand(0, 1, 0.95, 2.0, 2.0),
        cand(1, 1, 0.2, 2.2, 5.0),
        cand(2, 1, 0.92, 2.1, 2.5),
        cand(0, 2, 1.0, 2.0, 2.0),  # seed 2 lacks two candidates: left out
        cand(0, 3, 1.0, 2.0, 2.0, spaced=False),  # unspaced: not counted
        dict(cand(1, 3, 1.0, 2.0, 2.0), config="package"),  # not a candidate
    ]
    lines = hm.selection_table(rows).splitlines()
    assert len(lines) == 3
    assert lines[2] == "| `package` | 2 | tune | `avx2`, 1 | 3 | 1/2 | 2/2 | 1/2 | 2/2 | 0.97 [0.95, 1.00] |"
    assert hm.selection_table(rows[-2:]) == ""
    # with z^1 on the selection text kept, the run the others agree with most: on seed 0 candidates 1 and 2
    # agree and 0 does not (candidate 1 kept, which found the words); on seed 1, 0 and 2
    rng = np.random.default_rng(0)
    words = rng.random(400) < 0.2
    other = rng.random(400) < 0.2
    z = {(0, 0): other, (1, 0): words, (2, 0): words, (0, 1): words, (1, 1): other, (2, 1): words}
    for r in rows[:6]:
        if (int(r["config"][-1]), r["seed"]) in z:
            bits = z[int(r["config"][-1]), r["seed"]]
            r.update(z1_select=np.packbits(bits).tobytes().hex(), n_select=len(bits))
    assert hm.most_agreed([other, words, words]) == 1 and hm.most_agreed([words]) == 0
    lines = hm.selection_table(rows[:6]).splitlines()
    assert "kept by the most agreement" in lines[0]
    assert lines[2] == "| `package` | 2 | tune | `avx2`, 1 | 3 | 1/2 | 2/2 | 1/2 | 2/2 | 2/2 | 0.97 [0.95, 1.00] |"


def test_hornn_report_gives_the_seeds_median_and_each_hornn_against_the_rnn_of_its_seed(tmp_path):
    key = dict(alpha=None, hidden=400, train_tokens=929589, max_epochs=20, lr=1.0, seconds=60.0, epochs=12)
    tests = {("plain", 1, 0): 138.0, ("plain", 1, 1): 133.0, ("gated", 2, 0): 134.0, ("gated", 2, 1): 135.0,
             ("fofe", 3, 0): 139.0}  # fmt: skip
    rows = [dict(key, pooling=p, order=n, seed=s, test=t, valid=t + 6) for (p, n, s), t in tests.items()]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = msr.reproduce.report("hornn-table2", tmp_path)
    assert "| plain | 135.5 [133.0, 138.0] (2 seeds) / 123 |" in text
    assert "| gated | - / - | 134.5 [134.0, 135.0] (2 seeds) / 102 | - / 100 |" in text
    assert "| fofe | - / - | - / 103 | 139.0 (145.0) / 101 |" in text
    assert "| gated-N2 | 1 of 2 | -1.0 [-4.0, 2.0] |" in text  # 134 - 138 and 135 - 133
    assert "| fofe-N3 | 0 of 1 | 1.0 [1.0, 1.0] |" in text
    assert "| gated-N2 | 1 | 400 |" in text
    assert "Seeds: 0, 1, 2 (the model's initialisation), in turn; the results hold seed(s) 0, 1." in text


def test_hornn_figure6_reports_each_alpha_and_where_each_seed_is_lowest(tmp_path):
    """Figure 6's rows (alpha set) and Table 2's share the layout of ``repro_hornn_ptb.py --checkpoints DIR``: each
    report holds its own rows and models in progress only, the 3rd-order FOFE at alpha 0.6 in both; an alpha with two
    seeds gives their median and range, and the line on the lowest alpha counts the seeds whose lowest lies in the
    paper's 0.5-0.7."""
    key = dict(pooling="fofe", order=3, hidden=400, train_tokens=929589, max_epochs=20, lr=0.5, schedule="newbob")
    tests = {(0.2, 0): 135.0, (0.6, 0): 133.6, (0.9, 0): 140.0, (0.2, 1): 131.0, (0.6, 1): 132.0, (0.9, 1): 139.0}
    rows = [dict(key, alpha=a, seed=s, test=t, valid=t + 6, seconds=600.0, epochs=13) for (a, s), t in tests.items()]
    rows[5]["valid"] = 100.0  # seed 1 at 0.9: lowest on validation, not on test
    rows.append(dict(key, alpha=None, seed=0, test=133.6, valid=139.6, seconds=600.0, epochs=13))  # Table 2's FOFE
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for name in ("fofe-N3-alpha0.8-H400-seed0", "gated-N3-H400-seed0"):
        (tmp_path / f"{name}.history.json").write_text(json.dumps([{"epoch": 4, "valid_perplexity": 170.0}]))
    text = msr.reproduce.report("hornn-figure6", tmp_path)
    assert "| 0.2 | 133.0 [131.0, 135.0] (2 seeds) |" in text and "| 0.9 | 139.5 [139.0, 140.0] (2 seeds) |" in text
    assert "Lowest test perplexity at alpha 0.6 (seed 0), 0.2 (seed 1): within the paper's 0.5-0.7 on 1 of 2" in text
    assert (
        "Lowest validation perplexity, the split an alpha would be chosen on, at alpha 0.6 (seed 0), 0.9 (seed 1)"
        in text
    )
    assert "| fofe-N3-alpha0.6 | 0 | 400 | 929,589 | 13 (20) | ? | 0.5 | 133.6 | 139.6 | 600 |" in text
    assert "| fofe-N3 | 0 |" not in text and "between alpha 0.5 and 0.7" in text
    assert "in progress: fofe-N3-alpha0.8-H400-seed0, epoch 4" in text and "gated-N3" not in text
    table2 = msr.reproduce.report("hornn-table2", tmp_path)
    # Table 2's 3rd-order FOFE is the model at the default alpha, 0.6, under either key: seed 0's without alpha
    # (preferred to its row with alpha 0.6) and seed 1's with it
    assert "| fofe | - / - | - / 103 | 132.8 [132.0, 133.6] (2 seeds) / 101 |" in table2
    assert "| fofe-N3 | 0 | 400 |" in table2 and "| fofe-N3-alpha0.6 | 1 | 400 |" in table2
    assert "alpha0.2" not in table2 and "alpha0.9" not in table2
    assert "in progress: gated-N3-H400-seed0, epoch 4" in table2
    msr.reproduce.get("hornn-figure6").figures(tmp_path)
    assert (tmp_path / "perplexity_by_alpha.png").stat().st_size > 0
    (tmp_path / "results.jsonl").write_text(json.dumps(dict(rows[-1], pooling="gated")) + "\n")  # none of Figure 6
    text = msr.reproduce.report("hornn-figure6", tmp_path)
    assert "No model has finished yet." in text and "| alpha |" not in text and "fofe-N3-alpha0.8-H400-seed0" in text


def test_hornn_reproductions_train_every_model_of_a_seed_before_the_next_seed(ptb, tmp_path, monkeypatch):
    """Beyond the smoke scale each of ``SEEDS`` trains all its models in turn, at the one scale the budget sets for a
    seed's models; a call that stops leaves whole seeds first, and a later call trains only what is missing."""
    from multiscale_rnn.reproduce import hornn
    from multiscale_rnn.reproduce._common import Budget, BudgetSpent, Results

    trained = []

    def fake_finished(corpus, classes, args, pooling, order, alpha=None, budget=None):  # no training: a row each
        trained.append((args.seed, alpha, args.epochs))
        Results(tmp_path).append(
            dict(hornn._key(corpus, args, pooling, order, alpha), valid=2.0, test=1.0, seconds=0.0, epochs=args.epochs)
        )
        return 2.0, 1.0, 0.0

    monkeypatch.setattr(hornn, "finished", fake_finished)
    corpus = msr.data.load("ptb-word", path=str(ptb))
    args = hornn.settings_for(200, models=len(hornn.ALPHAS))
    epochs = args.epochs
    assert hornn.SEEDS == (0, 1, 2) and hornn.ALPHAS == (0.2, 0.4, 0.6, 0.8, 0.9) and hornn.default_alpha() == 0.6
    # seed 0's Table 2 FOFE order 3 (no alpha) is Figure 6's model at 0.6: found, not trained again
    Results(tmp_path).append(dict(hornn._key(corpus, args, "fofe", 3, None), valid=2.0, test=1.0, seconds=0.0))
    with pytest.raises(BudgetSpent):
        hornn.run_figure6(tmp_path, Budget(200, tmp_path, max_units=6), False, ptb)
    assert trained == [(0, a, epochs) for a in (0.2, 0.4, 0.8, 0.9)] + [(1, 0.2, epochs), (1, 0.4, epochs)]
    hornn.run_figure6(tmp_path, Budget(200, tmp_path), False, ptb)
    assert trained[6:] == [(1, a, epochs) for a in hornn.ALPHAS[2:]] + [(2, a, epochs) for a in hornn.ALPHAS]
    text = msr.reproduce.report("hornn-figure6", tmp_path)
    assert "| 0.2 | 1.0 [1.0, 1.0] (3 seeds) |" in text and "| 0.6 | 1.0 [1.0, 1.0] (3 seeds) |" in text
    args.seed = 1  # and the other way: Table 2's run finds seed 1's FOFE order 3 among Figure 6's rows
    assert hornn.find_done(Results(tmp_path), hornn._key(corpus, args, "fofe", 3, None))["alpha"] == 0.6
    assert hornn.find_done(Results(tmp_path), hornn._key(corpus, args, "gated", 3, None)) is None
    assert "seeds 0, 1, 2 in turn, about " in hornn.scale(180) and "--budget 512 in a later call" in hornn.scale(180)
    assert hornn.scale(6000).endswith("(all 3 within the budget)") and hornn.estimate(180) == 180
    assert hornn.scale(0.1).endswith("seed 0") and msr.reproduce.get("hornn-table2").seeds.startswith("0, 1, 2 ")


def test_vc_report_sets_each_vc_model_beside_the_unit_of_its_rnn_d_and_seed(tmp_path):
    def row(label, model, hidden, seed, test, rnn_d, **kw):
        return dict(label=label, model=model, hidden=hidden, seed=seed, epoch=10, valid_bpc=test + 0.1, test_bpc=test,
                    rnn_d=rnn_d, **kw)  # fmt: skip

    vc = dict(weight=1.0, target=0.3)
    rows = [row("vcrnn-H64-w1-m0.3-seed0", "vcrnn", 64, 0, 1.90, 20.2, mean_m=0.30, scheduler_init="target", **vc),
            row("vcrnn-H64-w1-m0.3-seed1", "vcrnn", 64, 1, 2.00, 22.0, mean_m=0.32, scheduler_init="target", **vc),
            row("vcrnn-H64-w1-m0.3-uniform-seed0", "vcrnn", 64, 0, 2.50, 10.0, mean_m=0.1, scheduler_init="uniform",
                **vc),
            row("elman-H20-seed0", "elman", 20, 0, 1.95, 20.0, weight=None, mean_m=None),
            row("elman-H22-seed1", "elman", 22, 1, 1.98, 22.0, weight=None, mean_m=None)]  # fmt: skip
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = msr.reproduce.report("vcrnn-table3", tmp_path)
    assert ("| vcrnn-H64-w1-m0.3, scheduler_init target | 0, 1 | 0.310 [0.300, 0.320] | 21 [20, 22] | "
            "1.950 [1.900, 2.000] | 1.965 [1.950, 1.980] | 1 of 2 |") in text  # fmt: skip
    # no Elman-10 of seed 0: nothing to compare with
    assert (
        "| vcrnn-H64-w1-m0.3, scheduler_init uniform | 0 | 0.100 [0.100, 0.100] | 10 [10, 10] | "
        "2.500 [2.500, 2.500] | - | - |" in text
    )


def test_a_model_stopped_between_epochs_resumes_from_its_checkpoint(ptb, tmp_path):
    from types import SimpleNamespace

    from multiscale_rnn.reproduce import BudgetSpent
    from multiscale_rnn.reproduce.vcrnn import train_vc

    class StopAfterOne:
        def check(self):
            raise BudgetSpent("stopped after one epoch")

    corpus = msr.data.load("ptb-char", path=str(ptb))
    s = SimpleNamespace(hidden=8, target=0.3, lr=2e-3, epochs=2, train_chars=4_000, valid_chars=1_000)
    whole = train_vc(corpus, s, "vcrnn", 0.01, 0, tmp_path / "whole", test=True)  # never stopped
    written = []
    with pytest.raises(BudgetSpent):
        train_vc(corpus, s, "vcrnn", 0.01, 0, tmp_path, budget=StopAfterOne(), on_row=written.append)
    history = json.loads((tmp_path / "vcrnn-H8-w0.01-m0.3-seed0.history.json").read_text())
    assert [h["epoch"] for h in history] == [1]
    assert [r["epoch"] for r in written] == [1]  # the stopped run's finished epoch is kept
    rows = train_vc(corpus, s, "vcrnn", 0.01, 0, tmp_path, test=True, on_row=written.append)
    history = json.loads((tmp_path / "vcrnn-H8-w0.01-m0.3-seed0.history.json").read_text())
    assert [h["epoch"] for h in history] == [1, 2]  # epoch 1 read back from the checkpoint, epoch 2 trained
    assert [r["epoch"] for r in rows] == [1, 2] and "test_bpc" in rows[-1] and written[-1] is rows[-1]
    for got, want in zip(written[:1] + rows, whole[:1] + whole):  # the uninterrupted run's figures, bit for bit
        assert (got["epoch"], got["valid_bpc"], got["mean_m"], got["rnn_d"]) == (
            want["epoch"], want["valid_bpc"], want["mean_m"], want["rnn_d"])  # fmt: skip
    assert rows[-1]["test_bpc"] == whole[-1]["test_bpc"]


def _wreck_epoch_2(monkeypatch, once: bool) -> list:
    """Every Trainer ``msr.Trainer`` makes trains epoch 2 (the first time only, with ``once``; else from epoch 2
    on) at a learning rate that wrecks the model; returns the list it fills with (epoch, rate at its start)."""
    wrecked, rates = [], []

    class Wreck(msr.training.Hook):
        def on_epoch_start(self, run):
            rates.append((run.trainer.epoch + 1, run.trainer.optimizer.lr))
            if run.trainer.epoch >= 1 and not (once and (run.trainer.epoch > 1 or wrecked)):
                wrecked.append(True)
                run.trainer.optimizer.lr = 400.0

    class Wrecking(msr.Trainer):
        def __init__(self, *a, hooks=(), **kw):
            super().__init__(*a, hooks=list(hooks) + [Wreck()], **kw)

    monkeypatch.setattr(msr, "Trainer", Wrecking)
    return rates


def test_a_diverged_vc_run_ends_at_its_best_epoch_and_is_not_trained_again(ptb, tmp_path, monkeypatch, capsys):
    """The divergence guard stops a run: its last row holds the best epoch's figures and says so, the table
    shows it, and a rerun of vc_calibrate.py does not repeat the diverged epoch (it would, from the last
    checkpoint, every epoch left and every session)."""
    import importlib.util
    from pathlib import Path
    from types import SimpleNamespace

    from multiscale_rnn.reproduce.vcrnn import finished, train_vc

    _wreck_epoch_2(monkeypatch, once=False)
    corpus = msr.data.load("ptb-char", path=str(ptb))
    s = SimpleNamespace(hidden=8, target=0.3, lr=2e-3, epochs=4, train_chars=4_000, valid_chars=1_000)
    with pytest.warns(RuntimeWarning, match="epoch 2: .* the run has diverged"):
        rows = train_vc(corpus, s, "vcrnn", 0.01, 0, tmp_path, test=True)
    assert [r["epoch"] for r in rows] == [1, 2]  # stopped: epochs 3 and 4 are not tried
    last = rows[-1]
    assert last["diverged"] is True and last["best_epoch"] == 1 and finished(last, 4) and not finished(rows[0], 4)
    assert last["valid_bpc"] == rows[0]["valid_bpc"] and last["diverged_bpc"] > rows[0]["valid_bpc"] + 0.1
    assert (last["mean_m"], last["rnn_d"]) == (rows[0]["mean_m"], rows[0]["rnn_d"])  # the model ends at epoch 1
    assert "test_bpc" in last
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = msr.reproduce.report("vcrnn-table3", tmp_path)
    assert f"| vcrnn-H8-w0.01-m0.3-seed0 | 8 | 0.30 | 0.010 | 1 (diverged at 2) | {last['mean_m']:.3f} |" in text
    script = Path(__file__).resolve().parents[1] / "bench" / "vc_calibrate.py"
    spec = importlib.util.spec_from_file_location("vc_calibrate", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    trained = []
    monkeypatch.setattr(module, "run", lambda *a: trained.append(a[2:5]))
    argv = ["--data", str(ptb), "--models", "vcrnn", "--weights", "0.01,0.02", "--hidden", "8", "--epochs", "4",
            "--train-chars", "4000", "--valid-chars", "1000", "--out", str(tmp_path)]  # fmt: skip
    assert module.main(argv) == 0
    assert trained == [("vcrnn", 0.02, 0)]  # the diverged run is over; the other weight is trained


def test_a_diverged_vc_run_goes_on_at_half_the_rate_when_it_has_retries(ptb, tmp_path, monkeypatch):
    """``settings.retries``: the divergence gets a row marked retried, the run goes on from its last checkpoint at
    half the learning rate (set after the resume, which reads the checkpoint's rate) and ends at its last epoch;
    ``halvings`` (a later session's count of those rows) starts it at the lowered rate."""
    from types import SimpleNamespace

    from multiscale_rnn.reproduce.vcrnn import finished, train_vc

    rates = _wreck_epoch_2(monkeypatch, once=True)
    corpus = msr.data.load("ptb-char", path=str(ptb))
    s = SimpleNamespace(hidden=8, target=0.3, lr=2e-3, epochs=3, train_chars=4_000, valid_chars=1_000, retries=1)
    with pytest.warns(RuntimeWarning, match="epoch 2: .* the run has diverged"):
        rows = train_vc(corpus, s, "vcrnn", 0.01, 0, tmp_path, test=True)
    want = [(1, False, 2e-3), (2, True, 2e-3), (2, False, 1e-3), (3, False, 1e-3)]  # (epoch, retried, lr)
    assert [(r["epoch"], bool(r.get("retried")), r["lr"]) for r in rows] == want
    assert [lr for _, lr in rates] == [2e-3, 2e-3, 1e-3, 1e-3]  # epoch 2 again, from the checkpoint, at half
    assert [finished(r, 3) for r in rows] == [False, False, False, True] and "test_bpc" in rows[-1]
    history = json.loads((tmp_path / "vcrnn-H8-w0.01-m0.3-seed0.history.json").read_text())
    assert [h["epoch"] for h in history] == [1, 2, 3] and not any(h.get("diverged") for h in history)
    rows[1].pop("test_bpc", None)
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert "| 3, lr halved at epoch 2 |" in msr.reproduce.report("vcrnn-table3", tmp_path)
    again = train_vc(corpus, s, "vcrnn", 0.01, 1, tmp_path / "later", halvings=1)  # a later session's start
    assert {r["lr"] for r in again} == {1e-3}


def test_a_hornn_is_scored_at_its_best_epoch_not_its_last(ptb, tmp_path):
    """The stopping rule ends a run on an epoch that did not improve; the table reports the epoch of
    lowest validation loss (lr 10 on the tiny corpus: epochs 3 and 6 get worse, the second miss stops
    the run at 6 of at most 8)."""
    from multiscale_rnn.reproduce.hornn import HornnSettings, train_model

    corpus = msr.data.load("ptb-word", path=str(ptb)).by_frequency()
    classes = msr.data.class_sizes(corpus.counts())
    s = HornnSettings(hidden=8, train_tokens=2000, epochs=8, lr=10.0, checkpoints=str(tmp_path))
    valid, test, _, epochs, best = train_model(corpus, classes, s)
    history = json.loads(next(tmp_path.glob("*.history.json")).read_text())
    losses = [r["valid_loss"] for r in history]
    assert len(losses) == epochs < 8 and best == 1 + int(np.argmin(losses)) and best < epochs
    assert valid == pytest.approx(math.exp(min(losses)), rel=1e-9)
    assert valid < math.exp(losses[-1]) and math.isfinite(test)


class _StopAfterFirstEpoch:
    """A budget spent at its first check (``train_model`` checks after each epoch but the last)."""

    def check(self):
        raise msr.reproduce.BudgetSpent("spent")


def test_a_resumed_hornn_run_reports_the_training_time_of_all_its_epochs(ptb, tmp_path):
    """A run stopped by its budget after one epoch and resumed by a later call reports the training seconds
    of both epochs from the checkpointed history, not the wall time of its last call."""
    from multiscale_rnn.reproduce.hornn import HornnSettings, train_model

    corpus = msr.data.load("ptb-word", path=str(ptb)).by_frequency()
    classes = msr.data.class_sizes(corpus.counts())
    s = HornnSettings(hidden=8, train_tokens=2000, epochs=2, lr=0.05, checkpoints=str(tmp_path))
    with pytest.raises(msr.reproduce.BudgetSpent):
        train_model(corpus, classes, s, budget=_StopAfterFirstEpoch())
    first = json.loads(next(tmp_path.glob("*.history.json")).read_text())
    assert [r["epoch"] for r in first] == [1] and first[0]["seconds"] > 0
    _, _, seconds, epochs, _ = train_model(corpus, classes, s)
    history = json.loads(next(tmp_path.glob("*.history.json")).read_text())
    assert epochs == 2 and [r["epoch"] for r in history] == [1, 2]
    assert history[0]["seconds"] == first[0]["seconds"]
    assert seconds == pytest.approx(history[0]["seconds"] + history[1]["seconds"], rel=1e-12)
    assert seconds > first[0]["seconds"]


def test_a_hornn_checkpoint_of_other_settings_is_refused_not_reported_as_this_runs(ptb, tmp_path):
    """A second run into the same folder with another learning rate, budget scale or schedule would continue
    the first run's model (or, finished, train nothing) and record it under its own settings: it is refused,
    naming the settings, and nothing is recorded; the same settings resume."""
    from dataclasses import replace

    from multiscale_rnn.reproduce.hornn import HornnSettings, finished

    corpus = msr.data.load("ptb-word", path=str(ptb)).by_frequency()
    classes = msr.data.class_sizes(corpus.counts())
    s = HornnSettings(hidden=8, train_tokens=2000, epochs=1, lr=0.05, checkpoints=str(tmp_path))
    first = finished(corpus, classes, s, "plain", 1)
    ck = next(tmp_path.glob("*.npz"))
    before = ck.read_bytes()
    for other, named in (
        (replace(s, lr=3.0), "lr 0.05 there, 3.0 here"),
        (replace(s, epochs=2), "max_epochs 1 there, 2 here"),
        (replace(s, epochs=2, anneal_after=1), "anneal_after 'not set' there, 1 here"),
    ):
        with pytest.raises(ValueError, match=re.escape(named)) as e:
            finished(corpus, classes, other, "plain", 1)
        assert str(ck) in str(e.value) and "another folder" in str(e.value)
    assert ck.read_bytes() == before and len(msr.reproduce.Results(tmp_path).rows()) == 1
    assert finished(corpus, classes, s, "plain", 1) == first


def test_a_checkpoint_written_before_settings_were_stored_is_checked_on_its_learning_rate(tmp_path):
    """``unit_checkpoint`` on a checkpoint without stored settings compares the one it records, the rate of
    its first epoch; a missing file gives the extra to write."""
    from multiscale_rnn.reproduce._common import unit_checkpoint

    ids = np.random.default_rng(0).integers(0, 7, 400).astype(np.int32)
    model = msr.HORNN(7, 8, (8,), order=2, seed=0)
    trainer = msr.Trainer(model, msr.optim.SGD(0.1), batch_size=4, bptt=5)
    ck = tmp_path / "old.npz"
    trainer.fit(ids, epochs=1, checkpoint=ck)
    assert msr.checkpoint.load(ck).extra == {}
    assert unit_checkpoint(ck, {"lr": 0.1, "order": 2}) == {"reproduction": {"lr": 0.1, "order": 2}}
    with pytest.raises(ValueError, match=re.escape("lr 0.1 there, 0.5 here")):
        unit_checkpoint(ck, {"lr": 0.5, "order": 2})
    new = unit_checkpoint(tmp_path / "new.npz", {"lr": 0.5, "sizes": (1, 2)})
    assert new == {"reproduction": {"lr": 0.5, "sizes": [1, 2]}}


def test_the_hornn_report_keeps_one_settings_rows_in_its_tables(tmp_path):
    """Rows of two runs into one folder (lr 1.0, then 0.5): the tables and medians hold the latest row's
    settings only (no lr 1.0 model beside the lr 0.5 RNN), and a line names what was left out; ``SETTINGS``
    are ``_key``'s items besides model and seed."""
    from types import SimpleNamespace

    from multiscale_rnn.reproduce.hornn import SETTINGS, HornnSettings, _key, report

    corpus = SimpleNamespace(train=np.zeros(1000, np.int32))
    key = _key(corpus, HornnSettings(anneal_after=3), "plain", 1, None)
    # weight_decay and column_norm enter a key only where they are not UNNAMED's (the recipe's column norm is not),
    # the head only where it is not the recipe's class softmax, the corpus only where it is not PTB
    assert set(key) - {"pooling", "order", "alpha", "seed"} == set(SETTINGS) - {"weight_decay", "head", "corpus"}
    results = msr.reproduce.Results(tmp_path)
    for lr, tests in ((1.0, {("plain", 1): 150.0, ("gated", 2): 160.0, ("fofe", 3): 140.0}),
                      (0.5, {("plain", 1): 136.5, ("gated", 2): 125.5})):  # fmt: skip
        for (pooling, order), test in tests.items():
            k = _key(corpus, HornnSettings(lr=lr), pooling, order, None)
            results.append(dict(k, valid=test + 5, test=test, seconds=1.0, epochs=3, best_epoch=3))
    text = report(tmp_path)
    assert "136.5 (141.5)" in text and "125.5 (130.5)" in text and "1 of 1" in text
    assert "150.0" not in text and "160.0" not in text and "140.0" not in text and "fofe-N3" not in text
    assert "left out: 3 row(s) of other settings" in text and "lr 1.0" in text and "lr 0.5" in text


def test_a_hornn_run_with_other_regularisation_is_keyed_and_reported_apart(tmp_path):
    """``--weight-decay`` / ``--column-norm`` of ``repro_hornn_ptb.py`` (``HornnSettings``): a key names them only
    where they are not ``UNNAMED``'s (the values before they entered keys: weight decay 1e-5, column norm 2.0), so
    the rows trained then keep their keys; the recipe's column norm, 4.0 since 2026-12-02, enters the key, the
    Trainer, and the report's line of rows left out, as does any other value."""
    from types import SimpleNamespace

    from multiscale_rnn.models.hornn import RECIPE
    from multiscale_rnn.reproduce.hornn import UNNAMED, HornnSettings, _key, recipe_trainer, report, schedule

    corpus = SimpleNamespace(train=np.zeros(1000, np.int32))
    former = _key(corpus, HornnSettings(column_norm=2.0), "gated", 3, None)  # a row written before 2026-12-02
    assert "weight_decay" not in former and "column_norm" not in former and UNNAMED["column_norm"] == 2.0
    today = _key(corpus, HornnSettings(), "gated", 3, None)
    assert RECIPE["column_norm"] == 4.0 and today == dict(former, column_norm=4.0)
    assert _key(corpus, HornnSettings(weight_decay=RECIPE["weight_decay"]), "gated", 3, None) == today
    other = _key(corpus, HornnSettings(weight_decay=1e-4), "gated", 3, None)
    assert other == dict(today, weight_decay=1e-4)
    model = msr.HORNN(12, 4, (4,), order=3, pooling="gated", head="class", head_classes=[2, 10])
    trainer = recipe_trainer(model, 0.5, schedule(), weight_decay=1e-4, column_norm=1.0)
    assert (trainer.optimizer.weight_decay, trainer.constraint.max_norm) == (1e-4, 1.0)
    assert recipe_trainer(model, 0.5, schedule()).constraint.max_norm == 4.0
    with pytest.raises(TypeError, match="not momentum"):
        recipe_trainer(model, 0.5, schedule(), momentum=0.5)
    results = msr.reproduce.Results(tmp_path)
    results.append(dict(former, valid=136.0, test=132.3, seconds=1.0, epochs=11, best_epoch=11))
    results.append(dict(other, valid=130.0, test=127.0, seconds=1.0, epochs=12, best_epoch=12))
    text = report(tmp_path)
    assert "127.0 (130.0)" in text and "132.3" not in text and "weight_decay 0.0001" in text
    results.append(dict(today, valid=134.0, test=129.9, seconds=1.0, epochs=11, best_epoch=11))
    text = report(tmp_path)  # the latest row's settings: today's recipe, apart from the row at 2.0
    assert "129.9 (134.0)" in text and "132.3" not in text and "127.0" not in text and "column_norm 4.0" in text
    assert "head=" not in text  # the recipe's class softmax: no line on the output layer
    # each key finds its own row only: the key at 2.0 (no column_norm) does not take the rows at 4.0 or at 1e-4
    from multiscale_rnn.reproduce.hornn import find_done

    assert [find_done(results, k)["test"] for k in (former, other, today)] == [132.3, 127.0, 129.9]
    only_today = msr.reproduce.Results(tmp_path / "today")
    only_today.append(dict(today, valid=134.0, test=129.9, seconds=1.0, epochs=11, best_epoch=11))
    assert find_done(only_today, former) is None and find_done(only_today, other) is None


def test_a_hornn_checkpoint_of_the_former_column_norm_is_refused_by_todays_recipe(tmp_path):
    """A model's checkpoint written at column norm 2.0 (its key without ``column_norm``) is not continued by a run
    of today's recipe (4.0) into the same folder: ``unit_checkpoint`` names the setting that differs."""
    from types import SimpleNamespace

    from multiscale_rnn.reproduce import _common
    from multiscale_rnn.reproduce.hornn import HornnSettings, _key

    corpus = SimpleNamespace(train=np.zeros(1000, np.int32))
    model = msr.HORNN(12, 4, (4,), order=2, pooling="fofe", seed=0)
    ck = tmp_path / "fofe-N2-H4-seed0.npz"
    former = _key(corpus, HornnSettings(column_norm=2.0), "fofe", 2, None)
    msr.checkpoint.save(ck, model, extra=_common.unit_checkpoint(ck, former))
    assert _common.unit_checkpoint(ck, former) == {"reproduction": json.loads(json.dumps(former))}
    with pytest.raises(ValueError, match="column_norm 'not set' there, 4.0 here"):
        _common.unit_checkpoint(ck, _key(corpus, HornnSettings(), "fofe", 2, None))


def test_a_hornn_run_with_the_full_softmax_is_keyed_trained_and_reported_apart(ptb, tmp_path):
    """``--head linear`` (``HornnSettings.head``): the full softmax of the paper's eq. 2 in place of the class
    softmax. Its key names the head (a class-head key, the rows before the option, does not), the model it trains
    has the linear head, a class-head run into the same folder refuses its checkpoint, and the report keeps its
    rows apart."""
    from dataclasses import replace

    from multiscale_rnn.reproduce.hornn import HornnSettings, _key, find_done, finished, report

    corpus = msr.data.load("ptb-word", path=str(ptb)).by_frequency()
    classes = msr.data.class_sizes(corpus.counts())
    s = HornnSettings(hidden=8, train_tokens=2000, epochs=1, lr=0.05, head="linear", checkpoints=str(tmp_path))
    assert _key(corpus, s, "fofe", 2, None) == dict(_key(corpus, replace(s, head="class"), "fofe", 2, None),
                                                    head="linear")  # fmt: skip
    assert "head" not in _key(corpus, HornnSettings(), "fofe", 2, None)
    valid, test, _ = finished(corpus, classes, s, "fofe", 2)
    ck = msr.checkpoint.load(next(tmp_path.glob("*.npz")))
    assert ck.config["head"] == "linear" and not ck.config.get("head_classes")
    assert np.isfinite(valid) and np.isfinite(test) and valid > 1.0
    assert find_done(msr.reproduce.Results(tmp_path), _key(corpus, replace(s, head="class"), "fofe", 2, None)) is None
    with pytest.raises(ValueError, match=re.escape("head 'linear' there, 'not set' here")):
        finished(corpus, classes, replace(s, head="class"), "fofe", 2)
    rows = msr.reproduce.Results(tmp_path).rows()
    assert len(rows) == 1 and rows[0]["head"] == "linear"
    assert "`head='linear'` (the full softmax" in report(tmp_path)


def test_a_hornn_run_capped_below_20_epochs_halves_in_its_last_three(ptb, tmp_path):
    """The default budget gives 6 epochs, the rate halved after epoch 3 and every epoch after, and the
    results key says so; 20 epochs leave the toolkit's rule alone. On the tiny text: 2 epochs with
    ``anneal_after=1``, the second at half the rate (``NewBob``'s own test: tests/test_schedules.py)."""
    from multiscale_rnn.reproduce.hornn import HornnSettings, _key, settings_for, train_model

    assert (settings_for(180).epochs, settings_for(180).anneal_after) == (6, 3)
    assert settings_for(6000).anneal_after is None and settings_for(0.5).anneal_after is None
    corpus = msr.data.load("ptb-word", path=str(ptb)).by_frequency()
    classes = msr.data.class_sizes(corpus.counts())
    s = HornnSettings(hidden=8, train_tokens=2000, epochs=2, anneal_after=1, lr=0.05, checkpoints=str(tmp_path))
    train_model(corpus, classes, s)
    history = json.loads(next(tmp_path.glob("*.history.json")).read_text())
    assert [r["lr"] for r in history] == [0.05, 0.025]
    state = msr.checkpoint.load(next(tmp_path.glob("*.npz"))).trainer_state["lr_schedule"]
    assert state["name"] == "NewBob" and state["params"]["anneal_after"] == 1
    assert _key(corpus, s, "plain", 1, None)["anneal_after"] == 1
    assert "anneal_after" not in _key(corpus, HornnSettings(), "plain", 1, None)


def test_anneal_script_continues_a_model_from_its_best_epoch_and_leaves_the_checkpoint(ptb, tmp_path, capsys):
    """bench/hornn_anneal.py: the best epoch's perplexities first (those the table reports), then one line
    per halved epoch; the checkpoint is read, not written."""
    import importlib.util
    from pathlib import Path

    from multiscale_rnn.reproduce.hornn import HornnSettings, train_model

    corpus = msr.data.load("ptb-word", path=str(ptb)).by_frequency()
    classes = msr.data.class_sizes(corpus.counts())
    s = HornnSettings(hidden=8, train_tokens=2000, epochs=8, lr=10.0, checkpoints=str(tmp_path))
    valid, test, _, _, best = train_model(corpus, classes, s)
    ck = next(tmp_path.glob("*.npz"))
    before = ck.read_bytes()
    script = Path(__file__).resolve().parents[1] / "bench" / "hornn_anneal.py"
    spec = importlib.util.spec_from_file_location("hornn_anneal", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    capsys.readouterr()
    module.main([str(ck), "--data", str(ptb), "--lr", "1.0", "--epochs", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"best epoch {best}: valid {valid:.1f} test {test:.1f}"
    assert [line.split(":")[0] for line in lines[1:]] == ["halving epoch 1", "halving epoch 2"]
    assert "lr 1 " in lines[1] and "lr 0.5 " in lines[2]
    assert ck.read_bytes() == before


def test_vc_rnn_d_counts_a_vcgru_as_the_gru_it_is_compared_with():
    """The paper's convention on both sides of Table 3: a GRU of n units has RNN-d sqrt(2) n, so a VCGRU's
    measured d_t count G = 2 (sqrt(2 d^2 + D)), not the 3 gates of ``equivalent_dim``'s own default."""
    from multiscale_rnn.models.vcrnn import corpus_trace, equivalent_dim
    from multiscale_rnn.reproduce.vcrnn import GATES, mean_m

    ids = np.random.default_rng(0).integers(0, 11, 3000).astype(np.int32)
    for cls, name in ((msr.VCGRU, "vcgru"), (msr.VCRNN, "vcrnn")):
        model = cls(11, embed_size=32, hidden_sizes=(32,), seed=0)
        m, d = corpus_trace(model, ids, 16, 500)
        got = mean_m(model, ids)
        assert got[0] == pytest.approx(float(m.mean()))
        assert got[1] == pytest.approx(equivalent_dim(d, 32, name, gates=GATES[name] ** 2))
        assert got[1] == pytest.approx(float(np.sqrt(np.mean(GATES[name] ** 2 * d.astype(float) ** 2 + 32))))
    assert GATES["vcgru"] ** 2 == pytest.approx(2.0) and GATES["gru"] == GATES["vcgru"]


def test_fs_rnn_models_are_compared_at_equal_training_time(tmp_path):
    """The equal-time table: T is the shortest model's total time; each model's best epoch ended by T."""
    from multiscale_rnn.reproduce.fs_rnn import equal_time

    def row(label, epoch, seconds, bpc):
        return dict(label=label, model=label, hidden=8, params=100, epoch=epoch, seconds=seconds, valid_bpc=bpc)

    rows = [row("fs", 1, 60.0, 2.0), row("fs", 2, 60.0, 1.8), row("seq", 1, 50.0, 2.2), row("seq", 2, 50.0, 1.9)]
    rows += [row("seq", 3, 50.0, 1.7), row("slow", 1, 200.0, 1.5)]
    for r in rows:
        r["cpu_seconds"] = r["seconds"]
    rows[0]["seconds"] = 5000.0  # a paused epoch: its wall time is ignored where its CPU time is known
    T, best = equal_time(rows)
    assert T == 120.0  # fs: 60 + 60; seq's third epoch ends at 150 and slow's first at 200
    assert best == {"fs": 1.8, "seq": 1.9, "slow": None}
    assert equal_time([]) == (0.0, {})
    old = [{k: v for k, v in r.items() if k != "cpu_seconds"} for r in rows[2:]]  # rows written before CPU time
    assert equal_time(old) == (150.0, {"seq": 1.7, "slow": None})
    from multiscale_rnn.reproduce._common import Results

    for r in rows:
        Results(tmp_path).append(r)
    Results(tmp_path).append(dict(row("seq", 4, 50.0, 1.75), test_bpc=1.6))  # tested at its best epoch, 3
    # the other two tested too (rows without times), so seed 0 is complete
    for label, epoch in (("fs", 2), ("slow", 1)):
        Results(tmp_path).append(dict(label=label, model=label, hidden=8, params=100, epoch=epoch, test_bpc=1.7))
    text = msr.reproduce.report("fs-rnn-table3", tmp_path)
    assert "| fs | 0 | 2.0 | 1.800 |" in text and "| slow | 0 | 2.0 | - |" in text  # rows without a seed: seed 0
    assert "| seq | 0 | 100 | 4 | 1.700 (epoch 3) | 1.600 | - |" in text


def test_fs_rnn_report_gives_each_seed_and_the_spread_over_seeds(tmp_path):
    """Per seed: its rows and its own equal-time table; over seeds: median [range] and the FS-LSTM-2's
    lead on each LSTM counted seed by seed."""
    from multiscale_rnn.reproduce._common import Results

    test_bpc = {
        "fs-lstm-2": (1.60, 1.62, 1.70),
        "sequential-lstm": (1.65, 1.61, 1.72),
        "stacked-lstm": (1.66, 1.70, 1.75),
    }
    for seed in range(3):
        for model, values in test_bpc.items():
            label = f"{model}-H8-seed{seed}"
            base = dict(label=label, model=model, hidden=8, params=100, seed=seed, seconds=60.0, cpu_seconds=60.0)
            Results(tmp_path).append(dict(base, epoch=1, valid_bpc=values[seed] + 0.2))
            Results(tmp_path).append(dict(base, epoch=2, valid_bpc=values[seed] + 0.1, test_bpc=values[seed]))
    text = msr.reproduce.report("fs-rnn-table3", tmp_path)
    assert "| fs-lstm-2-H8-seed2 | 2 | 100 | 2 | 1.800 (epoch 2) | 1.700 |" in text
    assert "| sequential-lstm-H8-seed1 | 1 | 2.0 | 1.710 |" in text
    assert "| fs-lstm-2 | 0, 1, 2 | 1.620 [1.600, 1.700] | 1.720 [1.700, 1.800] |" in text
    assert "ahead of the sequential-lstm on 2 of 3 seed(s) in test BPC and on 2 of 3 at equal time." in text
    assert "ahead of the stacked-lstm on 3 of 3 seed(s) in test BPC and on 3 of 3 at equal time." in text
    assert "Seeds: 0, 1, 2 (model initialisation and the Trainer's seed), in turn. Time taken" in text


def test_fs_rnn_report_compares_at_equal_time_only_the_seeds_whose_models_have_finished(tmp_path):
    """A seed still training (one model's first epoch) is named in progress and left out of the equal-time
    comparison, whose short total time would otherwise set every model's figure; the thread count is the rows'."""
    from multiscale_rnn.reproduce._common import Results

    for model, bpc in (("fs-lstm-2", 1.60), ("stacked-lstm", 1.66), ("sequential-lstm", 1.64)):
        base = dict(label=f"{model}-H8-seed0", model=model, hidden=8, params=100, seed=0, seconds=60.0,
                    cpu_seconds=60.0, threads=2)  # fmt: skip
        Results(tmp_path).append(dict(base, epoch=1, valid_bpc=bpc + 0.2))
        Results(tmp_path).append(dict(base, epoch=2, valid_bpc=bpc + 0.1, test_bpc=bpc))
    Results(tmp_path).append(dict(label="fs-lstm-2-H8-seed1", model="fs-lstm-2", hidden=8, params=100, seed=1,
                                  epoch=1, valid_bpc=2.1, seconds=5.0, cpu_seconds=5.0, threads=2))  # fmt: skip
    text = msr.reproduce.report("fs-rnn-table3", tmp_path)
    assert "in its seed (2 threads), on the seeds whose three models have finished (seed 1 in progress)." in text
    assert "| fs-lstm-2-H8-seed0 | 0 | 2.0 | 1.700 |" in text
    assert "| fs-lstm-2-H8-seed1 | 1 |" not in text
    assert "| fs-lstm-2 | 0 | 1.600 [1.600, 1.600] | 1.700 [1.700, 1.700] |" in text
    assert "ahead of the stacked-lstm on 1 of 1 seed(s) in test BPC and on 1 of 1 at equal time." in text


def test_hm_lstm_table3_runs_three_rows_of_equal_size_on_strokes_and_reports_the_ordering(tmp_path):
    pytest.importorskip("svg.path")
    pytest.importorskip("simplification")
    from multiscale_rnn.reproduce import hm_lstm_strokes as t3
    from multiscale_rnn.reproduce._common import Results

    folder = tmp_path / "kanjivg"  # 40 one- and two-stroke characters in KanjiVG's format
    folder.mkdir()
    head = (
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:kvg="http://kanjivg.tagaini.net" viewBox="0 0 109 109">'
        '<g id="kvg:StrokePaths_{n}"><g id="kvg:{n}" kvg:element="{c}"><g kvg:element="{c}">{p}</g></g></g></svg>'
    )
    for k in range(40):
        cp = 0x4E00 + k
        paths = f'<path d="M10,{10 + k}L90,{20 + k}"/>' + ('<path d="M20,80c10,0,20,10,20,20"/>' if k % 2 else "")
        (folder / f"{cp:05x}.svg").write_text(head.format(n=f"{cp:05x}", c=chr(cp), p=paths))
    out = tmp_path / "out"
    path = msr.reproduce.run("hm-lstm-table3", budget_minutes=0.1, out=out, data_path=folder, progress=False)
    text = path.read_text()
    assert "| model | parameters | test log-likelihood per sequence: median [min, max] | paper (IAM-OnDB) |" in text
    assert "(3 seeds)" in text and "the paper's lstm < hm-lstm < hm-lstm-sa" in text and "complete." in text
    finals = [r for r in Results(out).rows() if r.get("final")]
    assert sorted((r["row"], r["seed"]) for r in finals) == sorted((w, s) for w in t3.ROWS for s in t3.SEEDS)
    sizes = {r["row"]: r["parameters"] for r in finals}
    assert abs(sizes["lstm"] - sizes["hm-lstm"]) <= 0.1 * sizes["hm-lstm"]  # equal parameters, to a layer size
    assert all(np.isfinite(r["test_log_likelihood"]) for r in finals)
    analyses = [r for r in Results(out).rows() if r.get("analysis")]  # the HM-LSTMs' boundaries, read once
    assert sorted((r["row"], r["seed"]) for r in analyses) == sorted((w, s) for w in t3.HM_ROWS for s in t3.SEEDS)
    for r in analyses:
        assert r["layers"] == ["z1", "z2"] and r["sequences"] == len(r["z2_segments"]) > 0
        assert all(n >= 1 for n in r["z2_segments"]) and all(0 <= s["f1"] <= 1 for s in r["stroke"] + r["component"])
    assert "| model | seeds | z1 rate | z2 rate | z1 F1 vs pen lifts | z1 F1 vs component ends |" in text
    assert "\n| hm-lstm-sa | 3 | " in text
    assert all((out / f).stat().st_size > 1000 for f in ("figure5.png", "computation.png", "samples.png"))
    again = msr.reproduce.run("hm-lstm-table3", budget_minutes=0.1, out=out, data_path=folder, progress=False)
    assert len([r for r in Results(out).rows() if r.get("final")]) == 9  # nothing trained twice
    assert len([r for r in Results(out).rows() if r.get("analysis")]) == 6  # nor scored twice
    assert again == path


def test_hm_lstm_table3_unit_resumed_after_its_last_epoch_writes_no_row_twice(tmp_path):
    from multiscale_rnn.reproduce import hm_lstm_strokes as t3
    from multiscale_rnn.reproduce._common import Budget, Results

    rng = np.random.default_rng(0)
    drawings = [np.c_[rng.normal(size=(n, 2)), (np.arange(n) % 4 == 3)].astype(np.float32) for n in (9, 12, 7, 10)]
    splits = {"train": drawings, "valid": drawings[:2], "test": drawings[2:]}
    corpus = msr.data.strokes.StrokeCorpus(
        "fixture", splits, np.zeros(2), np.ones(2), {k: [{}] * len(v) for k, v in splits.items()},
        {k: [{"stroke": d[:, 2] > 0.5} for d in v] for k, v in splits.items()},
    )  # fmt: skip
    s = t3._Scale(0.01)
    s.epochs = 2
    results, budget = Results(tmp_path), Budget(1e6, tmp_path)
    for _ in range(2):  # the second call finds the checkpoint at the last epoch and its rows written
        t3._train(corpus, s, "hm-lstm", 0, None, tmp_path, budget, results, lambda line: None)
    assert [(r["epoch"], bool(r.get("final"))) for r in results.rows()] == [(1, False), (2, True)]


def test_the_machine_line_gives_the_rows_threads_and_module_not_the_reporting_process():
    from multiscale_rnn.reproduce import machine_line

    line = machine_line([dict(label="a", epoch=1, isa="baseline", threads=7)])  # rows that record no CPU
    assert "instruction-set module `baseline`, 7 thread(s)" in line
    line = machine_line([dict(cpu="Some CPU", isa="avx2", threads=1), dict(cpu="Some CPU", isa="avx2", threads=1)])
    assert line.startswith("Machine: Some CPU, instruction-set module `avx2`, 1 thread(s) (")


def test_vc_first_updates_script_starts_the_scheduler_at_its_target(ptb):
    """bench/vc_first_updates.py: after one update under scheduler_init="target" every chunk's mean m_t is
    m_bar = 0.3 (the update is taken after the forward); "uniform" starts elsewhere. Its summary prints both."""
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "bench" / "vc_first_updates.py"
    spec = importlib.util.spec_from_file_location("vc_first_updates", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    corpus = msr.data.load("ptb-char", path=str(ptb))
    target = module.first_updates(corpus.train, corpus.vocab_size, "vcrnn", "target", 0, 1, 8)
    uniform = module.first_updates(corpus.train, corpus.vocab_size, "vcrnn", "uniform", 0, 1, 8)
    assert target["steps"] == uniform["steps"] == 1
    assert target["m_min"] == pytest.approx(0.3, abs=1e-6) and target["closed_updates"] == 0
    assert abs(uniform["m_min"] - 0.3) > 1e-3
    assert module.seed_list("0-3") == [0, 1, 2, 3] and module.seed_list("2,5") == [2, 5]


def test_hornn_table4_trains_text8_with_the_papers_text8_schedule_and_every_epoch(ptb, tmp_path):
    """Table 4's models: text8 words, the rate halved after every epoch from ``anneal_after`` on (the paper's text8
    schedule, ``CORPUS_SETTINGS``), every epoch trained (no stopping rule); the corpus and schedule in the key."""
    from multiscale_rnn.models.hornn import CORPUS_SETTINGS
    from multiscale_rnn.reproduce import hornn

    corpus = msr.data.load("text8-word", path=ptb)
    classes = msr.data.class_sizes(corpus.counts())
    args = hornn.HornnSettings(hidden=8, train_tokens=2_000, epochs=4, anneal_after=2, corpus="text8-word",
                               checkpoints=str(tmp_path))  # fmt: skip
    assert isinstance(hornn.lr_schedule(args), msr.schedules.HalveAfter)
    assert hornn.train_model(corpus, classes, args, "plain", 1)[3] == 4
    history = json.loads((tmp_path / "plain-N1-H8-seed0.history.json").read_text())
    assert [r["lr"] for r in history] == [0.5, 0.5, 0.25, 0.125]
    key = hornn._key(corpus, args, "plain", 1, None)
    assert (key["corpus"], key["schedule"], key["anneal_after"]) == ("text8-word", "halve", 2)
    assert "corpus" not in hornn._key(corpus, hornn.HornnSettings(), "plain", 1, None)  # PTB rows keep their keys
    # the scale of a budget: the paper's 500 units, our 10 epochs at most, halving from the second half on when capped
    assert CORPUS_SETTINGS["text8"] == {"hidden": 500, "epochs": 10, "lr_schedule": "halve", "halve_after": 5}
    full = hornn.settings_for(10_000, models=5, corpus="text8-word")
    assert (full.hidden, full.epochs, full.anneal_after, full.corpus) == (500, 10, None, "text8-word")
    capped = hornn.settings_for(180, models=5, corpus="text8-word")
    assert (capped.epochs, capped.anneal_after) == (5, 2)


def test_hornn_table4_report_gives_the_order_of_the_poolings_beside_the_papers(tmp_path):
    """Table 4's report: each model beside the paper's figure, each HORNN against the RNN of its seed, the
    poolings from best to worst by median test perplexity beside the paper's gated, FOFE, max, plain, the epoch each
    run kept and how many kept their last."""
    from multiscale_rnn.reproduce import hornn

    corpus = type("C", (), {"train": np.zeros(1000, np.int32)})()
    results = msr.reproduce.Results(tmp_path)
    tests = {("plain", 1): [150.0, 152.0], ("fofe", 3): [140.0, 153.0], ("gated", 3): [149.0, 151.0],
             ("plain", 3): [160.0, 161.0], ("max", 3): [155.0, 158.0]}  # fmt: skip
    for (pooling, order), by_seed in tests.items():
        for seed, test in enumerate(by_seed):
            args = hornn.HornnSettings(hidden=500, epochs=10, corpus="text8-word", seed=seed)
            best = 10 if seed == 0 else 8  # seed 0's models kept their last epoch: still improving
            results.append(dict(hornn._key(corpus, args, pooling, order, None), valid=test + 5, test=test,
                                seconds=1.0, epochs=10, best_epoch=best, vocab_size=13129))  # fmt: skip
    text = msr.reproduce.report("hornn-table4", tmp_path)
    assert "| gated-N3 | 1 | 500 | 1,000 | 10 (10) | 8 | 0.5 | 151.0 | 156.0 | 1 |" in text
    assert "5 of 10 model(s) trained all 10 epochs and kept the last: still improving" in text
    assert "our vocabulary: 13,129 words" in text
    assert "| RNN | 151.0 [150.0, 152.0] (2 seeds) | 184 |" in text and "| gated-N3 | 150.0 [149.0, 151.0]" in text
    assert "| fofe-N3 | 1 of 2 | -4.5 [-10.0, 1.0] |" in text and "| plain-N3 | 0 of 2 | 9.5 [9.0, 10.0] |" in text
    assert "ours fofe, gated, max, plain; the paper's gated, fofe, max, plain." in text


def test_the_hornn_bench_script_on_text8_writes_the_folder_table4_reports(ptb, tmp_path, capsys):
    """bench/repro_hornn_ptb.py --corpus text8-word: Table 4's models one call each, keyed as ``hornn-table4``'s own
    (corpus and schedule), so the reproduction's report reads the folder; the PTB report leaves those rows out."""
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "bench" / "repro_hornn_ptb.py"
    spec = importlib.util.spec_from_file_location("repro_hornn_ptb", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "t4"
    common = ["--corpus", "text8-word", "--data", str(ptb), "--hidden", "8", "--train-tokens", "2000", "--epochs",
              "2", "--only", "table2", "--checkpoints", str(out)]  # fmt: skip
    module.main(common + ["--orders", "1", "--poolings", "plain"])
    module.main(common + ["--orders", "3", "--poolings", "fofe"])
    assert "Table 4: test perplexity (valid in brackets) against order" in capsys.readouterr().out
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["pooling"], r["order"], r["corpus"], r["schedule"], r["epochs"]) for r in rows] == [
        ("plain", 1, "text8-word", "halve", 2),
        ("fofe", 3, "text8-word", "halve", 2),
    ]
    history = json.loads((out / "fofe-N3-H8-seed0.history.json").read_text())
    assert [r["lr"] for r in history] == [0.5, 0.5]  # the text8 schedule: 5 epochs at the initial rate
    text = msr.reproduce.report("hornn-table4", out)
    assert f"| RNN | {rows[0]['test']:.1f} ({rows[0]['valid']:.1f}) | 184 |" in text
    assert f"| fofe-N3 | {int(rows[1]['test'] < rows[0]['test'])} of 1 |" in text
    table2 = msr.reproduce.report("hornn-table2", out)  # PTB's tables take no text8 row
    assert "| plain | - / 123 |" in table2
    assert "The tables hold no row of its corpus; left out: 2 row(s) of other settings (corpus text8-word," in table2
