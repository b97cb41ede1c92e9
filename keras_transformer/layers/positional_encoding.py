"""Sinusoidal or learned positional encoding (section 3.5)."""

import keras
import numpy as np
from keras import ops

from keras_transformer.compat.layers import in_shape_inference
from keras_transformer.validation import check_bool, check_positive

# Where the sines and cosines of the encoding lie, and their frequencies:
# - "interleaved": the paper's, sin on even dimensions and cos on odd ones;
# - "halves": the paper's frequencies, the sines in the first half and the
#   cosines in the second (Hugging Face's Marian and CTranslate2);
# - "marian": halves, with the frequencies 10000^(-i / (d_model / 2 - 1))
#   of Marian's C++ code (and tensor2tensor's): the last is exactly 1/10000.
SINUSOID_LAYOUTS = ("interleaved", "halves", "marian")


def check_sinusoid_layout(layout):
    if layout not in SINUSOID_LAYOUTS:
        raise ValueError(f"Argument `sinusoid_layout` must be one of {SINUSOID_LAYOUTS}. Received: {layout!r}")


def sinusoids(start_index, length, d_model, layout="interleaved"):
    """The sinusoids of positions `start_index ... start_index + length - 1`, `(length, d_model)`.

    With the paper's layout, PE(pos, 2i) = sin(pos / 10000^(2i / d_model))
    on even dimensions and PE(pos, 2i + 1) = cos(pos / 10000^(2i / d_model))
    on odd ones; `layout` may put them in halves instead
    (`SINUSOID_LAYOUTS`). Computed in float32 from the positions rather than
    sliced from a stored table, so that a traced graph (a SavedModel's beam
    search, one branch per length bucket) carries no `(max_length,
    d_model)` constant.
    """
    check_sinusoid_layout(layout)
    half = d_model // 2
    if layout == "marian":
        exponents = np.arange(half) / max(half - 1, 1)  # (d/2,)
    else:
        exponents = np.arange(0, d_model, 2) / d_model  # 2i / d_model
    frequency = np.power(10000.0, -exponents).astype("float32")  # (d/2,)
    position = ops.cast(ops.arange(length) + start_index, "float32")  # (length,)
    angles = position[:, None] * frequency[None, :]  # (length, d/2)
    if layout != "interleaved":
        return ops.concatenate([ops.sin(angles), ops.cos(angles)], axis=-1)  # (length, d_model): sin, then cos
    pairs = ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1)  # (length, d/2, 2): sin, cos
    return ops.reshape(pairs, (length, d_model))  # even dims sin, odd dims cos


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionalEncoding(keras.layers.Layer):
    """Scales embeddings by sqrt(d_model) and adds position information.

    Args:
        max_length: int. Longest sequence the layer accepts. Defaults to
            `1024`.
        learned: bool. Learn the position embeddings instead of using the
            fixed sinusoids (Table 3, row E). Defaults to `False`.
        layout: where the sinusoids' sines and cosines lie, one of
            `SINUSOID_LAYOUTS`. Defaults to the paper's, `"interleaved"`.
        scale: bool. Scale the embeddings by sqrt(d_model) (section 3.4).
            Defaults to `True`.
        **kwargs: Standard layer arguments.

    Call arguments:
        embeddings: float tensor `(batch, length, d_model)`, or `(batch,
            d_model)`: one position each (a decoding step).
        start_index: int or scalar int tensor: position of the first token,
            for incremental decoding. Defaults to `0`.

    A sequence longer than `max_length` is an error where its length is
    known when the layer is called: always in eager calls, and in a
    traced function whose input length is fixed. Each position is encoded
    alone: a Keras mask on the input passes on to the output.

    Example:

    >>> encoding = PositionalEncoding(max_length=64)
    >>> encoding(keras.ops.zeros((2, 10, 16))).shape
    (2, 10, 16)
    """

    def __init__(self, max_length=1024, learned=False, layout="interleaved", scale=True, **kwargs):
        super().__init__(**kwargs)
        check_positive("max_length", max_length)
        check_bool("learned", learned)
        check_sinusoid_layout(layout)
        check_bool("scale", scale)
        self.max_length = int(max_length)
        self.learned = learned
        self.supports_masking = True
        self.layout = layout
        self.scale = scale

    def build(self, input_shape):
        d_model = input_shape[-1]
        if d_model is None or d_model % 2:
            raise ValueError(
                "PositionalEncoding needs an even, known last dimension "
                f"(d_model). Received: input_shape={input_shape}"
            )
        self.d_model = d_model
        if self.learned:
            self.table = self.add_weight(
                name="position_embeddings",
                shape=(self.max_length, d_model),
                initializer=keras.initializers.RandomNormal(stddev=d_model**-0.5),
            )
        self.built = True

    def call(self, embeddings, start_index=0):
        single = len(embeddings.shape) == 2  # (batch, d_model): one position each, `start_index`
        length = 1 if single else embeddings.shape[1]
        # A length that is not an int (None, or a JAX trace's symbolic
        # size) is not known yet; Keras' shape inference has placeholder
        # lengths (keras_transformer/compat/layers.py).
        if isinstance(length, int) and isinstance(start_index, int) and not in_shape_inference():
            if start_index + length > self.max_length:
                raise ValueError(
                    f"Sequence of length {start_index + length} is longer "
                    f"than `max_length`={self.max_length} of "
                    f"PositionalEncoding '{self.name}'. Truncate the input "
                    "or build the model with a larger `max_length`."
                )
        length = 1 if single else ops.shape(embeddings)[1]
        if self.learned:
            positions = ops.slice(ops.convert_to_tensor(self.table), (start_index, 0), (length, self.d_model))
        else:
            positions = sinusoids(start_index, length, self.d_model, self.layout)  # (length, d_model)
        if self.scale:
            embeddings = embeddings * ops.cast(self.d_model**0.5, self.compute_dtype)
        positions = ops.cast(positions, self.compute_dtype)
        return embeddings + (positions if single else positions[None])

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"max_length": self.max_length, "learned": self.learned, "layout": self.layout,
                       "scale": self.scale})
        return config
