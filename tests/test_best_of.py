"""best_of: random restarts selected by the validation likelihood."""

import numpy as np
import pytest

import multiscale_rnn as msr


@pytest.fixture(scope="module")
def corpus():
    return msr.data.synthetic_hierarchy(n_chars=6000, seed=1).corpus(valid_fraction=0.2, test_fraction=0.0)


def _make(corpus, built):
    def make(seed):
        built.append(seed)
        return msr.LSTM(corpus.vocab_size, 8, [16], seed=seed)

    return make


def test_trains_every_candidate_and_keeps_the_lowest_validation_loss(corpus):
    built = []
    kw = dict(
        restarts=3, epochs=1, seed=4, batch_size=8, bptt=20, progress=False, make_optimizer=lambda: msr.optim.Adam(5e-3)
    )
    model, results = msr.best_of(_make(corpus, built), corpus.train, corpus.valid, **kw)
    assert built == [4, 5, 6] and [r["seed"] for r in results] == [4, 5, 6]
    losses = [r["valid_loss"] for r in results]
    assert len(set(losses)) == 3  # the seeds give different candidates
    chosen = int(np.argmin(losses))
    assert [r["chosen"] for r in results] == [i == chosen for i in range(3)]
    assert msr.evaluate(model, corpus.valid)["loss"] == pytest.approx(losses[chosen], rel=1e-6)
    assert results[chosen]["valid_bpc"] == pytest.approx(losses[chosen] / np.log(2))
    # each candidate is the run a Trainer with that seed gives on its own
    alone = msr.LSTM(corpus.vocab_size, 8, [16], seed=4 + chosen)
    msr.Trainer(alone, optimizer=msr.optim.Adam(5e-3), seed=4 + chosen, batch_size=8, bptt=20, progress=False).fit(
        corpus.train, epochs=1
    )
    assert np.array_equal(alone.flat_parameters(), model.flat_parameters())


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"restarts": 0}, ValueError, "restarts must be a positive integer, got 0"),
        ({"restarts": 2.0}, ValueError, "restarts must be a positive integer"),
        ({"seed": -1}, ValueError, "seed must be a non-negative integer"),
        ({"optimizer": msr.optim.Adam()}, TypeError, "takes make_optimizer"),
        ({"make_optimizer": msr.optim.Adam()}, TypeError, "make_optimizer must be a callable"),
        ({"valid": []}, ValueError, "needs validation ids"),
        ({"make_model": "lstm"}, TypeError, "make_model must be a callable"),
        ({"select_after": 0}, ValueError, "select_after must be a positive integer, got 0"),
        ({"select_after": 2}, ValueError, "select_after=2 is beyond epochs=1"),
        ({"select_after": "early"}, ValueError, "select_after must be a positive integer, None or 'auto', got 'early'"),
        ({"epochs": 0}, ValueError, "epochs must be a positive integer, got 0"),
        ({"select": "bpc"}, ValueError, "select must be one of 'loss', 'agreement', got 'bpc'"),
        ({"select": "agreement"}, ValueError, "select='agreement' compares the candidates' boundaries, and LSTM marks"),
    ],
)
def test_bad_arguments(corpus, kwargs, error, message):
    args = dict(
        make_model=_make(corpus, []), train=corpus.train, valid=corpus.valid, restarts=2, epochs=1, progress=False
    )
    args.update(kwargs)
    make_model, train, valid = args.pop("make_model"), args.pop("train"), args.pop("valid")
    with pytest.raises(error, match=message):
        msr.best_of(make_model, train, valid, **args)


def test_a_diverging_candidate_names_its_seed(corpus):
    def make(seed):
        m = msr.LSTM(corpus.vocab_size, 8, [16], seed=seed)
        if seed == 1:
            m.flat_parameters()[:] = np.nan
        return m

    with pytest.raises(FloatingPointError, match=r"candidate 2/2 \(seed 1\)"):
        msr.best_of(make, corpus.train, corpus.valid, restarts=2, epochs=1, batch_size=8, bptt=20, progress=False)


