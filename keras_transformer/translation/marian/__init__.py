"""Marian and OPUS-MT models as this package's presets: the same function, in Keras.

`read(source)` reads a trained Marian model into a `Checkpoint` (its
config, vocabularies, weights and SentencePiece models) with NumPy (and
PyTorch for a `pytorch_model.bin` alone). A source is
- a Hugging Face `MarianMTModel` folder (`huggingface`);
- a Marian folder, as OPUS-MT releases it (`native`);
- `hf://org/name`, a Hugging Face Hub repository of the first kind,
  downloaded by `huggingface_hub`.

Then each module makes one part ours: `vocabulary` our ids, `weights` our
`TransformerConfig` and the model's weights, `tokenizer` our SentencePiece
models, and `preset` the model, the tokenizer and the preset folder of
`keras-transformer import`.

Refused, each with the field and value that say so: what the Transformer
here cannot compute exactly (Marian's RNN or average-attention decoders,
factored vocabularies, embedding layer norms, learned or no positions,
right-to-left models, tied layers, other activations, different encoder
and decoder heads, a decoder that does not start from PAD) and source
vocabularies with target-language tokens (`>>fra<<`), which the tokenizer
does not split off. A model trained with guided alignment translates as
any other (the alignment only trained one attention head).
"""

import json
import os
import re

from keras_transformer.models import presets
from keras_transformer.translation.marian import huggingface, native

HUB_PREFIX = "hf://"


def is_marian(preset):
    """Whether `preset` is a Marian model to convert, not a preset of ours
    (a shipped name wins over a folder of the same name)."""
    return preset not in presets.list_presets() and is_source(preset)


def is_source(path_or_name):
    """Whether `path_or_name` names a Marian model this module reads: an
    `hf://` name, or a folder of a Hugging Face Marian model or of Marian's own."""
    if not isinstance(path_or_name, (str, os.PathLike)):
        return False
    path = os.fspath(path_or_name)
    return path.startswith(HUB_PREFIX) or _folder_format(path) is not None


def _folder_format(folder):
    """`"huggingface"`, `"marian"` or None: what kind of folder `folder` is."""
    if not os.path.isdir(folder):
        return None
    config = os.path.join(folder, "config.json")
    if os.path.isfile(config):
        try:
            with open(config, encoding="utf-8") as f:
                return "huggingface" if json.load(f).get("model_type") == "marian" else None
        except (ValueError, AttributeError, OSError):
            return None
    return "marian" if os.path.isfile(os.path.join(folder, "decoder.yml")) else None


HUB_FILES = ["config.json", "generation_config.json", "*.safetensors", "*.safetensors.index.json", "source.spm",
             "target.spm", "vocab.json", "target_vocab.json", "tokenizer_config.json", "README.md", "LICENSE*",
             "COPYING*", "NOTICE*"]


def download(name):
    """The local folder of `hf://org/name`, downloaded by `huggingface_hub`
    (its cache, or the Hub when a network exists)."""
    repo = name[len(HUB_PREFIX):].strip("/")
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        raise ValueError(f"A Hub model is named hf://ORGANIZATION/NAME. Received: {name!r}")
    try:
        import huggingface_hub
    except ImportError:
        raise ImportError(f"Downloading {name} needs huggingface_hub: pip install \"keras-transformer[marian]\" (or "
                          "download the folder elsewhere and give its path)") from None
    try:
        folder = huggingface_hub.snapshot_download(repo, allow_patterns=HUB_FILES)
        if not any(f.endswith(".safetensors") or f.endswith(".safetensors.index.json") for f in os.listdir(folder)):
            folder = huggingface_hub.snapshot_download(repo, allow_patterns=HUB_FILES + ["pytorch_model.bin"])
    except Exception as error:  # no network, no such repository, a gated one: the Hub's own errors
        raise OSError(f"Cannot download {name} from the Hugging Face Hub ({type(error).__name__}: {error}). "
                      "Without a network, download its folder on another machine and give its path. "
                      f"Received: {name!r}") from None
    return folder


def read(source, weights=True):
    """The `Checkpoint` of `source` (the module docstring); without its
    `weights` (tables and layers None), for its tokenizer alone."""
    path = os.fspath(source)
    folder = download(path) if path.startswith(HUB_PREFIX) else path
    kind = _folder_format(folder)
    if kind is None:
        raise FileNotFoundError(
            f"No Marian model at {path!r}: expected a Hugging Face Marian folder (config.json with \"model_type\": "
            "\"marian\"), a Marian folder (decoder.yml) or hf://ORGANIZATION/NAME. Received: source={path!r}")
    checkpoint = (huggingface if kind == "huggingface" else native).read(folder, weights)
    checkpoint.info.update(source=path, folder=os.path.abspath(folder))
    return checkpoint
