"""Checkpoints: round trip, bit-exact resume, atomic writes, refusal of bad files."""

import json
import os

import numpy as np
import pytest

import multiscale_rnn as msr
from multiscale_rnn import checkpoint, data
from multiscale_rnn.checkpoint import CheckpointError
from multiscale_rnn.schedules import ReduceOnPlateau

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def corpus():
    text = data.embedded_text()[:12_000]
    return data.char_corpus(text[:10_000], text[10_000:11_000], text[11_000:])


def make_model(vocab_size, seed=0):
    # two layers with dropout: the random generator state matters for the continuation
    return msr.LSTM(vocab_size, 12, (24, 20), dropout=0.3, seed=seed)


def make_trainer(model):
    return msr.Trainer(
        model,
        msr.optim.Adam(lr=5e-3),
        clip_norm=0.5,
        batch_size=5,
        bptt=40,
        lr_schedule=ReduceOnPlateau(factor=2, patience=0),
        seed=11,
        progress=False,
    )


def chunk_losses():
    losses = []
    return losses, (lambda e: losses.append((e["epoch"], e["chunk"], e["loss"])) if e["event"] == "chunk" else None)


def test_round_trip(tmp_path, corpus):
    model = make_model(corpus.vocab_size)
    trainer = make_trainer(model)
    trainer.fit(corpus.train, valid=corpus.valid, epochs=1, max_chunks=60)
    path = tmp_path / "sub" / "ck.npz"  # the folder is created
    trainer.save_checkpoint(path, vocab=corpus.vocab, extra={"note": "x"})
    ck = checkpoint.load(path)
    assert ck.config == model.config and type(ck.model) is msr.LSTM
    np.testing.assert_array_equal(ck.model.flat_parameters(), model.flat_parameters())
    np.testing.assert_array_equal(ck.model.get_rng_state(), model.get_rng_state())
    assert ck.optimizer.step_count == trainer.optimizer.step_count == trainer.step
    for k in ("m", "v"):
        np.testing.assert_array_equal(ck.optimizer.state[k], trainer.optimizer.state[k])
    assert ck.vocab == corpus.vocab and ck.extra == {"note": "x"}
    assert ck.history == trainer.history
    ts = ck.trainer_state
    assert (ts["epoch"], ts["chunk"], ts["step"]) == (trainer.epoch, trainer.chunk, trainer.step)
    x = corpus.test[:60].reshape(3, 20)
    np.testing.assert_array_equal(ck.model.forward(x)[0], model.forward(x)[0])
    # loading into a given model (another init seed is fine) overwrites its parameters
    other = make_model(corpus.vocab_size, seed=5)
    checkpoint.load(path, model=other)
    np.testing.assert_array_equal(other.flat_parameters(), model.flat_parameters())
    # the archive opens without pickle and carries the format tag and version
    with np.load(path, allow_pickle=False) as z:
        assert str(z["__format__"]) == checkpoint.FORMAT and int(z["__version__"]) == checkpoint.VERSION
        assert json.loads(str(z["config"]))["hidden_sizes"] == [24, 20]


