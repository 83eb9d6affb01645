"""Vocabularies, corpora, batching, loaders (local files), shipped text, and the
real corpora of ../shared/data when present."""

import gzip
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from multiscale_rnn import data
from multiscale_rnn.data import loaders

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared(folder):
    path = SHARED / folder
    if not path.is_dir():
        pytest.skip(f"real corpus folder {path} is absent (../shared/data lies beside a full checkout)")
    return path


# -- Vocab --------------------------------------------------------------------------


def test_char_vocab_round_trip():
    v = data.Vocab("abc ")
    ids = v.encode("cab a")
    assert ids.dtype == np.int32
    assert ids.tolist() == [2, 0, 1, 3, 0]
    assert v.decode(ids) == "cab a"
    assert v.size == len(v) == 4
    assert v.itos == ["a", "b", "c", " "] and v.stoi["c"] == 2
    assert v.unk_id is None and v.unit == "char" and v.level == "codepoint"


def test_non_ascii_code_points_encode_and_decode():
    v = data.Vocab(["é", "ж", "a", "😀"])
    assert v.encode("aé😀ж").tolist() == [2, 0, 3, 1]
    assert v.decode([3, 1, 0]) == "😀жé"


def test_unknown_symbol_is_appended_and_used():
    v = data.Vocab(["a", "b"], unit="word", unk="<unk>")
    assert v.unk_id == 2 and v.itos[-1] == "<unk>"
    assert v.encode(["b", "zz", "a"]).tolist() == [1, 2, 0]
    ids, replaced = v.encode_counted(["zz", "yy", "zz"])
    assert ids.tolist() == [2, 2, 2] and replaced == {"zz": 2, "yy": 1}


def test_strict_encode_names_symbol_and_position():
    v = data.Vocab("abc", unk=data.UNK_CHAR)
    assert v.encode("abz").tolist() == [0, 1, v.unk_id]
    with pytest.raises(ValueError, match=r"'z' \(U\+007A\) at position 2 .*strict=True"):
        v.encode("abzz", strict=True)


def test_unknown_symbol_without_unk_raises():
    v = data.Vocab(["the", "cat"], unit="word")
    with pytest.raises(ValueError, match=r"'dog' at position 1 .*no unknown symbol"):
        v.encode("the dog")


def test_word_encode_splits_on_whitespace_with_eos_at_newlines():
    v = data.Vocab(["<eos>", "a", "b"], unit="word")
    assert v.encode("a  b\n\tb\n").tolist() == [1, 2, 0, 2, 0]
    assert v.decode([1, 2, 0]) == "a b <eos>"


def test_tokenize_words():
    assert data.tokenize_words("a b\nc") == ["a", "b", "<eos>", "c"]
    assert data.tokenize_words("a b\nc\n") == ["a", "b", "<eos>", "c", "<eos>"]
    assert data.tokenize_words("a\n\nb") == ["a", "<eos>", "<eos>", "b"]
    assert data.tokenize_words("  ") == []


def test_byte_vocab_encodes_utf8_and_decodes_back():
    text = "héllo wörld"
    raw = text.encode("utf-8")
    v = data.Vocab(sorted(set(raw)), level="byte")
    ids = v.encode(text)
    assert len(ids) == len(raw) == len(text) + 2
    assert v.encode(raw).tolist() == ids.tolist()
    assert v.decode(ids) == text
    assert [v.itos[i] for i in ids] == list(raw)


def test_byte_vocab_unknown_byte_is_named():
    v = data.Vocab([104, 105], level="byte")
    with pytest.raises(ValueError, match=r"byte 0x21 at position 2"):
        v.encode(b"hi!")


def test_decode_rejects_bad_ids():
    v = data.Vocab("ab")
    with pytest.raises(ValueError, match=r"id 7 at position 1 is out of range"):
        v.decode([0, 7])
    with pytest.raises(ValueError, match="1-D"):
        v.decode([[0, 1]])
    with pytest.raises(TypeError, match="integers"):
        v.decode([0.5])


@pytest.mark.parametrize(
    "vocab",
    [
        data.Vocab("xyz", unk=data.UNK_CHAR),
        data.Vocab([0, 65, 255], level="byte", unk=data.UNK_CHAR),
        data.Vocab(["<eos>", "<unk>", "b"], unit="word", unk="<unk>"),
        data.Vocab(["a"], unit="word"),
    ],
)
def test_vocab_json_round_trip(vocab):
    again = data.Vocab.from_json(json.loads(json.dumps(vocab.to_json())))
    assert again == vocab
    assert again.unk_id == vocab.unk_id and again.stoi == vocab.stoi


