"""An HTTP server speaking TF Serving's REST predict API for one model.

    keras-transformer serve saved_models/tatoeba_en_fr --port 8501
    curl -d '{"instances": ["How are you?"]}' \
        localhost:8501/v1/models/tatoeba_en_fr:predict

Routes, as in TF Serving: `POST /v1/models/<name>[/versions/<v>]:predict`
with `{"instances": [...]}` (row format, answered with `{"predictions":
[...]}`) or `{"inputs": [...]}` (columnar, answered with `{"outputs":
{...}}`), and `GET /v1/models/<name>[/versions/<v>]` for the model status.
Errors are `{"error": "..."}` with a 4xx status for bad requests, so a
client written against this server works unchanged against TF Serving. An
empty or whitespace-only input is no error: it gets an empty translation with
score 0, as from the SavedModel itself, and the other inputs are translated.

An instance may be an object with optional fields besides `"inputs"`
(`keras_transformer.serving.predictor.Instance`; docs/decoding.md):

    {"instances": [{"inputs": "How are you?", "n_best": 2, "alignments": true}]}
    {"instances": [{"inputs": "How are you?", "sampling": {"seed": 1, "top_p": 0.9}}]}
    {"instances": [{"inputs": "How are you?", "targets": "Comment vas-tu ?"}]}
    {"instances": [{"inputs": "How are you?", "target_prefix": "Comment vas"}]}
    {"instances": [{"inputs": "Where is the station?", "constraints": ["gare"]}]}

`n_best`, `alignments` or `confidences` answer with the `details`
signature's outputs, `sampling` with the `sample` signature's, `targets`
with the `score` signature's, `target_prefix` and `constraints` with the
`steer` signature's; in the columnar form the options apply to
every input (`{"inputs": {"inputs": [...], "n_best": 2}}`). An unknown or
badly typed field is a 400 error that names it.
"""

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import socket
import sys
import threading
from typing import Optional

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from keras_transformer import loading
from keras_transformer.decoding.defaults import BATCH_SIZE
from keras_transformer.preprocessor import is_blank
from keras_transformer.serving.batcher import Batcher
from keras_transformer.serving.predictor import Instance, Sampling, check_instances, latest_version, load_saved_model_predictor
from keras_transformer.serving.warmup import replay_warmup_requests
from keras_transformer.validation import check_non_negative_number, check_positive, check_positive_number


@dataclasses.dataclass(frozen=True)
class ServingLimits:
    """What one request may ask for; larger requests get a 4xx error.

    A request runs in one model call, so `max_instances` is at most
    `max_batch_size`; by default it is the decoding batch size
    (`decoding.defaults.BATCH_SIZE`) or `max_batch_size` if smaller.
    """

    max_instances: Optional[int] = None  # inputs per request
    max_characters: int = 2000  # characters per input
    max_body_bytes: int = 1 << 20  # bytes per request body
    request_timeout_s: float = 30.0  # answered with 504 past this
    max_batch_size: int = BATCH_SIZE  # inputs per model call, across requests
    batch_timeout_s: float = 0.005  # how long a batch waits for company

    def __post_init__(self):
        check_positive("max_batch_size", self.max_batch_size)
        if self.max_instances is None:
            object.__setattr__(self, "max_instances", min(BATCH_SIZE, self.max_batch_size))
        for name in ("max_instances", "max_characters", "max_body_bytes"):
            check_positive(name, getattr(self, name))
        check_positive_number("request_timeout_s", self.request_timeout_s)
        check_non_negative_number("batch_timeout_s", self.batch_timeout_s)
        if self.max_instances > self.max_batch_size:  # a request is never split
            raise ValueError(
                f"Argument `max_instances` must be at most `max_batch_size`={self.max_batch_size} "
                f"(a request runs in one model call). Received: max_instances={self.max_instances}"
            )


class RequestError(ValueError):
    """A bad request: its message is sent back with a 4xx status."""

    def __init__(self, message, status=400):
        super().__init__(message)
        self.status = status


# What the exported SavedModel answers for a blank input (keras_transformer.preprocessor).
BLANK_OUTPUT = {"translations": "", "scores": 0.0}


def _error(message, status):
    return JSONResponse({"error": message}, status_code=status)


