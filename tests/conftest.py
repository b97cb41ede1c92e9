"""Shared test setup: quiet logs, fixed seeds, the `backend` and `slow` markers, a tiny exported SavedModel."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402


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
        "slow: takes tens of seconds on 2 CPU cores (training a model, starting processes, XLA compilation). "
        "CI runs these; `-m 'not slow'` leaves them out of a quick run. Their modules run first.",
    )
    _share_the_cores_among_xdist_workers()


def pytest_collection_modifyitems(config, items):
    """The modules that hold a `slow` test first, in their order, then the
    rest. pytest-xdist hands its workers a file at a time in this order
    (tests/run.sh: --dist loadfile --no-loadscope-reorder); its default
    order, most tests first, left the long modules of few tests to the
    end, one worker running the last of them while the other waited."""
    slow = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in slow)


def _share_the_cores_among_xdist_workers():
    """Under pytest-xdist (tests/run.sh: `-n 2`), each worker's PyTorch takes
    its share of the cores for its intra-op threads. With a thread per core
    in every worker, the threads of one matrix product wait for each other
    while the other worker holds the cores, which made small models several
    times slower (see tests/decoding/trained_copy.py)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1 and keras.backend.backend() == "torch":
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


@pytest.fixture(autouse=True)
def _seed_and_policy():
    keras.utils.set_random_seed(1234)
    keras.config.set_dtype_policy("float32")
    yield
    keras.config.set_dtype_policy("float32")


SENTENCES = [
    "Hello there.", "How are you?", "I am fine, thank you.", "Where is the station?",
    "It costs 12 euros.", "Good morning to all!", "See you tomorrow.", "The cat sleeps.",
]


@pytest.fixture(scope="session")
def tiny_saved_model(tmp_path_factory):
    """An untrained tiny model, exported: its answers are checked against
    the SavedModel itself, so it need not translate well. One bucket, so a
    sentence is padded alike in every batch and decoded alike, and one
    loop: half the graph to trace, and to load in each process that serves
    it (tests/export checks the two loops)."""
    import io

    import sentencepiece as spm

    from keras_transformer import Transformer
    from keras_transformer.export import export

    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(SENTENCES * 10), model_writer=buffer, vocab_size=60, model_type="bpe",
        pad_id=0, unk_id=1, bos_id=2, eos_id=3, character_coverage=1.0, minloglevel=2,
    )
    keras.utils.set_random_seed(0)
    model = Transformer(vocab_size=60, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_length=32, dropout_rate=0.0)
    folder = str(tmp_path_factory.mktemp("saved") / "tiny")
    export(model, buffer.getvalue(), folder, buckets=(16,), parallel_loops=1)  # one bucket: the source budget, 16
    return folder
