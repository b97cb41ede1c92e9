"""Serving exported translation models over TF Serving's REST API."""

from keras_transformer.serving.batcher import Batcher
from keras_transformer.serving.server import (
    ServingLimits,
    bind_socket,
    create_app,
    load_saved_model_predictor,
    run_until_signalled,
    serve,
)
