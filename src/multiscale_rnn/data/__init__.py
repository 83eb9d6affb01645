"""Data for multiscale language models: vocabularies, corpora, batching for
truncated BPTT, loaders of the papers' corpora (download once, checksum, cache,
or a local path), a shipped real text and a generator of hierarchical text
with ground-truth boundaries.

>>> from multiscale_rnn import data
>>> corpus = data.load("embedded")
>>> streams = data.batchify(corpus.train, batch_size=32)
>>> inputs, targets = next(data.chunks(streams, bptt=100))
>>> inputs.shape, targets.shape
((32, 100), (32, 100))

Pen strokes (IAM-OnDB, KanjiVG) load as a :class:`StrokeCorpus` of offset rows
(``data.load("kanjivg")``, :mod:`multiscale_rnn.data.strokes`).

See ``docs/data.md`` for the corpora, the unseen-symbol rule and the caching.
"""

from .batching import batchify, check_length, chunks, num_chunks
from .bits import BitCorpus, bit_corpus, bit_positions, text_bits
from .classes import class_sizes
from .corpus import SPLITS, Corpus, char_corpus, clause_boundaries, split_contiguous, word_boundaries, word_corpus
from .download import (
    ENV_CACHE,
    SOURCES,
    ChecksumError,
    DownloadError,
    FileCheck,
    Remote,
    default_cache_dir,
    download_file,
    fetch,
)
from .loaders import LOADERS, embedded_text, load, ptb_char_text
from .music import (
    BAR,
    END_OF_TUNE,
    MusicSymbol,
    Tune,
    music_corpus,
    parse_abc,
    read_abc_tunes,
    symbol_classes,
    symbol_info,
)
from .strokes import StrokeCorpus, load_iam, load_kanjivg
from .synthetic import HierarchicalText, synthetic_hierarchy
from .text import TEXT_SPLIT_FILES, decode_utf8, text_corpus
from .vocab import EOS, UNK_CHAR, UNK_WORD, Replaced, Vocab, tokenize_words

__all__ = [
    "Vocab",
    "Replaced",
    "Corpus",
    "char_corpus",
    "word_corpus",
    "class_sizes",
    "tokenize_words",
    "word_boundaries",
    "clause_boundaries",
    "split_contiguous",
    "load",
    "LOADERS",
    "embedded_text",
    "ptb_char_text",
    "batchify",
    "chunks",
    "num_chunks",
    "check_length",
    "synthetic_hierarchy",
    "HierarchicalText",
    "fetch",
    "download_file",
    "default_cache_dir",
    "SOURCES",
    "Remote",
    "FileCheck",
    "ChecksumError",
    "DownloadError",
    "ENV_CACHE",
    "EOS",
    "UNK_WORD",
    "UNK_CHAR",
    "SPLITS",
    "BitCorpus",
    "bit_corpus",
    "bit_positions",
    "text_bits",
    "Tune",
    "MusicSymbol",
    "parse_abc",
    "read_abc_tunes",
    "music_corpus",
    "symbol_info",
    "symbol_classes",
    "BAR",
    "END_OF_TUNE",
    "text_corpus",
    "decode_utf8",
    "TEXT_SPLIT_FILES",
    "StrokeCorpus",
    "load_iam",
    "load_kanjivg",
]
