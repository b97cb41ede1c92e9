"""Shared test setup: quiet logs, fixed seeds, the `backend` marker."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "backend: the outcome depends on the Keras backend (layers, model, losses and schedule, decoding, "
        "training through Keras). tests/run.sh runs every test on TensorFlow, then `-m backend` on JAX and "
        "PyTorch. Tests that are TensorFlow-only by nature (tf.data, SavedModel export, tf.distribute, "
        "serving, the CLI, the benchmark scripts) do not carry it.",
    )
    config.addinivalue_line(
        "markers",
        "slow: takes tens of seconds on 2 CPU cores (training a model, starting processes, XLA compilation). "
        "CI runs these; `-m 'not slow'` leaves them out of a quick run. Their modules run first.",
    )
    _share_the_cores_among_xdist_workers()


def pytest_collection_modifyitems(config, items):
    """The modules that hold a `slow` test first, in their order, then the
    rest. pytest-xdist hands its workers a file at a time in this order
    (tests/run.sh: --dist loadfile --no-loadscope-reorder); its default
    order, most tests first, left the long modules of few tests to the
    end, one worker running the last of them while the other waited."""
    slow = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in slow)


def _share_the_cores_among_xdist_workers():
    """Under pytest-xdist (tests/run.sh: `-n 2`), each worker's PyTorch takes
    its share of the cores for its intra-op threads. With a thread per core
    in every worker, the threads of one matrix product wait for each other
    while the other worker holds the cores, which made small models several
    times slower (see tests/decoding/trained_copy.py)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1 and keras.backend.backend() == "torch":
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


@pytest.fixture(autouse=True)
def _seed_and_policy():
    keras.utils.set_random_seed(1234)
    keras.config.set_dtype_policy("float32")
    yield
    keras.config.set_dtype_policy("float32")
