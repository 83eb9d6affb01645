"""Runs of tests/test_distributed.py: the same small trainings, one process or K ranks.

``build(family, dtype, dropout)`` and ``run(...)`` are shared by the test (one process, in the
pytest process) and by this script's ``main``, which ``mpiexec -n 2 python tests/_mpi_training.py
SCENARIO OUT`` starts. Each scenario writes its results from rank 0 into the folder OUT (``.npz``
files, and ``.txt`` files with error messages, one per rank).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import multiscale_rnn as msr

VOCAB = 11
BATCH, BPTT = 5, 6            # 5 streams: 3 on rank 0 and 2 on rank 1
FAMILIES = ("lstm", "hm_lstm", "fs_rnn")


def text(n: int, seed: int) -> np.ndarray:
    """A learnable toy text: a repeating pattern with 10 % noise."""
    rng = np.random.default_rng(seed)
    ids = np.tile(np.arange(VOCAB), n // VOCAB + 1)[:n]
    flip = rng.random(n) < 0.1
    ids[flip] = rng.integers(0, VOCAB, flip.sum())
    return ids.astype(np.int32)


TRAIN = text(BATCH * (12 * BPTT + 1), 0)   # 12 chunks of 6 steps per epoch
VALID = text(200, 1)


def build(family: str, dtype: str = "float64", dropout: float = 0.0, seed: int = 0):
    if family == "lstm":
        return msr.LSTM(VOCAB, embed_size=8, hidden_sizes=(12, 12), dropout=dropout, dtype=dtype, seed=seed)
    if family == "hm_lstm":
        return msr.HMLSTM(VOCAB, embed_size=8, hidden_sizes=(10, 10), layer_norm=True, dropout=dropout,
                          dtype=dtype, seed=seed)
    if family == "fs_rnn":
        return msr.FSRNN(VOCAB, 8, 10, 12, dropout=dropout, dtype=dtype, seed=seed)
    raise ValueError(family)


def trainer(model, distributed=False, **kw):
    return msr.Trainer(model, optimizer=msr.optim.Adam(lr=3e-3), clip_norm=1.0, batch_size=BATCH, bptt=BPTT,
                       progress=False, eval_batch_size=3, distributed=distributed, **kw)


def run(family, dtype="float64", dropout=0.0, distributed=False, epochs=2, checkpoint=None, max_chunks=None,
        resume=False):
    """Train ``epochs`` epochs (or ``max_chunks`` chunks) from scratch or from ``checkpoint``;
    returns the model and the trainer."""
    model = build(family, dtype, dropout)
    tr = trainer(model, distributed)
    tr.fit(TRAIN, valid=VALID, epochs=epochs, checkpoint=checkpoint, max_chunks=max_chunks, resume=resume)
    return model, tr


def results(model, tr) -> dict:
    rows = tr.history
    return {"params": np.array(model.flat_parameters(), copy=True),
            "train_loss": np.array([r["train_loss"] for r in rows]),
            "valid_loss": np.array([r["valid_loss"] for r in rows]),
            "step": np.array(tr.step)}


# ---- scenarios (run under mpiexec) ----------------------------------------------------------------
def scenario_equivalence(out: Path, dist) -> None:
    """Each family in float64 and float32; LSTM with dropout interrupted and resumed at K ranks."""
    for family in FAMILIES:
        for dtype in ("float64", "float32"):
            model, tr = run(family, dtype, distributed=dist)
            if dist.root:
                np.savez(out / f"{family}-{dtype}.npz", **results(model, tr))
        # checkpointed after 5 chunks, resumed to the end of epoch 2
        ck = out / f"{family}-resume.npz"
        run(family, distributed=dist, checkpoint=ck, max_chunks=5)
        if dist.root:
            Path(str(ck) + ".at5").write_bytes(ck.read_bytes())  # kept for the K = 1 resume
        model, tr = run(family, distributed=dist, checkpoint=ck, resume=True)
        if dist.root:
            np.savez(out / f"{family}-resumed.npz", **results(model, tr))
    # dropout draws random numbers on every rank: an interrupted run equals an uninterrupted one
    model, tr = run("lstm", "float32", dropout=0.2, distributed=dist, epochs=1)
    if dist.root:
        np.savez(out / "dropout-straight.npz", **results(model, tr))
    ck = out / "dropout.npz"
    run("lstm", "float32", dropout=0.2, distributed=dist, epochs=1, checkpoint=ck, max_chunks=7)
    model, tr = run("lstm", "float32", dropout=0.2, distributed=dist, epochs=1, checkpoint=ck, resume=True)
    if dist.root:
        np.savez(out / "dropout-resumed.npz", **results(model, tr))


def perturbed(rank: int):
    model = build("lstm")
    model.flat_parameters()[7] += rank * 1e-3
    return model


def scenario_errors(out: Path, dist) -> None:
    """Ranks that disagree, or fail on one rank only: every rank raises, none hangs."""
    cases = {
        "seed": lambda: trainer(build("lstm", seed=dist.rank), dist).fit(TRAIN, max_chunks=1),
        "params": lambda: trainer(perturbed(dist.rank), dist).fit(TRAIN, max_chunks=1),
        "data": lambda: trainer(build("lstm"), dist).fit(TRAIN + (dist.rank == 1) * (TRAIN == 3), max_chunks=1),
        "bptt": lambda: msr.Trainer(build("lstm"), batch_size=BATCH, bptt=BPTT + dist.rank, progress=False,
                                    distributed=dist).fit(TRAIN, max_chunks=1),
        "one-rank": lambda: trainer(build("lstm"), dist).fit(TRAIN, max_chunks=1 if dist.rank == 0 else 0),
        "batch": lambda: msr.Trainer(build("lstm"), batch_size=1, bptt=BPTT, progress=False,
                                     distributed=dist).fit(TRAIN, max_chunks=1),
        "resume-missing": lambda: trainer(build("lstm"), dist).fit(TRAIN, checkpoint=out / "absent.npz",
                                                                  resume=True),
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
    {"equivalence": scenario_equivalence, "errors": scenario_errors}[scenario](out, dist)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
