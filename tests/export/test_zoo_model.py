"""The pretrained model shipped in saved_models/: present, small, and translating."""

import json
import os

import keras
import pytest

pytestmark = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="SavedModels run in the TensorFlow pass"
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "saved_models", "tatoeba_en_fr", "1")


def test_the_zoo_model_is_complete_and_at_most_55_mb():
    for name in ("saved_model.pb", "variables/variables.index", "assets/tokenizer.model", "assets.extra/metadata.json",
                 "assets.extra/tf_serving_warmup_requests"):
        assert os.path.isfile(os.path.join(MODEL, name)), name
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(MODEL) for f in files)
    # Weights 34.6 MB in float32, graph 18.7 MB (4 buckets, each decoded by 2
    # parallel loops with their segments: 26 beam-search loop bodies), tokenizer 0.3 MB.
    assert size <= 55_000_000
    metadata = json.load(open(os.path.join(MODEL, "assets.extra", "metadata.json")))
    assert metadata["bleu"] > 50 and metadata["beam_size"] == 4 and metadata["alpha"] == 0.6
    card = open(os.path.join(ROOT, "saved_models", "tatoeba_en_fr", "README.md"), encoding="utf-8").read()
    assert f"{metadata['bleu']:.2f}" in card and f"{metadata['chrf']:.2f}" in card


def test_the_zoo_model_translates_and_blank_inputs_translate_to_nothing_through_our_predictor():
    # Version 1 was exported before the graph treated "\t" as blank; the
    # predictor behind `translate` and `serve` blanks such inputs itself.
    # (The preset's weights translate the test split well:
    # tests/pipeline/test_one_pipeline.py.)
    from keras_transformer.serving.server import load_saved_model_predictor

    predict, version = load_saved_model_predictor(os.path.dirname(MODEL))
    rows = predict(["\t", "I love you.", "\r\n \x0c"])
    assert version == 1 and [row["translations"] for row in rows][0::2] == ["", ""]
    assert [row["scores"] for row in rows][0::2] == [0.0, 0.0]
    assert rows[1]["translations"].startswith(("Je t'aime", "Je vous aime"))
