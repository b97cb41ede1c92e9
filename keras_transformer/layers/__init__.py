"""The Transformer's layers."""

from keras_transformer.layers.attention import MultiHeadAttention
from keras_transformer.layers.decoder_layer import DecoderLayer
from keras_transformer.layers.encoder_layer import EncoderLayer
from keras_transformer.layers.feed_forward import FeedForward
from keras_transformer.layers.positional_encoding import PositionalEncoding
from keras_transformer.layers.reversible_embedding import ReversibleEmbedding
