"""Choosing how training is spread over devices and machines.

`select_strategy()` returns a `Distributed` handle whatever the backend:

- TensorFlow, `TF_CONFIG` set with more than one task:
  `tf.distribute.MultiWorkerMirroredStrategy` (TensorFlow's own collective
  all-reduce; every worker runs the same `train(...)` call).
- TensorFlow, several local GPUs: `tf.distribute.MirroredStrategy`.
- JAX, several devices: `keras.distribution.DataParallel`.
- Otherwise one device (no strategy at all).

Batches given to `model.fit` are *global*: each one is split evenly over
the replicas, so a batch of `tokens_per_batch` tokens puts about
`tokens_per_batch / num_replicas` tokens on every replica.

Example:

>>> dist = select_strategy()           # "auto"
>>> with dist.scope():
...     model = Transformer.from_architecture("base", vocab_size=37000)
...     model.compile(...)
>>> dist.num_replicas, dist.is_chief
(1, True)
"""

import contextlib
import dataclasses
import json
import os
from typing import Any

import keras

KINDS = ("auto", "one-device", "mirrored", "multi-worker", "data-parallel")


@dataclasses.dataclass
class Distributed:
    """How training is distributed.

    Attributes:
        kind: one of `KINDS` less `"auto"`.
        strategy: the `tf.distribute.Strategy`, the
            `keras.distribution.Distribution`, or `None` for one device.
        num_replicas: int. Replicas that each take a share of a batch.
        is_chief: bool. Whether this process writes checkpoints and logs.
        task: str. `"worker:0"` style name of this process (multi-worker).
    """

    kind: str
    strategy: Any = None
    num_replicas: int = 1
    is_chief: bool = True
    task: str = "worker:0"

    def scope(self):
        """Context in which the model and its optimizer must be built."""
        if self.strategy is None:
            return contextlib.nullcontext()
        return self.strategy.scope()

    def describe(self):
        return f"{self.kind} ({self.num_replicas} replica(s), {self.task})"


def parse_tf_config(text=None):
    """The parsed `TF_CONFIG` (dict), or `None` when it is unset or empty.

    Raises `ValueError` with the reason when it is not a JSON object with a
    `cluster` of task lists and a `task` with `type` and `index`.

    Example:

    >>> parse_tf_config('{"cluster": {"worker": ["a:1", "b:2"]},'
    ...                 ' "task": {"type": "worker", "index": 0}}')["task"]
    {'type': 'worker', 'index': 0}
    """
    text = os.environ.get("TF_CONFIG", "") if text is None else text
    if not text.strip():
        return None

    def fail(reason):
        raise ValueError(f"TF_CONFIG is not a valid cluster description: {reason}. Received: TF_CONFIG={text!r}")

    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        fail(f"not JSON ({error})")
    if not isinstance(config, dict):
        fail("expected a JSON object")
    cluster, task = config.get("cluster"), config.get("task")
    if not isinstance(cluster, dict) or not cluster:
        fail('missing "cluster": {"worker": ["host:port", ...]}')
    for name, addresses in cluster.items():
        if not isinstance(addresses, list) or not all(isinstance(a, str) and ":" in a for a in addresses):
            fail(f'cluster["{name}"] must be a list of "host:port" strings')
    if not isinstance(task, dict) or "type" not in task or "index" not in task:
        fail('missing "task": {"type": "worker", "index": i}')
    if task["type"] not in cluster:
        fail(f"task type {task['type']!r} is not in the cluster")
    if not isinstance(task["index"], int) or not 0 <= task["index"] < len(cluster[task["type"]]):
        fail(f"task index {task['index']!r} is out of range")
    return config


def _is_chief(config):
    task = config["task"]
    if "chief" in config["cluster"]:
        return task["type"] == "chief"
    return task["type"] == "worker" and task["index"] == 0


def select_strategy(kind="auto", devices=None):
    """A `Distributed` for `kind` (one of `KINDS`) on this machine.

    Args:
        kind: `"auto"` picks multi-worker when `TF_CONFIG` names more than
            one task, mirrored (TensorFlow) or data-parallel (JAX) when
            there are several accelerators, else one device.
        devices: optional device names for `"mirrored"` /
            `"data-parallel"` (e.g. two logical CPUs in tests). Without
            them `"mirrored"` uses every GPU, or every logical CPU when
            there is no GPU.
    """
    if kind not in KINDS:
        raise ValueError(f"Unknown strategy. Expected one of {KINDS}. Received: kind={kind!r}")
    backend = keras.backend.backend()
    tf_config = parse_tf_config()
    if backend == "tensorflow":
        return _tensorflow(kind, devices, tf_config)
    if backend == "jax":
        if kind in ("mirrored", "multi-worker"):
            raise ValueError(f"Strategy {kind!r} needs the TensorFlow backend; on JAX use 'data-parallel'.")
        return _jax(kind, devices)
    if kind not in ("auto", "one-device"):
        raise ValueError(f"Strategy {kind!r} is not available on the {backend} backend.")
    return Distributed("one-device")


def _tensorflow(kind, devices, tf_config):
    import tensorflow as tf

    if kind == "data-parallel":
        raise ValueError("'data-parallel' is the JAX strategy; on TensorFlow use 'mirrored'.")
    num_tasks = 0 if tf_config is None else sum(len(v) for v in tf_config["cluster"].values())
    if kind == "multi-worker" or (kind == "auto" and num_tasks > 1):
        if tf_config is None:
            raise ValueError("Strategy 'multi-worker' needs the TF_CONFIG environment variable.")
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        task = tf_config["task"]
        return Distributed(
            "multi-worker",
            strategy,
            strategy.num_replicas_in_sync,
            _is_chief(tf_config),
            f"{task['type']}:{task['index']}",
        )
    if kind == "mirrored" or (kind == "auto" and devices):
        if devices is None:
            gpus = tf.config.list_logical_devices("GPU")
            devices = [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]
        strategy = tf.distribute.MirroredStrategy(devices)
        return Distributed("mirrored", strategy, strategy.num_replicas_in_sync)
    if kind == "auto" and len(tf.config.list_logical_devices("GPU")) > 1:
        strategy = tf.distribute.MirroredStrategy()
        return Distributed("mirrored", strategy, strategy.num_replicas_in_sync)
    return Distributed("one-device")


def _jax(kind, devices):
    import jax

    devices = devices or jax.devices()
    if kind == "data-parallel" or (kind == "auto" and len(devices) > 1):
        distribution = keras.distribution.DataParallel(devices=devices)
        return Distributed("data-parallel", distribution, len(devices))
    return Distributed("one-device")
