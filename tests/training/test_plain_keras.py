"""Plain Keras `fit`/`evaluate`/`predict` under a strategy, without `train()`.

Multi-worker training is tests/training/test_distributed.py's, through
`train()`, which runs Keras' own `fit` under MultiWorkerMirroredStrategy.
The mirrored process also distributes the data pipeline's batches
(`make_dataset(num_replicas=2)`): what each replica gets is checked here too.

Each case runs `plain_keras_fit.py` in a fresh process (logical devices and
`XLA_FLAGS` are fixed when TensorFlow or JAX starts) and compares it with the
same script on one device, run in the test's own process, on the same global
batches: the losses of every epoch, the evaluation, the predictions and the
trained weights.
"""

import json
import os

import keras
import numpy as np
import pytest

from tests.training import processes

tensorflow_only = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="tf.distribute runs on the TensorFlow backend"
)
jax_only = pytest.mark.skipif(keras.backend.backend() != "jax", reason="keras.distribution on JAX")

pytestmark = pytest.mark.slow  # training processes

SCRIPT = "plain_keras_fit.py"


# Our loss, metric and optimizer, on a tf.data.Dataset on TensorFlow and on
# NumPy arrays on JAX (tf.data is the TensorFlow pass's; Keras' TensorFlow
# trainer reads arrays through tf.data too). Keras' own losses and
# optimizers under a strategy are Keras'; tf.data input under
# MultiWorkerMirroredStrategy is also test_distributed.py's, through train().
RUNS = (("dataset", "ours"),)


def run(folder, *args, runs=RUNS, backend="tensorflow", env=None):
    return processes.start_script(SCRIPT, folder, *args, *run_options(runs), backend=backend, env=env)


def run_options(runs):
    """`plain_keras_fit.py`'s `--run INPUT,LOSS` options of `runs`."""
    return [f"--run={data},{loss}" for data, loss in runs]


def assert_same_run(distributed, single):
    a, b = np.load(distributed), np.load(single)
    assert a["replicas"] == 2 and b["replicas"] == 1
    assert len(a["losses"]) == 3 and np.all(np.diff(b["losses"]) < 0)  # it trains
    np.testing.assert_allclose(a["losses"], b["losses"], rtol=2e-3)
    np.testing.assert_allclose(a["evaluation"], b["evaluation"], rtol=2e-3)
    np.testing.assert_allclose(a["predictions"], b["predictions"], rtol=2e-3, atol=2e-3)
    # Adam moves a weight whose gradient is about 0 (the key projection's
    # bias, say) by about the learning rate whatever its sign's rounding, so
    # the weights agree as a whole, well within the bound below, where training
    # on a replica's half of each batch only would move them by tens of percent.
    assert np.linalg.norm(a["weights"] - b["weights"]) < 1e-2 * np.linalg.norm(b["weights"])


def one_device_runs(folder, runs=RUNS):
    """The script's one-device runs, in this process (one device, nothing
    distributed), while the distributed process runs beside it."""
    from tests.training import plain_keras_fit

    plain_keras_fit.main([str(folder), *run_options(runs)])


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory):
    """The folder of a `mirrored` process's runs, of the one-device runs
    (`single/`) and of the tokenizer that the process's pipeline batches
    use (`tokenizer/`). One process with two logical CPUs serves both tests
    below."""
    from keras_transformer import datasets
    from keras_transformer.data import SubwordTokenizer

    folder = tmp_path_factory.mktemp("mirrored")
    pairs = datasets.load("tatoeba_en_fr", "test")[:300]
    SubwordTokenizer.train([s for pair in pairs for s in pair], vocab_size=500).save(folder / "tokenizer")
    process = run(folder / "mirrored", "--strategy", "mirrored", "--replica-batches", folder / "tokenizer")
    try:
        one_device_runs(folder / "single")
        processes.run_all(process)
    finally:
        processes.stop(process)
    return folder


@tensorflow_only
def test_mirrored_strategy_over_two_cpus_matches_one_device(mirrored):
    for data, loss in RUNS:
        assert_same_run(mirrored / "mirrored" / f"{data}-{loss}.npz", mirrored / "single" / f"{data}-{loss}.npz")


@tensorflow_only
def test_mirrored_strategy_gets_per_replica_batches(mirrored):
    # make_dataset(num_replicas=2) under MirroredStrategy: every batch splits
    # into two equal halves within the token budget, and the rows of a pass
    # are those kept but the counted remainder.
    with open(mirrored / "mirrored" / "replica-batches.json") as f:
        batches = json.load(f)
    assert len(batches["shapes"]) > 3
    for parts in batches["shapes"]:
        assert len(parts) == 2 and parts[0] == parts[1], parts
        assert parts[0][0] * 2 * parts[0][1] <= 512
    rows = sum(2 * parts[0][0] for parts in batches["shapes"])
    assert rows + batches["remainder_per_pass"] == batches["kept"] > 0


@pytest.mark.backend
@jax_only
def test_jax_data_parallel_over_two_host_devices_matches_one_device(tmp_path):
    # The parallel process compiles as this one does (tests/run.sh's
    # XLA_FLAGS), with two host devices; the one-device run is this
    # process's (the JAX pass's).
    flags = {"XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2"}
    runs = (("numpy", "ours"),)
    parallel = run(tmp_path / "parallel", "--strategy", "data-parallel", runs=runs, backend="jax", env=flags)
    try:
        one_device_runs(tmp_path / "single", runs)
        processes.run_all(parallel)
    finally:
        processes.stop(parallel)
    assert_same_run(tmp_path / "parallel" / "numpy-ours.npz", tmp_path / "single" / "numpy-ours.npz")
