"""Exports the shipped preset `tatoeba_en_fr` as the shipped SavedModel.

    python tools/export_tatoeba_en_fr.py [OUTPUT_DIR]    # default saved_models/tatoeba_en_fr (version 1 replaced)
"""

import os
import shutil
import sys

from keras_transformer import SubwordTokenizer, Transformer
from keras_transformer.export import export

output = sys.argv[1] if len(sys.argv) > 1 else "saved_models/tatoeba_en_fr"
shutil.rmtree(os.path.join(output, "1"), ignore_errors=True)
model, tokenizer = Transformer.from_preset("tatoeba_en_fr"), SubwordTokenizer.from_preset("tatoeba_en_fr")
print(export(model, tokenizer, output, version=1, buckets=(16, 32, 64),
             metadata={"preset": "tatoeba_en_fr", "bleu": 54.66, "chrf": 69.92}))
