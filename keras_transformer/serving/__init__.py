"""Serving exported translation models over TF Serving's REST API.

`load_saved_model_predictor` and `Batcher` need no server package; the HTTP
server (`create_app`, `serve`, ...) needs fastapi and uvicorn
(`pip install -e ".[serve]"` in the checkout), imported only when one of its
names is first used.

Example:

>>> from keras_transformer.serving import ServingLimits, serve
>>> serve("saved_models/tatoeba_en_fr", port=8501, limits=ServingLimits(max_batch_size=32))
"""

import importlib

from keras_transformer.serving.batcher import Batcher
from keras_transformer.serving.predictor import load_saved_model_predictor

# Names of keras_transformer.serving.server, which imports fastapi.
_SERVER_NAMES = ("ServingLimits", "bind_socket", "create_app", "run_until_signalled", "serve")

__all__ = ["Batcher", "load_saved_model_predictor", *_SERVER_NAMES]


def __getattr__(name):
    if name not in _SERVER_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module("keras_transformer.serving.server"), name)


def __dir__():
    return sorted(set(globals()) | set(_SERVER_NAMES))
