"""An HTTP server speaking TF Serving's REST API for one model.

    keras-transformer serve saved_models/tatoeba_en_fr --port 8501
    curl -d '{"instances": ["How are you?"]}' \
        localhost:8501/v1/models/tatoeba_en_fr:predict

The routes are TF Serving's (https://www.tensorflow.org/tfx/serving/api_rest):
`POST /v1/models/<name>[/versions/<v>]:predict` with `{"instances": [...]}`
(row format, answered with `{"predictions": [...]}`) or `{"inputs": ...}`
(columnar, answered with `{"outputs": ...}`), and an optional
`"signature_name"`; `GET /v1/models/<name>[/versions/<v>]` for the model's
status and `GET /v1/models/<name>[/versions/<v>]/metadata` for its
signatures. Every error is `{"error": "..."}`: 400 for a bad request, 404
for a model, version or path that does not exist, 405 for a known path with
the wrong method, 413 for a body over the limit, 504 past the request's
timeout. The differences from TF Serving are deliberate; docs/serving.md
lists them.

With `"signature_name"`, the request is TF Serving's: the named signature's
inputs, by name, and its outputs as they are. Without it, an instance is a
string, translated by `serving_default`, or an object with optional fields
besides `"inputs"` (`keras_transformer.serving.predictor.Instance`;
docs/decoding.md) that choose the signature, and the answer is the
`Translator`'s:

    {"instances": [{"inputs": "How are you?", "n_best": 2, "alignments": true}]}
    {"instances": [{"inputs": "How are you?", "sampling": {"seed": 1, "top_p": 0.9}}]}
    {"instances": [{"inputs": "How are you?", "targets": "Comment vas-tu ?"}]}
    {"instances": [{"inputs": "How are you?", "target_prefix": "Comment vas"}]}
    {"instances": [{"inputs": "Where is the station?", "constraints": ["gare"]}]}
    {"instances": [{"inputs": "I love <b>you</b>.", "format": "html"}]}

In the columnar form the options apply to every input (`{"inputs":
{"inputs": [...], "n_best": 2}}`). An unknown or badly typed field is a 400
error that names it. An empty or whitespace-only input is no error: it gets
an empty translation with score 0, as from the SavedModel itself, and the
other inputs are translated.
"""

import asyncio
import contextlib
import dataclasses
import json
import os
import re
import signal
import socket
import sys
import threading
from typing import Optional

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from keras_transformer.decoding.defaults import BATCH_SIZE
from keras_transformer.export.warmup import replay_warmup_requests
from keras_transformer.serving.batcher import Batcher
from keras_transformer.serving.predictor import (
    Instance,
    InvalidRequest,
    Sampling,
    SignatureRow,
    load_saved_model_predictor,
    require_signature,
)
from keras_transformer.translation import loading
from keras_transformer.translation.preprocessor import is_blank
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
    max_body_bytes: int = 1 << 20  # bytes per request body, counted as they are read
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


# What the exported SavedModel answers for a blank input (keras_transformer.translation.preprocessor).
BLANK_OUTPUT = {"translations": "", "scores": 0.0}
# A predict function's signatures when it does not say: one string input.
PLAIN_SIGNATURES = {"serving_default": {"inputs": ("string", 1)}}
# The keys of a predict request body (TF Serving's).
REQUEST_KEYS = ("signature_name", "instances", "inputs")


