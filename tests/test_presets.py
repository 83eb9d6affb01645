"""The presets: each family declares its own (``PRESETS`` in the module that defines it) and
``multiscale_rnn.presets`` gathers them from the registry; the merged table is unchanged by where
the entries live (a snapshot of its JSON), and no code outside a family's files names the family."""

import hashlib
import io
import json
import sys
import tokenize
from pathlib import Path

import pytest

import multiscale_rnn as msr
from multiscale_rnn import presets

# json.dumps(PRESETS, sort_keys=True) when the presets moved from presets.py to their families; since
# then the about text of the *-hm-lstm-recipe presets names the study page its measurement moved to, and
# the VCRNN / VCGRU presets take the measured penalty weight 1 (docs/studies/vcrnn_measurements.md), and
# the HM-LSTM presets' about text says over how many seeds (or in how many runs) its claims were measured,
# the ptb-word-hornn-* presets take the RNNLM toolkit's schedule (newbob), and synthetic-hm-lstm's about text
# names the protocol recipe, the 2-layer defaults since then; synthetic-hm-lstm-phrases trains the band recipe,
# the 3-layer defaults since then (40 epochs, seed 25), and the *-hm-lstm-recipe presets hold its band at 0;
# the *-word-hornn-* presets train at the paper's learning rate, 0.5 (docs/models/hornn.md), and with the whole
# recipe of reproduce hornn-table2 (models.hornn.RECIPE: the class softmax, init, weight decay, column norm), the
# column norm at 4.0 since 2026-12-02 (2.0 before: docs/models/hornn.md).
SNAPSHOT_SHA256 = "dd44ec6d434d0a77d604bc5f7f69029a4687805c103a521d20a5e877b6963da0"
SNAPSHOT_NAMES = sorted(
    ["quick", "synthetic", "ptb-char-lstm", "ptb-char-hm-lstm", "ptb-char-hm-lstm-recipe", "text8-hm-lstm-recipe"]
    + ["synthetic-hm-lstm", "synthetic-hm-lstm-phrases", "ptb-char-fs-lstm-2", "ptb-char-fs-lstm-4"]
    + ["enwik8-fs-lstm-2", "enwik8-fs-lstm-4", "enwik8-large-fs-lstm-4"]
    + [f"{c}-word-hornn-{p}" for c in ("ptb", "text8") for p in ("plain", "max", "fofe", "gated")]
    + ["ptb-char-vcrnn", "ptb-char-vcgru", "ptb-bits-vcrnn", "nottingham-vcrnn"]
    + [f"text8-vcgru-{t}" for t in ("0.3", "0.4", "0.5")]
)

SRC = Path(msr.__file__).resolve().parent


def test_merged_presets_equal_the_snapshot():
    assert sorted(presets.PRESETS) == SNAPSHOT_NAMES
    text = json.dumps(presets.PRESETS, sort_keys=True)
    assert hashlib.sha256(text.encode()).hexdigest() == SNAPSHOT_SHA256
    assert presets.DEFAULT_PRESET == "quick" and presets.DEFAULT_PRESET in presets.PRESETS
    assert presets.family_presets() == presets.PRESETS


def test_every_preset_comes_from_a_registered_family_module():
    modules = {sys.modules[cls.__module__] for cls in msr.MODELS.values()}
    owners = {name: m.__name__ for m in modules for name in getattr(m, "PRESETS", {})}
    assert set(owners) == set(presets.PRESETS)
    for name, module in owners.items():
        model = presets.PRESETS[name]["model"]  # the preset builds a class of the module that declares it
        classes = [c for c in msr.MODELS.values() if c.__module__ == module]
        keys = {k.lower().replace("-", "").replace("_", "") for c in classes for k in (c.__name__, *c.aliases)}
        assert model.lower().replace("-", "").replace("_", "") in keys, (name, model, module)


