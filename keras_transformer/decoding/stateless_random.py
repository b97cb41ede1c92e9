"""Random numbers that depend only on a sentence, its seed and the step.

Sampling draws each sentence's tokens from numbers that a counter-based
hash computes from the sentence's own key, the step and the token id. A
sentence therefore samples the same tokens alone and in any batch, in any
row, on every backend and inside compiled loops, which no stateful
generator (`keras.random.SeedGenerator`, one stream for the whole batch)
can promise. Everything is `keras.ops` integer arithmetic on int32, whose
multiplication wraps around on TensorFlow, JAX and PyTorch alike; a right
shift is made logical by masking the sign bits it copies.

Example:

>>> keys = sentence_keys(seed=7, source_ids=[[5, 6, 3, 0], [5, 6, 3, 0]])
>>> uniform(keys, step=0, vocab_size=4).shape  # equal rows: equal sources
(2, 4)
"""

import numpy as np
from keras import ops

from keras_transformer.tokens import PAD_ID

# The multipliers of a 32-bit integer hash with low bias ("lowbias32", from
# Chris Wellons' hash-prospector), as int32.
_MULTIPLIERS = (np.int32(0x7FEB352D), np.int32(0x846CA68B - (1 << 32)))
_GOLDEN = np.int32(0x9E3779B9 - (1 << 32))  # 2**32 / phi: spreads consecutive counters


def _shift_right(x, bits):
    """Logical right shift of int32 `x`."""
    return ops.bitwise_and(ops.right_shift(x, bits), (1 << (32 - bits)) - 1)


def hash32(x):
    """A bijective mix of each int32 of `x`, as uint32 arithmetic would give."""
    x = ops.cast(x, "int32")
    x = ops.bitwise_xor(x, _shift_right(x, 16))
    x = ops.multiply(x, _MULTIPLIERS[0])
    x = ops.bitwise_xor(x, _shift_right(x, 15))
    x = ops.multiply(x, _MULTIPLIERS[1])
    return ops.bitwise_xor(x, _shift_right(x, 16))


def sentence_keys(seed, source_ids):
    """(batch,) int32: each sentence's key, from `seed` and its source ids.

    Padding is left out, so a source padded to any width gets one key.
    """
    source_ids = ops.cast(ops.convert_to_tensor(source_ids), "int32")  # (batch, length)
    positions = ops.arange(ops.shape(source_ids)[1], dtype="int32")[None, :]
    mixed = hash32(ops.add(hash32(ops.multiply(positions + 1, _GOLDEN)), source_ids))  # (batch, length)
    mixed = ops.where(ops.not_equal(source_ids, PAD_ID), mixed, 0)
    return hash32(ops.bitwise_xor(ops.sum(mixed, axis=1), hash32(ops.cast(seed, "int32"))))  # (batch,)


def uniform(keys, step, vocab_size):
    """(batch, vocab_size) float32 in (0, 1): a sentence's numbers at `step`."""
    step_keys = hash32(ops.add(keys, hash32(ops.multiply(ops.cast(step, "int32") + 1, _GOLDEN))))  # (batch,)
    counters = ops.multiply(ops.arange(vocab_size, dtype="int32"), _GOLDEN)[None, :]  # (1, vocab)
    bits = _shift_right(hash32(ops.bitwise_xor(step_keys[:, None], counters)), 8)  # (batch, vocab) in [0, 2**24)
    return (ops.cast(bits, "float32") + 0.5) / float(1 << 24)
