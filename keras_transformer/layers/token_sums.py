"""Per-feature parameters whose gradients are sums over tokens.

The gradient of a bias, and of LayerNorm's scale and offset, is the output
gradient (times the normalised input, for the scale) summed over every
token: a column sum of a `(tokens, features)` matrix. On CPUs, XLA compiles
the column sums that automatic differentiation writes (fused with the
products before them) into slow loops, so there `add_bias` and
`scale_and_shift` give their gradients by hand, each sum a matrix product
with a block of ones (benchmarks/README.md has the figures). On GPUs XLA
fuses the column sum into the kernel that makes the gradient, and PyTorch
differentiates eagerly: there both are the plain expressions.

Example:

>>> x = keras.ops.ones((2, 3, 4))
>>> add_bias(x, keras.ops.arange(4, dtype="float32")).shape
(2, 3, 4)
"""

import functools
import math

import keras
from keras import ops

# Rows of the ones block. With a single row XLA's CPU backend fused the
# reshape into a matrix-vector loop that took 10-38 ms per sum in a base
# step; with eight rows the 126 sums of a base step took about 5 ms together.
ONES_ROWS = 8


@functools.cache
def sums_as_matmul():
    """Whether this process computes token sums as matrix products: XLA on CPUs only."""
    if keras.backend.backend() not in ("tensorflow", "jax"):
        return False
    return all("cpu" in str(device).lower() for device in keras.distribution.list_devices())


def sum_over_tokens(x, shape):
    """`x` summed over its leading axes, to `shape` (its trailing axes)."""
    rows = ops.reshape(x, (-1, math.prod(shape)))  # (tokens, features)
    ones = ops.ones((ONES_ROWS, ops.shape(rows)[0]), dtype=rows.dtype)
    return ops.reshape(ops.matmul(ones, rows)[0], shape)  # (8, tokens) @ (tokens, features), one row


def add_bias(x, bias):
    """`x + bias`, `bias` shaped like the trailing axes of `x`."""
    if not sums_as_matmul():
        return x + bias
    return _add_bias(x, bias)


def scale_and_shift(x, scale, offset):
    """`x * scale + offset`, LayerNorm's last step, per feature (the last axis)."""
    if not sums_as_matmul():
        return x * scale + offset
    return _scale_and_shift(x, scale, offset)


@ops.custom_gradient
def _add_bias(x, bias):
    def gradient(upstream):
        return upstream, sum_over_tokens(upstream, tuple(bias.shape))

    return x + bias, gradient


@ops.custom_gradient
def _scale_and_shift(x, scale, offset):
    def gradient(upstream):
        shape = tuple(scale.shape)
        return upstream * scale, sum_over_tokens(upstream * x, shape), sum_over_tokens(upstream, shape)

    return x * scale + offset, gradient
