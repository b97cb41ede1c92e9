"""Every public layer, and the model, through the shared layer test
(tests/layers/checks.py: config, build, symbolic calls with unknown batch
and lengths, compiled and eager calls, `.keras` files, output specs,
Keras' masks, a training step, mixed precision), on TensorFlow, JAX and
PyTorch. The modules beside it check each layer's own math."""

import numpy as np
import pytest

from keras_transformer import (
    DecoderLayer,
    EncoderLayer,
    FeedForward,
    MultiHeadAttention,
    PositionalEncoding,
    ReversibleEmbedding,
    Transformer,
    TransformerConfig,
)
from tests.layers.checks import LayerCase, run_layer_test

pytestmark = pytest.mark.backend  # run on TensorFlow, JAX and PyTorch (tests/run.sh)

rng = np.random.default_rng(0)
X = rng.normal(size=(2, 5, 16)).astype("float32")  # (batch, length, d_model)
MEMORY = rng.normal(size=(2, 7, 16)).astype("float32")
IDS = rng.integers(1, 50, size=(2, 5)).astype("int32")
BLOCK = dict(d_model=16, num_heads=4, d_ff=32, activation="gelu")


CASES = {
    "self_attention": LayerCase(
        MultiHeadAttention, dict(d_model=16, num_heads=4, dropout_rate=0.1), (X,), (2, 5, 16), (None, None, 16),
        trainable_weights=4, call_kwargs=dict(use_causal_mask=True), masks=lambda m: dict(query_mask=m[0]),
        pad_at_start=True),
    "cross_attention": LayerCase(
        MultiHeadAttention, dict(d_model=16, num_heads=4, cross_attention=True), (X, MEMORY), (2, 5, 16),
        (None, None, 16), trainable_weights=6, masks=lambda m: dict(value_mask=m[1])),
    "encoder_layer": LayerCase(
        EncoderLayer, dict(BLOCK, norm_first=True), (X,), (2, 5, 16), (None, None, 16), trainable_weights=12,
        masks=lambda m: dict(padding_mask=m[0])),
    "decoder_layer": LayerCase(
        DecoderLayer, BLOCK, (X, MEMORY), (2, 5, 16), (None, None, 16), trainable_weights=20,
        masks=lambda m: dict(padding_mask=m[0], memory_mask=m[1]), pad_at_start=True),
    "feed_forward": LayerCase(
        FeedForward, dict(d_model=16, d_ff=32), (X,), (2, 5, 16), (None, None, 16), trainable_weights=4,
        masks=lambda m: {}),
    "sinusoids": LayerCase(
        PositionalEncoding, dict(max_length=8), (X,), (2, 5, 16), (None, None, 16), trainable_weights=0,
        masks=lambda m: {}),
    "learned_positions": LayerCase(
        PositionalEncoding, dict(max_length=8, learned=True), (X,), (2, 5, 16), (None, None, 16),
        trainable_weights=1, masks=lambda m: {}),
    "embedding": LayerCase(
        ReversibleEmbedding, dict(input_dim=50, output_dim=16), (IDS,), (2, 5, 16), (None, None, 16),
        trainable_weights=1, masks=lambda m: {}),
    "reverse_embedding": LayerCase(
        ReversibleEmbedding, dict(input_dim=50, output_dim=16), (X,), (2, 5, 50), (None, None, 50),
        trainable_weights=1, call_kwargs=dict(reverse=True), masks=lambda m: {}),
    "transformer": LayerCase(
        Transformer, dict(vocab_size=50, num_layers=2, d_model=16, num_heads=4, d_ff=32, max_length=8,
                          learned_positions=True, norm_first=True),
        ((IDS, IDS[:, :4]),), (2, 4, 50), (None, None, 50), trainable_weights=3 + 2 * (12 + 20) + 4, precision=12,
        arguments=set(TransformerConfig.__dataclass_fields__), training=False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_layer(name, tmp_path):
    run_layer_test(CASES[name], tmp_path)
