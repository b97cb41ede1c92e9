"""Loading an exported SavedModel as a Python function, without any server package.

`keras-transformer translate` and `evaluate` use it as is; `serve` puts it
behind HTTP (keras_transformer.serving.server, which needs fastapi).

Example:

>>> from keras_transformer.serving.predictor import load_saved_model_predictor
>>> predict, version = load_saved_model_predictor("saved_models/tatoeba_en_fr")
>>> predict(["I love you.", ""])
[{'translations': "Je t'aime.", 'scores': -0.69...}, {'translations': '', 'scores': 0.0}]
"""

import os

import numpy as np

from keras_transformer.validation import check_non_negative_int


def latest_version(model_dir):
    """The highest numbered version folder of a TF Serving model folder."""
    if not os.path.isdir(model_dir):
        raise FileNotFoundError(f"No model folder at {model_dir!r}")
    if os.path.exists(os.path.join(model_dir, "saved_model.pb")):
        return os.path.basename(os.path.normpath(model_dir)), model_dir
    versions = [d for d in os.listdir(model_dir) if d.isdigit()]
    if not versions:
        raise FileNotFoundError(
            f"{model_dir!r} holds no numbered version folder with a saved_model.pb "
            "(expected <name>/<version>/saved_model.pb)"
        )
    version = max(versions, key=int)
    return version, os.path.join(model_dir, version)


def _to_python(array):
    """A NumPy output as JSON-ready Python values (bytes decoded)."""
    if array.dtype == object:
        return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(array).tolist()
    return array.tolist()


def load_saved_model_predictor(path, graph_optimizations=True, intra_op_threads=0, inter_op_threads=0):
    """Loads an exported SavedModel; returns `(predict, version)`.

    Args:
        path: a model folder (`saved_models/<name>`, its latest version is
            used) or one version folder.
        graph_optimizations: bool. False turns TensorFlow's graph optimizer
            (grappler) off, for the whole process
            (`tf.config.optimizer.set_experimental_options`), before
            loading. On the exported beam search it spends seconds at the
            first call (the shipped model with two loops, 2 cores: first
            translation 10.9 s with it, 4.1 s without) and then gains
            nothing on length-sorted batches,
            but single sentences and unsorted batches run 10-20% faster with
            it (benchmarks/README.md). The one-shot `translate` and
            `evaluate` commands turn it off; `serve` keeps it.
        intra_op_threads, inter_op_threads: TensorFlow's thread pools for
            the process (`tf.config.threading`; 0: TensorFlow's choice, one
            thread per core for each), set before loading, as TF Serving's
            `--tensorflow_intra_op_parallelism` and
            `--tensorflow_inter_op_parallelism`. On 2 CPU cores, 1 and 2
            translated single sentences 20-25% faster than the default and,
            with the two decoding loops `export` writes by default, batches
            of 64 1.3-1.45× as fast (benchmarks/README.md).
    """
    check_non_negative_int("intra_op_threads", intra_op_threads)
    check_non_negative_int("inter_op_threads", inter_op_threads)
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 - registers the tokenizer ops

    for name, value, setter, getter in (
        ("intra_op_threads", intra_op_threads, tf.config.threading.set_intra_op_parallelism_threads,
         tf.config.threading.get_intra_op_parallelism_threads),
        ("inter_op_threads", inter_op_threads, tf.config.threading.set_inter_op_parallelism_threads,
         tf.config.threading.get_inter_op_parallelism_threads),
    ):
        if value and value != getter():
            try:
                setter(value)
            except RuntimeError as error:  # TensorFlow's runtime already started in this process
                raise RuntimeError(f"Cannot set `{name}`={value}: {error}") from error
    if not graph_optimizations:
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    version, version_dir = latest_version(path)
    try:
        signature = tf.saved_model.load(version_dir).signatures["serving_default"]
    except Exception as error:  # IndexError, tf.errors.OpError, ... on a damaged file
        raise OSError(f"Cannot load the SavedModel at {version_dir!r}: {error}") from error

    def predict(texts):
        outputs = signature(inputs=tf.constant(texts))
        columns = {key: _to_python(value.numpy()) for key, value in outputs.items()}
        return [{key: column[i] for key, column in columns.items()} for i in range(len(texts))]

    return predict, int(version) if str(version).isdigit() else 1
