"""Shared settings for the training tests."""

import numpy as np

from keras_transformer.training.synthetic import copy_task  # noqa: F401

TINY = dict(num_layers=1, d_model=16, num_heads=2, d_ff=32, max_length=16)


def weights_of(model):
    return [np.asarray(w) for w in model.get_weights()]


def source_blind_loss(labels, vocab_size, label_smoothing=0.1):
    """The least label-smoothed loss on `labels` of a model that does not read the source.

    In `copy_task` the words are drawn independently and uniformly, and the
    length is independent of them, so without the source the best guess
    for position t is the distribution of the labels at t (a decoder that
    sees the words before t learns nothing more). The cross-entropy
    against smoothed targets is least for the mean smoothed target q_t,
    where it is q_t's entropy. Computed from `labels` themselves, so even a
    model fitted to them could not do better.
    """
    total, count = 0.0, 0
    for column in labels.T:  # one target position
        tokens = column[column != 0]  # 0: padding, not in the loss
        if len(tokens):
            p = np.bincount(tokens, minlength=vocab_size) / len(tokens)
            q = (1 - label_smoothing) * p + label_smoothing / vocab_size
            total += len(tokens) * -(q * np.log(q)).sum()
            count += len(tokens)
    return total / count


def numpy_passes(data, batch_size=8):
    """`pass -> NumPy batches` over `data`, shuffled by the pass number (a
    `train_data` function: the input where TensorFlow is not installed)."""
    (source, target_in), labels = data

    def batches(index):
        order = np.random.default_rng(index).permutation(len(labels))
        for start in range(0, len(order) - batch_size + 1, batch_size):
            rows = order[start : start + batch_size]
            yield (source[rows], target_in[rows]), labels[rows]

    return batches
