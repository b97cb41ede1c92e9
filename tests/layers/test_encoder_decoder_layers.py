import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer import DecoderLayer, EncoderLayer, FeedForward, Transformer
from tests.layers.checks import assert_spec_describes

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
    # The mask Keras attaches (here by `Embedding(mask_zero=True)`) hides
    # them as well: more padding leaves the real tokens' outputs as they were.
    ids = keras.Input((None,), dtype="int32")
    model = keras.Model(ids, layer(keras.layers.Embedding(20, 16, mask_zero=True)(ids)))
    short, long = np.array([[3, 4, 5, 0]]), np.array([[3, 4, 5, 0, 0, 0, 0]])
    np.testing.assert_allclose(ops.convert_to_numpy(model(long))[:, :3], ops.convert_to_numpy(model(short))[:, :3],
                               atol=1e-5)


def test_decoder_layer_is_causal_and_masks_memory_and_target_padding():
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
    # Target padding before the tokens, which the causal mask leaves visible.
    padding_mask = np.arange(5)[None] >= np.array([[0], [2]])
    out = ops.convert_to_numpy(layer(x, memory, padding_mask=padding_mask))
    x2 = x.copy()
    x2[1, :2] = 50.0
    np.testing.assert_allclose(ops.convert_to_numpy(layer(x2, memory, padding_mask=padding_mask))[1, 2:],
                               out[1, 2:], atol=1e-5)


def test_decoder_layer_with_caches_equals_full_pass():
    layer = DecoderLayer(**ARGS)
    x = np.random.normal(size=(2, 4, 16)).astype("float32")
    memory = np.random.normal(size=(2, 7, 16)).astype("float32")
    full, weights = outputs = layer(x, memory, return_attention_scores=True)
    assert_spec_describes(layer, (x, memory), dict(return_attention_scores=True), outputs)
    assert weights.shape == (2, 4, 4, 7)
    cache = (ops.zeros((2, 4, 4, 4)), ops.zeros((2, 4, 4, 4)))  # (batch, heads, length, d_k)
    cross = layer.cross_attention.project_key_value(memory)
    for i in range(4):
        kwargs = dict(self_attention_cache=cache, cross_attention_cache=cross, cache_update_index=i)
        step, cache = outputs = layer(x[:, i : i + 1], **kwargs)
        if i == 0:
            assert_spec_describes(layer, (x[:, :1],), kwargs, outputs)
        np.testing.assert_allclose(
            ops.convert_to_numpy(step)[:, 0], ops.convert_to_numpy(full)[:, i], atol=1e-5
        )


def test_an_activation_given_as_a_function_is_configured_by_its_name():
    for layer in (FeedForward(16, 32, activation=keras.activations.gelu),
                  EncoderLayer(**{**ARGS, "activation": keras.activations.gelu}),
                  Transformer(vocab_size=20, num_layers=1, **ARGS, activation=keras.activations.gelu)):
        config = layer.get_config()
        assert config["activation"] == "gelu"
        assert type(layer).from_config(config).get_config() == config
    with pytest.raises(ValueError, match=r"`activation` must be the name of a Keras activation.*activation='nope'"):
        EncoderLayer(**{**ARGS, "activation": "nope"})


@pytest.mark.parametrize("activation, formula", [
    ("gelu_sigmoid", lambda h: h / (1 + np.exp(-1.702 * h))),  # Marian's gelu before its release 1.12.3
    ("gelu_approximate", lambda h: 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))),
    ("silu", lambda h: h / (1 + np.exp(-h))),  # Marian's swish
])
def test_feed_forward_activations_of_imported_models_equal_their_formulas(activation, formula):
    layer = FeedForward(16, 32, activation=activation)
    x = np.random.normal(size=(2, 3, 16)).astype("float32")
    layer.build(x.shape)
    w1, b1, w2, b2 = (ops.convert_to_numpy(w) for w in layer.weights)
    np.testing.assert_allclose(ops.convert_to_numpy(layer(x)), formula(x @ w1 + b1) @ w2 + b2, atol=1e-5)
    config = layer.get_config()
    assert config["activation"] == activation
    assert FeedForward.from_config(config).get_config() == config


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


def test_mixed_bfloat16_layer_norms_keep_float32_statistics():
    # (Outputs close to float32's: tests/layers/test_public_layers.py.)
    # The sub-layers' outputs are about N(0, 1), whose bf16 mean and
    # variance are as good as float32 ones, so LayerNorm statistics computed
    # in bf16 would pass a comparison of outputs. On 1000 + N(0, 1) they would
    # not: bf16's spacing at 1000 is 4, so the input or its mean would be off
    # by up to 2 standard deviations; float32 statistics leave only the
    # output's rounding to bf16 (relative 2^-8; bound twice that).
    half = DecoderLayer(**ARGS, dtype="mixed_bfloat16")
    half.build((None, None, 16))
    offset = (1000.0 + np.random.normal(size=(2, 5, 16))).astype("float32")
    for norm in (half.self_attention_norm, half.cross_attention_norm, half.feed_forward_norm):
        assert keras.backend.standardize_dtype(norm.compute_dtype) == "bfloat16"
        normalized = ops.convert_to_numpy(ops.cast(norm(offset), "float32"))
        reference = numpy_layer_norm(offset.astype("float64"), norm)
        np.testing.assert_allclose(normalized, reference, rtol=2**-7, atol=1e-3)
