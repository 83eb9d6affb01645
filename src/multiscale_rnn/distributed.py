"""Data-parallel training over MPI (mpi4py): K processes ("ranks") train one model as one process would.

Every rank holds the whole model and reads a disjoint, contiguous share of the B streams a single
process would read (``data.batchify(train, B)``; rank r takes rows ``lo_r .. hi_r - 1``, the first
``B % K`` ranks one stream more). After each chunk of T steps rank r holds the gradient g_r of its
own mean loss over its n_r = B_r T targets; the gradient of the global mean over N = B T targets is

    g = sum_r (n_r / N) g_r

which one in-place ``MPI_Allreduce`` (sum) of the flat gradient buffers, each scaled by n_r / N,
leaves on every rank. The loss and the auxiliary terms (per-target means too) are reduced the same
way. Every rank then clips and takes the same optimiser step on the same parameters, so K ranks
give the parameters one process gives with batch B, up to the rounding of the sums' order.

That sum is exact for every term that is a mean over the columns of something computed column by
column (the cross-entropy, the HM-LSTM's boundary-rate term lambda zbar, the VCRNN's penalty
w mean_n f(m_n - m_bar)). It is not for a term that applies a nonlinearity to a batch statistic,
such as the HM-LSTM's rate target mu (zbar - r)^2 with zbar = (1/N) sum_n z_n: the weighted mean of
the ranks' mu (zbar_r - r)^2 is not mu (zbar - r)^2. Such a term is reduced before its nonlinearity:
after the forward each rank's core hands over its statistics s_r (means over its n_r columns), and
``average_statistics`` replaces them on every rank, before the backward, with

    s = sum_r (n_r / N) s_r        (the statistic of all N columns, one in-place Allreduce)

from which the core computes the term's value, mu (s - r)^2, and its gradient on its own columns,
d/dz_n = 2 mu (s - r) / n_r; the scaling by n_r / N above then makes it 2 mu (s - r) / N, the
one-process gradient. ``LanguageModel.loss_and_grad(..., reducer=...)`` is that hand-over; the
Trainer passes it when distributed.

Only rank 0 prints and writes checkpoints; a checkpoint holds the state of all B streams (gathered)
and every rank's random state, so it resumes with any number of ranks (exactly with the same K, and
with another K wherever the run draws no random numbers: no dropout, zoneout or sampled
boundaries). At the start the ranks check that they agree on the model (config, dtype and a hash of
the parameters), the trainer's settings and the data; otherwise every rank raises a ``ValueError``
saying what differs on which rank.

Use it through ``Trainer(..., distributed=True)`` (or a communicator) and
``multiscale-rnn train --distributed``, started by ``mpirun -n K``. mpi4py is an optional
dependency: ``pip install "multiscale-rnn[mpi]"``.
"""

from __future__ import annotations

import os
import tempfile
import zlib
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

__all__ = ["DataParallel", "mpi", "data_parallel", "shard"]

_INSTALL = (
    'data-parallel training needs mpi4py and an MPI library: pip install "multiscale-rnn[mpi]" '
    "(mpi4py with the MPICH wheel), or mpi4py built against your cluster's MPI"
)


