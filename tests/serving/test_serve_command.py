"""`keras-transformer serve` as a real process on a tiny exported SavedModel:
`--port 0`, the port read from its standard output, answers checked against
the same SavedModel loaded here, and SIGTERM while a request is in flight."""

import concurrent.futures
import http.client
import json
import os
import queue
import re
import select
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

from tests.conftest import SENTENCES

LONG = "Where is the station? How are you? I am fine, thank you."


@pytest.fixture(scope="module")
def model_dir(tiny_saved_model):
    return tiny_saved_model


def saved_model_answers(model_dir, texts):
    """`{text: (translation, score)}` from the SavedModel loaded in this process."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 - registers the tokenizer ops

    signature = tf.saved_model.load(os.path.join(model_dir, "1")).signatures["serving_default"]
    out = signature(inputs=tf.constant(texts))
    pairs = zip(out["translations"].numpy(), out["scores"].numpy())
    return {text: (t.decode("utf-8"), float(s)) for text, (t, s) in zip(texts, pairs)}


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
        match = re.fullmatch(r"Serving tiny at (http://127\.0\.0\.1:\d+)\n", line)
        if match:
            return match.group(1)


def assert_answers(predictions, texts, expected):
    assert [p["translations"] for p in predictions] == [expected[t][0] for t in texts]
    assert [p["scores"] for p in predictions] == pytest.approx([expected[t][1] for t in texts], rel=1e-4, abs=1e-5)


def check_good_requests(url, expected):
    texts = ["Hello there.", "", "The cat sleeps.", " \t", "It costs 12 euros."]
    r = httpx.post(f"{url}/v1/models/tiny:predict", json={"instances": texts}, timeout=60)
    assert r.status_code == 200, r.text
    assert_answers(r.json()["predictions"], texts, expected)
    assert r.json()["predictions"][1] == {"translations": "", "scores": 0.0}
    r = httpx.post(f"{url}/v1/models/tiny/versions/1:predict", json={"inputs": ["", "How are you?"]}, timeout=60)
    outputs = r.json()["outputs"]
    assert_answers([{"translations": t, "scores": s} for t, s in zip(outputs["translations"], outputs["scores"])],
                   ["", "How are you?"], expected)


def check_bad_requests(url):
    for body, words in [
        ({"instances": [1]}, "instances[0] must be a string"),
        ({"instances": ["a"], "inputs": ["a"]}, 'both "instances" and "inputs"'),
        ({"instances": []}, "empty list"),
    ]:
        r = httpx.post(f"{url}/v1/models/tiny:predict", json=body, timeout=60)
        assert r.status_code == 400 and words in r.json()["error"]


def check_concurrent_requests(url, expected):
    def client(worker):
        with httpx.Client(base_url=url, timeout=60) as http:
            for i in range(3):
                texts = [SENTENCES[(worker + i) % 8], SENTENCES[(worker * 3 + i) % 8]][: 1 + i % 2]
                r = http.post("/v1/models/tiny:predict", json={"instances": texts})
                assert r.status_code == 200, r.text
                assert_answers(r.json()["predictions"], texts, expected)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(client, range(8), timeout=120))


def check_sigterm_answers_the_request_in_flight(process, url, expected):
    """A request of 64 long inputs is sent on one connection; a status GET on
    a second connection is answered only after the server has read it (it
    was accepted first, its bytes already there), so it is in flight when
    SIGTERM comes, unless the machine has answered it already: then a longer
    one is sent, until one is in flight."""
    host, port = url.removeprefix("http://").split(":")
    for repeats in (1, 4, 16, 32):  # LONG's copies per input: 32 stay within --max-characters
        texts = [" ".join([LONG] * repeats)] * 64
        connection = http.client.HTTPConnection(host, int(port), timeout=120)
        try:
            connection.request("POST", "/v1/models/tiny:predict", json.dumps({"instances": texts}),
                               {"Content-Type": "application/json"})
            assert httpx.get(f"{url}/v1/models/tiny", timeout=60).status_code == 200
            in_flight = not select.select([connection.sock], [], [], 0)[0]
            if in_flight:
                process.send_signal(signal.SIGTERM)
            response = connection.getresponse()
            answer = json.loads(response.read())
        finally:
            connection.close()
        assert response.status == 200, answer
        translations = [p["translations"] for p in answer["predictions"]]
        assert len(translations) == 64 and len(set(translations)) == 1  # whole answers
        if repeats == 1:
            assert_answers(answer["predictions"], texts, expected)
        if in_flight:
            break
    assert in_flight, "every request was answered before SIGTERM"
    assert process.wait(timeout=60) == 0


def test_serve_command_answers_then_drains_on_sigterm(model_dir, tmp_path):
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    stderr = open(tmp_path / "stderr.txt", "w")
    process = subprocess.Popen(
        serve_command() + ["serve", model_dir, "--port", "0", "--intra-op-threads", "1", "--inter-op-threads", "2"],
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
        check_sigterm_answers_the_request_in_flight(process, url, expected)
        stderr.flush()
        # As TF Serving does, the export's warm-up request (one bucket, batch size 1) ran before serving.
        log = (tmp_path / "stderr.txt").read_text()
        assert "Replayed 1 warm-up requests in " in log
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
