"""Presets: a trained model's config, weights, tokenizer and model card in one directory.

The layout follows keras-hub's:

    config.json          the model's Keras config (`keras.saving.serialize_keras_object`)
    model.weights.h5     its weights (`model.save_weights`), float32 or float16
    tokenizer.model      the SentencePiece vocabulary (`SubwordTokenizer.save`)
    metadata.json        versions, parameter count, the weights' dtype
    README.md            the model card (data, license, recipe, scores)

A preset is named by a shipped name (`list_presets()`, the folders of
`keras_transformer/zoo/`) or by the path of such a directory. The
architecture-only configs `"tiny"`, `"small"`, `"base"` and `"big"` are not
presets: they carry no weights, and `Transformer.from_architecture` builds them.

Example (tests/test_presets.py runs it):

>>> from keras_transformer import SubwordTokenizer, Transformer, Translator
>>> model = Transformer.from_preset("tatoeba_en_fr")       # trained, offline
>>> model.save_to_preset("my_preset")                      # its config and weights
'my_preset'
>>> SubwordTokenizer.from_preset("tatoeba_en_fr").save_to_preset("my_preset")  # and its tokenizer
'my_preset/tokenizer.model'
>>> Translator.from_preset("my_preset").translate(["I love you."])
["Je t'aime."]
"""

import json
import os
import shutil
import tempfile

import keras

from keras_transformer.compat.layers import sublayers
from keras_transformer.models.architectures import ARCHITECTURES
from keras_transformer.version import __version__

ZOO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "zoo")
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
TOKENIZER_FILE = "tokenizer.model"
METADATA_FILE = "metadata.json"
MODEL_CARD_FILE = "README.md"
WEIGHTS_DTYPES = ("float32", "float16")


def list_presets():
    """The names of the presets shipped with the package."""
    if not os.path.isdir(ZOO):
        return []
    return sorted(n for n in os.listdir(ZOO) if os.path.isfile(os.path.join(ZOO, n, CONFIG_FILE)))


# Checkpoints of other formats that `preset` may name, converted as they
# load: `(is_source, load_model)` pairs that their readers register (an
# OPUS-MT or Marian model: `keras_transformer.translation.marian.preset`).
# They sit above this module, which imports none of them.
_CONVERTERS = []


def register_converter(is_source, load_model):
    """Lets `load_model` read each `preset` for which `is_source(preset)`
    holds, with `load_model(preset, load_weights, dtype)`."""
    _CONVERTERS.append((is_source, load_model))


def converter_of(preset):
    """The registered `load_model` of `preset`, or None for a preset of
    ours (a shipped name wins over a folder of the same name)."""
    if preset in list_presets():
        return None
    return next((load for is_source, load in _CONVERTERS if is_source(preset)), None)


def preset_directory(preset):
    """The directory of `preset`: a shipped name or a preset directory's path.

    Raises:
        ValueError: `preset` is not a string, or is an architecture name.
        FileNotFoundError: no shipped preset of that name and no preset
            directory at that path (the message lists the shipped names).
    """
    if not isinstance(preset, (str, os.PathLike)):
        raise ValueError(f"Argument `preset` must be a preset name or a directory. Received: preset={preset!r}")
    preset = os.fspath(preset)
    if preset in list_presets():
        return os.path.join(ZOO, preset)
    if preset in ARCHITECTURES:
        raise ValueError(
            f"{preset!r} is an architecture without weights, not a preset. Use "
            f"`Transformer.from_architecture({preset!r}, vocab_size=...)` for a new untrained model, "
            f"or one of the trained presets {list_presets()}. Received: preset={preset!r}"
        )
    if os.path.isfile(os.path.join(preset, CONFIG_FILE)):
        return preset
    what = "no config.json in that directory" if os.path.isdir(preset) else "no such directory"
    raise FileNotFoundError(
        f"No preset {preset!r} ({what}). Expected a shipped preset, one of {list_presets()}, "
        f"or a directory written by `save_to_preset`. Received: preset={preset!r}"
    )


def _read_json(directory, name):
    path = os.path.join(directory, name)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise FileNotFoundError(f"Preset {directory!r} has no {name}. Received: preset={directory!r}") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"Preset file {path!r} is not valid JSON: {error}") from None


