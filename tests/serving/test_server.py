"""The HTTP server against a real client on localhost, with a stand-in model.

The stand-in reverses each string, so every answer can be checked exactly.
The exported SavedModel behind the same server is tested in test_export.py
and, as the `keras-transformer serve` process, in test_serve_command.py.
"""

import concurrent.futures
import json
import socket
import threading

import httpx
import pytest

from keras_transformer.serving import ServingLimits, create_app, serve
from keras_transformer.serving.server import model_name


def reverse_model():
    def predict(texts):
        return [{"translations": t[::-1], "scores": -float(len(t))} for t in texts]

    return predict


@pytest.fixture
def server(run_server):
    return run_server(create_app(reverse_model(), "echo", version=3, limits=ServingLimits(max_instances=4, max_characters=100)))


def test_row_and_columnar_requests(server):
    r = httpx.post(f"{server.url}/v1/models/echo:predict", json={"instances": ["abc", {"inputs": "xy"}]})
    assert r.status_code == 200
    assert r.json() == {"predictions": [{"translations": "cba", "scores": -3.0}, {"translations": "yx", "scores": -2.0}]}
    r = httpx.post(f"{server.url}/v1/models/echo/versions/3:predict", json={"inputs": ["abc"]})
    assert r.json() == {"outputs": {"translations": ["cba"], "scores": [-3.0]}}


def test_status(server):
    r = httpx.get(f"{server.url}/v1/models/echo")
    assert r.json()["model_version_status"][0] == {
        "version": "3", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}
    }
    assert httpx.get(f"{server.url}/v1/models/echo/versions/3").json() == r.json()
    assert httpx.get(f"{server.url}/v1/models/other").status_code == 404
    assert httpx.get(f"{server.url}/v1/models/echo/versions/9").status_code == 404
    for url in ("other:predict", "echo/versions/9:predict"):
        r = httpx.post(f"{server.url}/v1/models/{url}", json={"instances": ["abc"]})
        assert r.status_code == 404 and "Servable not found" in r.json()["error"]


