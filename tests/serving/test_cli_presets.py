"""`translate`, `evaluate` and `export` with a preset (a shipped name or a preset directory).

The shipped name end to end (translate, evaluate --limit, export) is run as
processes by tests/test_readme_commands.py.
"""

import os
import re
import shutil

import keras
import pytest

from keras_transformer.cli import main


def test_export_needs_a_tokenizer_except_with_a_preset(tmp_path):
    model = tmp_path / "model.keras"
    model.write_bytes(b"")  # exists; refused before it is read
    with pytest.raises(ValueError, match=r"`--tokenizer` is required .*Received: model='[^']*model\.keras', --tokenizer=None"):
        main(["export", str(model), "--output-dir", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag", ["--tokenizer", "--weights"])
def test_a_preset_brings_its_own_tokenizer_and_weights(flag, tmp_path):
    with pytest.raises(ValueError, match=f"the preset 'tatoeba_en_fr' has its own .*Received: {flag}='x.bin'"):
        main(["export", "tatoeba_en_fr", flag, "x.bin", "--output-dir", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_translate_refuses_a_tokenizer_beside_a_preset():
    with pytest.raises(ValueError, match="the preset 'tatoeba_en_fr' has its own tokenizer.model. Received: --tokenizer='x.model'"):
        main(["translate", "tatoeba_en_fr", "Hi.", "--tokenizer", "x.model"])


@pytest.mark.parametrize("command", [["translate", "no_such_model", "Hi."], ["evaluate", "no_such_model", "--limit", "1"],
                                     ["export", "no_such_model", "--output-dir", "unused"]])
def test_an_unknown_model_is_named_with_the_shipped_presets(command):
    from keras_transformer import list_presets

    shipped = re.escape(repr(sorted(list_presets())))
    with pytest.raises(FileNotFoundError, match=rf"'no_such_model'.*{shipped}.*Received: model='no_such_model'"):
        main(command)
    assert not os.path.exists("unused")


def test_loading_errors_are_exceptions_naming_the_argument_and_the_commands_own_flag(tmp_path):
    """The library raises (never exits) with Python's argument names; each
    command names its own flags in their place, and no flag it lacks."""
    from keras_transformer import Translator
    from keras_transformer.translation import loading

    run = tmp_path / "killed_run"  # a run stopped before its end wrote its final model (config.json)
    run.mkdir()
    (run / "run.json").write_text('{"identity": {}}')
    with pytest.raises(ValueError, match=r"training run without its final model .*give `weights`, a \.weights\.h5 "
                                         r"file.*Received: model='[^']*killed_run', weights=None"):
        Translator.load(str(run))
    with pytest.raises(ValueError, match=r"give `--weights`, .*Received: model='[^']*killed_run', --weights=None"):
        main(["export", str(run), "--output-dir", str(tmp_path / "out")])
    with pytest.raises(ValueError, match="give `weights`") as error:
        main(["translate", str(run), "Hi."])  # translate has no --weights
    assert "--weights" not in str(error.value)
    with pytest.raises(FileNotFoundError, match=r"`tokenizer` must name a SentencePiece \.model file.*"
                                                r"Received: tokenizer='nope\.model'"):
        loading.load_tokenizer("nope.model")
    with pytest.raises(FileNotFoundError, match=r"No model file at '[^']*missing\.keras'"):
        Translator.load(str(tmp_path / "missing.keras"), tokenizer="x.model")
    with pytest.raises(ValueError, match=r"`quantize` must be None or 'int8'. Received: quantize='int4'"):
        Translator.load("tatoeba_en_fr", quantize="int4")


def test_an_architecture_is_not_a_preset():
    with pytest.raises(ValueError, match=r"'tiny' is an architecture without weights.*Received: preset='tiny'"):
        main(["translate", "tiny", "Hi."])


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the CLI runs in the TensorFlow pass")
def test_translate_with_a_preset_directory(tmp_path, capsys):
    from keras_transformer.models.presets import preset_directory

    preset = tmp_path / "my_preset"  # not a shipped name: found by its config.json
    shutil.copytree(preset_directory("tatoeba_en_fr"), preset)
    capsys.readouterr()
    assert main(["translate", str(preset), "Where is the station?"]) == 0
    # The README's translation, by the shipped preset (tests/test_readme_commands.py).
    assert capsys.readouterr().out == "Où se trouve la gare ?\n"


def test_quantize_is_refused_with_a_saved_model_before_it_loads(tmp_path):
    saved_model = tmp_path / "my_saved_model"
    saved_model.mkdir()  # a folder, not a preset: never read
    with pytest.raises(ValueError, match=r"`--quantize` applies to a preset or a \.keras model.*Received: model="
                                         r"'[^']*my_saved_model', --quantize='int8'"):
        main(["translate", str(saved_model), "Hi.", "--quantize", "int8"])
    with pytest.raises(SystemExit):  # argparse: int8 only
        main(["evaluate", "tatoeba_en_fr", "--quantize", "int4"])


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the CLI runs in the TensorFlow pass")
def test_translate_function_quantizes_a_preset_to_int8():
    """`--quantize int8` translates with the preset's model after Keras'
    `quantize("int8")`: every projection int8, the Translator's own model,
    and the same logits as the preset's model quantized here. (int8
    translations as a model in memory: tests/export/test_export.py.)"""
    import numpy as np

    from keras_transformer import Transformer
    from keras_transformer.cli.common import translate_function

    translate, model, _ = translate_function("tatoeba_en_fr", quantize="int8", batch_size=2)
    assert translate.func.__self__.model is model  # the Translator's bound translate
    dense = [layer for layer in model._flatten_layers() if isinstance(layer, keras.layers.Dense)]
    assert dense and {layer.quantization_mode for layer in dense + [model.embedding]} == {"int8"}
    expected_model = Transformer.from_preset("tatoeba_en_fr")
    expected_model.quantize("int8")
    inputs = (np.array([[45, 67, 89, 3]], "int32"), np.array([[2, 12, 34]], "int32"))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model(inputs)),
                                  keras.ops.convert_to_numpy(expected_model(inputs)))


@pytest.mark.parametrize("command", [["translate", "tatoeba_en_fr", "Hi."], ["evaluate", "tatoeba_en_fr", "--limit", "1"]])
def test_quantize_reaches_the_translate_function(command, monkeypatch):
    import importlib

    seen = {}

    def fake(*args, **kwargs):
        seen.update(kwargs)
        return (lambda texts: ["x"] * len(texts)), None, None

    monkeypatch.setattr(importlib.import_module(f"keras_transformer.cli.{command[0]}"), "translate_function", fake)
    assert main(command + ["--quantize", "int8"]) == 0
    assert seen["quantize"] == "int8" and "narrow_batches" not in seen  # the Translator's default
    seen.clear()
    assert main(command + ["--narrow-batches", "--long-inputs", "truncate", "--beam-size", "2", "--stop", "exact"]) == 0
    assert seen.pop("outputs", None) is None and seen.pop("sampler", None) is None  # translate's, unasked
    assert seen.pop("target_prefix", None) is None and seen.pop("constraints", None) is None
    assert seen == dict(batch_size=64, quantize=None, narrow_batches=True, long_inputs="truncate", beam_size=2,
                        stop="exact", **({"format": "text"} if command[0] == "translate" else {}))


def test_narrow_batches_reaches_the_translator_and_is_refused_with_a_saved_model(tmp_path):
    from keras_transformer.cli.common import translate_function

    translate, _, _ = translate_function("tatoeba_en_fr", narrow_batches=True)
    assert translate.func.__self__.narrow_batches is True  # the Translator's bound translate
    assert translate_function("tatoeba_en_fr")[0].func.__self__.narrow_batches is False
    # The stop rule reaches the Translator's beam search the same way.
    assert translate_function("tatoeba_en_fr", stop="exact")[0].func.__self__.sampler.stop == "exact"
    assert translate_function("tatoeba_en_fr")[0].func.__self__.sampler.stop == "early"  # the default
    saved_model = tmp_path / "my_saved_model"
    saved_model.mkdir()  # a folder, not a preset: never read
    with pytest.raises(ValueError, match=r"`--narrow-batches` applies to a preset or a \.keras model.*Received: "
                                         r"model='[^']*my_saved_model', --narrow-batches"):
        main(["evaluate", str(saved_model), "--narrow-batches"])


@pytest.mark.parametrize("flags, received", [
    (["--beam-size", "2"], "--beam-size=2"),
    (["--alpha", "0.8"], "--alpha=0.8"),
    (["--beam-size", "1", "--long-inputs", "truncate"], "--beam-size=1, --long-inputs='truncate'"),
    (["--stop", "exact"], "--stop='exact'"),
])
def test_decoding_options_are_refused_with_a_saved_model(tmp_path, flags, received):
    # A SavedModel translates as it was exported (its graph, and the
    # settings in its metadata.json): these are refused, not ignored.
    saved_model = tmp_path / "my_saved_model"
    saved_model.mkdir()  # a folder, not a preset: never read
    for command in (["translate", str(saved_model), "Hi."], ["evaluate", str(saved_model)]):
        with pytest.raises(ValueError, match=rf"appl(y|ies) to a preset or a \.keras model.*Received: "
                                             rf"model='[^']*my_saved_model', {re.escape(received)}$"):
            main(command + flags)
    with pytest.raises(ValueError, match=r"`--tokenizer` is for a \.keras model or a run folder; the SavedModel"):
        main(["translate", str(saved_model), "Hi.", "--tokenizer", "x.model"])


def test_evaluate_translates_the_split_it_is_given(monkeypatch, capsys):
    # --split picks the corpus split whose sources are translated and scored.
    from keras_transformer import datasets
    from keras_transformer.cli import evaluate

    translated = []

    def fake(*args, **kwargs):
        return (lambda texts: translated.extend(texts) or list(texts)), None, None

    monkeypatch.setattr(evaluate, "translate_function", fake)
    for split in ("validation", "test"):
        translated.clear()
        assert main(["evaluate", "tatoeba_en_fr", "--split", split, "--limit", "2"]) == 0
        sources, _ = datasets.references(datasets.load("tatoeba_en_fr", split))
        assert sorted(translated) == sorted(sources[:2]), split
    validation, _ = datasets.references(datasets.load("tatoeba_en_fr", "validation"))
    assert sorted(validation[:2]) != sorted(translated)  # the two splits differ
