"""`keras-transformer serve`: a SavedModel over TF Serving's REST API.

    pip install -e ".[serve]"     # in the checkout: fastapi and uvicorn
    keras-transformer serve saved_models/tatoeba_en_fr --port 8501
    curl -d '{"instances": ["How are you?"]}' localhost:8501/v1/models/tatoeba_en_fr:predict

Without fastapi or uvicorn it stops with one line naming the extra to install.
"""

import importlib

from keras_transformer.decoding.defaults import BATCH_SIZE

NAME = "serve"
HELP = ("Serve a SavedModel over TF Serving's REST API (POST /v1/models/<name>:predict, "
        "GET /v1/models/<name>[/metadata]).")

SERVER_PACKAGES = ("fastapi", "uvicorn")
EXTRA = "serve"  # setup.py's extras_require name


def add_arguments(p):
    p.add_argument("model_dir", help="saved_models/<name> (its highest version is served)")
    p.add_argument("--host", default="127.0.0.1",
                   help="the address to listen on; 0.0.0.0 takes requests from other machines")
    p.add_argument("--port", type=int, default=8501,
                   help='0 takes a free port; "Serving <name> at http://<host>:<port>" is printed once bound')
    p.add_argument("--name", default=None, help="model name in the URLs; default: the folder's name")
    p.add_argument("--max-instances", type=int, default=None,
                   help=f"inputs per request (default: {BATCH_SIZE}, at most --max-batch-size)")
    p.add_argument("--max-characters", type=int, default=2000, help="characters per input")
    p.add_argument("--max-body-bytes", type=int, default=1 << 20,
                   help="bytes per request body, counted as they are read (chunked bodies too)")
    p.add_argument("--request-timeout", type=float, default=30.0, help="seconds before a request is answered with 504")
    p.add_argument("--max-batch-size", type=int, default=BATCH_SIZE, help="inputs per model call, across requests")
    p.add_argument("--intra-op-threads", type=int, default=0,
                   help="TensorFlow's threads within one op (0: one per core), as TF Serving's "
                        "--tensorflow_intra_op_parallelism; 1 with --inter-op-threads 2 gives each of the "
                        "export's two decoding loops a thread of its own")
    p.add_argument("--inter-op-threads", type=int, default=0,
                   help="TensorFlow's threads running ops side by side (0: one per core)")


def run(args):
    """Serves until SIGINT or SIGTERM, then exits with status 0 once the
    requests in flight are answered."""
    require_server_packages()
    from keras_transformer.cli.common import set_tensorflow_process_options
    from keras_transformer.serving.server import ServingLimits, serve

    limits = ServingLimits(
        max_instances=args.max_instances, max_characters=args.max_characters,
        max_body_bytes=args.max_body_bytes, request_timeout_s=args.request_timeout,
        max_batch_size=args.max_batch_size,
    )
    set_tensorflow_process_options(intra_op_threads=args.intra_op_threads, inter_op_threads=args.inter_op_threads)
    serve(args.model_dir, host=args.host, port=args.port, name=args.name, limits=limits)
    return 0


def require_server_packages():
    """Ends the command with one line naming the extra to install unless
    fastapi and uvicorn import (checked before TensorFlow loads)."""
    for package in SERVER_PACKAGES:
        try:
            importlib.import_module(package)
        except ImportError as error:
            raise SystemExit(
                f"keras-transformer serve needs the server packages ({error.name or package} is missing): "
                f'pip install -e ".[{EXTRA}]" in the keras-transformer checkout'
            ) from None