@pytest.mark.parametrize(
    "body, status, words",
    [
        (b'{"instances": ["a"', 400, "malformed JSON"),
        (b"\xff\xfe{}", 400, "UTF-8"),
        (b'["a"]', 400, '"instances" or "inputs"'),
        (b'{"instances": "abc"}', 400, "list of strings"),
        (b'{"instances": [1, 2]}', 400, "instances[0] must be a string"),
        (b'{"instances": []}', 400, "empty list"),
        (b'{"instances": ["ok"], "inputs": ["ok"]}', 400, 'both "instances" and "inputs"'),
        (b'{"instances": ["ok", " ", 3]}', 400, "instances[2] must be a string"),
        (b'{"instances": ["ok", "\\ud800 hello"]}', 400, "instances[1] cannot be encoded as UTF-8"),
        (b"[" * 5000 + b"]" * 5000, 400, "nested too deeply"),
        (b'{"instances": ["a", "b", "c", "d", "e"]}', 400, "limit is 4"),
        (json.dumps({"instances": ["x" * 101]}).encode(), 400, "101 characters"),
        (json.dumps({"inputs": [" " * 101]}).encode(), 400, "inputs[0] has 101 characters"),
        (json.dumps({"instances": ["x" * (1 << 20)]}).encode(), 413, "bytes"),
        (json.dumps({"instances": [{"inputs": "x", "n_best": 2}]}).encode(), 400,
         "no `details` signature: export it with `--signatures details`"),
        (json.dumps({"instances": [{"inputs": "x", "targets": "y" * 101}]}).encode(), 400,
         "instances[0].targets has 101 characters"),
        (json.dumps({"instances": [{"inputs": "x", "target_prefix": "y" * 101}]}).encode(), 400,
         "instances[0].target_prefix has 101 characters"),
        (json.dumps({"instances": [{"inputs": "x", "target_prefix": 3}]}).encode(), 400,
         "`target_prefix` must be str or None. Received: target_prefix=3"),
        (json.dumps({"instances": [{"inputs": "x", "target_prefix": "y"}]}).encode(), 400,
         "no `steer` signature: export it with `--signatures steer`"),
        (json.dumps({"instances": [{"inputs": "x", "target_prefix": "y", "sampling": {"seed": 1}}]}).encode(), 400,
         "does not take them with `sampling` or `targets`"),
        (json.dumps({"instances": [{"inputs": "x", "constraints": "y"}]}).encode(), 400,
         "Argument `constraints` must be a list of phrases, none of them blank. Received: constraints='y'"),
        (json.dumps({"instances": [{"inputs": "x", "constraints": ["y", " "]}]}).encode(), 400,
         "`constraints` must be a list of phrases, none of them blank"),
        (json.dumps({"instances": [{"inputs": "x", "constraints": ["y" * 101]}]}).encode(), 400,
         "instances[0].constraints[0] has 101 characters"),
        (b'{"instances": [{}]}', 400, 'instances[0] has no "inputs": an instance object holds its text in "inputs"'),
        (b'{"instances": ["a"], "signature": "details"}', 400,
         "request has an unknown key 'signature'; the keys are signature_name, instances, inputs"),
        (b'{"signature_name": "details", "instances": ["a"]}', 400,
         'Serving signature name: "details" not found in signature def'),
        (b'{"signature_name": 3, "instances": ["a"]}', 400, '"signature_name" must be a string'),
    ],
)
def test_bad_requests_get_a_4xx_naming_the_problem_and_the_server_goes_on(server, body, status, words):
    r = httpx.post(f"{server.url}/v1/models/echo:predict", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status
    assert words in r.json()["error"]
    ok = httpx.post(f"{server.url}/v1/models/echo:predict", json={"instances": ["still here"]})
    assert ok.json()["predictions"][0]["translations"] == "ereh llits"


@pytest.mark.parametrize("method, path, status, allow", [
    ("GET", "/v1/models/echo:predict", 405, "POST"),
    ("PUT", "/v1/models/echo/versions/3:predict", 405, "POST"),
    ("POST", "/v1/models/echo", 405, "GET"),
    ("DELETE", "/v1/models/echo/versions/3/metadata", 405, "GET"),
    ("GET", "/v1/models/echo/versions/9/metadata", 404, None),
    ("GET", "/v1/models/other/metadata", 404, None),
    ("GET", "/v1/models/echo/labels/stable", 404, None),
    ("GET", "/v1/nothing/here", 404, None),
    ("GET", "/elsewhere", 404, None),
    ("GET", "/docs", 404, None),
    ("GET", "/v1/models", 400, None),
    ("POST", "/v1/models/echo:classify", 400, None),
])
def test_every_error_is_a_json_error_with_tf_servings_status(server, method, path, status, allow):
    # TF Serving's form, {"error": "..."}, whatever the route; a known path
    # with another method is a 405 that says which it takes.
    r = httpx.request(method, server.url + path, json={"instances": ["abc"]} if method != "GET" else None)
    assert r.status_code == status
    assert list(r.json()) == ["error"] and r.json()["error"]
    assert r.headers.get("allow") == allow


def test_the_metadata_names_the_model_and_its_version(server):
    for path in ("/v1/models/echo/metadata", "/v1/models/echo/versions/3/metadata"):
        r = httpx.get(server.url + path)
        assert r.status_code == 200
        assert r.json() == {"model_spec": {"name": "echo", "signature_name": "", "version": "3"},
                            "metadata": {"signature_def": {"signature_def": {}}}}  # a function: no SavedModel's


def test_a_chunked_body_is_counted_as_it_is_read_and_refused_past_the_limit():
    # Sent without a Content-Length, a thousand times the limit in chunks:
    # the server stops reading at the chunk that passes its limit and answers 413.
    from tests.serving.conftest import call_app

    app = create_app(reverse_model(), "echo", limits=ServingLimits(max_body_bytes=100_000))
    sent = []

    async def body():
        for _ in range(1600):
            sent.append(65536)
            yield b" " * 65536

    [r] = call_app(app, [("POST", "/v1/models/echo:predict", {"content": body()})])
    assert r.status_code == 413
    assert r.json() == {"error": "request body has more than 100000 bytes; the limit is 100000"}
    assert sum(sent) == 2 * 65536  # the second chunk passed the limit: nothing read after it
    [r] = call_app(app, [("POST", "/v1/models/echo:predict", {"content": b"{}", "headers": {"content-length": "x"}})])
    assert r.status_code == 400 and "Content-Length" in r.json()["error"]


def test_blank_inputs_get_an_empty_translation_without_the_model(run_server):
    seen = []

    def predict(texts):
        seen.append(list(texts))
        return [{"translations": t[::-1], "scores": -float(len(t))} for t in texts]

    server = run_server(create_app(predict, "echo"))
    url = f"{server.url}/v1/models/echo:predict"
    blank = {"translations": "", "scores": 0.0}
    r = httpx.post(url, json={"instances": ["ab", "", " \t\n", {"inputs": "\u3000"}, "cd"]})
    assert r.status_code == 200
    ab, cd = {"translations": "ba", "scores": -2.0}, {"translations": "dc", "scores": -2.0}
    assert r.json() == {"predictions": [ab, blank, blank, blank, cd]}
    r = httpx.post(url, json={"inputs": ["", "xyz"]})
    assert r.json() == {"outputs": {"translations": ["", "zyx"], "scores": [0.0, -3.0]}}
    assert seen == [["ab", "cd"], ["xyz"]]  # the model saw only the non-blank inputs
    r = httpx.post(url, json={"inputs": {"inputs": [" ", ""]}})
    assert r.json() == {"outputs": {"translations": ["", ""], "scores": [0.0, 0.0]}}
    assert httpx.post(url, json={"instances": ["\r\n"]}).json() == {"predictions": [blank]}
    assert len(seen) == 2  # all blank: no model call


def test_blank_output_is_configurable(run_server):
    nbest = {"translations": "", "scores": 0.0, "nbest_translations": ["", ""], "nbest_scores": [0.0, 0.0]}
    server = run_server(create_app(lambda texts: 1 / 0, "nbest", blank_output=nbest))
    r = httpx.post(f"{server.url}/v1/models/nbest:predict", json={"inputs": [""]})
    assert r.json() == {"outputs": {key: [value] for key, value in nbest.items()}}


def test_concurrent_clients_all_answered_correctly_and_batched(run_server):
    calls, first_requests_queued = [], threading.Event()

    def held_model(texts):  # the first call holds the model until every client's first request waits
        calls.append(len(texts))
        first_requests_queued.wait(60)
        return [{"translations": t[::-1], "scores": -float(len(t))} for t in texts]

    app = create_app(held_model, "echo", limits=ServingLimits(max_instances=16, max_batch_size=16))
    batcher, submitted = app.state.batcher, []
    submit = batcher.submit

    async def counted_submit(inputs):
        # On the event loop: the eighth request is queued in the same step
        # as the event is set, before the batcher can take the next batch.
        submitted.append(inputs)
        if len(submitted) == 8:
            first_requests_queued.set()
        return await submit(inputs)

    batcher.submit = counted_submit
    server = run_server(app)
    errors = []

    def client(worker):
        with httpx.Client(base_url=server.url, timeout=60) as http:
            for i in range(25):
                text = f"client {worker} request {i}"
                r = http.post("/v1/models/echo:predict", json={"instances": [text]})
                if r.status_code != 200 or r.json()["predictions"][0]["translations"] != text[::-1]:
                    errors.append((worker, i, r.status_code, r.text))

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(client, range(8)))
    assert errors == []
    assert sum(calls) == len(submitted) == 8 * 25  # none lost, none answered twice
    assert calls[0] + calls[1] >= 8  # the first eight requests took two model calls: batched
    assert max(calls) <= 16


