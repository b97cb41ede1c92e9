"""Kill and resume, end to end: the `train` command on TensorFlow, killed
with SIGKILL in the middle of a checkpoint, and out of disk; `train()` on
JAX without TensorFlow, killed in the middle of a checkpoint; each resumed
run ending with the checkpoints and weights of an uninterrupted run, to the
bit. And `train()` across two worker processes, resuming a run's
checkpoint, ending where one device does.

A killed run is a fresh Python process (`run_training.py` for `train()`,
`faults.py` for the command), because a process is what SIGKILL ends, and
so are the workers, because logical devices, `XLA_FLAGS` and `TF_CONFIG`
are fixed when TensorFlow/JAX start. The one-device or uninterrupted run
each is compared with is the test's own process's, and so are the resumed
runs that no SIGKILL ends.
"""

import argparse
import contextlib
import errno
import json
import os
import re
import shutil
import signal
import time

import h5py
import keras
import numpy as np
import pytest

from keras_transformer.cli import main
from keras_transformer.locks import LockedError
from keras_transformer.training import list_checkpoints
from tests.training import faults, processes, run_training

tensorflow_only = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="tf.distribute and the command run on the TensorFlow backend"
)

pytestmark = pytest.mark.slow  # training processes

# One step per epoch, so the history holds the loss of every step.
STEPS = ("--steps", 3, "--checkpoint-every", 1, "--pad", 0)


@tensorflow_only
def test_train_on_two_worker_processes_resumes_the_one_device_runs_checkpoint_and_matches_it(tmp_path):
    # The strategies themselves are plain Keras (test_plain_keras.py); this is
    # what train() adds: a run directory written by the chief only, which
    # both workers resume from, skipping the consumed batches. train()'s
    # checkpoints are the same files whatever the strategy, so the job
    # resumes the one-device run's directory as it stood after step 1. That
    # a killed run resumes to the uninterrupted one to the bit is the
    # command's test below (and the JAX one's).
    steps = (*STEPS, "--batch-size", 16)
    run_training.main([str(tmp_path / "single"), *map(str, steps), "--strategy", "one-device"])
    # The chief resumes the run directory; the non-chief a copy of it (as a
    # worker on another machine sees it), where anything it wrote would show.
    for name in ("chief", "other"):
        copy_at_step(tmp_path / "single", tmp_path / name, 1)
    before = snapshot(tmp_path / "other")
    with processes.held_ports(2) as ports:
        resumed = processes.run_all(*[
            processes.start(tmp_path / run, *steps, "--results-dir", tmp_path / "results",
                            env=processes.worker_env(ports, i))
            for i, run in enumerate(("chief", "other"))
        ])
    assert "multi-worker (2 replica(s), worker:1)" in resumed[1]
    assert all("ckpt-0000000001.weights.h5: step 1, skipping 1 consumed batches" in out for out in resumed)
    assert snapshot(tmp_path / "other") == before  # the non-chief wrote nothing
    assert sorted(os.listdir(tmp_path / "chief")) == ["checkpoints", "run.json"]
    assert checkpoint_files(tmp_path / "chief") == checkpoint_files(tmp_path / "single")  # one per step
    (weights, losses), (single_weights, single_losses) = (
        processes.results(tmp_path / "results", "worker0"),
        processes.results(tmp_path / "single"),
    )
    # Steps 2 and 3, trained from step 1's weights, optimizer and data position.
    np.testing.assert_allclose(losses, single_losses[1:], rtol=2e-3)
    flat, single_flat = (np.concatenate([w.ravel() for w in ws]) for ws in (weights, single_weights))
    assert np.linalg.norm(flat - single_flat) < 2e-3 * np.linalg.norm(single_flat)


def copy_at_step(run_dir, copy, step):
    """`run_dir` as it stood after step `step`: its files but the later
    checkpoints and the results of `run_training.py`."""
    def later(directory, names):
        return [n for n in names if n.endswith((".npz", ".npy"))
                or n.startswith("ckpt-") and int(n[5:15]) > step]

    shutil.copytree(run_dir, copy, ignore=later)


def snapshot(directory):
    """Every file and folder under `directory`: its modification time, and a file's bytes."""
    tree = {}
    for folder, _, files in os.walk(directory):
        tree[folder] = os.stat(folder).st_mtime_ns
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                tree[path] = (os.stat(path).st_mtime_ns, f.read())
    return tree


