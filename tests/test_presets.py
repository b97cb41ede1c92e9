"""Presets: the shipped trained model, save_to_preset / from_preset round trips, errors.

Fine-tuning a preset is tested from the command line (tests/training/test_callbacks_and_cli.py)."""

import json
import os

import keras
import numpy as np
import pytest

from keras_transformer import (
    SubwordTokenizer,
    Transformer,
    Translator,
    list_presets,
)
from keras_transformer.models import presets
from keras_transformer.decoding import BeamSampler
from tests.decoding.trained_copy import padded

# Loading, saving and quantizing run through the backend: a preset saved in
# float16 and a quantized one are marked `backend`; the rest is
# backend-independent and runs on TensorFlow only (a shipped preset's
# translations on each backend: tests/pipeline).


@pytest.fixture(scope="module")
def tokenizer():
    sentences = [f"the {w} is {c}." for w in ("cat", "dog", "bird", "fish") for c in ("red", "blue", "big")] * 20
    return SubwordTokenizer.train(sentences, vocab_size=40, byte_fallback=False)


ZOO = {  # preset: (parameters, [(source, expected translation)], license named by its card)
    "tatoeba_en_fr": (8_652_800, [("I love you.", "Je t'aime."), ("", ""), ("Where is the station?", "Où se trouve la gare ?")],
                      "CC-BY 2.0 France"),
    "tatoeba_fr_en": (8_652_800, [("Je t'aime.", "I love you."), ("Où se trouve la gare ?", "Where's the station?")],
                      "CC-BY 2.0 France"),
    "libreoffice_en_de": (1_949_696, [("Copies the selected row to the clipboard.",
                                       "Kopiert die ausgewählte Zeile in die Zwischenablage."),
                                      ("Enter the name of the field.", "Geben Sie den Namen des Felds ein.")],
                          "MPL-2.0"),
}


def test_the_zoo_is_what_the_package_ships():
    assert sorted(list_presets()) == sorted(ZOO)


@pytest.mark.parametrize("name", sorted(ZOO))
def test_each_shipped_preset_translates(name):
    parameters, examples, license_name = ZOO[name]
    translator = Translator.from_preset(name, beam_size=4, alpha=0.6)
    assert translator.translate([source for source, _ in examples]) == [target for _, target in examples]
    # Each expected string wins its beam by a margin that no backend's or
    # instruction set's rounding closes (it moves a score by about 1e-5), so
    # the strings the model cards show hold on every backend and CPU.
    assert second_best_margins(translator, [source for source, _ in examples if source]).min() > 0.05
    model = Transformer.from_preset(name)
    assert isinstance(model, keras.Model) and model.count_params() == parameters
    metadata = presets.load_metadata(name)
    assert metadata["weights_dtype"] == "float16" and metadata["parameter_count"] == parameters
    with open(os.path.join(presets.preset_directory(name), "README.md"), encoding="utf-8") as f:
        card = f.read()
    assert license_name in card and "## Reproduce" in card


def second_best_margins(translator, sources):
    """`(sentences,)`: the best hypothesis' score less the second best's, beam 4."""
    pieces, _ = translator.preprocessor.pieces(sources)
    assert len(pieces) == len(sources)  # one piece each
    sampler = BeamSampler(beam_size=4, alpha=0.6, num_return=2)
    _, scores = sampler(translator.model, padded(pieces), translator.max_extra_length, False)
    scores = keras.ops.convert_to_numpy(scores)  # (sentences, 2)
    return scores[:, 0] - scores[:, 1]


