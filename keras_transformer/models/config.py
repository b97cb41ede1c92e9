"""Model hyper-parameters: one frozen config, and an architecture's config."""

import dataclasses
from typing import Optional

from keras_transformer.models.architectures import ARCHITECTURES


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    """The constructor arguments of `Transformer`, as one object.

    `Transformer(**dataclasses.asdict(config))` builds the model, and
    `TransformerConfig(**model.get_config())` (less Keras' own keys) gives
    it back. Field names are the paper's.
    """

    vocab_size: int  # shared source/target vocabulary (source only if split)
    num_layers: int = 6  # N: encoder layers, and as many decoder layers
    d_model: int = 512  # width of embeddings and every sub-layer output
    num_heads: int = 8  # h: attention heads, d_k = d_v = d_model / h
    d_ff: int = 2048  # inner width of the feed-forward networks
    dropout_rate: float = 0.1  # P_drop: sub-layer outputs, embedding sums
    attention_dropout_rate: float = 0.0  # on attention weights (paper: 0)
    max_length: int = 1024  # longest source or target sequence
    target_vocab_size: Optional[int] = None  # None: one shared vocabulary
    learned_positions: bool = False  # Table 3 row (E) instead of sinusoids
    norm_first: bool = False  # pre-norm instead of the paper's post-norm
    activation: str = "relu"  # feed-forward activation
    layer_norm_epsilon: float = 1e-6
    # The fields below carry imported models (Marian, OPUS-MT: docs/zoo.md);
    # their defaults are the paper's.
    num_decoder_layers: Optional[int] = None  # None: num_layers
    decoder_d_ff: Optional[int] = None  # the decoder's feed-forward width; None: d_ff
    sinusoid_layout: str = "interleaved"  # of `layers.positional_encoding.SINUSOID_LAYOUTS`
    scale_embeddings: bool = True  # embeddings times sqrt(d_model) (section 3.4)
    tie_output_embeddings: bool = True  # the pre-softmax projection is the (target) embedding matrix
    output_bias: bool = False  # a learned bias on the logits
    suppressed_ids: tuple = ()  # token ids that decoding never outputs


def architecture_config(name, **overrides):
    """The `TransformerConfig` of architecture `name`, with fields overridden.

    Example:

    >>> architecture_config("base", vocab_size=37000).d_model
    512
    """
    if name not in ARCHITECTURES:
        raise ValueError(
            f"Unknown architecture. Expected one of {sorted(ARCHITECTURES)}. "
            f"Received: name={name!r}"
        )
    fields = {f.name for f in dataclasses.fields(TransformerConfig)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(
            f"Unknown Transformer argument(s) {unknown}. Expected some of "
            f"{sorted(fields)}. Received: {', '.join(f'{k}={overrides[k]!r}' for k in unknown)}"
        )
    return TransformerConfig(**{**ARCHITECTURES[name], **overrides})
