"""The Transformer model, its config and named architectures."""

from keras_transformer.models.config import ARCHITECTURES, TransformerConfig, architecture_config
from keras_transformer.models.transformer import Transformer, padding_mask