def test_vocab_rejects_bad_definitions():
    with pytest.raises(ValueError, match="unit"):
        data.Vocab("ab", unit="sentence")
    with pytest.raises(ValueError, match="level"):
        data.Vocab("ab", level="nibble")
    with pytest.raises(ValueError, match=r"duplicate symbol 'a' \(U\+0061\) at ids 0 and 2"):
        data.Vocab("aba")
    with pytest.raises(TypeError, match="1-character"):
        data.Vocab(["ab"])
    with pytest.raises(TypeError, match="0..255"):
        data.Vocab([1, 300], level="byte")
    with pytest.raises(TypeError, match="without whitespace"):
        data.Vocab(["a b"], unit="word")
    with pytest.raises(ValueError, match="at least one symbol"):
        data.Vocab([])
    with pytest.raises(ValueError, match="lacks the key"):
        data.Vocab.from_json({"unit": "char"})
    with pytest.raises(TypeError, match="dict"):
        data.Vocab.from_json(["a"])


# -- Corpora and the unseen-symbol rule -----------------------------------------------


def test_with_vocab_reads_a_corpus_with_another_vocabulary():
    # a model's vocabulary (with an unknown symbol) reads another text: the same symbols, its own ids
    model_vocab = data.Vocab(list("zyxabc ."), unk=data.vocab.UNK_CHAR)
    other = data.char_corpus("abc cab.?", "ba", "c?a")
    assert "?" in other.vocab.stoi
    read = other.with_vocab(model_vocab)
    assert read.vocab is model_vocab and read.name == other.name
    assert model_vocab.decode(read.valid) == "ba"
    assert model_vocab.decode(read.train) == "abc cab." + data.vocab.UNK_CHAR
    # '?' is not the model's: read as its unknown symbol, and counted
    assert read.test.tolist() == [model_vocab.stoi["c"], model_vocab.unk_id, model_vocab.stoi["a"]]
    assert read.stats()["unknown"] == {"train": 1, "valid": 0, "test": 1}
    assert other.test.tolist() == other.vocab.encode("c?a").tolist()  # unchanged
    # without an unknown symbol: refused, naming the split, the symbol and its position
    with pytest.raises(ValueError, match=r"train split: symbol '\?' \(U\+003F\) at position 8 is not in the vocab"):
        other.with_vocab(data.Vocab(list("abc .")))
    with pytest.raises(ValueError, match="same unit and level"):
        other.with_vocab(data.Vocab(list(b"abc ."), level="byte"))


def test_with_vocab_reads_what_the_corpus_own_vocabulary_lacked_with_the_model_vocabulary():
    # 'x' is not in this text's training split, so its own vocabulary reads it as the unknown symbol; the
    # model knows 'x': with_vocab reads it as 'x', not as the model's unknown symbol
    model_vocab = data.Vocab(list("abcx ."), unk=data.vocab.UNK_CHAR)
    other = data.char_corpus("abc cab", "xa.", "c?x")
    assert other.unknown["valid"] == {"x": 1, ".": 1} and other.replaced["valid"].positions.tolist() == [0, 2]
    read = other.with_vocab(model_vocab)
    assert model_vocab.decode(read.valid) == "xa."
    assert read.test.tolist() == [model_vocab.stoi["c"], model_vocab.unk_id, model_vocab.stoi["x"]]
    assert read.stats()["unknown"] == {"train": 0, "valid": 0, "test": 1}
    assert read.replaced["test"].positions.tolist() == [1] and read.replaced["test"].symbols == ["?"]
    # read again with another vocabulary, the records still hold the original symbols
    again = read.with_vocab(data.Vocab(list("abc?x ."), unk=data.vocab.UNK_CHAR))
    assert again.vocab.decode(again.test) == "c?x" and again.stats()["unknown"]["test"] == 0
    # without an unknown symbol, the error names the original symbol, not the corpus's unknown one
    with pytest.raises(ValueError, match=r"test split: symbol '\?' \(U\+003F\) at position 1 is not in"):
        other.with_vocab(data.Vocab(list("abcx .")))
    # bytes: the same at the byte level
    b = data.char_corpus(b"ab ab", b"xa", None, level="byte").with_vocab(data.Vocab(list(b"abx "), level="byte"))
    assert bytes(b.vocab.itos[i] for i in b.valid) == b"xa"


