"""A model by the name or path a user gives, whatever its kind: one loader.

`Translator.load`, the command line and the server read a MODEL here. It is
one of:
- a **preset**: a shipped name (`list_presets()`) or a folder holding
  `config.json`; a shipped name wins over a folder of the same name in the
  working directory, as in `from_preset`;
- a **SavedModel** folder (`saved_models/<name>`, whose latest numbered
  version is read, or one version folder);
- a **training run** folder (`run.json`) with `weights` (a `.weights.h5`
  file, e.g. from `average-checkpoints`) and its own `tokenizer.model`;
- a **`.keras` file**, with a `tokenizer` (a SentencePiece `.model` file);
- a **Marian model**: a Hugging Face Marian folder, a Marian folder or
  `hf://org/name`, converted as it loads (`translation.marian`; `keras-transformer
  import` writes it as a preset once).

Errors are exceptions (`ValueError`, `FileNotFoundError`) that name the
arguments of `load_model` and `Translator.load` (`tokenizer`, `weights`,
`quantize`); the command line names its flags in their place
(`keras_transformer.cli.main`).

Example:

>>> model_kind("tatoeba_en_fr"), model_kind("saved_models/tatoeba_en_fr")
('preset', 'SavedModel')
>>> model, tokenizer = load_model("runs/small", weights="runs/small/average.weights.h5")
"""

import json
import os

import keras

from keras_transformer.models import presets
from keras_transformer.models.config import ARCHITECTURES
from keras_transformer.models.transformer import Transformer
from keras_transformer.translation import marian
from keras_transformer.translation.marian import preset as marian_preset
from keras_transformer.translation.tokenizer import SubwordTokenizer

# A training run's manifest, which `train` writes first in its folder
# (`keras_transformer.training.manifest`).
MANIFEST = "run.json"

PRESET, SAVED_MODEL, RUN, KERAS_FILE, MARIAN = "preset", "SavedModel", "training run", ".keras file", "Marian model"


def preset_path(name):
    """The directory of the preset `name` names (a shipped preset name, or a
    directory holding `config.json`), else None. An architecture name
    (`tiny`, ...) is a `ValueError` saying it has no weights.

    >>> os.path.basename(preset_path("tatoeba_en_fr"))
    'tatoeba_en_fr'
    >>> preset_path("saved_models/tatoeba_en_fr") is None
    True
    """

    if name in presets.list_presets() or (os.path.isfile(os.path.join(name, presets.CONFIG_FILE))
                                          and not marian.is_marian(name)):
        return presets.preset_directory(name)
    if name in ARCHITECTURES and not os.path.exists(name):
        presets.preset_directory(name)  # raises: an architecture has no weights
    return None


def model_kind(path_or_name, weights=None):
    """`PRESET`, `SAVED_MODEL`, `RUN`, `KERAS_FILE` or `MARIAN`: what
    `path_or_name` names (any other folder is taken for a SavedModel folder,
    whose loading says what it lacks); raises `no_such_model` if it names
    nothing. A finished run's folder is also a preset: with `weights`, it is
    a run."""
    if weights is not None and os.path.isdir(path_or_name) and read_manifest(path_or_name) is not None:
        return RUN
    if marian.is_marian(path_or_name):
        return MARIAN
    if preset_path(path_or_name) is not None:
        return PRESET
    if path_or_name.endswith(".keras"):
        return KERAS_FILE
    if os.path.isdir(path_or_name):
        return RUN if read_manifest(path_or_name) is not None else SAVED_MODEL
    raise no_such_model(path_or_name)


def no_such_model(model):
    """The error for a MODEL that is none of the kinds above."""
    return FileNotFoundError(
        f"No model at {model!r}: expected a shipped preset (one of {presets.list_presets()}), a preset "
        f"directory (config.json), a SavedModel folder (saved_models/<name>), a .keras file or a training "
        f"run folder. Received: model={model!r}"
    )


