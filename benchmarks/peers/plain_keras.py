"""The plain Keras 3 Transformer we measure ourselves against.

What a Keras user writes without this package: stock
`keras.layers.MultiHeadAttention` (separate Q, K, V projections, explicit
softmax), `Dense`, `LayerNormalization`, a shared embedding and a
log-softmax cross-entropy with label smoothing. Same hyper-parameters,
shapes and optimizer as the model it is compared with. Written for the
benchmark only; not part of the package.
"""

import math

import keras
import numpy as np
from keras import layers, ops


def _sinusoid(length, d_model):
    pos = np.arange(length)[:, None]
    angle = pos / np.power(10000, np.arange(0, d_model, 2)[None, :] / d_model)
    table = np.zeros((length, d_model), np.float32)
    table[:, 0::2], table[:, 1::2] = np.sin(angle), np.cos(angle)
    return table


class SharedEmbedding(layers.Layer):
    def __init__(self, vocab_size, d_model, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size, self.d_model = vocab_size, d_model

    def build(self, _):
        self.w = self.add_weight((self.vocab_size, self.d_model), initializer="glorot_uniform", name="w")

    def call(self, x, project=False):
        if project:
            return ops.matmul(x, ops.transpose(ops.cast(self.w, x.dtype)))
        return ops.take(self.w, x, axis=0) * math.sqrt(self.d_model)


class Block(layers.Layer):
    def __init__(self, d_model, num_heads, d_ff, dropout_rate, decoder, **kwargs):
        super().__init__(**kwargs)
        self.decoder = decoder
        head = d_model // num_heads
        self.self_attention = layers.MultiHeadAttention(num_heads, head)
        if decoder:
            self.cross_attention = layers.MultiHeadAttention(num_heads, head)
        self.inner = layers.Dense(d_ff, activation="relu")
        self.outer = layers.Dense(d_model)
        count = 3 if decoder else 2
        self.norms = [layers.LayerNormalization(epsilon=1e-6) for _ in range(count)]
        self.drops = [layers.Dropout(dropout_rate) for _ in range(count)]

    def call(self, x, memory=None, training=False):
        n, d = self.norms, self.drops
        a = self.self_attention(x, x, use_causal_mask=self.decoder, training=training)
        x = n[0](x + d[0](a, training=training))
        if self.decoder:
            x = n[1](x + d[1](self.cross_attention(x, memory, training=training), training=training))
        return n[-1](x + d[-1](self.outer(self.inner(x)), training=training))


class PlainKerasTransformer(keras.Model):
    def __init__(self, vocab_size, num_layers, d_model, num_heads, d_ff, dropout_rate, **kwargs):
        super().__init__(**kwargs)
        self.embedding = SharedEmbedding(vocab_size, d_model)
        block = dict(d_model=d_model, num_heads=num_heads, d_ff=d_ff, dropout_rate=dropout_rate)
        self.encoder = [Block(decoder=False, **block) for _ in range(num_layers)]
        self.decoder = [Block(decoder=True, **block) for _ in range(num_layers)]
        self.positions = _sinusoid(1024, d_model)
        self.dropout = layers.Dropout(dropout_rate)

    def _positions(self, ids, dtype):
        # A tensor, not a NumPy slice: PyTorch cannot add one to a tensor that requires grad;
        # in the embeddings' dtype: TensorFlow does not add float32 to bfloat16.
        return ops.convert_to_tensor(self.positions[: ids.shape[1]], dtype=dtype)

    def call(self, inputs, training=False):
        source, target = inputs
        x = self.embedding(source)
        x = self.dropout(x + self._positions(source, x.dtype), training=training)
        for block in self.encoder:
            x = block(x, training=training)
        y = self.embedding(target)
        y = self.dropout(y + self._positions(target, y.dtype), training=training)
        for block in self.decoder:
            y = block(y, x, training=training)
        return ops.cast(self.embedding(y, project=True), "float32")


def smoothed_loss(labels, logits, label_smoothing=0.1):
    logp = ops.log_softmax(logits, axis=-1)
    nll = -ops.squeeze(ops.take_along_axis(logp, ops.expand_dims(ops.cast(labels, "int32"), -1), axis=-1), -1)
    return ops.mean((1 - label_smoothing) * nll - label_smoothing * ops.mean(logp, axis=-1))
