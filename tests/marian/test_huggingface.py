"""A Hugging Face Marian model, imported, against `transformers`' own
answers (`tests/marian/reference.py`): its tokenizer's ids, its encoder
output and logits on every backend, its greedy decoding and, in Hugging
Face's mode, its beam search; and random models of other configs."""

import os

import keras
import numpy as np
import pytest

from keras_transformer import Translator
from keras_transformer.translation.marian import preset as marian_preset
from keras_transformer.translation.preprocessor import TranslationPreprocessor
from keras_transformer.tokens import BOS_ID, EOS_ID, UNK_ID
from tests.marian import compare, reference


def _imported(name):
    path = os.path.join(compare.folder(), "hf" if name == "hf" else os.path.join("variants", name))
    model, tokenizer, _, _ = marian_preset.load(path)
    return path, model, tokenizer


@pytest.fixture(scope="module")
def imported():
    return _imported("hf")


def _check_tokenizer(path, tokenizer, answers, count=None):
    pairs = reference.models.pairs("test", count)
    sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
    source_ids, target_ids = compare.to_ours(path), compare.to_ours(path, target=True)
    expected_sources = [source_ids[row].tolist() for row in answers["source_ids"]]
    expected_targets = [target_ids[row].tolist() for row in answers["target_ids"]]
    assert [ids + [EOS_ID] for ids in tokenizer.encode(sources)] == expected_sources
    assert [ids + [EOS_ID] for ids in tokenizer.encode_target(targets)] == expected_targets
    assert tokenizer.decode(expected_targets) == answers["decoded_targets"]
    return sources, targets, expected_sources, expected_targets


def test_the_tokenizer_gives_marian_tokenizers_ids_in_python_and_in_the_graph(imported):
    import tensorflow as tf

    path, _, tokenizer = imported
    answers, _ = compare.reference()
    sources, targets, expected_sources, expected_targets = _check_tokenizer(path, tokenizer, answers)
    assert any(UNK_ID in row for row in expected_sources + expected_targets)  # pieces the vocabulary lacks
    graph = TranslationPreprocessor(tokenizer, 128).graph_tokenizer()
    assert [row + [EOS_ID] for row in graph.tokenize(tf.constant(sources)).to_list()] == expected_sources
    assert [row + [EOS_ID] for row in graph.tokenize(tf.constant(targets), target=True).to_list()] == expected_targets
    padded = np.zeros((len(targets), max(map(len, expected_targets))), "int32")
    for i, row in enumerate(expected_targets):
        padded[i, : len(row)] = row
    assert [t.decode() for t in graph.detokenize(padded).numpy()] == answers["decoded_targets"]


def _check_logits(path, model, arrays):
    """Our encoder output and logits of `transformers`' teacher-forced
    batch, within float32 rounding of its own: the largest difference under
    1e-5 of the largest value."""
    pad = np.max(arrays["source"])  # HF's PAD is its last id, and pads the batch
    source = compare.to_ours(path)[arrays["source"]]
    target = compare.to_ours(path, target=True)[arrays["decoder_input"]]
    target[:, 0] = BOS_ID
    memory = keras.ops.convert_to_numpy(model.encode(source))
    logits = keras.ops.convert_to_numpy(model((source, target)))[..., compare.their_columns(path)]
    real_source = arrays["source_mask"].astype(bool)
    real_target = (arrays["decoder_input"] != pad) | (np.arange(target.shape[1]) == 0)
    memory_error = np.abs(memory - arrays["memory"])[real_source].max()
    logits_error = np.abs(logits - arrays["logits"])[real_target].max()
    assert memory_error < 1e-5 * np.abs(arrays["memory"][real_source]).max(), memory_error
    assert logits_error < 1e-5 * np.abs(arrays["logits"][real_target]).max(), logits_error
    return memory_error, logits_error


@pytest.mark.backend
def test_encoder_output_and_logits_match_to_float32_rounding(imported):
    path, model, _ = imported
    _check_logits(path, model, compare.reference()[1])


