"""Label-smoothed cross-entropy over non-padding tokens (section 5.4)."""

import keras
from keras import ops

from keras_transformer.validation import check_rate


@keras.saving.register_keras_serializable(package="keras_transformer")
class LabelSmoothedCrossEntropy(keras.losses.Loss):
    """Cross-entropy against `(1 - eps) * one_hot + eps / vocab_size`.

    Averaged over the tokens whose label is not `pad_id`; padding adds
    nothing to the loss or to its normaliser. Logits are upcast to float32
    first, so the loss is exact under mixed precision. With log-softmax
    written as `logits - logsumexp(logits)`, the smoothed loss is

        loss = lse - sum(target * logits),  target = (1 - eps) * one_hot + eps / V

    where the target is a comparison of the label with the vocabulary ids,
    fused by the compiler into the reduction; its gradient, `softmax -
    target`, is one fused pass too. No probability tensor is stored.

    Args:
        label_smoothing: float in [0, 1). The paper's eps_ls. Defaults to
            `0.1`.
        pad_id: int. Label id that is ignored. Defaults to `0`.
        **kwargs: `name`, `dtype`; the reduction is fixed (a token mean).

    Example:

    >>> loss = LabelSmoothedCrossEntropy()
    >>> labels = keras.ops.array([[4, 5, 0]])
    >>> loss(labels, keras.random.normal((1, 3, 10)))  # mean over 2 tokens
    """

    def __init__(self, label_smoothing=0.1, pad_id=0, name="label_smoothed_cross_entropy", **kwargs):
        kwargs.pop("reduction", None)
        super().__init__(name=name, reduction="sum_over_batch_size", **kwargs)
        check_rate("label_smoothing", label_smoothing)
        self.label_smoothing = label_smoothing
        self.pad_id = pad_id

    def call(self, y_true, y_pred):
        loss = token_mean(
            smoothed_cross_entropy(y_true, y_pred, self.label_smoothing),
            ops.not_equal(y_true, self.pad_id),
        )
        return replica_share(loss)

    def get_config(self):
        return {
            "name": self.name,
            "label_smoothing": self.label_smoothing,
            "pad_id": self.pad_id,
        }


def smoothed_cross_entropy(labels, logits, label_smoothing):
    """Per-token smoothed cross-entropy `(batch, length)`, in float32.

    `lse - sum(target * logits)` with the smoothed target written as a
    comparison with the label ids, not a gather: the gradient with respect
    to the logits, `softmax - target`, is then one element-wise expression
    that XLA fuses into a single pass producing the logits' dtype, where a
    gather's gradient (a scatter into zeros) makes it materialise float32
    copies of the `(batch, length, vocab)` tensor. PyTorch runs eagerly and
    would store the target, so it gathers the label's logit instead.
    """
    logits = ops.cast(logits, "float32")  # (batch, length, vocab)
    labels = ops.cast(labels, "int32")
    lse = ops.logsumexp(logits, axis=-1)
    eps = label_smoothing
    if keras.backend.backend() == "torch":
        label_logit = ops.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
        return lse - (1.0 - eps) * label_logit - eps * ops.mean(logits, axis=-1)
    vocab_size = ops.shape(logits)[-1]
    is_label = ops.equal(ops.arange(vocab_size, dtype="int32"), labels[..., None])
    off = eps / ops.cast(vocab_size, "float32")  # the size may be a tensor
    target = ops.where(is_label, 1.0 - eps + off, off)  # (batch, length, vocab)
    return lse - ops.sum(target * logits, axis=-1)


def replica_share(loss):
    """`loss / num_replicas` inside a `tf.distribute` strategy, else `loss`.

    Under a strategy each replica computes the loss of its share of the batch
    and the gradients are summed across replicas. Keras divides its built-in
    losses by the number of replicas to turn that sum into a mean, but only
    losses that are not already scalars; our loss is a scalar token mean, so
    it does this itself (`fit` multiplies it back for the logged loss).
    """
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        if replicas > 1:
            loss = loss / replicas
    return loss


def token_mean(values, mask):
    """Mean of `values` where `mask` is True (0 when nothing is)."""
    mask = ops.cast(mask, values.dtype)
    return ops.sum(values * mask) / ops.maximum(ops.sum(mask), 1.0)
