"""Multi-head attention (section 3.2 of "Attention Is All You Need")."""

import math

import keras
from keras import ops

from keras_transformer.compat.layers import in_shape_inference
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


@keras.saving.register_keras_serializable(package="keras_transformer")
class Stacked(keras.initializers.Initializer):
    """`parts` weights side by side on the last axis, each drawn alone.

    The kernel of a fused projection, such as Q, K and V in one
    `(d_model, 3 * d_model)` matrix, then starts as the separate kernels
    would: each `(d_model, d_model)` block has its own Glorot bound and,
    with a seeded initializer, its own seed.

    Args:
        initializer: The initializer of one part.
        parts: int. Number of parts; must divide the last axis.
    """

    def __init__(self, initializer, parts):
        self.initializer = keras.initializers.get(initializer)
        self.parts = int(parts)

    def __call__(self, shape, dtype=None):
        if shape[-1] % self.parts:
            raise ValueError(
                f"The last axis of a stacked weight must be divisible by {self.parts}. "
                f"Received: shape={shape}"
            )
        part = tuple(shape[:-1]) + (shape[-1] // self.parts,)
        return ops.concatenate(
            [_clone(self.initializer, i)(part, dtype=dtype) for i in range(self.parts)], axis=-1
        )

    def get_config(self):
        return {"initializer": keras.initializers.serialize(self.initializer), "parts": self.parts}


def _merge_masks(mask, other):
    if mask is None:
        return other
    if other is None:
        return mask
    return ops.logical_and(mask, other)


def _pair(cache):
    """`cache` as a `(key, value)` pair, or a ValueError saying what it is."""
    if isinstance(cache, (tuple, list)) and len(cache) == 2:
        return tuple(cache)
    received = type(cache).__name__
    if isinstance(cache, (tuple, list)):
        received += f" of length {len(cache)}"
    elif hasattr(cache, "shape"):
        received += f" of shape {tuple(cache.shape)}"
    raise ValueError(
        "Argument `cache` must be a pair (key, value) of tensors (batch, num_heads, length, d_k). "
        f"Received: {received}"
    )


def _write(cache, update, index):
    """`cache` `(batch, heads, L, d_k)` with `update` `(batch, heads, T,
    d_k)` written at positions `index` to `index + T`."""
    zero = ops.zeros_like(index)
    return ops.slice_update(cache, (zero, zero, index, zero), update)


def _check_sizes(name, shape, form, expected):
    """Raises a ValueError naming `name` unless each size of `shape` that is
    known here (a Python int, outside Keras' shape inference) is 1 or the
    size `expected` gives for it (an int; None: any)."""
    if in_shape_inference():  # placeholder sizes (keras_transformer/compat/layers.py)
        return
    for size, wanted in zip(shape, expected):
        if isinstance(size, int) and isinstance(wanted, int) and size not in (1, wanted):
            shown = tuple("?" if w is None else w for w in expected)
            raise ValueError(
                f"Argument `{name}` must have the shape {form} = {shown} (or 1 to broadcast). "
                f"Received: {name}.shape={tuple(shape)}"
            )


def _expand_mask(mask, batch, query_length, key_length, num_heads):
    """`attention_mask`, checked, as a boolean `(batch, 1 or heads,
    query_length, key_length)`; the sizes given (None: unknown) are those
    of the call."""
    if mask is None:
        return None
    mask = ops.cast(mask, "bool")
    rank = len(mask.shape)
    if rank == 2:  # (batch, key_length): a padding mask.
        _check_sizes("attention_mask", mask.shape, "(batch, key_length)", (batch, key_length))
        return mask[:, None, None, :]
    if rank == 3:  # (batch, query_length, key_length)
        _check_sizes("attention_mask", mask.shape, "(batch, query_length, key_length)",
                     (batch, query_length, key_length))
        return mask[:, None, :, :]
    if rank == 4:  # (batch, heads or 1, query, key)
        _check_sizes("attention_mask", mask.shape, "(batch, num_heads, query_length, key_length)",
                     (batch, num_heads, query_length, key_length))
        return mask
    raise ValueError(
        "Argument `attention_mask` must have rank 2, 3 or 4. "
        f"Received: attention_mask.shape={tuple(mask.shape)}"
    )


def _key_padding(name, mask, batch, key_length):
    """A padding mask `(batch, key_length)` (`True` at real tokens), checked,
    as a boolean `(batch, 1, 1, key_length)`."""
    if mask is None:
        return None
    if len(mask.shape) != 2:
        raise ValueError(f"Argument `{name}` must be a padding mask (batch, length). "
                         f"Received: {name}.shape={tuple(mask.shape)}")
    _check_sizes(name, mask.shape, "(batch, length)", (batch, key_length))
    return ops.cast(mask, "bool")[:, None, None, :]


def _sum(a, b):
    return None if a is None or b is None else a + b


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head scaled dot-product attention with a key/value cache.

    `num_heads` heads of size `d_k = d_v = d_model / num_heads` attend in
    parallel: `softmax(Q K^T / sqrt(d_k)) V`, with learned projections of
    the queries, keys, values and the concatenated heads. The projections
    are `keras.layers.Dense` layers, so that `model.quantize()` applies to
    them. Self-attention projects Q, K and V with one fused `(d_model, 3 *
    d_model)` Dense (`query_key_value`), and cross-attention K and V with
    one `(d_model, 2 * d_model)` Dense (`key_value`) beside `query`: one
    matrix product instead of three or two, each block initialized as its
    own `(d_model, d_model)` kernel. The attention itself runs through
    `keras.ops.dot_product_attention` (fused flash / cuDNN kernels where
    the device has them), unless the scores are asked for, attention
    dropout is on in training, or a decoding step attends over its cache
    (see `cache`).

    Arguments are named as in `keras.layers.MultiHeadAttention` where it has
    the same thing (`use_causal_mask`, `return_attention_scores`), and the
    cache's arguments as in keras-hub (`cache`, `cache_update_index`); the
    cache itself is a `(key, value)` pair with heads before positions, not
    keras-hub's `(batch, 2, length, heads, d_k)` tensor (see `cache`).

    Args:
        d_model: int. Width of the inputs and outputs.
        num_heads: int. Number of heads; must divide `d_model`.
        dropout_rate: float in [0, 1). Dropout on the attention weights
            (the paper uses 0). Defaults to `0.0`.
        cross_attention: bool. Whether the queries attend over another
            sequence (`value`, the encoder's output) rather than
            themselves. Defaults to `False`.
        use_bias: bool. Whether the projections have biases. Defaults to
            `True`.
        kernel_initializer: Initializer of each projection's kernel.
            Defaults to `"glorot_uniform"`.
        bias_initializer: Initializer of the biases. Defaults to `"zeros"`.
        **kwargs: Standard layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: float tensor `(batch, query_length, d_model)`; with a
            cache also `(batch, d_model)`, one position a row (a decoding
            step), and the output has that shape too.
        value: float tensor `(batch, key_length, d_model)` to attend over;
            cross-attention only, where it is required unless `cache` is
            given.
        attention_mask: optional boolean tensor, `True` where a query may
            attend to a key: `(batch, key_length)` (padding), `(batch,
            query_length, key_length)` or `(batch, 1 or num_heads,
            query_length, key_length)`.
        use_causal_mask: bool. Each query attends only to itself and to
            earlier positions (the decoder's self-attention).
        cache: optional key/value cache: the pair `(key, value)`, each
            `(batch, num_heads, cache_length, d_k)`, heads before
            positions, unlike the layer's inputs, so that a decoding step
            reads the cache as it lies. In self-attention the keys and
            values of `query` go into the cache, the queries attend to
            every cached position up to their own, and the updated cache is
            returned: written at `cache_update_index` in a cache of fixed
            length, or, without one, appended to the cache, which grows by
            the query's length. In cross-attention: the keys and values of
            `value`, from `project_key_value()`, used as they are; the
            query's rows may be a multiple of the cache's, each cache row
            then serving that many consecutive query rows (the hypotheses
            of one sentence), and `attention_mask` is the cache rows'
            `(batch, key_length)` padding mask.
        cache_update_index: int or scalar int tensor: position of the first
            query token in a self-attention cache of fixed length; `None`
            appends to the cache.
        return_attention_scores: bool. Also return the attention weights
            `(batch, num_heads, query_length, key_length)`.
        training: bool. Enables attention dropout.
        query_mask: optional padding mask of `query`, boolean `(batch,
            query_length)`, `True` at real tokens. In self-attention the
            keys are the queries: no query attends to a masked position.
            Padded queries are computed like the others; their outputs
            mean nothing.
        value_mask: optional padding mask of `value` `(batch, key_length)`
            (cross-attention): no query attends to a masked position.
        mask: `query_mask` under the name Keras gives it when `query` is
            the only tensor argument.

    Masks: `attention_mask`, the keys' padding mask (`value_mask` in
    cross-attention, `query_mask` or `mask` in self-attention) and the
    causal mask are combined: a query attends to a key that all of them
    allow. As in `keras.layers.MultiHeadAttention`, Keras passes the mask
    attached to an input (by `keras.layers.Embedding(mask_zero=True)`, or
    propagated by the layers after it) as `query_mask`, `value_mask` or
    `mask` unless one is given, and the output carries the query's mask
    on to the next layer. With a `cache`, only `attention_mask` is read.

    Returns:
        `output` `(batch, query_length, d_model)`; `(output, cache)` when a
        self-attention cache is updated; the scores last when asked for.

    Example:

    >>> attention = MultiHeadAttention(d_model=16, num_heads=4)
    >>> x = keras.random.normal((2, 5, 16))
    >>> attention(x, use_causal_mask=True).shape
    (2, 5, 16)
    >>> padding = keras.ops.array([[True] * 5, [True] * 3 + [False] * 2])
    >>> attention(x, query_mask=padding).shape  # no query attends to x[1, 3:]
    (2, 5, 16)

    Reference: Vaswani et al., 2017, section 3.2.
    """

    def __init__(
        self,
        d_model,
        num_heads,
        dropout_rate=0.0,
        cross_attention=False,
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
        if not isinstance(cross_attention, bool):
            raise ValueError(
                "Argument `cross_attention` must be a bool. "
                f"Received: cross_attention={cross_attention!r}"
            )
        self.d_model = int(d_model)
        self.num_heads = int(num_heads)
        self.head_dim = self.d_model // self.num_heads
        self.dropout_rate = dropout_rate
        self.cross_attention = cross_attention
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

        def dense(parts, index, name):
            """A Dense of `parts` projections, seeded from `index` on."""
            kernel = _clone(self.kernel_initializer, index)
            bias = _clone(self.bias_initializer, index)
            if parts > 1:
                kernel, bias = Stacked(kernel, parts), Stacked(bias, parts)
            return keras.layers.Dense(
                parts * self.d_model,
                use_bias=use_bias,
                kernel_initializer=kernel,
                bias_initializer=bias,
                dtype=self.dtype_policy,
                name=name,
            )

        if cross_attention:
            self.query_dense = dense(1, 0, "query")
            self.key_value_dense = dense(2, 1, "key_value")
        else:
            self.query_key_value_dense = dense(3, 0, "query_key_value")
        self.output_dense = dense(1, 3, "attention_output")
        self.dropout = keras.layers.Dropout(
            dropout_rate, dtype=self.dtype_policy, name="attention_dropout"
        )
        self.supports_masking = True  # the output carries the query's mask

    @property
    def projections(self):
        """The layer's Dense layers, inputs first, `output_dense` last."""
        if self.cross_attention:
            return [self.query_dense, self.key_value_dense, self.output_dense]
        return [self.query_key_value_dense, self.output_dense]

    def build(self, query_shape, value_shape=None):
        for layer in self.projections:
            layer.build((None, None, self.d_model))
        self.built = True

    def _heads(self, dense, x, parts=1):
        """`dense(x)` split into heads: `(batch, length, parts, num_heads, d_k)`."""
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        return ops.reshape(dense(x), (batch, length, parts, self.num_heads, self.head_dim))

    def project_key_value(self, value):
        """Keys and values of `value`, a cross-attention cache: the pair
        `(key, value)`, each `(batch, num_heads, length, d_k)`."""
        if not self.cross_attention:
            raise ValueError("`project_key_value()` is for cross-attention (`cross_attention=True`).")
        key_value = self._heads(self.key_value_dense, value, parts=2)  # (batch, length, 2, heads, d_k)
        return tuple(ops.swapaxes(key_value[:, :, i], 1, 2) for i in range(2))

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
        query_mask=None,
        value_mask=None,
        mask=None,
    ):
        if cache is not None:
            return self._call_cached(query, value, attention_mask, use_causal_mask, cache, cache_update_index,
                                     return_attention_scores, training)
        batch, length = query.shape[0], query.shape[1]
        if self.cross_attention:
            if cache_update_index is not None:
                raise ValueError("Cross-attention takes no `cache_update_index`.")
            if value is None:
                raise ValueError("Cross-attention needs `value` (or its `cache`).")
            key_length = value.shape[1]
            padding = _key_padding("value_mask", value_mask, batch, key_length)
            q = self._heads(self.query_dense, query)[:, :, 0]  # (batch, T, heads, d_k)
            k, v = ops.unstack(self._heads(self.key_value_dense, value, parts=2), 2, axis=2)
        else:
            self._check_self_attention(value)
            key_length = length
            name = "query_mask" if query_mask is not None else "mask"
            padding = _key_padding(name, query_mask if query_mask is not None else mask, batch, key_length)
            q, k, v = ops.unstack(self._heads(self.query_key_value_dense, query, parts=3), 3, axis=2)
        masks = _merge_masks(_expand_mask(attention_mask, batch, length, key_length, self.num_heads), padding)

        if return_attention_scores or (training and self.dropout_rate > 0):
            output, scores = self._attention(q, k, v, masks, training, use_causal_mask=use_causal_mask)
        else:
            if masks is not None:
                # cuDNN's kernel (JAX on GPUs) takes a mask only with its
                # query and key axes in full.
                shape = ops.shape(masks)
                masks = ops.broadcast_to(masks, (shape[0], shape[1], ops.shape(q)[1], ops.shape(k)[1]))
            output = ops.dot_product_attention(q, k, v, mask=masks, is_causal=use_causal_mask)
        batch, length = ops.shape(output)[0], ops.shape(output)[1]
        output = self.output_dense(ops.reshape(output, (batch, length, self.d_model)))  # (batch, T, d_model)
        return (output, scores) if return_attention_scores else output

    def _check_self_attention(self, value):
        if value is not None:
            raise ValueError(
                "Self-attention takes no `value`; build the layer with "
                "`cross_attention=True` to attend over another sequence."
            )

    def _call_cached(self, query, value, attention_mask, use_causal_mask, cache, cache_update_index,
                     return_attention_scores, training):
        """`call` with a cache (see the class docstring), which decoding
        reads as it lies, heads before positions: the attention is written
        out with einsums over that layout, where `ops.dot_product_attention`
        takes keys and values as `(batch, S, heads, d_k)`, and TensorFlow
        without XLA (the exported SavedModel) would copy the whole cache
        into that layout at every step."""
        single = len(query.shape) == 2  # (rows, d_model): one position a row, a decoding step
        out_shape = (-1, self.d_model) if single else ops.shape(query)
        if self.cross_attention:
            if cache_update_index is not None:
                raise ValueError("Cross-attention takes no `cache_update_index`.")
            k, v = _pair(cache)  # (sentences, heads, S, d_k) each
            mask = _expand_mask(attention_mask, k.shape[0], None, k.shape[2], self.num_heads)
            # The rows of one sentence (its hypotheses, consecutive) share its
            # keys and values: they go into the query axis of one attention.
            q = ops.reshape(self.query_dense(query), (ops.shape(k)[0], -1, self.num_heads, self.head_dim))
            output, scores = self._attention(q, k, v, mask, training, kv_axes="bnsh")  # (sentences, Q, heads, d_k)
            output = self.output_dense(ops.reshape(output, out_shape))
            if not return_attention_scores:
                return output
            # (sentences, heads, rows a sentence * T, S) -> (rows, heads, T, S)
            length = 1 if single else ops.shape(query)[1]
            scores = ops.reshape(scores, (ops.shape(k)[0], self.num_heads, -1, length, ops.shape(k)[2]))
            scores = ops.reshape(ops.transpose(scores, (0, 2, 1, 3, 4)), (-1, self.num_heads, length, ops.shape(k)[2]))
            return output, scores

        self._check_self_attention(value)
        if use_causal_mask:
            raise ValueError("A self-attention cache takes no `use_causal_mask` (the cache's positions are causal).")
        qkv = self.query_key_value_dense(query)  # (rows, [T,] 3 * d_model)
        if single:  # (rows, 3, heads, 1, d_k): q, k and v head-major as they come
            q, k, v = ops.unstack(ops.reshape(qkv, (-1, 3, self.num_heads, 1, self.head_dim)), 3, axis=1)
            q_axes, length = "bnqh", 1
        else:
            length = ops.shape(query)[1]
            q, k, v = ops.unstack(ops.reshape(qkv, (-1, length, 3, self.num_heads, self.head_dim)), 3, axis=2)
            k, v = ops.swapaxes(k, 1, 2), ops.swapaxes(v, 1, 2)  # (rows, heads, T, d_k)
            q_axes = "bqnh"
        past = _pair(cache)
        if cache_update_index is None:
            # A cache that grows: this step's keys and values are appended.
            start = None if single else ops.shape(past[0])[2]
            cache = tuple(ops.concatenate([c, ops.cast(x, c.dtype)], axis=2) for c, x in zip(past, (k, v)))
        else:
            # A cache of fixed length: written at `cache_update_index`.
            start = ops.cast(cache_update_index, "int32")  # any integer type in
            cache = tuple(_write(c, ops.cast(x, c.dtype), start) for c, x in zip(past, (k, v)))
        k, v = (ops.cast(c, self.compute_dtype) for c in cache)  # (rows, heads, L, d_k)
        mask = _expand_mask(attention_mask, query.shape[0], 1 if single else query.shape[1], k.shape[2],
                            self.num_heads)
        if cache_update_index is not None or not single:
            # Each query sees the cache up to its own position.
            key_positions = ops.arange(ops.shape(k)[2])
            query_positions = start + ops.arange(length)
            visible = key_positions[None, :] <= query_positions[:, None]  # (T, L)
            mask = _merge_masks(mask, visible[None, None, :, :])
        output, scores = self._attention(q, k, v, mask, training, q_axes=q_axes, kv_axes="bnsh")
        output = self.output_dense(ops.reshape(output, out_shape))  # (rows, [T,] d_model)
        return (output, cache, scores) if return_attention_scores else (output, cache)

    def _attention(self, q, k, v, mask, training, q_axes="bqnh", kv_axes="bsnh", use_causal_mask=False):
        """softmax(Q K^T / sqrt(d_k)) V, written out to expose the scores
        `(batch, heads, Q, S)`; the output has the layout of `q`.

        `q` is `(batch, Q, heads, d_k)`, or `(batch, heads, Q, d_k)` with
        `q_axes="bnqh"`; `k` and `v` are `(batch, S, heads, d_k)`, or
        `(batch, heads, S, d_k)` with `kv_axes="bnsh"`.
        """
        logits = ops.einsum(f"{q_axes},{kv_axes}->bnqs", q, k)  # (batch, heads, Q, S)
        logits = ops.cast(logits, "float32") / math.sqrt(self.head_dim)
        if use_causal_mask:
            t, s = ops.shape(q)[q_axes.index("q")], ops.shape(k)[kv_axes.index("s")]
            lower = ops.arange(t)[:, None] >= ops.arange(s)[None, :]
            mask = _merge_masks(mask, lower[None, None, :, :])
        if mask is not None:
            logits = ops.where(mask, logits, -1e9)
        if logits.shape[-1] == 1:
            # One key, as at a search's first step: its weight is 1 whatever
            # its logit (and `ops.softmax` warns on an axis of size 1).
            scores = ops.ones_like(logits, dtype=self.compute_dtype)
        else:
            scores = ops.cast(ops.softmax(logits, axis=-1), self.compute_dtype)
        dropped = self.dropout(scores, training=training)
        return ops.einsum(f"bnqs,{kv_axes}->{q_axes}", dropped, v), scores

    def compute_output_shape(self, query_shape, value_shape=None):
        return tuple(query_shape)

    def compute_output_spec(self, query, value=None, attention_mask=None, use_causal_mask=False, cache=None,
                            cache_update_index=None, return_attention_scores=False, training=None, **masks):
        """The outputs' shapes and dtypes, as `call` gives them, without running it."""
        results = (keras.KerasTensor(self.compute_output_shape(query.shape), dtype=self.compute_dtype),)
        length = 1 if len(query.shape) == 2 else query.shape[1]
        if cache is not None and not self.cross_attention:
            key, _ = _pair(cache)
            key_length = key.shape[2] if cache_update_index is not None else _sum(key.shape[2], length)
            results += (tuple(keras.KerasTensor((*c.shape[:2], key_length, c.shape[3]), dtype=c.dtype)
                              for c in _pair(cache)),)
        elif cache is not None:
            key_length = _pair(cache)[0].shape[2]
        else:
            key_length = (value if self.cross_attention else query).shape[1]
        if return_attention_scores:
            scores = (query.shape[0], self.num_heads, length, key_length)
            results += (keras.KerasTensor(scores, dtype=self.compute_dtype),)
        return results[0] if len(results) == 1 else results

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_model": self.d_model,
                "num_heads": self.num_heads,
                "dropout_rate": self.dropout_rate,
                "cross_attention": self.cross_attention,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