def test_each_candidate_gets_its_own_learning_rate_schedule(corpus):
    plateau = msr.schedules.ReduceOnPlateau(factor=2.0, patience=0)
    seen = []

    class Spy(msr.optim.Adam):
        def step(self, *a, **k):
            seen.append(self.lr)
            return super().step(*a, **k)

    msr.best_of(
        _make(corpus, []),
        corpus.train,
        corpus.valid,
        restarts=2,
        epochs=3,
        batch_size=8,
        bptt=20,
        progress=False,
        lr_schedule=plateau,
        make_optimizer=lambda: Spy(5e-3),
    )
    assert plateau.best is None  # the schedule given was copied, not stepped
    per_run = len(seen) // 2
    assert seen[per_run] == 5e-3  # the second candidate starts at the initial rate


def test_the_chosen_candidate_is_checkpointed_and_a_failed_call_keeps_the_old_file(corpus, tmp_path):
    from multiscale_rnn.checkpoint import load

    out = tmp_path / "best.npz"
    kw = dict(restarts=2, epochs=2, batch_size=8, bptt=20, progress=False, seed=7)
    model, results = msr.best_of(
        _make(corpus, []),
        corpus.train,
        corpus.valid,
        checkpoint=out,
        vocab=corpus.vocab,
        extra={"note": "chosen"},
        fit_kw={"valid": corpus.valid},
        eval_batch_size=8,
        **kw,
    )
    ck = load(out)
    assert np.array_equal(ck.model.flat_parameters(), model.flat_parameters())
    chosen = [r for r in results if r["chosen"]][0]
    assert ck.trainer_state["seed"] == chosen["seed"] and ck.trainer_state["epoch"] == 2 == chosen["epochs"]
    assert len(ck.history) == 2 and ck.history[-1]["valid_bpc"] == pytest.approx(chosen["valid_bpc"])
    before = out.read_bytes()

    def make(seed):  # the second candidate diverges: nothing is written
        m = msr.LSTM(corpus.vocab_size, 8, [16], seed=seed)
        if seed == 8:
            m.flat_parameters()[:] = np.nan
        return m

    with pytest.raises(FloatingPointError, match=r"seed 8"):
        msr.best_of(make, corpus.train, corpus.valid, checkpoint=out, **kw)
    assert out.read_bytes() == before
    with pytest.raises(TypeError, match="fit_kw may not hold 'checkpoint'"):
        msr.best_of(make, corpus.train, corpus.valid, fit_kw={"checkpoint": out}, **kw)


def test_select_after_compares_early_and_trains_only_the_chosen_one_on(corpus, tmp_path):
    """select_after=1, epochs=3: every candidate trains 1 epoch, the lowest validation loss then is chosen,
    and only it goes on to 3 epochs: the same model as one uninterrupted run of 3 epochs with its seed."""
    built, steps = [], []
    kw = dict(restarts=3, epochs=3, seed=2, batch_size=8, bptt=20, progress=False)
    out = tmp_path / "chosen.npz"
    model, results = msr.best_of(
        _make(corpus, built),
        corpus.train,
        corpus.valid,
        select_after=1,
        checkpoint=out,
        make_optimizer=lambda: msr.optim.Adam(5e-3),
        fit_kw={"log": lambda d: steps.append(1) if d["event"] == "chunk" else None},
        **kw,
    )
    chosen = [r for r in results if r["chosen"]]
    assert built == [2, 3, 4] and [r["epochs"] for r in results] == [3 if r["chosen"] else 1 for r in results]
    assert len(chosen) == 1 and chosen[0]["valid_loss"] == min(r["valid_loss"] for r in results)
    per_epoch = [r for r in results if not r["chosen"]][0]["steps"]
    assert chosen[0]["steps"] == 3 * per_epoch
    assert len(steps) == 3 * per_epoch + 2 * per_epoch  # three short runs, one continuation
    assert msr.checkpoint.load(out).trainer_state["epoch"] == 3
    alone = msr.LSTM(corpus.vocab_size, 8, [16], seed=chosen[0]["seed"])
    msr.Trainer(
        alone, optimizer=msr.optim.Adam(5e-3), seed=chosen[0]["seed"], batch_size=8, bptt=20, progress=False
    ).fit(corpus.train, epochs=3)
    assert np.array_equal(alone.flat_parameters(), model.flat_parameters())


