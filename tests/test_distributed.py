"""Data-parallel training over MPI (multiscale_rnn.distributed): K = 2 ranks under ``mpiexec -n 2``
against one process with the same global batch, exact resume, errors on every rank, the command line.

The runs under MPI are started once per module (``tests/_mpi_training.py``) and compared here with
the same trainings done in the pytest process. mpi4py and an MPI (the MPICH wheel) come with the
``test`` extra; without mpi4py only the tests that need no MPI run.
"""

import csv
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn.distributed import data_parallel, shard

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _mpi as mpi  # noqa: E402
import _mpi_training as runs  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

HERE = Path(__file__).resolve().parent
TIMEOUT = 240  # seconds for one mpiexec job; a hang fails the test instead of the suite


# ---- no MPI needed ---------------------------------------------------------------------------------
def test_shards_cover_the_streams_once_in_order():
    for total in (1, 2, 5, 7, 64):
        for size in range(1, total + 1):
            rows = [shard(total, r, size) for r in range(size)]
            assert [i for s in rows for i in range(total)[s]] == list(range(total))
            lengths = [s.stop - s.start for s in rows]
            assert max(lengths) - min(lengths) <= 1 and min(lengths) >= 1


def test_not_distributed_by_default():
    assert data_parallel(False) is None and data_parallel(None) is None
    assert msr.Trainer(runs.build(runs.BASELINE)).dist is None


def test_every_registered_family_has_an_example_with_all_its_auxiliary_terms_on():
    assert runs.FAMILIES == tuple(sorted(msr.MODELS)) and len(runs.FAMILIES) >= 11
    tokens = runs.TRAIN[: runs.BATCH * runs.BPTT].reshape(runs.BATCH, runs.BPTT)
    for family, cls in msr.MODELS.items():
        assert cls.example_options is not None, family
        model = runs.build(family)
        assert type(model) is cls and model.dtype == np.float64
        loss, _, _ = model.loss_and_grad(tokens, np.roll(tokens, -1, axis=1))
        assert sorted(loss.aux) == sorted(cls.aux_terms), family
        assert all(v != 0.0 for v in loss.aux.values()), (family, loss.aux)


class _Part:
    """Streams [lo, hi) of a batch: their share of a chunk and of a carried state."""

    def __init__(self, rows, tokens, targets, state):
        self.n = tokens[rows].size
        self.tokens, self.targets = tokens[rows], targets[rows]
        self.state = {k: v[rows].copy() for k, v in state.items()}


@pytest.mark.parametrize("family", runs.FAMILIES)
def test_reduced_statistics_give_the_whole_batchs_terms_and_gradient(family):
    # Two "ranks" in one process: streams 0-2 and 3-4 of 5. Each hands its batch statistics to a reducer;
    # replaced by the mean over all 5 streams' columns, the parts' gradients scaled by n_r / N sum to the
    # gradient of the 5 streams, and their terms average to the 5 streams' terms.
    model = runs.build(family)
    rng = np.random.default_rng(3)
    T = 20
    warm = rng.integers(0, runs.VOCAB, (runs.BATCH, T)).astype(np.int32)
    _, state = model.forward(warm)  # a carried state that is not zeros
    tokens = rng.integers(0, runs.VOCAB, (runs.BATCH, T)).astype(np.int32)
    targets = rng.integers(0, runs.VOCAB, (runs.BATCH, T)).astype(np.int32)
    whole, g_whole, _ = model.loss_and_grad(tokens, targets, state)
    N = tokens.size
    parts = [_Part(slice(0, 3), tokens, targets, state), _Part(slice(3, 5), tokens, targets, state)]

    seen = []
    for p in parts:  # 1: each part's own statistics
        model.loss_and_grad(p.tokens, p.targets, p.state, reducer=lambda s: seen.append(s.copy()))
    if not seen:  # a family without statistics: its terms are per-column means
        assert sorted(whole.aux) == sorted(msr.MODELS[family].aux_terms)
    else:
        assert len(seen) == 2 and seen[0].shape == seen[1].shape and seen[0].dtype == np.float64
        assert not np.array_equal(seen[0], seen[1])  # the parts' statistics differ
    reduced = sum(p.n / N * s for p, s in zip(parts, seen)) if seen else None

    def replace(s):
        s[...] = reduced

    grad = {k: np.zeros_like(v) for k, v in g_whole.items()}
    xent, aux = 0.0, {k: 0.0 for k in whole.aux}
    for p in parts:  # 2: the terms and gradients from the reduced statistics
        loss, g, _ = model.loss_and_grad(p.tokens, p.targets, p.state, reducer=replace if seen else None)
        for k in grad:
            grad[k] += p.n / N * g[k]
        xent += p.n / N * float(loss)
        for k in aux:
            aux[k] += p.n / N * loss.aux[k]
    assert xent == pytest.approx(float(whole), rel=1e-13, abs=0)
    for k in aux:
        assert aux[k] == pytest.approx(whole.aux[k], rel=1e-12, abs=0), k
    scale = max(np.max(np.abs(g)) for g in g_whole.values())
    for k in grad:
        assert np.max(np.abs(grad[k] - g_whole[k])) <= 1e-12 * scale, k


