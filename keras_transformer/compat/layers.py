"""Layers and models: where they reach past Keras' public API, or write
their own gradient.

- `in_shape_inference()`: Keras infers a layer's output shapes by calling
  it on placeholders, and has no public way to tell that from a real call
  (`keras.src.backend.common.symbolic_scope.in_symbolic_scope`; no upstream
  issue filed). The placeholders' values and sizes are not the data's: on
  PyTorch an unknown length is 83, then 89, and under a `tf.distribute`
  strategy Keras builds a model from a batch averaged across replicas,
  whose token ids are float. Checks of lengths and ids skip them.
- `has_values(x)`: whether a tensor holds values that Python can read
  (an eager tensor), not a placeholder of a traced function (a
  `tf.function` graph, a JAX trace, a TorchDynamo trace, Keras' shape
  inference). Keras has no public test for it (no upstream issue filed).
- `sublayers(layer)`: Keras has no public way to walk a layer's nested
  layers (`Layer._flatten_layers`); a subclassed model records its
  quantized layers' policies itself (keras-team/keras#19381).
- `collections_deferred()`: Keras' `Layer.__delattr__` runs a full
  `gc.collect()` for every variable it drops (keras-team/keras#19954), and
  quantizing drops every kernel: each collection walks every object of a
  process that has TensorFlow or JAX loaded, and such a process holds
  many objects.
- `int8_reverse_projection(...)`: a custom gradient. The quantized output
  layer's product, the largest of a decoding step, runs int8 by int8 (its
  float form: benchmarks/README.md, tried and dropped), and the layers before it
  still train (LoRA) through the dequantized table's gradient, as Keras'
  int8 `Dense` gives its own (Keras' `ReversibleEmbedding` does not; no
  upstream issue filed).
"""

import contextlib
import gc

import keras
from keras import ops


def in_shape_inference():
    """Whether Keras is inferring output shapes (see the module)."""
    from keras.src.backend.common.symbolic_scope import in_symbolic_scope

    return in_symbolic_scope()


def has_values(x):
    """Whether the tensor `x` holds values Python can read (see the module)."""
    if in_shape_inference():
        return False
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.executing_eagerly() and not tf.is_symbolic_tensor(x)
    if backend == "jax":
        import jax

        return not isinstance(x, jax.core.Tracer)
    if backend == "torch":
        import torch

        return not torch.compiler.is_compiling() and x.device.type != "meta"
    return True

def sublayers(layer):
    """Every layer nested in `layer`, at any depth, without `layer` itself."""
    return layer._flatten_layers(include_self=False)


@contextlib.contextmanager
def collections_deferred():
    """Runs the block with the objects that exist now frozen out of garbage
    collections (`gc.freeze`), then runs one collection.

    A weight that no reference cycle holds is freed as it is dropped either
    way. A process that froze objects itself (a pre-forking server) keeps
    them frozen, and its block runs as it is.
    """
    if gc.get_freeze_count():  # frozen by the caller: leave that as it is
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.collect()


def int8_reverse_projection(inputs, table, table_scale, compute_dtype):
    """Logits `(..., vocab)` of hidden states `(..., d_model)` against an int8
    table `(vocab, d_model)` with one scale per row `(vocab,)`.

    The hidden states are quantized per row (abs-max, one scale per
    position), multiplied by the table with int32 sums, and divided by both
    scales. The gradient of the hidden states is that of the dequantized
    table; the table and its scale get none.
    """

    @ops.custom_gradient
    def project(inputs, table, table_scale):
        def grad_fn(*args, upstream=None):
            if upstream is None:
                (upstream,) = args
            float_table = ops.cast(table, compute_dtype) / ops.expand_dims(table_scale, -1)  # (vocab, d_model)
            return ops.matmul(upstream, float_table), None, None

        quantized, scale = keras.quantizers.abs_max_quantize(inputs, axis=-1)  # (..., d_model) int8, (..., 1)
        logits = ops.matmul(quantized, ops.transpose(table))  # int32 (..., vocab)
        logits = ops.cast(logits, compute_dtype)
        return logits / ops.cast(scale * table_scale, compute_dtype), grad_fn

    return project(inputs, table, table_scale)
