"""`keras-transformer serve` as a real process on a SavedModel (the copying
model's, tests/export/copying.py): `--port 0`, the port read from its
standard output, answers checked against the same SavedModel loaded here,
and SIGTERM after a request was read."""

import concurrent.futures
import http.client
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading

import httpx
import keras
import pytest

pytestmark = [
    pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="SavedModel export runs in the TensorFlow pass"),
    pytest.mark.slow,  # an exported model served by a process of its own
]

from tests.export.copying import SENTENCES, load_copying_export

LONG = "Where is the station? How are you? I am fine, thank you."
NAME = "copying"
# Every request's timeout, the server's (--request-timeout) and its
# clients': on a busy machine a batch may outlast the server's default.
TIMEOUT_S = 300


@pytest.fixture(scope="module")
def model_dir():
    """The model folder: an empty version 9 and the SavedModel, version 10."""
    return os.path.dirname(load_copying_export()[2])


def saved_model_answers(model_dir, texts):
    """`{text: {output: value}}` from the SavedModel loaded in this process,
    as the REST API answers a plain string: its n-best lists without the
    ranks the graph scores as placeholders (a blank input's after its one
    empty translation)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 - registers the tokenizer ops

    from keras_transformer.decoding.common import NEG_INF

    signature = tf.saved_model.load(os.path.join(model_dir, "10")).signatures["serving_default"]
    out = {key: value.numpy().tolist() for key, value in signature(inputs=tf.constant(texts)).items()}
    decode = lambda value: value.decode("utf-8") if isinstance(value, bytes) else value  # noqa: E731
    answers = {}
    for i, text in enumerate(texts):
        ranks = [r for r, score in enumerate(out["nbest_scores"][i]) if score > NEG_INF / 2]
        answers[text] = {key: decode(values[i]) if not isinstance(values[i], list) else [decode(values[i][r]) for r in ranks]
                         for key, values in out.items()}
    return answers


def serve_command():
    script = os.path.join(os.path.dirname(sys.executable), "keras-transformer")
    return [script] if os.path.isfile(script) else [sys.executable, "-m", "keras_transformer.cli"]


def read_lines(stream, lines):
    for line in stream:
        lines.put(line)
    lines.put(None)


def served_url(process, lines, timeout):
    """The URL of the `Serving <name> at <url>` line, skipping any other."""
    while True:
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no 'Serving ... at' line within {timeout} s")
        if line is None:
            pytest.fail(f"serve exited with status {process.wait(timeout=10)} before serving")
        match = re.fullmatch(rf"Serving {NAME} at (http://127\.0\.0\.1:\d+)\n", line)
        if match:
            return match.group(1)


def assert_answers(predictions, texts, expected):
    for prediction, text in zip(predictions, texts, strict=True):
        assert sorted(prediction) == sorted(expected[text])
        assert (prediction["translations"], prediction["nbest_translations"]) == (
            expected[text]["translations"], expected[text]["nbest_translations"])
        for key in ("scores", "nbest_scores"):
            assert prediction[key] == pytest.approx(expected[text][key], rel=1e-4, abs=1e-5)


def check_good_requests(url, expected):
    texts = ["Hello there.", "", "The cat sleeps.", " \t", "It costs 12 euros."]
    r = httpx.post(f"{url}/v1/models/{NAME}:predict", json={"instances": texts}, timeout=TIMEOUT_S)
    assert r.status_code == 200, r.text
    assert_answers(r.json()["predictions"], texts, expected)  # a blank input gets the model's answer to ""
    r = httpx.post(f"{url}/v1/models/{NAME}/versions/10:predict", json={"inputs": ["", "How are you?"]},
                   timeout=TIMEOUT_S)
    outputs = r.json()["outputs"]
    assert_answers([dict(zip(outputs, row)) for row in zip(*outputs.values())], ["", "How are you?"], expected)
    assert httpx.get(f"{url}/v1/models/{NAME}/versions/9", timeout=TIMEOUT_S).status_code == 404  # the latest only


def check_bad_requests(url):
    for body, words in [
        ({"instances": [1]}, "instances[0] must be a string"),
        ({"instances": ["a"], "inputs": ["a"]}, 'both "instances" and "inputs"'),
        ({"instances": []}, "empty list"),
    ]:
        r = httpx.post(f"{url}/v1/models/{NAME}:predict", json=body, timeout=TIMEOUT_S)
        assert r.status_code == 400 and words in r.json()["error"]


def check_concurrent_requests(url, expected):
    def client(worker):
        with httpx.Client(base_url=url, timeout=TIMEOUT_S) as http:
            for i in range(3):
                texts = [SENTENCES[(worker + i) % 8], SENTENCES[(worker * 3 + i) % 8]][: 1 + i % 2]
                r = http.post(f"/v1/models/{NAME}:predict", json={"instances": texts})
                assert r.status_code == 200, r.text
                assert_answers(r.json()["predictions"], texts, expected)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(client, range(8), timeout=2 * TIMEOUT_S))


def check_sigterm_answers_what_it_read_then_exits_0(process, url, expected):
    """A request of 64 inputs is sent on one connection; a status GET on a
    second connection is answered only after the server has read the first
    (accepted before it, its bytes already there). SIGTERM then comes while
    that request is in flight or after it is answered, whichever the
    machine's speed makes it: either way it gets its whole answer, and the
    process exits 0. That a request in flight is drained, whatever the
    timing, is tests/serving/test_shutdown.py's, with a model held until
    the signal has come."""
    host, port = url.removeprefix("http://").split(":")
    texts = [LONG] * 64
    connection = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT_S)
    try:
        connection.request("POST", f"/v1/models/{NAME}:predict", json.dumps({"instances": texts}),
                           {"Content-Type": "application/json"})
        assert httpx.get(f"{url}/v1/models/{NAME}", timeout=TIMEOUT_S).status_code == 200
        process.send_signal(signal.SIGTERM)
        response = connection.getresponse()
        answer = json.loads(response.read())
    finally:
        connection.close()
    assert response.status == 200, answer
    assert_answers(answer["predictions"], texts, expected)
    assert process.wait(timeout=TIMEOUT_S) == 0


def test_serve_command_answers_then_exits_0_on_sigterm(model_dir, tmp_path):
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    stderr = open(tmp_path / "stderr.txt", "w")
    process = subprocess.Popen(
        serve_command() + ["serve", model_dir, "--name", NAME, "--port", "0", "--request-timeout", str(TIMEOUT_S),
                           "--intra-op-threads", "1", "--inter-op-threads", "2"],
        stdout=subprocess.PIPE, stderr=stderr, text=True, env=env,
    )
    try:
        lines = queue.Queue()  # read all along: a full pipe would block the server's logging
        threading.Thread(target=read_lines, args=(process.stdout, lines), daemon=True).start()
        expected = saved_model_answers(model_dir, SENTENCES + ["", " \t", LONG])  # while it starts
        url = served_url(process, lines, timeout=180)
        check_good_requests(url, expected)
        check_bad_requests(url)
        check_concurrent_requests(url, expected)
        check_sigterm_answers_what_it_read_then_exits_0(process, url, expected)
        stderr.flush()
        # As TF Serving does, the export's warm-up requests (two buckets, batch size 1) ran before serving.
        log = (tmp_path / "stderr.txt").read_text()
        assert "Replayed 2 warm-up requests in " in log
        assert "TensorFlow threads: intra-op 1, inter-op 2" in log  # as asked, read back from TensorFlow
    except BaseException:
        stderr.flush()
        print((tmp_path / "stderr.txt").read_text()[-3000:], file=sys.stderr)
        raise
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
        stderr.close()
        process.stdout.close()
