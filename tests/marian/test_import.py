"""`keras-transformer import` and its preset folder, which every command
takes as it is: translate, score, evaluate, export (a SavedModel that
reloads with TensorFlow alone, and a CTranslate2 model), and
`train --from-preset`; and the Keras file of an imported model."""

import json
import os

import keras
import numpy as np
import pytest

from keras_transformer import Translator
from keras_transformer.cli import main
from keras_transformer.translation.marian import huggingface
from keras_transformer.translation.marian import preset as marian_preset
from tests.marian import compare, models

SOURCES = ["Where is the station?", "I love you.", "", "Tom is tired. He wants to sleep now."]
# The test model is random: its outputs run to their length limit, which these keep short.
# Eager: tracing the graph costs more than these few steps.
QUICK = dict(beam_size=1, max_extra_length=5, jit_compile=False)
QUICK_FLAGS = ["--beam-size", "1", "--max-extra-length", "5"]


@pytest.fixture(scope="module")
def preset():
    return os.path.join(compare.folder(), "preset")


@pytest.fixture(scope="module")
def hf():
    return os.path.join(compare.folder(), "hf")


def test_the_import_command_writes_a_preset_with_a_model_card_and_the_license(hf, tmp_path, capsys):
    output = tmp_path / "opus_mt_test"
    assert main(["import", hf, "--output", str(output)]) == 0
    assert f"Imported {hf}" in capsys.readouterr().out
    files = set(os.listdir(output))
    assert {"config.json", "model.weights.h5", "tokenizer.model", "target_tokenizer.model", "metadata.json",
            "README.md", "LICENSE"} == files
    card = (output / "README.md").read_text(encoding="utf-8")
    assert hf in card and "cc-by-4.0" in card and "`LICENSE`" in card
    assert (output / "LICENSE").read_text() == open(os.path.join(hf, "LICENSE")).read()
    metadata = json.loads((output / "metadata.json").read_text())
    assert metadata["source"] == hf and metadata["license"] == {"name": "cc-by-4.0", "files": ["LICENSE"]}
    assert metadata["generation"]["bad_words_ids"]  # the source's own decoding settings, recorded
    # The folder is the model: the same config, weights and translations as converting on the fly.
    on_the_fly = Translator.from_preset(hf, **QUICK)
    imported = Translator.from_preset(str(output), **QUICK)
    assert imported.model.transformer_config == on_the_fly.model.transformer_config
    assert imported.translate(SOURCES) == on_the_fly.translate(SOURCES)
    with pytest.raises(FileExistsError, match="not an empty folder"):
        main(["import", hf, "--output", str(output)])


def test_the_preset_keeps_marians_options_through_a_keras_file(preset, tmp_path):
    translator = Translator.from_preset(preset, **QUICK)
    config = translator.model.transformer_config
    assert (config.sinusoid_layout, config.suppressed_ids, config.output_bias) == ("halves", (0, 2), True)
    path = str(tmp_path / "model.keras")
    translator.model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.transformer_config == config
    source = np.array([[5, 6, 7, 3]])
    target = np.array([[2, 8, 9]])
    logits = keras.ops.convert_to_numpy(translator.model((source, target)))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded((source, target))), logits, atol=1e-6)
    again = Translator(loaded, translator.tokenizer, **QUICK)
    assert again.translate(SOURCES) == translator.translate(SOURCES)
    # int8 weights, the logits' bias kept: within int8 rounding of the float logits.
    loaded.quantize("int8")
    quantized = keras.ops.convert_to_numpy(loaded((source, target)))
    assert 0 < np.abs(quantized - logits).max() < 0.05 * np.abs(logits).max()


