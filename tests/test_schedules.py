"""Learning-rate and model-option schedules."""

import json

import pytest

import multiscale_rnn as msr
from multiscale_rnn import schedules as S


def run(schedule, losses, lr=1.0):
    schedule.start(lr)
    out = []
    for epoch, loss in enumerate(losses, start=1):
        lr = schedule.next_lr(epoch, lr, loss)
        out.append(lr)
    return out


def test_constant():
    assert run(S.Constant(), [3, 2, 1]) == [1.0, 1.0, 1.0]


def test_halve_after():
    # epochs 1..3 at the base rate, then halved after every epoch
    assert run(S.HalveAfter(3), [0] * 5, lr=0.8) == [0.8, 0.8, 0.4, 0.2, 0.1]
    assert run(S.HalveAfter(0, factor=4), [0] * 2, lr=1.0) == [1 / 16, 1 / 64]
    with pytest.raises(ValueError, match="epoch_n"):
        S.HalveAfter(-1)
    # the factor divides: 0.5 (PyTorch's gamma for halving) would double the rate every epoch
    with pytest.raises(ValueError, match="factor must be > 1"):
        S.HalveAfter(2, factor=0.5)
    with pytest.raises(ValueError, match="factor must be > 1"):
        S.MultiStep([3], factor=1.0)
    with pytest.raises(ValueError, match="give at least one"):
        S.MultiStep([])


def test_reduce_on_plateau():
    lrs = run(S.ReduceOnPlateau(factor=4, patience=1), [5.0, 4.0, 4.5, 4.2, 3.0, 3.5, 3.5, 3.5])
    # improves, improves, bad 1 (<= patience), bad 2 -> /4, improves, bad 1, bad 2 -> /4, bad 1
    assert lrs == [1.0, 1.0, 1.0, 0.25, 0.25, 0.25, 0.0625, 0.0625]
    lrs = run(S.ReduceOnPlateau(factor=2, patience=0, min_lr=0.3), [1.0, 1.0, 1.0, 1.0])
    assert lrs == [1.0, 0.5, 0.3, 0.3]
    with pytest.raises(ValueError, match="factor must be > 1"):
        S.ReduceOnPlateau(factor=0.5)
    with pytest.raises(ValueError, match="finite loss"):
        run(S.ReduceOnPlateau(), [float("nan")])


def test_newbob_keeps_halving_after_the_first_miss():
    # epoch 3 lowers the loss by less than 0.3 % (4.0 -> 3.995): a miss, halving starts and goes on
    # every epoch, improving or not; ReduceOnPlateau(patience=0) would halve only after the misses
    losses = [5.0, 4.0, 3.995, 3.0, 2.0, 2.5, 1.0]
    assert run(S.NewBob(), losses) == [1.0, 1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125]
    assert run(S.ReduceOnPlateau(patience=0), losses) == [1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5]
    assert S.NewBob().misses(losses) == 2  # epochs 3 and 6: the toolkit stops at epoch 6
    assert S.NewBob(threshold=0.0).misses(losses) == 1  # only epoch 6 does not decrease
    assert run(S.NewBob(factor=4), [2.0, 2.0, 1.0]) == [1.0, 0.25, 0.0625]
    with pytest.raises(ValueError, match="factor must be > 1"):
        S.NewBob(factor=1.0)
    with pytest.raises(ValueError, match="threshold"):
        S.NewBob(threshold=1.5)
    with pytest.raises(ValueError, match="finite loss"):
        run(S.NewBob(), [float("inf")])
    # a capped run: halving from epoch 3 on although no epoch missed; a miss still starts it earlier
    assert run(S.NewBob(anneal_after=2), [5.0, 4.0, 3.0, 2.0]) == [1.0, 0.5, 0.25, 0.125]
    assert run(S.NewBob(anneal_after=3), [5.0, 5.0, 3.0]) == [1.0, 0.5, 0.25]
    with pytest.raises(ValueError, match="anneal_after"):
        S.NewBob(anneal_after=-1)


def test_newbob_state_round_trips_and_is_built_by_name():
    a = S.NewBob()
    run(a, [3.0, 2.0, 2.0])
    state = json.loads(json.dumps(a.state_dict()))
    b = S.make_lr_schedule("newbob")
    b.load_state_dict(state)
    assert (b.last, b.annealing, b.base_lr) == (2.0, True, 1.0)
    assert a.next_lr(4, 0.5, 1.0) == b.next_lr(4, 0.5, 1.0) == 0.25
    with pytest.raises(ValueError, match="saved with"):
        S.NewBob(threshold=0.01).load_state_dict(state)
    with pytest.raises(ValueError, match="saved with"):
        S.NewBob(anneal_after=4).load_state_dict(state)
    assert "anneal_after" not in state["params"]  # unset: the state of a schedule saved before it existed


def test_plateau_state_round_trips_through_json():
    a = S.ReduceOnPlateau(factor=2, patience=2)
    run(a, [3.0, 2.0, 2.5])
    state = json.loads(json.dumps(a.state_dict()))
    b = S.ReduceOnPlateau(factor=2, patience=2)
    b.load_state_dict(state)
    assert (b.best, b.bad_epochs, b.base_lr) == (2.0, 1, 1.0)
    # both continue the same way
    assert a.next_lr(4, 1.0, 2.6) == b.next_lr(4, 1.0, 2.6) == 1.0
    assert a.next_lr(5, 1.0, 2.6) == b.next_lr(5, 1.0, 2.6) == 0.5
    with pytest.raises(ValueError, match="saved with"):
        S.ReduceOnPlateau(factor=3, patience=2).load_state_dict(state)
    with pytest.raises(ValueError, match="is for 'ReduceOnPlateau'"):
        S.Constant().load_state_dict(state)


def test_lambda_lr():
    assert run(S.LambdaLR(lambda e: 0.5**e), [0, 0, 0], lr=2.0) == [1.0, 0.5, 0.25]
    with pytest.raises(TypeError, match="callable"):
        S.LambdaLR(3)


def test_make_lr_schedule_by_name():
    assert isinstance(S.make_lr_schedule("plateau", factor=3), S.ReduceOnPlateau)
    assert isinstance(S.make_lr_schedule("Halve-After", epoch_n=2), S.HalveAfter)
    with pytest.raises(ValueError, match="unknown learning-rate schedule"):
        S.make_lr_schedule("cosine")
    # the trainer takes a schedule object, and a name is refused pointing to make_lr_schedule
    with pytest.raises(
        TypeError, match=r"lr_schedule must be a multiscale_rnn.schedules.LRSchedule or None, got 'halve' "
    ):
        msr.Trainer(msr.ElmanRNN(5, 4, (4,)), lr_schedule="halve")


def test_linear_option_schedule():
    slope = S.linear(1.0, 5.0, per_epoch=0.04)
    assert slope(0, 0) == 1.0
    assert slope(10, 123) == pytest.approx(1.4)
    assert slope(1000) == 5.0
    down = S.linear(1.0, 0.1, per_epoch=-0.3)
    assert [round(down(e), 6) for e in range(5)] == [1.0, 0.7, 0.4, 0.1, 0.1]
    with pytest.raises(ValueError, match="cannot get there"):
        S.linear(1.0, 5.0, per_epoch=-0.1)
    assert json.loads(json.dumps(slope.state_dict()))["params"] == {"start": 1.0, "end": 5.0, "per_epoch": 0.04}
