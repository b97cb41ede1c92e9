"""An embedding that is also the pre-softmax projection (section 3.4)."""

import keras
from keras import ops

from keras_transformer.compat.layers import int8_reverse_projection


@keras.saving.register_keras_serializable(package="keras_transformer")
class ReversibleEmbedding(keras.layers.Embedding):
    """`keras.layers.Embedding` that also projects hidden states to logits.

    `layer(ids)` looks up embeddings `(batch, length, output_dim)`;
    `layer(hidden, reverse=True)` gives logits `hidden @ embeddings^T`
    `(batch, length, input_dim)`, with the same matrix, as the paper shares
    it between the embeddings and the output layer. Same arguments as
    `keras.layers.Embedding` (the name as in keras-hub).

    Keras' own `keras.layers.ReversibleEmbedding` computes the same logits.
    This one projects 2-D rows, so that the table's gradient never comes
    through a `(batch, d_model, vocab)` tensor in any Keras release the
    package allows, and gives its int8 product the dequantized table's
    gradient (tests/layers/test_reversible_embedding.py).

    `quantize("int8")` uses Keras' own int8 embedding: one scale per row
    (per token), `embeddings ~= int8_table / scale`. The lookup is Keras'
    int8 path; the reverse projection quantizes the hidden states per row
    as Keras' int8 `Dense` does its inputs, multiplies int8 by int8 and
    divides each logit by both scales. Other modes raise
    `NotImplementedError`, which `model.quantize()` reports as a warning,
    and leave the layer in float.

    With `mask_zero=True` the lookup's output carries the mask `ids != 0`,
    as `keras.layers.Embedding` gives it, and the logits carry the mask of
    the hidden states they come from.

    Example:

    >>> embedding = ReversibleEmbedding(100, 16)
    >>> hidden = embedding(keras.ops.array([[5, 6, 7]]))
    >>> embedding(hidden, reverse=True).shape
    (1, 3, 100)
    """

    def __init__(self, input_dim, output_dim, **kwargs):
        super().__init__(input_dim, output_dim, **kwargs)
        self.supports_masking = True  # with `mask_zero`, or as the logits keep the hidden states' mask

    def call(self, inputs, reverse=False):
        if not reverse:
            return super().call(inputs)
        table = ops.cast(self.embeddings, self.compute_dtype)  # (vocab, d_model)
        # A 2-D product: Keras' TensorFlow `matmul` broadcasts a 2-D operand
        # of a batched one in some Keras releases, and then the table's
        # gradient comes through a tensor of (batch, d_model, vocab).
        # Keras' Embedding casts no inputs (its ids): the hidden states are
        # cast here, so that the logits come in the compute dtype.
        rows = ops.cast(ops.reshape(inputs, (-1, ops.shape(inputs)[-1])), self.compute_dtype)  # (batch * length, d_model)
        logits = ops.matmul(rows, ops.transpose(table))  # (batch * length, vocab)
        return ops.reshape(logits, (*ops.shape(inputs)[:-1], ops.shape(table)[0]))  # (..., vocab)

    def compute_output_shape(self, input_shape, reverse=False):
        if reverse:
            return (*input_shape[:-1], self.input_dim)
        return super().compute_output_shape(input_shape)

    def compute_output_spec(self, inputs, reverse=False):
        if reverse:
            return keras.KerasTensor(self.compute_output_shape(inputs.shape, reverse=True), dtype=self.compute_dtype)
        return super().compute_output_spec(inputs)

    def compute_mask(self, inputs, mask=None):
        if keras.backend.is_float_dtype(inputs.dtype):  # hidden states: the logits keep their mask
            return mask
        return super().compute_mask(inputs, mask)

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
        # Logits from int8 x int8 products, as Keras' int8 `Dense` computes
        # its outputs (keras_transformer/compat/layers.py).
        return int8_reverse_projection(
            inputs, ops.convert_to_tensor(self.embeddings), ops.convert_to_tensor(self.embeddings_scale),
            self.compute_dtype,
        )