# The `train` command: a checkpoint every 2 steps of 2 batches of 16, the
# newest 2 kept, dropout on; 24 batches of the 256 pairs, across two passes.
COMMAND = ["train", "--corpus", "synthetic-reverse", "--architecture", "tiny", "--set", "num_layers=1", "--set",
           "d_ff=64", "--train-steps", "12", "--checkpoint-every", "2", "--keep-checkpoints", "2",
           "--gradient-accumulation-steps", "2", "--batch-size", "16", "--warmup-steps", "4", "--fit-verbose", "0",
           "--no-tensorboard"]


@tensorflow_only
def test_the_command_killed_and_out_of_disk_resumes_to_the_uninterrupted_runs_checkpoints(tmp_path, capsys):
    """One run, rerun after each fault: held at step 3 while a second run
    into its directory is refused; then on past two more checkpoints (its
    first, step 2's, pruned) until SIGKILL while writing the next (step
    8's); resumed, in this process, until that one does not fit (the
    process's file size limit); then to the end. Its checkpoints and last
    weights are the uninterrupted run's, to the bit."""
    run = [*COMMAND, "--output-dir", str(tmp_path / "run")]
    same = ("--intra-op-threads", intra_op_threads())  # and no graph rewrites, as this process
    env = {"XLA_FLAGS": os.environ.get("XLA_FLAGS", "")}
    first = processes.start_script("faults.py", *same, "--stall-at-step", 3, "--kill-writing-step", 8, "--", *run,
                                   env=env)
    try:
        assert main([*COMMAND, "--output-dir", str(tmp_path / "whole")]) == 0  # meanwhile, uninterrupted
        wait_for(tmp_path / "run" / "checkpoints" / "ckpt-0000000002.json", first)
        with pytest.raises(LockedError, match=rf"^Output directory '{re.escape(str(tmp_path / 'run'))}' is in use: "
                                              rf"process {first.pid} on .* \(keras-transformer train .*\) holds .*train.lock\. Wait"):
            main(run)  # a second run into the directory, while the first runs
        first.send_signal(signal.SIGUSR1)  # goes on from step 3, where it waits
        processes.finish(first, expect=-signal.SIGKILL)
    finally:
        processes.stop(first)
    assert steps_of(tmp_path / "run") == [4, 6] and len(temporary_files(tmp_path / "run")) == 1
    assert os.path.exists(tmp_path / "run" / "train.lock")  # the killed run's, held by no process
    half_written = temporary_files(tmp_path / "run")
    capsys.readouterr()
    with faults_in_this_process("--file-size-limit-at-step", 7, batches_per_step=2):
        with pytest.raises(OSError, match=r"^\[Errno 27\] File too large for checkpoint "
                                          r".*ckpt-0000000008.weights.h5: .* file size limit") as error:
            main(run)
    assert "ckpt-0000000006.weights.h5: step 6, skipping 12 consumed batches" in capsys.readouterr().out
    assert error.value.errno == errno.EFBIG
    assert steps_of(tmp_path / "run") == [4, 6] and temporary_files(tmp_path / "run") == half_written
    assert main(run) == 0  # what is resumed is the run's directory: in this process, as the uninterrupted run
    assert "ckpt-0000000006.weights.h5: step 6, skipping 12 consumed batches" in capsys.readouterr().out
    assert steps_of(tmp_path / "run") == steps_of(tmp_path / "whole") == [10, 12]
    assert not temporary_files(tmp_path / "run") and not os.path.exists(tmp_path / "run" / "train.lock")
    assert_same_checkpoints(tmp_path / "run", tmp_path / "whole", [10, 12])
    assert_same_arrays(tmp_path / "run" / "model.weights.h5", tmp_path / "whole" / "model.weights.h5")


@contextlib.contextmanager
def faults_in_this_process(*options, batches_per_step):
    """`faults.py`'s `options` (those that end no process) among the
    callbacks of every `fit` in the block; the process's file size limit
    and SIGXFSZ handler put back after it."""
    import resource

    parser = argparse.ArgumentParser()
    faults.add_arguments(parser)
    args = parser.parse_args([str(option) for option in options])
    limit, handler = resource.getrlimit(resource.RLIMIT_FSIZE), signal.getsignal(signal.SIGXFSZ)
    try:
        with faults.in_every_fit(args, batches_per_step):
            yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limit)
        signal.signal(signal.SIGXFSZ, handler)


