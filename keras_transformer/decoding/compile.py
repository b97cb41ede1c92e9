"""Compiling a decoding function for the current Keras backend."""

import functools

import keras

from keras_transformer.decoding.common import ensure_built


def jit_decoder(model, fn, **static):
    """Compiles `fn(model, *arrays, **static)` for the current backend.

    TensorFlow: `tf.function(jit_compile=True)` (XLA). JAX: `jax.jit`, with
    the model's variables passed in as arguments (a `keras.StatelessScope`)
    rather than baked in as constants. PyTorch: runs eagerly. `static`
    holds the Python arguments (beam size, lengths, ...); a new shape of
    the array arguments compiles again.

    Example:

    >>> decode = jit_decoder(model, beam_search, beam_size=4, alpha=0.6)
    >>> tokens, scores = decode(source_ids)
    """
    ensure_built(model)
    call = functools.partial(fn, model, **static)
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(call, jit_compile=True, autograph=False)
    if backend == "jax":
        import jax

        variables = list(getattr(model, "variables", []))

        def pure(values, *args, **arrays):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return call(*args, **arrays)

        jitted = jax.jit(pure)

        def run(*args, **arrays):
            return jitted([v.value for v in variables], *args, **arrays)

        return run
    return call
