"""Work-arounds for Keras 3.15.1 `fit` with tf.distribute, in one place.

1. `build_before_fit(model)`: builds model, metrics, loss and optimizer
   from int32 specs. Otherwise `fit` builds them from a data batch, which
   under a tf.distribute strategy it first averages across replicas
   (`strategy.reduce("MEAN", ...)`): the token ids become float32 (and the
   model rejects them), and under MultiWorkerMirroredStrategy the reduce
   fails outright ("Attempt to convert a value (PerReplica...)"). On JAX the
   same lazy build takes the first batch out of the iterator, so training
   would start one batch late.
2. `vector_logs_for_multi_worker(model)`: under MultiWorkerMirroredStrategy,
   Keras reduces each step's logs with `strategy.reduce("MEAN", v, axis=0)`,
   which fails on scalars ("Invalid reduction dimension 0 for input with 0
   dimensions", tensorflow/tensorflow#72388). Returning the logs as
   1-element vectors makes that reduce the mean over workers.

Example:

>>> build_before_fit(model)
>>> if distributed.kind == "multi-worker":
...     vector_logs_for_multi_worker(model)
"""

import keras
import numpy as np


def build_before_fit(model):
    """Builds everything `fit` needs now; `fit` then skips its own build."""
    ids = np.ones((1, 2), "int32")
    model._symbolic_build(data_batch=((ids, ids), ids, None))
    if keras.backend.backend() == "tensorflow":
        # The TF trainer reads a batch for its build even when all is built.
        model._maybe_symbolic_build = lambda iterator=None, data_batch=None: None


def vector_logs_for_multi_worker(model):
    """Makes `train_step`/`test_step` return `(1,)`-shaped logs."""
    from keras import ops

    def vectors(step):
        return lambda data: {k: ops.reshape(v, (1,)) for k, v in step(data).items()}

    model.train_step = vectors(model.train_step)
    model.test_step = vectors(model.test_step)
