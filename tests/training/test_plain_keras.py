"""Plain Keras `fit`/`evaluate`/`predict` under a strategy, without `train()`.

Multi-worker training is tests/training/test_distributed.py's, through
`train()`, which runs Keras' own `fit` under MultiWorkerMirroredStrategy.

Each case runs `plain_keras_fit.py` in fresh processes and compares it with
the same script on one device, on the same global batches: the losses of
every epoch, the evaluation, the predictions and the trained weights.
"""

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


def run(path, *args, backend="tensorflow", env=None):
    return processes.start_script(SCRIPT, path, *args, backend=backend, env=env)


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


@pytest.fixture(scope="module")
def one_device_run(tmp_path_factory):
    """`options -> path`: the script's one-device TensorFlow run with
    `options`, made once per module, in this process (the TensorFlow
    pass's: one device, nothing distributed), while the distributed
    processes start."""
    from tests.training import plain_keras_fit

    paths = {}

    def reference(*options):
        if options not in paths:
            path = tmp_path_factory.mktemp("one-device") / "single.npz"
            plain_keras_fit.main([str(path), *map(str, options)])
            paths[options] = path
        return paths[options]

    return reference


def compare_with_one_device(distributed, output, options, one_device_run):
    """Waits for the `distributed` processes (the one-device run, when it
    is not made yet, runs beside them) and compares `output` with it."""
    try:
        single = one_device_run(*options)
        processes.run_all(*distributed)
    finally:
        processes.stop(*distributed)
    assert_same_run(output, single)


@tensorflow_only
@pytest.mark.parametrize("data,loss", [("numpy", "ours"), ("dataset", "stock")])
def test_mirrored_strategy_over_two_cpus_matches_one_device(tmp_path, data, loss, one_device_run):
    options = ("--input", data, "--loss", loss)
    mirrored = run(tmp_path / "mirrored.npz", "--strategy", "mirrored", *options)
    compare_with_one_device([mirrored], tmp_path / "mirrored.npz", options, one_device_run)


@pytest.mark.backend
@jax_only
def test_jax_data_parallel_over_two_host_devices_matches_one_device(tmp_path):
    flags = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    parallel = run(tmp_path / "parallel.npz", "--strategy", "data-parallel", backend="jax", env=flags)
    single = run(tmp_path / "single.npz", backend="jax")
    processes.run_all(parallel, single)
    assert_same_run(tmp_path / "parallel.npz", tmp_path / "single.npz")
