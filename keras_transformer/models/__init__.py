"""The Transformer model, its config and presets."""

from keras_transformer.models.config import PRESETS, TransformerConfig, preset_config
from keras_transformer.models.transformer import Transformer, padding_mask
