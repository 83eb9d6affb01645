"""The ``Trainer``: truncated back-propagation through time (TBPTT).

The training text (1-D token ids) is cut into B contiguous streams (``data.batchify``); each epoch
walks them T = ``bptt`` steps at a time (``data.chunks``). The recurrent state after one chunk is
the starting state of the next (gradients stop at chunk boundaries); it is zero at the start of
every epoch. One optimiser step per chunk::

    zero_grad; loss = mean over B*T targets of -ln p(target); backward (accumulates into the flat
    gradient buffer); all-reduce (distributed); clip (norm, then value); check loss and gradient are
    finite; optimiser step; constraint

``fit`` is a loop over these steps; around them it calls the hooks (``hooks.py``): the progress
display, the ``log`` callable, the divergence guard, early stopping, the CSV log, TensorBoard, the checkpoint
writer, then ``Trainer(hooks=...)``.
"""

from __future__ import annotations

import math
import re
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple, Union, cast

import numpy as np

from .. import data
from .._checks import is_number, non_negative_int, positive_int, positive_number
from .._native import core as _core
from ..checkpoint import check_room
from ..distributed import data_parallel
from ..optim import Adam, Optimizer
from ..schedules import LRSchedule, check_lr_schedule
from ..storage import History, check_writable, history_path
from .divergence import MISSING, DivergenceGuard
from .early_stopping import EarlyStopping
from .evaluation import BITS_LABELS, bits, evaluate
from .hooks import CheckpointWriter, FitRun, LogCalls, Step, check_hooks
from .inputs import training_data
from .logs import CsvLog, TensorBoardLog, csv_path, writer_class
from .progress import ProgressDisplay
from .sequences import SequenceBatches, as_sequences, is_sequences, sequences_fingerprint
from .state import check_state, ids_fingerprint, saved_option_values

if TYPE_CHECKING:
    from ..models.base import LanguageModel

__all__ = ["Trainer", "merged_model_options"]


def merged_model_options(model, model_options) -> Tuple[Dict[str, Union[float, Callable]], set]:
    """The model options a trainer applies, and the names of those that are the model's own: ``model_options``
    added to the model's own schedules (``model.default_model_options()``), whose entries of a family that
    ``model_options`` names are left out (``detectors`` or any ``detectors_l{l}`` replaces all of the model's
    ``detectors`` and ``detectors_l{l}`` entries). ``TypeError`` for a value that is neither a number nor a
    callable of (epoch, step)."""
    own = getattr(model, "default_model_options", None)
    given = dict(model_options or {})
    family = lambda name: re.sub(r"_l\d+$", "", str(name))  # noqa: E731
    named = {family(k) for k in given}
    own = {k: v for k, v in (own() if own is not None else {}).items() if family(k) not in named}
    merged = {**own, **given}
    for name, sched in merged.items():
        if not (callable(sched) or is_number(sched)):
            raise TypeError(f"model option {name!r} must be a number or a callable of (epoch, step)")
    return merged, set(own)


