"""keras-transformer: the Transformer of "Attention Is All You Need" in Keras 3.

Example:

>>> from keras_transformer import Transformer, Translator
>>> Translator.from_preset("tatoeba_en_fr").translate(["I love you."])   # a trained preset
["Je t'aime."]
>>> model = Transformer.from_architecture("base", vocab_size=37000)      # untrained, the paper's base

Importing the package imports its layers and models, and so Keras, so that
`import keras_transformer` alone registers them for `keras.saving.load_model`.
It does nothing else to the process.
"""

from keras_transformer.decoding.random_sampling import RandomSampler
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
from keras_transformer.models import ARCHITECTURES, Transformer, TransformerConfig, padding_mask
from keras_transformer.models.presets import list_presets
from keras_transformer.schedules import TransformerSchedule, paper_optimizer
from keras_transformer.translation.tokenizer import SubwordTokenizer
from keras_transformer.translation.translator import Hypothesis, TokenScores, Translator
from keras_transformer.version import __version__