def test_transformer_and_tokenizer_from_preset_convert_a_source_as_it_loads(hf, preset):
    """`Transformer.from_preset` and `SubwordTokenizer.from_preset` of the
    Hugging Face folder: the model and tokenizer of its imported preset."""
    from keras_transformer import SubwordTokenizer, Transformer

    imported = Transformer.from_preset(preset)
    model = Transformer.from_preset(hf)
    assert model.transformer_config == imported.transformer_config
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), imported.get_weights()))
    untrained = Transformer.from_preset(hf, load_weights=False)
    assert not np.array_equal(untrained.embedding.get_weights()[0], imported.embedding.get_weights()[0])
    tokenizer, expected = SubwordTokenizer.from_preset(hf), SubwordTokenizer.from_preset(preset)
    assert (tokenizer.model_proto, tokenizer.target_model_proto) == (expected.model_proto, expected.target_model_proto)


@pytest.fixture(scope="module")
def saved(preset, tmp_path_factory):
    """The preset exported by `keras-transformer export`, as one loop per
    bucket (tests/export/test_export.py exports the default two), in two
    buckets: 16 source tokens, which holds `SOURCES`, and the source budget.
    Each bucket is another graph to trace and to load."""
    folder = str(tmp_path_factory.mktemp("saved_models") / "opus_mt_test")
    assert main(["export", preset, "--output-dir", folder, "--no-warmup", "--parallel-loops", "1", "--buckets", "16",
                 *QUICK_FLAGS]) == 0
    return folder