def test_resume_is_bit_exact(tmp_path, corpus):
    epochs = 2
    # uninterrupted
    straight = make_model(corpus.vocab_size)
    losses_a, log_a = chunk_losses()
    ta = make_trainer(straight)
    hist_a = ta.fit(corpus.train, valid=corpus.valid, epochs=epochs, log=log_a)
    n = len(losses_a) // epochs
    assert n >= 10

    # in three pieces: stop mid-epoch 1, then across the epoch boundary into epoch 2, then to the end;
    # every piece starts from a fresh model, optimiser and trainer, as in a new process
    path = tmp_path / "run.npz"
    losses_b = []
    for i, max_chunks in enumerate((n // 2, n, None)):
        # after the first piece, other initial parameters: all must come from the file
        model = make_model(corpus.vocab_size, seed=0 if i == 0 else 100 + i)
        model.forward(corpus.test[:40].reshape(2, 20), train=True)  # consume random numbers (dropout)
        trainer = make_trainer(model)
        part, log_b = chunk_losses()
        hist_b = trainer.fit(
            corpus.train,
            valid=corpus.valid,
            epochs=epochs,
            checkpoint=path,
            resume=i > 0,
            max_chunks=max_chunks,
            log=log_b,
        )
        losses_b += part
    assert [l[:2] for l in losses_b] == [l[:2] for l in losses_a]
    assert losses_b == losses_a  # every loss, bit for bit
    np.testing.assert_array_equal(model.flat_parameters(), straight.flat_parameters())
    np.testing.assert_array_equal(model.get_rng_state(), straight.get_rng_state())
    keys = ("train_loss", "valid_loss", "lr", "next_lr", "steps")
    assert [{k: r[k] for k in keys} for r in hist_b] == [{k: r[k] for k in keys} for r in hist_a]
    np.testing.assert_array_equal(trainer.best_params, ta.best_params)


def test_checkpoint_every_k_chunks(tmp_path, corpus):
    path = tmp_path / "k.npz"
    trainer = make_trainer(make_model(corpus.vocab_size))
    seen = []

    def log(e):
        if e["event"] == "chunk" and path.exists():
            seen.append((e["chunk"], checkpoint.load(path).trainer_state["chunk"]))

    trainer.fit(corpus.train, epochs=1, max_chunks=9, checkpoint=path, checkpoint_every=4, log=log)
    # (chunk just done, chunk of the checkpoint on disk) as the log sees them, before each save
    assert seen == [(5, 4), (6, 4), (7, 4), (8, 4), (9, 8)]
    state = checkpoint.load(path).trainer_state
    assert state["chunk"] == 9 and set(state["carried"]) == {"h_l0", "c_l0", "h_l1", "c_l1"}
    assert state["carried"]["h_l0"].shape == (5, 24)


def test_refuses_bad_files(tmp_path, corpus):
    model = make_model(corpus.vocab_size)
    good = checkpoint.save(tmp_path / "good.npz", model)
    missing = tmp_path / "nope.npz"
    with pytest.raises(FileNotFoundError, match=str(missing)):
        checkpoint.load(missing)
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"this is not a zip archive" * 10)
    with pytest.raises(CheckpointError, match="corrupt"):
        checkpoint.load(garbage)
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="corrupt"):
        checkpoint.load(truncated)
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, weights=np.zeros(3))
    with pytest.raises(CheckpointError, match="not a multiscale-rnn checkpoint"):
        checkpoint.load(foreign)
    with np.load(good) as z:
        arrays = {k: z[k] for k in z.files}
    for key, value, message in (
        ("__format__", np.array("something-else"), "format tag 'something-else'"),
        ("__version__", np.array(99), "format version 99"),
        ("params", arrays["params"][:-1], "parameter array has shape"),
        ("meta", np.array("{not json"), "unreadable JSON"),
    ):
        bad = tmp_path / f"bad_{key.strip('_')}.npz"
        np.savez(bad, **{**arrays, key: value})
        with pytest.raises(CheckpointError, match=message):
            checkpoint.load(bad)
    nokey = tmp_path / "nokey.npz"
    np.savez(nokey, **{k: v for k, v in arrays.items() if k != "rng"})
    with pytest.raises(CheckpointError, match=r"missing \['rng'\]"):
        checkpoint.load(nokey)
    # a checkpoint of another shape
    with pytest.raises(CheckpointError, match=r"different model \(hidden_sizes: saved \[24, 20\], model \[24\]"):
        checkpoint.load(good, model=msr.LSTM(corpus.vocab_size, 12, (24,), dropout=0.3))
    with pytest.raises(CheckpointError, match="model: saved 'LSTM', model 'GRU'"):
        checkpoint.load(good, model=msr.GRU(corpus.vocab_size, 12, (24, 20), dropout=0.3))