def _error(message, status, headers=None):
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def read_body(request, limit):
    """The request's body, read a chunk at a time and counted as it comes:
    a `RequestError` (413) as soon as it passes `limit` bytes, whether its
    length was declared (`Content-Length`) or not (chunked)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise RequestError(f"the Content-Length header is not a number of bytes; received {declared[:40]!r}")
        if int(declared) > limit:
            raise RequestError(f"request body has {int(declared)} bytes; the limit is {limit}", 413)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise RequestError(f"request body has more than {limit} bytes; the limit is {limit}", 413)
    return bytes(body)


def parse_request(body, limits, signature_inputs=None):
    """Validates a predict request body; returns `(items, columnar)`.

    `items` are strings and `Instance`s, or, when the body names its
    `signature_name`, `SignatureRow`s of that signature's inputs
    (`signature_inputs`: `{signature: {input: (dtype, rank)}}`). Blank
    texts (empty or whitespace only) are valid and returned as they are;
    `create_app` answers plain ones without the model.
    """
    if len(body) > limits.max_body_bytes:
        raise RequestError(f"request body has {len(body)} bytes; the limit is {limits.max_body_bytes}", 413)
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
    unknown = sorted(set(payload) - set(REQUEST_KEYS))
    if unknown:
        raise RequestError(f"request has an unknown key {unknown[0]!r}; the keys are {', '.join(REQUEST_KEYS)}")
    if {"instances", "inputs"} <= payload.keys():
        raise RequestError('request has both "instances" and "inputs"; send only one of them')
    columnar = "instances" not in payload
    key = "inputs" if columnar else "instances"
    if "signature_name" in payload:
        signature = payload["signature_name"]
        if not isinstance(signature, str):
            raise RequestError(f'"signature_name" must be a string; received {type(signature).__name__}')
        specs = (signature_inputs or PLAIN_SIGNATURES).get(signature)
        if specs is None:
            raise RequestError(f'Serving signature name: "{signature}" not found in signature def; the signatures '
                               f"are {', '.join(sorted(signature_inputs or PLAIN_SIGNATURES))}")
        rows = _signature_rows(payload[key], columnar, specs)
        _check_count(rows, key, limits)
        return [_signature_row(signature, row, specs, f"{key}[{i}]", limits) for i, row in enumerate(rows)], columnar
    rows = payload[key]
    if columnar and isinstance(rows, dict):  # {"inputs": {"inputs": [...], ...}}
        rows = rows.get("inputs")
    if not isinstance(rows, list):
        raise RequestError(f'"{key}" must be a list of strings; received {type(rows).__name__}')
    _check_count(rows, key, limits)
    if columnar and isinstance(payload[key], dict):
        rows = _columns_to_rows(payload[key])
    return [_item(row, f"{key}[{i}]", limits) for i, row in enumerate(rows)], columnar


def _check_count(rows, key, limits):
    if not rows:
        raise RequestError(f'"{key}" is an empty list; send at least one string')
    if len(rows) > limits.max_instances:
        raise RequestError(f'"{key}" has {len(rows)} items; the limit is {limits.max_instances} per request')


def _check_text(text, field, limits):
    """A `RequestError` unless `text` is a string of at most `max_characters` that UTF-8 encodes."""
    if not isinstance(text, str):
        raise RequestError(f"{field} must be a string; received {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:  # a lone surrogate, e.g. "\ud800"
        raise RequestError(f"{field} cannot be encoded as UTF-8 ({error.reason} at character {error.start})") from None
    if len(text) > limits.max_characters:
        raise RequestError(f"{field} has {len(text)} characters; the limit is {limits.max_characters}")


def _item(row, where, limits):
    """A plain string, or the `Instance` of an object with optional fields
    (a plain string's, if it asks for nothing more)."""
    options = {}
    if isinstance(row, dict):
        if "inputs" not in row:
            raise RequestError(f'{where} has no "inputs": an instance object holds its text in "inputs", beside '
                               f"its optional fields ({', '.join(INSTANCE_FIELDS)})")
        options = {name: value for name, value in row.items() if name != "inputs"}
        row = row["inputs"]
    texts = {"inputs": row}
    for name in ("targets", "target_prefix"):
        if isinstance(options.get(name), str):  # a badly typed one: `_instance` names it
            texts[name] = options[name]
    if isinstance(options.get("constraints"), list):
        texts.update({f"constraints[{j}]": c for j, c in enumerate(options["constraints"]) if isinstance(c, str)})
    for name, text in texts.items():
        _check_text(text, f"{where}.{name}" if options else where, limits)
    if not options:
        return row
    instance = _instance(row, options, where)
    # An instance that names a stop rule stays one: the predictor checks it
    # against the export's.
    return instance.inputs if instance.plain and instance.stop is None else instance


# The optional fields of an instance: those of `Instance`, besides its text.
INSTANCE_FIELDS = tuple(field.name for field in dataclasses.fields(Instance) if field.name != "inputs")
SAMPLING_FIELDS = tuple(field.name for field in dataclasses.fields(Sampling))


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


def _signature_rows(value, columnar, specs):
    """The rows of a request that names its signature, each `{input:
    value}`, from TF Serving's row or columnar form (`value`, the body's
    "instances" or "inputs"); `specs`: the signature's `{input: (dtype, rank)}`."""
    key = "inputs" if columnar else "instances"
    names = sorted(specs)
    scalars = [name for name in names if specs[name][1] == 0]
    if not columnar:
        if not isinstance(value, list):
            raise RequestError(f'"instances" must be a list; received {type(value).__name__}')
        if scalars:
            raise RequestError(f"the signature takes {', '.join(scalars)} as scalars, one for the whole request: send "
                               'them in the columnar form, {"inputs": {...}}')
        if len(names) == 1:
            return [row if isinstance(row, dict) else {names[0]: row} for row in value]
        for i, row in enumerate(value):
            if not isinstance(row, dict):
                raise RequestError(f"instances[{i}] must be an object with the signature's inputs, "
                                   f"{', '.join(names)}; received {type(row).__name__}")
        return value
    if not isinstance(value, dict):
        if len(names) == 1:
            value = {names[0]: value}
        else:
            raise RequestError(f'"inputs" must be an object with the signature\'s inputs, {", ".join(names)}; '
                               f"received {type(value).__name__}")
    if set(value) != set(names):
        raise RequestError(f'"inputs" must have the signature\'s inputs, {", ".join(names)}, and no other key; '
                           f"received {', '.join(sorted(value))}")
    lists = [name for name in names if name not in scalars]
    for name in lists:
        if not isinstance(value[name], list) or len(value[name]) != len(value[lists[0]]):
            raise RequestError(f'"inputs"."{name}" must be a list, as long as "inputs"."{lists[0]}"')
    return [{**{name: value[name] for name in scalars}, **{name: value[name][i] for name in lists}}
            for i in range(len(value[lists[0]]))]


def _signature_row(signature, row, specs, where, limits):
    """The `SignatureRow` of one row's inputs, each checked against its spec."""
    if set(row) != set(specs):
        raise RequestError(f"{where} must have the signature's inputs, {', '.join(sorted(specs))}, and no other "
                           f"key; received {', '.join(sorted(row))}")
    inputs = {}
    for name, (dtype, rank) in specs.items():
        value, field = row[name], f"{where}.{name}"
        if dtype == "string" and rank == 2:
            if not isinstance(value, list):
                raise RequestError(f"{field} must be a list of strings; received {type(value).__name__}")
            for j, text in enumerate(value):
                _check_text(text, f"{field}[{j}]", limits)
            value = tuple(value)
        elif dtype == "string":
            _check_text(value, field, limits)
        else:
            kind = (int,) if dtype.startswith("int") else (int, float)
            if isinstance(value, bool) or not isinstance(value, kind):
                raise RequestError(f"{field} must be a number{' (an integer)' if kind == (int,) else ''}; "
                                   f"received {type(value).__name__}")
        inputs[name] = value
    return SignatureRow(signature, inputs)


def _blank(item):
    """A plain blank input, answered without the model."""
    return isinstance(item, str) and is_blank(item)


async def _predict_non_blank(batcher, items, blank_output):
    """The outputs for `items`: plain blank ones get a copy of `blank_output`,
    the others come from `batcher` (which is not called if all are blank)."""
    outputs = iter(await batcher.submit([item for item in items if not _blank(item)]))
    return [dict(blank_output) if _blank(item) else next(outputs) for item in items]


# TF Serving's paths (its http_rest_api_util.cc), matched without regard to case.
PREDICT_PATH = re.compile(r"/v1/models/([^/:]+)(?:/versions/(\d+)|/labels/([^/:]+))?:(classify|regress|predict)", re.I)
STATUS_PATH = re.compile(r"/v1/models(?:/([^/:]+))?(?:/versions/(\d+)|/labels/([^/:]+))?(?:/(metadata))?", re.I)


def _response(outputs, columnar):
    """TF Serving's answer: `predictions` (rows) or `outputs` (columns)."""
    if columnar:
        return {"outputs": {key: [row[key] for row in outputs] for key in outputs[0]}}
    return {"predictions": outputs}


class _Servable:
    """One model's answers to TF Serving's REST routes."""

    def __init__(self, batcher, model_name, version, limits, blank_output):
        self.batcher, self.model_name, self.version = batcher, model_name, version
        self.limits, self.blank_output = limits, blank_output
        self._signature_defs = None

    @property
    def predict_function(self):
        return self.batcher.predict

    def check_items(self, items, key):
        """A `RequestError` for the first item the model cannot answer,
        named by its place in the request (`key`, `instances` or `inputs`)."""
        predict = self.predict_function
        signatures = getattr(predict, "signatures", list(PLAIN_SIGNATURES))
        for index, item in enumerate(items):
            if isinstance(item, str):
                continue
            try:
                if isinstance(item, Instance):
                    require_signature(item.signature, signatures)
                if hasattr(predict, "check"):
                    predict.check([item], [f"{key}[{index}]"])
            except ValueError as error:
                raise RequestError(str(error)) from None

    def check(self, name, requested_version=None, label=None):
        if label is not None:
            raise RequestError(f"Servable not found for request: {name} label {label!r} (version labels are not "
                               f"supported: this server serves version {self.version})", 404)
        if name != self.model_name:
            raise RequestError(f"Servable not found for request: model {name!r} (serving {self.model_name!r})", 404)
        if requested_version is not None and str(int(requested_version)) != str(self.version):
            raise RequestError(f"Servable not found for request: {name} version {requested_version} (serving "
                               f"version {self.version})", 404)

    def status(self, name, requested_version=None, label=None):
        self.check(name, requested_version, label)
        return {
            "model_version_status": [
                {"version": str(self.version), "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
            ]
        }

    def metadata(self, name, requested_version=None, label=None):
        """TF Serving's `GetModelMetadataResponse`: the model spec and its signature defs."""
        self.check(name, requested_version, label)
        if self._signature_defs is None:
            defs = getattr(self.predict_function, "signature_defs", None)
            self._signature_defs = defs() if defs is not None else {"signature_def": {}}
        return {"model_spec": {"name": self.model_name, "signature_name": "", "version": str(self.version)},
                "metadata": {"signature_def": self._signature_defs}}

    async def predict(self, request, name, requested_version=None, label=None):
        limits = self.limits
        self.check(name, requested_version, label)
        body = await read_body(request, limits.max_body_bytes)
        items, columnar = parse_request(body, limits, getattr(self.predict_function, "signature_inputs", None))
        self.check_items(items, "inputs" if columnar else "instances")
        try:
            outputs = await asyncio.wait_for(_predict_non_blank(self.batcher, items, self.blank_output),
                                             limits.request_timeout_s)
        except asyncio.TimeoutError:
            return _error(f"request timed out after {limits.request_timeout_s} s", 504)
        except InvalidRequest as error:  # the graph's own checks
            return _error(str(error), 400)
        except Exception as error:  # noqa: BLE001 - reported to the client
            return _error(f"model failed: {error}", 500)
        return _response(outputs, columnar)

    async def route(self, request):
        """TF Serving's dispatch: a predict path takes POST, a status or
        metadata path GET (else 405); any other path is a 404."""
        path, method = request.url.path, request.method
        match = PREDICT_PATH.fullmatch(path)
        if match:
            if method != "POST":
                return _error(f"{method} is not allowed on {path}: a predict request is a POST", 405,
                              {"Allow": "POST"})
            name, version, label, api = match.groups()
            if api.lower() != "predict":
                raise RequestError(f"this server answers :predict only; a translation model has no {api} "
                                   f"signature. Received: POST {path}")
            return await self.predict(request, name, version, label)
        match = STATUS_PATH.fullmatch(path)
        if match:
            if method != "GET":
                return _error(f"{method} is not allowed on {path}: a model's status and metadata are read with GET",
                              405, {"Allow": "GET"})
            name, version, label, metadata = match.groups()
            if name is None:
                raise RequestError("Missing model name in request.")
            return (self.metadata if metadata else self.status)(name, version, label)
        raise RequestError(f"Not found: {method} {path}. The API is POST /v1/models/<name>[/versions/<version>]"
                           f":predict, GET /v1/models/<name>[/versions/<version>][/metadata]", 404)


def create_app(predict, model_name, version=1, limits=ServingLimits(), blank_output=None):
    """A FastAPI app serving `predict` under `/v1/models/<model_name>`.

    Args:
        predict: `predict(items) -> list_of_dict`, one dict of outputs (e.g.
            `{"translations": ..., "scores": ...}`) per item: a string, an
            `Instance` or a `SignatureRow`. A `SavedModelPredictor`, or a
            function: its attributes, if any, say what it takes
            (`signatures`, `signature_inputs`, `check`, `signature_defs`;
            by default `serving_default`, one string input).
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

    # TF Serving's paths only: no generated documentation pages.
    app = FastAPI(title=f"keras-transformer: {model_name}", lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.state.batcher = batcher

    @app.exception_handler(RequestError)
    async def request_error(request, error):
        return _error(str(error), error.status)

    @app.exception_handler(HTTPException)
    async def http_error(request, error):  # Starlette's own, e.g. a path outside /v1/: TF Serving's form
        return _error(str(error.detail), error.status_code, getattr(error, "headers", None))

    @app.exception_handler(Exception)
    async def server_error(request, error):
        return _error(f"internal error: {error}", 500)

    @app.api_route("/v1/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
    async def v1(request: Request, path: str):
        return await servable.route(request)

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
    requests, seconds = replay_warmup_requests(predict.call, predict.version_dir)
    if requests:
        print(f"Replayed {requests} warm-up requests in {seconds:.1f} s", file=sys.stderr, flush=True)
    name = name or model_name(model_dir)
    app = create_app(predict, name, version, limits, blank_output=predict([""])[0])
    sock = bind_socket(host, port)
    print(f"Serving {name} at {socket_url(sock)}", flush=True)
    run_until_signalled(uvicorn.Server(uvicorn.Config(app)), sock)
