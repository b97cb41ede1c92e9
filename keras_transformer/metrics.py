"""Token accuracy that ignores padding."""

import keras
from keras import ops

from keras_transformer.tokens import PAD_ID
from keras_transformer.validation import check_non_negative_int


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedAccuracy(keras.metrics.Metric):
    """Share of non-padding tokens whose arg-max prediction is the label.

    `sample_weight` (per sentence `(batch,)` or per token `(batch,
    length)`) weights each token's hit and count.

    Args:
        pad_id: int. Label id that is ignored. Defaults to `0`.
        name: str. Defaults to `"masked_accuracy"`.

    Example:

    >>> metric = MaskedAccuracy()
    >>> metric.update_state(labels, logits)
    >>> float(metric.result())
    """

    def __init__(self, pad_id=PAD_ID, name="masked_accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        check_non_negative_int("pad_id", pad_id)
        self.pad_id = pad_id
        self.correct = self.add_variable(shape=(), initializer="zeros", name="correct")
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        predicted = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
        mask = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")
        if sample_weight is not None:
            mask = mask * token_weights(sample_weight, mask)
        hits = ops.cast(ops.equal(predicted, y_true), "float32") * mask
        self.correct.assign_add(ops.cast(ops.sum(hits), self.dtype))
        self.total.assign_add(ops.cast(ops.sum(mask), self.dtype))

    def result(self):
        return self.correct / ops.maximum(self.total, 1.0)

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype, "pad_id": self.pad_id}


def token_weights(sample_weight, values):
    """`sample_weight` `(batch,)` or `(batch, length)` as float32 weights
    shaped like the per-token `values` `(batch, length)`."""
    weights = ops.cast(ops.convert_to_tensor(sample_weight), "float32")
    if len(weights.shape) == 1:  # one weight per sentence
        weights = weights[:, None]
    elif len(weights.shape) == 3 and weights.shape[-1] == 1:
        weights = weights[..., 0]
    if len(weights.shape) != 2:
        raise ValueError(
            "`sample_weight` must have shape (batch,) or (batch, length). "
            f"Received: sample_weight.shape={tuple(weights.shape)}"
        )
    return ops.broadcast_to(weights, ops.shape(values))
