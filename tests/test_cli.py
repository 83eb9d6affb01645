"""The command line, end to end on tiny settings."""

import json
import subprocess
import sys

import pytest

import multiscale_rnn as msr
from multiscale_rnn import checkpoint
from multiscale_rnn.cli import main, model_from_settings, resolve_settings
from multiscale_rnn.command_line.settings import load_config
from multiscale_rnn.models.registry import build_model, model_names, register_model
from multiscale_rnn.presets import DEFAULT_PRESET, PRESETS
from multiscale_rnn.trainer import History, history_path

TINY = [
    "--model",
    "lstm",
    "--embed-size",
    "8",
    "--hidden-sizes",
    "24",
    "--batch-size",
    "8",
    "--bptt",
    "25",
    "--threads",
    "1",
    "--no-progress",
]


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(
        'preset = "synthetic"\n'
        'data = "synthetic"\n'
        "epochs = 2\n"
        "lr = 0.5\n"
        'lr_schedule = "halve"\n'
        "halve_after = 1\n"
        "[data_options]\n"
        "n_chars = 12000\n"
        "seed = 3\n"
    )
    return path


def test_train_evaluate_sample(tmp_path, config, capsys):
    out = tmp_path / "runs" / "tiny.npz"
    assert main(["train", "--config", str(config), *TINY, "--lr", "0.01", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "lstm" in text and "on synthetic" in text
    assert "epoch 1: train bpc" in text and "epoch 2: train bpc" in text
    done = [l for l in text.splitlines() if l.startswith("done")][0]
    assert "valid bpc" in done and "test bpc" in done and str(out) in done
    hist = History.load(history_path(out))
    assert [r["lr"] for r in hist] == [0.01, 0.005]  # the flag overrode the file, the file's schedule applied
    ck = checkpoint.load(out)
    s = ck.extra["settings"]
    assert (s["preset"], s["hidden_sizes"], s["data_options"]["n_chars"], s["epochs"]) == ("synthetic", [24], 12000, 2)
    assert ck.model.config["hidden_sizes"] == [24]

    # evaluate: same figure as the final line, from the checkpoint alone
    assert main(["evaluate", str(out), "--split", "test", "--json", "--threads", "1"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert f"test bpc {r['bpc']:.4f}" in done
    assert main(["evaluate", str(out), "--best", "--split", "valid"]) == 0
    assert "synthetic valid: loss" in capsys.readouterr().out

    # sample: deterministic for a seed
    outs = []
    for _ in range(2):
        assert (
            main(["sample", str(out), "--prompt", "ab", "--length", "40", "--seed", "4", "--temperature", "0.8"]) == 0
        )
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and outs[0].startswith("ab") and len(outs[0].rstrip("\n")) == 42


def test_resume_from_the_command_line(tmp_path, capsys):
    out = tmp_path / "r.npz"
    args = ["train", "--preset", "synthetic", *TINY, "--epochs", "1", "--out", str(out)]
    assert main(args + ["--option", "dropout=0.1"]) == 1
    assert "settings of their own: use --dropout" in capsys.readouterr().err
    assert main(args + ["--max-chunks", "3"]) == 0
    assert "done after 0 epoch(s), 3 steps" in capsys.readouterr().out
    assert main(args + ["--resume"]) == 0
    text = capsys.readouterr().out
    assert "epoch 1: train bpc" in text and "done after 1 epoch(s)" in text


def test_restarts_keep_the_run_with_the_lowest_validation_loss(tmp_path, capsys):
    out = tmp_path / "best.npz"
    args = [
        "train",
        "--preset",
        "synthetic",
        *TINY,
        "--epochs",
        "1",
        "--data-option",
        "n_chars=8000",
        "--out",
        str(out),
    ]
    assert main(args + ["--restarts", "3", "--seed", "5"]) == 0
    text = capsys.readouterr().out
    starts = [line for line in text.splitlines() if line.startswith("run ") and "valid" not in line]
    assert starts == ["run 1/3 (seed 5)", "run 2/3 (seed 6)", "run 3/3 (seed 7)"]  # as each run starts
    rows = [line for line in text.splitlines() if line.startswith("run ") and "valid" in line]
    assert [r.split(":")[0] for r in rows] == ["run 1/3 (seed 5)", "run 2/3 (seed 6)", "run 3/3 (seed 7)"]
    bpcs = [float(r.split("valid bpc ")[1].split()[0]) for r in rows]
    kept = [i for i, r in enumerate(rows) if r.endswith("<- kept")]
    assert kept == [min(range(3), key=bpcs.__getitem__)] and len(set(bpcs)) == 3
    ck = checkpoint.load(out)
    assert ck.trainer_state["seed"] == 5 + kept[0]
    assert f"valid bpc {bpcs[kept[0]]:.4f}" in text.splitlines()[-1]
    # the chosen run is the run of its seed alone
    alone = tmp_path / "alone.npz"
    assert (
        main(
            [
                "train",
                "--preset",
                "synthetic",
                *TINY,
                "--epochs",
                "1",
                "--data-option",
                "n_chars=8000",
                "--seed",
                str(5 + kept[0]),
                "--out",
                str(alone),
            ]
        )
        == 0
    )
    assert (checkpoint.load(alone).model.flat_parameters() == ck.model.flat_parameters()).all()
    capsys.readouterr()
    for extra, message in (
        (["--restarts", "2", "--resume"], "resume the chosen run with --restarts 1"),
        (["--restarts", "2", "--select-after", "2"], "select-after = 2 is beyond epochs = 1"),
        (["--restarts", "2", "--select-after", "0"], "select-after must be a positive integer"),
        (
            ["--restarts", "2", "--select-after", "later"],
            "select-after must be a positive integer, auto or none, got 'later'",
        ),
        (["--restarts", "2", "--max-chunks", "3"], "neither checkpoint-every nor max-chunks"),
        (["--restarts", "0"], "restarts must be a positive integer"),
    ):
        assert main(args + extra) == 1
        assert message in capsys.readouterr().err
    # compared after 1 epoch, the kept run trained on to 2
    assert (
        main(
            [
                "train",
                "--preset",
                "synthetic",
                *TINY,
                "--epochs",
                "2",
                "--data-option",
                "n_chars=8000",
                "--out",
                str(out),
                "--restarts",
                "2",
                "--select-after",
                "1",
            ]
        )
        == 0
    )
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("run ") and "valid" in line]
    assert len(rows) == 2 and all("after 1 epochs" in r for r in rows)
    assert checkpoint.load(out).trainer_state["epoch"] == 2


def test_errors_are_reported_clearly(tmp_path, capsys):
    assert main(["evaluate", str(tmp_path / "missing.npz")]) == 1
    assert "checkpoint not found" in capsys.readouterr().err
    (tmp_path / "run.npz").write_bytes(b"")
    assert main(["evaluate", str(tmp_path / "run")]) == 1
    assert f"checkpoint not found: {tmp_path / 'run'} (did you mean {tmp_path / 'run.npz'}?)" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text("lerning_rate = 3\nepoch = 2\n")
    assert main(["train", "--config", str(bad)]) == 1
    assert "unknown setting(s) 'epoch' (did you mean 'epochs'?), 'lerning_rate'; known: [" in capsys.readouterr().err
    assert main(["train", "--model", "transformer", *TINY[2:], "--out", str(tmp_path / "x.npz")]) == 1
    assert "unknown model 'transformer'" in capsys.readouterr().err
    assert main(["train", "--preset", "nope"]) == 1
    assert "unknown preset 'nope'" in capsys.readouterr().err
    assert (
        main(
            [
                "train",
                "--data",
                "embedded",
                *TINY,
                "--batch-size",
                "4000",
                "--bptt",
                "100",
                "--out",
                str(tmp_path / "y.npz"),
            ]
        )
        == 1
    )
    assert "too short" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--hidden-sizes", "a,b"])
    capsys.readouterr()
    # a mistyped flag: named by the command it was given to, with the nearest flag of that command
    with pytest.raises(SystemExit) as e:
        main(["sample", str(tmp_path / "x.npz"), "--prime", "To be"])
    assert e.value.code == 2
    assert capsys.readouterr().err == (
        "multiscale-rnn sample: error: unrecognized arguments: --prime To be (--prime: did you mean --prompt?) "
        "(see multiscale-rnn sample --help)\n"
    )
    # a positional argument given with a flag: told to drop the flag
    with pytest.raises(SystemExit):
        main(["sample", "--checkpoint", str(tmp_path / "x.npz")])
    assert "(--checkpoint: the checkpoint is given without a flag, as in multiscale-rnn sample CHECKPOINT)" in (
        capsys.readouterr().err
    )
    with pytest.raises(SystemExit):
        main(["evaluate", str(tmp_path / "x.npz"), "--zzz"])
    assert "multiscale-rnn evaluate: error: unrecognized arguments: --zzz (see" in capsys.readouterr().err


def test_schedule_flags_are_checked_before_training(tmp_path, capsys):
    # the factor divides the learning rate (PyTorch's gamma=0.5 is --lr-factor 2): below 1 it would raise it
    out = str(tmp_path / "x.npz")
    assert main(["train", *TINY, "--lr-schedule", "halve", "--lr-factor", "0.5", "--out", out]) == 1
    assert "lr-factor must be a number > 1 that divides the learning rate (2 halves it), got 0.5" in (
        capsys.readouterr().err
    )
    # multistep without milestones would train at a constant rate
    assert main(["train", *TINY, "--lr-schedule", "multistep", "--out", out]) == 1
    assert "lr-schedule multistep divides the learning rate at its milestones, and none were given" in (
        capsys.readouterr().err
    )
    # an annealed option the model cannot change is named
    assert main(["train", *TINY, "--anneal", "slope=1,5,0.5", "--out", out]) == 1
    assert "this model has no option that can change during training ('slope' given)" in capsys.readouterr().err
    # a schedule flag the run's schedule does not read changes nothing: refused, naming the schedules that read it
    assert main(["train", *TINY, "--patience", "2", "--out", out]) == 1
    assert "--patience is read only by the plateau schedule, and this run's --lr-schedule is constant" in (
        capsys.readouterr().err
    )
    assert main(["train", *TINY, "--lr-schedule", "plateau", "--lr-every", "step", "--out", out]) == 1
    assert "--lr-every is read only by the halve and multistep schedules" in capsys.readouterr().err
    assert not (tmp_path / "x.npz").exists()


def test_select_agreement_needs_a_model_that_marks_boundaries(tmp_path, capsys):
    out = str(tmp_path / "x.npz")
    args = ["train", *TINY, "--data", "embedded", "--epochs", "1", "--restarts", "2", "--out", out]
    assert main([*args, "--select", "agreement"]) == 1
    assert "select='agreement' compares the candidates' boundaries, and LSTM marks none" in capsys.readouterr().err
    assert not (tmp_path / "x.npz").exists()
    with pytest.raises(SystemExit):
        main([*args, "--select", "bpc"])
    assert "argument --select: invalid choice: 'bpc'" in capsys.readouterr().err
    assert resolve_settings(flags={"select": "agreement", "restarts": 2})["select"] == "agreement"
    with pytest.raises(ValueError, match="--select chooses among restarts, and this run trains once"):
        resolve_settings(flags={"select": "agreement"})
    assert resolve_settings()["select"] == "loss"


def test_settings_precedence():
    s = resolve_settings()
    assert s["preset"] == DEFAULT_PRESET and s["data"] == "embedded"
    s = resolve_settings(config={"preset": "synthetic", "lr": 0.1, "clip_norm": "none"}, flags={"lr": 0.2})
    assert (s["preset"], s["data"], s["lr"], s["clip_norm"]) == ("synthetic", "synthetic", 0.2, None)
    s = resolve_settings(config={"preset": "synthetic"}, flags={"preset": "quick"})
    assert s["preset"] == "quick" and s["data"] == "embedded"
    with pytest.raises(ValueError, match="anneal.slope"):
        resolve_settings(config={"anneal": {"slope": [1, 2]}})
    assert DEFAULT_PRESET in PRESETS and all("about" in p for p in PRESETS.values())


@pytest.mark.parametrize("name", ["ptb-char-hm-lstm-recipe", "text8-hm-lstm-recipe"])
def test_real_text_hm_lstm_recipe_presets(name):
    # the measured real-text recipe: 3 x 128 with layer norm, the linear head, the boundary warm-up and
    # a rate target on layer 2 as well as layer 1 (docs/studies/hm_lstm_real_text.md)
    s = resolve_settings(preset=name)
    assert s["data"] == name.removesuffix("-hm-lstm-recipe") and s["epochs"] in (13, 5)
    m = model_from_settings(s, vocab_size=50)
    assert type(m) is msr.HMLSTM
    assert m.config["hidden_sizes"] == [128, 128, 128] and m.config["head"] == "linear"
    assert m.config["layer_norm"] and m.config["rate_target"] == [0.18, 0.06] and m.config["warmup"] == 500
    assert "detectors" in m.default_model_options()
    # --data-path alone is where the preset's corpus is (own text only under a built-in corpus's preset)
    s = resolve_settings(flags={"preset": name, "data_path": "/corpora/x"})
    assert s["data"] == name.removesuffix("-hm-lstm-recipe") and s["data_path"] == "/corpora/x"
    assert resolve_settings(flags={"preset": "synthetic", "data_path": "/corpora/x"})["data"] == "text"


def test_phrase_recipe_preset_trains_from_the_command_line(tmp_path, capsys):
    # the 3-layer default recipe, the phrase recipe (docs/models/hm_lstm.md, "The default recipe"): the model's
    # defaults give its per-layer options, its per-layer warm-up reaches the Trainer, the runs are compared where
    # the model says, and a short run of it from the command line is checkpointed
    s = resolve_settings(preset="synthetic-hm-lstm-phrases")
    m = model_from_settings(s, vocab_size=30)
    assert m.config["hidden_sizes"] == [32, 32, 32] and m.config["detector_input"] == "below"
    assert m.config["gradient"] == "switch" and m.config["rate_target"] == [0.18, 0.05]
    assert m.config["rate_slack_below"] == [0.12, 0.0] and m.config["rate_slack_above"] == [0.2, 0.0]
    assert m.config["warmup"] == [250, 750] and set(m.default_model_options()) == {"detectors_l0", "detectors_l1"}
    assert m.selection_step() is None  # the runs compared at the end
    assert (s["restarts"], s["select_after"], s["epochs"], s["seed"]) == (
        5,
        "auto",
        40,
        25,
    ) and "options" not in PRESETS["synthetic-hm-lstm-phrases"]
    out = tmp_path / "phrases.npz"
    assert (
        main(
            [
                "train",
                "--preset",
                "synthetic-hm-lstm-phrases",
                "--epochs",
                "1",
                "--restarts",
                "1",
                "--data-option",
                "n_chars=6000",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "valid bpc" in text
    # the boundaries of the trained model against the generated text's words and phrases, on one line
    report = [line for line in text.splitlines() if line.startswith("boundaries on the first")]
    assert len(report) == 1 and "z1 against word ends: precision" in report[0]
    assert "z2 against phrase ends: precision" in report[0] and "z2 = 1 on 0.0% of steps" in report[0]
    ck = checkpoint.load(out)
    assert ck.model.config["warmup"] == [250, 750]
    assert ck.model.parameters()["bias_l1"][4 * 32] == -1e4  # one short epoch: still within the warm-up
    # a newcomer's run shorter than the warm-up is told why its boundaries never fired
    notes = [line for line in text.splitlines() if line.startswith("note:")]
    assert notes == [
        "note: the run ended after 3 updates, within the boundary warm-up: z1 (held off for 250 updates) "
        "and z2 (held off for 750 updates) never fired, so the layers above them never updated. Train "
        "longer (--epochs) or shorten the warm-up (--option warmup=N, or a list per layer)"
    ]
    assert msr.HMLSTM(30, 8, (8, 8), warmup=0).held_off_note(10) is None  # every detector on: nothing to say
    # one layer: no detector, so no boundaries; the note says how to get them (and nothing of a warm-up)
    assert msr.HMLSTM(30, 8, (16,)).end_of_run_notes(msr.data.load("embedded"), 10) == [
        "note: this HM-LSTM has one layer and so no boundary detector (the top layer has none): it learned no "
        "boundaries. Give it two layers or more (--hidden-sizes 16,16)"
    ]
    assert msr.HMLSTM(30, 8, (16,), top_boundary=True).no_detector_note() is None
    assert msr.LSTM(30, 8, (8,)).end_of_run_notes(msr.data.load("embedded"), 10) == []


def test_the_boundary_report_on_plain_text_scores_words_and_clauses():
    """On character text without known segments the end-of-run line scores z^1 against the whitespace words
    and z^2 against the clause ends, where the text has them; on bytes it says nothing."""
    from multiscale_rnn.models.hm_lstm import boundary_scores, first_seen

    text = "to be, or not to be: that is the question.\nwhether tis nobler in the mind to suffer; " * 8
    corpus = msr.data.char_corpus(text, text, name="own")
    m = msr.HMLSTM(corpus.vocab_size, 8, (8, 8, 8), warmup=0, seed=3)
    ids = corpus.valid[:300]
    z = m.trace(ids).z > 0.5
    refs = {"word": msr.data.word_boundaries(text[:300]), "clause": msr.data.clause_boundaries(text[:300])}
    line = m.boundary_report(corpus, n=300)
    assert line.startswith("boundaries on the first 300 validation symbols (tolerance 1): z1 against word ends: ")
    for l, level in ((0, "word"), (1, "clause")):
        sc = boundary_scores(z[l], first_seen(refs[level]), 1)
        assert f"z{l + 1} against {level} ends: precision {sc['precision']:.2f}, recall {sc['recall']:.2f}" in line
    # no whitespace: no words to score, the clause ends still; no mark or line end either: no line at all
    glued = msr.data.char_corpus("abc.def,ghi" * 40, "abc.def,ghi" * 40)
    line = msr.HMLSTM(glued.vocab_size, 8, (8, 8, 8), warmup=0).boundary_report(glued)
    assert "word ends" not in line and "z2 against clause ends" in line
    plain = msr.data.char_corpus("abcdefghi" * 40, "abcdefghi" * 40)
    assert msr.HMLSTM(plain.vocab_size, 8, (8, 8), warmup=0).boundary_report(plain) is None
    raw = msr.data.char_corpus(text, text, level="byte")
    assert msr.HMLSTM(raw.vocab_size, 8, (8, 8), warmup=0).boundary_report(raw) is None


def test_build_model_registry():
    m = build_model("RNN", vocab_size=5, embed_size=3, hidden_sizes=[4])
    assert type(m) is msr.ElmanRNN
    assert type(build_model("gru", vocab_size=5, embed_size=3, hidden_sizes=[4])) is msr.GRU
    assert {"lstm", "gru", "rnn"} <= set(model_names())
    register_model("tiny-lstm", lambda **kw: msr.LSTM(embed_size=2, hidden_sizes=(3,), **kw))
    assert build_model("tiny_lstm", vocab_size=5).config["hidden_sizes"] == [3]
    with pytest.raises(ValueError, match="unknown model 'nope'; known models: .*lstm"):
        build_model("nope")
    with pytest.raises(ValueError, match=r"unknown model 'hm_lstmm' \(did you mean 'hmlstm'\?\)"):
        build_model("hm_lstmm")


def test_module_entry_point_runs():
    r = subprocess.run([sys.executable, "-m", "multiscale_rnn", "presets"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"{DEFAULT_PRESET} (default)" in r.stdout


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_preset_printed_as_toml_reads_back_as_the_preset(tmp_path, capsys, name):
    # `presets NAME > run.toml` is a config to edit: read back, it gives the preset's every setting
    assert main(["presets", name]) == 0
    text = capsys.readouterr().out
    assert text.startswith("# ") and f'preset = "{name}"' in text
    path = tmp_path / "run.toml"
    path.write_text(text)
    cfg = load_config(path)
    want = {k: v for k, v in PRESETS[name].items() if k != "about"}
    assert sorted(cfg) == sorted([*want, "preset"])
    assert {k: _nones(cfg[k]) for k in want} == json.loads(json.dumps(want))
    if name in ("quick", "synthetic", "synthetic-hm-lstm-phrases"):
        assert resolve_settings(config=cfg) == resolve_settings(flags={"preset": name})


def _nones(v):
    """A TOML value with "none" read as None, as the settings read it."""
    return {k: _nones(x) for k, x in v.items()} if isinstance(v, dict) else None if v == "none" else v


def test_a_model_option_none_in_toml_or_a_flag_is_none():
    # TOML has no null: the ptb-char-hm-lstm preset's rate_target = None is written "none"
    cfg = {"model": "hmlstm", "options": {"rate_target": "none", "warmup": 0}}
    assert resolve_settings(config=cfg)["options"] == {"rate_target": None, "warmup": 0}
    assert (
        resolve_settings(flags={"model": "hmlstm", "options": {"rate_target": "NULL"}})["options"]["rate_target"]
        is None
    )


def test_presets_name_refuses_an_unknown_preset(capsys):
    assert main(["presets", "quik"]) == 1
    assert "unknown preset 'quik' (did you mean quick?)" in capsys.readouterr().err
