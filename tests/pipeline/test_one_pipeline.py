"""One pipeline: every path that translates text gives the same strings.

About 300 sources of the shipped test split and the edge cases of
`keras_transformer.preprocessor` (an input over the source budget, one of
exactly the budget and one just over it, blank inputs, emoji, non-Latin
scripts, full-width text that NFKC normalizes) are translated by the `tatoeba_en_fr` preset with its defaults but
`BUCKETS`:
- by `Translator` on TensorFlow (the reference);
- by the SavedModel that `Translator.export` writes, behind the REST
  server (tests/export loads such a SavedModel in a process with only
  tensorflow and tensorflow-text's ops);
- by `Translator` on JAX, and on PyTorch for the edge cases but the
  budget's two (their long outputs decode step by step there).

Under tests/run.sh the TensorFlow pass writes its translations to the
folder every pass shares, and the JAX and PyTorch passes compare with them;
run alone, those passes make the reference in a TensorFlow process.
"""

import json
import os
import subprocess
import sys

import httpx
import keras
import pytest

from keras_transformer import SubwordTokenizer, Translator, datasets
from keras_transformer.evaluation import corpus_bleu
from keras_transformer.preprocessor import TranslationPreprocessor
from tests.serving.conftest import run_server  # noqa: F401 - a real server fixture

pytestmark = [pytest.mark.backend, pytest.mark.slow]

PRESET = "tatoeba_en_fr"
# Buckets 16, 32 and the source budget (206): the 300 sources fit the first
# two, the inputs of the budget the last; fewer than the default's five
# branches to trace and export.
BUCKETS = (16, 32)
SOURCES = 300
REFERENCE_FILE = "one_pipeline_translations.json"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def one_piece_word(tokenizer):
    """A word that the tokenizer turns into one piece, however often repeated."""
    return next(w for w in ("cat", "dog", "house", "table") if len(tokenizer.encode(" ".join([w] * 8))) == 8)


def edge_cases(tokenizer, sources):
    """`{name: text}`: the inputs whose rules `keras_transformer.preprocessor` states."""
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


@pytest.fixture(scope="module")
def inputs():
    tokenizer = SubwordTokenizer.from_preset(PRESET)
    sources, references = datasets.load_references(PRESET, "test")
    edges = edge_cases(tokenizer, sources[SOURCES:])
    return sources[:SOURCES], references[:SOURCES], edges


def reference_translations(sources, edges, tmp_path):
    """The TensorFlow pass's translations, from the shared folder or made now."""
    shared = os.environ.get("KERAS_TRANSFORMER_TEST_SHARED")
    path = os.path.join(shared, REFERENCE_FILE) if shared else None
    if path is None or not os.path.exists(path):
        path = str(tmp_path / REFERENCE_FILE)
        code = ("import json, sys\nfrom keras_transformer import Translator\n"
                f"texts = json.load(open(sys.argv[1]))\njson.dump(Translator.from_preset({PRESET!r}, buckets={BUCKETS!r})"
                ".translate(texts), "
                "open(sys.argv[2], 'w'))")
        texts = str(tmp_path / "texts.json")
        json.dump(sources + list(edges.values()), open(texts, "w"))
        env = dict(os.environ, KERAS_BACKEND="tensorflow", PYTHONPATH=ROOT)
        run = subprocess.run([sys.executable, "-c", code, texts, path], env=env, capture_output=True, text=True,
                             timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
    return json.load(open(path))


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the reference and the SavedModel: TensorFlow")
def test_the_translator_its_saved_model_and_the_server_translate_alike(inputs, tmp_path, run_server):
    from keras_transformer.serving import create_app, load_saved_model_predictor

    sources, references, edges = inputs
    texts = sources + list(edges.values())
    translator = Translator.from_preset(PRESET, buckets=BUCKETS)
    expected = translator.translate(texts)
    shared = os.environ.get("KERAS_TRANSFORMER_TEST_SHARED")
    if shared:
        with open(os.path.join(shared, REFERENCE_FILE + ".partial"), "w") as f:
            json.dump(expected, f)
        os.replace(os.path.join(shared, REFERENCE_FILE + ".partial"), os.path.join(shared, REFERENCE_FILE))
    check_the_rules(dict(zip(edges, expected[SOURCES:])), edges)
    # A model that translates: the card's BLEU is on all 1,918 sources; an untrained one scores about 0.
    assert corpus_bleu(expected[:SOURCES], references)[0].score > 50

    # One decoding loop a bucket: half the graph to trace and load; that two
    # loops translate as one is tests/export's test_parallel_loops_translate_as_one.
    path = translator.export(str(tmp_path / "saved" / PRESET), warmup_batch_sizes=(), parallel_loops=1)
    predict, version = load_saved_model_predictor(os.path.dirname(path))
    server = run_server(create_app(predict, PRESET, version))
    served = []
    for start in range(0, len(texts), 64):
        r = httpx.post(f"{server.url}/v1/models/{PRESET}:predict", json={"instances": texts[start : start + 64]},
                       timeout=300)
        assert r.status_code == 200, r.text
        served += [p["translations"] for p in r.json()["predictions"]]
    assert served == expected


def check_the_rules(translations, edges):
    """What the preprocessor's rules promise of the edge cases' translations."""
    assert [translations[name] for name in ("empty", "spaces", "tab", "no_break_space", "mixed_blank")] == [""] * 5
    # Split at its sentence ends, each translated: far longer than any one sentence's translation.
    assert translations["over_long"].count(" ") > 0.5 * edges["over_long"].count(" ")
    assert translations["exactly_the_budget"] and translations["one_over_the_budget"]
    assert translations["non_nfkc"] == translations["nfkc"]  # the tokenizer normalizes text (NFKC) on every path


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="TensorFlow is the reference; PyTorch: the edge cases")
def test_the_translator_on_jax_translates_as_on_tensorflow(inputs, tmp_path):
    sources, _, edges = inputs
    expected = reference_translations(sources, edges, tmp_path)
    # Batches of 16: under jax.jit every row of a batch decodes until its
    # longest output is done, so the budget's inputs (outputs of about 200
    # tokens) keep 16 rows decoding instead of 64.
    translator = Translator.from_preset(PRESET, buckets=BUCKETS, batch_size=16)
    assert translator.translate(sources + list(edges.values())) == expected


@pytest.mark.skipif(keras.backend.backend() != "torch", reason="TensorFlow is the reference; JAX: every source")
def test_the_translator_on_pytorch_translates_the_edge_cases_as_on_tensorflow(inputs, tmp_path):
    sources, _, edges = inputs
    expected = dict(zip(edges, reference_translations(sources, edges, tmp_path)[SOURCES:]))
    # Not the budget's two inputs: outputs of about 200 tokens, each step
    # eager here (TensorFlow and JAX translate them).
    names = [name for name in edges if "budget" not in name]
    translations = Translator.from_preset(PRESET, buckets=BUCKETS).translate([edges[name] for name in names])
    assert translations == [expected[name] for name in names]