def test_request_timeout_is_a_504(run_server):
    # The model answers only once the client has its 504: the timeout, not
    # the machine's speed, decides.
    answered = threading.Event()

    def predict(texts):
        answered.wait(30)
        return [{"translations": t} for t in texts]

    server = run_server(create_app(predict, "slow", limits=ServingLimits(request_timeout_s=0.2)))
    try:
        r = httpx.post(f"{server.url}/v1/models/slow:predict", json={"instances": ["a"]}, timeout=10)
    finally:
        answered.set()
    assert r.status_code == 504 and "timed out" in r.json()["error"]


def test_model_failure_is_reported_and_server_recovers(run_server):
    fail = threading.Event()
    fail.set()

    def predict(texts):
        if fail.is_set():
            fail.clear()
            raise RuntimeError("boom")
        return [{"translations": t} for t in texts]

    server = run_server(create_app(predict, "flaky"))
    r = httpx.post(f"{server.url}/v1/models/flaky:predict", json={"instances": ["a"]})
    assert r.status_code == 500 and "boom" in r.json()["error"]
    assert httpx.post(f"{server.url}/v1/models/flaky:predict", json={"instances": ["a"]}).status_code == 200


@pytest.mark.parametrize(
    "field, value",
    [
        ("max_instances", 0), ("max_characters", 0), ("max_body_bytes", -1), ("max_batch_size", 1.5),
        ("request_timeout_s", -1), ("request_timeout_s", 0), ("batch_timeout_s", -0.1), ("max_instances", 65),
    ],
)
def test_limits_are_checked_by_name(field, value):
    with pytest.raises(ValueError, match=f"`{field}`.*Received: {field}={value}"):
        ServingLimits(**{field: value})