def test_select_after_auto_asks_the_model(corpus):
    """select_after="auto" (the default): an HM-LSTM with ``compare_at="last_start"`` (the phrase recipe) and a
    warm-up per layer is compared at the last whole epoch before its last detector starts; a model that names no
    step (an LSTM, an HM-LSTM with one warm-up, or compared at the end as the default recipes are) at the end.
    The comparison point is the one an explicit select_after gives, bit for bit."""
    from multiscale_rnn.trainer import auto_select_after

    def hm(s, compare_at="last_start"):
        return msr.HMLSTM(corpus.vocab_size, 8, (8, 8, 8), seed=s, warmup=[5, 30], compare_at=compare_at)

    n = msr.data.num_chunks(msr.data.batchify(corpus.train, 8), 20)  # chunks per epoch
    assert auto_select_after(hm(0), corpus.train, 8, 20, epochs=10) == 30 // n
    assert auto_select_after(hm(0), corpus.train, 8, 20, epochs=30 // n) is None  # not before the end
    assert auto_select_after(hm(0, "end"), corpus.train, 8, 20, epochs=10) is None  # the 3-layer defaults' choice
    first = msr.HMLSTM(corpus.vocab_size, 8, (8, 8, 8), warmup=[1, 2], compare_at="last_start")
    assert auto_select_after(first, corpus.train, 8, 20, epochs=10) is None  # within the first epoch
    assert auto_select_after(msr.HMLSTM(corpus.vocab_size, 8, (8, 8)), corpus.train, 8, 20, epochs=10) is None
    kw = dict(
        restarts=2,
        epochs=30 // n + 1,
        seed=1,
        batch_size=8,
        bptt=20,
        progress=False,
        make_optimizer=lambda: msr.optim.Adam(5e-3),
    )
    model, results = msr.best_of(hm, corpus.train, corpus.valid, **kw)
    assert [r["compared_after"] for r in results] == [30 // n] * 2
    assert [r["epochs"] for r in results] == [kw["epochs"] if r["chosen"] else 30 // n for r in results]
    same, _ = msr.best_of(hm, corpus.train, corpus.valid, select_after=30 // n, **kw)
    assert np.array_equal(same.flat_parameters(), model.flat_parameters())
    _, at_end = msr.best_of(_make(corpus, []), corpus.train, corpus.valid, **{**kw, "epochs": 2})
    assert [r["compared_after"] for r in at_end] == [2, 2]


def test_select_agreement_keeps_the_candidate_whose_boundaries_the_others_share(corpus):
    # four HM-LSTM candidates whose detectors start at once: each row gets its mean F1 against the others' z^1 on
    # the validation text, and the one of highest agreement is kept, trained as a Trainer with its seed trains it
    def make(seed):
        return msr.HMLSTM(corpus.vocab_size, 8, [16, 16], seed=seed, warmup=0)

    kw = dict(restarts=4, epochs=1, seed=0, batch_size=8, bptt=20, progress=False)
    model, results = msr.best_of(make, corpus.train, corpus.valid, select="agreement", **kw)
    z = []
    for seed in range(4):
        alone = make(seed)
        msr.Trainer(alone, optimizer=msr.optim.Adam(), seed=seed, batch_size=8, bptt=20, progress=False).fit(
            corpus.train, epochs=1
        )
        z.append(alone.trace(corpus.valid).z[0] > 0.5)
    f1 = [[msr.boundary_scores(z[i], z[j], 1)["f1"] for j in range(4) if j != i] for i in range(4)]
    assert [r["agreement"] for r in results] == pytest.approx([np.mean(row) for row in f1])
    assert len({round(r["agreement"], 9) for r in results}) > 1  # the candidates differ
    kept = int(np.argmax([np.mean(row) for row in f1]))
    assert [r["chosen"] for r in results] == [i == kept for i in range(4)]
    assert np.array_equal(model.trace(corpus.valid).z[0] > 0.5, z[kept])
    assert msr.training.restarts.most_agreed(z) == kept
