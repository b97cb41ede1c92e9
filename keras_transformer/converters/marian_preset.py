"""A Marian or OPUS-MT model as our model, tokenizer and preset folder.

`load(source)` gives `(model, tokenizer, model_card, metadata)` of a source
that `keras_transformer.converters.marian` reads (a Hugging Face Marian
folder, a Marian folder or `hf://org/name`); `import_preset(source,
output)`, which `keras-transformer import` runs, writes them as a preset
folder that every command takes as it is, with the source's license files.

Example:

>>> model, tokenizer, card, metadata = load("downloads/opus-mt-en-de")
>>> import_preset("hf://Helsinki-NLP/opus-mt-en-de", "opus_mt_en_de")
'opus_mt_en_de'
"""

import os
import shutil

from keras_transformer import presets
from keras_transformer.atomic_files import new_folder
from keras_transformer.converters import marian
from keras_transformer.data.tokenizer import SubwordTokenizer


def load(source, load_weights=True, dtype=None):
    """`(model, tokenizer, model_card, metadata)` of the Marian model
    `source`; `load_weights=False`: its architecture, untrained."""
    return parts(marian.read(source), load_weights, dtype)


def parts(checkpoint, load_weights=True, dtype=None):
    """`load`'s parts of a `marian.Checkpoint`."""
    model = presets.marian_model(checkpoint, load_weights, dtype)
    tokenizer = SubwordTokenizer(*[p for p in marian.tokenizer_protos(checkpoint) if p is not None])
    return model, tokenizer, marian.model_card(checkpoint, model.transformer_config), marian.metadata(checkpoint)


def import_preset(source, output, weights_dtype="float32"):
    """Writes the preset folder `output` of the Marian model `source`:
    config, weights (`weights_dtype`), tokenizers, metadata, model card and
    the source's license files. The folder must not exist or be empty; it
    appears whole or not at all. Returns `output`."""
    with new_folder(output, "--output") as staging:  # checked before the source is read
        checkpoint = marian.read(source)
        model, tokenizer, card, metadata = parts(checkpoint)
        presets.save_model(model, staging, weights_dtype=weights_dtype, model_card=card, metadata=metadata)
        tokenizer.save_to_preset(staging)
        for name in metadata["license"]["files"]:
            shutil.copyfile(os.path.join(checkpoint.info["folder"], name), os.path.join(staging, name))
    return output
