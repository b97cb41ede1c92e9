"""keras-transformer: the Transformer of "Attention Is All You Need" in Keras 3.

Example:

>>> from keras_transformer import Transformer
>>> model = Transformer.from_preset("base", vocab_size=37000)
"""

from keras_transformer.layers import (
    DecoderLayer,
    EncoderLayer,
    FeedForward,
    MultiHeadAttention,
    PositionalEncoding,
    ReversibleEmbedding,
)
from keras_transformer.losses import LabelSmoothedCrossEntropy
from keras_transformer.metrics import MaskedAccuracy
from keras_transformer.models import PRESETS, Transformer, TransformerConfig, padding_mask
from keras_transformer.schedules import TransformerSchedule, paper_optimizer

__version__ = "0.1.0"