def parse_request(body, limits):
    """Validates a predict request body; returns (texts, columnar).

    Blank texts (empty or whitespace only) are valid and returned as they
    are; `create_app` answers them without the model.
    """
    if len(body) > limits.max_body_bytes:
        raise RequestError(
            f"request body has {len(body)} bytes; the limit is {limits.max_body_bytes}", 413
        )
    try:
        payload = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise RequestError(f"request body is not valid UTF-8: {error}") from None
    except json.JSONDecodeError as error:
        raise RequestError(f"malformed JSON in request body: {error}") from None
    except RecursionError:
        raise RequestError("malformed JSON in request body: nested too deeply") from None
    if not isinstance(payload, dict) or not ({"instances", "inputs"} & payload.keys()):
        raise RequestError('request must be a JSON object with "instances" or "inputs"')
    if {"instances", "inputs"} <= payload.keys():
        raise RequestError('request has both "instances" and "inputs"; send only one of them')
    columnar = "instances" not in payload
    key = "inputs" if columnar else "instances"
    rows = payload[key]
    if columnar and isinstance(rows, dict):  # {"inputs": {"inputs": [...], ...}}
        rows = rows.get("inputs")
    if not isinstance(rows, list):
        raise RequestError(f'"{key}" must be a list of strings; received {type(rows).__name__}')
    if not rows:
        raise RequestError(f'"{key}" is an empty list; send at least one string')
    if len(rows) > limits.max_instances:
        raise RequestError(
            f'"{key}" has {len(rows)} items; the limit is {limits.max_instances} per request'
        )
    if columnar and isinstance(payload[key], dict):
        rows = _columns_to_rows(payload[key])
    return [_item(row, f"{key}[{i}]", limits) for i, row in enumerate(rows)], columnar


