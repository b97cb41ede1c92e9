"""Shared checks: gradients on the active backend, equal rows of outputs,
TensorFlow's graph rewrites, and the shipped presets' models loaded once.
(What every layer must pass: tests/layers/checks.py.)"""

import contextlib
import os

import keras
import pytest


def backend_gradients(f, *args):
    """Gradients of the scalar `f(*args)` with respect to every argument, on
    the active backend, as backend tensors in the arguments' dtypes."""
    backend = keras.backend.backend()
    args = [keras.ops.convert_to_tensor(a) for a in args]
    if backend == "jax":
        import jax

        return list(jax.grad(f, argnums=tuple(range(len(args))))(*args))
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            tape.watch(args)
            value = f(*args)
        return tape.gradient(value, args)
    args = [a.detach().requires_grad_(True) for a in args]
    f(*args).backward()
    return [a.grad for a in args]


def assert_rows_close(rows, expected, atol=1e-5):
    """Equal rows of outputs (`keras_transformer.translation.translator.prediction`):
    the same keys, equal strings, numbers within `atol`."""
    import pytest

    assert [sorted(row) for row in rows] == [sorted(row) for row in expected]
    for row, other in zip(rows, expected):
        for key, value in row.items():
            if isinstance(value, float) or value and isinstance(value, list) and isinstance(value[0], float):
                assert value == pytest.approx(other[key], abs=atol), key
            else:
                assert value == other[key], key


def graph_rewrites(enabled):
    """Turns TensorFlow's graph optimizer (grappler) on or off for the graph
    functions this process runs next, and returns the options it replaced
    (for `tf.config.optimizer.set_experimental_options`). The pytest
    processes run without it (tests/conftest.py)."""
    import tensorflow as tf

    options = tf.config.optimizer.get_experimental_options()
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": not enabled})
    return options


@contextlib.contextmanager
def shipped_models_loaded_once():
    """Within it, `presets.load_model` (which `Translator.from_preset`,
    `Translator.load` and `Transformer.from_preset` call) loads each shipped
    preset's model once: for code that only reads the models it loads, such
    as the documents' examples and the commands they show. Folders are
    loaded each time, as they may change."""
    from keras_transformer.models import presets

    load, loaded = presets.load_model, {}

    def load_once(preset, load_weights=True, dtype=None):
        if preset not in presets.list_presets() or os.path.exists(preset):
            return load(preset, load_weights=load_weights, dtype=dtype)
        key = (preset, load_weights, dtype)
        if key not in loaded:
            loaded[key] = load(preset, load_weights=load_weights, dtype=dtype)
        return loaded[key]

    presets.load_model = load_once
    try:
        yield
    finally:
        presets.load_model = load


@pytest.fixture(scope="module")
def shipped_models():
    """`shipped_models_loaded_once` for a module's tests."""
    with shipped_models_loaded_once():
        yield
