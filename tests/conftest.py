"""Shared test setup: quiet logs, fixed seeds, no graph rewrites by
TensorFlow in the pytest processes, the `backend`, `portable` and
`slow` markers, the run's folder of shared artifacts (tests/shared.py), the
order of the modules, and a garbage collection after each, beside the next."""

import gc
import os
import random
import shutil
import tempfile
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

SHARED = "KERAS_TRANSFORMER_TEST_SHARED"  # tests/shared.py
THREADS = "KERAS_TRANSFORMER_TEST_THREADS"  # tests/run.sh


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "backend: the outcome depends on the Keras backend (layers, model, losses and schedule, decoding, "
        "training through Keras). tests/run.sh runs every test on TensorFlow, then `-m backend` on JAX and "
        "PyTorch. Tests that are TensorFlow-only by nature (tf.data, SavedModel export, tf.distribute, "
        "serving, the CLI, the benchmark scripts) do not carry it.",
    )
    config.addinivalue_line(
        "markers",
        "portable: the outcome does not depend on the backend (the own rules of the search, the Translator, "
        "the training loop and the `train` command: Python over keras.ops). tests/run.sh runs these once, in "
        "the PyTorch pass, whose eager ops cost the least; its TensorFlow pass leaves them out. A plain "
        "`pytest` runs them too.",
    )
    config.addinivalue_line(
        "markers",
        "slow: takes tens of seconds on 2 CPU cores (training a model, starting processes, XLA compilation). "
        "CI runs these; `-m 'not slow'` leaves them out of a quick run.",
    )
    _share_the_cores_among_xdist_workers()
    _no_graph_rewrites_in_test_processes()
    if not hasattr(config, "workerinput") and not os.environ.get(SHARED):
        # A run without tests/run.sh: a folder for this run's shared
        # artifacts, which the pytest-xdist workers, started later, inherit.
        os.environ[SHARED] = config._keras_transformer_shared = tempfile.mkdtemp(prefix="keras-transformer-tests-")


