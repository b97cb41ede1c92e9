"""Dropout whose masks come from a counter-based hash (section 5.4).

`keras.layers.Dropout` draws one random number per element from the
backend's generator (threefry on JAX, Philox on TensorFlow): tens of integer
operations per element, and on a CPU a large share of a small model's
training step. Here each call draws a single 31-bit seed from a Keras
`SeedGenerator`, and the mask is a hash of (seed, element index):

    keep[i] = mix(mix(i) ^ seed) mod 2**31 >= rate * 2**31

where `mix` is a bijective 32-bit integer hash ("lowbias32": xor-shifts and
two multiplications). That is about a dozen integer operations per element,
which XLA fuses into the surrounding element-wise work, and the same seed
gives the same mask on TensorFlow and JAX (`keep_mask` gives it on PyTorch
too, but the layer uses PyTorch's own generator there: uncompiled, each
operation of the hash is a pass over the tensor).
"""

import keras
from keras import ops

from keras_transformer.validation import check_rate

_MULTIPLIERS = (0x7FEB352D, 0x846CA68B - 2**32)  # lowbias32, as int32


def _shift_right(x, bits):
    """Logical right shift of int32 values (the sign bit is not copied)."""
    return ops.bitwise_and(ops.right_shift(x, bits), (1 << (32 - bits)) - 1)


def mix32(x):
    """A bijective hash of int32 values, computed with int32 wrap-around."""
    first, second = (ops.convert_to_tensor(m, "int32") for m in _MULTIPLIERS)
    x = ops.bitwise_xor(x, _shift_right(x, 16))
    x = ops.multiply(x, first)
    x = ops.bitwise_xor(x, _shift_right(x, 15))
    x = ops.multiply(x, second)
    return ops.bitwise_xor(x, _shift_right(x, 16))


def keep_mask(shape, seed, rate):
    """Boolean mask of `shape`, each element `True` with probability `1 - rate`.

    Args:
        shape: the mask's shape.
        seed: int32 scalar tensor or int in [0, 2**31).
        rate: float in [0, 1): the probability of `False`.
    """
    size = 1
    for dim in shape:
        size = size * dim
    if isinstance(size, int) and size >= 2**31:
        raise ValueError(
            "Dropout masks number elements with int32: a tensor must have "
            f"fewer than 2**31 elements. Received: shape={tuple(shape)}"
        )
    index = ops.reshape(ops.arange(size, dtype="int32"), shape)
    bits = mix32(ops.bitwise_xor(mix32(index), ops.cast(seed, "int32")))
    bits = ops.bitwise_and(bits, 0x7FFFFFFF)  # 31 uniform bits, >= 0
    return ops.greater_equal(bits, int(round(rate * 2**31)))


@keras.saving.register_keras_serializable(package="keras_transformer")
class Dropout(keras.layers.Layer):
    """Zeroes inputs with probability `rate` in training, scales the rest.

    A drop-in for `keras.layers.Dropout` (without `noise_shape`) whose masks
    are cheap to make where XLA compiles them (TensorFlow, JAX); see the
    module docstring.

    Args:
        rate: float in [0, 1). Fraction of the inputs to drop.
        seed: optional int. Seed of the layer's `SeedGenerator`.
        **kwargs: Standard layer arguments.

    Call arguments:
        inputs: a float tensor of any shape.
        training: bool. Dropout applies only when `True`.

    Example:

    >>> layer = Dropout(0.5, seed=1)
    >>> layer(keras.ops.ones((2, 4)), training=True)  # zeros and 2.0s
    """

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        check_rate("rate", rate)
        self.rate = rate
        self.seed = seed
        self.seed_generator = None
        if rate > 0:
            self.seed_generator = keras.random.SeedGenerator(seed)
        self.supports_masking = True
        self.built = True

    def call(self, inputs, training=False):
        if not training or self.rate == 0:
            return inputs
        if keras.backend.backend() == "torch":
            # Eager PyTorch makes a pass over the tensor for each integer
            # operation of the hash (3x slower than its own generator on a
            # (384, 64, 512) tensor): its own generator is faster there.
            return keras.random.dropout(inputs, self.rate, seed=self.seed_generator)
        seed = keras.random.randint(
            (), 0, 2**31 - 1, dtype="int32", seed=self.seed_generator
        )
        keep = keep_mask(ops.shape(inputs), seed, self.rate)
        scale = ops.cast(1.0 / (1.0 - self.rate), inputs.dtype)
        return ops.where(keep, inputs * scale, ops.zeros_like(inputs))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"rate": self.rate, "seed": self.seed})
        return config
