"""Runs of tests/test_distributed.py: the same small trainings, one process or K ranks.

``build(family, dtype, dropout)`` and ``run(...)`` are shared by the test (one process, in the
pytest process) and by this script's ``main``, which ``mpiexec -n 2 python tests/_mpi_training.py
SCENARIO OUT`` starts. Each scenario writes its results from rank 0 into the folder OUT (``.npz``
files, and ``.txt`` files with error messages, one per rank).

The families are every class of the registry ``msr.MODELS``, each built from its own declared example
(``LanguageModel.example``: a tiny model with every auxiliary term of the family active).
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import NamedTuple

import numpy as np

import multiscale_rnn as msr

VOCAB = 11
BATCH, BPTT = 5, 6  # 5 streams: 3 on rank 0 and 2 on rank 1
CHUNKS = 8  # chunks of 6 steps per epoch: 2 epochs are 16 updates
EPOCHS = 2
STEPS = CHUNKS * EPOCHS
STOP = 5  # the interrupted runs stop after this many chunks
FAMILIES = tuple(sorted(msr.MODELS))  # class names of every registered family
BASELINE = "LSTM"  # the family of the dropout and error scenarios


def text(n: int, seed: int) -> np.ndarray:
    """A learnable toy text: a repeating pattern with 10 % noise."""
    rng = np.random.default_rng(seed)
    ids = np.tile(np.arange(VOCAB), n // VOCAB + 1)[:n]
    flip = rng.random(n) < 0.1
    ids[flip] = rng.integers(0, VOCAB, flip.sum())
    return ids.astype(np.int32)


TRAIN = text(BATCH * (CHUNKS * BPTT + 1), 0)
VALID = text(200, 1)


def build(family: str, dtype: str = "float64", dropout: float = 0.0, seed: int = 0):
    return msr.MODELS[family].example(VOCAB, dtype=dtype, dropout=dropout, seed=seed)


def trainer(model, distributed=False, **kw):
    return msr.Trainer(
        model,
        optimizer=msr.optim.Adam(lr=5e-3),
        clip_norm=1.0,
        batch_size=BATCH,
        bptt=BPTT,
        progress=False,
        eval_batch_size=3,
        distributed=distributed,
        **kw,
    )


def boundary_counts(model) -> list:
    """Columns (steps x this process's streams) with z^l = 1 in the last training chunk, one count per
    layer with a boundary detector (none for families without detectors)."""
    rec = model.records()
    return [int(rec[f"z_l{l}"].sum()) for l in getattr(model, "detector_layers", ())]


class Run(NamedTuple):
    model: object
    trainer: object
    aux: np.ndarray  # (updates, terms) each auxiliary term per update, names sorted (the Trainer's log)
    aux_names: tuple
    fired: np.ndarray  # (updates, detectors) boundary counts per update (this process's streams)


def run(
    family,
    dtype="float64",
    dropout=0.0,
    distributed=False,
    epochs=EPOCHS,
    checkpoint=None,
    max_chunks=None,
    resume=False,
) -> Run:
    """Train ``epochs`` epochs (or ``max_chunks`` chunks) from scratch or from ``checkpoint``, recording
    the auxiliary terms and boundary counts of every update."""
    model = build(family, dtype, dropout)
    tr = trainer(model, distributed)
    rows = []

    def log(event):
        if event["event"] == "chunk":
            rows.append((dict(event["aux"]), boundary_counts(model)))

    tr.fit(TRAIN, valid=VALID, epochs=epochs, checkpoint=checkpoint, max_chunks=max_chunks, resume=resume, log=log)
    names = tuple(sorted(rows[0][0])) if rows else ()
    aux = np.array([[a[k] for k in names] for a, _ in rows], dtype=np.float64).reshape(len(rows), len(names))
    detectors = len(getattr(model, "detector_layers", ()))
    fired = np.array([f for _, f in rows], dtype=np.int64).reshape(len(rows), detectors)
    return Run(model, tr, aux, names, fired)


def results(r: Run) -> dict:
    hist = r.trainer.history
    return {
        "params": np.array(r.model.flat_parameters(), copy=True),
        "train_loss": np.array([h["train_loss"] for h in hist]),
        "valid_loss": np.array([h["valid_loss"] for h in hist]),
        "step": np.array(r.trainer.step),
        "aux": r.aux,
        "aux_names": np.array(r.aux_names, dtype=str),
        "fired": r.fired,
    }


# ---- scenarios (run under mpiexec) ----------------------------------------------------------------
def scenario_equivalence(out: Path, dist) -> None:
    """Each family in float64 and float32, and interrupted and resumed at K ranks; the LSTM with dropout
    interrupted and resumed."""
    for family in FAMILIES:
        for dtype in ("float64", "float32"):
            r = run(family, dtype, distributed=dist)
            if dist.root:
                np.savez(out / f"{family}-{dtype}.npz", **results(r))
        # checkpointed after STOP chunks, resumed to the end of epoch 2
        ck = out / f"{family}-resume.npz"
        run(family, distributed=dist, checkpoint=ck, max_chunks=STOP)
        if dist.root:
            Path(str(ck) + f".at{STOP}").write_bytes(ck.read_bytes())  # kept for the K = 1 resume
        r = run(family, distributed=dist, checkpoint=ck, resume=True)
        if dist.root:
            np.savez(out / f"{family}-resumed.npz", **results(r))
    # dropout draws random numbers on every rank: an interrupted run equals an uninterrupted one
    r = run(BASELINE, "float32", dropout=0.2, distributed=dist, epochs=1)
    if dist.root:
        np.savez(out / "dropout-straight.npz", **results(r))
    ck = out / "dropout.npz"
    run(BASELINE, "float32", dropout=0.2, distributed=dist, epochs=1, checkpoint=ck, max_chunks=STOP)
    r = run(BASELINE, "float32", dropout=0.2, distributed=dist, epochs=1, checkpoint=ck, resume=True)
    if dist.root:
        np.savez(out / "dropout-resumed.npz", **results(r))


def perturbed(rank: int):
    model = build(BASELINE)
    model.flat_parameters()[7] += rank * 1e-3
    return model


def scenario_errors(out: Path, dist) -> None:
    """Ranks that disagree, or fail on one rank only: every rank raises, none hangs."""
    cases = {
        "seed": lambda: trainer(build(BASELINE, seed=dist.rank), dist).fit(TRAIN, max_chunks=1),
        "params": lambda: trainer(perturbed(dist.rank), dist).fit(TRAIN, max_chunks=1),
        "data": lambda: trainer(build(BASELINE), dist).fit(TRAIN + (dist.rank == 1) * (TRAIN == 3), max_chunks=1),
        "bptt": lambda: msr.Trainer(
            build(BASELINE), batch_size=BATCH, bptt=BPTT + dist.rank, progress=False, distributed=dist
        ).fit(TRAIN, max_chunks=1),
        "one-rank": lambda: trainer(build(BASELINE), dist).fit(TRAIN, max_chunks=1 if dist.rank == 0 else 0),
        "batch": lambda: msr.Trainer(build(BASELINE), batch_size=1, bptt=BPTT, progress=False, distributed=dist).fit(
            TRAIN, max_chunks=1
        ),
        "resume-missing": lambda: trainer(build(BASELINE), dist).fit(TRAIN, checkpoint=out / "absent.npz", resume=True),
    }
    for name, case in cases.items():
        try:
            case()
            message = "no error"
        except Exception as e:
            message = f"{type(e).__name__}: {e}"
        (out / f"{name}-rank{dist.rank}.txt").write_text(message)


def main(argv) -> int:
    from multiscale_rnn.distributed import DataParallel

    scenario, out = argv[1], Path(argv[2])
    msr.set_num_threads(1)
    dist = DataParallel()
    try:
        {"equivalence": scenario_equivalence, "errors": scenario_errors}[scenario](out, dist)
    except BaseException:  # one rank failing alone would leave the other waiting: end the job
        traceback.print_exc()
        sys.stderr.flush()
        dist.comm.Abort(1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
