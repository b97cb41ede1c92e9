"""Training across devices and processes matches one device; SIGKILL resume.

Each case starts fresh Python processes (`run_training.py`), because logical
devices, `XLA_FLAGS` and `TF_CONFIG` are fixed when TensorFlow/JAX start.
"""

import os
import signal

import keras
import numpy as np
import pytest

from tests.training import processes

tensorflow_only = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="tf.distribute runs on the TensorFlow backend"
)
jax_only = pytest.mark.skipif(keras.backend.backend() != "jax", reason="JAX data parallel")

# One step per epoch, so the history holds the loss of every step.
STEPS = ("--steps", 4, "--checkpoint-every", 1, "--pad", 0)


def assert_same_training(a, b, atol=1e-5):
    (weights_a, losses_a), (weights_b, losses_b) = a, b
    np.testing.assert_allclose(losses_a, losses_b, rtol=1e-5)
    assert len(weights_a) == len(weights_b)
    for x, y in zip(weights_a, weights_b):
        np.testing.assert_allclose(x, y, atol=atol)


@tensorflow_only
def test_mirrored_over_two_cpus_matches_one_device(tmp_path):
    mirrored = processes.start(tmp_path / "mirrored", *STEPS, "--logical-cpus", 2, "--strategy", "mirrored")
    single = processes.start(tmp_path / "single", *STEPS, "--strategy", "one-device")
    out, _ = processes.run_all(mirrored, single)
    assert "mirrored (2 replica(s)" in out
    assert_same_training(processes.results(tmp_path / "mirrored"), processes.results(tmp_path / "single"))


@tensorflow_only
def test_multi_worker_processes_end_with_identical_weights(tmp_path):
    ports = processes.free_ports(2)
    workers = [
        processes.start(tmp_path, *STEPS, env={"TF_CONFIG": processes.tf_config(ports, i)})
        for i in range(2)
    ]
    outputs = processes.run_all(*workers)
    assert "multi-worker (2 replica(s), worker:1)" in outputs[1]
    chief, other = processes.results(tmp_path, "worker0"), processes.results(tmp_path, "worker1")
    assert_same_training(chief, other, atol=0)
    # Only the chief writes checkpoints; there is one per epoch.
    assert sorted(os.listdir(tmp_path / "checkpoints"))[-1] == "ckpt-0000000004.weights.h5"


@jax_only
def test_jax_data_parallel_over_two_host_devices_matches_one_device(tmp_path):
    flags = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    parallel = processes.start(tmp_path / "parallel", *STEPS, backend="jax", env=flags)
    single = processes.start(tmp_path / "single", *STEPS, backend="jax")
    out, _ = processes.run_all(parallel, single)
    assert "data-parallel (2 replica(s)" in out
    assert_same_training(processes.results(tmp_path / "parallel"), processes.results(tmp_path / "single"))


@tensorflow_only
def test_run_killed_with_sigkill_resumes_to_the_same_weights(tmp_path):
    args = ("--steps", 6, "--checkpoint-every", 2, "--dropout", 0.1)  # padded data, dropout on
    whole = processes.start(tmp_path / "whole", *args)
    killed = processes.start(tmp_path / "killed", *args, "--kill-at-step", 5)
    processes.finish(killed, expect=-signal.SIGKILL)
    checkpoints = sorted(os.listdir(tmp_path / "killed" / "checkpoints"))
    assert checkpoints[-1] == "ckpt-0000000004.weights.h5"
    resumed = processes.start(tmp_path / "killed", *args)
    _, out = processes.run_all(whole, resumed)
    assert "Resumed from" in out and "step 4, skipping 4 consumed batches" in out
    (whole_weights, whole_losses), (weights, losses) = (
        processes.results(tmp_path / "whole"),
        processes.results(tmp_path / "killed"),
    )
    np.testing.assert_allclose(losses, whole_losses[-1:], rtol=1e-6)  # the last epoch's loss
    for x, y in zip(weights, whole_weights):
        np.testing.assert_allclose(x, y, atol=1e-6)