class Trainer:
    """Truncated-BPTT training of a language model.

    Parameters
    ----------
    model : a ``LanguageModel``.
    optimizer : an ``optim.Optimizer`` (default ``Adam(lr=2e-3)``).
    clip_norm : scale the gradient so its global L2 norm is at most this (None: off).
    clip_value : then clamp every gradient element to [-clip_value, clip_value] (None: off).
    batch_size, bptt : B streams, T steps per chunk.
    lr_schedule : a ``schedules.LRSchedule`` asked for the learning rate after every epoch.
    model_options : dict option name -> number or callable of (epoch, step), applied with
        ``model.set_option`` before every chunk (e.g. ``{"slope": schedules.linear(1, 5, 0.04)}``).
        Added to the model's own schedules (``model.default_model_options()``: the HM-LSTM's boundary
        warm-up, ``{"detectors": schedules.step(0, 1, at_step=warmup)}``, or one ``detectors_l{l}`` per
        layer), which an entry of the same family replaces (``detectors`` or any ``detectors_l{l}``
        replaces all of the model's ``detectors`` and ``detectors_l{l}`` entries).
    seed : the model's random generator (dropout and any other noise) is seeded from it when a new
        training run starts, so the same model, data, seed and thread count give identical runs.
    progress : True: a tqdm bar (loss, bits per token, tokens per second) when standard error is a
        terminal or the output goes to a Jupyter notebook (tqdm's widget where ipywidgets is installed,
        else the text bar), else plain lines (one about every 10 % of an epoch and at least every 30 s,
        no carriage returns, for log files); "bar" or "lines" to choose; False for none.
    eval_batch_size : streams for validation (default: ``batch_size``; see ``evaluate``).
    unit : "char", "word", "bit", "symbol" or "step": only the label of the bits figure in the progress bar
        (bpc, bpw, bits/bit, bits/symbol, bits/step); default "step" for a model without a vocabulary
        (a pen-stroke model), else "char".
    constraint : a callable of the model run after every optimiser step (e.g.
        ``optim.ColumnNorm(max_norm)``, column normalisation); None: off.
    distributed : False, or data-parallel training over MPI (``multiscale_rnn.distributed``): True
        for ``MPI.COMM_WORLD``, or an mpi4py communicator. Each rank reads its share of the
        ``batch_size`` streams and the gradients are averaged after each chunk, so K ranks give the
        parameters one process gives; only rank 0 prints, calls ``log`` and writes checkpoints.
        ``fit``, ``save_checkpoint`` and ``resume_from`` are then collective (every rank calls them).
    divergence : the divergence guard, in bits per token (off by default; 0.1 is a sensible margin for
        runs whose validation figure should fall steadily): when an epoch's validation
        bits per token lie more than this above the best so far, the run has diverged. "So far" counts
        from the last time the model's own schedules changed the model (``default_model_options``: a
        boundary detector starting after its warm-up makes a new model, whose first epochs are not
        compared with the old one's). ``fit`` then says so (a ``RuntimeWarning`` naming both epochs
        and figures), stops, puts that best epoch's parameters and option values (an annealed
        sharpness or slope) back into the model and leaves the last
        checkpoint as it was; the epoch's history row has ``"diverged": True`` and ``trainer.diverged``
        the figures (None again when the next ``fit`` starts: call it, at a lower learning rate, to go
        on from the best parameters). None (the default) turns the guard off. Needs validation data. Off by default
        because some recipes are not monotone: an HM-LSTM's validation figure jumps for a few epochs
        after each detector starts.
    early_stopping : an ``EarlyStopping(patience, min_delta)``: stop once the validation loss has not improved
        for ``patience`` epochs and put the best parameters back at the end (``training.early_stopping``);
        its counters are saved in checkpoints. None (the default): off.
    tensorboard : a folder for TensorBoard event files of the run's figures (every step and epoch), or None
        (the default). Needs tensorboardX (``pip install "multiscale-rnn[tensorboard]"``): ``ImportError``
        naming it otherwise.
    hooks : objects called on the events of ``fit`` (epoch start, every step, evaluation, epoch end,
        checkpoint, ...) after the trainer's own; see ``multiscale_rnn.training.hooks`` for the events
        and ``Hook`` for a base class. A hook may stop the run (``run.stop()``).
    """

    def __init__(
        self,
        model: LanguageModel,
        optimizer: Optional[Optimizer] = None,
        clip_norm: Optional[float] = None,
        clip_value: Optional[float] = None,
        batch_size: int = 64,
        bptt: int = 100,
        lr_schedule: Optional[LRSchedule] = None,
        model_options: Optional[Dict[str, Union[float, Callable]]] = None,
        seed: int = 0,
        progress: bool = True,
        eval_batch_size: Optional[int] = None,
        unit: Optional[str] = None,
        constraint: Optional[Callable] = None,
        distributed: Any = False,
        divergence: Optional[float] = None,
        early_stopping: Optional[EarlyStopping] = None,
        tensorboard: Union[str, Path, None] = None,
        hooks: Sequence[Any] = (),  # objects with event methods (a Hook or any other)
    ) -> None:
        self.model = model
        self.optimizer = optimizer if optimizer is not None else Adam()
        if not isinstance(self.optimizer, Optimizer):
            raise TypeError(f"optimizer must be a multiscale_rnn.optim.Optimizer, got {type(optimizer).__name__}")
        self.clip_norm = positive_number(clip_norm, "clip_norm", allow_none=True)
        self.clip_value = positive_number(clip_value, "clip_value", allow_none=True)
        self.batch_size = positive_int(batch_size, "batch_size")
        self.bptt = positive_int(bptt, "bptt")
        self.eval_batch_size = positive_int(eval_batch_size, "eval_batch_size", allow_none=True) or self.batch_size
        self.lr_schedule = check_lr_schedule(lr_schedule)
        self.model_options, self._own_options = merged_model_options(model, model_options)
        self.seed = non_negative_int(seed, "seed")
        if progress not in (True, False, "bar", "lines"):
            raise ValueError(f"progress must be True, False, 'bar' or 'lines', got {progress!r}")
        self.progress = progress
        if unit is None:  # pen strokes (a model without a vocabulary) score steps, text models characters
            unit = "step" if model.vocab_size is None else "char"
        if unit not in BITS_LABELS:
            raise ValueError(f"unit must be one of {', '.join(map(repr, BITS_LABELS))}, got {unit!r}")
        self.unit = unit
        if constraint is not None and not callable(constraint):
            raise TypeError(f"constraint must be a callable of the model, got {type(constraint).__name__}")
        self.constraint = constraint
        if divergence is not None and not (is_number(divergence) and divergence > 0):
            raise ValueError(f"divergence must be a number of bits > 0 (or None: no guard), got {divergence!r}")
        self.divergence = None if divergence is None else float(divergence)
        self.diverged: Optional[dict] = None  # the epoch the guard stopped the last fit at, with its figures
        self._guard = DivergenceGuard()  # kept from one fit call to the next: its baseline carries on
        if early_stopping is not None and not isinstance(early_stopping, EarlyStopping):
            raise TypeError(
                f"early_stopping must be an EarlyStopping(patience, min_delta) or None, got {early_stopping!r:.60}"
            )
        self.early_stopping = early_stopping
        if tensorboard is not None and not isinstance(tensorboard, (str, Path)):
            raise TypeError(f"tensorboard must be a folder path (str or Path) or None, got {tensorboard!r:.60}")
        if tensorboard is not None:
            writer_class()  # ImportError naming the extra, before any work
        self.tensorboard = None if tensorboard is None else Path(tensorboard)
        self.hooks = check_hooks(hooks)
        self.dist = data_parallel(distributed)  # None, or a distributed.DataParallel
        self.history = History()
        # progress
        self.epoch = 0  # completed epochs
        self.chunk = 0  # chunks done in the current epoch
        self.step = 0  # optimiser steps so far
        self._sum_loss = 0.0  # sum of loss * tokens in the current epoch
        self._sum_aux: Dict[str, float] = {}  # sum of each auxiliary loss term * tokens in the epoch
        self._tokens = 0  # targets in the current epoch
        self._seconds = 0.0  # training time of the current epoch
        self._carried: Optional[Dict[str, np.ndarray]] = None  # TBPTT state at the current position
        self.best_loss: Optional[float] = None
        self.best_epoch: Optional[int] = None
        self.best_params: Optional[np.ndarray] = None
        self.best_options: Optional[Dict[str, float]] = None  # the model options' values at the best epoch
        self._data_id: Optional[dict] = None
        self._rank_rngs: Optional[np.ndarray] = None  # (K, 4) every rank's random state, for checkpoints
        self._applied: Dict[str, float] = {}
        self.option_values: Dict[str, float] = {}

    @property
    def speaks(self) -> bool:
        """True where this process prints, logs and writes (not a rank other than 0)."""
        return self.dist is None or self.dist.root

    # ---- model options --------------------------------------------------------------------------
    def _set_option(self, name: str, value: float) -> None:
        self.model.set_option(name, float(value))

    def _set_options(self, values: Dict[str, float]) -> None:
        """Set model options to ``values`` and record them as applied."""
        for name, value in values.items():
            self._set_option(name, float(value))
            self._applied[name] = float(value)
        self.option_values = dict(self._applied)

    def put_back(self, params: np.ndarray, options: Optional[Dict[str, float]]) -> None:
        """Put a kept model back: its parameters and the values its options had (``option_values``), so that
        it computes what it computed then (a VCRNN's annealed sharpness, an HM-LSTM's slope)."""
        self.model.flat_parameters()[...] = params
        self._set_options(options or {})

    def _apply_options(self, force: bool = False) -> List[str]:
        """Set every model option whose value changed (all with ``force``); returns the model's own
        options whose value changed since they were last set (their change makes another model)."""
        changed = []
        for name, sched in self.model_options.items():
            value = float(sched(self.epoch, self.step) if callable(sched) else sched)
            if force or self._applied.get(name) != value:
                if name in self._own_options and name in self._applied and self._applied[name] != value:
                    changed.append(name)
                self._set_option(name, value)
                self._applied[name] = value
        self.option_values = dict(self._applied)
        return changed

    # ---- state for checkpoints ------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Progress, schedules and best parameters (JSON-able values and NumPy arrays)."""
        return {
            "epoch": self.epoch,
            "chunk": self.chunk,
            "step": self.step,
            "sum_loss": self._sum_loss,
            "sum_aux": dict(self._sum_aux),
            "tokens": self._tokens,
            "seconds": self._seconds,
            "carried": {k: np.array(v, copy=True) for k, v in self._carried.items()} if self._carried else None,
            "batch_size": self.batch_size,
            "bptt": self.bptt,
            "clip_norm": self.clip_norm,
            "clip_value": self.clip_value,
            "seed": self.seed,
            "eval_batch_size": self.eval_batch_size,
            "best_loss": self.best_loss,
            "best_epoch": self.best_epoch,
            "best_params": self.best_params,
            "best_options": self.best_options,
            "lr_schedule": self.lr_schedule.state_dict() if self.lr_schedule is not None else None,
            "model_options": {
                k: {"value": self._applied.get(k), "schedule": repr(s)} for k, s in self.model_options.items()
            },
            "data": self._data_id,
            "early_stopping": self.early_stopping.state_dict() if self.early_stopping is not None else None,
            "divergence": self._guard.state_dict(),
            **({"rank_rngs": self._rank_rngs} if self._rank_rngs is not None else {}),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore progress saved by ``state_dict`` (checked against this trainer's settings and
        for the type of every entry: ``ValueError`` naming the entry otherwise)."""
        check_state(state)
        for key in ("batch_size", "bptt"):
            if state.get(key) != getattr(self, key):
                raise ValueError(
                    f"the checkpoint was trained with {key}={state.get(key)}, this trainer has "
                    f"{key}={getattr(self, key)}: resuming would not continue the same run"
                )
        saved_sched = state.get("lr_schedule")
        if (saved_sched is None) != (self.lr_schedule is None):
            raise ValueError(
                f"the checkpoint has learning-rate schedule {saved_sched and saved_sched.get('name')}, "
                f"this trainer has {self.lr_schedule!r}"
            )
        if saved_sched is not None and self.lr_schedule is not None:  # both or neither (checked above)
            self.lr_schedule.load_state_dict(saved_sched)
        saved_opts = set((state.get("model_options") or {}))
        if saved_opts != set(self.model_options):
            raise ValueError(
                f"the checkpoint anneals model options {sorted(saved_opts)}, this trainer {sorted(self.model_options)}"
            )
        # the options' values at the checkpoint, set again: a resumed run with nothing left to train leaves
        # the model as it was saved (an evaluation sees the annealed sharpness, slope, ... not the defaults)
        self._applied = {}
        self._set_options(saved_option_values(state))
        self.epoch, self.chunk, self.step = int(state["epoch"]), int(state["chunk"]), int(state["step"])
        self._sum_loss, self._tokens = float(state["sum_loss"]), int(state["tokens"])
        self._sum_aux = {str(k): float(v) for k, v in (state.get("sum_aux") or {}).items()}
        self._seconds = float(state.get("seconds", 0.0))
        carried = state.get("carried")
        self._carried = {k: np.array(v, copy=True) for k, v in carried.items()} if carried else None
        self.best_loss, self.best_epoch = state.get("best_loss"), state.get("best_epoch")
        bp = state.get("best_params")
        self.best_params = None if bp is None else np.array(bp, copy=True)
        bo = state.get("best_options")
        if bo is None and "best_options" not in state and self.best_epoch == self.epoch and self.chunk == 0:
            bo = self._applied  # saved before best_options were, at the end of its best epoch: the values then
        self.best_options = None if bo is None else {str(k): float(v) for k, v in bo.items()}
        self._data_id = state.get("data")
        rngs = state.get("rank_rngs")
        self._rank_rngs = None if rngs is None else np.array(rngs, copy=True)
        if self.early_stopping is not None:
            self.early_stopping.load_state_dict(state.get("early_stopping"))
        self._guard.load_state_dict(state.get("divergence", MISSING), self)

    def save_checkpoint(self, path: Union[str, Path], vocab=None, extra: Optional[dict] = None) -> Path:
        """Write model, optimiser, progress and history to ``path`` and the history to its JSON.

        With ``distributed`` it is collective: every rank's random state is gathered, rank 0 writes,
        and an error in writing is raised on every rank."""
        from .. import checkpoint

        self._rank_rngs = None if self.dist is None else self.dist.gather_rng(self.model.get_rng_state())

        def write() -> Path:
            out = checkpoint.save(
                path, self.model, self.optimizer, self.state_dict(), vocab=vocab, history=self.history, extra=extra
            )
            self.history.save(history_path(out))
            return out

        return write() if self.dist is None else self.dist.on_root(write)

    def _seed_rng(self) -> None:
        """Seed the model's generator for a new run from ``seed`` (rank r > 0 of a distributed run
        from ``seed`` and r, so the ranks draw different dropout masks for their streams)."""
        rank = 0 if self.dist is None else self.dist.rank
        seq = np.random.SeedSequence(self.seed, spawn_key=(rank, self.step) if rank else ())
        self.model.set_rng_state(seq.generate_state(4, dtype=np.uint64) | np.uint64(1))

    def resume_from(self, path: Union[str, Path]):
        """Load a checkpoint written by this kind of run into the trainer's model and optimiser.

        With ``distributed`` it is collective: rank 0 reads the file and sends it to the others
        (no shared file system needed); each rank takes its own saved random state when the run
        was saved with as many ranks, else rank 0 takes the checkpoint's and the others are seeded
        from ``seed``, their rank and the step."""
        if self.dist is None:
            return self._resume(path)
        ck = self.dist.load_checkpoint(path, self._resume)
        rngs = self._rank_rngs
        if rngs is not None and rngs.shape[0] == self.dist.size:
            self.model.set_rng_state(rngs[self.dist.rank])
        elif not self.dist.root:
            self._seed_rng()
        return ck

    def _resume(self, path: Union[str, Path]):
        from .. import checkpoint

        ck = checkpoint.load(path, model=self.model)
        if ck.trainer_state is None:
            raise checkpoint.CheckpointError(f"{path} holds no training progress (saved without a trainer)")
        if ck.optimizer is None:
            raise checkpoint.CheckpointError(f"{path} holds no optimiser state")
        if type(ck.optimizer) is not type(self.optimizer):
            raise checkpoint.CheckpointError(
                f"{path} was trained with {type(ck.optimizer).__name__}, this trainer "
                f"uses {type(self.optimizer).__name__}"
            )
        assert ck.optimizer_state is not None  # saved with its optimiser (checked above)
        try:
            self.optimizer.load_state_dict(ck.optimizer_state)
            self.load_state_dict(ck.trainer_state)
        except (TypeError, ValueError, KeyError, OverflowError) as e:
            raise checkpoint.CheckpointError(f"{path}: cannot resume from it: {e}") from None
        self.history = ck.history if ck.history is not None else History()
        return ck

    def restore_best(self) -> bool:
        """Put the best model seen (lowest validation loss) back: its parameters and its options' values;
        False if none."""
        if self.best_params is None:
            return False
        self.put_back(self.best_params, self.best_options)
        return True

    # ---- training -------------------------------------------------------------------------------
    def fit(
        self,
        train,
        valid=None,
        epochs: int = 1,
        checkpoint: Union[str, Path, None] = None,
        resume: Union[bool, str] = False,
        max_chunks: Optional[int] = None,
        log: Optional[Callable] = None,
        checkpoint_every: Optional[int] = None,
        vocab=None,
        restore_best: bool = False,
        extra: Optional[dict] = None,
    ) -> History:
        """Train until ``epochs`` epochs are complete (counting any done before: call again with a
        larger ``epochs`` to go on); returns the history of all epochs.

        ``train``: a ``data.Corpus`` (``fit(corpus)``: trains on ``corpus.train``, validates on
        ``corpus.valid`` and stores ``corpus.vocab`` in the checkpoint, so that it can be read and
        scored without the corpus), or 1-D token ids (``corpus.train``, ``vocab.encode(text)``).
        Text is refused with how to encode it; a corpus or ``vocab`` whose size is not the model's
        ``vocab_size`` is refused with both sizes.

        ``valid``: ids evaluated after each epoch (best parameters and ``ReduceOnPlateau`` follow
        its loss; the training loss without it); with a corpus, its valid split unless given.
        ``vocab``: the vocabulary stored in the checkpoint (with a corpus, the corpus's; given
        ids, pass ``vocab=corpus.vocab``; when resuming, the checkpoint's unless given, and a
        different one is refused). ``checkpoint``: a path written at the end of every
        epoch, every ``checkpoint_every`` chunks, and when ``max_chunks`` stops the run, with the
        history beside it (``x.history.json``) and the CSV of every optimiser step (``x.csv``,
        ``training.logs``; a resumed run continues it without duplicated or lost rows). ``resume``: True
        continues from ``checkpoint`` (which must exist), "auto" when it exists; the continuation gives
        the same losses, bit for bit, as an uninterrupted run. ``max_chunks``: stop after this many chunks in this call.
        ``log``: a callable receiving a dict after every chunk (``event="chunk"``) and epoch
        (``event="epoch"``). ``restore_best``: load the best parameters at the end. ``extra`` (a
        JSON-able dict) is stored in the checkpoint.

        Raises ``FloatingPointError`` (naming epoch and chunk) when the loss or gradient is not
        finite; parameters are then not updated and the last checkpoint is left as it was.

        With ``distributed`` every rank calls ``fit`` with the same arguments and data; the ranks
        first check that they agree (``ValueError`` on every rank otherwise), every error of the
        setup is raised on every rank, and only rank 0 reads and writes the checkpoint.

        The progress display, ``log``, the divergence guard and the checkpoint are hooks on the events
        of ``fit`` (``multiscale_rnn.training.hooks``); ``Trainer(hooks=[...])`` adds your own.
        """
        run = self._prepare(train, valid, epochs, checkpoint, resume, max_chunks, log, checkpoint_every, vocab, extra)
        run.emit("on_fit_start")
        while self.epoch < run.epochs and not run.stopping and not run.budget_spent():
            if not self._train_epoch(run):  # stopped within the epoch (max_chunks or a hook): keep the position
                if run.save_on_stop:
                    self._save_position(run)
                break
            row = self._end_epoch(run)
            run.emit("on_epoch_end", row)
            if run.save_on_stop:
                run.emit("on_checkpoint")
        run.emit("on_fit_end")
        if run.warning is not None and self.speaks:
            warnings.warn(run.warning, RuntimeWarning, stacklevel=2)
        if restore_best:
            self.restore_best()
        return self.history

    # ---- fit's steps: prepare -------------------------------------------------------------------
    def _prepare(self, *args) -> FitRun:
        """The setup of a ``fit`` call (its arguments, in order): the arguments checked (on every rank, and
        that the ranks agree), then a resume or a new run's seed; returns the run with its hooks."""
        dist = self.dist
        run = self._checked_run(*args) if dist is None else dist.together(lambda: self._checked_run(*args))
        if dist is not None:
            dist.check_model(self.model, self._agreement(run))
        if run.sequences is None:
            run.streams = run.streams[slice(0, self.batch_size) if dist is None else dist.shard(self.batch_size)]
        self._resume_or_start(run)
        if self.lr_schedule is not None:
            self.lr_schedule.start(self.optimizer.lr)
        if run.checkpoint is not None and self.speaks and Path(run.checkpoint).exists():
            run.last_checkpoint = Path(run.checkpoint)
        speaking = [ProgressDisplay(self)] + ([LogCalls(run.log)] if run.log is not None else [])
        own: List[Any] = [self._guard] + ([self.early_stopping] if self.early_stopping is not None else [])
        own += [CsvLog()]
        own += [TensorBoardLog(self.tensorboard)] if self.tensorboard is not None else []
        run.hooks = (speaking if self.speaks else []) + own + [CheckpointWriter()] + self.hooks
        return run

    def _checked_run(self, train, valid, epochs, checkpoint, resume, max_chunks, log, checkpoint_every, vocab, extra):
        """The run of ``fit``'s arguments, each checked (``ValueError`` / ``TypeError`` / ``IndexError``
        naming the problem); its streams are all B streams."""
        epochs = positive_int(epochs, "epochs")
        max_chunks = positive_int(max_chunks, "max_chunks", allow_none=True)
        every = positive_int(checkpoint_every, "checkpoint_every", allow_none=True)
        if resume not in (False, True, "auto"):
            raise ValueError(f"resume must be False, True or 'auto', got {resume!r}")
        if resume and checkpoint is None:
            raise ValueError("resume needs the checkpoint path")
        if checkpoint is not None and self.speaks:
            check_room(checkpoint, self.model)
            check_writable(history_path(checkpoint), "history")
            check_writable(csv_path(checkpoint), "CSV log")
        if self.tensorboard is not None and self.speaks:
            check_writable(self.tensorboard / "events.probe", "tensorboard folder")
        if is_sequences(train) or self.model.vocab_size is None:
            return self._sequence_run(train, valid, epochs, checkpoint, resume, max_chunks, log, every, extra)
        train_ids, valid, vocab = training_data(self.model, train, valid, vocab)
        ids = np.asarray(train_ids)
        data.check_length(ids, self.batch_size, self.bptt, "train")
        if valid is not None:
            valid = np.asarray(valid)
            if len(valid) < 2:
                raise ValueError(f"the valid split has {len(valid)} tokens; evaluation needs at least 2")
        else:
            for name in ("early_stopping", "divergence"):
                if getattr(self, name) is not None:
                    raise ValueError(
                        f"{name} watches the validation loss, and fit has no validation data: pass valid= "
                        f"(or a corpus with a valid split), or leave {name} out"
                    )
        streams = data.batchify(ids, self.batch_size)
        if streams.min() < 0 or streams.max() >= self.model.vocab_size:
            bad = int(np.flatnonzero((ids < 0) | (ids >= self.model.vocab_size))[0])
            raise IndexError(
                f"train token id {int(ids[bad])} at position {bad} is outside the model's "
                f"vocabulary [0, {self.model.vocab_size})"
            )
        if self.dist is not None and self.dist.size > self.batch_size:
            raise ValueError(
                f"batch_size={self.batch_size} streams cannot be shared by {self.dist.size} ranks: "
                f"each rank needs at least one stream"
            )
        return FitRun(
            trainer=self,
            epochs=epochs,
            max_chunks=max_chunks,
            checkpoint_every=every,
            checkpoint=checkpoint,
            resume=resume,
            train=ids,
            valid=valid,
            streams=streams,
            n_chunks=data.num_chunks(streams, self.bptt),
            fingerprint=ids_fingerprint(ids),
            vocab=vocab,
            extra=extra,
            log=log,
        )

    def _sequence_run(self, train, valid, epochs, checkpoint, resume, max_chunks, log, every, extra) -> FitRun:
        """The run of separate sequences (``training.sequences``): a corpus of them (its train and valid
        splits) or a list of (n_i, 3) arrays, for a model whose head reads them (``head="mdn"``)."""
        if self.model.vocab_size is not None or self.model.input_size is None:
            raise TypeError(
                "separate sequences of real vectors (pen strokes) train a model with head='mdn' and input_size=3; "
                f"this {type(self.model).__name__} reads token ids: give it token ids or a text corpus"
            )
        if not is_sequences(train):
            raise TypeError(
                f"this {type(self.model).__name__} (head='mdn') trains on separate sequences: a stroke corpus "
                f"(msr.data.load('kanjivg')) or a list of (steps, 3) arrays, got {type(train).__name__}"
            )
        if self.dist is not None:
            raise ValueError("data-parallel training of separate sequences is not supported; train on one process")
        if hasattr(train, "train"):
            train, valid = train.train, (train.valid if valid is None else valid)
        seqs = as_sequences(train, "train")
        if valid is not None:
            valid = as_sequences(valid, "valid")
        elif self.early_stopping is not None:
            raise ValueError("early_stopping watches the validation loss, and fit has no validation sequences")
        batches = SequenceBatches(seqs, self.batch_size, self.bptt, self.seed, self.model.dtype)
        return FitRun(
            trainer=self,
            epochs=epochs,
            max_chunks=max_chunks,
            checkpoint_every=every,
            checkpoint=checkpoint,
            resume=resume,
            train=np.zeros(0),
            valid=valid,
            streams=np.zeros((0, 0)),
            n_chunks=batches.num_chunks(self.epoch),
            fingerprint=sequences_fingerprint(seqs),
            vocab=None,
            extra=extra,
            log=log,
            sequences=batches,
        )

    def _agreement(self, run: FitRun) -> dict:
        """What the ranks of a distributed ``fit`` must agree on, by name (``DataParallel.check_model``)."""
        settings = (
            ("batch_size", self.batch_size),
            ("bptt", self.bptt),
            ("eval_batch_size", self.eval_batch_size),
            ("clip_norm", self.clip_norm),
            ("clip_value", self.clip_value),
            ("seed", self.seed),
            ("optimizer", f"{type(self.optimizer).__name__}({self.optimizer.hyper()})"),
            ("model_options", sorted(self.model_options)),
            ("lr_schedule", type(self.lr_schedule).__name__),
            ("constraint", type(self.constraint).__name__),
        )
        arguments = (
            ("epochs", run.epochs),
            ("max_chunks", run.max_chunks),
            ("checkpoint_every", run.checkpoint_every),
            ("resume", run.resume),
            ("checkpoint given", run.checkpoint is not None),
        )
        return {
            "the training data (tokens, CRC-32)": run.fingerprint,
            "the validation data (tokens, CRC-32)": None if run.valid is None else ids_fingerprint(run.valid),
            **{f"the trainer setting {k}": v for k, v in settings},
            "the progress (epoch, chunk, step)": (self.epoch, self.chunk, self.step),
            **{f"the fit argument {k}": v for k, v in arguments},
        }

    def _resume_or_start(self, run: FitRun) -> None:
        """Continue from ``run.checkpoint`` when asked (its vocabulary and training data must be the run's),
        else seed the model's generator when this trainer has not trained yet."""
        checkpoint, dist = run.checkpoint, self.dist
        if checkpoint is None:  # resume needs a checkpoint (_checked_run refuses it without one)
            resuming = False
        elif dist is None:
            resuming = run.resume is True or (run.resume == "auto" and Path(checkpoint).exists())
        else:
            resuming = run.resume is True or (run.resume == "auto" and dist.on_root(lambda: Path(checkpoint).exists()))
        if resuming and checkpoint is not None:
            ck = self.resume_from(checkpoint)
            if run.vocab is None:  # the vocabulary stays in the checkpoints of the continued run
                run.vocab = ck.vocab
            elif ck.vocab is not None and ck.vocab != run.vocab:
                raise ValueError(
                    f"{checkpoint} was trained with another vocabulary ({ck.vocab.size} symbols) than "
                    f"the one given ({run.vocab.size}): resuming would not continue the same run"
                )
            fingerprint = run.fingerprint
            if self._data_id is not None and self._data_id != fingerprint:
                raise ValueError(
                    f"{checkpoint} was trained on other training data ({self._data_id['tokens']:,} tokens, CRC-32 "
                    f"{self._data_id['crc32']}) than the data given ({fingerprint['tokens']:,} tokens, CRC-32 "
                    f"{fingerprint['crc32']}): resuming would not continue the same run"
                )
        elif self.epoch == 0 and self.chunk == 0 and self.step == 0:
            self._seed_rng()
        self._data_id = run.fingerprint

    # ---- fit's steps: an epoch ------------------------------------------------------------------
    def _train_epoch(self, run: FitRun) -> bool:
        """Train the current epoch's chunks from ``self.chunk`` on; True when the epoch is complete, False
        when ``max_chunks`` or a hook stopped it first."""
        self._enter_epoch(run)
        run.emit("on_epoch_start")
        t_epoch = time.perf_counter() - self._seconds
        stopped = False
        try:
            for k, x, y, w in self._epoch_chunks(run):
                if run.budget_spent():
                    stopped = True
                    break
                run.emit("on_step", self._train_chunk(run, k, x, y, w))
                every = run.checkpoint_every
                if every is not None and self.chunk % every == 0 and self.chunk < run.n_chunks:
                    self._seconds = time.perf_counter() - t_epoch
                    self._save_position(run)
                if run.stopping:
                    stopped = True
                    break
        finally:
            run.emit("on_chunks_end")
        self._seconds = time.perf_counter() - t_epoch
        return not stopped and self.chunk >= run.n_chunks

    def _epoch_chunks(self, run: FitRun):
        """``(k, inputs, targets, weights or None)`` of the epoch's chunks from ``self.chunk`` on; separate
        sequences reset the state to zeros where a batch starts."""
        if run.sequences is None:
            for k, (x, y) in enumerate(data.chunks(run.streams, self.bptt)):
                if k >= self.chunk:
                    yield k, x, y, None
            return
        for k, ch in run.sequences.chunks(self.epoch, self.chunk):
            if ch.first:
                self.model.reset_state(ch.x.shape[0])
            yield k, ch.x, ch.y, ch.w

    def _enter_epoch(self, run: FitRun) -> None:
        """The state the epoch goes on from: zero at its start (and its sums cleared), else the carried state."""
        if run.sequences is not None:
            run.n_chunks = run.sequences.num_chunks(self.epoch)
        if self.chunk == 0:
            self.model.reset_state(run.streams.shape[0] if run.sequences is None else 1)
            self._sum_loss, self._tokens, self._seconds = 0.0, 0, 0.0
            self._sum_aux = {}
        else:  # the carried state holds all B streams (whatever the number of ranks that saved it)
            dist = self.dist
            carried = cast(Dict[str, np.ndarray], self._carried)  # set at the end of every chunk
            self.model.set_state(carried if dist is None else dist.local_state(carried, self.batch_size))

    def _save_position(self, run: FitRun) -> None:
        """A checkpoint within an epoch: the carried state of all streams, then ``on_checkpoint``."""
        self._carried = self._all_streams_state()
        run.emit("on_checkpoint")

    def _all_streams_state(self) -> Dict[str, np.ndarray]:
        """The carried state of all B streams (gathered from every rank when distributed)."""
        state = self.model.get_state()
        return state if self.dist is None else self.dist.gather_state(state)

    # ---- fit's steps: a chunk -------------------------------------------------------------------
    def _train_chunk(self, run: FitRun, k: int, x: np.ndarray, y: np.ndarray, w: Optional[np.ndarray] = None) -> Step:
        """One optimiser step on chunk ``k`` (inputs ``x``, targets ``y`` of this rank's streams, loss weights
        ``w``: 0 on padding): the model options, loss and gradient, all-reduce, clip, finite check, optimiser
        step, constraint."""
        t0 = time.perf_counter()
        changed = self._apply_options(force=(run.done == 0))
        if changed:
            run.emit("on_model_changed", changed)
        n = self.batch_size * x.shape[1] if w is None else int(w.sum())  # targets of the chunk over all ranks
        loss, aux = self._loss_and_gradient(x, y, n, w)
        norm = self._clip_and_check(run, k, loss)
        self._update()
        self.chunk = k + 1
        run.done += 1
        self._sum_loss += loss * n
        for name, value in aux.items():
            self._sum_aux[name] = self._sum_aux.get(name, 0.0) + value * n
        self._tokens += n
        return Step(
            epoch=self.epoch + 1,
            chunk=self.chunk,
            chunks=run.n_chunks,
            step=self.step,
            loss=loss,
            aux=aux,
            grad_norm=norm,
            lr=self.optimizer.lr,
            tokens=n,
            seconds=time.perf_counter() - t0,
        )

    def _loss_and_gradient(
        self, x: np.ndarray, y: np.ndarray, n: int, w: Optional[np.ndarray] = None
    ) -> Tuple[float, Dict[str, float]]:
        """Loss, auxiliary terms and gradient (into the flat buffer) of the chunk; when distributed, their
        means over all ``n`` targets of all ranks (batch statistics of nonlinear auxiliary terms too)."""
        dist, model = self.dist, self.model
        reducer = None if dist is None else (lambda s: dist.average_statistics(s, x.size, n))
        result, _, _ = model.loss_and_grad(x, y, "keep", padding=w, copy_grads=False, reducer=reducer)
        loss, aux = float(result), result.aux
        if dist is not None:  # the mean gradient, loss and terms over all B streams
            dist.average_gradients(model.flat_gradients(), x.size, n)
            names = sorted(aux)
            means = dist.average([loss] + [aux[a] for a in names], x.size, n)
            loss, aux = float(means[0]), dict(zip(names, (float(v) for v in means[1:])))
        return loss, aux

    def _clip_and_check(self, run: FitRun, k: int, loss: float) -> Optional[float]:
        """Clip the gradient by its norm (returned; None without ``clip_norm``) and refuse a loss or gradient
        that is not finite (``FloatingPointError``, raised alike on every rank)."""
        flat_g = self.model.flat_gradients()
        if self.clip_norm is not None:
            norm = float(_core.clip_by_norm(flat_g, self.clip_norm))
            finite = math.isfinite(norm)
        else:
            norm = None
            finite = bool(_core.all_finite(flat_g))
        if not (math.isfinite(loss) and finite):
            what = f"loss is {loss}" if not math.isfinite(loss) else "the gradient holds NaN or infinity"
            kept = f"; the last checkpoint {run.last_checkpoint} is left as it was" if run.last_checkpoint else ""
            error = FloatingPointError(
                f"{what} at chunk {k + 1}/{run.n_chunks} of epoch {self.epoch + 1} (step {self.step + 1}); "
                f"training stopped before updating the parameters{kept}"
            )
            setattr(error, "all_ranks", True)  # the reduced loss and gradient are the same on every rank
            raise error
        return norm

    def _update(self) -> None:
        """The optimiser step (clipping by value fused into it), the constraint, and a schedule per step."""
        opt = self.optimizer
        opt.step(self.model, clip_value=self.clip_value)
        if self.constraint is not None:
            self.constraint(self.model)
        self.step += 1
        if self.lr_schedule is not None and self.lr_schedule.every == "step":
            opt.lr = self.lr_schedule.next_lr(self.step, opt.lr, None)

    # ---- fit's steps: the end of an epoch -------------------------------------------------------
    def _end_epoch(self, run: FitRun) -> dict:
        """The epoch's row (``on_evaluate`` between its figures and the trainer's bookkeeping): the best
        parameters, the counters of the next epoch, the learning-rate schedule; appended to the history."""
        row = self._epoch_row(run)
        metric = row["valid_loss"] if run.valid is not None else row["train_loss"]
        run.emit("on_evaluate", row)
        epoch_no = row["epoch"]
        if math.isfinite(metric) and (self.best_loss is None or metric < self.best_loss):
            self.best_loss, self.best_epoch = float(metric), epoch_no
            self.best_params = np.array(self.model.flat_parameters(), copy=True)
            self.best_options = dict(self.option_values)
        self.epoch, self.chunk = epoch_no, 0
        self._carried = None
        self._sum_loss, self._tokens = 0.0, 0
        self._sum_aux = {}
        if self.lr_schedule is not None and self.lr_schedule.every == "epoch":
            self.optimizer.lr = self.lr_schedule.next_lr(self.epoch, self.optimizer.lr, metric)
        row["next_lr"] = self.optimizer.lr
        self.history.append(row)
        return row

    def _epoch_row(self, run: FitRun) -> dict:
        """The figures of the epoch just trained: training loss (and terms), options, validation."""
        train_loss = self._sum_loss / max(self._tokens, 1)
        row: Dict[str, Any] = {
            "epoch": self.epoch + 1,
            "train_loss": train_loss,
            "train_bpc": bits(train_loss),
            "valid_loss": None,
            "valid_bpc": None,
            "valid_perplexity": None,
            "lr": self.optimizer.lr,
            "seconds": self._seconds,
            "tokens_per_s": self._tokens / max(self._seconds, 1e-9),
            "steps": self.step,
        }
        if self._sum_aux:
            row["train_aux"] = {k: v / max(self._tokens, 1) for k, v in self._sum_aux.items()}
        if self.model_options:
            row["options"] = dict(self._applied)
        if run.valid is not None:
            ev = evaluate(self.model, run.valid, batch_size=self.eval_batch_size, bptt=self.bptt, distributed=self.dist)
            row.update(valid_loss=ev["loss"], valid_bpc=ev["bpc"], valid_perplexity=ev["perplexity"])
        return row