def _no_mpi4py(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import mpi4py -> ImportError
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)


def test_without_mpi4py_the_trainer_says_how_to_install_it(monkeypatch):
    _no_mpi4py(monkeypatch)
    with pytest.raises(ImportError, match=r"mpi4py.*multiscale-rnn\[mpi\]"):
        msr.Trainer(runs.build(runs.BASELINE), distributed=True)


def test_without_mpi4py_the_command_line_says_how_to_install_it(monkeypatch, capsys, tmp_path):
    from multiscale_rnn.cli import main

    _no_mpi4py(monkeypatch)
    status = main(["train", "--distributed", "--max-chunks", "1", "--out", str(tmp_path / "x.npz")])
    err = capsys.readouterr().err
    assert status == 1
    assert "error:" in err and "mpi4py" in err and 'pip install "multiscale-rnn[mpi]"' in err
    assert not (tmp_path / "x.npz").exists()


def test_a_communicator_must_be_one():
    pytest.importorskip("mpi4py")
    with pytest.raises(TypeError, match="distributed must be True or an mpi4py communicator"):
        msr.Trainer(runs.build(runs.BASELINE), distributed="world")


# ---- under mpiexec -n 2 ----------------------------------------------------------------------------
_mpiexec = mpi.mpiexec
_mpi = mpi.run


@pytest.fixture(scope="module")
def under_mpi(tmp_path_factory):
    """Run every scenario of tests/_mpi_training.py under ``mpiexec -n 2``; the folder of results."""
    out = tmp_path_factory.mktemp("mpi")
    for scenario in ("equivalence", "errors"):
        p = _mpi(sys.executable, str(HERE / "_mpi_training.py"), scenario, str(out), cwd=out)
        assert p.returncode == 0, f"mpiexec {scenario} failed:\n{p.stdout}\n{p.stderr}"
    return out


@pytest.fixture(scope="module")
def one_process():
    """The same trainings in one process (one thread): family, dtype -> runs.Run."""
    msr.set_num_threads(1)
    return {(f, d): runs.run(f, d) for f in runs.FAMILIES for d in ("float64", "float32")}


def _steps(r):
    """The recorded trace of a run in the pytest process or from an .npz of the MPI runs: aux names,
    aux (updates, terms), boundary counts (updates, detectors)."""
    if isinstance(r, runs.Run):
        return r.aux_names, r.aux, r.fired
    return tuple(str(n) for n in r["aux_names"]), r["aux"], r["fired"]


@pytest.mark.parametrize("family", runs.FAMILIES)
def test_two_ranks_give_the_parameters_of_one_process_in_float64(under_mpi, one_process, family):
    k2 = np.load(under_mpi / f"{family}-float64.npz")
    one = one_process[(family, "float64")]
    assert int(k2["step"]) == one.trainer.step == runs.STEPS
    # every auxiliary term of the family was on, with its detectors firing, in the updates compared
    cls = msr.MODELS[family]
    names, aux, fired = _steps(one)
    assert names == tuple(sorted(cls.aux_terms)) == _steps(k2)[0]
    assert aux.shape == (runs.STEPS, len(names)) and np.all(aux != 0.0), aux
    columns = runs.BATCH * runs.BPTT
    assert fired.shape == (runs.STEPS, len(getattr(one.model, "detector_layers", ())))
    for l in range(fired.shape[1]):  # z^l = 1 on some columns and 0 on others, in most updates
        mixed = (fired[:, l] > 0) & (fired[:, l] < columns)
        assert mixed.sum() >= runs.STEPS // 2, fired[:, l]
    # the sums only change order (3 + 2 streams against 5), also inside the statistics of the terms
    assert np.max(np.abs(k2["params"] - one.model.flat_parameters())) < 1e-10
    np.testing.assert_allclose(k2["train_loss"], [h["train_loss"] for h in one.trainer.history], rtol=1e-12)
    np.testing.assert_allclose(k2["valid_loss"], [h["valid_loss"] for h in one.trainer.history], rtol=1e-12)
    np.testing.assert_allclose(k2["aux"], aux, rtol=1e-10)


