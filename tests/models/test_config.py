"""The model's configuration: sizes, parameter counts, argument checks.

Layer shapes and argument checks are the same on every backend, so these
run once, in the TensorFlow pass (no `backend` marker; the model's
computations are in test_transformer.py)."""

import dataclasses

import pytest

from keras_transformer import Transformer, TransformerConfig
from tests.models.test_transformer import TINY, analytic_parameter_count


# The paper's Table 3: base and big (P_drop 0.3 for English-German).
PAPER = {"base": dict(num_layers=6, d_model=512, num_heads=8, d_ff=2048, dropout_rate=0.1),
         "big": dict(num_layers=6, d_model=1024, num_heads=16, d_ff=4096, dropout_rate=0.3)}


@pytest.mark.parametrize("architecture, approx", [("base", 63.1e6), ("big", 213e6)])
def test_architectures_have_the_papers_sizes_and_parameter_counts(architecture, approx):
    # Each of these models holds tens of millions of weights, initialised as
    # it is built: one of each.
    model = Transformer.from_architecture(architecture, vocab_size=37000)
    assert model.transformer_config == TransformerConfig(vocab_size=37000, **PAPER[architecture])
    model.build(((None, None), (None, None)))
    expected = analytic_parameter_count(vocab_size=37000, **PAPER[architecture])
    assert model.count_params() == expected
    assert abs(expected - approx) / approx < 0.01


def test_from_architecture_takes_overrides_and_keras_arguments_and_the_config_object_round_trips():
    model = Transformer.from_architecture("tiny", vocab_size=100, dropout_rate=0.2, num_layers=1, name="tiny_model")
    assert model.transformer_config == TransformerConfig(
        vocab_size=100, num_layers=1, d_model=128, num_heads=4, d_ff=512, dropout_rate=0.2
    )
    assert model.name == "tiny_model"
    rebuilt = Transformer(**dataclasses.asdict(model.transformer_config))
    assert rebuilt.transformer_config == model.transformer_config
    with pytest.raises(ValueError, match="architecture"):
        Transformer.from_architecture("huge", vocab_size=100)
    with pytest.raises(ValueError, match=r"Unknown Transformer argument.*'foo'"):
        Transformer.from_architecture("tiny", vocab_size=100, foo=1)


@pytest.mark.parametrize(
    "override, name",
    [
        (dict(d_model=30, num_heads=4), "divisible"),
        (dict(dropout_rate=1.0), "dropout_rate"),
        (dict(num_layers=0), "num_layers"),
        (dict(vocab_size=-3), "vocab_size"),
        (dict(d_ff=2.5), "d_ff"),
        (dict(max_length=0), "max_length"),
        (dict(d_model=15, num_heads=3), "even"),
        (dict(norm_first="no"), "norm_first"),
        (dict(learned_positions="no"), "learned_positions"),
        (dict(layer_norm_epsilon=-10.0), "layer_norm_epsilon"),
        (dict(layer_norm_epsilon="x"), "layer_norm_epsilon"),
        (dict(sinusoid_layout="stacked"), "sinusoid_layout"),
        (dict(num_decoder_layers=0), "num_decoder_layers"),
        (dict(decoder_d_ff=-1), "decoder_d_ff"),
        (dict(output_bias=1), "output_bias"),
        (dict(tie_output_embeddings="yes"), "tie_output_embeddings"),
        (dict(suppressed_ids=[0, 10_000]), "suppressed_ids"),
        (dict(suppressed_ids="0"), "suppressed_ids"),
    ],
)
def test_invalid_configuration_names_the_argument(override, name):
    with pytest.raises(ValueError, match=name):
        Transformer(**{**TINY, **override})


def test_the_fields_of_imported_models_shape_the_model_and_round_trip_through_its_config():
    """An imported Marian model's fields: a decoder of its own depth and
    width, an output matrix of its own and an output bias; each weight where
    its field puts it, and the config (a JSON list for `suppressed_ids`)
    back as it was."""
    import keras

    model = Transformer(**{**TINY, "num_decoder_layers": 3, "decoder_d_ff": 24, "tie_output_embeddings": False,
                           "output_bias": True, "suppressed_ids": [2, 0], "sinusoid_layout": "marian",
                           "scale_embeddings": False})
    config = model.transformer_config
    assert config.suppressed_ids == (0, 2)
    assert len(model.decoder_layers) == 3 and len(model.encoder_layers) == TINY["num_layers"]
    assert model.decoder_layers[0].feed_forward.inner.kernel.shape == (TINY["d_model"], 24)
    assert model.output_embedding.embeddings.shape == (TINY["vocab_size"], TINY["d_model"])
    assert model.output_bias.shape == (TINY["vocab_size"],)
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(model))
    assert again.transformer_config == config
    assert dataclasses.asdict(Transformer(**TINY).transformer_config) == dataclasses.asdict(TransformerConfig(**TINY))
