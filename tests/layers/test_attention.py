import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer import MultiHeadAttention
from tests.layers.checks import assert_spec_describes

pytestmark = pytest.mark.backend  # run on TensorFlow, JAX and PyTorch (tests/run.sh)


def softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def reference_attention(layer, query, memory, mask):
    """Multi-head attention written out in NumPy from the layer's weights."""
    w, b = [ops.convert_to_numpy(x) for x in layer.projections[0].weights]
    if layer.cross_attention:  # query (d, d), then key_value (d, 2 d)
        wkv, bkv = [ops.convert_to_numpy(x) for x in layer.key_value_dense.weights]
        w, b = np.concatenate([w, wkv], axis=1), np.concatenate([b, bkv])
    d = w.shape[0]
    wq, wk, wv = np.split(w, 3, axis=1)  # (d, d) each: Q, K and V
    bq, bk, bv = np.split(b, 3)
    wo, bo = [ops.convert_to_numpy(x) for x in layer.output_dense.weights]
    assert wq.shape == wk.shape == wv.shape == wo.shape == (d, d)
    heads = layer.num_heads
    d_k = wq.shape[0] // heads
    outputs = []
    for h in range(heads):
        part = slice(h * d_k, (h + 1) * d_k)  # head h's columns
        q = query @ wq[:, part] + bq[part]
        k = memory @ wk[:, part] + bk[part]
        v = memory @ wv[:, part] + bv[part]
        scores = q @ np.swapaxes(k, 1, 2) / np.sqrt(d_k)  # (batch, T, S)
        scores = np.where(mask, scores, -np.inf)
        outputs.append(softmax(scores) @ v)
    concat = np.concatenate(outputs, axis=-1)  # (batch, T, heads * d_k)
    return concat @ wo + bo


def random_layer(d_model=16, num_heads=4, **kwargs):
    layer = MultiHeadAttention(d_model, num_heads, **kwargs)
    layer.build((None, None, d_model))
    # Non-zero biases so that they are checked too.
    for dense in layer.projections:
        dense.bias.assign(np.random.normal(size=dense.bias.shape))
    return layer