# float32: sums taken in another order, through 16 Adam steps. Largest parameter difference measured on
# the 2-core AMD EPYC with the AVX2 module / the baseline module (docs/training.md, "Training on several
# machines"): Clockwork 6.0e-8 / 6.0e-8, Elman 1.2e-7 / 1.2e-7, FS-RNN 3.4e-5 / 2.7e-5 (one process at 1
# against 2 threads: 8.1e-6 / 4.1e-5; its layer norms and Adam amplify rounding), GRU 1.1e-6 / 8.9e-7,
# HM-LSTM 2.4e-7 / 1.2e-7, HORNN 8.9e-8 / 1.2e-7, LSTM 1.2e-7 / 1.2e-7, sequential LSTM 1.8e-7 / 3.4e-7,
# stacked LSTM 1.2e-7 / 1.2e-7, VCGRU 6.0e-8 / 1.2e-7, VCRNN 1.2e-7 / 2.4e-7. Each bound leaves a factor
# of about 5 over the larger.
FLOAT32_BOUND = {
    "ClockworkRNN": 3e-7,
    "ElmanRNN": 6e-7,
    "FSRNN": 2e-4,
    "GRU": 6e-6,
    "HMLSTM": 1.2e-6,
    "HORNN": 6e-7,
    "LSTM": 6e-7,
    "SequentialLSTM": 2e-6,
    "StackedLSTM": 6e-7,
    "VCGRU": 6e-7,
    "VCRNN": 1.2e-6,
}


def test_every_family_has_a_float32_bound():
    assert sorted(FLOAT32_BOUND) == sorted(runs.FAMILIES)


@pytest.mark.parametrize("family", runs.FAMILIES)
def test_two_ranks_give_the_parameters_of_one_process_in_float32(under_mpi, one_process, family):
    k2 = np.load(under_mpi / f"{family}-float32.npz")
    one = one_process[(family, "float32")]
    assert np.max(np.abs(k2["params"] - one.model.flat_parameters())) < FLOAT32_BOUND[family]
    np.testing.assert_allclose(k2["train_loss"], [h["train_loss"] for h in one.trainer.history], rtol=1e-5)


@pytest.mark.parametrize("family", runs.FAMILIES)
def test_a_checkpoint_of_two_ranks_resumes_exactly_at_two(under_mpi, family):
    straight, resumed = np.load(under_mpi / f"{family}-float64.npz"), np.load(under_mpi / f"{family}-resumed.npz")
    assert int(resumed["step"]) == runs.STEPS
    np.testing.assert_array_equal(resumed["params"], straight["params"])
    np.testing.assert_array_equal(resumed["train_loss"], straight["train_loss"])


@pytest.mark.parametrize("family", runs.FAMILIES)
def test_a_checkpoint_of_two_ranks_resumes_at_one(under_mpi, one_process, family, tmp_path):
    ck = tmp_path / "k2.npz"
    ck.write_bytes((under_mpi / f"{family}-resume.npz.at{runs.STOP}").read_bytes())
    saved = msr.checkpoint.load(ck)
    assert saved.trainer_state["chunk"] == runs.STOP
    assert saved.trainer_state["rank_rngs"].shape == (2, 4)
    assert all(v.shape[0] == runs.BATCH for v in saved.trainer_state["carried"].values())  # all 5 streams
    r = runs.run(family, checkpoint=ck, resume=True)
    ref = one_process[(family, "float64")]
    assert r.trainer.step == runs.STEPS
    assert np.max(np.abs(r.model.flat_parameters() - ref.model.flat_parameters())) < 1e-10


def test_dropout_run_resumes_exactly_with_every_ranks_random_state(under_mpi):
    straight, resumed = np.load(under_mpi / "dropout-straight.npz"), np.load(under_mpi / "dropout-resumed.npz")
    np.testing.assert_array_equal(resumed["params"], straight["params"])


def _message(folder, name, rank):
    return (folder / f"{name}-rank{rank}.txt").read_text()


@pytest.mark.parametrize(
    "case, pattern",
    [
        (
            "seed",
            r"ValueError: the 2 ranks disagree on the model config: rank 0 has .*\"seed\": 0.*rank 1 has .*\"seed\": 1",
        ),
        (
            "params",
            r"ValueError: the 2 ranks disagree on the parameters \(CRC-32 of the flat buffer\): rank 0 has \d+, "
            r"rank 1 has \d+",
        ),
        (
            "data",
            r"ValueError: the 2 ranks disagree on the training data \(tokens, CRC-32\): rank 0 has "
            rf"\{{'tokens': {runs.TRAIN.size}",
        ),
        ("bptt", r"ValueError: the 2 ranks disagree on the trainer setting bptt: rank 0 has 6, rank 1 has 7"),
        ("batch", r"ValueError: batch_size=1 streams cannot be shared by 2 ranks"),
        ("resume-missing", r"(FileNotFoundError|No such file).*absent\.npz"),
    ],
)
def test_every_rank_raises_the_same_clear_error(under_mpi, case, pattern):
    for rank in (0, 1):
        assert re.search(pattern, _message(under_mpi, case, rank)), _message(under_mpi, case, rank)