def _item(row, where, limits):
    """A plain string, or the `Instance` of an object with optional fields."""
    options = {}
    if isinstance(row, dict):
        options = {name: value for name, value in row.items() if name != "inputs"}
        row = row.get("inputs")
    texts = {"inputs": row}
    for name in ("targets", "target_prefix"):
        if isinstance(options.get(name), str):  # a badly typed one: `_instance` names it
            texts[name] = options[name]
    if isinstance(options.get("constraints"), list):
        texts.update({f"constraints[{j}]": c for j, c in enumerate(options["constraints"]) if isinstance(c, str)})
    for name, text in texts.items():
        field = f"{where}.{name}" if options else where
        if not isinstance(text, str):
            raise RequestError(f"{field} must be a string; received {type(text).__name__}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:  # a lone surrogate, e.g. "\ud800"
            raise RequestError(f"{field} cannot be encoded as UTF-8 ({error.reason} at character {error.start})") from None
        if len(text) > limits.max_characters:
            raise RequestError(f"{field} has {len(text)} characters; the limit is {limits.max_characters}")
    return _instance(row, options, where) if options else row


# The optional fields of an instance (keras_transformer.serving.predictor.Instance).
INSTANCE_FIELDS = ("n_best", "alignments", "confidences", "sampling", "targets", "target_prefix", "constraints")
SAMPLING_FIELDS = ("seed", "temperature", "top_k", "top_p")


def _instance(text, options, where):
    """The `Instance` of an input with optional fields; a `RequestError`
    names an unknown or badly typed field."""
    for name, value in options.items():
        if name not in INSTANCE_FIELDS:
            raise RequestError(f"{where} has an unknown field {name!r}; the fields are inputs, "
                               f"{', '.join(INSTANCE_FIELDS)}")
    sampling = options.get("sampling")
    if sampling is not None:
        if not isinstance(sampling, dict):
            raise RequestError(f"{where}.sampling must be an object; received {type(sampling).__name__}")
        unknown = sorted(set(sampling) - set(SAMPLING_FIELDS))
        if unknown:
            raise RequestError(f"{where}.sampling has an unknown field {unknown[0]!r}; the fields are "
                               f"{', '.join(SAMPLING_FIELDS)}")
        for name, value in sampling.items():
            kind = (int,) if name in ("seed", "top_k") else (int, float)
            if isinstance(value, bool) or not isinstance(value, kind):
                raise RequestError(f"{where}.sampling.{name} must be a number{' (an integer)' if kind == (int,) else ''}; "
                                   f"received {type(value).__name__}")
        try:
            options = {**options, "sampling": Sampling(**sampling)}
        except ValueError as error:
            raise RequestError(f"{where}.sampling: {error}") from None
    try:
        return Instance(text, **options)
    except ValueError as error:  # it names the field
        raise RequestError(f"{where}: {error}") from None


def _columns_to_rows(columns):
    """TF Serving's columnar form, `{"inputs": [...], "targets": [...], <option>: value}`,
    as rows: lists per input, other options the same for every input."""
    texts = columns.get("inputs")
    if not isinstance(texts, list):
        raise RequestError(f'"inputs"."inputs" must be a list of strings; received {type(texts).__name__}')
    targets = columns.get("targets")
    if targets is not None and (not isinstance(targets, list) or len(targets) != len(texts)):
        raise RequestError('"inputs"."targets" must be a list as long as "inputs"."inputs"')
    shared = {name: value for name, value in columns.items() if name not in ("inputs", "targets")}
    return [{"inputs": text, **shared, **({} if targets is None else {"targets": targets[i]})}
            for i, text in enumerate(texts)]


def _blank(item):
    """A plain blank input, answered without the model."""
    return isinstance(item, str) and is_blank(item)


async def _predict_non_blank(batcher, items, blank_output):
    """The outputs for `items`: plain blank ones get a copy of `blank_output`,
    the others come from `batcher` (which is not called if all are blank)."""
    outputs = iter(await batcher.submit([item for item in items if not _blank(item)]))
    return [dict(blank_output) if _blank(item) else next(outputs) for item in items]


class _Servable:
    """One model's answers to TF Serving's REST routes."""

    def __init__(self, batcher, model_name, version, limits, blank_output):
        self.batcher, self.model_name, self.version = batcher, model_name, version
        self.limits, self.blank_output = limits, blank_output

    def check_instances(self, instances):
        """A `RequestError` for instances the model cannot answer."""
        if not instances:
            return
        try:
            predict = self.batcher.predict
            check_instances(instances, getattr(predict, "signatures", ()), getattr(predict, "n_best", 1),
                            getattr(predict, "score_lengths", None))
        except ValueError as error:
            raise RequestError(str(error)) from None

    def check(self, name, requested_version=None):
        if name != self.model_name:
            raise RequestError(f"Servable not found for request: model {name!r} (serving {self.model_name!r})", 404)
        if requested_version is not None and str(requested_version) != str(self.version):
            raise RequestError(f"Servable not found for request: {name} version {requested_version}", 404)

    async def status(self, name, requested_version=None):
        try:
            self.check(name, requested_version)
        except RequestError as error:
            return _error(str(error), error.status)
        return {
            "model_version_status": [
                {"version": str(self.version), "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
            ]
        }

    async def predict(self, request, name, requested_version=None):
        limits = self.limits
        try:
            self.check(name, requested_version)
            declared = int(request.headers.get("content-length") or 0)
            if declared > limits.max_body_bytes:
                raise RequestError(f"request body has {declared} bytes; the limit is {limits.max_body_bytes}", 413)
            texts, columnar = parse_request(await request.body(), limits)
            self.check_instances([item for item in texts if isinstance(item, Instance)])
        except RequestError as error:
            return _error(str(error), error.status)
        try:
            outputs = await asyncio.wait_for(
                _predict_non_blank(self.batcher, texts, self.blank_output), limits.request_timeout_s
            )
        except asyncio.TimeoutError:
            return _error(f"request timed out after {limits.request_timeout_s} s", 504)
        except Exception as error:  # noqa: BLE001 - reported to the client
            return _error(f"model failed: {error}", 500)
        if columnar:
            return {"outputs": {key: [row[key] for row in outputs] for key in outputs[0]}}
        return {"predictions": outputs}


def create_app(predict, model_name, version=1, limits=ServingLimits(), blank_output=None):
    """A FastAPI app serving `predict` under `/v1/models/<model_name>`.

    Args:
        predict: `predict(list_of_str) -> list_of_dict`, one dict of outputs
            (e.g. `{"translations": ..., "scores": ...}`) per input.
        model_name: str. The `<name>` in the URLs.
        version: int. The version reported and accepted in URLs.
        limits: `ServingLimits`.
        blank_output: dict, the outputs for an empty or whitespace-only
            input, which never reaches `predict`; default `BLANK_OUTPUT`
            (an empty translation, score 0, as from the SavedModel).

    Example:

        app = create_app(lambda texts: [{"translations": t} for t in texts], "echo")
        uvicorn.run(app, port=8501)
    """
    batcher = Batcher(predict, limits.max_batch_size, limits.batch_timeout_s)
    servable = _Servable(batcher, model_name, version, limits, dict(BLANK_OUTPUT if blank_output is None else blank_output))

    @contextlib.asynccontextmanager
    async def lifespan(app):
        await batcher.start()
        yield
        await batcher.stop()

    app = FastAPI(title=f"keras-transformer: {model_name}", lifespan=lifespan)
    app.state.batcher = batcher

    @app.get("/v1/models/{name}")
    async def model_status(name: str):
        return await servable.status(name)

    @app.get("/v1/models/{name}/versions/{requested_version}")
    async def version_status(name: str, requested_version: str):
        return await servable.status(name, requested_version)

    @app.post("/v1/models/{name}:predict")
    async def model_predict(name: str, request: Request):
        return await servable.predict(request, name)

    @app.post("/v1/models/{name}/versions/{requested_version}:predict")
    async def version_predict(name: str, requested_version: str, request: Request):
        return await servable.predict(request, name, requested_version)

    return app


def model_name(model_dir):
    """The name in the URLs: `<name>` of `saved_models/<name>[/<version>]`."""
    folder = os.path.abspath(model_dir)
    if os.path.basename(folder).isdigit() and os.path.exists(os.path.join(folder, "saved_model.pb")):
        folder = os.path.dirname(folder)
    return os.path.basename(folder)


def check_port(port):
    """Raises `ValueError` unless `port` is an integer in [0, 65535]."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"Argument `port` must be an integer in [0, 65535]. Received: port={port!r}")


def bind_socket(host="127.0.0.1", port=0):
    """A TCP socket listening on `host:port`; port 0 takes a free port.

    Bound here rather than by uvicorn, the socket tells its port
    (`sock.getsockname()[1]`) before serving starts, and no other process
    can take the port in between. Connections made before the server runs
    wait in the socket's backlog. Hand it to `run_until_signalled`.
    """
    check_port(port)
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as error:
        raise OSError(f"Cannot listen on host {host!r}: {error}") from error
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as error:
        sock.close()
        raise OSError(f"Cannot listen on {host}:{port}: {error.strerror or error}") from error
    return sock


def socket_url(sock):
    """`http://<host>:<port>` of a bound socket (IPv6 hosts in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def run_until_signalled(server, sock):
    """Runs the `uvicorn.Server` on `sock` until SIGINT or SIGTERM, then returns.

    On either signal uvicorn stops accepting connections and answers the
    requests in flight (a second SIGINT cancels them). It then raises the
    signal again for the handler that was there before its own (uvicorn >=
    0.29), where Python's defaults would kill the process (status -15) or
    raise `KeyboardInterrupt`. Here that handler is one that only asks the
    server to exit, so the process can end with status 0; the previous
    handlers are back on return. Off the main thread, which alone can
    handle signals, signals are left alone, as uvicorn does: set
    `server.should_exit` to stop the server.
    """

    def stop(signum, frame):
        server.should_exit = True

    signals = (signal.SIGINT, signal.SIGTERM)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = {signum: signal.signal(signum, stop) for signum in signals} if main_thread else {}
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def serve(model_dir, host="127.0.0.1", port=8501, name=None, limits=ServingLimits()):
    """Loads `model_dir` and serves it until SIGINT or SIGTERM.

    `port` 0 takes a free port. Once the port is bound, prints
    `Serving <name> at http://<host>:<port>` as a line of its own on
    standard output (flushed), so that a parent process can read the port.
    On SIGINT or SIGTERM, the requests in flight are answered, then it
    returns (`keras-transformer serve` exits with status 0). Blank inputs get
    the model's own answer to `""`, computed once here. The SavedModel's
    warm-up requests (`assets.extra/tf_serving_warmup_requests`) run first,
    as in TF Serving. It prints the sizes of TensorFlow's thread pools,
    which the caller sets for its process (`keras-transformer serve
    --intra-op-threads`).
    """
    import uvicorn

    check_port(port)
    kind = loading.model_kind(model_dir)
    if kind != loading.SAVED_MODEL:
        raise ValueError(f"The server serves a SavedModel folder; {model_dir!r} is a {kind}: export it first "
                         f"(`keras-transformer export`). Received: model_dir={model_dir!r}")
    predict, version = load_saved_model_predictor(model_dir)
    import tensorflow as tf

    print(f"TensorFlow threads: intra-op {tf.config.threading.get_intra_op_parallelism_threads()}, "
          f"inter-op {tf.config.threading.get_inter_op_parallelism_threads()} (0: one per core)",
          file=sys.stderr, flush=True)
    # As TF Serving does: the SavedModel's warm-up requests, before the port opens.
    requests, seconds = replay_warmup_requests(predict, latest_version(model_dir)[1])
    if requests:
        print(f"Replayed {requests} warm-up requests in {seconds:.1f} s", file=sys.stderr, flush=True)
    name = name or model_name(model_dir)
    app = create_app(predict, name, version, limits, blank_output=predict([""])[0])
    sock = bind_socket(host, port)
    print(f"Serving {name} at {socket_url(sock)}", flush=True)
    run_until_signalled(uvicorn.Server(uvicorn.Config(app)), sock)
