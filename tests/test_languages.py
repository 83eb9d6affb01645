"""The random hierarchical languages of the boundary protocol (multiscale_rnn.data.languages)."""

import json
from pathlib import Path

import numpy as np
import pytest

from multiscale_rnn.data.languages import PHRASE_MARKS, SENTENCE_MARKS, draw_language, generate

SPLIT = Path(__file__).resolve().parents[1] / "src" / "multiscale_rnn" / "data" / "resources" / "boundary_split.json"


def test_a_language_id_names_one_language_and_a_seed_one_text():
    assert draw_language(5) == draw_language(5)
    a, b = generate(draw_language(5), 3000, seed=1), generate(draw_language(5), 3000, seed=1)
    assert a.text == b.text and np.array_equal(a.word_boundaries, b.word_boundaries)
    assert generate(draw_language(5), 3000, seed=2).text != a.text
    short = generate(draw_language(5), 1000, seed=1)
    assert a.text.startswith(short.text)
    assert np.array_equal(a.word_boundaries[:1000], short.word_boundaries)


def test_every_property_varies_across_the_protocols_languages():
    specs = [draw_language(i) for i in range(48)]
    assert {s.morphology for s in specs} == {"none", "suffix", "prefix", "both"}
    assert {s.separator for s in specs} == {" ", ""}
    assert {s.phrases for s in specs} == {"marked", "unmarked"}
    assert {s.stem_lengths for s in specs} == {"uniform", "geometric", "poisson"}
    assert min(len(s.alphabet) for s in specs) <= 8 and max(len(s.alphabet) for s in specs) >= 20
    assert min(s.n_stems for s in specs) < 100 and max(s.n_stems for s in specs) > 1000
    assert min(s.zipf for s in specs) < 0.3 and max(s.zipf for s in specs) > 1.1


@pytest.mark.parametrize("language", [0, 2, 5, 7, 11])
def test_boundaries_mark_word_phrase_and_sentence_ends(language):
    spec = draw_language(language)
    h = generate(spec, 6000, seed=0)
    text = np.array(list(h.text))
    marks = np.isin(text, list(PHRASE_MARKS + SENTENCE_MARKS))
    letters = np.isin(text, list(spec.alphabet))
    # every character is a letter, a mark or the separator
    assert np.all(letters | marks | (text == " ")) and (spec.separator == " " or not (text == " ").any())
    # separators are never boundaries; every mark ends a word and a phrase
    assert not h.word_boundaries[text == " "].any()
    assert h.phrase_boundaries[marks].all()
    assert h.word_boundaries[marks].all()
    # phrases end on word ends, sentences on phrase ends at a sentence mark
    assert not (h.phrase_boundaries & ~h.word_boundaries).any()
    assert not (h.sentence_boundaries & ~h.phrase_boundaries).any()
    assert np.isin(text[h.sentence_boundaries], list(SENTENCE_MARKS)).all()
    if spec.separator == " ":  # spaced: a word ends right before each space
        before_space = np.zeros(len(text), bool)
        before_space[:-1] = text[1:] == " "
        assert np.array_equal(before_space[:-1], h.word_boundaries[:-1])
    if spec.phrases == "unmarked" and spec.sentence_len[1] > 1:  # some phrases end on a letter
        assert (h.phrase_boundaries & letters).any()


@pytest.mark.parametrize("language", [0, 2, 15, 30])  # prefixes, both sides, suffixes, no affixes
def test_morpheme_boundaries_split_words_at_their_affixes(language):
    """Every word end is a morpheme end; inside a word, a morpheme ends after a prefix of the language and
    before a suffix of it, and a language without morphology has one morpheme a word. The text is the
    text without the morphemes (the same draws)."""
    from multiscale_rnn.data.languages import _grammar

    spec = draw_language(language)
    h = generate(spec, 6000, seed=3)
    m, w = h.morpheme_boundaries, h.word_boundaries
    assert not (w & ~m).any()
    inner = m & ~w
    if spec.morphology == "none":
        assert not inner.any()
        return
    assert inner.sum() > 50
    affixes = _grammar(spec)["affixes"]
    pre, suf = affixes.get("prefix", []), affixes.get("suffix", [])
    start = 0
    for end in np.flatnonzero(w)[:100]:
        while h.text[start] == " ":
            start += 1
        word = h.text[start : end + 1].rstrip(PHRASE_MARKS + SENTENCE_MARKS)
        cuts = [int(c) + 1 for c in np.flatnonzero(inner[start : start + len(word)])]
        pieces = [word[i:j] for i, j in zip([0] + cuts, cuts + [len(word)])]
        start = end + 1
        if len(pieces) == 3:
            assert pieces[0] in pre and pieces[2] in suf, pieces
        elif len(pieces) == 2:
            assert (pre and pieces[0] in pre) or (suf and pieces[1] in suf), pieces
        assert len(pieces) <= 1 + len(affixes), pieces


def test_refusals_name_the_argument():
    with pytest.raises(ValueError, match="language must be an integer >= 0, got -1"):
        draw_language(-1)
    with pytest.raises(ValueError, match="n_chars must be an integer >= 1, got 0"):
        generate(draw_language(0), 0)
    with pytest.raises(ValueError, match="seed must be an integer >= 0, got 'a'"):
        generate(draw_language(0), 10, seed="a")


def test_the_committed_split_holds_half_the_languages_back():
    split = json.loads(SPLIT.read_text())
    tune, held = split["tune"], split["heldout"]
    assert len(tune["languages"]) == len(held["languages"]) == 24
    assert not set(tune["languages"]) & set(held["languages"])
    assert not set(tune["seeds"]) & set(held["seeds"]) and len(held["seeds"]) >= 5
    # the split is the one its record says it was drawn with
    perm = np.random.default_rng(20261126).permutation(48).tolist()
    assert sorted(perm[24:]) == held["languages"]