def load_metadata(preset):
    """The preset's `metadata.json` as a dict."""
    return _read_json(preset_directory(preset), METADATA_FILE)


def load_model(preset, load_weights=True, dtype=None):
    """The preset's model, with its weights unless `load_weights=False`.

    Args:
        preset: a shipped preset name or a preset directory; or a Marian
            model (a Hugging Face Marian folder, a Marian folder or
            `hf://org/name`), converted as it loads
            (`keras_transformer.translation.marian`).
        load_weights: bool. False gives the architecture with fresh weights.
        dtype: optional dtype policy for the model (e.g. "mixed_bfloat16"
            for fine-tuning on a GPU); weights are cast on loading.
    """
    convert = converter_of(preset)
    if convert is not None:
        return convert(preset, load_weights, dtype)
    directory = preset_directory(preset)
    config = _read_json(directory, CONFIG_FILE)
    if dtype is not None:
        config = {**config, "config": {**config["config"], "dtype": dtype}}
    model = keras.saving.deserialize_keras_object(config)
    if load_weights:
        path = os.path.join(directory, WEIGHTS_FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"Preset {directory!r} has no {WEIGHTS_FILE}. Received: preset={preset!r}")
        # float16 files load into float32 variables: Keras casts on assign.
        model.load_weights(path)
    return model


def _store_float16(path):
    """Rewrites every float32 array of a `.weights.h5` file as float16."""
    import h5py
    import numpy as np

    with h5py.File(path, "r+") as f:
        arrays = []
        f.visititems(lambda name, item: arrays.append(name) if isinstance(item, h5py.Dataset) else None)
        for name in arrays:
            if f[name].dtype == np.float32:
                values = f[name][()]
                del f[name]
                f.create_dataset(name, data=values.astype(np.float16))
    # h5py leaves the freed space in the file: copy it to compact it.
    compact = path + ".compact"
    with h5py.File(path, "r") as source, h5py.File(compact, "w") as target:
        for key in source:
            source.copy(key, target)
        for key, value in source.attrs.items():
            target.attrs[key] = value
    os.replace(compact, path)


def save_model(model, directory, weights_dtype="float32", model_card=None, metadata=None):
    """Writes `config.json`, `model.weights.h5` and `metadata.json` into `directory`.

    Args:
        model: a `Transformer`.
        directory: the preset directory; created if needed. Files of the
            same names are replaced, and each appears whole or not at all.
        weights_dtype: `"float32"` or `"float16"` (half the bytes; weights
            come back as float32 on loading). A quantized model keeps its
            own dtypes.
        model_card: optional Markdown text, written as `README.md`.
        metadata: optional JSON-able dict added to `metadata.json` (e.g.
            the training run's data).
    """
    if weights_dtype not in WEIGHTS_DTYPES:
        raise ValueError(f"Argument `weights_dtype` must be one of {WEIGHTS_DTYPES}. Received: weights_dtype={weights_dtype!r}")
    quantized = any(layer.quantization_mode for layer in sublayers(model))
    if quantized and weights_dtype != "float32":
        raise ValueError(
            "A quantized model is saved with its own dtypes. Pass weights_dtype='float32'. "
            f"Received: weights_dtype={weights_dtype!r}"
        )
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    metadata = {
        "keras_version": keras.__version__,
        "keras_transformer_version": __version__,
        "parameter_count": int(model.count_params()),
        "weights_dtype": weights_dtype,
        **(metadata or {}),
    }
    staging = tempfile.mkdtemp(prefix=".preset-", dir=directory)
    try:
        model.save_weights(os.path.join(staging, WEIGHTS_FILE))
        if weights_dtype == "float16":
            _store_float16(os.path.join(staging, WEIGHTS_FILE))
        with open(os.path.join(staging, CONFIG_FILE), "w", encoding="utf-8") as f:
            json.dump(keras.saving.serialize_keras_object(model), f, indent=2)
        with open(os.path.join(staging, METADATA_FILE), "w", encoding="utf-8") as f:
            json.dump(metadata, f, indent=2)
        if model_card is not None:
            with open(os.path.join(staging, MODEL_CARD_FILE), "w", encoding="utf-8") as f:
                f.write(model_card)
        for name in os.listdir(staging):
            os.replace(os.path.join(staging, name), os.path.join(directory, name))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return directory
