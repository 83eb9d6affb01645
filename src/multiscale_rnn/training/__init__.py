"""Training, one module per job.

evaluation.py   evaluate, sample, and the figures of a loss (bits, perplexity, their labels)
inputs.py       what fit and best_of take as data (a corpus or token ids, a vocabulary)
state.py        what a trainer's saved state holds, and its check
hooks.py        the events of fit, the Hook interface, and the log and checkpoint hooks
progress.py     the progress display (a tqdm bar or plain lines, the line per epoch)
divergence.py   the divergence guard
early_stopping.py  early stopping on the validation loss (EarlyStopping)
logs.py         the CSV log beside the checkpoint and TensorBoard event files
trainer.py      the Trainer: truncated BPTT as a loop over named steps
restarts.py     best_of: random restarts chosen by the validation likelihood or their boundaries' agreement
"""

from ..storage import History, history_path
from .early_stopping import EarlyStopping
from .evaluation import BITS_LABELS, bits_label, evaluate, sample
from .hooks import EVENTS, FitRun, Hook, Step
from .inputs import training_data
from .logs import csv_path
from .restarts import auto_select_after, best_of
from .trainer import Trainer

__all__ = [
    "Trainer",
    "EarlyStopping",
    "csv_path",
    "History",
    "history_path",
    "evaluate",
    "sample",
    "best_of",
    "auto_select_after",
    "training_data",
    "bits_label",
    "BITS_LABELS",
    "Hook",
    "FitRun",
    "Step",
    "EVENTS",
]
