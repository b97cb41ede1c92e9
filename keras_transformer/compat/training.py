"""Training: where `fit` reaches past Keras' public API.

`TrainerWorkarounds`: Keras' `fit`, `evaluate` and `predict` fail under a
multi-worker `tf.distribute` strategy (keras-team/keras#20585,
tensorflow/tensorflow#72388); it overrides Keras' private
`_maybe_symbolic_build`. And without a strategy, Keras' TensorFlow
trainer makes the optimizer's variables inside the first traced training
step, and `tf.function` then traces that step a second time
(tensorflow/tensorflow#48851); tracing is most of what `fit` spends
before its first step. Its `fit` makes them before, with public APIs, as
Keras' own `compile_from_config` does.
"""

import contextlib

import keras
from keras import ops

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
