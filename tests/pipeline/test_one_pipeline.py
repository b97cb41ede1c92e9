"""One pipeline: every path that translates text gives the same strings.

The first 128 sources of the shipped test split and the edge cases of
`keras_transformer.translation.preprocessor` (an input over the source budget, one of
exactly the budget and one just over it, blank inputs, emoji, non-Latin
scripts, full-width text that NFKC normalizes) are translated by the `tatoeba_en_fr` preset with its defaults but
`BUCKETS`:
- by `Translator` on TensorFlow (the reference);
- by the SavedModel that `keras-transformer export` writes, behind the
  REST server (tests/export loads such a SavedModel in a process with only
  tensorflow and tensorflow-text's ops);
- by `Translator` on JAX (32 of the sources and the edge cases but the
  budget's two, whose outputs are long), and on PyTorch (those edge cases).

The reference translations are made once per test run, on TensorFlow
(tests/shared.py), by whichever pass asks first.
"""

import json
import os

import httpx
import keras
import pytest

from keras_transformer import SubwordTokenizer, Translator, datasets
from keras_transformer.evaluation import corpus_bleu
from keras_transformer.translation.preprocessor import TranslationPreprocessor
from tests.serving.conftest import run_server  # noqa: F401 - a real server fixture

pytestmark = [pytest.mark.backend, pytest.mark.slow]

PRESET = "tatoeba_en_fr"
# Buckets 16, 32 and the source budget (206): the 128 sources fit the first
# two, the inputs of the budget the last; fewer than the default's five
# branches to trace and export.
BUCKETS = (16, 32)
SOURCES = 128


def one_piece_word(tokenizer):
    """A word that the tokenizer turns into one piece, however often repeated."""
    return next(w for w in ("cat", "dog", "house", "table") if len(tokenizer.encode(" ".join([w] * 8))) == 8)


def edge_cases(tokenizer, sources):
    """`{name: text}`: the inputs whose rules `keras_transformer.translation.preprocessor` states."""
    budget = TranslationPreprocessor(tokenizer, 256).source_budget  # the preset's max_length
    word = one_piece_word(tokenizer)
    long = ""
    for sentence in sources:  # sentences until the text is over the budget
        long = f"{long} {sentence}".strip()
        if len(tokenizer.encode(long)) >= budget:
            break
    return {
        "over_long": long,
        "exactly_the_budget": " ".join([word] * (budget - 1)),  # + EOS: the budget
        "one_over_the_budget": " ".join([word] * budget),  # no sentence end: two windows
        "empty": "",
        "spaces": "   ",
        "tab": "\t",
        "no_break_space": "\u00a0",
        "mixed_blank": " \u3000\t\r\n\x0b\x0c\x1c\x85\u2028 ",  # kinds of space that Python's str.isspace counts
        "emoji": "I love you 🙂.",
        "cyrillic": "Я тебя люблю.",
        "chinese": "我爱你。",
        "non_nfkc": "Ｗｈｅｒｅ ｉｓ ｔｈｅ ｓｔａｔｉｏｎ?",  # full-width letters: NFKC makes them ASCII
        "nfkc": "Where is the station?",
    }


def over_budget_parts(edges, tokenizer):
    """`{name: parts}`: what the preprocessor's rules say each over-budget
    input is translated as, the parts' translations joined by a space:
    `over_long` as its sentences, each on its own; `one_over_the_budget`
    (no sentence end) in windows of `source_budget - 1` ids, which are
    `exactly_the_budget`'s words and the one word left."""
    from keras_transformer.translation.sentences import segment

    return {
        "over_long": segment(edges["over_long"])[1],
        "one_over_the_budget": [edges["exactly_the_budget"], one_piece_word(tokenizer)],
    }


def texts():
    """`(texts, edge cases)`: the test sources, the edge cases and their parts, as every pass translates them."""
    tokenizer = SubwordTokenizer.from_preset(PRESET)
    sources, _ = datasets.load_references(PRESET, "test")
    edges = edge_cases(tokenizer, sources[SOURCES:])
    parts = [part for parts in over_budget_parts(edges, tokenizer).values() for part in parts]
    return sources[:SOURCES] + list(edges.values()) + parts, edges


