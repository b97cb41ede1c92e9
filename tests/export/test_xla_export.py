"""XLA's SavedModel (`jit_compile=True`, `narrow_batches=True`): each
bucket's searches compiled per number of rows, rounded up to a power of two
(3 rows run as 4, with a copy of the last sentence), a batch narrowed to a
quarter once most of its sentences are done, and every decoding loop
(serving_default's beam search, sampling, steering) returns what the
`Translator` decoding without XLA does, as does the scoring signature that
the export carries beside them (one forward pass, which XLA does not
compile). The reference decodes eagerly: the loops of the export without
XLA, whose signatures return the `Translator`'s outputs
(tests/serving/test_output_paths.py). The permuting model's XLA export
(tests/shared.py); that the graph runs with tensorflow and tensorflow-text
alone is checked on the export without XLA (tests/export/test_export.py):
XLA adds no op of a library of its own."""

import json
import os

import keras
import pytest

from keras_transformer import RandomSampler, Translator
from keras_transformer.serving.predictor import Instance, Sampling, load_saved_model_predictor
from keras_transformer.translation.outputs import prediction
from tests.decoding.permuting import EXPORT_MAX_EXTRA_LENGTH, N_BEST, WORDS, permute, permuting_model
from tests.helpers import assert_rows_close

pytestmark = [
    pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="SavedModel export runs in the TensorFlow pass"),
    pytest.mark.slow,  # XLA-compiled searches, one compile per signature and number of rows
]


def absent_word(text):
    return next(w for w in WORDS if w not in text.split())


def test_every_signature_of_the_xla_export_returns_what_the_translator_without_xla_does():
    from tests import shared

    model, tokenizer, _, held_out = permuting_model()
    # Eager decoding: no graph to trace for the reference.
    translator = Translator(model, tokenizer, max_extra_length=EXPORT_MAX_EXTRA_LENGTH, jit_compile=False)
    folder = shared.path("permuting_xla_export")
    xla, _ = load_saved_model_predictor(folder)
    version = os.path.join(folder, "1")
    metadata = json.load(open(os.path.join(version, "assets.extra", "metadata.json")))
    assert metadata["jit_compile"] is True and metadata["narrow_batches"] is True
    assert xla.signatures == ["sample", "score", "serving_default", "steer"]
    assert not os.path.exists(os.path.join(version, "assets.extra", "tf_serving_warmup_requests"))  # none asked
    texts = held_out[:3]  # 3 rows, run as 4
    rows = xla([Instance(t, confidences=True, sampling=Sampling(seed=4, temperature=2.0)) for t in texts])
    found = translator.hypotheses(texts, sampler=RandomSampler(temperature=2.0, seed=4))
    assert_rows_close(rows, [prediction(h) for h in found], atol=1e-4)
    rows = xla([Instance(t, targets=permute(t)) for t in texts])
    assert_rows_close(rows, [s.prediction() for s in translator.score(texts, [permute(t) for t in texts])], atol=1e-4)
    prefixes, constraints = [t.split()[0] for t in texts], [[absent_word(t)] for t in texts]
    rows = xla([Instance(t, n_best=N_BEST, target_prefix=p, constraints=c)
                for t, p, c in zip(texts, prefixes, constraints)])
    found = translator.hypotheses(texts, N_BEST, target_prefix=prefixes, constraints=constraints)
    assert_rows_close(rows, [prediction(h, N_BEST) for h in found], atol=1e-4)
    short, long = [s for s in held_out if len(s.split()) == 2], [s for s in held_out if len(s.split()) == 5]
    # serving_default, with its 3 best: 32 inputs of one bucket, 27 short, 4
    # long (the batch goes on narrowed once the short ones are done) and a
    # blank one, its empty translation.
    narrowing = (short * 27)[:27] + (long * 4)[:4] + [""]
    expected = [prediction(h, N_BEST) for h in translator.hypotheses(narrowing, N_BEST)]
    for row in expected:  # serving_default returns no confidences
        del row["confidences"], row["nbest_confidences"]
    assert_rows_close(xla(narrowing), expected, atol=1e-4)
