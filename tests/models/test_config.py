"""The model's configuration: sizes, parameter counts, argument checks.

Layer shapes and argument checks are the same on every backend, so these
run once, in the TensorFlow pass (no `backend` marker; the model's
computations are in test_transformer.py)."""

import dataclasses

import pytest

from keras_transformer import ARCHITECTURES, Transformer, TransformerConfig
from tests.models.test_transformer import TINY, analytic_parameter_count


@pytest.mark.parametrize("architecture, approx", [("base", 63.1e6), ("big", 213e6)])
def test_parameter_count_matches_the_paper(architecture, approx):
    model = Transformer.from_architecture(architecture, vocab_size=37000)
    model.build(((None, None), (None, None)))
    expected = analytic_parameter_count(vocab_size=37000, **ARCHITECTURES[architecture])
    assert model.count_params() == expected
    assert abs(expected - approx) / approx < 0.01


def test_architectures_and_config_object():
    model = Transformer.from_architecture("big", vocab_size=100, dropout_rate=0.1, name="big_model")
    assert model.transformer_config == TransformerConfig(
        vocab_size=100, num_layers=6, d_model=1024, num_heads=16, d_ff=4096, dropout_rate=0.1
    )
    assert model.name == "big_model"
    assert Transformer(**dataclasses.asdict(model.transformer_config)).get_config()["d_model"] == 1024
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
    ],
)
def test_invalid_configuration_names_the_argument(override, name):
    with pytest.raises(ValueError, match=name):
        Transformer(**{**TINY, **override})
