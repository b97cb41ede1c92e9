"""Shared settings for the training tests."""

import numpy as np

from keras_transformer.training.synthetic import copy_task  # noqa: F401

TINY = dict(num_layers=1, d_model=16, num_heads=2, d_ff=32, max_length=16)


def weights_of(model):
    return [np.asarray(w) for w in model.get_weights()]
