"""One encoder layer: self-attention, then a feed-forward network."""

import keras

from keras_transformer.layers.attention import MultiHeadAttention
from keras_transformer.layers.feed_forward import FeedForward, serialized_activation
from keras_transformer.layers.residual import residual
from keras_transformer.validation import (
    check_bool,
    check_positive,
    check_positive_number,
    check_rate,
)


@keras.saving.register_keras_serializable(package="keras_transformer")
class EncoderLayer(keras.layers.Layer):
    """Self-attention and feed-forward sub-layers, each in a residual block.

    Args:
        d_model: int. Width of the layer.
        num_heads: int. Attention heads; must divide `d_model`.
        d_ff: int. Inner width of the feed-forward network.
        dropout_rate: float in [0, 1). Dropout on each sub-layer's output.
            Defaults to `0.1`.
        attention_dropout_rate: float in [0, 1). Dropout on the attention
            weights. Defaults to `0.0` (the paper has none).
        activation: Feed-forward activation: a Keras activation, by name or
            as the function, or a registered function (`FeedForward`); the
            config holds its name. Defaults to `"relu"`.
        norm_first: bool. Pre-norm instead of the paper's post-norm.
            Defaults to `False`.
        layer_norm_epsilon: float. Defaults to `1e-6`.
        **kwargs: Standard layer arguments.

    Call arguments:
        x: float tensor `(batch, length, d_model)`.
        padding_mask: optional boolean tensor `(batch, length)`, `True` for
            real tokens: no position attends to a padded one.
        training: bool. Enables dropout.
        mask: the mask Keras attaches to `x` (after
            `keras.layers.Embedding(mask_zero=True)`, for one), which it
            passes here itself; read where `padding_mask` is not given.
            The output carries it on.

    Example:

    >>> layer = EncoderLayer(d_model=16, num_heads=4, d_ff=32)
    >>> layer(keras.ops.ones((2, 5, 16))).shape
    (2, 5, 16)
    """

    def __init__(
        self,
        d_model,
        num_heads,
        d_ff,
        dropout_rate=0.1,
        attention_dropout_rate=0.0,
        activation="relu",
        norm_first=False,
        layer_norm_epsilon=1e-6,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive("d_ff", d_ff)
        check_rate("dropout_rate", dropout_rate)
        check_rate("attention_dropout_rate", attention_dropout_rate)
        check_bool("norm_first", norm_first)
        check_positive_number("layer_norm_epsilon", layer_norm_epsilon)
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.dropout_rate = dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.activation = serialized_activation(activation)
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        dtype = self.dtype_policy
        self.self_attention = MultiHeadAttention(
            d_model, num_heads, attention_dropout_rate, dtype=dtype, name="self_attention"
        )
        self.self_attention_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=dtype, name="self_attention_norm"
        )
        self.feed_forward = FeedForward(
            d_model, d_ff, activation, dtype=dtype, name="feed_forward"
        )
        self.feed_forward_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=dtype, name="feed_forward_norm"
        )
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=dtype, name="dropout")
        self.supports_masking = True  # the output carries the input's mask

    def build(self, input_shape):
        for layer in (
            self.self_attention,
            self.self_attention_norm,
            self.feed_forward,
            self.feed_forward_norm,
            self.dropout,
        ):
            layer.build(input_shape)
        self.built = True

    def call(self, x, padding_mask=None, training=None, mask=None):
        if padding_mask is None:
            padding_mask = mask

        def attend(y):
            return self.self_attention(y, query_mask=padding_mask, training=training)

        x = residual(x, attend, self.self_attention_norm, self.dropout, self.norm_first, training)
        x = residual(x, self.feed_forward, self.feed_forward_norm, self.dropout, self.norm_first, training)
        return x  # (batch, length, d_model)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_model": self.d_model,
                "num_heads": self.num_heads,
                "d_ff": self.d_ff,
                "dropout_rate": self.dropout_rate,
                "attention_dropout_rate": self.attention_dropout_rate,
                "activation": self.activation,
                "norm_first": self.norm_first,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config