@pytest.mark.parametrize("return_weights", [False, True])
def test_self_attention_with_padding_matches_numpy(return_weights):
    layer = random_layer()
    x = np.random.normal(size=(3, 6, 16)).astype("float32")
    lengths = np.array([6, 4, 1])
    padding = np.arange(6)[None, :] < lengths[:, None]  # (batch, S)
    out = layer(x, attention_mask=padding, return_attention_scores=return_weights)
    assert_spec_describes(layer, (x,), dict(attention_mask=padding, return_attention_scores=return_weights), out)
    if return_weights:
        out, weights = out
        assert weights.shape == (3, 4, 6, 6)
        weights = ops.convert_to_numpy(weights)
        np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
        assert np.all(weights[~np.broadcast_to(padding[:, None, None, :], weights.shape)] < 1e-7)
    expected = reference_attention(layer, x, x, padding[:, None, :])
    np.testing.assert_allclose(ops.convert_to_numpy(out), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("return_weights", [False, True])
def test_causal_self_attention_matches_numpy(return_weights):
    layer = random_layer()
    x = np.random.normal(size=(2, 5, 16)).astype("float32")
    out = layer(x, use_causal_mask=True, return_attention_scores=return_weights)
    out = out[0] if return_weights else out
    causal = np.tril(np.ones((5, 5), bool))[None]
    expected = reference_attention(layer, x, x, causal)
    np.testing.assert_allclose(ops.convert_to_numpy(out), expected, rtol=1e-5, atol=1e-5)


def test_cross_attention_with_mask_matches_numpy():
    layer = random_layer(cross_attention=True)
    x = np.random.normal(size=(2, 3, 16)).astype("float32")
    memory = np.random.normal(size=(2, 7, 16)).astype("float32")
    mask = np.random.uniform(size=(2, 3, 7)) < 0.6
    mask[..., 0] = True  # every query sees at least one key
    out = layer(x, memory, attention_mask=mask)
    expected = reference_attention(layer, x, memory, mask)
    np.testing.assert_allclose(ops.convert_to_numpy(out), expected, rtol=1e-5, atol=1e-5)
    # Pre-projected keys/values (a cross-attention cache) give the same.
    cached = layer(x, cache=layer.project_key_value(memory), attention_mask=mask)
    np.testing.assert_allclose(ops.convert_to_numpy(cached), expected, rtol=1e-5, atol=1e-5)


def test_cache_step_by_step_equals_causal_attention():
    layer = random_layer()
    x = np.random.normal(size=(2, 6, 16)).astype("float32")
    full, full_scores = (ops.convert_to_numpy(t) for t in layer(x, use_causal_mask=True, return_attention_scores=True))
    cache = (ops.zeros((2, 4, 8, 4)), ops.zeros((2, 4, 8, 4)))  # (batch, heads, length, d_k)
    for i in range(6):
        outputs = layer(x[:, i : i + 1], cache=cache, cache_update_index=i, return_attention_scores=True)
        if i == 0:
            assert_spec_describes(layer, (x[:, :1],), dict(cache=cache, cache_update_index=i,
                                                           return_attention_scores=True), outputs)
        step, cache, scores = outputs
        np.testing.assert_allclose(ops.convert_to_numpy(step)[:, 0], full[:, i], atol=1e-5)
        # The weights over the cache: the causal row i, none on positions not yet written.
        scores = ops.convert_to_numpy(scores)  # (batch, heads, 1, cache length)
        np.testing.assert_allclose(scores[:, :, 0, :6], full_scores[:, :, i], atol=1e-6)
        np.testing.assert_array_equal(scores[:, :, 0, 6:], 0.0)
    # The position may come as any integer type.
    step_cache = (ops.zeros((2, 4, 8, 4)), ops.zeros((2, 4, 8, 4)))
    _, expected = layer(x[:, :1], cache=step_cache, cache_update_index=3)
    for index in (np.int64(3), ops.convert_to_tensor(3, "int64"), ops.convert_to_tensor(3, "int32")):
        _, written = layer(x[:, :1], cache=step_cache, cache_update_index=index)
        for a, b in zip(written, expected):
            np.testing.assert_array_equal(ops.convert_to_numpy(a), ops.convert_to_numpy(b))
    # A chunk of several tokens at an offset (prefill) works too.
    cache = (ops.zeros((2, 4, 8, 4)), ops.zeros((2, 4, 8, 4)))  # (batch, heads, length, d_k)
    _, cache = layer(x[:, :2], cache=cache, cache_update_index=0)
    chunk, _ = layer(x[:, 2:], cache=cache, cache_update_index=2)
    np.testing.assert_allclose(ops.convert_to_numpy(chunk), full[:, 2:], atol=1e-5)


def test_a_cache_that_is_not_a_key_value_pair_is_refused():
    layer = random_layer()
    x = np.random.normal(size=(2, 1, 16)).astype("float32")
    with pytest.raises(ValueError, match=r"`cache` must be a pair \(key, value\).*Received: .*"):
        layer(x, cache=ops.zeros((2, 2, 4, 8, 4)), cache_update_index=0)
    with pytest.raises(ValueError, match="of length 3"):
        layer(x, cache=(ops.zeros((2, 4, 8, 4)),) * 3, cache_update_index=0)


def test_attention_dropout_acts_in_training_only():
    layer = random_layer(dropout_rate=0.5)
    x = np.random.normal(size=(2, 5, 16)).astype("float32")
    inference = ops.convert_to_numpy(layer(x, training=False))
    np.testing.assert_allclose(
        inference, reference_attention(layer, x, x, np.ones((1, 5, 5), bool)), rtol=1e-5, atol=1e-5
    )
    assert not np.allclose(ops.convert_to_numpy(layer(x, training=True)), inference)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(d_model=10, num_heads=3), "divisible"),
        (dict(d_model=0, num_heads=1), "d_model"),
        (dict(d_model=8, num_heads=2, dropout_rate=1.0), "dropout_rate"),
        (dict(d_model=8, num_heads=2, cross_attention="yes"), "cross_attention"),
    ],
)
def test_invalid_configuration_names_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MultiHeadAttention(**kwargs)