def load_model(path_or_name, tokenizer=None, weights=None, quantize=None):
    """`(model, tokenizer)` of a preset, a training run folder or a `.keras`
    file (not a SavedModel: `Translator.from_saved_model`), its weights
    quantized with `quantize` (`"int8"`) if given. `tokenizer` is a
    `SubwordTokenizer` or its `.model` file's path."""
    if quantize not in (None, "int8"):
        raise ValueError(f"Argument `quantize` must be None or 'int8'. Received: quantize={quantize!r}")
    kind = model_kind(path_or_name, weights)
    if kind == SAVED_MODEL:
        raise ValueError(f"{path_or_name!r} is a SavedModel folder: its graph is loaded by "
                         "`Translator.from_saved_model` or the server, not as a Keras model.")
    if kind == MARIAN:
        no_tokenizer_with_preset(path_or_name, tokenizer)
        model, tokenizer = marian_preset.load(path_or_name)[:2]
    elif kind == PRESET:
        model, tokenizer = _load_preset(path_or_name, tokenizer, weights)
    else:
        if kind != RUN and tokenizer is None:
            raise ValueError("Argument `tokenizer` is required with a .keras file (its SentencePiece .model "
                             "file; a preset and a run folder carry their own). "
                             f"Received: model={path_or_name!r}, tokenizer=None")
        model = load_keras_model(path_or_name, weights)
        # A run's own tokenizer (an imported model's two), or the one given.
        tokenizer = SubwordTokenizer.load(path_or_name) if tokenizer is None else load_tokenizer(tokenizer)
    if quantize:
        model.quantize(quantize)
    return model, tokenizer


def _load_preset(name, tokenizer, weights):
    no_tokenizer_with_preset(name, tokenizer)
    if weights is not None:
        raise ValueError(f"Argument `weights` is for a training run folder; the preset {name!r} has its own "
                         f"model.weights.h5. Received: weights={weights!r}")
    preset = preset_path(name)
    return presets.load_model(preset), SubwordTokenizer.from_preset(preset)


def load_keras_model(path, weights=None):
    """A `.keras` file, or a training run folder (`run.json`) with `weights`
    (e.g. the output of `average-checkpoints`)."""
    if os.path.isdir(path):
        manifest = read_manifest(path)
        if manifest is None:
            raise FileNotFoundError(f"{path!r} is a folder without a training run's run.json. Received: path={path!r}")
        if not weights:
            raise ValueError(
                f"{path!r} is a training run without its final model (config.json, written when it ends): "
                "give `weights`, a .weights.h5 file (one of its checkpoints, or their average from "
                f"`average-checkpoints`). Received: model={path!r}, weights={weights!r}"
            )
        model = Transformer(**manifest.get("identity", manifest)["model"])
        model.build(((None, None), (None, None)))
        model.load_weights(weights)
        return model
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No model file at {path!r} (expected a .keras file or a run folder). "
                                f"Received: model={path!r}")
    return keras.saving.load_model(path, compile=False)


def load_tokenizer(path):
    """The `SubwordTokenizer` of the `.model` file `path` (the argument `tokenizer`)."""

    if isinstance(path, SubwordTokenizer):
        return path
    if not isinstance(path, (str, os.PathLike)) or not os.path.isfile(path):
        raise FileNotFoundError(f"Argument `tokenizer` must name a SentencePiece .model file or be a "
                                f"SubwordTokenizer. Received: tokenizer={path!r}")
    return SubwordTokenizer.load(path)


def no_tokenizer_with_preset(model, tokenizer):
    """A preset carries its own tokenizer: `tokenizer` beside one is an error."""
    if tokenizer is not None:
        raise ValueError(
            f"Argument `tokenizer` is for a .keras model or a run folder; the preset {model!r} has its own "
            f"tokenizer.model. Received: tokenizer={tokenizer!r}"
        )


def no_options_with_saved_model(model, **given):
    """A SavedModel decodes as it was exported, with its own tokenizer:
    `tokenizer`, `weights`, `quantize` or a decoding option beside one is
    an error."""
    tokenizer = given.pop("tokenizer", None)
    if tokenizer is not None:
        raise ValueError(f"Argument `tokenizer` is for a .keras model or a run folder; the SavedModel {model!r} "
                         f"has its own tokenizer (assets/tokenizer.model). Received: tokenizer={tokenizer!r}")
    given = {name: value for name, value in given.items() if value is not None}
    if given:
        names = ", ".join(f"`{name}`" for name in given)
        values = ", ".join(f"{name}={value!r}" for name, value in given.items())
        raise ValueError(
            f"{names} {'applies' if len(given) == 1 else 'apply'} to a preset or a .keras model; a SavedModel "
            f"translates as it was exported. Received: model={model!r}, {values}"
        )


def read_manifest(output_dir):
    """A training run's manifest (`run.json`) in `output_dir`, or `None`; `ValueError` naming the file if it is not one."""
    path = os.path.join(output_dir, MANIFEST)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        try:
            manifest = json.load(f)
        except ValueError as error:
            raise ValueError(f"{path} is not a run manifest: {error}") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("identity", {}), dict):
        raise ValueError(f"{path} is not a run manifest: expected a JSON object with an `identity` object.")
    return manifest