def test_an_error_on_one_rank_is_raised_on_every_rank(under_mpi):
    assert _message(under_mpi, "one-rank", 1).startswith("ValueError: max_chunks must be a positive integer, got 0")
    assert _message(under_mpi, "one-rank", 0).startswith(
        "ValueError: rank 1 of 2: max_chunks must be a positive integer, got 0"
    )


def _cli(tmp_path, *extra):
    flags = "--model lstm --embed-size 8 --hidden-sizes 16 --batch-size 4 --bptt 10 --epochs 1 --max-chunks 3"
    return _mpi(
        sys.executable, "-m", "multiscale_rnn", "train", "--distributed", *flags.split(), "--threads", "1",
        "--no-progress", "--out", str(tmp_path / "cli.npz"), *extra, cwd=tmp_path,
    )  # fmt: skip


def test_command_line_trains_on_two_ranks_and_rank_0_alone_speaks_and_writes(tmp_path):
    p = _cli(tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("data-parallel over 2 MPI ranks: 4 streams, 2 per rank") == 1
    assert p.stdout.count("done after 0 epoch(s), 3 steps") == 1
    ck = msr.checkpoint.load(tmp_path / "cli.npz")
    assert ck.trainer_state["step"] == 3
    # and it resumes at K = 2 from what rank 0 wrote
    p = _cli(tmp_path, "--resume")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("done after 0 epoch(s), 6 steps") == 1
    assert sorted(x.name for x in tmp_path.iterdir()) == ["cli.csv", "cli.history.json", "cli.npz"]
    rows = list(csv.DictReader(open(tmp_path / "cli.csv")))  # one row per step, written by rank 0 alone
    assert [int(r["step"]) for r in rows] == [1, 2, 3, 4, 5, 6]


def test_command_line_error_on_every_rank_is_reported_once(tmp_path):
    p = _cli(tmp_path, "--bptt", "0")
    assert p.returncode != 0
    assert p.stderr.count("error: bptt must be a positive integer") == 1, p.stderr


def test_command_line_error_on_one_rank_is_reported_once_with_its_rank(tmp_path):
    # rank 1 is given a corpus file that does not exist (two programs in one job: "A : B")
    text = tmp_path / "own.txt"
    text.write_text("the cat sat on the mat. " * 400)
    common = [
        "-m",
        "multiscale_rnn",
        "train",
        "--distributed",
        "--model",
        "lstm",
        "--hidden-sizes",
        "8",
        "--batch-size",
        "4",
        "--bptt",
        "10",
        "--max-chunks",
        "1",
        "--threads",
        "1",
        "--no-progress",
        "--out",
        str(tmp_path / "x.npz"),
    ]
    p = subprocess.run(
        [
            _mpiexec(),
            "-n",
            "1",
            sys.executable,
            *common,
            "--data-path",
            str(text),
            ":",
            "-n",
            "1",
            sys.executable,
            *common,
            "--data-path",
            str(tmp_path / "absent.txt"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert p.returncode != 0
    assert p.stderr.count("error: rank 1 of 2:") == 1 and "absent.txt" in p.stderr, p.stderr
    assert not (tmp_path / "x.npz").exists()


def test_command_line_error_of_a_single_rank_ends_the_job_instead_of_hanging(tmp_path):
    # rank 1 fails while rank 0 waits in a collective: the command line's error path must abort the job
    code = (
        "import sys\nfrom mpi4py import MPI\nfrom multiscale_rnn.cli import build_parser\n"
        "from multiscale_rnn.command_line.errors import failed\n"
        "args = build_parser().parse_args(['train', '--distributed'])\n"
        "if MPI.COMM_WORLD.Get_rank() == 1:\n"
        "    sys.exit(failed(args, RuntimeError('disk on fire'), 'error: disk on fire', 1))\n"
        "MPI.COMM_WORLD.Barrier()\n"
    )
    p = _mpi(sys.executable, "-c", code, cwd=tmp_path, timeout=60)
    assert p.returncode != 0
    assert "multiscale-rnn train (rank 1): error: disk on fire" in p.stderr, p.stderr


def test_a_rank_reading_its_copy_of_the_checkpoint_names_the_users_file(tmp_path):
    # ranks other than 0 load a temporary copy of rank 0's bytes: their errors name the user's path
    from multiscale_rnn.checkpoint import CheckpointError
    from multiscale_rnn.distributed import _named

    copy, user = str(tmp_path / "msrnn-rank1" / "run.npz"), tmp_path / "runs" / "run.npz"
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a checkpoint")

    def load():
        try:
            msr.checkpoint.load(bad)
        except CheckpointError as e:
            raise CheckpointError(str(e).replace(str(bad), copy)) from None

    with pytest.raises(CheckpointError) as info:
        _named(load, copy, user)
    assert str(user) in str(info.value) and copy not in str(info.value)
