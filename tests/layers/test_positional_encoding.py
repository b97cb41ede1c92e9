import math

import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer import PositionalEncoding

pytestmark = pytest.mark.backend  # run on TensorFlow, JAX and PyTorch (tests/run.sh)


def test_sinusoids_equal_the_formula():
    layer = PositionalEncoding(max_length=50)
    x = np.random.normal(size=(2, 50, 8)).astype("float32")
    pe = ops.convert_to_numpy(layer(x)) - x * math.sqrt(8)
    for pos in (0, 1, 17, 49):
        for i in range(4):
            angle = pos / 10000 ** (2 * i / 8)
            assert pe[0, pos, 2 * i] == pytest.approx(math.sin(angle), abs=1e-5)
            assert pe[1, pos, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-5)


@pytest.mark.parametrize("layout", ["halves", "marian"])
def test_imported_models_sinusoids_in_halves_equal_their_formulas(layout):
    """Hugging Face's Marian (`halves`): sin(pos / 10000^(2i/d)) in the first
    half, the cosines in the second; Marian's C++ (`marian`): the same
    halves, with 10000^(i / (d/2 - 1)). Unscaled embeddings (`scale=False`)
    are added as they are."""
    layer = PositionalEncoding(max_length=50, layout=layout, scale=False)
    x = np.random.normal(size=(1, 50, 8)).astype("float32")
    pe = ops.convert_to_numpy(layer(x)) - x
    for pos in (0, 1, 17, 49):
        for i in range(4):
            angle = pos / 10000 ** (2 * i / 8 if layout == "halves" else i / 3)
            assert pe[0, pos, i] == pytest.approx(math.sin(angle), abs=1e-5)
            assert pe[0, pos, 4 + i] == pytest.approx(math.cos(angle), abs=1e-5)


def test_start_index_continues_the_positions():
    layer = PositionalEncoding(max_length=20)
    x = np.random.normal(size=(1, 10, 8)).astype("float32")
    full = ops.convert_to_numpy(layer(x))
    tail = ops.convert_to_numpy(layer(x[:, 6:], start_index=6))
    np.testing.assert_allclose(tail, full[:, 6:], atol=1e-6)


def test_longer_than_max_length_is_a_clear_error():
    layer = PositionalEncoding(max_length=8)
    layer(np.zeros((1, 8, 4), "float32"))  # up to max_length works
    with pytest.raises(ValueError, match="max_length"):
        layer(np.zeros((1, 9, 4), "float32"))
    # A length that is not known yet is no error: on keras.Input((None, 4)),
    # in a functional model (tests/layers/test_public_layers.py).
    assert keras.Sequential([keras.Input((None, 4)), layer]).output_shape == (None, None, 4)


def test_invalid_arguments():
    with pytest.raises(ValueError, match="max_length"):
        PositionalEncoding(max_length=0)
    with pytest.raises(ValueError, match="even"):
        PositionalEncoding()(np.zeros((1, 2, 5), "float32"))
