"""A Marian or OPUS-MT model as our model, tokenizer and preset folder.

`load(source)` gives `(model, tokenizer, model_card, metadata)` of a source
that `keras_transformer.translation.marian.read` reads (a Hugging Face
Marian folder, a Marian folder or `hf://org/name`); `import_preset(source,
output)`, which `keras-transformer import` runs, writes them as a preset
folder that every command takes as it is, with the source's license files.

Example:

>>> model, tokenizer, card, metadata = load("downloads/opus-mt-en-de")
>>> import_preset("hf://Helsinki-NLP/opus-mt-en-de", "opus_mt_en_de")
'opus_mt_en_de'
"""

import os
import shutil

import keras

from keras_transformer.atomic_files import new_folder
from keras_transformer.models import presets
from keras_transformer.translation import marian
from keras_transformer.translation.marian import tokenizer, weights
from keras_transformer.translation.tokenizer import SubwordTokenizer


def load(source, load_weights=True, dtype=None):
    """`(model, tokenizer, model_card, metadata)` of the Marian model
    `source`; `load_weights=False`: its architecture, untrained."""
    return parts(marian.read(source), load_weights, dtype)


def parts(checkpoint, load_weights=True, dtype=None):
    """`load`'s parts of a `Checkpoint` (`marian.checkpoint`)."""
    transformer = model(checkpoint, load_weights, dtype)
    return (transformer, SubwordTokenizer(*[p for p in tokenizer.protos(checkpoint) if p is not None]),
            model_card(checkpoint, transformer.transformer_config), metadata(checkpoint))


def model(checkpoint, load_weights=True, dtype=None):
    """The `Transformer` of a `Checkpoint` (`marian.checkpoint`), with its
    weights unless `load_weights=False`."""
    config = {**weights.config(checkpoint), **({} if dtype is None else {"dtype": dtype})}
    transformer = keras.saving.deserialize_keras_object(
        {"module": "keras_transformer.models.transformer", "class_name": "Transformer", "config": config,
         "registered_name": "keras_transformer>Transformer"})
    if load_weights:
        weights.assign(transformer, checkpoint)
    return transformer


def import_preset(source, output, weights_dtype="float32"):
    """Writes the preset folder `output` of the Marian model `source`:
    config, weights (`weights_dtype`), tokenizers, metadata, model card and
    the source's license files. The folder must not exist or be empty; it
    appears whole or not at all. Returns `output`."""
    with new_folder(output, "--output") as staging:  # checked before the source is read
        checkpoint = marian.read(source)
        transformer, subword_tokenizer, card, record = parts(checkpoint)
        presets.save_model(transformer, staging, weights_dtype=weights_dtype, model_card=card, metadata=record)
        subword_tokenizer.save_to_preset(staging)
        for name in record["license"]["files"]:
            shutil.copyfile(os.path.join(checkpoint.info["folder"], name), os.path.join(staging, name))
    return output


def metadata(checkpoint):
    """The preset's record of where the model came from."""
    info = checkpoint.info
    return {"source": info["source"], "source_format": info["format"],
            **{k: info[k] for k in ("generation", "marian_version", "guided_alignment") if info.get(k) is not None},
            "license": info["license"]}


def model_card(checkpoint, config):
    """The preset's README.md: where the model comes from, its license, how
    it was converted; `config`: the model's `TransformerConfig`."""
    info = checkpoint.info
    license_ = info["license"]
    if license_["files"]:
        terms = f"{license_['name'] or 'see'} {', '.join(f'`{f}`' for f in license_['files'])} (copied here)"
    elif license_["name"]:
        terms = f"`{license_['name']}`, as the source's model card states"
    else:
        terms = "not stated by the source: check its terms before you redistribute this folder"
    decoding = ", ".join(f"{k} {v}" for k, v in info.get("generation", {}).items()) or "none given"
    alignment = ""
    if info.get("guided_alignment"):
        alignment = (f"\nThe source was trained with guided alignment (layer {info['guided_alignment']}); its "
                     "translations are unchanged by it, and `alignments=True` reads the cross-attention as for any "
                     "model here.\n")
    return f"""# {os.path.basename(info['source'].rstrip('/')) or info['source']}

Imported by `keras-transformer import` from **{info['source']}** ({info['format']} format).
License: {terms}.

The model computes the source's function (docs/zoo.md, "Marian and OPUS-MT
models"): {config.num_layers} encoder and {config.num_decoder_layers or config.num_layers} decoder layers, d_model
{config.d_model}, {config.num_heads} heads, feed-forward {config.d_ff} ({config.activation}), sinusoids in
{config.sinusoid_layout} layout, layer norm epsilon {config.layer_norm_epsilon:g}, a vocabulary of
{config.vocab_size} ids (`<pad> <unk> <s> </s>` first: the source's ids permuted),
{'one tokenizer' if checkpoint.spm[0] == checkpoint.spm[1] else 'a source and a target SentencePiece model'}
(`tokenizer.model`{'' if checkpoint.spm[0] == checkpoint.spm[1] else ', `target_tokenizer.model`'}).
{alignment}
The source's own decoding settings: {decoding}. `Translator.from_preset(folder,
length_penalty="huggingface", alpha=1.0)` decodes as Hugging Face's
`generate` does; the defaults here are the paper's (beam 4, GNMT penalty 0.6).
"""


def _load_model(source, load_weights, dtype):
    return model(marian.read(source), load_weights, dtype)


# `Transformer.from_preset` (`presets.load_model`) of a Marian model.
presets.register_converter(marian.is_source, _load_model)
