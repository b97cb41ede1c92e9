"""Shared checks: the config round trip and .keras save/load every layer
must pass, gradients on the active backend, and equal rows of outputs."""

import inspect
import os

import keras
import numpy as np


def assert_config_is_constructor_arguments(layer):
    """`get_config()` holds exactly the constructor arguments."""
    config = layer.get_config()
    parameters = set()
    for cls in type(layer).__mro__:
        if cls is keras.layers.Layer:
            break
        if "__init__" in vars(cls):
            signature = inspect.signature(cls.__init__)
            parameters |= {
                name for name, p in signature.parameters.items()
                if name != "self" and p.kind is not p.VAR_KEYWORD
            }
    keras_arguments = {"name", "trainable", "dtype"}
    assert set(config) - keras_arguments == parameters
    clone = type(layer).from_config(config)
    assert clone.get_config() == config


def assert_survives_keras_file(layer, inputs, tmp_path, **call_kwargs):
    """A functional model around `layer`, saved and loaded, gives the same
    outputs (the loaded layer is rebuilt from its config)."""
    symbolic = [keras.Input(shape=x.shape[1:], dtype=x.dtype) for x in inputs]
    model = keras.Model(symbolic, layer(*symbolic, **call_kwargs))
    expected = model.predict(inputs, verbose=0)
    path = os.path.join(tmp_path, "layer.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded.layers[-1]) is type(layer)
    np.testing.assert_allclose(loaded.predict(inputs, verbose=0), expected, atol=1e-6)


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
    """Equal rows of outputs (`keras_transformer.translator.prediction`):
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
