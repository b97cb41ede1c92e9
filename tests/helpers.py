"""Shared checks: gradients on the active backend, equal rows of outputs,
and TensorFlow's graph rewrites. (What every layer must pass:
tests/layers/checks.py.)"""

import keras


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
