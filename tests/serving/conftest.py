"""A real uvicorn server on a free localhost port, in a background thread,
and a tiny exported SavedModel."""

import io
import threading
import time

import pytest
import uvicorn

from keras_transformer.serving import bind_socket, run_until_signalled


class RunningServer:
    """Serves `app` on a socket bound to port 0 here: the port is the
    socket's own, with no window for another process to take it."""

    def __init__(self, app):
        sock = bind_socket("127.0.0.1", 0)
        self.port = sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(target=run_until_signalled, args=(self.server, sock), daemon=True)
        self.thread.start()
        deadline = time.time() + 20
        while not self.server.started:
            if time.time() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def run_server():
    servers = []

    def start(app):
        servers.append(RunningServer(app))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


SENTENCES = [
    "Hello there.", "How are you?", "I am fine, thank you.", "Where is the station?",
    "It costs 12 euros.", "Good morning to all!", "See you tomorrow.", "The cat sleeps.",
]


@pytest.fixture(scope="session")
def tiny_saved_model(tmp_path_factory):
    """An untrained tiny model, exported: its answers are checked against
    the SavedModel itself, so it need not translate well. One bucket, so a
    sentence is padded alike in every batch and decoded alike."""
    import keras
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
    export(model, buffer.getvalue(), folder, buckets=(16,))  # one bucket: the source budget, 16
    return folder
