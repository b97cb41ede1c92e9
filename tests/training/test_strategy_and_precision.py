"""Strategy and precision selection, TF_CONFIG parsing, token budgets."""

import json

import keras
import numpy as np
import pytest

from keras_transformer.schedules import TransformerSchedule
from keras_transformer.training import (
    GlobalStepSchedule,
    accumulation_steps,
    parse_tf_config,
    resolve_jit_compile,
    resolve_precision,
    select_strategy,
)

GOOD = {"cluster": {"worker": ["localhost:1234", "localhost:1235"]}, "task": {"type": "worker", "index": 1}}


def test_parse_tf_config():
    assert parse_tf_config("") is None
    assert parse_tf_config(json.dumps(GOOD))["task"] == {"type": "worker", "index": 1}


@pytest.mark.parametrize(
    "text, reason",
    [
        ("{cluster: worker}", "not JSON"),
        ("[1, 2]", "JSON object"),
        ('{"task": {"type": "worker", "index": 0}}', 'missing "cluster"'),
        ('{"cluster": {"worker": ["nohost"]}, "task": {"type": "worker", "index": 0}}', "host:port"),
        ('{"cluster": {"worker": ["a:1"]}}', 'missing "task"'),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}', "out of range"),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", "index": 0}}', "not in the cluster"),
    ],
)
def test_tf_config_that_does_not_parse_is_a_clear_error(text, reason, monkeypatch):
    with pytest.raises(ValueError, match="TF_CONFIG is not a valid cluster description") as error:
        parse_tf_config(text)
    assert reason in str(error.value)
    monkeypatch.setenv("TF_CONFIG", text)
    with pytest.raises(ValueError, match="TF_CONFIG"):
        select_strategy("auto")


def test_auto_strategy_is_one_device_here(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    distributed = select_strategy("auto")
    assert distributed.kind == "one-device" and distributed.num_replicas == 1 and distributed.is_chief
    with pytest.raises(ValueError, match="Unknown strategy"):
        select_strategy("ring")


def test_precision_and_jit_defaults_on_cpu():
    assert resolve_precision("auto") == "float32"  # no accelerator here
    assert resolve_precision("mixed_float16") == "mixed_float16"
    with pytest.raises(ValueError, match="Unknown precision"):
        resolve_precision("fp8")
    jit = resolve_jit_compile("auto", select_strategy("one-device"))
    assert jit == (True if keras.backend.backend() == "jax" else "auto")
    assert resolve_jit_compile(False, select_strategy("one-device")) is False


def test_token_budgets_give_accumulation_steps():
    assert accumulation_steps(25000, None) == 1
    assert accumulation_steps(25000, 6250) == 4
    assert accumulation_steps(25000, 4096) == 6
    assert accumulation_steps(25000, 50000) == 1
    with pytest.raises(ValueError, match="> 0"):
        accumulation_steps(25000, -1)


def test_schedule_sees_global_steps_under_accumulation():
    schedule = TransformerSchedule(d_model=64, warmup_steps=10)
    accumulated = GlobalStepSchedule(schedule, accumulation=4)
    for micro_step, step in [(0, 0), (3, 0), (4, 1), (39, 9), (400, 100)]:
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(accumulated(micro_step)),
            keras.ops.convert_to_numpy(schedule(step)),
        )
    clone = GlobalStepSchedule.from_config(accumulated.get_config())
    assert clone.accumulation == 4 and clone.schedule.warmup_steps == 10
