"""Data for multiscale language models: vocabularies, corpora and batching for
truncated BPTT."""

from .batching import batchify, check_length, chunks, num_chunks
from .corpus import SPLITS, Corpus, char_corpus, split_contiguous, word_boundaries, word_corpus
from .vocab import EOS, UNK_CHAR, UNK_WORD, Vocab, tokenize_words
from .synthetic import HierarchicalText, synthetic_hierarchy