@pytest.mark.backend
@pytest.mark.skipif(keras.backend.backend() != "jax", reason="JAX training processes: run in the JAX pass")
def test_train_on_jax_killed_resumes_to_the_uninterrupted_runs_weights(tmp_path, capsys):
    """`train()` on JAX, where TensorFlow cannot be imported: the batches
    come from a `pass -> NumPy batches` function, and a resumed run skips
    the consumed ones of that stream, with dropout's RNG state and
    accumulated steps restored. Killed while writing its second checkpoint;
    resumed, in this process, to the end. The uninterrupted run is this
    process's too, with the same `train()` input (which neither `train()`
    nor Keras' JAX trainer reads with TensorFlow, importable here). That
    a resumed run survives the pruning of the checkpoint it resumed from,
    and a run's lock, are the command's test above."""
    args = ("--steps", 6, "--checkpoint-every", 2, "--keep", 2, "--dropout", 0.1, "--accumulation", 2)
    env = {"XLA_FLAGS": os.environ.get("XLA_FLAGS", "")}  # so the process compiles as this one
    killed = processes.start(tmp_path / "run", *args, "--without-tensorflow", "--kill-writing-step", 4,
                             backend="jax", env=env)
    try:
        run_training.main([str(tmp_path / "whole"), *map(str, args), "--numpy-passes"])  # meanwhile
        processes.finish(killed, expect=-signal.SIGKILL)
    finally:
        processes.stop(killed)
    assert steps_of(tmp_path / "run") == [2] and len(temporary_files(tmp_path / "run")) == 1
    capsys.readouterr()
    run_training.main([str(tmp_path / "run"), *map(str, args), "--numpy-passes"])
    assert "ckpt-0000000002.weights.h5: step 2, skipping 4 consumed batches" in capsys.readouterr().out
    (whole_weights, whole_losses), (weights, losses) = (
        processes.results(tmp_path / "whole"),
        processes.results(tmp_path / "run"),
    )
    np.testing.assert_array_equal(losses, whole_losses[-2:])  # the epochs after step 2
    for x, y in zip(weights, whole_weights):
        np.testing.assert_array_equal(x, y)
    assert steps_of(tmp_path / "run") == [4, 6] and not temporary_files(tmp_path / "run")
    assert_same_checkpoints(tmp_path / "run", tmp_path / "whole", [4, 6])


def wait_for(path, process, timeout=processes.TIMEOUT):
    """Waits until `path` exists, while `process` runs."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert process.poll() is None, f"exit {process.returncode} before {path} was written"
        assert time.monotonic() < deadline, f"no {path} after {timeout} s"
        time.sleep(0.1)


def checkpoint_files(run_dir):
    return sorted(os.listdir(run_dir / "checkpoints"))


def steps_of(run_dir):
    return [checkpoint.step for checkpoint in list_checkpoints(run_dir / "checkpoints")]


def temporary_files(run_dir):
    return [name for name in checkpoint_files(run_dir) if name.startswith(".tmp-")]


def h5_arrays(path):
    """Every array of a `.weights.h5` file by its name: weights, and in a
    checkpoint the optimizer's slots and step."""
    arrays = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, item: arrays.update({name: item[()]}) if isinstance(item, h5py.Dataset) else None)
    return arrays


def assert_same_arrays(path, other):
    arrays, expected = h5_arrays(path), h5_arrays(other)
    assert sorted(arrays) == sorted(expected) and len(arrays) > 10
    for name, array in arrays.items():
        np.testing.assert_array_equal(array, expected[name], err_msg=name)


def assert_same_checkpoints(run_dir, other_dir, steps):
    """The checkpoints `steps` of two runs hold the same arrays (model and
    optimizer) and dropout RNG states."""
    for step in steps:
        stem = f"checkpoints/ckpt-{step:010d}"
        assert_same_arrays(run_dir / f"{stem}.weights.h5", other_dir / f"{stem}.weights.h5")
        assert "optimizer" in h5py.File(run_dir / f"{stem}.weights.h5", "r")
        states = [[state["value"] for state in json.load(open(d / f"{stem}.json"))["rng"]] for d in (run_dir, other_dir)]
        assert states[0] == states[1]  # in the models' order (a process's Keras names them by its count)


def intra_op_threads():
    """This process's TensorFlow intra-op threads (0: TensorFlow's default;
    tests/conftest.py sets them under pytest-xdist), or 0 on another backend."""
    if keras.backend.backend() != "tensorflow":
        return 0
    import tensorflow as tf

    return tf.config.threading.get_intra_op_parallelism_threads()
