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
    precision,
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


def _devices_seen_by_backend():
    """How many devices the backend would split a batch over: TensorFlow's
    GPUs, JAX's devices (one on a CPU-only machine), none on PyTorch."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return len(tf.config.list_logical_devices("GPU"))
    if backend == "jax":
        import jax

        return len(jax.devices())
    return 0


@pytest.mark.backend
def test_auto_strategy_is_one_device_unless_the_backend_sees_several(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    distributed = select_strategy("auto")
    devices = _devices_seen_by_backend()
    if devices > 1:  # a multi-GPU machine: every device, one process
        kind = "mirrored" if keras.backend.backend() == "tensorflow" else "data-parallel"
        assert (distributed.kind, distributed.num_replicas) == (kind, devices)
    else:
        assert (distributed.kind, distributed.num_replicas) == ("one-device", 1)
    assert distributed.is_chief
    with pytest.raises(ValueError, match="Unknown strategy"):
        select_strategy("ring")


def _bf16_accelerator_seen_by_backend():
    """`None` if the backend sees no accelerator, else whether its first one
    computes in bf16 (a TPU, or an NVIDIA GPU of compute capability 8.0,
    Ampere, or later), asked of the backend itself."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        if not gpus:
            return None
        return tuple(tf.config.experimental.get_device_details(gpus[0]).get("compute_capability", (0, 0))) >= (8, 0)
    if backend == "jax":
        import jax

        device = jax.devices()[0]
        if device.platform == "cpu":
            return None
        return device.platform == "tpu" or int(str(device.compute_capability).split(".")[0]) >= 8
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_capability(0) >= (8, 0)


@pytest.mark.parametrize(
    "bf16, expected",
    [(None, "float32"), (True, "mixed_bfloat16"), (False, "mixed_float16")],
    ids=["no-accelerator", "bf16-accelerator", "older-gpu"],
)
def test_auto_precision_rule(monkeypatch, bf16, expected):
    # bf16 where the accelerator computes in it, else fp16 (with loss
    # scaling), and float32 without one: mixed precision is slower on a CPU.
    monkeypatch.setattr(precision, "_accelerator_bf16_support", lambda: bf16)
    assert resolve_precision("auto") == expected
    for name in ("float32", "mixed_bfloat16", "mixed_float16"):
        assert resolve_precision(name) == name  # asked for: kept, whatever the device


@pytest.mark.backend
def test_precision_and_jit_defaults_on_the_devices_the_backend_sees():
    bf16 = _bf16_accelerator_seen_by_backend()
    expected = "float32" if bf16 is None else "mixed_bfloat16" if bf16 else "mixed_float16"
    assert resolve_precision("auto") == expected
    with pytest.raises(ValueError, match="Unknown precision"):
        resolve_precision("fp8")
    # XLA by default on JAX (every jit is XLA) and on TensorFlow with a GPU
    # and no strategy; elsewhere Keras' "auto".
    backend = keras.backend.backend()
    xla = backend == "jax" or (backend == "tensorflow" and bf16 is not None)
    jit = resolve_jit_compile("auto", select_strategy("one-device"))
    assert jit == (True if xla else "auto")
    assert resolve_jit_compile(False, select_strategy("one-device")) is False


def test_token_budgets_give_accumulation_steps():
    assert accumulation_steps(25000, None) == 1
    assert accumulation_steps(25000, 6250) == 4
    assert accumulation_steps(25000, 4096) == 6
    assert accumulation_steps(25000, 50000) == 1
    with pytest.raises(ValueError, match="> 0"):
        accumulation_steps(25000, -1)


@pytest.mark.backend
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
