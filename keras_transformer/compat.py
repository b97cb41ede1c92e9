"""Where the package reaches past the public APIs of Keras and TensorFlow, or
writes its own gradient, and why.

Each workaround names the upstream issue, or says that none is filed. The
rest of the package calls these functions and never a private API itself:

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
- `keep_cond_functional(output)`: TensorFlow has no public switch to keep a
  `tf.cond` a functional `If` in a `tf.function` (no upstream issue filed).
- `while_loop(cond, body, loop_vars, shapes)`: `keras.ops.while_loop`
  takes no shape invariants, and TensorFlow's graph loop then refuses a
  variable whose shape changes from one iteration to the next (no
  upstream issue filed); decoding's cache grows a position a step.
- `take(x, indices, axis, batch_dims)`: Keras' TensorFlow `take` wraps
  every gather in a `where` that maps negative indices (five more ops a
  call, eight graph nodes), and has no `batch_dims`; a decoding step
  gathers about twenty times, always with indices that are not negative
  (no upstream issue filed).
- `tfds_retries(count)` and `tfds_checksum_file_names(name)`: TensorFlow
  Datasets has no public setting for its downloader's HTTP retries
  (`downloader.MAX_RETRIES`), which an offline machine would spend minutes
  on, nor a public reader of the checksums file it ships for each dataset,
  which names the archives to place in `manual_dir` (no upstream issue
  filed).
- `TrainerWorkarounds`: Keras' `fit`, `evaluate` and `predict` fail under
  a multi-worker `tf.distribute` strategy (keras-team/keras#20585,
  tensorflow/tensorflow#72388); it overrides Keras' private
  `_maybe_symbolic_build`. And without a strategy, Keras' TensorFlow
  trainer makes the optimizer's variables inside the first traced training
  step, and `tf.function` then traces that step a second time
  (tensorflow/tensorflow#48851); tracing is most of what `fit` spends
  before its first step. Its `fit` makes them before, with public APIs, as
  Keras' own `compile_from_config` does.
- `saved_model_signature_defs(path)`: TensorFlow has no public reader of a
  SavedModel's `SignatureDef` protos (`tf.saved_model.load` gives its
  signatures as functions, without the tensor names TF Serving's model
  metadata shows); `saved_model.pb` is read with the format's own proto
  module, as `saved_model_cli` reads it (no upstream issue filed).
"""

import contextlib
import gc
import os

import keras
from keras import ops


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


def saved_model_signature_defs(path):
    """`{name: SignatureDef}` of the serving graph (tag `serve`) of the
    SavedModel in the folder `path`, read from its `saved_model.pb`."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    graph = next(g for g in saved.meta_graphs if "serve" in g.meta_info_def.tags)
    return dict(graph.signature_def)


def keep_cond_functional(output):
    """Marks the `tf.cond` that computes `output` to stay a functional `If`.

    TensorFlow lowers every `tf.cond` of a function into the function's own
    graph (Switch/Merge), so the first call of a SavedModel optimizes every
    branch, whether the call needs it or not. Unlowered, a branch is a
    function of its own, optimized the first time it runs.
    `_lower_using_switch_merge` is the attribute TensorFlow's cond_v2 sets
    itself, through the private `Operation._set_attr`; stock TensorFlow
    runs either form.
    """
    from tensorflow.core.framework import attr_value_pb2

    op = output.op
    while op.type not in ("If", "StatelessIf"):
        op = op.inputs[0].op
    op._set_attr("_lower_using_switch_merge", attr_value_pb2.AttrValue(b=False))


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


# ------------------------------------------------ fit under a multi-worker strategy
#
# 1. Before training, Keras reads a batch and averages it across replicas
#    with `strategy.reduce("MEAN", batch)` to build the compiled loss and
#    metrics; the collective strategy cannot reduce a nested batch of
#    per-replica values ("Attempt to convert a value (PerReplica...)").
#    `_maybe_symbolic_build` here builds them (with Keras' `_symbolic_build`)
#    from the first local replica's part of the batch instead, which has the
#    same shapes and dtypes.
# 2. After every step, Keras averages the logs with `strategy.reduce("MEAN",
#    value, axis=0)`, which fails on scalars ("Invalid reduction dimension 0
#    for input with 0 dimensions", tensorflow/tensorflow#72388).
#    `get_metrics_result` gives the logs as 1-element vectors inside a
#    multi-worker step, so that the reduce averages them into scalars.
# Other strategies and backends take Keras' own code.


def _multi_worker_strategy():
    """The current `MultiWorkerMirroredStrategy` if it spans several tasks, else None."""
    if keras.backend.backend() != "tensorflow":
        return None
    import tensorflow as tf

    strategy = tf.distribute.get_strategy()
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return None
    cluster = strategy.cluster_resolver.cluster_spec()
    return strategy if sum(cluster.num_tasks(job) for job in cluster.jobs) > 1 else None


class TrainerWorkarounds:
    """Mixin of a `keras.Model`: `fit` traces its first step once, and
    `fit`, `evaluate` and `predict` work under a multi-worker strategy (see
    the module)."""

    def fit(self, *args, **kwargs):
        optimizer = getattr(self, "optimizer", None)  # None before `compile`, which `fit` then asks for
        if self.built and optimizer is not None and not optimizer.built:
            strategy = getattr(self, "distribute_strategy", None)  # TensorFlow's trainer only
            with strategy.scope() if strategy is not None else contextlib.nullcontext():
                optimizer.build(self.trainable_variables)
        return super().fit(*args, **kwargs)

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        # Keras' TensorFlow trainer; keras-team/keras#20585.
        import tensorflow as tf

        strategy = self.distribute_strategy

        if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or iterator is None:
            return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)
        for _, _, batches in iterator:
            batch = next(batches)
            data_batch = tf.nest.map_structure(lambda v: strategy.experimental_local_results(v)[0], batch)
            break
        with strategy.scope():
            self._symbolic_build(data_batch=data_batch)

    def get_metrics_result(self):
        results = super().get_metrics_result()
        if _multi_worker_strategy() is None:
            return results
        import tensorflow as tf

        if tf.distribute.in_cross_replica_context():  # epoch-end logs: already reduced
            return results
        # tensorflow/tensorflow#72388: Keras reduces the logs along axis 0.
        return {name: ops.reshape(value, (1,)) for name, value in results.items()}


@contextlib.contextmanager
def tfds_retries(count):
    """Sets TensorFlow Datasets' HTTP retry count for a while (`None`: leave it)."""
    from tensorflow_datasets.core.download import downloader  # an optional dependency, for WMT14 only

    previous = getattr(downloader, "MAX_RETRIES", None)
    if count is not None and previous is not None:
        downloader.MAX_RETRIES = count
    try:
        yield
    finally:
        if previous is not None:
            downloader.MAX_RETRIES = previous


def tfds_checksum_file_names(name):
    """url -> file name, from the checksums TensorFlow Datasets ships for dataset `name`."""
    import tensorflow_datasets as tfds  # an optional dependency, for WMT14 only

    path = os.path.join(os.path.dirname(tfds.__file__), "url_checksums", f"{name}.txt")
    names = {}
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                fields = line.split()
                if len(fields) == 4:
                    names[fields[0]] = fields[3]
    return names
