"""XLA's SavedModel (`jit_compile=True`, `narrow_batches=True`): each
bucket's searches compiled per number of rows, rounded up to a power of two
(3 rows run as 4, with a copy of the last sentence), a batch narrowed to a
quarter once most of its sentences are done, and every decoding loop
(serving_default's beam search, sampling, steering) returns what the graph
without XLA does, as does the scoring signature that the export carries
beside them (one forward pass, which XLA does not compile). The permuting
model's two exports (tests/shared.py); that the graph runs with tensorflow
and tensorflow-text alone is checked on the export without XLA
(tests/export/test_export.py): XLA adds no op of a library of its own."""

import json
import os

import keras
import pytest

from keras_transformer.serving.predictor import Instance, Sampling, load_saved_model_predictor
from tests.decoding.permuting import N_BEST, WORDS, permute, training_sentences
from tests.helpers import assert_rows_close

pytestmark = [
    pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="SavedModel export runs in the TensorFlow pass"),
    pytest.mark.slow,  # XLA-compiled searches, one compile per signature and number of rows
]


def absent_word(text):
    return next(w for w in WORDS if w not in text.split())


def test_every_signature_of_the_xla_export_returns_what_the_plain_one_does():
    from tests import shared

    plain, _ = load_saved_model_predictor(shared.path("permuting_export"))
    folder = shared.path("permuting_xla_export")
    xla, _ = load_saved_model_predictor(folder)
    version = os.path.join(folder, "1")
    metadata = json.load(open(os.path.join(version, "assets.extra", "metadata.json")))
    assert metadata["jit_compile"] is True and metadata["narrow_batches"] is True
    assert xla.signatures == ["sample", "score", "serving_default", "steer"]
    assert not os.path.exists(os.path.join(version, "assets.extra", "tf_serving_warmup_requests"))  # none asked
    _, held_out = training_sentences()
    texts = held_out[:3]  # 3 rows, run as 4
    for instances in (
        [Instance(t, confidences=True, sampling=Sampling(seed=4, temperature=2.0)) for t in texts],  # sample
        [Instance(t, targets=permute(t)) for t in texts],  # score
        [Instance(t, n_best=N_BEST, target_prefix=t.split()[0], constraints=(absent_word(t),)) for t in texts],  # steer
    ):
        assert_rows_close(xla(instances), plain(instances), atol=1e-4)
    short, long = [s for s in held_out if len(s.split()) == 2], [s for s in held_out if len(s.split()) == 5]
    # serving_default, with its 3 best: 32 inputs of one bucket, 27 short, 4
    # long (the batch goes on narrowed once the short ones are done) and a
    # blank one, its empty translation.
    narrowing = (short * 27)[:27] + (long * 4)[:4] + [""]
    assert_rows_close(xla(narrowing), plain(narrowing), atol=1e-4)
