"""Decoding: where its loop goes around `keras.ops`.

- `while_loop(cond, body, loop_vars, shapes)`: `keras.ops.while_loop`
  takes no shape invariants, and TensorFlow's graph loop then refuses a
  variable whose shape changes from one iteration to the next (no
  upstream issue filed); decoding's cache grows a position a step.
- `take(x, indices, axis, batch_dims)`: Keras' TensorFlow `take` wraps
  every gather in a `where` that maps negative indices (five more ops a
  call, eight graph nodes), and has no `batch_dims`; a decoding step
  gathers about twenty times, always with indices that are not negative
  (no upstream issue filed).
"""

import keras
from keras import ops


def while_loop(cond, body, loop_vars, shapes):
    """`keras.ops.while_loop(cond, body, loop_vars)` whose variables may
    change shape: `shapes` has the structure of `loop_vars`, with a tuple
    for each tensor, `None` for each dimension that may change.

    On TensorFlow it is `tf.while_loop` with those shape invariants (a
    graph loop checks shapes against them, an eager one runs as it is); on
    the other backends `keras.ops.while_loop`, whose loops in JAX keep their
    shapes and in PyTorch run eagerly.
    """
    if keras.backend.backend() != "tensorflow":
        return ops.while_loop(cond, body, loop_vars)
    import tensorflow as tf

    loop_vars = tuple(loop_vars)
    invariants = keras.tree.map_structure_up_to(loop_vars, tf.TensorShape, tuple(shapes))
    return tf.while_loop(cond, lambda *args: tuple(body(*args)), loop_vars, shape_invariants=invariants)


def take(x, indices, axis=0, batch_dims=0):
    """`tf.gather(x, indices, axis, batch_dims)` for `indices` that are not
    negative: `keras.ops.take` but for `batch_dims=1`, `x[b, indices[b, j]]`
    for `x` `(batch, n, ...)` and `indices` `(batch, m)` along `axis=1`."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.gather(x, indices, axis=axis, batch_dims=batch_dims)
    if not batch_dims:
        return ops.take(x, indices, axis=axis)
    x, indices = ops.convert_to_tensor(x), ops.convert_to_tensor(indices)
    if (batch_dims, axis) != (1, 1):
        raise ValueError(f"`take` gathers along axis 1 of each batch row. Received: axis={axis}, "
                         f"batch_dims={batch_dims}")
    offsets = ops.arange(ops.shape(indices)[0], dtype=indices.dtype)[:, None] * ops.shape(x)[1]  # (batch, 1)
    rows = ops.take(ops.reshape(x, (-1, *ops.shape(x)[2:])), ops.reshape(indices + offsets, (-1,)), axis=0)
    return ops.reshape(rows, (*ops.shape(indices), *ops.shape(x)[2:]))