def test_with_vocab_reads_words_rarer_than_min_count_and_keeps_records_through_by_frequency():
    model_vocab = data.Vocab(["the", "cat", "dog", "sat", "<eos>", "<unk>"], unit="word", unk="<unk>")
    other = data.word_corpus("the cat sat the cat the dog", "dog sat owl", None, min_count=2)
    assert other.unknown["train"] == {"sat": 1, "dog": 1} and other.unknown["valid"] == {"dog": 1, "sat": 1, "owl": 1}
    for corpus in (other, other.by_frequency()):
        read = corpus.with_vocab(model_vocab)
        assert read.vocab.decode(read.train) == "the cat sat the cat the dog"
        assert read.vocab.decode(read.valid) == "dog sat <unk>" and read.unknown["valid"] == {"owl": 1}


def test_corpus_checks_its_replaced_records():
    v = data.Vocab(list("ab"), unk=data.vocab.UNK_CHAR)
    unk = v.unk_id
    with pytest.raises(ValueError, match=r"t valid split: replaced has 2 position\(s\) and 1 symbol"):
        data.Corpus([0, 1], [unk, unk], None, v, "t", replaced={"valid": data.Replaced(np.array([0, 1]), ["x"])})
    with pytest.raises(ValueError, match="holding the unknown id"):
        data.Corpus([0, 1], [unk, 0], None, v, "t", replaced={"valid": data.Replaced(np.array([1]), ["x"])})
    with pytest.raises(ValueError, match="the corpus does not have"):
        data.Corpus([0, 1], None, None, v, "t", replaced={"test": data.Replaced(np.array([0]), ["x"])})
    with pytest.raises(TypeError, match="must be a Replaced"):
        data.Corpus([0, 1], None, None, v, "t", replaced={"train": ([0], ["x"])})


def test_char_corpus_vocab_from_training_only_sorted_no_unk_when_not_needed():
    c = data.char_corpus("banana", "nab", "ban")
    assert c.vocab.itos == ["a", "b", "n"]
    assert c.vocab.unk_id is None
    assert c.vocab_size == 3 and c.unit == "char" and c.level == "codepoint"
    assert c.vocab.decode(c.valid) == "nab"
    assert c.stats()["unknown"] == {"train": 0, "valid": 0, "test": 0}


def test_char_corpus_unseen_symbols_map_to_unk_and_are_counted():
    c = data.char_corpus("banana", "nabs!", "zzb")
    assert c.vocab.itos == ["a", "b", "n", data.UNK_CHAR]
    unk = c.vocab.unk_id
    assert unk == 3
    assert c.valid.tolist() == [2, 0, 1, unk, unk]
    assert c.test.tolist() == [unk, unk, 1]
    stats = c.stats()
    assert stats["unknown"] == {"train": 0, "valid": 2, "test": 2}
    assert stats["unknown_symbols"]["test"] == {"z": 2}
    assert stats["unk_tokens"] == {"train": 0, "valid": 2, "test": 2}
    assert stats["tokens"] == {"train": 6, "valid": 5, "test": 3}


def test_replacement_character_in_training_is_the_unk_symbol():
    c = data.char_corpus("ab\ufffd", "ac")
    assert c.vocab.unk_id == c.vocab.stoi["\ufffd"] == 2
    assert c.valid.tolist() == [0, 2]
    assert c.stats()["unknown"]["valid"] == 1


def test_byte_corpus_ids_only_for_bytes_seen():
    c = data.char_corpus("aé", "b", level="byte")
    assert c.vocab.itos == [0x61, 0xA9, 0xC3, data.UNK_CHAR]
    assert c.train.tolist() == [0, 2, 1]
    assert c.valid.tolist() == [3]
    c2 = data.char_corpus(b"\x00\xff\x00", level="byte")
    assert c2.vocab.itos == [0, 255] and c2.valid is None and c2.test is None


def test_char_corpus_bad_text():
    with pytest.raises(ValueError, match="train text is empty"):
        data.char_corpus("")
    with pytest.raises(ValueError, match="valid text is empty"):
        data.char_corpus("abc", "")
    with pytest.raises(TypeError, match="must be str"):
        data.char_corpus(b"abc")
    with pytest.raises(TypeError, match="must be str"):
        data.char_corpus(None)
    with pytest.raises(ValueError, match="level"):
        data.char_corpus("abc", level="word")


