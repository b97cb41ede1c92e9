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
    ],
)
def test_invalid_configuration_names_the_argument(override, name):
    with pytest.raises(ValueError, match=name):
        Transformer(**{**TINY, **override})
