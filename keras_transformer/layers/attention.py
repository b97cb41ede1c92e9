"""Multi-head attention (section 3.2 of "Attention Is All You Need")."""

import math

import keras
from keras import ops

from keras_transformer.validation import check_positive, check_rate


def _clone(initializer, index):
    """A new initializer like `initializer`; a seeded one gets `seed + index`.

    One initializer object gives the same values at every call, so each
    projection draws from its own clone (as `keras.layers.MultiHeadAttention`
    does), and seeded clones differ.
    """
    config = keras.initializers.serialize(initializer)
    seed = config.get("config", {}).get("seed")
    if isinstance(seed, int):
        config["config"]["seed"] = seed + index
    return keras.initializers.deserialize(config)


def _merge_masks(mask, other):
    if mask is None:
        return other
    if other is None:
        return mask
    return ops.logical_and(mask, other)


def _expand_mask(mask):
    """Brings a boolean mask to (batch, 1, query_length, key_length)."""
    if mask is None:
        return None
    mask = ops.cast(mask, "bool")
    if len(mask.shape) == 2:  # (batch, key_length): a padding mask.
        return mask[:, None, None, :]
    if len(mask.shape) == 3:  # (batch, query_length, key_length)
        return mask[:, None, :, :]
    if len(mask.shape) == 4:  # already (batch, heads or 1, query, key)
        return mask
    raise ValueError(
        "Argument `attention_mask` must have rank 2, 3 or 4. "
        f"Received: attention_mask.shape={mask.shape}"
    )


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head scaled dot-product attention with a key/value cache.

    `num_heads` heads of size `d_k = d_v = d_model / num_heads` attend in
    parallel: `softmax(Q K^T / sqrt(d_k)) V`, with learned projections of
    the queries, keys, values and the concatenated heads. Each projection
    is a `keras.layers.Dense` of `(d_model, d_model)`, so that
    `model.quantize()` applies to it. The attention itself runs through
    `keras.ops.dot_product_attention` (fused flash / cuDNN kernels where
    the device has them), unless the scores are asked for or attention
    dropout is on in training.

    Arguments are named as in `keras.layers.MultiHeadAttention` where it has
    the same thing (`use_causal_mask`, `return_attention_scores`), and the
    cache as in keras-hub (`cache`, `cache_update_index`).

    Args:
        d_model: int. Width of the inputs and outputs.
        num_heads: int. Number of heads; must divide `d_model`.
        dropout_rate: float in [0, 1). Dropout on the attention weights
            (the paper uses 0). Defaults to `0.0`.
        use_bias: bool. Whether the projections have biases. Defaults to
            `True`.
        kernel_initializer: Initializer of the projection kernels. Defaults
            to `"glorot_uniform"`.
        bias_initializer: Initializer of the biases. Defaults to `"zeros"`.
        **kwargs: Standard layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: float tensor `(batch, query_length, d_model)`.
        value: optional float tensor `(batch, key_length, d_model)` to attend
            over (cross-attention). `None` means self-attention.
        attention_mask: optional boolean tensor, `True` where a query may
            attend to a key: `(batch, key_length)` (padding), `(batch,
            query_length, key_length)` or `(batch, 1 or num_heads,
            query_length, key_length)`.
        use_causal_mask: bool. Each query attends only to itself and to
            earlier positions (the decoder's self-attention).
        cache: optional key/value cache `(batch, 2, cache_length,
            num_heads, d_k)`. With `cache_update_index`: a self-attention
            cache; the keys and values of `query` are written at that
            position, the queries attend to every cached position up to
            their own, and the updated cache is returned. Without it: the
            keys and values of `value`, from `project_key_value()`, used
            as they are.
        cache_update_index: int or scalar int tensor: position of the first
            query token in the self-attention cache.
        return_attention_scores: bool. Also return the attention weights
            `(batch, num_heads, query_length, key_length)`.
        training: bool. Enables attention dropout.

    Returns:
        `output` `(batch, query_length, d_model)`; `(output, cache)` when a
        self-attention cache is updated; the scores last when asked for.

    Example:

    >>> attention = MultiHeadAttention(d_model=16, num_heads=4)
    >>> x = keras.random.normal((2, 5, 16))
    >>> attention(x, use_causal_mask=True).shape
    (2, 5, 16)

    Reference: Vaswani et al., 2017, section 3.2.
    """

    def __init__(
        self,
        d_model,
        num_heads,
        dropout_rate=0.0,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive("d_model", d_model)
        check_positive("num_heads", num_heads)
        check_rate("dropout_rate", dropout_rate)
        if d_model % num_heads:
            raise ValueError(
                "Argument `d_model` must be divisible by `num_heads`. "
                f"Received: d_model={d_model}, num_heads={num_heads}"
            )
        self.d_model = int(d_model)
        self.num_heads = int(num_heads)
        self.head_dim = self.d_model // self.num_heads
        self.dropout_rate = dropout_rate
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

        def dense(index, name):
            return keras.layers.Dense(
                self.d_model,
                use_bias=use_bias,
                kernel_initializer=_clone(self.kernel_initializer, index),
                bias_initializer=_clone(self.bias_initializer, index),
                dtype=self.dtype_policy,
                name=name,
            )

        self.query_dense = dense(0, "query")
        self.key_dense = dense(1, "key")
        self.value_dense = dense(2, "value")
        self.output_dense = dense(3, "attention_output")
        self.dropout = keras.layers.Dropout(
            dropout_rate, dtype=self.dtype_policy, name="attention_dropout"
        )

    def build(self, input_shape):
        shape = (None, None, self.d_model)
        for layer in (self.query_dense, self.key_dense, self.value_dense, self.output_dense):
            layer.build(shape)
        self.built = True

    def _heads(self, dense, x):
        """`dense(x)` split into heads: `(batch, length, num_heads, d_k)`."""
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        return ops.reshape(dense(x), (batch, length, self.num_heads, self.head_dim))

    def project_key_value(self, value):
        """Keys and values of `value`, a cross-attention cache:
        `(batch, 2, length, num_heads, d_k)`."""
        keys, values = self._heads(self.key_dense, value), self._heads(self.value_dense, value)
        return ops.stack([keys, values], axis=1)

    def call(
        self,
        query,
        value=None,
        attention_mask=None,
        use_causal_mask=False,
        cache=None,
        cache_update_index=None,
        return_attention_scores=False,
        training=None,
    ):
        q = self._heads(self.query_dense, query)  # (batch, T, heads, d_k)
        mask = _expand_mask(attention_mask)
        if cache is not None and cache_update_index is not None:
            # Self-attention, one step of decoding: write this step's keys
            # and values, then attend over the cache up to each query.
            if value is not None or use_causal_mask:
                raise ValueError(
                    "A self-attention cache (`cache` with `cache_update_index`) takes "
                    "neither `value` nor `use_causal_mask`."
                )
            update = ops.stack([self._heads(self.key_dense, query), self._heads(self.value_dense, query)], axis=1)
            zero = ops.zeros_like(cache_update_index)
            start = (zero, zero, cache_update_index, zero, zero)
            cache = ops.slice_update(cache, start, ops.cast(update, cache.dtype))
            k, v = ops.unstack(ops.cast(cache, self.compute_dtype), 2, axis=1)
            key_positions = ops.arange(ops.shape(cache)[2])
            query_positions = cache_update_index + ops.arange(ops.shape(query)[1])
            visible = key_positions[None, :] <= query_positions[:, None]  # (T, cache_length)
            mask = _merge_masks(mask, visible[None, None, :, :])
        elif cache is not None:
            k, v = ops.unstack(cache, 2, axis=1)  # a cross-attention cache
        else:
            source = query if value is None else value
            k, v = self._heads(self.key_dense, source), self._heads(self.value_dense, source)

        if return_attention_scores or (training and self.dropout_rate > 0):
            output, scores = self._attention(q, k, v, mask, use_causal_mask, training)
        else:
            if mask is not None:
                # cuDNN's kernel (JAX on GPUs) takes a mask only with its
                # query and key axes in full.
                shape = ops.shape(mask)
                mask = ops.broadcast_to(mask, (shape[0], shape[1], ops.shape(q)[1], ops.shape(k)[1]))
            output = ops.dot_product_attention(q, k, v, mask=mask, is_causal=use_causal_mask)
        batch, length = ops.shape(output)[0], ops.shape(output)[1]
        output = self.output_dense(ops.reshape(output, (batch, length, self.d_model)))  # (batch, T, d_model)

        results = (output,)
        if cache_update_index is not None and cache is not None:
            results += (cache,)
        if return_attention_scores:
            results += (scores,)
        return results[0] if len(results) == 1 else results

    def _attention(self, q, k, v, mask, use_causal_mask, training):
        """softmax(Q K^T / sqrt(d_k)) V, written out to expose the scores."""
        logits = ops.einsum("btnh,bsnh->bnts", q, k)  # (batch, heads, T, S)
        logits = ops.cast(logits, "float32") / math.sqrt(self.head_dim)
        if use_causal_mask:
            t, s = ops.shape(q)[1], ops.shape(k)[1]
            lower = ops.arange(t)[:, None] >= ops.arange(s)[None, :]
            mask = _merge_masks(mask, lower[None, None, :, :])
        if mask is not None:
            logits = ops.where(mask, logits, -1e9)
        scores = ops.cast(ops.softmax(logits, axis=-1), self.compute_dtype)
        dropped = self.dropout(scores, training=training)
        return ops.einsum("bnts,bsnh->btnh", dropped, v), scores

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_model": self.d_model,
                "num_heads": self.num_heads,
                "dropout_rate": self.dropout_rate,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