@pytest.mark.parametrize("weights_dtype", ["float32", pytest.param("float16", marks=pytest.mark.backend)])
def test_save_to_preset_round_trips(tmp_path, tokenizer, weights_dtype):
    model = Transformer.from_architecture("tiny", vocab_size=tokenizer.vocab_size, num_layers=1, max_length=32)
    model.save_to_preset(tmp_path, weights_dtype=weights_dtype)
    tokenizer.save_to_preset(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["config.json", "metadata.json", "model.weights.h5", "tokenizer.model"]
    reloaded = Transformer.from_preset(tmp_path)
    assert reloaded.get_config() == model.get_config()
    for saved, loaded in zip(model.weights, reloaded.weights):
        assert saved.path == loaded.path and loaded.dtype == "float32"
        expected = keras.ops.convert_to_numpy(saved).astype(weights_dtype).astype("float32")
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(loaded), expected)
    assert SubwordTokenizer.from_preset(tmp_path).model_proto == tokenizer.model_proto
    with open(tmp_path / "metadata.json") as f:
        metadata = json.load(f)
    assert metadata["weights_dtype"] == weights_dtype and metadata["parameter_count"] == model.count_params()
    untrained = Transformer.from_preset(tmp_path, load_weights=False)
    assert untrained.get_config() == model.get_config()
    assert not np.array_equal(keras.ops.convert_to_numpy(untrained.weights[0]), keras.ops.convert_to_numpy(model.weights[0]))


def test_the_modules_example_saves_a_preset_that_translates(tmp_path, monkeypatch):
    """`keras_transformer.models.presets`' docstring example, as written: a preset
    folder of the shipped model and its tokenizer translates as the
    shipped preset does (the files `Translator.from_preset` reads)."""
    import doctest

    monkeypatch.chdir(tmp_path)
    results = doctest.testmod(presets, optionflags=doctest.ELLIPSIS, report=False)
    assert results.attempted == 5 and results.failed == 0
    assert sorted(os.listdir("my_preset")) == ["config.json", "metadata.json", "model.weights.h5", "tokenizer.model"]


@pytest.mark.backend
def test_a_quantized_model_round_trips_through_a_preset(tmp_path):
    model = Transformer.from_architecture("tiny", vocab_size=50, num_layers=1, max_length=16)
    model.quantize("int8")
    with pytest.raises(ValueError, match="weights_dtype='float32'.*Received: weights_dtype='float16'"):
        model.save_to_preset(tmp_path, weights_dtype="float16")
    model.save_to_preset(tmp_path)
    reloaded = Transformer.from_preset(tmp_path)
    source, target = np.array([[5, 6, 7, 3]]), np.array([[2, 8, 9]])
    assert [w.dtype for w in reloaded.weights] == [w.dtype for w in model.weights]
    assert "int8" in {w.dtype for w in reloaded.weights}
    # Through predict, one compiled function a model: on JAX, calling the int8
    # model eagerly compiled each of its small ops, which took longer.
    np.testing.assert_array_equal(
        reloaded.predict((source, target), verbose=0), model.predict((source, target), verbose=0)
    )


def test_preset_errors_name_what_was_received(tmp_path):
    with pytest.raises(ValueError, match=r"architecture without weights.*from_architecture\('base'"):
        Transformer.from_preset("base")
    with pytest.raises(FileNotFoundError, match=r"No preset 'nope'.*tatoeba_en_fr"):
        Transformer.from_preset("nope")
    with pytest.raises(FileNotFoundError, match="no config.json in that directory"):
        Translator.from_preset(tmp_path)
    with pytest.raises(ValueError, match="Received: preset=3"):
        Transformer.from_preset(3)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        Transformer.from_preset(tmp_path)
    model = Transformer.from_architecture("tiny", vocab_size=50, num_layers=1, max_length=16)
    with pytest.raises(ValueError, match="Received: weights_dtype='int4'"):
        model.save_to_preset(tmp_path / "x", weights_dtype="int4")
    model.save_to_preset(tmp_path / "no_weights")
    os.remove(tmp_path / "no_weights" / "model.weights.h5")
    with pytest.raises(FileNotFoundError, match="has no model.weights.h5"):
        Transformer.from_preset(tmp_path / "no_weights")