@pytest.fixture(scope="module")
def greedy(imported):
    """`(translator, sources, their ids, our greedy outputs' ids)` of the
    imported model on the test sources that `generate` decoded greedily,
    by the decoding graph (`eager_steps=0`: traced at once, which costs
    less than these sentences' eager steps)."""
    _, model, tokenizer = imported
    translator = Translator(model, tokenizer, beam_size=1, max_extra_length=reference.MAX_EXTRA_LENGTH,
                            eager_steps=0)
    sources = [s for s, _ in reference.models.pairs("test", reference.GREEDY_SOURCES)]
    source_ids = [ids + [EOS_ID] for ids in tokenizer.encode(sources)]
    ours = [outputs[0][0] for outputs in translator.runner.decode(source_ids, translator.sampler)]
    return translator, sources, source_ids, ours


def test_greedy_decoding_gives_generates_tokens_and_texts(imported, greedy):
    path = imported[0]
    translator, sources, source_ids, ours = greedy
    answers, _ = compare.reference()
    expected = [compare.to_ours(path, target=True)[row].tolist() for row in answers["greedy"]]
    equal, bad = compare.near_ties(translator, source_ids, ours, expected, tolerance=1e-4)
    assert not bad and equal >= 0.99 * len(sources), (equal, bad[:3])
    texts = translator.tokenizer.decode(ours)
    assert sum(a == b for a, b in zip(texts, answers["greedy_texts"])) == equal
    assert translator.translate(sources[:50]) == texts[:50]  # the public path, batched as it batches


@pytest.mark.slow
def test_beam_search_in_hugging_faces_mode_agrees_with_generate(imported):
    _, model, tokenizer = imported
    answers, _ = compare.reference()
    translator = Translator(model, tokenizer, beam_size=reference.BEAM["num_beams"],
                            alpha=reference.BEAM["length_penalty"], length_penalty="huggingface",
                            max_extra_length=reference.MAX_EXTRA_LENGTH, eager_steps=0)
    sources = [s for s, _ in reference.models.pairs("test", reference.BEAM_SOURCES)]
    agreed = sum(a == b for a, b in zip(translator.translate(sources), answers["beam_texts"]))
    assert agreed >= 0.99 * len(sources), agreed


@pytest.mark.parametrize("name", sorted(reference.VARIANTS))
def test_other_configs_of_marian_config_import_exactly(name):
    """Random models of other configs (`reference.VARIANTS`): their
    tokenizers' ids and logits."""
    path, model, tokenizer = _imported(name)
    answers, arrays = compare.reference(name)
    config, variant = model.transformer_config, reference.VARIANTS[name]
    assert (config.target_vocab_size is not None) == variant.get("separate_vocabs", False)
    assert config.tie_output_embeddings == variant["config"].get("tie_word_embeddings", True)
    _check_tokenizer(path, tokenizer, answers, reference.TOKENIZED_PAIRS)
    _check_logits(path, model, arrays)


def test_ctranslate2s_transformers_converter_of_the_folder_gives_our_greedy_outputs(imported, greedy):
    """CTranslate2's own converter of `transformers` models
    (`ct2-transformers-converter`), run on the same folder by
    `tests/marian/reference.py`."""
    path, _, tokenizer = imported
    translator, sources, source_ids, ours = greedy
    pieces = [tokenizer.source_id_to_piece(ids) for ids in source_ids]  # </s> last: HF's tokenizer adds it
    limits = [min(len(ids) + reference.MAX_EXTRA_LENGTH, 128) for ids in source_ids]
    engine = compare.ctranslate2_translator(os.path.join(compare.folder(), "hf-ctranslate2"))
    expected = compare.ctranslate2_greedy(engine, pieces, limits,
                                          tokenizer.target_processor.piece_to_id)
    equal, bad = compare.near_ties(translator, source_ids, ours, expected, tolerance=1e-3)
    assert not bad and equal >= 0.98 * len(sources), (equal, bad[:3])
