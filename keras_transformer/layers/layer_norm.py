"""Layer normalisation (Ba et al., 2016) after every residual connection."""

import keras
from keras import ops

from keras_transformer.layers.token_sums import scale_and_shift, sums_as_matmul


@keras.saving.register_keras_serializable(package="keras_transformer")
class LayerNormalization(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization` with a hand-written gradient on CPUs.

    Same arguments, weights and outputs as the Keras layer. Over the last
    axis, with a scale and an offset (how the Transformer uses it), and when
    `token_sums.sums_as_matmul()` holds (XLA on a CPU), it normalises in
    float32 and applies `token_sums.scale_and_shift`, whose gradients for
    the scale and the offset are matrix products instead of the slow column
    sums XLA's CPU backend makes of Keras' layer. Anywhere else it is the
    Keras layer.

    Example:

    >>> norm = LayerNormalization(epsilon=1e-6)
    >>> norm(keras.ops.ones((2, 3, 8))).shape
    (2, 3, 8)
    """

    def call(self, inputs):
        rank = len(inputs.shape)
        last_axis = self.axis in (-1, rank - 1, [-1], [rank - 1])
        if not (sums_as_matmul() and last_axis and self.center and self.scale and not self.rms_scaling):
            return super().call(inputs)
        x = ops.cast(inputs, "float32")  # (..., features): statistics in float32
        mean = ops.mean(x, axis=-1, keepdims=True)
        centred = x - mean
        variance = ops.mean(ops.square(centred), axis=-1, keepdims=True)
        normalised = centred * ops.rsqrt(variance + self.epsilon)
        # Values, not variables: a custom gradient takes tensors.
        gamma, beta = ops.cast(self.gamma.value, "float32"), ops.cast(self.beta.value, "float32")
        return ops.cast(scale_and_shift(normalised, gamma, beta), self.compute_dtype)
