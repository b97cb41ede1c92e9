"""Token sums as matrix products: the same values and gradients as the plain expressions."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer import LayerNormalization
from keras_transformer.layers import layer_norm, token_sums
from tests.helpers import backend_gradients

BACKEND = keras.backend.backend()
XLA = BACKEND in ("tensorflow", "jax")  # where the hand-written gradients exist


def gradients(f, *args):
    """Gradients of `sum(f(*args) * weights)` for fixed random weights, as NumPy arrays."""
    args = [ops.convert_to_tensor(a) for a in args]
    weights = ops.convert_to_tensor(np.random.default_rng(7).normal(size=f(*args).shape).astype("float32"))
    return [ops.convert_to_numpy(g) for g in backend_gradients(lambda *a: ops.sum(f(*a) * weights), *args)]


def test_sum_over_tokens_sums_the_leading_axes():
    x = np.random.default_rng(0).normal(size=(2, 3, 4, 5)).astype("float32")
    np.testing.assert_allclose(ops.convert_to_numpy(token_sums.sum_over_tokens(x, (5,))), x.sum((0, 1, 2)), rtol=1e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(token_sums.sum_over_tokens(x, (4, 5))), x.sum((0, 1)), rtol=1e-5)


def test_matrix_product_sums_are_chosen_for_xla_on_cpus_only():
    devices = [] if BACKEND == "torch" else keras.distribution.list_devices()
    expected = XLA and all("cpu" in str(d).lower() for d in devices)
    assert token_sums.sums_as_matmul() == expected


@pytest.mark.skipif(not XLA, reason="the hand-written gradients exist on TensorFlow and JAX only")
def test_add_bias_gradient_is_the_plain_one():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 3, 2, 4)).astype("float32")
    bias = rng.normal(size=(2, 4)).astype("float32")  # like the per-slot Q/K/V biases
    ours = gradients(token_sums._add_bias, x, bias)
    weights = np.random.default_rng(7).normal(size=x.shape).astype("float32")
    np.testing.assert_allclose(ours[0], weights, rtol=1e-6)
    np.testing.assert_allclose(ours[1], weights.sum((0, 1)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(token_sums._add_bias(x, bias)), x + bias)


@pytest.mark.skipif(not XLA, reason="the hand-written gradients exist on TensorFlow and JAX only")
def test_scale_and_shift_gradients_are_the_plain_ones():
    rng = np.random.default_rng(2)
    x, scale, offset = (rng.normal(size=s).astype("float32") for s in ((3, 5, 6), (6,), (6,)))
    ours = gradients(token_sums._scale_and_shift, x, scale, offset)
    weights = np.random.default_rng(7).normal(size=x.shape).astype("float32")
    np.testing.assert_allclose(ours[0], weights * scale, rtol=1e-5)
    np.testing.assert_allclose(ours[1], (weights * x).sum((0, 1)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours[2], weights.sum((0, 1)), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("matmul_sums", [False, True])
def test_layer_normalization_matches_keras_in_values_and_gradients(monkeypatch, matmul_sums):
    if matmul_sums and not XLA:
        pytest.skip("the hand-written gradients exist on TensorFlow and JAX only")
    monkeypatch.setattr(layer_norm, "sums_as_matmul", lambda: matmul_sums)
    monkeypatch.setattr(token_sums, "sums_as_matmul", lambda: matmul_sums)
    rng = np.random.default_rng(3)
    x = (rng.normal(size=(2, 5, 8)) * 3 + 1).astype("float32")
    ours, reference = LayerNormalization(epsilon=1e-6), keras.layers.LayerNormalization(epsilon=1e-6)
    for layer in (ours, reference):
        layer.build(x.shape)
        layer.set_weights([np.linspace(0.5, 2, 8).astype("float32"), np.linspace(-1, 1, 8).astype("float32")])
    np.testing.assert_allclose(ops.convert_to_numpy(ours(x)), ops.convert_to_numpy(reference(x)), atol=1e-5)

    def stateless(layer):  # layer(x) with its scale and offset as differentiable inputs
        return lambda x, gamma, beta: layer.stateless_call([gamma, beta], [], x)[0]

    for a, b in zip(gradients(stateless(ours), x, *ours.get_weights()),
                    gradients(stateless(reference), x, *reference.get_weights())):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_layer_normalization_keeps_the_compute_dtype_under_mixed_precision():
    keras.config.set_dtype_policy("mixed_bfloat16")
    norm = LayerNormalization(epsilon=1e-6)
    out = norm(ops.ones((2, 3, 8), dtype="bfloat16") * ops.arange(8, dtype="bfloat16"))
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    assert keras.backend.standardize_dtype(norm.gamma.dtype) == "float32"
    np.testing.assert_allclose(ops.convert_to_numpy(ops.cast(ops.mean(out, -1), "float32")), 0, atol=0.02)