def test_resume_refuses_other_settings(tmp_path, corpus):
    path = tmp_path / "r.npz"
    make_trainer(make_model(corpus.vocab_size)).fit(corpus.train, epochs=1, max_chunks=3, checkpoint=path)
    other = msr.Trainer(
        make_model(corpus.vocab_size),
        msr.optim.Adam(lr=5e-3),
        batch_size=4,
        bptt=40,
        lr_schedule=ReduceOnPlateau(factor=2, patience=0),
        progress=False,
    )
    with pytest.raises(ValueError, match="batch_size=5.*batch_size=4"):
        other.fit(corpus.train, epochs=1, checkpoint=path, resume=True)
    with pytest.raises(ValueError, match=r"r.npz was trained on other training data \(.*\): resuming would not"):
        make_trainer(make_model(corpus.vocab_size)).fit(corpus.train[:-10], epochs=1, checkpoint=path, resume=True)
    sgd = msr.Trainer(
        make_model(corpus.vocab_size),
        msr.optim.SGD(lr=0.1),
        batch_size=5,
        bptt=40,
        lr_schedule=ReduceOnPlateau(factor=2, patience=0),
        progress=False,
    )
    with pytest.raises(CheckpointError, match="trained with Adam"):
        sgd.fit(corpus.train, epochs=1, checkpoint=path, resume=True)
    with pytest.raises(FileNotFoundError):
        make_trainer(make_model(corpus.vocab_size)).fit(corpus.train, checkpoint=tmp_path / "none.npz", resume=True)
    # "auto" starts afresh when there is no file yet
    make_trainer(make_model(corpus.vocab_size)).fit(
        corpus.train, max_chunks=1, checkpoint=tmp_path / "a.npz", resume="auto"
    )
    assert (tmp_path / "a.npz").exists()


def test_atomic_write_keeps_previous_file(tmp_path, corpus):
    model = make_model(corpus.vocab_size)
    path = checkpoint.save(tmp_path / "c.npz", model)
    before = path.read_bytes()

    def failing(f):
        f.write(b"partial")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        checkpoint.atomic_write(path, failing)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["c.npz"]


def test_a_checkpoint_written_before_an_option_existed_loads_into_the_current_model(tmp_path):
    """A config that lacks an option added since (here the HM-LSTM's rate_ramp) matches a model whose value
    is that option's default; any other value is a different model."""
    m = msr.HMLSTM(20, 8, (8, 8), seed=1)
    path = checkpoint.save(tmp_path / "old.npz", m)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    config = json.loads(str(arrays["config"]))
    del config["rate_ramp"]  # as written before the option existed
    old = tmp_path / "older.npz"
    np.savez(old, **{**arrays, "config": np.array(json.dumps(config))})
    back = checkpoint.load(old, model=msr.HMLSTM(20, 8, (8, 8), seed=5)).model
    np.testing.assert_array_equal(back.flat_parameters(), m.flat_parameters())
    with pytest.raises(CheckpointError, match=r"rate_ramp: saved None, model 3"):
        checkpoint.load(old, model=msr.HMLSTM(20, 8, (8, 8), rate_ramp=3))


@pytest.mark.parametrize("family", ["vcrnn", "hm-lstm"])
def test_a_loaded_model_has_its_annealed_options_values(corpus, tmp_path, family):
    """The trainer anneals a model option (a VCRNN's sharpness, an HM-LSTM's slope) that the model's config
    holds at its built value: a checkpoint read back for evaluation (``load``, and so the command line's
    evaluate, sample and plot) must compute what the trained model did."""

    V = corpus.vocab_size
    if family == "vcrnn":
        model, name, sched = msr.VCRNN(V, 16, (16,), seed=0), "sharpness", msr.sharpness_schedule()
    else:
        model, name, sched = msr.HMLSTM(V, 12, (16, 16), seed=0), "slope", msr.schedules.linear(1.0, 5.0, 1.0)
    tr = msr.Trainer(model, msr.optim.Adam(1e-2), batch_size=4, bptt=20, progress=False, model_options={name: sched})
    ck = tmp_path / "m.npz"
    tr.fit(corpus.train[:2_000], valid=corpus.valid, epochs=2, checkpoint=ck, vocab=corpus.vocab)
    trained = model.options[name]
    assert trained != type(model).all_options()[name].default  # annealed away from the built value
    want = msr.evaluate(model, corpus.valid, batch_size=4, bptt=20)["bpc"]
    loaded = checkpoint.load(ck).model
    assert loaded.options[name] == trained
    assert msr.evaluate(loaded, corpus.valid, batch_size=4, bptt=20)["bpc"] == want
