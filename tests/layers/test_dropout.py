import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer.layers.dropout import Dropout, keep_mask, mix32
from tests.helpers import assert_config_is_constructor_arguments


def reference_mix32(x):
    """lowbias32 in NumPy's unsigned arithmetic."""
    x = x.astype(np.uint32)
    x ^= x >> np.uint32(16)
    x = x * np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x = x * np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
    return x


def test_hash_matches_unsigned_reference_including_sign_bit():
    values = np.array([0, 1, 2, 12345, 2**31 - 1, 2**31, 2**32 - 1], np.uint64)
    signed = values.astype(np.uint32).view(np.int32)
    got = ops.convert_to_numpy(mix32(ops.convert_to_tensor(signed, "int32")))
    np.testing.assert_array_equal(got.view(np.uint32), reference_mix32(values))


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_keep_mask_matches_reference(rate):
    shape, seed = (3, 17, 40), 987654321
    index = np.arange(np.prod(shape), dtype=np.uint32).reshape(shape)
    bits = reference_mix32(reference_mix32(index) ^ np.uint32(seed)) & np.uint32(0x7FFFFFFF)
    expected = bits >= round(rate * 2**31)
    got = ops.convert_to_numpy(keep_mask(shape, ops.convert_to_tensor(seed, "int32"), rate))
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("rate", [0.1, 0.3])
def test_masks_are_bernoulli_and_independent(rate):
    keep = 1 - rate
    n = 200_000
    a = ops.convert_to_numpy(keep_mask((n,), 11, rate))
    b = ops.convert_to_numpy(keep_mask((n,), 12, rate))
    sigma = np.sqrt(keep * rate / n)
    assert abs(a.mean() - keep) < 5 * sigma
    # Neighbours, and the same element under two seeds, are independent.
    assert abs((a[:-1] & a[1:]).mean() - keep**2) < 5 * sigma
    assert abs((a & b).mean() - keep**2) < 5 * sigma
    # Rows of a 2-D mask do not repeat one another.
    rows = ops.convert_to_numpy(keep_mask((400, 500), 11, rate))
    assert abs((rows[:-1] & rows[1:]).mean() - keep**2) < 5 * sigma * np.sqrt(n / rows.size)


def test_training_drops_and_rescales():
    layer = Dropout(0.25, seed=3)
    x = np.random.uniform(1.0, 2.0, (64, 50, 32)).astype("float32")
    y = ops.convert_to_numpy(layer(x, training=True))
    dropped = y == 0
    assert 0.23 < dropped.mean() < 0.27
    np.testing.assert_allclose(y[~dropped], x[~dropped] / 0.75, rtol=1e-6)
    # The expectation is kept.
    assert abs(y.mean() / x.mean() - 1) < 0.01


def test_each_call_draws_a_new_mask_and_seeds_reproduce():
    x = np.ones((8, 100), "float32")
    layer = Dropout(0.5, seed=7)
    first = ops.convert_to_numpy(layer(x, training=True))
    second = ops.convert_to_numpy(layer(x, training=True))
    assert (first != second).mean() > 0.3
    again = ops.convert_to_numpy(Dropout(0.5, seed=7)(x, training=True))
    np.testing.assert_array_equal(again, first)


def test_inference_and_rate_zero_are_identity():
    x = np.random.normal(size=(4, 6)).astype("float32")
    np.testing.assert_array_equal(ops.convert_to_numpy(Dropout(0.5)(x)), x)
    np.testing.assert_array_equal(ops.convert_to_numpy(Dropout(0.0)(x, training=True)), x)


def test_keeps_dtype_under_mixed_precision():
    layer = Dropout(0.1, dtype="mixed_bfloat16")
    x = ops.cast(ops.ones((4, 8)), "bfloat16")
    assert keras.backend.standardize_dtype(layer(x, training=True).dtype) == "bfloat16"


def test_trains_inside_compiled_fit_with_unknown_batch():
    inputs = keras.Input((10,))
    model = keras.Model(inputs, keras.layers.Dense(1)(Dropout(0.2)(inputs)))
    model.compile("sgd", "mse", jit_compile="auto")
    x = np.random.normal(size=(64, 10)).astype("float32")
    history = model.fit(x, x.sum(1), batch_size=16, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


def test_config_and_errors():
    assert_config_is_constructor_arguments(Dropout(0.1, seed=4))
    with pytest.raises(ValueError, match="`rate`.*Received: rate=1.0"):
        Dropout(1.0)
    with pytest.raises(ValueError, match=r"fewer than 2\*\*31 elements. Received: shape=\(65536, 32768\)"):
        keep_mask((2**16, 2**15), 1, 0.1)
