"""Label-smoothed cross-entropy over non-padding tokens (section 5.4)."""

import keras
from keras import ops

from keras_transformer.output_layer import projected_cross_entropy, projection_of
from keras_transformer.validation import check_non_negative_int, check_rate


@keras.saving.register_keras_serializable(package="keras_transformer")
class LabelSmoothedCrossEntropy(keras.losses.Loss):
    """Cross-entropy against `(1 - eps) * one_hot + eps / vocab_size`.

    Averaged over the tokens whose label is not `pad_id`; padding adds
    nothing to the loss or to its normaliser. Logits are upcast to float32
    first, so the loss is exact under mixed precision. With log-softmax
    written as `logits - logsumexp(logits)`, the smoothed loss is

        loss = lse - sum(target * logits),  target = (1 - eps) * one_hot + eps / V

    computed as `lse - (1 - eps) * logits[label] - eps * mean(logits)`,
    with the gradient `softmax - target` given by hand as one fused pass
    over the logits. No probability tensor is stored.

    Given the training logits of `Transformer` (which carry the hidden
    states and embeddings they were projected from; `output_layer.project`), on
    TensorFlow and JAX and without `sample_weight`, the loss is computed
    with `output_layer.projected_cross_entropy` instead: the same value,
    with the gradient handed to the hidden states and the embeddings
    directly, so that no logits-sized gradient is written.

    With `sample_weight` (per sentence `(batch,)` or per token `(batch,
    length)`), each token's loss is multiplied by its weight before the sum,
    and the sum is still divided by the number of non-padding tokens, as
    Keras' `"sum_over_batch_size"` reduction divides by the element count.

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
        check_non_negative_int("pad_id", pad_id)
        self.label_smoothing = label_smoothing
        self.pad_id = pad_id

    def __call__(self, y_true, y_pred, sample_weight=None):
        # Before Keras converts `y_pred`: a converted tensor is a new one,
        # without the record of its projection.
        projection = projection_of(y_pred)
        if sample_weight is not None:
            with keras.name_scope(self.name):
                values = smoothed_cross_entropy(y_true, y_pred, self.label_smoothing)
                values = values * token_weights(sample_weight, values)
                return replica_share(token_mean(values, ops.not_equal(y_true, self.pad_id)))
        # PyTorch: Keras' custom gradients there turn any error into NaN
        # gradients, and the loss below is differentiated automatically.
        if projection is None or keras.backend.backend() == "torch":
            return super().__call__(y_true, y_pred)
        with keras.name_scope(self.name):
            loss = projected_cross_entropy(y_true, y_pred, *projection, self.label_smoothing, self.pad_id)
            return replica_share(loss)

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

    The logits are upcast to float32 inside, so under mixed precision the
    loss is exact and the gradient keeps only the bfloat16 logits.

    With `target = (1 - eps) * one_hot + eps / V`, `sum(target * logits)` is
    `(1 - eps) * logits[label] + eps * mean(logits)`, so the forward pass is
    three reductions over the logits (max, sum of exponentials, sum) and a
    gather of one logit per token. The gradient is given by hand,
    `softmax - target`, with the target written as a comparison of the
    label with the vocabulary ids: one element-wise pass over the logits
    that the compiler fuses, producing the logits' dtype. Left to automatic
    differentiation, the gather's gradient is a scatter into zeros (XLA then
    materialises float32 copies of the `(batch, length, vocab)` tensor) and
    the stored `exp(logits - max)` costs one more write and read.
    PyTorch runs eagerly and would store the target, so there the
    gradient is automatic.
    """
    labels = ops.cast(labels, "int32")  # (batch, length)
    eps = label_smoothing

    def forward(x):  # x: (batch, length, vocab) float32 logits
        lse = ops.logsumexp(x, axis=-1)  # (batch, length)
        label_logit = ops.take_along_axis(x, labels[..., None], axis=-1)[..., 0]
        return lse - (1.0 - eps) * label_logit - eps * ops.mean(x, axis=-1), lse

    if keras.backend.backend() == "torch":
        return forward(ops.cast(logits, "float32"))[0]

    @ops.custom_gradient
    def loss(x):  # the logits in their own dtype: what the gradient keeps
        value, lse = forward(ops.cast(x, "float32"))

        def gradient(upstream):  # upstream: (batch, length)
            vocab_size = ops.shape(x)[-1]
            is_label = ops.equal(ops.arange(vocab_size, dtype="int32"), labels[..., None])
            off = eps / ops.cast(vocab_size, "float32")  # the size may be a tensor
            target = ops.where(is_label, 1.0 - eps + off, off)  # (batch, length, vocab)
            softmax = ops.exp(ops.cast(x, "float32") - lse[..., None])
            return ops.cast((softmax - target) * upstream[..., None], x.dtype)

        return value, gradient

    return loss(ops.convert_to_tensor(logits))


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


def token_mean(values, mask):
    """Mean of `values` where `mask` is True (0 when nothing is)."""
    mask = ops.cast(mask, values.dtype)
    return ops.sum(values * mask) / ops.maximum(ops.sum(mask), 1.0)
