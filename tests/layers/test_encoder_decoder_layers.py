import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer import DecoderLayer, EncoderLayer, FeedForward
from tests.helpers import assert_config_is_constructor_arguments, assert_survives_keras_file

pytestmark = pytest.mark.backend  # run on TensorFlow, JAX and PyTorch (tests/run.sh)

ARGS = dict(d_model=16, num_heads=4, d_ff=32)


def numpy_layer_norm(x, layer):
    gamma, beta = (ops.convert_to_numpy(w) for w in layer.weights)
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-6) * gamma + beta


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_is_residual_blocks_around_sublayers(norm_first):
    layer = EncoderLayer(**ARGS, norm_first=norm_first)
    x = np.random.normal(size=(2, 5, 16)).astype("float32")
    out = ops.convert_to_numpy(layer(x))

    def block(x, sublayer, norm):
        if norm_first:
            return x + ops.convert_to_numpy(sublayer(numpy_layer_norm(x, norm)))
        return numpy_layer_norm(x + ops.convert_to_numpy(sublayer(x)), norm)

    expected = block(x, layer.self_attention, layer.self_attention_norm)
    expected = block(expected, layer.feed_forward, layer.feed_forward_norm)
    np.testing.assert_allclose(out, expected, atol=1e-5)


def test_feed_forward_is_relu_between_two_linear_maps():
    layer = FeedForward(16, 32)
    x = np.random.normal(size=(2, 3, 16)).astype("float32")
    layer.build(x.shape)
    w1, b1, w2, b2 = (ops.convert_to_numpy(w) for w in layer.weights)
    expected = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    np.testing.assert_allclose(ops.convert_to_numpy(layer(x)), expected, atol=1e-5)


def test_encoder_padding_mask_hides_padded_positions():
    layer = EncoderLayer(**ARGS)
    x = np.random.normal(size=(1, 6, 16)).astype("float32")
    mask = np.array([[True] * 4 + [False] * 2])
    out = ops.convert_to_numpy(layer(x, padding_mask=mask))
    changed = x.copy()
    changed[:, 4:] = 100.0
    out2 = ops.convert_to_numpy(layer(changed, padding_mask=mask))
    np.testing.assert_allclose(out[:, :4], out2[:, :4], atol=1e-5)


def test_decoder_layer_is_causal_and_masks_memory():
    layer = DecoderLayer(**ARGS)
    x = np.random.normal(size=(2, 5, 16)).astype("float32")
    memory = np.random.normal(size=(2, 7, 16)).astype("float32")
    memory_mask = np.arange(7)[None] < np.array([[7], [3]])
    out = ops.convert_to_numpy(layer(x, memory, memory_mask=memory_mask))
    x2, memory2 = x.copy(), memory.copy()
    x2[:, 3:] = 50.0  # the future
    memory2[1, 3:] = 50.0  # padding of the second source
    out2 = ops.convert_to_numpy(layer(x2, memory2, memory_mask=memory_mask))
    np.testing.assert_allclose(out[:, :3], out2[:, :3], atol=1e-5)


def test_decoder_layer_with_caches_equals_full_pass():
    layer = DecoderLayer(**ARGS)
    x = np.random.normal(size=(2, 4, 16)).astype("float32")
    memory = np.random.normal(size=(2, 7, 16)).astype("float32")
    full, weights = layer(x, memory, return_attention_scores=True)
    assert weights.shape == (2, 4, 4, 7)
    cache = (ops.zeros((2, 4, 4, 4)), ops.zeros((2, 4, 4, 4)))  # (batch, heads, length, d_k)
    cross = layer.cross_attention.project_key_value(memory)
    for i in range(4):
        step, cache = layer(
            x[:, i : i + 1], self_attention_cache=cache, cross_attention_cache=cross, cache_update_index=i
        )
        np.testing.assert_allclose(
            ops.convert_to_numpy(step)[:, 0], ops.convert_to_numpy(full)[:, i], atol=1e-5
        )


@pytest.mark.parametrize("cls", [EncoderLayer, DecoderLayer])
def test_config_and_keras_file_round_trip(cls, tmp_path):
    layer = cls(**ARGS, dropout_rate=0.2, attention_dropout_rate=0.1, norm_first=True, activation="gelu")
    assert_config_is_constructor_arguments(layer)
    x = np.random.normal(size=(2, 5, 16)).astype("float32")
    inputs = [x] if cls is EncoderLayer else [x, np.random.normal(size=(2, 3, 16)).astype("float32")]
    assert_survives_keras_file(layer, inputs, tmp_path)


