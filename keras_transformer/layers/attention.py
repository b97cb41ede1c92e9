"""Multi-head attention (section 3.2 of "Attention Is All You Need")."""

import math

import keras
from keras import ops

from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.token_sums import add_bias
from keras_transformer.validation import check_positive, check_rate


def _clone(initializer, index):
    config = keras.initializers.serialize(initializer)
    seed = config.get("config", {}).get("seed")
    if isinstance(seed, int):
        config["config"]["seed"] = seed + index
    return keras.initializers.deserialize(config)


def _merge_masks(mask, causal_mask):
    if mask is None:
        return causal_mask
    if causal_mask is None:
        return mask
    return ops.logical_and(mask, causal_mask)


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


def _tokens_matmul(x, kernel, features):
    """`x` `(batch, length, ...)` times a `(k, n)` kernel, as one 2-D product.

    The tokens are flattened to `(batch * length, k)` and the result is
    shaped `(batch, length) + features`. Written as an einsum, or as a
    batched product, TensorFlow's gradient of the output projection is one
    product per sentence and a sum over the batch, and XLA computes the
    fused Q/K/V kernel's gradient transposed, so that Adam then reads it
    across its rows. With the tokens flattened both gradients are single
    `x^T @ dy` products in the kernel's own layout (base, CPU: 1,299 -> 1,205
    ms per step; benchmarks/README.md).
    """
    batch_length = tuple(ops.shape(x)[:2])
    out = ops.matmul(ops.reshape(x, (-1, ops.shape(kernel)[0])), kernel)  # (tokens, n)
    return ops.reshape(out, batch_length + features)


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head scaled dot-product attention.

    `num_heads` heads of size `d_k = d_v = d_model / num_heads` attend in
    parallel: `softmax(Q K^T / sqrt(d_k)) V`, with learned projections of the
    queries, keys, values and the concatenated output. The query, key and
    value projections are one fused weight of shape
    `(d_model, 3, num_heads, d_k)`: self-attention projects with one matrix
    multiplication, cross-attention uses the query slice on the queries and
    the key/value slices on the encoder output.

    When neither attention weights nor attention dropout are needed, the
    attention itself runs through `keras.ops.dot_product_attention`, which
    uses fused kernels (flash / cuDNN) on GPUs.

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
        memory: optional float tensor `(batch, key_length, d_model)` to attend
            over (cross-attention). `None` means self-attention.
        attention_mask: optional boolean tensor, `True` where a query may attend to a
            key: `(batch, key_length)` (padding), `(batch, query_length,
            key_length)` or `(batch, 1 or num_heads, query_length,
            key_length)`.
        causal: bool. Self-attention may only look at earlier positions.
        key_value: optional tensor `(batch, 2, key_length, num_heads, d_k)`
            of keys and values already projected with `project_key_value()`
            (a cross-attention cache); replaces `memory`.
        cache: optional self-attention key/value cache `(batch, 2,
            max_length, num_heads, d_k)`. The keys and values of `query` are
            written at `cache_index`, and the queries attend to all cached
            positions up to their own. The updated cache is returned.
        cache_index: int or scalar int tensor: position of the first query
            token in the cache.
        return_attention_weights: bool. Also return the attention weights
            `(batch, num_heads, query_length, key_length)`.
        training: bool. Enables attention dropout.

    Returns:
        `output` of shape `(batch, query_length, d_model)`, or a tuple
        `(output, cache)`, `(output, weights)` or `(output, cache, weights)`
        when a cache or the weights are asked for.

    Example:

    >>> attention = MultiHeadAttention(d_model=16, num_heads=4)
    >>> x = keras.random.normal((2, 5, 16))
    >>> attention(x, causal=True).shape
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
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.dropout_rate = dropout_rate
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.dropout = Dropout(
            dropout_rate, dtype=self.dtype_policy, name="attention_dropout"
        )

    def build(self, input_shape):
        heads = (self.num_heads, self.head_dim)
        # Glorot fan-in/fan-out of each projection as if it were a
        # (d_model, d_model) matrix.
        self.qkv_kernel = self.add_weight(
            name="qkv_kernel",
            shape=(self.d_model, 3) + heads,
            initializer=self._per_projection(self.kernel_initializer),
        )
        self.output_kernel = self.add_weight(
            name="output_kernel",
            shape=heads + (self.d_model,),
            initializer=self._per_projection(self.kernel_initializer),
        )
        if self.use_bias:
            self.qkv_bias = self.add_weight(
                name="qkv_bias", shape=(3,) + heads,
                initializer=self.bias_initializer,
            )
            self.output_bias = self.add_weight(
                name="output_bias", shape=(self.d_model,),
                initializer=self.bias_initializer,
            )
        self.dropout.build(None)
        self.built = True

    def _per_projection(self, initializer):
        """Draws each projection as its own (d_model, d_model) matrix.

        The fused layouts then start with the fans (and so the scale) of
        separate projections, as in the paper. Each draw uses a clone of the
        initializer (a seeded one gets seed + i), since one initializer
        object gives the same values at every call.
        """

        def init(shape, dtype=None):
            count = math.prod(shape) // self.d_model**2
            parts = [
                _clone(initializer, i)((self.d_model, self.d_model), dtype=dtype)
                for i in range(count)
            ]
            return ops.reshape(ops.stack(parts, axis=1), shape)

        return init

    def _project(self, x, kernel, bias):
        """x @ kernel (+ bias) for a `(d_model, slots, heads, d_k)` kernel."""
        features = tuple(kernel.shape[1:])  # (slots, heads, head_dim)
        kernel = ops.reshape(ops.cast(kernel, self.compute_dtype), (self.d_model, -1))
        out = _tokens_matmul(x, kernel, features)  # (batch, length, slots, heads, head_dim)
        if self.use_bias:
            out = add_bias(out, ops.cast(bias, self.compute_dtype))
        return out

    def _split(self):
        """The query and key/value parts of the fused kernel and bias.

        One split, not two slices: the gradient of a split is one
        concatenation, where each slice's would be a zero-padded copy of the
        whole kernel (or bias), added to the others.
        """
        kernel_q, kernel_kv = ops.split(self.qkv_kernel, [1], axis=1)
        bias_q, bias_kv = ops.split(self.qkv_bias, [1], axis=0) if self.use_bias else (None, None)
        return (kernel_q, bias_q), (kernel_kv, bias_kv)

    def project_key_value(self, memory):
        """Keys and values of `memory`: `(batch, 2, length, heads, d_k)`."""
        kv = self._project(memory, *self._split()[1])  # (batch, S, 2, heads, d_k)
        return ops.transpose(kv, (0, 2, 1, 3, 4))

    def call(
        self,
        query,
        memory=None,
        attention_mask=None,
        causal=False,
        key_value=None,
        cache=None,
        cache_index=None,
        return_attention_weights=False,
        training=None,
    ):
        query_length = ops.shape(query)[1]
        if memory is None and key_value is None:
            qkv = self._project(query, self.qkv_kernel, self.qkv_bias if self.use_bias else None)
            # (batch, T, heads, d_k) each. Unstacking, not slicing: the
            # gradient is one stack of dq, dk, dv, not three zero-padded
            # copies of qkv summed (which XLA's CPU backend materialises).
            q, k, v = ops.unstack(qkv, 3, axis=2)
        else:
            if causal or cache is not None:
                raise ValueError(
                    "`causal` and `cache` apply to self-attention only; "
                    "do not pass them with `memory` or `key_value`."
                )
            query_weights, key_value_weights = self._split()
            q = self._project(query, *query_weights)[:, :, 0]
            if key_value is None:
                # Straight from the projection, not through the cache's
                # layout: XLA's CPU backend copies a transposed slice at a
                # third of the speed (0.66 against 0.22 ms at base).
                kv = self._project(memory, *key_value_weights)  # (batch, S, 2, heads, d_k)
                k, v = ops.unstack(kv, 2, axis=2)
            else:
                k, v = ops.unstack(key_value, 2, axis=1)  # (batch, S, heads, d_k) each
        mask = _expand_mask(attention_mask)

        if cache is not None:
            if cache_index is None:
                raise ValueError("Argument `cache_index` is required with `cache`.")
            # Write this step's keys/values, then attend over the whole cache
            # up to each query's own position.
            update = ops.stack([k, v], axis=1)  # (batch, 2, T, heads, d_k)
            update = ops.cast(update, cache.dtype)
            zero = ops.zeros_like(cache_index)
            cache = ops.slice_update(cache, (zero, zero, cache_index, zero, zero), update)
            k = ops.cast(cache[:, 0], self.compute_dtype)
            v = ops.cast(cache[:, 1], self.compute_dtype)
            key_positions = ops.arange(ops.shape(cache)[2])
            query_positions = cache_index + ops.arange(query_length)
            visible = key_positions[None, :] <= query_positions[:, None]
            mask = _merge_masks(mask, visible[None, None, :, :])
            causal = False

        explicit = return_attention_weights or (training and self.dropout_rate > 0)
        if explicit:
            output, weights = self._attention(q, k, v, mask, causal, training)
        else:
            # Fused kernels where the backend and device have them. cuDNN's
            # (JAX on GPU) takes a mask only with its query axis in full.
            if mask is not None:
                shape = ops.shape(mask)
                mask = ops.broadcast_to(mask, (shape[0], shape[1], ops.shape(q)[1], ops.shape(k)[1]))
            output = ops.dot_product_attention(q, k, v, mask=mask, is_causal=causal)
        # (batch, T, heads, d_k) -> (batch, T, d_model)
        kernel = ops.reshape(ops.cast(self.output_kernel, self.compute_dtype), (self.d_model, self.d_model))
        output = _tokens_matmul(output, kernel, (self.d_model,))
        if self.use_bias:
            output = add_bias(output, ops.cast(self.output_bias, self.compute_dtype))

        results = (output,)
        if cache is not None:
            results += (cache,)
        if return_attention_weights:
            results += (weights,)
        return results[0] if len(results) == 1 else results

    def _attention(self, q, k, v, mask, causal, training):
        """softmax(Q K^T / sqrt(d_k)) V, written out to expose the weights."""
        scale = 1.0 / math.sqrt(self.head_dim)
        # (batch, heads, T, S), softmax in float32 under mixed precision.
        logits = ops.einsum("btnh,bsnh->bnts", q, k)
        logits = ops.cast(logits, "float32") * scale
        if causal:
            t, s = ops.shape(q)[1], ops.shape(k)[1]
            lower = ops.arange(t)[:, None] >= ops.arange(s)[None, :]
            mask = _merge_masks(mask, lower[None, None, :, :])
        if mask is not None:
            logits = ops.where(mask, logits, -1e9)
        weights = ops.cast(ops.softmax(logits, axis=-1), self.compute_dtype)
        dropped = self.dropout(weights, training=training)
        output = ops.einsum("bnts,bsnh->btnh", dropped, v)
        return output, weights

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
