"""Marian's own release of a model (`.npz`, vocabulary `.yml`,
`decoder.yml`), imported, against CTranslate2's OPUS-MT converter of the
same folder; and the Marian and Hugging Face configs refused, each with the
field and value that say why."""

import dataclasses
import json
import os
import re
import shutil

import keras
import numpy as np
import pytest

from keras_transformer import SubwordTokenizer, Transformer, Translator
from keras_transformer.translation import marian
from keras_transformer.translation.marian import preset as marian_preset
from keras_transformer.layers.positional_encoding import sinusoids
from keras_transformer.tokens import BOS_ID, EOS_ID, PAD_ID
from tests.marian import compare, models, reference


@pytest.fixture(scope="module")
def folder():
    return os.path.join(compare.folder(), "marian")


@pytest.fixture(scope="module")
def imported(folder):
    model, tokenizer, _, _ = marian_preset.load(folder)
    return model, tokenizer


def converted(folder, output, positions=None):
    """CTranslate2's OPUS-MT converter of `folder`, into `output`: its own,
    or with the sinusoids of layout `positions` instead of its table."""
    from ctranslate2.converters.opus_mt import OpusMTConverter

    class Converter(OpusMTConverter):
        def _load(self):
            spec = super()._load()
            if positions is not None:
                d_model = spec.encoder.embeddings[0].weight.shape[1]
                table = keras.ops.convert_to_numpy(sinusoids(0, 512, d_model, positions))
                spec.encoder.position_encodings.encodings = spec.decoder.position_encodings.encodings = table
            return spec

    Converter(folder).convert(output, force=True)
    return compare.ctranslate2_translator(output)


def with_layout(model, layout):
    """`model` with another sinusoid layout, the same weights."""
    config = dataclasses.replace(model.transformer_config, sinusoid_layout=layout)
    other = Transformer(**dataclasses.asdict(config))
    other.set_weights(model.get_weights())
    return other


def test_the_marian_release_is_the_huggingface_model_with_marians_own_sinusoids(folder, imported):
    """The `.npz` holds the Hugging Face folder's weights by Marian's names;
    imported, it is the imported Hugging Face model but for Marian's
    sinusoids and layer norm epsilon, and PAD's and BOS's logits (Marian has
    no PAD: zeros, no bias)."""
    model, tokenizer = imported
    hf_model, hf_tokenizer, _, _ = marian_preset.load(os.path.join(compare.folder(), "hf"))
    config = model.transformer_config
    assert (config.sinusoid_layout, config.layer_norm_epsilon) == ("marian", 1e-9)
    sources = [s for s, _ in models.pairs("test", 200)]
    assert tokenizer.encode(sources) == hf_tokenizer.encode(sources)
    rows = [ids + [EOS_ID] for ids in tokenizer.encode(sources[:16])]
    source = np.zeros((16, max(map(len, rows))), "int32")
    for i, row in enumerate(rows):
        source[i, : len(row)] = row
    target = np.concatenate([np.full((16, 1), BOS_ID), source[:, :6]], axis=1)
    same = dataclasses.replace(config, sinusoid_layout="halves", layer_norm_epsilon=1e-5)
    twin = Transformer(**dataclasses.asdict(same))
    twin.set_weights(model.get_weights())
    ours, theirs = (keras.ops.convert_to_numpy(m((source, target))) for m in (twin, hf_model))
    columns = [i for i in range(config.vocab_size) if i not in (PAD_ID, BOS_ID)]
    np.testing.assert_allclose(ours[..., columns], theirs[..., columns], atol=1e-5)
    assert np.abs(keras.ops.convert_to_numpy(model((source, target))) - ours).max() > 1e-3  # the sinusoids differ