def test_word_corpus_eos_and_unk():
    c = data.word_corpus("the cat\nthe dog\n", "the cow\n", "a dog\n")
    assert c.vocab.itos == ["<eos>", "cat", "dog", "the", "<unk>"]
    assert c.unit == "word" and c.level is None
    assert len(c.train) == 6
    assert c.vocab.decode(c.valid) == "the <unk> <eos>"
    stats = c.stats()
    assert stats["unknown"] == {"train": 0, "valid": 1, "test": 1}
    assert stats["unknown_symbols"]["valid"] == {"cow": 1}


def test_word_corpus_unk_in_training_keeps_sorted_place():
    c = data.word_corpus("a <unk> b\n", "a b\n")
    assert c.vocab.itos == ["<eos>", "<unk>", "a", "b"]
    assert c.vocab.unk_id == 1
    stats = c.stats()
    assert stats["unknown"]["train"] == 0 and stats["unk_tokens"]["train"] == 1


def test_word_corpus_no_unk_when_not_needed():
    c = data.word_corpus("a b\n", "b a\n")
    assert c.vocab.unk_id is None and "<unk>" not in c.vocab


def test_word_corpus_bad_text():
    with pytest.raises(ValueError, match="words train text holds only whitespace"):
        data.word_corpus("  \t ")
    with pytest.raises(ValueError, match="test text is empty"):
        data.word_corpus("a b", "a", "")


def test_corpus_checks_its_arrays():
    v = data.Vocab("ab")
    c = data.Corpus([0, 1, 1], None, np.array([1], dtype=np.int64), v, "tiny", "char")
    assert c.train.dtype == np.int32 and c.test.dtype == np.int32 and c.valid is None
    assert list(c.splits) == ["train", "test"]
    with pytest.raises(ValueError, match=r"id 5 at position 2 is out of range for vocab_size 2"):
        data.Corpus([0, 1, 5], None, None, v, "tiny", "char")
    with pytest.raises(ValueError, match="1-D"):
        data.Corpus([[0, 1]], None, None, v)
    with pytest.raises(TypeError, match="integer ids"):
        data.Corpus([0.0, 1.0], None, None, v)
    with pytest.raises(ValueError, match="does not match"):
        data.Corpus([0], None, None, v, "tiny", "word")
    with pytest.raises(ValueError, match="empty"):
        data.Corpus([], None, None, v)


def test_word_boundaries_mark_last_character_of_each_word():
    text = "ab c.\tdé\n  x"
    got = data.word_boundaries(text)
    assert got.dtype == bool and got.shape == (len(text),)
    assert np.flatnonzero(got).tolist() == [1, 4, 7, 11]
    assert data.word_boundaries("").shape == (0,)
    assert data.word_boundaries("a\u3000b").tolist() == [True, False, True]


def test_split_contiguous():
    train, valid, test = data.split_contiguous("abcdefghijklmnopqrst", 0.1, 0.05)
    assert (train, valid, test) == ("abcdefghijklmnopq", "rs", "t")
    assert data.split_contiguous("abc", 0.0, 0.0) == ("abc", None, None)
    with pytest.raises(ValueError, match="valid_fraction"):
        data.split_contiguous("abc", 1.5, 0.0)
    with pytest.raises(ValueError, match="no training data"):
        data.split_contiguous("ab", 0.5, 0.5)


# -- Batching -----------------------------------------------------------------------


def test_batchify_makes_contiguous_streams_and_drops_the_tail():
    ids = np.arange(103)
    s = data.batchify(ids, 4)
    assert s.shape == (4, 25) and s.dtype == np.int32 and s.flags.c_contiguous
    for b in range(4):
        assert s[b].tolist() == list(range(25 * b, 25 * (b + 1)))


def test_chunks_shift_targets_and_cover_the_streams():
    s = data.batchify(np.random.default_rng(0).integers(0, 50, size=4 * 23), 4)
    pairs = list(data.chunks(s, 5))
    assert len(pairs) == data.num_chunks(s, 5) == 5
    assert [x.shape for x, _ in pairs] == [(4, 5)] * 4 + [(4, 2)]
    for x, y in pairs:
        assert x.dtype == y.dtype == np.int32 and x.flags.c_contiguous and y.flags.c_contiguous
    assert np.array_equal(np.concatenate([x for x, _ in pairs], axis=1), s[:, :-1])
    assert np.array_equal(np.concatenate([y for _, y in pairs], axis=1), s[:, 1:])
    exact = data.batchify(np.arange(2 * 11), 2)
    assert data.num_chunks(exact, 5) == 2 and all(x.shape == (2, 5) for x, _ in data.chunks(exact, 5))


