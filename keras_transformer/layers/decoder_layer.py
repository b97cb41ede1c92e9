"""One decoder layer: causal self-attention, cross-attention, feed-forward."""

import keras

from keras_transformer.layers.attention import MultiHeadAttention
from keras_transformer.layers.encoder_layer import EncoderLayer
from keras_transformer.layers.residual import residual


@keras.saving.register_keras_serializable(package="keras_transformer")
class DecoderLayer(EncoderLayer):
    """Causal self-attention, attention over the encoder output, and FFN.

    Takes the same arguments as `EncoderLayer`. Each of the three sub-layers
    sits in a residual block with dropout and LayerNorm.

    Call arguments:
        x: float tensor `(batch, target_length, d_model)`; with caches
            also `(batch, d_model)`, one position a row (a decoding step).
        memory: encoder output `(batch, source_length, d_model)`; may be
            `None` when `cross_attention_cache` is given.
        memory_mask: optional boolean `(batch, source_length)`, `True` for
            real source tokens. Keras passes the mask attached to `memory`
            under this name where none is given.
        self_attention_cache: optional `(key, value)` cache for
            incremental decoding, each `(batch, num_heads, length, d_k)`,
            written at `cache_update_index` or appended to without one
            (`MultiHeadAttention`). The updated cache is returned.
        cross_attention_cache: optional `(key, value)` of `memory`, each
            `(batch, num_heads, source_length, d_k)`, from
            `cross_attention.project_key_value(memory)`; `x` may have
            several rows for each of its rows (`MultiHeadAttention`).
        cache_update_index: position of the first token of `x`.
        return_attention_scores: bool. Also return the cross-attention
            weights `(batch, num_heads, target_length, source_length)`.
        training: bool. Enables dropout.
        padding_mask: optional boolean `(batch, target_length)`, `True` for
            real target tokens: no position attends to a padded one. With
            padding at the end only, the causal mask hides it already.
            Not read with caches.
        x_mask: the mask Keras attaches to `x` and passes under this name;
            read where `padding_mask` is not given. The output carries it
            on.

    Returns:
        `x`, or a tuple `(x, self_attention_cache)`, `(x, scores)` or
        `(x, self_attention_cache, scores)`.

    Example:

    >>> layer = DecoderLayer(d_model=16, num_heads=4, d_ff=32)
    >>> layer(keras.ops.ones((2, 3, 16)), keras.ops.ones((2, 5, 16))).shape
    (2, 3, 16)
    """

    def __init__(self, d_model, num_heads, d_ff, **kwargs):
        super().__init__(d_model, num_heads, d_ff, **kwargs)
        self.cross_attention = MultiHeadAttention(
            d_model,
            num_heads,
            self.attention_dropout_rate,
            cross_attention=True,
            dtype=self.dtype_policy,
            name="cross_attention",
        )
        self.cross_attention_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon,
            dtype=self.dtype_policy,
            name="cross_attention_norm",
        )

    def build(self, input_shape):
        super().build(input_shape)
        self.cross_attention.build(input_shape)
        self.cross_attention_norm.build(input_shape)

    def call(
        self,
        x,
        memory=None,
        memory_mask=None,
        self_attention_cache=None,
        cross_attention_cache=None,
        cache_update_index=None,
        return_attention_scores=False,
        training=None,
        padding_mask=None,
        x_mask=None,
    ):
        cache, scores = self_attention_cache, None
        if padding_mask is None:
            padding_mask = x_mask

        def attend_to_self(y):
            nonlocal cache
            if cache is None:
                return self.self_attention(y, use_causal_mask=True, query_mask=padding_mask, training=training)
            y, cache = self.self_attention(
                y, cache=cache, cache_update_index=cache_update_index, training=training
            )
            return y

        def attend_to_memory(y):
            nonlocal scores
            y = self.cross_attention(
                y,
                memory,
                attention_mask=memory_mask,
                cache=cross_attention_cache,
                return_attention_scores=return_attention_scores,
                training=training,
            )
            if return_attention_scores:
                y, scores = y
            return y

        norm_first, dropout = self.norm_first, self.dropout
        x = residual(x, attend_to_self, self.self_attention_norm, dropout, norm_first, training)
        x = residual(x, attend_to_memory, self.cross_attention_norm, dropout, norm_first, training)
        x = residual(x, self.feed_forward, self.feed_forward_norm, dropout, norm_first, training)

        results = (x,)  # (batch, target_length, d_model)
        if self_attention_cache is not None:
            results += (cache,)
        if return_attention_scores:
            results += (scores,)
        return results[0] if len(results) == 1 else results

    def compute_output_spec(self, x, memory=None, memory_mask=None, self_attention_cache=None,
                            cross_attention_cache=None, cache_update_index=None, return_attention_scores=False,
                            **kwargs):
        """The outputs' shapes and dtypes, as `call` gives them, without running it."""
        results = (keras.KerasTensor(self.compute_output_shape(x.shape), dtype=self.compute_dtype),)
        if self_attention_cache is not None:
            results += (self.self_attention.compute_output_spec(
                x, cache=self_attention_cache, cache_update_index=cache_update_index)[1],)
        if return_attention_scores:
            results += (self.cross_attention.compute_output_spec(
                x, memory, cache=cross_attention_cache, return_attention_scores=True)[1],)
        return results[0] if len(results) == 1 else results
