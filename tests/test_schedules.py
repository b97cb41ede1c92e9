import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer import TransformerSchedule, paper_optimizer

pytestmark = pytest.mark.backend  # run on TensorFlow, JAX and PyTorch (tests/run.sh)


def formula(step, d_model, warmup):
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@pytest.mark.parametrize("step_num", [1, 2, 100, 4000, 40000])
def test_schedule_equals_the_formula(step_num):
    # Keras passes optimizer.iterations (0 for the first update); the
    # paper's step_num counts updates from 1.
    schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    rate = float(ops.convert_to_numpy(schedule(step_num - 1)))
    assert rate == pytest.approx(formula(step_num, 512, 4000), rel=1e-5)


def test_peak_at_the_warmup_update():
    schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    rates = [float(ops.convert_to_numpy(schedule(s))) for s in (0, 1, 3998, 3999, 4000)]
    assert rates[0] == pytest.approx(formula(1, 512, 4000), rel=1e-6)
    assert rates[1] == pytest.approx(2 * rates[0], rel=1e-6)  # linear warmup, no repeated step
    assert rates[3] == max(rates)  # the 4,000th update


def test_each_update_uses_the_next_step_of_the_formula():
    # Through a real optimizer: the learning rate of update n is the paper's
    # rate for step n.
    optimizer = paper_optimizer(d_model=64, warmup_steps=10)
    variable = keras.Variable(np.zeros(3, "float32"))
    optimizer.build([variable])
    seen = []
    for _ in range(3):
        seen.append(float(ops.convert_to_numpy(optimizer.learning_rate)))
        optimizer.apply([ops.ones(3)], [variable])
    np.testing.assert_allclose(seen, [formula(n, 64, 10) for n in (1, 2, 3)], rtol=1e-6)


def test_schedule_serializes():
    schedule = TransformerSchedule(d_model=256, warmup_steps=100, scale=2.0)
    config = keras.optimizers.schedules.serialize(schedule)
    clone = keras.optimizers.schedules.deserialize(config)
    assert isinstance(clone, TransformerSchedule)
    assert float(ops.convert_to_numpy(clone(49))) == pytest.approx(2 * formula(50, 256, 100), rel=1e-5)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(d_model=512, warmup_steps=0), "warmup_steps"),
        (dict(d_model=-1), "d_model"),
        (dict(d_model=512, scale="1"), "scale"),
        (dict(d_model=512, scale=True), "scale"),
        (dict(d_model=512, scale=float("inf")), "scale"),
    ],
)
def test_invalid_schedule(kwargs, name):
    with pytest.raises(ValueError, match=name):
        TransformerSchedule(**kwargs)


def test_paper_optimizer_settings():
    optimizer = paper_optimizer(d_model=512)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
    assert isinstance(optimizer._learning_rate, TransformerSchedule)
    # The fine-tuning scale that docs/training.md recommends, and Adam's own arguments.
    fine_tuning = paper_optimizer(d_model=512, warmup_steps=100, scale=0.1, clipnorm=1.0)
    assert fine_tuning.clipnorm == 1.0
    for step in (0, 99, 1000):
        assert float(fine_tuning._learning_rate(step)) == pytest.approx(
            0.1 * float(TransformerSchedule(512, warmup_steps=100)(step)), rel=1e-6)
