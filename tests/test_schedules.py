import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer import TransformerSchedule, paper_optimizer


def formula(step, d_model, warmup):
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@pytest.mark.parametrize("step", [1, 100, 4000, 40000])
def test_schedule_equals_the_formula(step):
    schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    assert float(ops.convert_to_numpy(schedule(step))) == pytest.approx(formula(step, 512, 4000), rel=1e-5)


def test_peak_at_warmup_and_finite_at_step_zero():
    schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    rates = [float(ops.convert_to_numpy(schedule(s))) for s in (0, 3999, 4000, 4001)]
    assert np.isfinite(rates[0]) and rates[0] > 0
    assert rates[2] == max(rates)


def test_schedule_serializes():
    schedule = TransformerSchedule(d_model=256, warmup_steps=100, scale=2.0)
    config = keras.optimizers.schedules.serialize(schedule)
    clone = keras.optimizers.schedules.deserialize(config)
    assert isinstance(clone, TransformerSchedule)
    assert float(ops.convert_to_numpy(clone(50))) == pytest.approx(2 * formula(50, 256, 100), rel=1e-5)


@pytest.mark.parametrize("kwargs, name", [(dict(d_model=512, warmup_steps=0), "warmup_steps"), (dict(d_model=-1), "d_model")])
def test_invalid_schedule(kwargs, name):
    with pytest.raises(ValueError, match=name):
        TransformerSchedule(**kwargs)


def test_paper_optimizer_settings():
    optimizer = paper_optimizer(d_model=512)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
    assert isinstance(optimizer._learning_rate, TransformerSchedule)