@pytest.mark.slow
def test_every_command_takes_the_imported_preset(preset, saved, tmp_path, capsys):
    expected = Translator.from_preset(preset, **QUICK).translate(SOURCES)
    assert main(["translate", preset, *SOURCES, "--beam-size", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == Translator.from_preset(
        preset, beam_size=1, jit_compile=False).translate(SOURCES)
    assert main(["score", preset, "--pairs", _tsv(tmp_path, [("I love you.", "Je t'aime.")])]) == 0
    scored = json.loads(capsys.readouterr().out.splitlines()[0])
    assert scored["tokens"][-1] == "</s>" and scored["scores"] < 0
    assert main(["evaluate", preset, "--limit", "4", "--beam-size", "1"]) == 0
    assert "BLEU" in capsys.readouterr().out
    assert main(["translate", saved, *SOURCES]) == 0
    assert capsys.readouterr().out.splitlines() == expected


def _tsv(tmp_path, pairs):
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    return str(path)


@pytest.mark.slow
def test_the_saved_model_reloads_with_tensorflow_alone_and_translates_as_the_translator(preset, saved, tmp_path):
    # Its two tokenizers travel as assets. That the server answers with what a
    # SavedModel's signatures return, whatever its model, is tests/serving's.
    from keras_transformer.translation.saved_model_files import latest_version
    from tests.export.copying import serve_in_a_fresh_process

    sources = SOURCES + [s for s, _ in models.pairs("test", 30)]
    expected = Translator.from_preset(preset, **QUICK).translate(sources)
    _, path = latest_version(saved)
    assert set(os.listdir(os.path.join(path, "assets"))) == {"tokenizer.model", "target_tokenizer.model"}
    assert serve_in_a_fresh_process(path, sources, tmp_path)["translations"] == expected


@pytest.mark.slow
def test_the_ctranslate2_export_of_the_preset_translates_as_it_greedily(preset, tmp_path):
    from keras_transformer.converters.ctranslate2 import ctranslate2_source_tokens

    output = str(tmp_path / "ct2")
    assert main(["export", preset, "--format", "ctranslate2", "--output-dir", output]) == 0
    translator = Translator.from_preset(preset, beam_size=1, max_extra_length=10, jit_compile=False)
    tokenizer = translator.tokenizer
    sources = [s for s, _ in models.pairs("test", 50)]
    pieces = ctranslate2_source_tokens(tokenizer, sources)
    limits = [len(p) + 10 for p in pieces]
    expected = compare.ctranslate2_greedy(compare.ctranslate2_translator(output), pieces, limits,
                                          tokenizer.target_processor.piece_to_id)
    source_ids = [ids + [3] for ids in tokenizer.encode(sources)]
    ours = [outputs[0][0] for outputs in translator.runner.decode(source_ids, translator.sampler)]
    equal, bad = compare.near_ties(translator, source_ids, ours, expected, tolerance=1e-3)
    assert not bad and equal >= 0.98 * len(sources), (equal, bad[:3])


@pytest.mark.portable
@pytest.mark.slow
def test_fine_tuning_the_imported_preset_lowers_its_held_out_loss_and_keeps_its_options(preset, tmp_path):
    """`train --from-preset` on the shipped corpus's validation pairs: the
    test pairs' loss falls, and the run's preset is the imported model's
    architecture with its Marian options."""
    held_out = models.pairs("test", 200)

    def loss(translator):
        scores = translator.score([s for s, _ in held_out], [t for _, t in held_out])
        return -sum(s.total for s in scores) / sum(len(s.tokens) for s in scores)

    before = loss(Translator.from_preset(preset, jit_compile=False))
    train = _tsv(tmp_path, models.pairs("validation", 2000))
    assert main([
        "train", "--from-preset", preset, "--train-file", train, "--output-dir", str(tmp_path / "run"),
        "--train-steps", "40", "--checkpoint-every", "40", "--warmup-steps", "10", "--learning-rate-scale", "0.2",
        "--tokens-per-batch", "2048", "--tokens-per-step", "2048", "--jit-compile", "off", "--fit-verbose", "0",
        "--no-tensorboard",
    ]) == 0
    tuned = Translator.from_preset(str(tmp_path / "run"), jit_compile=False)
    assert loss(tuned) < before - 0.05, (loss(tuned), before)
    assert tuned.model.transformer_config == Translator.from_preset(preset).model.transformer_config
    assert not tuned.tokenizer.shared and os.path.isfile(tmp_path / "run" / "target_tokenizer.model")


def test_from_preset_refuses_an_hf_name_without_the_hub_and_train_a_source(hf, monkeypatch, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # not installed
    with pytest.raises(ImportError, match="huggingface_hub"):
        Translator.from_preset("hf://Helsinki-NLP/opus-mt-en-de")
    with pytest.raises(ValueError, match="import the Marian model once"):
        main(["train", "--from-preset", hf, "--train-file", _tsv(tmp_path, [("a", "b")]), "--output-dir",
              str(tmp_path / "run")])


def test_the_hub_download_failing_is_an_os_error_naming_the_model(monkeypatch):
    import types

    def offline(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setitem(__import__("sys").modules, "huggingface_hub", types.SimpleNamespace(snapshot_download=offline))
    with pytest.raises(OSError, match=r"Cannot download hf://Helsinki-NLP/opus-mt-en-de .*no network"):
        marian_preset.load("hf://Helsinki-NLP/opus-mt-en-de")


def test_pytorch_model_bin_and_sharded_safetensors_read_as_model_safetensors(hf, tmp_path):
    """The weights' other files: `pytorch_model.bin` (PyTorch's pickle,
    read with PyTorch) and `model.safetensors.index.json` with its shards."""
    import shutil

    import torch
    from safetensors.numpy import save_file

    expected = huggingface.read_safetensors(os.path.join(hf, "model.safetensors"))
    names = sorted(expected)
    for kind in ("bin", "shards"):
        folder = tmp_path / kind
        shutil.copytree(hf, folder, ignore=shutil.ignore_patterns("*.safetensors"))
        if kind == "bin":
            torch.save({n: torch.from_numpy(expected[n].copy()) for n in names}, folder / "pytorch_model.bin")
        else:
            halves = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
            for shard, part in halves.items():
                save_file({n: expected[n] for n in part}, str(folder / shard))
            index = {"weight_map": {n: shard for shard, part in halves.items() for n in part}}
            (folder / "model.safetensors.index.json").write_text(json.dumps(index))
        weights = huggingface.read_weights(str(folder))
        assert sorted(weights) == names and all(np.array_equal(weights[n], expected[n]) for n in names)
