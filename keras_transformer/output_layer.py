"""The output layer: pre-softmax projection and its loss as one operation.

The logits `hidden @ embeddings^T` (section 3.4) are `(tokens, vocab)`, and
a loss that only sees them makes several passes over that large tensor:
its reductions, then, for the gradient, `softmax - target` written out in
full before the two products that take it back to `hidden` and
`embeddings`. Seen together with the projection, most of that is not
needed. With `E = exp(logits - max)` and `S` its row sums (the forward pass
computes both), `u` each token's weight in the token mean and `eps` the
label smoothing, the gradient of the logits is

    G = (E / S - (1 - eps) one_hot(label) - eps / V) * u
      = (E' / S - eps / V) * u,    E' = E - (1 - eps) S one_hot(label)

`E'` is `E` with one element per token changed, in place. Every other
factor is per token, so it moves to the small side of the products:

    d hidden     = (u / S) * (E' @ W) - eps * u * mean(W)
    d embeddings = E'^T @ ((u / S) * hidden) - eps / V * sum(u * hidden)

No `(tokens, vocab)` gradient is written; the products read the `E'` that
the forward pass stored. The smoothing term needs `mean(logits)`, which is
`hidden @ mean(W)`: no pass over the logits either. On 2 CPU cores this
cuts the `tiny` preset's training step by about 9 ms of 130. At `base`
(d_model 512) it saves nothing measurable: `mean(W)` and the last term of
`d embeddings` are passes over the `(vocab, d_model)` table, which cost
there about what the fused loss saves (benchmarks/README.md).

`project()` returns the logits with a record of the two tensors they were
computed from (`Transformer` asks for it in training only).
`LabelSmoothedCrossEntropy` computes its loss with `projected_cross_entropy`
when the logits it gets carry that record, and from the logits alone
otherwise (the same values either way). Logits changed in any way (scaled,
sliced, cast) are new tensors without the record.

Example:

>>> hidden = keras.random.normal((2, 3, 8))
>>> embeddings = keras.random.normal((50, 8))
>>> logits = project(hidden, embeddings)
>>> projection_of(logits) is not None
True
"""

import weakref

from keras import ops

_ATTRIBUTE = "_keras_transformer_projection"
# For tensors that take no attributes (JAX tracers): id -> projection, kept
# until the tensor is garbage-collected.
_BY_ID = {}


def project(hidden, embeddings, record=True):
    """`hidden @ embeddings^T`, `(..., vocab)`, carrying its projection.

    Args:
        hidden: float tensor `(batch, length, d_model)`: the decoder output.
        embeddings: float tensor `(vocab, d_model)` in the compute dtype
            (a tensor, not a variable).
        record: bool. Whether the logits keep references to `hidden` and
            `embeddings` for the loss. Only training needs them; logits kept
            by a caller would otherwise keep those two tensors alive too.
    """
    logits = ops.matmul(hidden, ops.transpose(embeddings))  # (batch, length, vocab)
    if not record:
        return logits
    projection = (hidden, embeddings)
    try:
        setattr(logits, _ATTRIBUTE, projection)
    except AttributeError:
        _BY_ID[id(logits)] = projection
        weakref.finalize(logits, _BY_ID.pop, id(logits), None)
    return logits


def projection_of(logits):
    """The `(hidden, embeddings)` that `logits` came from, or `None`."""
    projection = getattr(logits, _ATTRIBUTE, None)
    return projection if projection is not None else _BY_ID.get(id(logits))


def projected_cross_entropy(labels, logits, hidden, embeddings, label_smoothing, pad_id=0):
    """Label-smoothed cross-entropy of `logits = project(hidden, embeddings)`.

    The mean over the tokens whose label is not `pad_id`, in float32, equal
    to `token_mean(smoothed_cross_entropy(labels, logits, eps))`. Its
    gradient goes to `hidden` and `embeddings` as the module docstring
    derives; `logits` (computed already by `project`, read but not
    differentiated) get none.

    Args:
        labels: int tensor `(batch, length)`.
        logits: `(batch, length, vocab)`, the output of `project`.
        hidden: `(batch, length, d_model)`, as passed to `project`.
        embeddings: `(vocab, d_model)`, as passed to `project`.
        label_smoothing: float in [0, 1).
        pad_id: int. Label id that adds nothing to the loss.
    """
    eps = label_smoothing
    vocab_size, d_model = ops.shape(embeddings)
    labels = ops.reshape(ops.cast(labels, "int32"), (-1,))  # (tokens,)
    mask = ops.cast(ops.not_equal(labels, pad_id), "float32")
    count = ops.maximum(ops.sum(mask), 1.0)

    at_label = ops.stack([ops.arange(ops.shape(labels)[0], dtype="int32"), labels], axis=1)

    @ops.custom_gradient
    def loss(logits, hidden, embeddings):
        x = ops.cast(ops.reshape(logits, (-1, vocab_size)), "float32")  # (tokens, vocab)
        h = ops.cast(ops.reshape(hidden, (-1, d_model)), "float32")  # (tokens, d_model)
        peak = ops.max(x, axis=-1)
        exps = ops.exp(x - peak[:, None])
        sums = ops.sum(exps, axis=-1)  # (tokens,)
        label_logit = ops.take_along_axis(x, labels[:, None], axis=-1)[:, 0]
        # E', in the compute dtype (bf16 under mixed precision: no float32
        # copy of the logits is kept): each row's label element less (1 - eps) S.
        label_exp = ops.exp(label_logit - peak)
        kept = ops.scatter_update(
            ops.cast(exps, embeddings.dtype), at_label,
            ops.cast(label_exp - (1.0 - eps) * sums, embeddings.dtype),
        )
        mean_embedding = ops.mean(ops.cast(embeddings, "float32"), axis=0)  # (d_model,)
        per_token = (
            peak + ops.log(sums) - (1.0 - eps) * label_logit
            - eps * ops.matmul(h, mean_embedding)  # mean(logits), without reading them
        )

        def gradient(upstream):
            weight = (upstream * mask / count)[:, None]  # u: (tokens, 1)
            scale = weight / sums[:, None]  # u / S
            products = ops.cast(ops.matmul(kept, embeddings), "float32")  # E' @ W
            d_hidden = scale * products - eps * weight * mean_embedding
            scaled = ops.cast(scale * h, embeddings.dtype)
            d_embeddings = (
                ops.cast(ops.matmul(ops.transpose(kept), scaled), "float32")  # E'^T @ (u/S * h)
                - (eps / ops.cast(vocab_size, "float32")) * ops.sum(weight * h, axis=0)
            )
            return (
                None,
                ops.cast(ops.reshape(d_hidden, ops.shape(hidden)), hidden.dtype),
                ops.cast(d_embeddings, embeddings.dtype),
            )

        return ops.sum(per_token * mask) / count, gradient

    return loss(ops.stop_gradient(logits), hidden, embeddings)
