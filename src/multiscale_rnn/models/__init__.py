"""Models by name. ``MODELS`` maps a class name to the class, for checkpoints and the command line."""
from .base import LanguageModel, as_tokens
from .fs_rnn import FSRNN, SequentialLSTM, StackedLSTM
from .hm_lstm import HMLSTM, HMTrace, boundary_scores
from .rnn import GRU, LSTM, ElmanRNN

MODELS = {cls.__name__: cls for cls in (LSTM, GRU, ElmanRNN, HMLSTM, FSRNN, StackedLSTM, SequentialLSTM)}

__all__ = ["LanguageModel", "LSTM", "GRU", "ElmanRNN", "MODELS", "as_tokens", "HMLSTM", "HMTrace", "boundary_scores",
           "FSRNN", "StackedLSTM", "SequentialLSTM"]
