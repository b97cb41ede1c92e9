"""Exports the shipped preset `tatoeba_en_fr` as the shipped SavedModel, with the CLI.

    python tools/export_tatoeba_en_fr.py [OUTPUT_DIR]    # default saved_models/tatoeba_en_fr (version 1 replaced)

is `rm -r OUTPUT_DIR/1` and

    keras-transformer export tatoeba_en_fr --output-dir OUTPUT_DIR --version 1 --buckets 16 32 64 \\
        --metadata '{"bleu": 54.66, "chrf": 69.92, "test_split": "..."}'

The SavedModel's assets.extra/metadata.json gets the decoding settings, the
preset's name and its metadata.json (`preset_metadata`; the shipped version
1 was written before the CLI added it) and these scores of the model card.
"""

import json
import os
import shutil
import sys

from keras_transformer.cli import main

output = sys.argv[1] if len(sys.argv) > 1 else "saved_models/tatoeba_en_fr"
scores = {
    "bleu": 54.66, "chrf": 69.92,
    "test_split": "keras_transformer.datasets tatoeba_en_fr test (1918 English sources, all references)",
}
shutil.rmtree(os.path.join(output, "1"), ignore_errors=True)
sys.exit(main(["export", "tatoeba_en_fr", "--output-dir", output, "--version", "1",
               "--buckets", "16", "32", "64", "--metadata", json.dumps(scores)]))