def test_feed_forward_config_round_trip():
    assert_config_is_constructor_arguments(FeedForward(16, 32, activation="gelu"))
    assert_config_is_constructor_arguments(FeedForward(16, 32, activation="gelu_sigmoid"))


@pytest.mark.parametrize("activation, formula", [
    ("gelu_sigmoid", lambda h: h / (1 + np.exp(-1.702 * h))),  # Marian's gelu before its release 1.12.3
    ("gelu_approximate", lambda h: 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))),
    ("silu", lambda h: h / (1 + np.exp(-h))),  # Marian's swish
])
def test_feed_forward_activations_of_imported_models_equal_their_formulas(activation, formula, tmp_path):
    layer = FeedForward(16, 32, activation=activation)
    x = np.random.normal(size=(2, 3, 16)).astype("float32")
    layer.build(x.shape)
    w1, b1, w2, b2 = (ops.convert_to_numpy(w) for w in layer.weights)
    np.testing.assert_allclose(ops.convert_to_numpy(layer(x)), formula(x @ w1 + b1) @ w2 + b2, atol=1e-5)
    assert_survives_keras_file(layer, [x], tmp_path)


def test_dropout_only_in_training():
    layer = EncoderLayer(**ARGS, dropout_rate=0.5)
    x = np.random.normal(size=(2, 5, 16)).astype("float32")
    a, b = (ops.convert_to_numpy(layer(x, training=False)) for _ in range(2))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(ops.convert_to_numpy(layer(x, training=True)), a)


@pytest.mark.parametrize(
    "kwargs, name",
    [(dict(d_ff=0), "d_ff"), (dict(dropout_rate=-0.1), "dropout_rate"),
     (dict(attention_dropout_rate=1.5), "attention_dropout_rate"), (dict(num_heads=5), "divisible")],
)
def test_invalid_configuration(kwargs, name):
    with pytest.raises(ValueError, match=name):
        EncoderLayer(**{**ARGS, **kwargs})


def test_mixed_bfloat16_layers_are_close_and_keep_float32_statistics():
    layer = DecoderLayer(**ARGS)
    x = np.random.normal(size=(2, 5, 16)).astype("float32")
    memory = np.random.normal(size=(2, 3, 16)).astype("float32")
    expected = ops.convert_to_numpy(layer(x, memory))
    half = DecoderLayer(**ARGS, dtype="mixed_bfloat16")
    half(x, memory)
    half.set_weights(layer.get_weights())
    out = ops.convert_to_numpy(ops.cast(half(x, memory), "float32"))
    # bf16 keeps 8 significant bits: each of the dozen or so roundings on
    # the way (projections, residual sums, the LayerNorms' outputs, ...) is
    # off by up to 2^-8 of what it rounds. Measured over 20 seeds on each
    # backend: at most 3.6 * 2^-8 of the largest output (1.6-2.5 here); the
    # bound is 8 * 2^-8 (0.07-0.09). The former atol, 0.15, was 14-16 * 2^-8.
    scale = np.abs(expected).max()
    np.testing.assert_allclose(out, expected, rtol=0, atol=8 * 2**-8 * scale)
    # The sub-layers' outputs are about N(0, 1), whose bf16 mean and
    # variance are as good as float32 ones, so LayerNorm statistics computed
    # in bf16 would pass the comparison above. On 1000 + N(0, 1) they would
    # not: bf16's spacing at 1000 is 4, so the input or its mean would be off
    # by up to 2 standard deviations; float32 statistics leave only the
    # output's rounding to bf16 (relative 2^-8; bound twice that).
    offset = (1000.0 + np.random.normal(size=(2, 5, 16))).astype("float32")
    for norm in (half.self_attention_norm, half.cross_attention_norm, half.feed_forward_norm):
        assert keras.backend.standardize_dtype(norm.compute_dtype) == "bfloat16"
        normalized = ops.convert_to_numpy(ops.cast(norm(offset), "float32"))
        reference = numpy_layer_norm(offset.astype("float64"), norm)
        np.testing.assert_allclose(normalized, reference, rtol=2**-7, atol=1e-3)