def test_max_instances_defaults_to_at_most_the_batch_size():
    assert ServingLimits().max_instances == 64
    assert ServingLimits(max_batch_size=8).max_instances == 8
    assert ServingLimits(max_batch_size=128).max_instances == 64


def test_serve_checks_the_port_before_loading():
    for port in (70000, -1):
        with pytest.raises(ValueError, match=f"`port`.*Received: port={port}"):
            serve("no/such/model", port=port)


def test_bind_socket_takes_a_free_port_and_names_a_port_it_cannot_bind():
    from keras_transformer.serving import bind_socket
    from keras_transformer.serving.server import socket_url

    with bind_socket("127.0.0.1", 0) as sock:
        port = sock.getsockname()[1]
        assert socket_url(sock) == f"http://127.0.0.1:{port}"
        with socket.create_connection(("127.0.0.1", port), timeout=5):  # listening: waits in the backlog
            pass
        with pytest.raises(OSError, match=f"Cannot listen on 127.0.0.1:{port}: "):
            bind_socket("127.0.0.1", port)
    with pytest.raises(ValueError, match="Received: port=70000"):
        bind_socket("127.0.0.1", 70000)


def test_the_latest_version_is_the_highest_number_and_an_export_goes_after_it(tmp_path):
    from keras_transformer.translation.saved_model_files import latest_version, next_version

    model = tmp_path / "model"
    assert next_version(str(model)) == 1  # no folder yet
    model.mkdir()
    assert next_version(str(model)) == 1
    with pytest.raises(FileNotFoundError, match="holds no numbered version folder"):
        latest_version(str(model))
    for name in ("9", "10", "2", "latest", "11a"):
        (model / name).mkdir()
    assert latest_version(str(model)) == ("10", str(model / "10"))  # 10 after 9, as numbers
    assert next_version(str(model)) == 11
    (model / "10" / "saved_model.pb").write_bytes(b"")
    assert latest_version(str(model / "10")) == ("10", str(model / "10"))  # a version folder itself


def test_a_version_folder_is_served_under_its_model_name(tmp_path):
    version = tmp_path / "tatoeba_en_fr" / "1"
    version.mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"")
    assert model_name(str(version)) == "tatoeba_en_fr"
    assert model_name(str(version.parent) + "/") == "tatoeba_en_fr"