def test_batching_rejects_bad_sizes():
    ids = np.arange(100)
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        data.batchify(ids, 0)
    with pytest.raises(TypeError, match="batch_size must be an integer"):
        data.batchify(ids, 2.0)
    with pytest.raises(TypeError, match="batch_size must be an integer"):
        data.batchify(ids, True)
    s = data.batchify(ids, 2)
    with pytest.raises(ValueError, match="bptt must be at least 1, got 0"):
        data.chunks(s, 0)
    with pytest.raises(ValueError, match="bptt must be at least 1, got -3"):
        data.num_chunks(s, -3)
    with pytest.raises(ValueError, match=r"need at least 200 \(2 per stream\)"):
        data.batchify(ids, 100)
    with pytest.raises(ValueError, match="2-D"):
        data.chunks(ids, 3)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        data.chunks(np.zeros((3, 1), dtype=np.int32), 3)
    with pytest.raises(TypeError, match="integers"):
        data.batchify(np.linspace(0, 1, 10), 2)


def test_check_length_says_what_is_needed_and_what_there_is():
    data.check_length(np.zeros(6464, dtype=np.int32), 64, 100)
    with pytest.raises(ValueError, match=r"valid split is too short .*needs at least 6,464 tokens .*has 5,000"):
        data.check_length(np.zeros(5000, dtype=np.int32), 64, 100, what="valid")
    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        data.check_length(np.zeros(10, dtype=np.int32), 0, 1)
    with pytest.raises(ValueError, match="bptt must be at least 1"):
        data.check_length(np.zeros(10, dtype=np.int32), 1, 0)
    with pytest.raises(ValueError, match="test split is missing"):
        data.check_length(None, 1, 1, what="test")


# -- Loaders: names and local paths -------------------------------------------------


def test_unknown_loader_lists_valid_names():
    with pytest.raises(
        ValueError, match=r"unknown corpus 'ptb-chr' \(did you mean 'ptb-char'\?\).*ptb-word.*synthetic"
    ):
        data.load("ptb-chr")
    with pytest.raises(TypeError, match="name must be a str"):
        data.load(3)


def test_missing_local_path_is_named(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match="nowhere"):
        data.load("ptb-char", path=missing)
    with pytest.raises(FileNotFoundError, match=r"lacks ptb\.train\.txt"):
        data.load("ptb-word", path=tmp_path)


def test_loader_arguments_are_checked(tmp_path):
    with pytest.raises(TypeError, match="unexpected option"):
        data.load("embedded", n_chars=10)
    with pytest.raises(ValueError, match="takes no path"):
        data.load("embedded", path=tmp_path)
    with pytest.raises(ValueError, match="takes no path"):
        data.load("synthetic", path=tmp_path)
    (tmp_path / "one.txt").write_text("x")
    with pytest.raises(ValueError, match="single file"):
        data.load("ptb-char", path=tmp_path / "one.txt")


def test_local_enwik8_file_is_byte_level_with_proportional_split(tmp_path):
    raw = bytes(range(32, 127)) * 10 + "é".encode("utf-8") * 5  # 950 + 10 bytes
    (tmp_path / "enwik8").write_bytes(raw)
    c = data.load("enwik8", path=tmp_path)
    assert (len(c.train), len(c.valid), len(c.test)) == (864, 48, 48)
    assert c.level == "byte" and c.vocab.unk_id == 95
    assert c.stats()["unknown"] == {"train": 0, "valid": 0, "test": 10}


def test_text8_and_enwik8_full_split_is_90m_5m_5m():
    assert loaders._fixed_or_proportional(100_000_000) == (90_000_000, 95_000_000)
    assert loaders._fixed_or_proportional(1000) == (900, 950)


def test_local_text8_prefix_drops_the_partial_last_word(tmp_path):
    text = " anarchism originated as a term of abuse first used against earl" * 10 + " partialwo"
    (tmp_path / "text8_prefix.txt").write_text(text)
    c = data.load("text8", path=tmp_path)
    kept = text[: text.rindex(" ")]
    total = len(c.train) + len(c.valid) + len(c.test)
    assert total == len(kept)
    assert len(c.valid) == len(c.test) == round(0.05 * len(kept))
    assert c.vocab.decode(np.concatenate([c.train, c.valid, c.test])) == kept


def test_ptb_char_text_decoding():
    raw = "a e r _ b a n k \n n _ y . \n \n "
    assert data.ptb_char_text(raw) == "aer bank\nn y.\n"


# -- Shipped text -------------------------------------------------------------------


