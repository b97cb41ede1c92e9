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


@pytest.fixture(autouse=True)
def _seed_and_policy():
    keras.utils.set_random_seed(1234)
    keras.config.set_dtype_policy("float32")
    yield
    keras.config.set_dtype_policy("float32")