def reference_translations():
    """`{text: translation}` of `texts()` by the preset on TensorFlow, made
    once per test run (tests/shared.py), whichever pass asks first."""
    from tests import shared

    with open(os.path.join(shared.path("one_pipeline_translations"), "translations.json"), encoding="utf-8") as f:
        made = json.load(f)
    return dict(zip(made["texts"], made["translations"]))


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the reference and the SavedModel: TensorFlow")
def test_the_translator_its_saved_model_and_the_server_translate_alike(tmp_path, run_server):
    from keras_transformer.models import presets
    from keras_transformer.cli import main
    from keras_transformer.serving import ServingLimits, create_app, load_saved_model_predictor

    inputs, edges = texts()
    expected = reference_translations()  # the Translator's, in this (TensorFlow) process
    translations = {name: expected[text] for name, text in edges.items()}
    check_the_rules(translations, edges, SubwordTokenizer.from_preset(PRESET), expected)
    # A model that translates: the card's BLEU is on all 1,918 sources; an untrained one scores about 0.
    sources, references = datasets.load_references(PRESET, "test")
    assert corpus_bleu([expected[s] for s in sources[:SOURCES]], references[:SOURCES])[0].score > 50

    # `keras-transformer export` of the preset (the README's), with one
    # decoding loop a bucket: half the graph to trace and load; that more
    # loops translate as one is tests/export's. The preset's name and
    # metadata go into the SavedModel's.
    folder = tmp_path / "saved" / PRESET
    assert main(["export", PRESET, "--output-dir", str(folder), "--buckets", *map(str, BUCKETS),
                 "--parallel-loops", "1", "--no-warmup"]) == 0
    with open(folder / "1" / "assets.extra" / "metadata.json", encoding="utf-8") as f:
        metadata = json.load(f)
    assert (metadata["preset"], metadata["preset_metadata"]) == (PRESET, presets.load_metadata(PRESET))
    assert metadata["buckets"][:-1] == list(BUCKETS)
    predict, version = load_saved_model_predictor(str(folder))
    # The server's timeout, the client's: on a busy machine a batch may outlast the server's default.
    server = run_server(create_app(predict, PRESET, version, limits=ServingLimits(request_timeout_s=300)))
    served = []
    for start in range(0, len(inputs), 64):
        r = httpx.post(f"{server.url}/v1/models/{PRESET}:predict", json={"instances": inputs[start : start + 64]},
                       timeout=300)
        assert r.status_code == 200, r.text
        served += [p["translations"] for p in r.json()["predictions"]]
    assert served == [expected[text] for text in inputs]


def check_the_rules(translations, edges, tokenizer, expected):
    """What the preprocessor's rules promise of the edge cases' translations."""
    assert [translations[name] for name in ("empty", "spaces", "tab", "no_break_space", "mixed_blank")] == [""] * 5
    for name, parts in over_budget_parts(edges, tokenizer).items():
        assert len(parts) > 1 and translations[name] == " ".join(expected[part] for part in parts), name
    assert translations["non_nfkc"] == translations["nfkc"]  # the tokenizer normalizes text (NFKC) on every path


def without_the_budgets_inputs(edges):
    """The edge cases but the budget's two inputs: their outputs of about
    200 tokens decode step by step for every row of their batch. Their
    rules (windows and sentences) are the preprocessor's, run on every
    backend alike, and TensorFlow checks them above."""
    return [text for name, text in edges.items() if "budget" not in name]


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="TensorFlow is the reference; PyTorch: the edge cases")
def test_the_translator_on_jax_translates_as_on_tensorflow():
    # The first 32 sources in batches of 16 (each new number of rows and
    # bucket is another jax.jit compile) and the edge cases.
    (inputs, edges), expected = texts(), reference_translations()
    inputs = inputs[:32] + without_the_budgets_inputs(edges)
    translator = Translator.from_preset(PRESET, buckets=BUCKETS, batch_size=16)
    assert translator.translate(inputs) == [expected[text] for text in inputs]


@pytest.mark.skipif(keras.backend.backend() != "torch", reason="TensorFlow is the reference; JAX: the sources too")
def test_the_translator_on_pytorch_translates_the_edge_cases_as_on_tensorflow():
    (_, edges), expected = texts(), reference_translations()
    inputs = without_the_budgets_inputs(edges)
    assert Translator.from_preset(PRESET, buckets=BUCKETS).translate(inputs) == [expected[text] for text in inputs]