def test_embedded_text_is_the_documented_file():
    text = data.embedded_text()
    assert 100_000 <= len(text.encode("utf-8")) <= 1_000_000
    assert hashlib.sha256(text.encode("utf-8")).hexdigest() == loaders.EMBEDDED_SHA256
    assert "THE DEVIL'S DICTIONARY" in text[:400] and "A Public Domain Text" in text[:600]
    assert "ZOOLOGY, n." in text


def test_embedded_resource_is_gzip_and_documented():
    folder = Path(data.__file__).parent / "resources"
    blob = (folder / "devils_dictionary.txt.gz").read_bytes()
    assert blob[:2] == b"\x1f\x8b" and len(gzip.decompress(blob)) == len(data.embedded_text())
    source = (folder / "SOURCE.md").read_text()
    assert loaders.EMBEDDED_SHA256 in source and "public domain" in source.lower()


def test_embedded_corpus():
    c = data.load("embedded")
    n = len(data.embedded_text())
    assert (len(c.valid), len(c.test)) == (round(0.05 * n), round(0.05 * n))
    assert len(c.train) + len(c.valid) + len(c.test) == n
    assert c.vocab.unk_id is None and c.unit == "char"
    assert c.vocab.decode(np.concatenate([c.train, c.valid, c.test])) == data.embedded_text()
    data.check_length(c.train, 64, 100)


# -- Real corpora in ../shared/data -------------------------------------------------


def test_ptb_char_counts_and_alphabet():
    c = data.load("ptb-char", path=shared("ptb"))
    assert (len(c.train), len(c.valid), len(c.test)) == (5_017_482, 393_042, 442_423)
    assert c.vocab_size == 50 and c.vocab.unk_id is None
    assert " " in c.vocab and "\n" in c.vocab and "_" not in c.vocab
    assert c.stats()["unknown"] == {"train": 0, "valid": 0, "test": 0}
    assert c.vocab.decode(c.train[:20]) == "aer banknote berlitz"


def test_ptb_char_text_matches_the_word_files():
    folder = shared("ptb")
    chars = data.ptb_char_text((folder / "ptb.char.valid.txt").read_text())
    words = (folder / "ptb.valid.txt").read_text()
    assert chars == "".join(" ".join(line.split()) + "\n" for line in words.splitlines())


def test_ptb_word_counts_and_vocabulary():
    c = data.load("ptb-word", path=shared("ptb"))
    assert (len(c.train), len(c.valid), len(c.test)) == (929_589, 73_760, 82_430)
    assert c.vocab_size == 10_000
    assert c.vocab.unk_id == c.vocab.stoi["<unk>"] and "<eos>" in c.vocab
    stats = c.stats()
    assert stats["unknown"] == {"train": 0, "valid": 0, "test": 0}
    assert stats["unk_tokens"]["train"] > 40_000
    assert c.vocab.decode(c.valid[:4]) == "consumers may want to"


def test_text8_prefix_split():
    folder = shared("text8_prefix")
    raw = (folder / "text8_prefix.txt").read_text()
    c = data.load("text8", path=folder)
    total = len(c.train) + len(c.valid) + len(c.test)
    assert total == raw.rindex(" ") and raw[total] == " "
    assert len(c.valid) == len(c.test) == round(0.05 * total)
    assert c.vocab_size == 27 and c.vocab.unk_id is None
    assert c.vocab.decode(c.train[:22]) == " anarchism originated "


def test_tiny_shakespeare():
    c = data.load("shakespeare", path=shared("tinyshakespeare") / "input.txt")
    assert len(c.train) + len(c.valid) + len(c.test) == 1_115_394
    assert c.vocab_size == 65
    assert c.vocab.decode(c.train[:14]) == "First Citizen:"


def test_a_folder_without_train_txt_is_refused_saying_what_a_corpus_folder_holds(tmp_path):
    with pytest.raises(
        FileNotFoundError, match=r"is a folder without train.txt: a text corpus folder holds train.txt, "
    ):
        data.text_corpus(tmp_path)
    # a folder of texts of other names: how to train on them as one text
    for name in ("b.txt", "a.txt", "c.txt", "d.txt"):
        (tmp_path / name).write_text("some text ", encoding="utf-8")
    with pytest.raises(FileNotFoundError) as e:
        data.text_corpus(tmp_path)
    assert "to train on its 4 .txt files (a.txt, b.txt, c.txt, ...) as one text, join them into one file" in str(
        e.value
    )
    assert f"cat {tmp_path}/*.txt > all.txt" in str(e.value)
