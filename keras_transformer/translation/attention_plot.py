"""Heatmaps of the decoder's attention over the source sentence."""

import numpy as np
from keras import ops

from keras_transformer.models.transformer import padding_mask


def check_head(head, heads):
    """Raises `ValueError` unless `head` is None or a head of `heads`: one
    check, made by `plot_attention` and by `translate --head` before it
    translates."""
    if head is not None and (isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < heads):
        raise ValueError(f"Argument `head` must be in [0, {heads}), the model's heads. Received: head={head}")


def cross_attention_weights(model, source_ids, target_ids, layer=-1):
    """Cross-attention weights of one decoder layer for a translation.

    Args:
        model: a `Transformer`.
        source_ids: int array `(source_length,)` or `(1, source_length)`.
        target_ids: int array: the decoder input (BOS, y1, ...), as above.
        layer: which decoder layer; defaults to the last one.

    Returns:
        NumPy array `(num_heads, target_length, source_length)`.
    """
    source = np.asarray(source_ids, "int32").reshape(1, -1)
    target = np.asarray(target_ids, "int32").reshape(1, -1)
    memory = model.encode(source)
    _, weights = model.decode(target, memory, padding_mask(source), return_attention_scores=True)
    return ops.convert_to_numpy(ops.cast(weights[layer][0], "float32"))


def plot_attention(weights, source_tokens, target_tokens, path, head=None, title=None):
    """Draws attention weights as a heatmap and saves it to `path`.

    Args:
        weights: array `(num_heads, target_length, source_length)` or
            `(target_length, source_length)`.
        source_tokens: list of str, one per source position (x axis).
        target_tokens: list of str, one per target position (y axis).
        path: image file to write (`.png`, `.pdf`, `.svg`).
        head: int to draw one head; `None` draws the mean over heads and,
            when there are several, every head in a grid beside it.
        title: optional figure title.

    Returns:
        `path`.

    Example:

    >>> weights = cross_attention_weights(model, source_ids, target_ids)
    >>> plot_attention(weights, ["Hi", "."], ["<s>", "Salut", "."], "attention.png")
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    weights = np.asarray(weights, "float32")
    if weights.ndim == 2:
        weights = weights[None]
    if weights.ndim != 3:
        raise ValueError(
            "Argument `weights` must have shape (heads, target, source) or "
            f"(target, source). Received: weights.shape={weights.shape}"
        )
    heads, t, s = weights.shape
    if (t, s) != (len(target_tokens), len(source_tokens)):
        raise ValueError(
            f"`weights` is {t} x {s} (target x source) but received "
            f"{len(target_tokens)} target and {len(source_tokens)} source tokens"
        )
    check_head(head, heads)
    panels = [(f"head {head}", weights[head])] if head is not None else [("mean of heads", weights.mean(0))]
    if head is None and heads > 1:
        panels += [(f"head {h}", weights[h]) for h in range(heads)]
    columns = min(len(panels), 3)
    rows = -(-len(panels) // columns)
    size = (max(4, 0.45 * s + 2) * columns, max(3, 0.4 * t + 1.5) * rows)
    figure, axes = plt.subplots(rows, columns, figsize=size, squeeze=False, layout="constrained")
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    for ax, (name, panel) in zip(axes.flat, panels):
        image = ax.imshow(panel, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_xticks(range(s), source_tokens, rotation=90, fontsize=8)
        ax.set_yticks(range(t), target_tokens, fontsize=8)
        ax.set_title(name, fontsize=9)
    figure.colorbar(image, ax=axes, shrink=0.8)
    if title:
        figure.suptitle(title)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
