"""Every core option is declared once, in the core's table (cpp/src/cores/<core>.cpp, ``OptionSpec``): the
Python families build their keywords, checks and messages from it and write by hand only what the
core never sees (or a wider keyword standing for a core option, ``replaces_core=True``)."""

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn.models import hm_lstm
from multiscale_rnn.models.base import SHARED_OPTIONS, core_schema

FAMILIES = sorted({cls for cls in msr.MODELS.values() if cls.core_name}, key=lambda c: c.__name__)


def _rows(cls):
    return {r["name"]: r for r in core_schema(cls.core_name)}


def test_every_registered_core_has_a_table():
    cores = set(msr.testing.core_names())
    assert {cls.core_name for cls in FAMILIES} <= cores
    for name in cores:
        for row in core_schema(name):
            assert row["kind"] in ("flag", "count", "number", "choice"), (name, row)
            assert row["doc"], f"the {name} core's option {row['name']!r} has no doc line"
            if row["kind"] == "choice":
                assert row["default"] in row["choices"], (name, row)


@pytest.mark.parametrize("cls", FAMILIES, ids=lambda c: c.__name__)
def test_no_core_option_is_written_in_python(cls):
    """A family option named like a row of its core's table comes from that table (or stands for it
    as a wider keyword), so a default or range can change in one place only."""
    rows = _rows(cls)
    shared = {o.name for o in SHARED_OPTIONS}
    for o in cls.family_options:
        assert o.name not in shared, f"{cls.__name__} redeclares the shared option {o.name!r}"
        if o.name in rows and not o.replaces_core:
            assert o.declared == "core", f"{cls.__name__}.{o.name} is written in Python; the core declares it"
        if o.declared == "core":
            row = rows.get(o.name)
            if row is None:  # a renamed row: found by its doc line
                row = next(r for r in rows.values() if r["doc"] == o.doc)
            assert o.default in (row["default"], None), (cls.__name__, o.name)
            assert o.rule == row["rule"] and tuple(row["choices"]) == (o.choices or ()), (cls.__name__, o.name)


@pytest.mark.parametrize("cls", FAMILIES, ids=lambda c: c.__name__)
def test_every_core_row_is_reachable_from_python(cls):
    """Each row of the core's table is a keyword of the family, or set by the family from one of its
    keywords (per-layer rows, renamed or replaced rows): no core option is out of the user's reach."""
    keywords = cls.all_options()
    model = cls.example(7, dtype="float64")
    for name, row in _rows(cls).items():
        if name in keywords:
            continue
        if row["per_layer"]:
            assert any(k.startswith(name + "_l") for k in model.options), (cls.__name__, name)
        else:
            doc_twin = [o for o in keywords.values() if o.declared == "core" and o.doc == row["doc"]]
            assert doc_twin or name in model.options or name in ("layer_norm_gates", "layer_norm_cell"), (
                cls.__name__,
                name,
            )


@pytest.mark.parametrize("cls", FAMILIES, ids=lambda c: c.__name__)
def test_a_value_outside_a_declared_range_is_refused_by_both(cls):
    """The family's check and the core's agree: a value just outside a declared range is refused in
    Python with the table's rule, and the core refuses it too when handed it directly."""
    vocab = 7
    for o in cls.family_options:
        if o.declared != "core" or not o.core or o.kind is not float or not o.rule.startswith(("in", ">")):
            continue
        row = _rows(cls)[o.name]
        bad = row["lo"] - 1.0 if row["lo"] is not None else row["hi"] + 1.0
        with pytest.raises(ValueError, match=o.name) as e:
            cls.example(vocab, dtype="float64").__class__(vocab, **{**cls.example_options, o.name: bad})
        assert row["rule"] in str(e.value)
        m = cls.example(vocab, dtype="float64")
        with pytest.raises(ValueError, match=o.name):
            msr.testing.core_model(
                cls.core_name,
                vocab,
                int(m.config["embed_size"]),
                list(m.config["hidden_sizes"]),
                0.0,
                0,
                {**m.options, o.name: bad},
            )


def test_hornn_alpha_range_is_the_papers_in_python_and_the_core():
    """FOFE's forgetting factor 0 < alpha < 1 (eq. 5): the core no longer accepts alpha = 1."""
    with pytest.raises(ValueError, match=r"alpha must be a number in \(0, 1\)"):
        msr.HORNN(5, 4, (6,), pooling="fofe", alpha=1.0)
    with pytest.raises(ValueError, match=r"'alpha' must be a finite number in \(0, 1\)"):
        msr.testing.core_model("hornn", 5, 4, [6], 0.0, 0, {"pooling": "fofe", "alpha": 1.0})
    assert msr.HORNN(5, 4, (6,), pooling="fofe").config["alpha"] == core_schema("hornn")[2]["default"] == 0.6


def test_hm_lstm_word_recipe_is_the_cores_defaults():
    """The word recipe is what the core does with no options given; the family's declared depth recipes (the
    protocol recipe up to 2 layers, the band recipe from 3) change it by name."""
    rows = {r["name"]: r for r in core_schema("hm_lstm")}
    two = msr.HMLSTM(5, 4, (6, 6), **hm_lstm.WORD_RECIPE)
    assert two.options["rate_weight"] == rows["rate_weight"]["default"]
    assert two.options["rate_target_l0"] == rows["rate_target"]["default"]
    assert two.options["gradient"] == rows["gradient"]["default"]
    assert two.options["detector_below_l0"] == rows["detector_below"]["default"] == 0.0
    for depth, recipe in ((2, hm_lstm.PROTOCOL_RECIPE), (3, hm_lstm.LEVELS_RECIPE)):
        model = msr.HMLSTM(5, 4, (6,) * depth)
        assert model.config == msr.HMLSTM(5, 4, (6,) * depth, **recipe).config != two.config
    # the core alone, no options: the same numbers as the 2-layer family model's options
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, size=(2, 4)).astype(np.int32)
    bare = msr.testing.core_model("hm_lstm", 5, 4, [6, 6], 0.0, 0, {})
    full = msr.testing.core_model("hm_lstm", 5, 4, [6, 6], 0.0, 0, dict(two.options))
    bare.flat_params()[:] = full.flat_params()[:] = rng.normal(0, 0.3, size=full.flat_params().size)
    bare.reset_state(2)
    full.reset_state(2)
    np.testing.assert_array_equal(bare.forward(x, True), full.forward(x, True))