@pytest.mark.slow
def test_ctranslate2s_opus_mt_converter_of_the_same_folder_gives_our_greedy_outputs(folder, imported, tmp_path):
    """CTranslate2's converter computes the sinusoids with Hugging Face's
    frequencies, 10000^(-2i/d), where Marian's are 10000^(-i/(d/2 - 1)).
    Our model with that layout gives its greedy outputs (this model's
    weights were trained with it); with Marian's table swapped into its
    model, it scores outputs as ours does."""
    model, tokenizer = imported
    sources = [s for s, _ in models.pairs("test", 100)]
    source_ids = [ids + [EOS_ID] for ids in tokenizer.encode(sources)]
    pieces = [tokenizer.source_id_to_piece(ids[:-1]) for ids in source_ids]  # CTranslate2 adds </s>
    translator = Translator(with_layout(model, "halves"), tokenizer, beam_size=1,
                            max_extra_length=reference.MAX_EXTRA_LENGTH, eager_steps=0)
    limits = [min(len(ids) + reference.MAX_EXTRA_LENGTH, 512) for ids in source_ids]
    engine = converted(folder, str(tmp_path / "own"))
    expected = compare.ctranslate2_greedy(engine, pieces, limits, tokenizer.target_processor.piece_to_id)
    decoded = [outputs[0][0] for outputs in translator.runner.decode(source_ids, translator.sampler)]
    equal, bad = compare.near_ties(translator, source_ids, decoded, expected, tolerance=1e-3)
    assert not bad and equal >= 0.98 * len(sources), (equal, bad[:3])

    engine = converted(folder, str(tmp_path / "marian"), positions="marian")
    translator = Translator(model, tokenizer, jit_compile=False)
    targets = [ids[:-1] if ids[-1] == EOS_ID else ids for ids in decoded[:50]]
    scored = engine.score_batch(pieces[:50], [tokenizer.id_to_piece(ids) for ids in targets])
    ours = translator.runner.force(source_ids[:50], [ids + [EOS_ID] for ids in targets])
    error = max(abs(a - b) for s, o in zip(scored, ours) for a, b in zip(s.log_probs, o))
    assert error < 1e-3, error


@pytest.mark.parametrize("options", [
    {"transformer-preprocess": "n", "transformer-postprocess": "da", "transformer-postprocess-top": "n",
     "tied-embeddings-all": False, "tied-embeddings": False, "transformer-ffn-activation": "gelu",
     "version": "v1.10.0", "transformer-decoder-dim-ffn": 24},
    {"transformer-ffn-activation": "relu", "tied-embeddings-all": False, "tied-embeddings": True,
     "enc-depth": 1, "dec-depth": 3},
], ids=["pre-norm-separate-untied-gelu-sigmoid", "post-norm-separate-tied-relu"])
def test_marian_variants_score_as_ctranslate2_scores(options, tmp_path):
    """Random Marian models of other options: pre-norm with final norms,
    separate vocabularies and embeddings, an output matrix of its own,
    Marian's sigmoid GELU (before its release 1.12.3), decoder layers and
    widths of their own: our log-probabilities of given translations are
    CTranslate2's (its converter with Marian's sinusoids)."""
    hf_folder = os.path.join(compare.folder(), "variants", "separate-vocabularies-untied-gelu")
    vocabularies = models.hf_vocabularies(hf_folder)
    options = {**models.MARIAN_OPTIONS, "dim-emb": 16, "enc-depth": 2, "dec-depth": 2, "transformer-heads": 2,
               "transformer-dim-ffn": 32, **options}
    weights = models.random_marian_weights(options, len(vocabularies[0]), len(vocabularies[1]))
    folder = models.write_marian(str(tmp_path / "marian"), weights, options, vocabularies, hf_folder)
    model, tokenizer, _, _ = marian_preset.load(folder)
    config = model.transformer_config
    assert config.norm_first == (options["transformer-preprocess"] == "n")
    assert config.activation == {"gelu": "gelu_sigmoid", "relu": "relu"}[options["transformer-ffn-activation"]]
    assert config.target_vocab_size == len(vocabularies[1]) + 2
    engine = converted(folder, str(tmp_path / "ct2"), "marian")
    pairs = models.pairs("test", 40)
    sources = [ids + [EOS_ID] for ids in tokenizer.encode([s for s, _ in pairs])]
    targets = [ids + [EOS_ID] for ids in tokenizer.encode_target([t for _, t in pairs])]
    # CTranslate2's Marian models add the source's </s> themselves, and the target's.
    scored = engine.score_batch([tokenizer.source_id_to_piece(ids[:-1]) for ids in sources],
                                [tokenizer.id_to_piece(ids[:-1]) for ids in targets])
    ours = Translator(model, tokenizer, jit_compile=False).runner.force(sources, targets)
    error = max(abs(a - b) for s, o in zip(scored, ours) for a, b in zip(s.log_probs, o))
    assert error < 1e-3, error


