"""Scores a preset on its corpus's test split: sacreBLEU and chrF, beam 4, all references.

    python tools/score_preset.py PRESET_DIR CORPUS

Writes test_scores.json and test_translations.txt into the preset directory
and prints the scores. Runs without TensorFlow (any Keras backend).
"""

import json
import sys
import time

from keras_transformer import Translator, datasets
from keras_transformer.evaluation import corpus_bleu

preset, corpus = sys.argv[1:]
sources, references = datasets.load_references(corpus, "test")
start = time.time()
hypotheses = Translator.from_preset(preset, beam_size=4, alpha=0.6, batch_size=128).translate(sources)
bleu, bleu_signature, chrf, chrf_signature = corpus_bleu(hypotheses, references)
result = {
    "corpus": corpus, "split": "test", "sources": len(sources), "beam_size": 4, "alpha": 0.6,
    "bleu": round(bleu.score, 2), "chrf": round(chrf.score, 2),
    "bleu_signature": str(bleu_signature), "chrf_signature": str(chrf_signature),
    "translate_seconds": round(time.time() - start, 1),
}
print("TEST", json.dumps(result))
with open(f"{preset}/test_scores.json", "w") as f:
    json.dump(result, f, indent=1)
with open(f"{preset}/test_translations.txt", "w") as f:
    f.write("\n".join(hypotheses) + "\n")