@pytest.mark.parametrize("cross_attention", [False, True])
def test_seeded_initializer_draws_distinct_projections(cross_attention):
    layer = MultiHeadAttention(
        8, 2, cross_attention=cross_attention, kernel_initializer=keras.initializers.GlorotUniform(seed=1)
    )
    layer.build((None, None, 8))
    kernels = [ops.convert_to_numpy(d.kernel) for d in layer.projections]
    kernels = np.split(np.concatenate(kernels, axis=1), 4, axis=1)  # Q, K, V, output
    for i in range(4):
        for j in range(i):
            assert not np.allclose(kernels[i], kernels[j])
    assert not np.allclose(kernels[0], kernels[1]) and not np.allclose(kernels[1], kernels[2])
    limit = np.sqrt(6 / (8 + 8))  # Glorot's bound for a (d_model, d_model) kernel
    for w in kernels:
        assert np.abs(w).max() <= limit and np.abs(w).max() > 0.8 * limit


def test_self_and_cross_attention_refuse_each_others_inputs():
    x = np.random.normal(size=(2, 5, 16)).astype("float32")
    with pytest.raises(ValueError, match="Self-attention takes no `value`"):
        random_layer()(x, x)
    with pytest.raises(ValueError, match="needs `value`"):
        random_layer(cross_attention=True)(x)
    with pytest.raises(ValueError, match="project_key_value"):
        random_layer().project_key_value(x)


def test_a_mask_of_the_wrong_shape_is_an_error_naming_it():
    layer = random_layer()
    x = np.random.normal(size=(2, 5, 16)).astype("float32")
    with pytest.raises(ValueError, match=r"`attention_mask` must have the shape \(batch, key_length\) = \(2, 5\).*"
                                         r"Received: attention_mask.shape=\(2, 4\)"):
        layer(x, attention_mask=np.ones((2, 4), bool))
    with pytest.raises(ValueError, match=r"`attention_mask` .* \(batch, query_length, key_length\) = \(2, 5, 5\)"):
        layer(x, attention_mask=np.ones((3, 5, 5), bool))
    with pytest.raises(ValueError, match=r"`attention_mask` .* = \(2, 4, 5, 5\).*shape=\(2, 3, 5, 5\)"):
        layer(x, attention_mask=np.ones((2, 3, 5, 5), bool))
    with pytest.raises(ValueError, match=r"`attention_mask` must have rank 2, 3 or 4.*\(5,\)"):
        layer(x, attention_mask=np.ones((5,), bool))
    with pytest.raises(ValueError, match=r"`query_mask` must have the shape \(batch, length\) = \(2, 5\)"):
        layer(x, query_mask=np.ones((2, 6), bool))
    cross = random_layer(cross_attention=True)
    with pytest.raises(ValueError, match=r"`value_mask` must be a padding mask \(batch, length\)"):
        cross(x, x, value_mask=np.ones((2, 5, 5), bool))
    # In a decoding step, against the cache's length.
    memory = np.random.normal(size=(2, 7, 16)).astype("float32")
    with pytest.raises(ValueError, match=r"`attention_mask` .* = \(2, 7\)"):
        cross(x[:, :1], cache=cross.project_key_value(memory), attention_mask=np.ones((2, 5), bool))
    # A size of 1 broadcasts.
    assert layer(x, attention_mask=np.ones((1, 1, 5), bool)).shape == (2, 5, 16)
