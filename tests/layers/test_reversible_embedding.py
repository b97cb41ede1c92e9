import numpy as np
import pytest
from keras import ops

from keras_transformer.layers.reversible_embedding import ReversibleEmbedding


def random_embedding(vocab=11, d_model=6):
    layer = ReversibleEmbedding(vocab, d_model)
    layer.build((None, None))
    table = np.random.normal(size=(vocab, d_model)).astype("float32")
    layer.embeddings.assign(table)
    return layer, table


@pytest.mark.backend  # TensorFlow, JAX and PyTorch (tests/run.sh)
@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 6), (2, 1, 3, 6)])
def test_reverse_is_hidden_times_the_table_transposed(shape):
    layer, table = random_embedding()
    hidden = np.random.normal(size=shape).astype("float32")
    logits = ops.convert_to_numpy(layer(hidden, reverse=True))
    np.testing.assert_allclose(logits, hidden @ table.T, rtol=1e-5, atol=1e-5)
    # The lookup uses the same table.
    np.testing.assert_array_equal(ops.convert_to_numpy(layer(np.array([[3, 0]]))), table[[[3, 0]]])


def test_gradient_of_the_table_matches_numpy_without_a_tensor_per_row():
    """TensorFlow graph mode, as in training: d sum(w * logits) / d table =
    w^T hidden, and no tensor in the gradient's graph is larger than the
    logits or the table (an einsum over `...`, tried for the output
    projection, had one of (vocab, d_model, batch, length), far larger than
    the logits, in the main job's first step)."""
    import tensorflow as tf

    layer, table = random_embedding()
    hidden = np.random.normal(size=(2, 3, 6)).astype("float32")
    weights = np.random.normal(size=(2, 3, 11)).astype("float32")

    @tf.function
    def gradient():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(weights * layer(tf.constant(hidden), reverse=True))
        return tape.gradient(loss, layer.embeddings)

    expected = weights.reshape(-1, 11).T @ hidden.reshape(-1, 6)  # (vocab, d_model)
    np.testing.assert_allclose(gradient().numpy(), expected, rtol=1e-5, atol=1e-5)
    graph = gradient.get_concrete_function().graph
    sizes = {
        t.name: t.shape.num_elements()
        for op in graph.get_operations() for t in op.outputs if t.shape.is_fully_defined()
    }
    largest = max(sizes, key=sizes.get)
    assert sizes[largest] <= max(weights.size, table.size), (largest, sizes[largest])



@pytest.mark.backend  # TensorFlow, JAX and PyTorch (tests/run.sh)
def test_int8_reverse_multiplies_int8_hidden_states_by_the_int8_table():
    """After `quantize("int8")` the logits are the product of the hidden
    states quantized per row (abs-max to [-127, 127]) and Keras' int8 table
    (per token), divided by both scales: NumPy's arithmetic to float32
    rounding, and within int8's error of the float logits."""
    import keras

    layer, table = random_embedding(vocab=50, d_model=16)
    hidden = np.random.normal(size=(2, 3, 16)).astype("float32")
    float_logits = hidden @ table.T
    layer.quantize("int8")
    int8_table = ops.convert_to_numpy(layer.embeddings).astype("float32")  # (vocab, d_model)
    table_scale = ops.convert_to_numpy(layer.embeddings_scale)  # (vocab,)
    np.testing.assert_allclose(int8_table / table_scale[:, None], table, atol=np.abs(table).max() / 127)

    hidden_scale = 127 / (np.abs(hidden).max(axis=-1, keepdims=True) + keras.config.epsilon())  # (2, 3, 1)
    int8_hidden = np.clip(np.round(hidden * hidden_scale), -127, 127)
    expected = (int8_hidden @ int8_table.T) / (hidden_scale * table_scale)
    logits = ops.convert_to_numpy(layer(hidden, reverse=True))
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-4)
    assert np.abs(logits - float_logits).max() < 0.05 * np.abs(float_logits).max()
    # Lookups still read the int8 table, dequantized.
    np.testing.assert_allclose(
        ops.convert_to_numpy(layer(np.array([[3, 0]]))), (int8_table / table_scale[:, None])[[[3, 0]]], rtol=1e-6
    )


def test_int8_reverse_gradient_is_that_of_the_dequantized_table():
    """The hidden states' gradient through the int8 projection is
    `upstream @ (int8_table / scale)`, as for Keras' int8 `Dense` (rounding
    has no gradient of its own)."""
    import tensorflow as tf

    layer, _ = random_embedding(vocab=50, d_model=16)
    layer.quantize("int8")
    dequantized = ops.convert_to_numpy(layer.embeddings) / ops.convert_to_numpy(layer.embeddings_scale)[:, None]
    hidden = tf.constant(np.random.normal(size=(2, 3, 16)).astype("float32"))
    weights = np.random.normal(size=(2, 3, 50)).astype("float32")
    with tf.GradientTape() as tape:
        tape.watch(hidden)
        loss = tf.reduce_sum(weights * layer(hidden, reverse=True))
    np.testing.assert_allclose(tape.gradient(loss, hidden).numpy(), weights @ dequantized, rtol=1e-5, atol=1e-5)
