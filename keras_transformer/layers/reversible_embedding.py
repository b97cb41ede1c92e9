"""An embedding that is also the pre-softmax projection (section 3.4)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class ReversibleEmbedding(keras.layers.Embedding):
    """`keras.layers.Embedding` that also projects hidden states to logits.

    `layer(ids)` looks up embeddings `(batch, length, output_dim)`;
    `layer(hidden, reverse=True)` gives logits `hidden @ embeddings^T`
    `(batch, length, input_dim)`, with the same matrix, as the paper shares
    it between the embeddings and the output layer. Same arguments as
    `keras.layers.Embedding` (the name as in keras-hub).

    `quantize("int8")` uses Keras' own int8 embedding: one scale per row
    (per token), `embeddings ~= int8_table / scale`. The lookup is Keras'
    int8 path; the reverse projection multiplies by the int8 table and
    divides each logit by its token's scale. Other modes raise
    `NotImplementedError`, which `model.quantize()` reports as a warning,
    and leave the layer in float.

    Example:

    >>> embedding = ReversibleEmbedding(100, 16)
    >>> hidden = embedding(keras.ops.array([[5, 6, 7]]))
    >>> embedding(hidden, reverse=True).shape
    (1, 3, 100)
    """

    def call(self, inputs, reverse=False):
        if not reverse:
            return super().call(inputs)
        table = ops.cast(self.embeddings, self.compute_dtype)  # (vocab, d_model)
        return ops.matmul(inputs, ops.transpose(table))  # (..., vocab)

    def quantize(self, mode=None, type_check=True, config=None):
        if mode != "int8":
            raise NotImplementedError(
                f"{type(self).__name__} quantizes to 'int8' only; it stays in float. "
                f"Received: mode={mode!r}"
            )
        # Keras refuses to quantize subclasses of Embedding by default,
        # since they may use the table in math of their own: this class
        # handles the int8 table in `quantized_call`.
        super().quantize(mode, type_check=False, config=config)

    def quantized_call(self, inputs, reverse=False):
        if not reverse:
            return super().quantized_call(inputs)
        table = ops.cast(self.embeddings, self.compute_dtype)  # int8 values, (vocab, d_model)
        logits = ops.matmul(inputs, ops.transpose(table))  # (..., vocab)
        return logits / ops.cast(self.embeddings_scale, self.compute_dtype)
