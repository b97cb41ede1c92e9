"""`train()` across worker processes matches one device; SIGKILL resume on TensorFlow and JAX.

Each case starts fresh Python processes (`run_training.py`), because logical
devices, `XLA_FLAGS` and `TF_CONFIG` are fixed when TensorFlow/JAX start, and
a process is what SIGKILL ends. The one-device or uninterrupted run each is
compared with is `run_training.main` in the test's own process, and so is
the resumed run on TensorFlow.
"""

import os
import signal

import keras
import numpy as np
import pytest

from tests.training import processes, run_training

tensorflow_only = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="tf.distribute runs on the TensorFlow backend"
)
# The JAX case starts JAX processes whatever this process's backend: it runs
# once, in the JAX pass of tests/run.sh (-m backend).
jax_pass = [
    pytest.mark.backend,
    pytest.mark.skipif(keras.backend.backend() != "jax", reason="JAX training processes: run in the JAX pass"),
]

pytestmark = pytest.mark.slow  # training processes

# One step per epoch, so the history holds the loss of every step.
STEPS = ("--steps", 4, "--checkpoint-every", 1, "--pad", 0)


@tensorflow_only
def test_train_on_two_worker_processes_matches_one_device_and_only_the_chief_writes(tmp_path):
    # The strategies themselves are plain Keras (test_plain_keras.py); this is
    # what train() adds: one run directory, written by the chief only.
    with processes.held_ports(2) as ports:
        workers = [
            processes.start(tmp_path / "workers", *STEPS, "--batch-size", 16, env=processes.worker_env(ports, i))
            for i in range(2)
        ]
        try:  # the one-device run in this process (the TensorFlow pass's), while the workers run
            run_training.main([str(tmp_path / "single"), *map(str, STEPS), "--batch-size", "16",
                               "--strategy", "one-device"])
        except BaseException:
            processes.stop(*workers)
            raise
        outputs = processes.run_all(*workers)  # kills the other if one fails
    assert "multi-worker (2 replica(s), worker:1)" in outputs[1]
    (weights, losses), (single_weights, single_losses) = (
        processes.results(tmp_path / "workers", "worker0"),
        processes.results(tmp_path / "single"),
    )
    np.testing.assert_allclose(losses, single_losses, rtol=2e-3)
    flat, single_flat = (np.concatenate([w.ravel() for w in ws]) for ws in (weights, single_weights))
    assert np.linalg.norm(flat - single_flat) < 2e-3 * np.linalg.norm(single_flat)
    # Only the chief writes checkpoints; there is one per epoch.
    assert sorted(os.listdir(tmp_path / "workers" / "checkpoints"))[-1] == "ckpt-0000000004.weights.h5"


@pytest.mark.parametrize(
    "backend, extra, reference",
    [
        pytest.param("tensorflow", (), (), marks=tensorflow_only),
        # The path of JAX and PyTorch machines: TensorFlow cannot be imported,
        # the batches come from a `pass -> NumPy batches` function, and the
        # resumed run skips the consumed ones of that stream. The reference
        # takes the same `train()` input in this process, where TensorFlow
        # can be imported but neither `train()` nor Keras' JAX trainer reads
        # a function's batches with it.
        pytest.param("jax", ("--without-tensorflow",), ("--numpy-passes",), marks=jax_pass),
    ],
    ids=["tensorflow", "jax-without-tensorflow"],
)
def test_run_killed_with_sigkill_resumes_to_the_same_weights(tmp_path, capsys, backend, extra, reference):
    # Padded data, dropout on, and two batches a step: the checkpoint of
    # step 4 has consumed 8 batches, and the accumulated gradients start
    # afresh with each step.
    args = ("--steps", 6, "--checkpoint-every", 2, "--dropout", 0.1, "--accumulation", 2)
    # The uninterrupted run is this process's, and equal to the bit: so the
    # processes compile (XLA_FLAGS) and thread TensorFlow's ops as this one.
    same = ("--intra-op-threads", intra_op_threads())
    env = {"XLA_FLAGS": os.environ.get("XLA_FLAGS", "")}
    started = []
    try:
        killed = processes.start(tmp_path / "killed", *args, *extra, *same, "--kill-at-step", 5, backend=backend,
                                 env=env)
        started.append(killed)
        run_training.main([str(tmp_path / "whole"), *map(str, args), *reference])
        processes.finish(killed, expect=-signal.SIGKILL)
        checkpoints = sorted(os.listdir(tmp_path / "killed" / "checkpoints"))
        assert checkpoints[-1] == "ckpt-0000000004.weights.h5"
        if extra:  # without TensorFlow, which this process has: a process of its own
            resumed = processes.start(tmp_path / "killed", *args, *extra, *same, backend=backend, env=env)
            started.append(resumed)
            out = processes.finish(resumed)
        else:  # what is resumed is the run's directory, not a process: this one's, as the uninterrupted run
            capsys.readouterr()
            run_training.main([str(tmp_path / "killed"), *map(str, args)])
            out = capsys.readouterr().out
    finally:
        processes.stop(*started)
    assert "Resumed from" in out and "step 4, skipping 8 consumed batches" in out
    (whole_weights, whole_losses), (weights, losses) = (
        processes.results(tmp_path / "whole"),
        processes.results(tmp_path / "killed"),
    )
    np.testing.assert_array_equal(losses, whole_losses[-1:])  # the last epoch's loss
    for x, y in zip(weights, whole_weights):
        np.testing.assert_array_equal(x, y)


def intra_op_threads():
    """This process's TensorFlow intra-op threads (0: TensorFlow's default;
    tests/conftest.py sets them under pytest-xdist), or 0 on another backend."""
    if keras.backend.backend() != "tensorflow":
        return 0
    import tensorflow as tf

    return tf.config.threading.get_intra_op_parallelism_threads()