def pytest_unconfigure(config):
    folder = getattr(config, "_keras_transformer_shared", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


# The costliest modules, the heaviest first, as tests/run.sh's --durations
# tables measure them on 2 CPU cores; the other modules run after them, in
# their own order. A module's cost includes the shared artifacts it is
# first to ask for (tests/shared.py): the XLA export's module makes the
# permuting model (and its XLA export) before the modules that read it
# start, while the other worker runs modules that need none.
HEAVIEST_FIRST = {
    "tensorflow": (
        "tests/export/test_xla_export.py",
        "tests/test_examples.py",
        "tests/test_translate_speed.py",
        "tests/marian/test_import.py",  # makes tests/marian's models (tests/shared.py) for the other modules
        "tests/models/test_learning.py",
        "tests/test_docs_code.py",
        "tests/training/test_own_files.py",
        "tests/training/test_distributed.py",
        "tests/training/test_plain_keras.py",
        "tests/test_benchmarks.py",
        "tests/pipeline/test_one_pipeline.py",
        "tests/export/test_export.py",
        "tests/decoding/test_decoding.py",
        "tests/serving/test_output_paths.py",
        "tests/decoding/test_translator.py",
        "tests/test_presets.py",
        "tests/serving/test_cli_process.py",
        "tests/serving/test_serve_command.py",
        "tests/test_wheel.py",
        "tests/training/test_train.py",
    ),
    # The `backend` passes (JAX, PyTorch): their processes and the preset first.
    "other": (
        "tests/pipeline/test_one_pipeline.py",
        "tests/training/test_distributed.py",
        "tests/training/test_plain_keras.py",
        "tests/models/test_learning.py",
        "tests/decoding/test_decoding.py",
        "tests/decoding/test_translator.py",
        "tests/training/test_train.py",
    ),
}


def pytest_collection_modifyitems(config, items):
    """`HEAVIEST_FIRST`'s modules first, in that order, then the rest.
    pytest-xdist hands its workers a module at a time in this order
    (tests/run.sh: --dist loadfile --no-loadscope-reorder), so that no
    worker is left running a long module at the end while the other waits."""
    both = [item.nodeid for item in items if item.get_closest_marker("backend") and item.get_closest_marker("portable")]
    if both:  # one runs on every backend, the other on one
        raise pytest.UsageError(f"marked both `backend` and `portable`: {both}")
    heaviest = HEAVIEST_FIRST["tensorflow" if keras.backend.backend() == "tensorflow" else "other"]
    rank = {module: i for i, module in enumerate(heaviest)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


def _share_the_cores_among_xdist_workers():
    """Under pytest-xdist (tests/run.sh: `-n 2`), each worker's TensorFlow
    or PyTorch takes its share of the cores for its intra-op threads, and a
    process beside them (tests/run.sh's other passes) takes
    $KERAS_TRANSFORMER_TEST_THREADS. With a thread per core in every
    process, the threads of one matrix product wait for each other while
    another process holds the cores, which made small models several times
    slower (see tests/decoding/trained_copy.py). The processes that tests
    start keep the library's defaults."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    threads = os.environ.get(THREADS)
    if threads:
        threads = int(threads)
    elif workers > 1:
        threads = max(1, (os.cpu_count() or 1) // workers)
    else:
        return
    if keras.backend.backend() == "torch":
        import torch

        torch.set_num_threads(threads)
    elif keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(threads)


def _no_graph_rewrites_in_test_processes():
    """TensorFlow's graph optimizer (grappler) rewrites each graph function
    before its first run: every traced search, exported signature and
    training step of a test pays for it, and its rewrites change at most
    the rounding of what a graph computes. The pytest processes leave it
    out. The processes that tests start (the command line, the server, the
    benchmark engines, a SavedModel loaded with TensorFlow alone) keep it,
    as users run them; so do the trained models that several modules share
    (tests/shared.py). The training processes of tests/training leave it
    out, as their weights are compared bit for bit with a run in this process."""
    if keras.backend.backend() == "tensorflow":
        from tests.helpers import graph_rewrites

        graph_rewrites(False)


@pytest.fixture(autouse=True, scope="module")
def _seed_each_module():
    """Every seed, TensorFlow's and Keras' own generator's included, before
    each module. `tf.random.set_seed` also drops every kernel and graph
    function that TensorFlow has made ready to run, so a module's shared
    Translator, SavedModel or traced search is made ready once for all its
    tests, not again for each."""
    keras.utils.set_random_seed(1234)


@pytest.fixture(autouse=True)
def _seed_and_policy(_seed_each_module):
    """Before each test, the seeds of the generators that Keras draws the
    seeds of unseeded layers and initializers from: Python's, NumPy's and,
    on PyTorch, PyTorch's."""
    random.seed(1234)
    np.random.seed(1234)
    if keras.backend.backend() == "torch":
        import torch

        torch.manual_seed(1234)
    keras.config.set_dtype_policy("float32")
    yield
    keras.config.set_dtype_policy("float32")


_collection = None  # the thread of the last module's collection


@pytest.fixture(autouse=True, scope="module")
def _collect_each_modules_cycles():
    """A full garbage collection after each module, in a thread of its own
    while the next module's tests run. A `tf.data` iterator left in a
    reference cycle (by a `fit` that ended or was interrupted) is freed
    only by a full collection, and its destructor waits for the iterator's
    autotuning thread to stop. TensorFlow's `CancellationManager::StartCancel`
    wakes that thread (`Model::OptimizeLoop`) before it marks the iterator
    cancelled, and a thread that looks in between sleeps out its
    optimization period, which grows with the iterator's age to a minute;
    on a busy machine it often does. The destructor waits without the GIL,
    so the tests go on meanwhile. A module that ends while the last
    collection still waits starts none (Python runs one collection at a
    time), and nothing waits for it but the end of the process
    (`pytest_sessionfinish`). The JAX and PyTorch passes feed Keras NumPy
    arrays, not `tf.data`, and skip it: a full collection walks every
    object the process holds."""
    global _collection
    yield
    if keras.backend.backend() == "tensorflow" and not (_collection and _collection.is_alive()):
        _collection = threading.Thread(target=gc.collect, name="collect-module-cycles", daemon=True)
        _collection.start()


def pytest_sessionfinish(session):
    if _collection is not None:
        _collection.join()
