"""Label-smoothed cross-entropy over non-padding tokens (section 5.4)."""

import keras
from keras import ops

from keras_transformer.tokens import PAD_ID
from keras_transformer.validation import check_non_negative_int, check_rate


@keras.saving.register_keras_serializable(package="keras_transformer")
class LabelSmoothedCrossEntropy(keras.losses.Loss):
    """Cross-entropy against `(1 - eps) * one_hot + eps / vocab_size`.

    The mean over the tokens whose label is not `pad_id`: padding adds
    nothing to the loss or to its normaliser. Keras hands the loss float32
    logits, so it is exact under mixed precision. With the target above,
    each token's loss is

        logsumexp(logits) - (1 - eps) * logits[label] - eps * mean(logits)

    so no one-hot tensor is made (on JAX, where XLA fuses it, the
    smoothed target is a comparison of the label with the vocabulary ids
    inside the sum); the gradient is automatic.

    `call` returns each token's loss scaled by `tokens / non-padding
    tokens`, and zero on padding, so that Keras' `"sum_over_batch_size"`
    reduction (the mean over every element) is the mean over the
    non-padding tokens, exactly as Keras reduces a masked loss. That is
    also what makes it right under a distribution strategy: Keras divides
    the loss by the number of replicas.

    With `sample_weight` (per token `(batch, length)`, or per sentence
    `(batch, 1)`, which Keras broadcasts over the tokens), Keras multiplies
    each token's loss by its weight before the sum, and the sum is still
    divided by the number of non-padding tokens.

    Args:
        label_smoothing: float in [0, 1). The paper's eps_ls. Defaults to
            `0.1`.
        pad_id: int. Label id that is ignored. Defaults to `0`.
        name: str. Defaults to `"label_smoothed_cross_entropy"`.
        dtype: The loss's dtype. Defaults to `keras.config.floatx()`.

    Example:

    >>> loss = LabelSmoothedCrossEntropy()
    >>> labels = keras.ops.array([[4, 5, 0]])
    >>> loss(labels, keras.random.normal((1, 3, 10)))  # mean over 2 tokens
    """

    def __init__(self, label_smoothing=0.1, pad_id=PAD_ID, name="label_smoothed_cross_entropy", dtype=None):
        super().__init__(name=name, reduction="sum_over_batch_size", dtype=dtype)
        check_rate("label_smoothing", label_smoothing)
        check_non_negative_int("pad_id", pad_id)
        self.label_smoothing = label_smoothing
        self.pad_id = pad_id

    def call(self, y_true, y_pred):
        labels = ops.cast(y_true, "int32")  # (batch, length)
        eps = self.label_smoothing
        if keras.backend.backend() == "jax":
            # On JAX, Keras compiles the training step, loss included, with
            # XLA, which fuses the comparison below into the reduction, and
            # the gradient (softmax - target) into one pass: the target is
            # never stored (a call outside a compiled step stores it).
            # The gather of the other branch makes XLA store the logits'
            # gradient in float32, scatter into it and convert it (a
            # measurable part of a base step on a GPU).
            # Eager PyTorch and TensorFlow without XLA would store the
            # target: they gather.
            vocab_size = y_pred.shape[-1]
            is_label = labels[..., None] == ops.arange(vocab_size)  # (batch, length, vocab)
            target = ops.where(is_label, 1.0 - eps + eps / vocab_size, eps / vocab_size)
            losses = ops.logsumexp(y_pred, axis=-1) - ops.sum(target * y_pred, axis=-1)
        else:
            label_logit = ops.take_along_axis(y_pred, labels[..., None], axis=-1)[..., 0]
            losses = (
                ops.logsumexp(y_pred, axis=-1)
                - (1.0 - eps) * label_logit
                - eps * ops.mean(y_pred, axis=-1)
            )  # (batch, length)
        mask = ops.cast(ops.not_equal(labels, self.pad_id), losses.dtype)
        tokens = ops.cast(ops.size(mask), losses.dtype)
        return losses * mask * (tokens / ops.maximum(ops.sum(mask), 1.0))

    def get_config(self):
        return {
            "name": self.name,
            "label_smoothing": self.label_smoothing,
            "pad_id": self.pad_id,
            "dtype": self.dtype,
        }