def _marian_copy(folder, tmp_path, **options):
    """A copy of the Marian folder whose special:model.yml has `options`."""
    import yaml

    copy = str(tmp_path / "marian")
    shutil.copytree(folder, copy)
    with np.load(os.path.join(folder, "model.npz")) as archive:
        arrays = dict(archive)
    model_yml = yaml.safe_load(arrays["special:model.yml"].tobytes().rstrip(b"\0").decode())
    model_yml.update(options)
    arrays["special:model.yml"] = np.frombuffer(yaml.safe_dump(model_yml).encode() + b"\0", np.int8)
    np.savez(os.path.join(copy, "model.npz"), **arrays)
    return copy


@pytest.mark.parametrize("field, value", [
    ("transformer-decoder-autoreg", "rnn"),  # an SSRU decoder
    ("transformer-decoder-autoreg", "average-attention"),
    ("factors-dim-emb", 8),
    ("transformer-postprocess-emb", "nd"),
    ("transformer-train-position-embeddings", True),
    ("right-left", True),
    ("transformer-ffn-activation", "tanh"),
    ("transformer-ffn-depth", 3),
    ("transformer-tied-layers", [1, 1]),
    ("type", "s2s"),
])
def test_marian_options_it_cannot_reproduce_are_refused_naming_them(folder, tmp_path, field, value):
    with pytest.raises(ValueError, match=re.escape(f"Received: {field}={value!r}")):
        marian_preset.load(_marian_copy(folder, tmp_path, **{field: value}))


def test_marian_norm_placements_it_cannot_reproduce_are_refused(folder, tmp_path):
    copy = _marian_copy(folder, tmp_path, **{"transformer-preprocess": "n", "transformer-postprocess": "dan"})
    with pytest.raises(ValueError, match=r"transformer-preprocess.*\['n', 'dan', ''\]"):
        marian_preset.load(copy)


def _huggingface_copy(tmp_path, **config):
    """A copy of the Hugging Face folder (without its weights, which a
    refused config never reads) whose config.json has `config`."""
    source = os.path.join(compare.folder(), "hf")
    copy = str(tmp_path / "hf")
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("*.safetensors"))
    with open(os.path.join(copy, "config.json"), encoding="utf-8") as f:
        hf = json.load(f)
    with open(os.path.join(copy, "config.json"), "w", encoding="utf-8") as f:
        json.dump(dict(hf, **config), f)
    return copy


@pytest.mark.parametrize("field, value", [
    ("normalize_before", True),
    ("activation_function", "tanh"),
    ("decoder_attention_heads", 2),
    ("decoder_start_token_id", 0),
    ("static_position_embeddings", False),
])
def test_huggingface_configs_it_cannot_reproduce_are_refused_naming_them(tmp_path, field, value):
    with pytest.raises(ValueError, match=re.escape(f"Received: {field}={value!r}")):
        marian_preset.load(_huggingface_copy(tmp_path, **{field: value}))


def test_a_vocabulary_with_target_language_tokens_is_refused(tmp_path):
    copy = _huggingface_copy(tmp_path)
    with open(os.path.join(copy, "vocab.json"), encoding="utf-8") as f:
        vocabulary = json.load(f)
    pad = vocabulary.pop("<pad>")
    vocabulary.update({">>fra<<": pad, "<pad>": pad + 1})
    with open(os.path.join(copy, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocabulary, f)
    with open(os.path.join(copy, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config.update(vocab_size=pad + 2, decoder_vocab_size=pad + 2, pad_token_id=pad + 1, decoder_start_token_id=pad + 1)
    with open(os.path.join(copy, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    with pytest.raises(ValueError, match=r"target-language tokens.*Received: vocabulary=\['>>fra<<'\]"):
        SubwordTokenizer.from_preset(copy)


def test_a_folder_that_is_no_marian_model_and_an_hf_name_without_a_network(tmp_path):
    with pytest.raises(FileNotFoundError, match="No Marian model"):
        marian.read(str(tmp_path))
    with pytest.raises(ValueError, match="hf://ORGANIZATION/NAME"):
        marian.read("hf://no-organization")