def test_a_name_two_families_declare_is_refused(monkeypatch):
    rnn = sys.modules[msr.LSTM.__module__]
    monkeypatch.setattr(rnn, "PRESETS", {**rnn.PRESETS, "ptb-char-vcrnn": {"model": "lstm"}})
    with pytest.raises(ValueError, match="'ptb-char-vcrnn' is declared twice"):
        presets.family_presets()


def _own_files(cls) -> set:
    """The files of src/ a family may name itself in: the models and references, and every module named
    after the family's model module (``analysis/vcrnn_computation.py`` serves the VCRNN family)."""
    stem = Path(sys.modules[cls.__module__].__file__).stem
    return {p for p in SRC.rglob("*.py") if p.parent.name in ("models", "reference") or stem in p.stem}


def _code_names(path: Path) -> set:
    """The names a module's code uses (comments and strings left out: docs may mention any family)."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return {t.string for t in tokens if t.type == tokenize.NAME}


@pytest.mark.parametrize("name", sorted(msr.MODELS))
def test_no_code_outside_a_family_names_it(name):
    cls = msr.MODELS[name]
    allowed = _own_files(cls) | {SRC / "__init__.py", SRC / "models" / "__init__.py"}
    named = [str(p.relative_to(SRC)) for p in sorted(SRC.rglob("*.py")) if p not in allowed and name in _code_names(p)]
    assert not named, f"{name} is named in {named}"


# ---- presets.build: a preset as Python objects ------------------------------------------------------
def test_build_gives_the_command_lines_model_trainer_and_corpus(tmp_path):
    run = presets.build("quick", epochs=1, hidden_sizes=[16], embed_size=8, progress=False)
    model, trainer, corpus, s = run  # a named tuple
    assert corpus.name == "embedded" and model.vocab_size == corpus.vocab_size == 84
    assert isinstance(model, msr.LSTM) and model.config["hidden_sizes"] == [16]
    assert (trainer.batch_size, trainer.bptt, trainer.clip_norm) == (16, 50, 1.0)  # the preset's
    assert trainer.optimizer.lr == pytest.approx(4e-3)
    assert s["epochs"] == 1 and s["preset"] == "quick"
    # the model the command line builds from the same settings, parameter for parameter
    from multiscale_rnn.command_line.build import model_from_settings
    from multiscale_rnn.command_line.settings import resolve_settings

    flags = dict(epochs=1, hidden_sizes=[16], embed_size=8, progress=False)
    twin = model_from_settings(resolve_settings(preset="quick", flags=flags), corpus.vocab_size)
    assert (twin.flat_parameters() == model.flat_parameters()).all()
    history = run.fit(max_chunks=3, checkpoint=tmp_path / "q.npz")
    assert trainer.step == 3 and history is trainer.history
    assert msr.checkpoint.load(tmp_path / "q.npz").extra["settings"]["preset"] == "quick"


def test_build_reads_a_corpus_from_data_path(tmp_path):
    text = tmp_path / "mine.txt"
    text.write_text("the cat sat on the mat. " * 200)
    run = presets.build("quick", data_path=text, progress=False)
    assert run.corpus.vocab_size == len(set("the cat sat on the mat.")) and run.settings["data"] == "text"


def test_build_refuses_an_unknown_preset_naming_the_closest():
    with pytest.raises(ValueError, match=r"unknown preset 'ptb-char-hmlstm' \(did you mean ptb-char-hm-lstm\?\)"):
        presets.build("ptb-char-hmlstm")
    with pytest.raises(TypeError, match="must be a str"):
        presets.build(3)


def test_build_refuses_bad_overrides_by_name():
    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['lerning_rate'\]"):
        presets.build("quick", lerning_rate=1e-3)
    with pytest.raises(ValueError, match="batch-size must be a positive integer, got 0"):
        presets.build("quick", batch_size=0)
    with pytest.raises(ValueError, match="progress must be True, False, 'bar' or 'lines', got 'yes'"):
        presets.build("quick", progress="yes")
    assert presets.build("quick", progress="lines").trainer.progress == "lines"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        presets.build("ptb-char-hm-lstm", data_path="/nonexistent/ptb")
