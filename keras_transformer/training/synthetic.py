"""Synthetic copy/reverse translation data, for smoke tests and demos.

Example:

>>> (source, target_in), labels = copy_task(num_examples=64, reverse=True)
>>> source.shape, target_in.shape, labels.shape     # (64, 7) each
"""

import numpy as np

from keras_transformer.tokens import SPECIAL_IDS, pack_source, pack_target, split_target

FIRST_WORD = max(SPECIAL_IDS) + 1  # ordinary tokens are FIRST_WORD .. vocab_size - 1


def copy_task(num_examples=32, length=6, vocab_size=20, seed=0, reverse=False, pad=True):
    """`((source, target_in), labels)` int32 arrays `(num_examples, length + 1)`.

    The target is the source (reversed with `reverse`), both packed by
    `keras_transformer.tokens`. With `pad`, sentences have 2..`length`
    tokens and are padded with 0; without, all have `length`, so every
    batch has the same number of tokens.
    """
    rng = np.random.default_rng(seed)
    source = np.zeros((num_examples, length + 1), "int32")
    target = np.zeros((num_examples, length + 2), "int32")
    for i in range(num_examples):
        n = int(rng.integers(2, length + 1)) if pad else length
        tokens = rng.integers(FIRST_WORD, vocab_size, n).tolist()
        source[i, : n + 1] = pack_source(tokens)
        target[i, : n + 2] = pack_target(tokens[::-1] if reverse else tokens)
    target_in, labels = split_target(target)
    return (source, target_in), labels