def mpi():
    """The ``mpi4py.MPI`` module, or ``ImportError`` saying how to install it."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError(f"{_INSTALL} ({e})") from None
    return MPI


def shard(total: int, rank: int, size: int) -> slice:
    """The rows of ``total`` streams rank ``rank`` of ``size`` reads: contiguous, disjoint, together
    all of them; the first ``total % size`` ranks get one more."""
    base, extra = divmod(int(total), int(size))
    lo = rank * base + min(rank, extra)
    return slice(lo, lo + base + (1 if rank < extra else 0))


def _mark(e: BaseException) -> BaseException:
    """Mark an exception as raised on every rank at once (the command line then reports it once and
    ends normally instead of aborting the job)."""
    try:
        setattr(e, "all_ranks", True)
    except AttributeError:  # pragma: no cover - built-in exceptions accept attributes
        pass
    return e


def _rebuild(kind: type, message: str) -> BaseException:
    try:
        e = kind(message)
    except Exception:  # an exception type that does not take one message
        e = RuntimeError(message)
    return e


class DataParallel:
    """K ranks of an MPI communicator training one model (see the module's docstring).

    ``comm``: an ``mpi4py`` communicator (default ``MPI.COMM_WORLD``). ``rank``, ``size``: this
    process's rank and K. Every method is collective: all ranks call it, in the same order.
    """

    def __init__(self, comm=None):
        MPI = mpi()
        self.MPI = MPI
        self.comm = MPI.COMM_WORLD if comm is None else comm
        for attr in ("Allreduce", "allgather", "bcast", "Get_rank", "Get_size"):
            if not hasattr(self.comm, attr):
                raise TypeError(f"distributed must be True or an mpi4py communicator, got {type(comm).__name__}")
        self.rank = int(self.comm.Get_rank())
        self.size = int(self.comm.Get_size())

    def __repr__(self) -> str:
        return f"DataParallel(rank {self.rank} of {self.size})"

    @property
    def root(self) -> bool:
        """True on rank 0 (the rank that prints and writes)."""
        return self.rank == 0

    # ---- streams ----------------------------------------------------------------------------
    def shard(self, total: int) -> slice:
        """This rank's rows of ``total`` streams (see :func:`shard`)."""
        return shard(total, self.rank, self.size)

    def local_state(self, state: Optional[Dict[str, np.ndarray]], total: int):
        """This rank's rows of a state of all ``total`` streams (dict name -> (B, size))."""
        if state is None:
            return None
        rows = self.shard(total)
        return {k: np.ascontiguousarray(v[rows]) for k, v in state.items()}

    def gather_state(self, state: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """The state of all streams, in stream order, from every rank's own rows (on every rank)."""
        parts = self.comm.allgather({k: np.asarray(v) for k, v in state.items()})
        return {k: np.concatenate([p[k] for p in parts], axis=0) for k in parts[0]}

    def gather_rng(self, rng_state) -> np.ndarray:
        """Every rank's random state, (K, words) uint64, in rank order (on every rank)."""
        return np.stack(
            [np.asarray(s, dtype=np.uint64) for s in self.comm.allgather(np.asarray(rng_state, dtype=np.uint64))]
        )

    # ---- reductions -------------------------------------------------------------------------
    def average_gradients(self, flat_g: np.ndarray, local_tokens: int, total_tokens: int) -> None:
        """``flat_g`` (this rank's gradient of its mean over ``local_tokens`` targets) becomes, on
        every rank, the gradient of the mean over all ``total_tokens``: scaled by n_r / N, then one
        in-place Allreduce (sum) of the buffer."""
        if local_tokens != total_tokens:
            flat_g *= flat_g.dtype.type(local_tokens / total_tokens)
        self.comm.Allreduce(self.MPI.IN_PLACE, flat_g, op=self.MPI.SUM)

    def average(self, values: Sequence[float], local_tokens: int, total_tokens: int) -> np.ndarray:
        """Per-target means of this rank (``values``) -> the means over all ranks' targets (float64)."""
        buf = np.asarray(values, dtype=np.float64) * (local_tokens / total_tokens)
        self.comm.Allreduce(self.MPI.IN_PLACE, buf, op=self.MPI.SUM)
        return buf

    def average_statistics(self, stats: np.ndarray, local_tokens: int, total_tokens: int) -> None:
        """Batch statistics of this rank (``stats``, float64, means over its ``local_tokens``
        columns) become, in place and on every rank, the means over all ``total_tokens`` columns:
        scaled by n_r / N, then one in-place Allreduce (sum). The reducer of
        ``LanguageModel.loss_and_grad``, which the core's nonlinear auxiliary terms then read."""
        if stats.dtype != np.float64 or not stats.flags.c_contiguous:
            raise TypeError(f"batch statistics must be a C-contiguous float64 array, got {stats.dtype}")
        if local_tokens != total_tokens:
            stats *= local_tokens / total_tokens
        self.comm.Allreduce(self.MPI.IN_PLACE, stats, op=self.MPI.SUM)

    def sum(self, values: Sequence[float]) -> np.ndarray:
        """Element-wise sum over ranks (float64)."""
        buf = np.array(values, dtype=np.float64)
        self.comm.Allreduce(self.MPI.IN_PLACE, buf, op=self.MPI.SUM)
        return buf

    # ---- errors that every rank must see ----------------------------------------------------
    def together(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on every rank; if it raised anywhere, raise on every rank (this rank's own
        exception, or the first failing rank's, of the same type, its message naming that rank)."""
        try:
            out, err = fn(), None
        except Exception as e:  # collected, then raised on every rank
            out, err = None, e
        errors = self.comm.allgather(None if err is None else (type(err), str(err)))
        failed = [(r, e) for r, e in enumerate(errors) if e is not None]
        if failed:
            if err is not None:
                raise _mark(err)
            r, (kind, message) = failed[0]
            raise _mark(_rebuild(kind, f"rank {r} of {self.size}: {message}"))
        return out

    def on_root(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on rank 0 only and return its result on every rank; an exception it raises is
        raised on every rank."""
        out = err = None
        if self.root:
            try:
                out = fn()
            except Exception as e:
                err = e
        kind, message, out = self.comm.bcast(
            (type(err), str(err), out) if err is not None else (None, None, out), root=0
        )
        if err is not None:
            raise _mark(err)
        if kind is not None:
            raise _mark(_rebuild(kind, message))
        return out

    def agree(self, facts: Dict[str, Any]) -> None:
        """``ValueError`` on every rank unless all ranks hold the same ``facts`` (name -> JSON-able
        value), naming the first fact that differs, the first rank that differs and both values."""
        everyone: List[Dict[str, Any]] = self.comm.allgather(facts)
        for name, value in everyone[0].items():
            for r, other in enumerate(everyone[1:], start=1):
                if other.get(name) != value:
                    raise _mark(
                        ValueError(
                            f"the {self.size} ranks disagree on {name}: rank 0 has {_short(value)}, rank {r} has "
                            f"{_short(other.get(name))}; every rank must build the same model and read the same data"
                        )
                    )

    def check_model(self, model, extra: Optional[Dict[str, Any]] = None) -> None:
        """Agree on the model's config, dtype and parameters (CRC-32 of the flat buffer), and ``extra``."""
        params = np.ascontiguousarray(model.flat_parameters())
        facts = {
            "the model config": model.config_json(),
            "the parameter dtype": str(params.dtype),
            "the parameters (CRC-32 of the flat buffer)": int(zlib.crc32(params.tobytes())),
        }
        facts.update(extra or {})
        self.agree(facts)

    # ---- files that only rank 0 sees ---------------------------------------------------------
    def read_on_root(self, path) -> bytes:
        """The bytes of the file ``path`` on rank 0, on every rank (a checkpoint written by rank 0
        need not be visible to the others)."""

        def read():
            with open(path, "rb") as f:
                return f.read()

        return self.on_root(read)

    def load_checkpoint(self, path, load: Callable[[Any], Any]) -> Any:
        """``load(path)`` on rank 0 and ``load(copy)`` on the other ranks, where the copy is a
        temporary file holding rank 0's bytes of ``path`` (removed afterwards)."""
        blob = self.read_on_root(path)
        if self.root:
            return self.together(lambda: load(path))
        folder = tempfile.mkdtemp(prefix="msrnn-rank")
        copy = os.path.join(folder, os.path.basename(str(path)) or "checkpoint.npz")
        try:
            with open(copy, "wb") as f:
                f.write(blob)
            return self.together(lambda: _named(lambda: load(copy), copy, path))
        finally:
            for name in os.listdir(folder):
                os.unlink(os.path.join(folder, name))
            os.rmdir(folder)


def _named(fn: Callable[[], Any], copy: str, path) -> Any:
    """``fn()``, with an exception's message naming ``path`` (the user's file) where it named
    ``copy`` (this rank's temporary copy of it)."""
    try:
        return fn()
    except Exception as e:
        if copy in str(e):
            raise _rebuild(type(e), str(e).replace(copy, str(path))) from e
        raise


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def data_parallel(distributed) -> Optional[DataParallel]:
    """``Trainer(distributed=...)``: False/None -> None, True -> ``DataParallel()`` on
    ``MPI.COMM_WORLD``, a ``DataParallel`` as it is, an mpi4py communicator -> ``DataParallel(comm)``."""
    if distributed is None or distributed is False:
        return None
    if distributed is True:
        return DataParallel()
    if isinstance(distributed, DataParallel):
        return distributed
    return DataParallel(distributed)
