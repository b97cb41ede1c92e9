"""Synthetic copy/reverse translation data, for smoke tests and demos.

Example:

>>> (source, target_in), labels = copy_task(num_examples=64, reverse=True)
>>> source.shape, target_in.shape, labels.shape     # (64, 7) each
"""

import numpy as np

BOS, EOS = 1, 2  # 0 is padding; ordinary tokens are 3 .. vocab_size - 1


def copy_task(num_examples=32, length=6, vocab_size=20, seed=0, reverse=False, pad=True):
    """`((source, target_in), labels)` int32 arrays `(num_examples, length + 1)`.

    The target is the source (reversed with `reverse`). With `pad`,
    sentences have 2..`length` tokens and are padded with 0; without, all
    have `length`, so every batch has the same number of tokens.
    """
    rng = np.random.default_rng(seed)
    shape = (num_examples, length + 1)
    source, target_in, labels = (np.zeros(shape, "int32") for _ in range(3))
    for i in range(num_examples):
        n = int(rng.integers(2, length + 1)) if pad else length
        tokens = rng.integers(3, vocab_size, n)
        out = tokens[::-1] if reverse else tokens
        source[i, : n + 1] = [*tokens, EOS]
        target_in[i, : n + 1] = [BOS, *out]
        labels[i, : n + 1] = [*out, EOS]
    return (source, target_in), labels
